"""The crashed runs behind the durable-steps corpus in ``tests/fixtures/durable/``.

A durable run leaves a base checkpoint and signed step records; a crash in the middle of a call
of a tool that is not idempotent makes the resumed run stop with an
:class:`~agentkit.UnfinishedToolCall`. Both formats are promises: what one version wrote, every
later version must resume to the same result. ``tests/fixtures/durable/make_corpus.py NAME``
crashes each scenario below (in process, at an exact point: see ``tests.durable_support``),
stores what the store held and what resuming it gives; ``test_durable_corpus.py`` resumes the
stored bytes with today's code and compares. Never rewrite a stored folder.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import attrs

from agentkit import Approve, Reject, Runner, UnfinishedToolCall, with_checkpoint_id
from agentkit.checkpoint import InMemoryCheckPointStore, PickleSerializer
from tests.durable_support import (
    Crash,
    CrashAt,
    Effects,
    Tools,
    UntilCrash,
    WatchedStore,
    answers,
    build,
    scripted,
)

KEY = b"agentkit durable corpus key, not a secret"
RUN = "corpus:durable"


@attrs.frozen
class Scenario:
    """An agent kind crashed at the ``number``-th ``what`` (``start``/``end`` of a tool call,
    ``save``/``saved`` of a step record)."""

    name: str
    kind: str
    what: str
    number: int


SCENARIOS = (
    Scenario("react_after_a_step", "react", "saved", 3),
    Scenario("react_in_a_payment", "react", "start", 3),
    Scenario("sequential_in_the_second_agent", "sequential", "end", 3),
    Scenario("parallel_branches", "parallel", "saved", 4),
    Scenario("agent_tool_inside", "agenttool", "start", 2),
    Scenario("supervisor_in_a_worker", "supervisor", "start", 2),
    Scenario("plan_execute_in_a_payment", "planexecute", "start", 2),
)


def runner(kind: str, store: Any, effects: Effects, crash: CrashAt | None = None) -> Runner:
    def hook(moment: str, tool_name: str, call_id: str) -> None:
        if crash is not None:
            crash.tick(moment)

    tools = Tools(UntilCrash(effects.path, crash) if crash is not None else effects, hook)
    return Runner(build(kind, scripted(answers(kind)), tools), checkpoint_store=store,
                  serializer=PickleSerializer(KEY))


def crash(scenario: Scenario, tmp: Path) -> InMemoryCheckPointStore:
    """What the store holds when ``scenario``'s run dies."""
    store = WatchedStore()
    store.crash = at = CrashAt(scenario.what, scenario.number, store, checkpoint_id=RUN)
    effects = Effects(tmp / f"crash-{scenario.name}")
    try:
        runner(scenario.kind, store, effects, at).invoke("go", with_checkpoint_id(RUN))
    except Crash:
        pass
    if at.left is None:
        raise AssertionError(f"{scenario.name}: the run did not reach its crash point")
    return at.left


def dump(store: InMemoryCheckPointStore) -> dict[str, Any]:
    """The store's bytes of the run, as JSON."""
    data = store.get(RUN)
    assert data is not None
    return {
        "base": base64.b64encode(data).decode(),
        "steps": [base64.b64encode(record).decode() for record in store.read_steps(RUN)],
    }


def load(saved: dict[str, Any]) -> InMemoryCheckPointStore:
    """A store holding the bytes :func:`dump` gave."""
    store = InMemoryCheckPointStore()
    store.set(RUN, base64.b64decode(saved["base"]))
    for record in saved["steps"]:
        store.append_step(RUN, base64.b64decode(record))
    return store


DECISIONS = (True, Reject("not again"), Approve(), False)
"""The answers to the unfinished calls the resumes ask about, in turn."""


def resume(kind: str, store: InMemoryCheckPointStore, tmp: Path) -> dict[str, Any]:
    """Resume the run in ``store`` until it completes; what it did and said.

    The first :class:`~agentkit.UnfinishedToolCall` stop is also stored (``asked_state``):
    the persisted form of that interrupt.
    """
    effects = Effects(tmp / f"resume-{kind}-{id(store)}")
    asked: list[list[str]] = []
    asked_state: dict[str, Any] | None = None
    targets: dict[str, Any] | None = None
    for _ in range(10):
        result = runner(kind, store, effects).resume(RUN, targets=targets).result()
        if result.interrupt is None:
            ran = sorted({e.call_id for e in effects.read() if e.what == "end"})
            return {"answer": result.text, "asked": asked, "ran": ran,
                    "asked_state": asked_state}
        if asked_state is None:
            asked_state = dump(store)
        targets = {}
        for context in sorted(result.interrupt.contexts, key=lambda c: str(c.info)):
            info = context.info
            assert isinstance(info, UnfinishedToolCall), info
            asked.append([info.tool_name, info.call_id])
            targets[context.id] = DECISIONS[(len(asked) - 1) % len(DECISIONS)]
    raise AssertionError(f"{kind}: the run did not complete in 10 resumes")
