"""Composite interrupts: a tool or an agent that pauses once for the children that interrupted.

Named after Eino's behaviour (``tool.CompositeInterrupt``, ``adk.CompositeInterrupt``): the
children's interrupts are the root causes, nested under the composite's own context, with
the addresses the built-ins produce, and each is resumed by its own id.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentkit import (
    AgentEvent,
    AgentRun,
    AgentTool,
    BaseAgent,
    ChatModelAgent,
    InterruptContext,
    Role,
    Runner,
    assistant_message,
    event_from_message,
    get_interrupt_state,
    interrupt,
    interrupt_event,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, run_events
from agentkit.tools import CompositeInterrupt


@tool
def approve_flight(city: str) -> str:
    """Book a flight once approved."""
    return f"flight to {city}" if interrupt(f"fly to {city}?") else "no flight"


@tool
def approve_hotel(city: str) -> str:
    """Book a hotel once approved."""
    return f"hotel in {city}" if interrupt(f"sleep in {city}?") else "no hotel"


@tool
def book_trip(city: str) -> str:
    """Book a trip: a flight and a hotel, each approved on its own."""
    done: dict[str, str] = get_interrupt_state() or {}
    group = CompositeInterrupt("the trip needs approvals")
    for key, child in (("flight", approve_flight), ("hotel", approve_hotel)):
        if key not in done:
            result = group.call(child, {"city": city})
            if result is not None:
                assert isinstance(result, str)
                done[key] = result
    group.raise_if_interrupted(state=done)
    return f"{done['flight']}; {done['hotel']}"


def trip_runner(model: ScriptedChatModel, store: InMemoryCheckPointStore) -> Runner:
    agent = ChatModelAgent("Planner", "plans trips", model, tools=[book_trip])
    return Runner(agent, checkpoint_store=store)


def chain(context: InterruptContext) -> list[tuple[str, Any, bool]]:
    out = []
    node: InterruptContext | None = context
    while node is not None:
        out.append((";".join(node.address), node.info, node.is_root_cause))
        node = node.parent
    return out


def contexts_of(event: AgentEvent) -> list[InterruptContext]:
    assert event.action is not None and event.action.interrupted is not None
    return list(event.action.interrupted.contexts)


def test_tool_composite_interrupt_nests_each_child_under_the_tool() -> None:
    model = ScriptedChatModel([calls_message(call("book_trip", {"city": "Oslo"}, id="t1")), "ok"])
    last = run_events(trip_runner(model, InMemoryCheckPointStore()).query(
        "trip", with_checkpoint_id("trip")
    ))[-1]
    flight, hotel = contexts_of(last)
    assert chain(flight) == [
        ("agent:Planner;tool:book_trip:t1;tool:approve_flight:approve_flight", "fly to Oslo?", True),
        ("agent:Planner;tool:book_trip:t1", "the trip needs approvals", False),
        ("agent:Planner", None, False),
    ]
    assert chain(hotel)[0] == (
        "agent:Planner;tool:book_trip:t1;tool:approve_hotel:approve_hotel", "sleep in Oslo?", True
    )
    assert hotel.parent is not None and hotel.parent.id == flight.parent.id  # type: ignore[union-attr]


def test_tool_composite_interrupt_is_resumable_per_child() -> None:
    store = InMemoryCheckPointStore()
    model = ScriptedChatModel(
        [calls_message(call("book_trip", {"city": "Oslo"}, id="t1")), "booked"]
    )
    runner = trip_runner(model, store)
    flight, hotel = contexts_of(run_events(runner.query("trip", with_checkpoint_id("trip")))[-1])
    # Resume the flight only: the hotel asks again, under a new id; the flight's result is
    # kept in the tool's state.
    again = run_events(runner.resume("trip", targets={flight.id: True}))[-1]
    (hotel_again,) = contexts_of(again)
    assert hotel_again.id != hotel.id
    assert hotel_again.address == hotel.address
    assert hotel_again.parent is not None and hotel_again.parent.info == "the trip needs approvals"
    events = run_events(runner.resume("trip", targets={hotel_again.id: True}))
    tool_result = [e for e in events if e.output and e.output.message_output
                   and e.output.message_output.role is Role.TOOL]
    assert tool_result[0].get_message().content == "flight to Oslo; hotel in Oslo"  # type: ignore[union-attr]
    assert events[-1].get_message().content == "booked"  # type: ignore[union-attr]


def test_tool_composite_interrupt_resumes_both_children_at_once() -> None:
    store = InMemoryCheckPointStore()
    model = ScriptedChatModel([calls_message(call("book_trip", {"city": "Rome"}, id="t1")), "ok"])
    runner = trip_runner(model, store)
    flight, hotel = contexts_of(run_events(runner.query("trip", with_checkpoint_id("r")))[-1])
    events = run_events(runner.resume("r", targets={flight.id: True, hotel.id: False}))
    assert model.calls[-1].messages[-1].content == "flight to Rome; no hotel"
    assert events[-1].get_message().content == "ok"  # type: ignore[union-attr]


def test_tool_composite_interrupt_with_an_agent_tool_child() -> None:
    # An agent as a child: its interrupt nests as the built-in AgentTool's do.
    inner = ScriptedChatModel(
        [calls_message(call("approve_flight", {"city": "Lima"}, id="i1")), "flown"]
    )
    pilot = AgentTool(ChatModelAgent("Pilot", "flies", inner, tools=[approve_flight]))

    @tool
    def mission(city: str) -> str:
        """Send the pilot."""
        group = CompositeInterrupt("mission on hold")
        result = group.call(pilot, {"request": f"fly to {city}"}, call_id="p1")
        group.raise_if_interrupted()
        return str(result)

    model = ScriptedChatModel([calls_message(call("mission", {"city": "Lima"}, id="m1")), "done"])
    runner = Runner(ChatModelAgent("Boss", "d", model, tools=[mission]),
                    checkpoint_store=InMemoryCheckPointStore())
    (context,) = contexts_of(run_events(runner.query("go", with_checkpoint_id("m")))[-1])
    assert [c[0] for c in chain(context)] == [
        "agent:Boss;tool:mission:m1;tool:Pilot:p1;agent:Pilot;tool:approve_flight:i1",
        "agent:Boss;tool:mission:m1;tool:Pilot:p1;agent:Pilot",
        "agent:Boss;tool:mission:m1;tool:Pilot:p1",
        "agent:Boss;tool:mission:m1",
        "agent:Boss",
    ]
    events = run_events(runner.resume("m", targets={context.id: True}))
    assert model.calls[-1].messages[-1].content == "flown"
    assert events[-1].get_message().content == "done"  # type: ignore[union-attr]


def test_tool_composite_interrupt_without_interrupted_children_does_not_pause() -> None:
    @tool
    def hello() -> str:
        """Say hello."""
        return "hello"

    @tool
    def greet() -> str:
        """Greet twice."""
        group = CompositeInterrupt("never shown")
        first = group.call(hello, call_id="a")
        second = group.call(hello, call_id="b")
        group.raise_if_interrupted()
        assert group.interrupted == ()
        return f"{first} {second}"

    model = ScriptedChatModel([calls_message(call("greet", {})), "fine"])
    run_events(Runner(ChatModelAgent("A", "d", model, tools=[greet])).query("x"))
    assert model.calls[-1].messages[-1].content == "hello hello"


def test_tool_composite_interrupt_refuses_a_repeated_call_id_and_use_outside_a_tool() -> None:
    @tool
    def twice() -> str:
        """Call one child twice under one id."""
        group = CompositeInterrupt()
        group.call(approve_flight, {"city": "x"}, call_id="same")
        group.call(approve_hotel, {"city": "x"}, call_id="same")
        return "never"

    model = ScriptedChatModel([calls_message(call("twice", {})), "x"])
    events = run_events(Runner(ChatModelAgent("A", "d", model, tools=[twice])).query("x"))
    assert "call id 'same' is used already" in str(events[-1].err)
    with pytest.raises(RuntimeError, match="only inside a tool call"):
        CompositeInterrupt()


# --- agents: interrupt_event(children=...) (Eino: adk.CompositeInterrupt) ---------------------


class Asker(BaseAgent):
    """Asks a question, and answers with the reply once resumed."""

    description = "asks"

    def __init__(self, name: str) -> None:
        self.name = name

    def execute(self, run: AgentRun) -> None:
        info = run.resume_info
        if info is None or not info.is_resume_target:
            run.emit(interrupt_event(f"{self.name}: your name?"))
            return
        text = f"{self.name} heard {info.resume_data}"
        run.emit(event_from_message(assistant_message(text), None, Role.ASSISTANT))


class Both(BaseAgent):
    """Runs two askers, holding their interrupts back, and pauses once for both; the
    children that answered are kept in its state, so a resumed turn skips them."""

    name = "Both"
    description = "asks two"

    def execute(self, run: AgentRun) -> None:
        info = run.resume_info
        done: list[str] = list(info.interrupt_state["done"]) if info is not None else []
        held: list[AgentEvent] = []
        for child in (Asker("Ann"), Asker("Bob")):
            if child.name in done:
                continue
            last = run.run_child(child, sink=lambda e: None if _paused(e) else run.forward(e))
            if last is not None and _paused(last):
                held.append(last)
            else:
                done.append(child.name)
        if held:
            run.emit(interrupt_event("two questions", state={"done": done}, children=held))


def _paused(event: AgentEvent) -> bool:
    return event.action is not None and event.action.interrupted is not None


def test_agent_composite_interrupt_nests_children_and_resumes_each() -> None:
    runner = Runner(Both(), checkpoint_store=InMemoryCheckPointStore())
    ann, bob = contexts_of(run_events(runner.query("hi", with_checkpoint_id("b")))[-1])
    assert chain(ann) == [
        ("agent:Both;agent:Ann", "Ann: your name?", True),
        ("agent:Both", "two questions", False),
    ]
    assert chain(bob)[0] == ("agent:Both;agent:Bob", "Bob: your name?", True)
    # Ann answered; Bob, not targeted, asks again.
    events = run_events(runner.resume("b", targets={ann.id: "Zoe"}))
    assert events[0].get_message().content == "Ann heard Zoe"  # type: ignore[union-attr]
    (bob_again,) = contexts_of(events[-1])
    assert bob_again.address == bob.address and bob_again.id != bob.id
    events = run_events(runner.resume("b", targets={bob_again.id: "Max"}))
    assert [e.get_message().content for e in events] == ["Bob heard Max"]  # type: ignore[union-attr]


def test_agent_composite_interrupt_needs_interrupt_events() -> None:
    with pytest.raises(ValueError, match="takes the interrupt events of children"):
        interrupt_event("x", children=[AgentEvent()])
