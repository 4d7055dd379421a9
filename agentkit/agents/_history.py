"""A run's history as the agents of a flow see it: entries, rewriters, ``For context:``.

Each agent of a flow gets the run's history as its input: the user's messages, its own
messages verbatim, and the other agents' messages rewritten as ``For context: ...`` user
messages (:func:`default_history_rewriter`). A :data:`HistoryRewriter` replaces that rule.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from agentkit.schema import Message, Role, user_message

__all__ = ["HistoryEntry", "HistoryRewriter", "default_history_rewriter", "rewrite_message"]


@attrs.define
class HistoryEntry:
    """One message of a run's history, as a history rewriter sees it.

    ``agent_name`` is ``""`` for the user's input.
    """

    is_user_input: bool
    agent_name: str
    message: Message


HistoryRewriter = Callable[[list[HistoryEntry]], list[Message]]
"""Turns the run's history into the input messages of one agent."""


def rewrite_message(message: Message, agent_name: str) -> Message:
    """Return another agent's message as a ``For context: ...`` user message."""
    text = "For context:"
    if message.role is Role.ASSISTANT:
        if message.content:
            text += f" [{agent_name}] said: {message.content}."
        for call in message.tool_calls:
            text += (
                f" [{agent_name}] called tool: `{call.function.name}` with arguments: "
                f"{call.function.arguments}."
            )
    elif message.role is Role.TOOL and message.content:
        text += f" [{agent_name}] `{message.tool_name}` tool returned result: {message.content}."
    return user_message(text)


def default_history_rewriter(agent_name: str) -> HistoryRewriter:
    """The default rewriter for ``agent_name``: its own messages verbatim, others' as context."""

    def rewrite(entries: list[HistoryEntry]) -> list[Message]:
        return [
            entry.message
            if entry.is_user_input or entry.agent_name == agent_name
            else rewrite_message(entry.message, entry.agent_name)
            for entry in entries
        ]

    return rewrite
