"""Showing runs readably: :func:`~agentkit.print_events` (a terminal) and :func:`live` (a notebook).

In Jupyter, messages, events and interrupts render as HTML by themselves (their
``_repr_html_``; the plain ``repr`` stays the text fallback), and :func:`live` shows a run in
one cell output that updates as tokens, tool calls, transfers and interrupts arrive.

``print_events`` moved to :mod:`agentkit`; their spellings here still work until agentkit 0.4,
with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._display import (
    UPDATE_INTERVAL,
    live,
)
from agentkit._lazy import attach

__all__ = [
    "UPDATE_INTERVAL",
    "live",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "print_events": "agentkit.print_events",
        },
    )
