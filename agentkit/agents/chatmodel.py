"""ChatModelAgent: a chat model in a ReAct loop with tools.

The loop itself is in ``agentkit.agents._react``.

``ChatModelAgent``, ``GenModelInput`` moved to :mod:`agentkit`; their spellings here still work
until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.agents._chatmodel import (
    ChatModelAgentResumeData,
    HistoryModifier,
    RetryContext,
    RetryDecision,
)

__all__ = [
    "ChatModelAgentResumeData",
    "HistoryModifier",
    "RetryContext",
    "RetryDecision",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "ChatModelAgent": "agentkit.ChatModelAgent",
            "GenModelInput": "agentkit.GenModelInput",
        },
    )
