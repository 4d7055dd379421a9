"""Property: how the flow wrapper names, records and acts on events by run path."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from agentkit import (
    AgentEvent,
    AgentInput,
    Role,
    RunStep,
    assistant_message,
    event_from_message,
    new_exit_action,
)
from agentkit._agent import open_run
from agentkit._runctx import EventLog, RunFrame
from agentkit._scope import RunScope

OWN = (RunStep("root"), RunStep("me"))
PATHS = st.sampled_from(
    [
        (),  # the agent's own event, not yet named
        OWN,  # named already, with exactly this path (e.g. by an inner wrapper of the same agent)
        (RunStep("root"), RunStep("me"), RunStep("inner")),  # forwarded from deeper
        (RunStep("root"),),  # a shorter path
        (RunStep("other"), RunStep("me")),  # same length, different path
    ]
)


class Collect:
    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def send(self, item: AgentEvent) -> None:
        self.events.append(item)


@given(st.lists(st.tuples(PATHS, st.booleans()), max_size=12))
def test_only_own_events_are_named_recorded_and_gate_actions(spec: list[tuple[tuple[RunStep, ...], bool]]) -> None:
    downstream = Collect()
    log = EventLog()
    frame = RunFrame(scope=RunScope(), log=log, run_path=OWN)
    run = open_run(frame, downstream, AgentInput())
    sent = []
    for index, (path, with_action) in enumerate(spec):
        event = attrs.evolve(
            event_from_message(assistant_message(str(index)), None, Role.ASSISTANT),
            run_path=list(path),
            agent_name="someone" if path else "",
            action=new_exit_action() if with_action else None,
        )
        sent.append((path, event))
        run.emit(event)

    # every event is passed on, in order: a named one as it is, an unnamed one as a named copy
    assert len(downstream.events) == len(sent)
    for (path, event), out in zip(sent, downstream.events, strict=True):
        if path == ():
            assert out is not event and event.run_path == ()  # the original is not changed
            assert out.agent_name == "me" and tuple(out.run_path) == OWN
            assert (out.output, out.action) == (event.output, event.action)
        else:
            assert out is event and tuple(out.run_path) == path
    own = [out for (path, _), out in zip(sent, downstream.events, strict=True) if path in ((), OWN)]
    # exactly the own events were recorded, in order
    assert [record.message().content for record in log.own()] == [e.get_message().content for e in own]  # type: ignore[union-attr]
    # the action that counts is the one on the last own event (None if it has none)
    expected = own[-1].action if own else None
    assert run._turn.action is expected
