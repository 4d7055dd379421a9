"""Workflow agents: :class:`~agentkit.SequentialAgent`, :class:`~agentkit.ParallelAgent` and
:class:`~agentkit.LoopAgent`.

A workflow runs its sub-agents in a fixed pattern. It records nothing itself: each
sub-agent runs through its own flow wrapper, which names and records its events. Sub-agents
are registered with transfer to their parent disallowed.

``LoopAgent``, ``ParallelAgent``, ``SequentialAgent`` moved to :mod:`agentkit`; their spellings
here still work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.agents._workflow import (
    LoopState,
    ParallelState,
    SequentialState,
)

__all__ = [
    "LoopState",
    "ParallelState",
    "SequentialState",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "LoopAgent": "agentkit.LoopAgent",
            "ParallelAgent": "agentkit.ParallelAgent",
            "SequentialAgent": "agentkit.SequentialAgent",
        },
    )
