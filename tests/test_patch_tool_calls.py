"""Placeholder results for dangling tool calls (``patch_tool_calls``).

Tests named after Eino's follow ``adk/middlewares/patchtoolcalls/patchtoolcalls_test.go``.
"""

from __future__ import annotations

import pytest

from agentkit import (
    ChatModelAgent,
    Message,
    ModelState,
    Role,
    Runner,
    assistant_message,
    tool_message,
    user_message,
)
from agentkit.errors import AgentConfigError
from agentkit.middlewares import PatchToolCallsMiddleware
from agentkit.middlewares.patch_tool_calls import patch_tool_calls, placeholder_text
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, run_events

TWO_CALLS = calls_message(call("tool_a", "{}", id="call_1"), call("tool_b", "{}", id="call_2"))


@pytest.mark.parametrize(
    ("messages", "length", "patched_at", "expected"),
    [
        ([], 0, None, None),
        ([user_message("hello"), assistant_message("hi there")], 2, None, None),
        (
            [user_message("hello"), TWO_CALLS, tool_message("result_a", "call_1", "tool_a")],
            4, 2, ("call_2", "tool_b", placeholder_text("tool_b", "call_2")),
        ),
        (
            [user_message("hello"), calls_message(call("tool_a", "{}", id="call_1")),
             assistant_message("continued...")],
            4, 2, ("call_1", "tool_a", placeholder_text("tool_a", "call_1")),
        ),
        (
            [user_message("hello"), calls_message(call("tool_a", "{}", id="call_1")),
             user_message("continued...")],
            4, 2, ("call_1", "tool_a", placeholder_text("tool_a", "call_1")),
        ),
    ],
    ids=[
        "empty messages", "no tool calls to patch", "missing tool result",
        "two consecutive assistant messages with tool calls",
        "assistant message followed by user message without tool result",
    ],
)
def test_patch_tool_calls(
    messages: list[Message],
    length: int,
    patched_at: int | None,
    expected: tuple[str, str, str] | None,
) -> None:
    """Eino's TestPatchToolCallsGeneric (the Message cases)."""
    state = ModelState("agent", list(messages), [])
    PatchToolCallsMiddleware().before_model(state)
    assert len(state.messages) == length
    if patched_at is None:
        assert state.messages == messages
    else:
        patched = state.messages[patched_at]
        assert expected is not None
        assert (patched.role, patched.tool_call_id, patched.tool_name, patched.content) == (
            Role.TOOL, *expected
        )


def test_the_default_placeholder_is_eino_s_text() -> None:
    assert placeholder_text("tool_b", "call_2") == (
        "Tool call tool_b with id call_2 was canceled - another message came in before it could "
        "be completed."
    )


def test_custom_content_generator() -> None:
    """Eino's 'custom content generator' case."""
    messages = [user_message("hello"), TWO_CALLS, tool_message("result_a", "call_1", "tool_a")]
    patched = patch_tool_calls(messages, lambda name, call_id: f"123 {name} {call_id}")
    assert patched[2] == tool_message("123 tool_b call_2", "call_2", "tool_b")
    with pytest.raises(AgentConfigError, match="must be a function"):
        PatchToolCallsMiddleware("text")  # type: ignore[arg-type]


def test_nothing_to_patch_returns_the_same_list() -> None:
    messages = [user_message("hello"), TWO_CALLS, tool_message("a", "call_1", "tool_a"),
                tool_message("b", "call_2", "tool_b")]
    assert patch_tool_calls(messages) is messages


def test_a_run_whose_input_has_a_dangling_call_sends_the_model_a_placeholder() -> None:
    history = [
        user_message("book a flight"),
        calls_message(call("book_flight", {"to": "Oslo"}, id="b1")),
        user_message("actually, never mind; what is 2+2?"),
    ]
    model = ScriptedChatModel(["4", "5"])
    agent = ChatModelAgent("a", "d", model, middlewares=[PatchToolCallsMiddleware()])
    events = run_events(lambda: Runner(agent).run(history))
    assert events[-1].err is None
    sent = model.calls[0].messages
    assert [m.role for m in sent] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.USER]
    assert sent[2] == tool_message(placeholder_text("book_flight", "b1"), "b1", "book_flight")
    # Without the middleware the model gets the conversation as it is.
    plain = ScriptedChatModel(["4"])
    run_events(lambda: Runner(ChatModelAgent("a", "d", plain)).run(history))
    assert [m.role for m in plain.calls[0].messages] == [Role.USER, Role.ASSISTANT, Role.USER]
