"""A resumed run that stops again before getting back to a stopped component keeps its points.

Found by the property test in ``test_resume_properties.py``: a Parallel whose resumed branch (a
Sequential) was cancelled at its transition, before reaching the leaf that had stopped, lost the
leaf's saved conversation, so the next resume called the leaf's model from the start again.
"""

from __future__ import annotations

from agentkit._points import ResumePoint, ResumeState
from tests.test_resume_properties import outcome, run_to_completion


def _point(*address: str) -> ResumePoint:
    return ResumePoint("id-" + "/".join(address), tuple(address), state=address[-1])


def test_points_below_a_component_that_stopped_again_are_kept_until_reached() -> None:
    par, seq, leaf = ("agent:P",), ("agent:P", "agent:S"), ("agent:P", "agent:S", "agent:L")
    tool = (*leaf, "tool:t:1")
    other = ("agent:P", "agent:O")
    state = ResumeState([_point(*par), _point(*seq), _point(*leaf), _point(*tool), _point(*other)], {})
    for address in (par, seq, other):
        state.at(address)
    # P and S stopped again; O was reached and completed; L (and its tool) never reached.
    kept = state.unreached([par, seq])
    assert [point.address for point in kept] == [leaf, tool]
    # Once L is reached, its old points are its own business.
    state.at(leaf)
    assert state.unreached([par, seq]) == []


def test_points_under_a_component_that_completed_are_dropped() -> None:
    par, seq, leaf = ("agent:P",), ("agent:P", "agent:S"), ("agent:P", "agent:S", "agent:L")
    state = ResumeState([_point(*par), _point(*seq), _point(*leaf)], {})
    state.at(par)
    state.at(seq)
    assert state.unreached([]) == []  # nothing stopped again: the run completed


def test_a_branch_cancelled_before_its_resumed_leaf_does_not_run_the_leaf_model_again() -> None:
    tree = ("par", [("seq", [("leaf", ["cancel"])]), ("leaf", []), ("leaf", ["cancel"])])
    _, (baseline,) = run_to_completion(tree, mishaps=False)
    world, segments = run_to_completion(tree, mishaps=True)
    everything = [event for segment in segments for event in segment]
    assert outcome(everything) == outcome(baseline)
    assert len(segments) == 3  # two cancels, then the run completes
    delivered: set[str] = set()
    for what, key in world.log:  # a cancelled call runs again; a delivered one never does
        assert what != "exec" or key not in delivered, f"{key} ran again after its result"
        if what == "result":
            delivered.add(key)
    assert delivered == {"L1-0", "L4-0"}
