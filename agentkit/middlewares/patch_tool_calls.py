"""Placeholder results for dangling tool calls (Eino's ``patchtoolcalls``).

A conversation can hold an assistant message whose tool calls never got their results: a run
that was stopped between the model's reply and its tools, a history stitched together by hand,
a turn cancelled when the user sent something new. Chat APIs refuse such a conversation.
:class:`~agentkit.middlewares.PatchToolCallsMiddleware` looks at the conversation before every
model call and puts, right after each such assistant message, a tool message for every call
that has no result in the tool messages that follow it::

    Tool call get_weather with id call_7 was canceled - another message came in before it
    could be completed.

The placeholders are kept in the conversation for the rest of the run.

``PatchToolCallsMiddleware`` moved to :mod:`agentkit.middlewares`; their spellings here still
work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.middlewares._patch_tool_calls import (
    patch_tool_calls,
    placeholder_text,
)

__all__ = [
    "patch_tool_calls",
    "placeholder_text",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "PatchToolCallsMiddleware": "agentkit.middlewares.PatchToolCallsMiddleware",
        },
    )
