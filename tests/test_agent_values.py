"""Agents are values after construction: settings cannot change; a changed copy is a new agent."""

from __future__ import annotations

from typing import Any

import pytest

from agentkit import (
    AgentFrozenError,
    AgentKitError,
    ChatModelAgent,
    LoopAgent,
    ParallelAgent,
    Runner,
    SequentialAgent,
    agent_with_options,
    set_sub_agents,
    tool,
)
from agentkit.testing import ScriptedChatModel, call, calls_message


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"all about {topic}"


def _agent(**kwargs: Any) -> ChatModelAgent:
    return ChatModelAgent("helper", "helps", ScriptedChatModel(["ok"] * 5), **kwargs)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("instruction", "v2"),
        ("max_iterations", 1),
        ("tools", []),
        ("output_key", "answer"),
        ("emit_internal_events", True),
        ("model", None),
        ("name", "other"),
    ],
)
def test_setting_anything_on_a_built_chat_model_agent_raises(setting: str, value: Any) -> None:
    agent = _agent(instruction="v1")
    with pytest.raises(AgentFrozenError) as caught:
        setattr(agent, setting, value)
    message = str(caught.value)
    assert f"cannot set {setting!r} on agent 'helper'" in message
    assert f"agent.replace({setting}=...)" in message
    # an AgentKitError, and an AttributeError like any read-only attribute
    assert isinstance(caught.value, AgentKitError) and isinstance(caught.value, AttributeError)
    assert agent.instruction == "v1"


def test_setting_a_limit_after_a_run_takes_no_effect_because_it_cannot_be_set() -> None:
    # Issue 26: before, `agent.max_iterations = 1` after a run took effect while
    # `agent.instruction = "v2"` did not. Now neither can be set.
    model = ScriptedChatModel([calls_message(call("lookup", {"topic": "x"})), "done"] * 2)
    agent = ChatModelAgent("a", "d", model, tools=[lookup], max_iterations=5)
    assert Runner(agent).invoke("go").text == "done"
    with pytest.raises(AgentFrozenError):
        agent.max_iterations = 1  # type: ignore[misc]
    assert Runner(agent).invoke("go").text == "done"


def test_replace_makes_a_changed_copy_and_leaves_the_agent_as_it_was() -> None:
    model = ScriptedChatModel(lambda messages: f"system: {messages[0].content}")
    agent = ChatModelAgent("a", "d", model, instruction="be brief", max_iterations=3)
    brief = agent.replace(instruction="be very brief", max_iterations=1)
    assert (brief.instruction, brief.max_iterations, brief.name) == ("be very brief", 1, "a")
    assert (agent.instruction, agent.max_iterations) == ("be brief", 3)
    assert Runner(brief).invoke("hi").text == "system: be very brief"
    assert Runner(agent).invoke("hi").text == "system: be brief"


def test_replace_refuses_an_unknown_setting_and_checks_new_values() -> None:
    agent = _agent()
    with pytest.raises(TypeError, match="unknown argument.*'instructions'"):
        agent.replace(instructions="typo")
    with pytest.raises(AgentKitError, match="max_iterations must be at least 1"):
        agent.replace(max_iterations=0)


def test_a_replaced_copy_of_a_wired_agent_can_be_wired_again() -> None:
    kid = _agent()
    set_sub_agents(ChatModelAgent("Mom", "m", ScriptedChatModel([])), [kid])
    copy = kid.replace()
    flow = set_sub_agents(ChatModelAgent("Dad", "f", ScriptedChatModel([])), [copy])
    assert [sub.name for sub in flow.sub_agents] == ["helper"]


@pytest.mark.parametrize(
    ("make", "setting"),
    [
        (lambda a: SequentialAgent("s", "d", [a]), "agent_type"),
        (lambda a: LoopAgent("l", "d", [a], max_iterations=2), "max_iterations"),
        (lambda a: ParallelAgent("p", "d", [a], max_workers=2), "max_workers"),
        (lambda a: set_sub_agents(a, []), "sub_agents"),
        (lambda a: agent_with_options(a), "history_rewriter"),
    ],
)
def test_workflows_and_flows_are_values_too(make: Any, setting: str) -> None:
    built = make(_agent())
    before = getattr(built, setting)
    with pytest.raises(AgentFrozenError, match=f"cannot set {setting!r}"):
        setattr(built, setting, None)
    assert getattr(built, setting) == before
