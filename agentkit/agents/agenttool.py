"""AgentTool: an agent used as a tool by another agent.

``AgentTool`` moved to :mod:`agentkit`; their spellings here still work until agentkit 0.4,
with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.agents._agenttool import (
    AgentToolRetryConfig,
)

__all__ = [
    "AgentToolRetryConfig",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "AgentTool": "agentkit.AgentTool",
        },
    )
