"""The invocation id: one per execution of an agent's turn, on its events and its callbacks
(Eino's ``AgentEvent.InvocationID``, PR #1163)."""

from __future__ import annotations

from typing import Any

import attrs

from agentkit import (
    AgentEvent,
    AgentTool,
    ChatModelAgent,
    Runner,
    SequentialAgent,
    interrupt,
    tool,
    with_callbacks,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, run_events


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def pinger(name: str = "a") -> ChatModelAgent:
    model = ScriptedChatModel([calls_message(call("ping", {})), "done"])
    return ChatModelAgent(name, "pings", model, tools=[ping])


def test_the_events_of_one_turn_share_one_invocation_id() -> None:
    events = run_events(Runner(pinger()).query("go"))
    ids = {e.invocation_id for e in events}
    assert len(events) == 3 and len(ids) == 1
    (only,) = ids
    assert len(only) == 32 and int(only, 16) >= 0
    again = run_events(Runner(pinger()).query("go"))
    assert again[0].invocation_id != only  # another run, another turn


def test_each_turn_has_its_own_invocation_id() -> None:
    flow = SequentialAgent("seq", "two steps", [pinger("first"), pinger("second")])
    events = run_events(Runner(flow).query("go"))
    by_agent: dict[str, set[str]] = {}
    for event in events:
        by_agent.setdefault(event.agent_name, set()).add(event.invocation_id)
    assert set(by_agent) == {"first", "second"}
    assert all(len(ids) == 1 for ids in by_agent.values())
    assert by_agent["first"] != by_agent["second"]


def test_callbacks_carry_the_invocation_id_of_the_turn() -> None:
    seen: list[tuple[str, str]] = []

    class Handler:
        def on_agent_start(self, info: Any, input: Any) -> None:
            seen.append(("agent", info.invocation_id))

        def on_model_start(self, info: Any, messages: Any) -> None:
            seen.append(("model", info.invocation_id))

        def on_tool_start(self, info: Any, call: Any) -> None:
            seen.append(("tool", info.invocation_id))

    events = run_events(Runner(pinger()).query("go", with_callbacks(Handler())))
    turn = events[0].invocation_id
    assert seen == [("agent", turn), ("model", turn), ("tool", turn), ("model", turn)]


def test_an_agent_tools_inner_turn_has_its_own_id_on_forwarded_events() -> None:
    inner = pinger("Inner")
    outer_model = ScriptedChatModel([calls_message(call("Inner", {"request": "ping"})), "ok"])
    boss = ChatModelAgent(
        "Boss", "d", outer_model, tools=[AgentTool(inner)], emit_internal_events=True
    )
    events = run_events(Runner(boss).query("go"))
    boss_ids = {e.invocation_id for e in events if e.agent_name == "Boss"}
    inner_ids = {e.invocation_id for e in events if e.agent_name == "Inner"}
    assert len(boss_ids) == 1 and len(inner_ids) == 1 and boss_ids != inner_ids


def test_a_resumed_turn_is_a_new_invocation() -> None:
    @tool
    def ask() -> str:
        """Ask a human."""
        return str(interrupt("ok?"))

    model = ScriptedChatModel([calls_message(call("ask", {})), "thanks"])
    runner = Runner(
        ChatModelAgent("a", "d", model, tools=[ask]), checkpoint_store=InMemoryCheckPointStore()
    )
    first = run_events(runner.query("go", with_checkpoint_id("r")))
    (context,) = first[-1].action.interrupted.contexts  # type: ignore[union-attr]
    rest = run_events(runner.resume("r", targets={context.id: "yes"}))
    assert {e.invocation_id for e in rest}.isdisjoint({e.invocation_id for e in first})
    assert len({e.invocation_id for e in rest}) == 1


def test_equality_ignores_the_invocation_id() -> None:
    event = AgentEvent(agent_name="a")
    assert attrs.evolve(event, invocation_id="x") == event
    assert AgentEvent().invocation_id == ""
