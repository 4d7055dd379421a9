"""Property: how the flow wrapper names, records and acts on events by run path."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentkit import (
    AgentEvent,
    Role,
    RunStep,
    assistant_message,
    event_from_message,
    new_exit_action,
)
from agentkit._runctx import EventLog
from agentkit.agents._flow_sink import FlowSink

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

    def send(self, item: AgentEvent) -> bool:
        self.events.append(item)
        return True


@given(st.lists(st.tuples(PATHS, st.booleans()), max_size=12))
def test_only_own_events_are_named_recorded_and_gate_actions(spec: list[tuple[tuple[RunStep, ...], bool]]) -> None:
    downstream = Collect()
    log = EventLog()
    sink = FlowSink(downstream, "me", OWN, log)
    sent = []
    for index, (path, with_action) in enumerate(spec):
        event = event_from_message(assistant_message(str(index)), None, Role.ASSISTANT)
        event.run_path = list(path)
        if path:
            event.agent_name = "someone"
        if with_action:
            event.action = new_exit_action()
        sent.append((path, event))
        sink.send(event)

    # every event is forwarded, in order, unchanged except for naming
    assert downstream.events == [event for _, event in sent]
    own = [event for path, event in sent if path in ((), OWN)]
    # unnamed events got this agent's name and path; named ones kept theirs
    for path, event in sent:
        if path == ():
            assert event.agent_name == "me" and tuple(event.run_path) == OWN
        else:
            assert tuple(event.run_path) == path
    # exactly the own events were recorded, in order
    assert [record.message().content for record in log.own()] == [e.get_message().content for e in own]  # type: ignore[union-attr]
    # the action that counts is the one on the last own event (None if it has none)
    expected = own[-1].action if own else None
    assert sink.last_action is expected
