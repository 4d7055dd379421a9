"""Eino's ``ChatModelAgentResumeData.HistoryModifier``: the resumer edits the conversation a
ChatModelAgent goes on with; the edit is made at the resume, the checkpoint stays signed."""

from __future__ import annotations

from typing import Any

import pytest

from agentkit import (
    ChatModelAgent,
    CheckpointError,
    InterruptInfo,
    Message,
    Runner,
    interrupt,
    tool,
    user_message,
    with_checkpoint_id,
)
from agentkit._checkpoints import load_checkpoint
from agentkit._interrupt import ToolRoundState
from agentkit.agents.chatmodel import ChatModelAgentResumeData
from agentkit.checkpoint import InMemoryCheckPointStore, PickleSerializer
from agentkit.errors import ResumeError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak

KEY = b"history modifier tests key of 32"
SERIALIZER = PickleSerializer(KEY)


@tool
def approve() -> str:
    """Ask for approval."""
    return f"approved: {interrupt('ok?')}"


def paused(model: ScriptedChatModel) -> tuple[Runner, InterruptInfo]:
    agent = ChatModelAgent("a", "d", model, instruction="be brief", tools=[approve])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore(), serializer=SERIALIZER)
    events = list(runner.query("my card is 4111 1111 1111 1111", with_checkpoint_id("cp")))
    interrupted = events[-1].action.interrupted  # type: ignore[union-attr]
    assert interrupted is not None
    return runner, interrupted


def redact(history: list[Message]) -> list[Message]:
    return [user_message("my card is [redacted]") if m.content.startswith("my card") else m
            for m in history]


def texts(messages: list[Message]) -> list[str]:
    return [f"{m.role}:{m.content}" for m in messages]


def test_the_model_sees_the_history_the_resumer_edited() -> None:
    model = ScriptedChatModel([calls_message(call("approve", {}, id="c1")), "done"])
    runner, interrupted = paused(model)
    seen: list[list[str]] = []

    def modify(history: list[Message]) -> list[Message]:
        seen.append(texts(history))
        return redact(history)

    tool_context = interrupted.contexts[0]
    assert tool_context.parent is not None
    with no_thread_leak():
        result = runner.resume("cp", targets={
            tool_context.id: "yes",
            tool_context.parent.id: ChatModelAgentResumeData(history_modifier=modify),
        }).result()
    assert result.text == "done"
    # the modifier got the saved conversation: the system message, the input, the reply
    assert seen == [["system:be brief", "user:my card is 4111 1111 1111 1111", "assistant:"]]
    assert texts(model.calls[1].messages) == [
        "system:be brief", "user:my card is [redacted]", "assistant:", "tool:approved: yes",
    ]


def test_the_edit_is_made_at_the_resume_and_the_checkpoint_stays_signed() -> None:
    model = ScriptedChatModel([calls_message(call("approve", {}, id="c1")), "done"])
    runner, interrupted = paused(model)
    store = runner.checkpoint_store
    assert store is not None
    before = store.get("cp")
    calls: list[int] = []

    def modify(history: list[Message]) -> list[Message]:
        calls.append(1)
        return redact(history)

    agent_id = interrupted.contexts[0].parent.id  # type: ignore[union-attr]
    with no_thread_leak():
        # only the agent is given data: the tool asks again, and the run is saved again
        again = list(runner.resume("cp", targets={
            agent_id: ChatModelAgentResumeData(history_modifier=modify),
        }))
    asked = again[-1].action.interrupted  # type: ignore[union-attr]
    assert asked is not None and calls == [1]
    after = store.get("cp")
    assert after is not None and after != before
    # the new checkpoint is signed with the key (another key cannot read it) and holds the
    # edited conversation, not the function
    with pytest.raises(CheckpointError):
        load_checkpoint(store, PickleSerializer(b"some other key, also 32 bytes..."), "cp")
    saved = load_checkpoint(store, SERIALIZER, "cp")
    [state] = [p.state for p in saved.points if isinstance(p.state, ToolRoundState)]
    assert texts(state.messages)[1] == "user:my card is [redacted]"
    assert saved.resume_data == {}
    with no_thread_leak():
        result = runner.resume("cp", targets={asked.contexts[0].id: "yes"}).result()
    assert result.text == "done" and calls == [1]  # one resume, one edit
    assert texts(model.calls[1].messages)[1] == "user:my card is [redacted]"


def test_other_resume_data_for_the_agent_itself_leaves_its_history_alone() -> None:
    # (a limit pause, whose point is the agent's own, is resumed with any data)
    model = ScriptedChatModel([calls_message(call("approve", {}, id="c1")), "done"])
    runner, interrupted = paused(model)
    tool_context = interrupted.contexts[0]
    assert tool_context.parent is not None
    with no_thread_leak():
        result = runner.resume(
            "cp", targets={tool_context.id: "yes", tool_context.parent.id: "anything"}
        ).result()
    assert result.text == "done"
    assert texts(model.calls[1].messages)[1] == "user:my card is 4111 1111 1111 1111"


def test_a_history_modifier_must_return_messages() -> None:
    model = ScriptedChatModel([calls_message(call("approve", {}, id="c1")), "done"])
    runner, interrupted = paused(model)
    agent_id = interrupted.contexts[0].parent.id  # type: ignore[union-attr]
    bad: Any = lambda history: "no"  # noqa: E731
    with no_thread_leak():
        events = list(runner.resume("cp", targets={
            agent_id: ChatModelAgentResumeData(history_modifier=bad),
        }))
    assert isinstance(events[-1].err, ResumeError)
    assert "returned str" in str(events[-1].err)
