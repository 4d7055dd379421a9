"""Placeholder results for dangling tool calls (Eino's ``patchtoolcalls``).

The definitions behind :mod:`agentkit.middlewares.patch_tool_calls`, whose docstring documents them.
"""

from __future__ import annotations

from collections.abc import Callable

from agentkit._lazy import present
from agentkit._middleware import AgentMiddleware, ModelState
from agentkit.errors import AgentConfigError
from agentkit.schema import Message, Role, tool_message

__all__ = ["PatchToolCallsMiddleware", "patch_tool_calls", "placeholder_text"]


def placeholder_text(tool_name: str, call_id: str) -> str:
    """Eino's text for a call that got no result."""
    return (
        f"Tool call {tool_name} with id {call_id} was canceled - another message came in "
        "before it could be completed."
    )


def patch_tool_calls(
    messages: list[Message], content: Callable[[str, str], str] = placeholder_text
) -> list[Message]:
    """``messages`` with a tool message for every tool call that has no result.

    A call has a result when one of the tool messages right after its assistant message (up to
    the next message of another role) answers its id. The placeholder goes right after the
    assistant message, before the results that are there; ``content(tool_name, call_id)`` is
    its text. Returns ``messages`` itself when nothing is missing.
    """
    patched: list[Message] = []
    changed = False
    for index, message in enumerate(messages):
        patched.append(message)
        if message.role is not Role.ASSISTANT or not message.tool_calls:
            continue
        answered = _answered(messages, index + 1)
        for call in message.tool_calls:
            if call.id not in answered:
                name = call.function.name
                patched.append(tool_message(content(name, call.id), call.id, name))
                changed = True
    return patched if changed else messages


def _answered(messages: list[Message], start: int) -> set[str]:
    ids: set[str] = set()
    for message in messages[start:]:
        if message.role is not Role.TOOL:
            break
        ids.add(message.tool_call_id)
    return ids


class PatchToolCallsMiddleware(AgentMiddleware):
    """Before every model call, adds placeholder results for tool calls that have none.

    Args:
        content: ``content(tool_name, call_id) -> str``, the placeholder's text (default:
            :func:`placeholder_text`, Eino's).
    """

    def __init__(self, content: Callable[[str, str], str] | None = None) -> None:
        if content is not None and not callable(content):
            raise AgentConfigError(
                f"content must be a function (tool_name, call_id) -> str (got {content!r})"
            )
        self._content = content or placeholder_text

    def before_model(self, state: ModelState) -> None:
        """Patch the conversation the model is about to get (kept for the rest of the run)."""
        patched = patch_tool_calls(state.messages, self._content)
        if patched is not state.messages:
            state.messages = patched

present(
    (
        PatchToolCallsMiddleware,
    ),
    "agentkit.middlewares",
)

present(
    (
        patch_tool_calls,
        placeholder_text,
    ),
    "agentkit.middlewares.patch_tool_calls",
)
