"""Built-in agents: ChatModelAgent, the flow wrapper, the workflow agents and AgentTool.

Each kind of agent has its module, imported when first used (``agentkit.agents.workflow``);
the agents themselves are exported from :mod:`agentkit`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach

__all__ = ["agenttool", "chatmodel", "deterministic", "flow", "workflow"]

if TYPE_CHECKING:
    from agentkit.agents import agenttool, chatmodel, deterministic, flow, workflow
else:
    __getattr__, __dir__ = attach(__name__, submodules=__all__)
