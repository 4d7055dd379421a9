"""The flow wrapper: run paths, history, and transfer between agents.

Every agent a :class:`~agentkit.Runner` runs goes through a :class:`FlowAgent`. It adds one
behaviour: the agent takes part in a multi-agent flow. It builds the agent's input from the
run's history, runs the agent's turn at its place in the flow (the turn names and records the
agent's own events), and performs the transfer the agent's own last event asks for.

``HistoryEntry``, ``HistoryRewriter``, ``agent_with_options``, ``set_sub_agents`` moved to
:mod:`agentkit`; their spellings here still work until agentkit 0.4, with a
:class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.agents._flow import (
    FlowAgent,
    default_history_rewriter,
    rewrite_message,
)

__all__ = [
    "FlowAgent",
    "default_history_rewriter",
    "rewrite_message",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "HistoryEntry": "agentkit.HistoryEntry",
            "HistoryRewriter": "agentkit.HistoryRewriter",
            "agent_with_options": "agentkit.agent_with_options",
            "set_sub_agents": "agentkit.set_sub_agents",
        },
    )
