"""An agent's guardrails also check the agents it hands work to (issue 49, A11).

Before, an entry agent's output guardrail and ``ToolAllowList`` checked that agent alone: an
agent it transferred to, an agent it ran as a tool and a deep agent's sub-agents answered and
called tools unchecked, while the run's limits counted every agent. Guardrails now travel
down like limits: to transfer targets, agents used as tools and deep sub-agents, also after a
resume. ``ChatModelAgent(share_guardrails=False)`` keeps Eino's behaviour (the agent's
guardrails check it alone).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentkit import (
    AgentTool,
    ChatModelAgent,
    GuardrailTripped,
    Message,
    Runner,
    set_sub_agents,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import AgentConfigError
from agentkit.guardrails import ToolAllowList
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import deep, supervisor
from agentkit.testing import call, calls_message, no_thread_leak
from tests.transfer_support import transfer


class NoWord:
    """An output guardrail: trips on an answer holding ``word``."""

    name = "no_word"

    def __init__(self, word: str) -> None:
        self.word = word

    def check_output(self, message: Message) -> str | None:
        return f"the answer says {self.word}" if self.word in message.content else None


class Ran:
    """The tools that ran, by name (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.names: list[str] = []

    def tool(self, name: str) -> Any:
        @tool(name=name)
        def run() -> str:
            """A tool."""
            with self.lock:
                self.names.append(name)
            return f"{name} ran"

        return run


def entry(model: ScriptedChatModel, *, share: bool = True, **kwargs: Any) -> ChatModelAgent:
    # The switch only when asked for: on the old code (no switch) the tests fail on behaviour.
    switch: dict[str, Any] = {} if share else {"share_guardrails": False}
    return ChatModelAgent(
        "entry",
        "d",
        model,
        guardrails=[NoWord("SECRET"), ToolAllowList("transfer_to_agent", "helper", "ask")],
        **kwargs,
        **switch,
    )


def worker(ran: Ran, name: str = "worker") -> ChatModelAgent:
    """Calls ``drop_table`` (not allowed by the entry's list), then answers with SECRET."""
    model = ScriptedChatModel([calls_message(call("drop_table", {}, id="d1")), "the SECRET is 42"])
    return ChatModelAgent(name, "does the work", model, tools=[ran.tool("drop_table")])


# --- transfer -----------------------------------------------------------------------------


def test_a_transfer_target_is_checked_by_the_entry_agents_guardrails() -> None:
    ran = Ran()
    flow = set_sub_agents(entry(ScriptedChatModel([transfer("worker", "t1")])), [worker(ran)])
    with no_thread_leak():
        result = Runner(flow).invoke("go", raise_errors=False)
    assert ran.names == []  # the allow list of the entry agent blocked the call
    assert isinstance(result.error, GuardrailTripped)
    assert (result.error.stage, result.error.guardrail) == ("output", "no_word")
    assert result.error.agent_name == "worker"
    assert "guardrail 'no_word' (handed down by an agent above) of agent 'worker'" in str(
        result.error
    )
    assert "SECRET" not in result.text


def test_share_guardrails_false_keeps_eino_s_per_agent_guardrails() -> None:
    ran = Ran()
    flow = set_sub_agents(
        entry(ScriptedChatModel([transfer("worker", "t1")]), share=False), [worker(ran)]
    )
    result = Runner(flow).invoke("go")
    assert ran.names == ["drop_table"]
    assert result.text == "the SECRET is 42"


def test_inherited_guardrails_hold_after_a_resume_into_the_target() -> None:
    ran = Ran()
    approve = threading.Event()

    @tool
    def ask() -> str:
        """Ask a human."""
        from agentkit import interrupt

        if not approve.is_set():
            interrupt("may I?")
        return "yes"

    target_model = ScriptedChatModel(
        [calls_message(call("ask", {}, id="a1")), calls_message(call("drop_table", {}, id="d1")),
         "the SECRET is 42"]
    )
    target = ChatModelAgent("worker", "d", target_model, tools=[ask, ran.tool("drop_table")])
    flow = set_sub_agents(entry(ScriptedChatModel([transfer("worker", "t1")])), [target])
    runner = Runner(flow, checkpoint_store=InMemoryCheckPointStore())
    paused = runner.invoke("go", with_checkpoint_id("cp"))
    assert paused.interrupt is not None
    approve.set()
    (context,) = paused.interrupt.contexts
    result = runner.resume("cp", targets={context.id: None}).result(raise_errors=False)
    assert ran.names == []
    assert isinstance(result.error, GuardrailTripped) and result.error.agent_name == "worker"


# --- agents used as tools -----------------------------------------------------------------


def test_an_agent_used_as_a_tool_is_checked_by_its_callers_guardrails() -> None:
    ran = Ran()
    boss_model = ScriptedChatModel([calls_message(call("helper", {"request": "go"}, id="h1")), "ok"])
    boss = entry(boss_model, tools=[AgentTool(worker(ran, "helper"))])
    with no_thread_leak():
        result = Runner(boss).invoke("go", raise_errors=False)
    assert ran.names == []
    # the helper's answer tripped the guardrail: it never reached the boss's model
    assert all("SECRET" not in m.content for c in boss_model.calls for m in c.messages)
    assert isinstance(result.error, GuardrailTripped) and result.error.agent_name == "helper"


# --- deep agents --------------------------------------------------------------------------


def test_a_deep_agents_sub_agents_are_checked_by_its_guardrails() -> None:
    ran = Ran()
    model = ScriptedChatModel(
        [
            calls_message(
                call("task", {"subagent_type": "researcher", "description": "look"}, id="k1")
            ),
            "done",
        ]
    )
    agent = deep.new(
        model,
        sub_agents=[worker(ran, "researcher")],
        without_general_sub_agent=True,
        guardrails=[NoWord("SECRET"), ToolAllowList("task", "write_todos")],
    )
    result = Runner(agent).invoke("research", raise_errors=False)
    assert ran.names == []
    assert isinstance(result.error, GuardrailTripped)
    assert result.error.agent_name == "researcher"


def test_deep_new_refuses_a_single_guardrail() -> None:
    with pytest.raises(AgentConfigError, match="a list of guardrails"):
        deep.new(ScriptedChatModel(["x"]), guardrails=NoWord("x"))  # type: ignore[arg-type]


def test_a_supervisors_workers_are_checked_by_its_guardrails() -> None:
    ran = Ran()
    boss = entry(ScriptedChatModel([transfer("worker", "t1"), "all done"]))
    system = supervisor.new(boss, [worker(ran)])
    result = Runner(system).invoke("go", raise_errors=False)
    assert ran.names == []
    assert isinstance(result.error, GuardrailTripped) and result.error.agent_name == "worker"
