"""Agent core types: inputs, events, outputs, actions, interrupt data and the agent protocols.

An agent run is a stream of :class:`~agentkit.AgentEvent` objects. Each event carries an output (a
model message or a tool result, plain or streamed), an action (exit, transfer, interrupt,
break loop) or an error. ``agent_name`` and ``run_path`` are filled in by the framework.

``Agent``, ``AgentAction``, ``AgentEvent``, ``AgentInput``, ``AgentOutput``,
``BreakLoopAction``, ``InterruptContext``, ``InterruptInfo``, ``MessageVariant``,
``OnSubAgents``, ``ResumableAgent``, ``ResumeInfo``, ``RunStep``, ``TransferToAgentAction``,
``event_from_message``, ``gen_transfer_messages``, ``new_break_loop_action``,
``new_exit_action``, ``new_transfer_to_agent_action`` moved to :mod:`agentkit`; their spellings
here still work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._events import (
    TRANSFER_TO_AGENT_TOOL_NAME,
    transfer_result_text,
)
from agentkit._lazy import attach

__all__ = [
    "TRANSFER_TO_AGENT_TOOL_NAME",
    "transfer_result_text",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "Agent": "agentkit.Agent",
            "AgentAction": "agentkit.AgentAction",
            "AgentEvent": "agentkit.AgentEvent",
            "AgentInput": "agentkit.AgentInput",
            "AgentOutput": "agentkit.AgentOutput",
            "BreakLoopAction": "agentkit.BreakLoopAction",
            "InterruptContext": "agentkit.InterruptContext",
            "InterruptInfo": "agentkit.InterruptInfo",
            "MessageVariant": "agentkit.MessageVariant",
            "OnSubAgents": "agentkit.OnSubAgents",
            "ResumableAgent": "agentkit.ResumableAgent",
            "ResumeInfo": "agentkit.ResumeInfo",
            "RunStep": "agentkit.RunStep",
            "TransferToAgentAction": "agentkit.TransferToAgentAction",
            "event_from_message": "agentkit.event_from_message",
            "gen_transfer_messages": "agentkit.gen_transfer_messages",
            "new_break_loop_action": "agentkit.new_break_loop_action",
            "new_exit_action": "agentkit.new_exit_action",
            "new_transfer_to_agent_action": "agentkit.new_transfer_to_agent_action",
        },
    )
