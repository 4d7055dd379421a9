"""The messages that record a transfer in a conversation (framework-internal).

Re-exported by :mod:`agentkit.events`, where they are documented.
"""

from __future__ import annotations

import json

from agentkit._ids import new_id
from agentkit.schema import FunctionCall, Message, ToolCall, assistant_message, tool_message

__all__ = ["TRANSFER_TO_AGENT_TOOL_NAME", "gen_transfer_messages", "transfer_result_text"]

TRANSFER_TO_AGENT_TOOL_NAME = "transfer_to_agent"
"""The name of the tool a model calls to hand the conversation to another agent."""


def transfer_result_text(dest: str) -> str:
    """The tool result of a transfer to ``dest``."""
    return f"successfully transferred to agent [{dest}]"


def gen_transfer_messages(dest: str) -> tuple[Message, Message]:
    """Return the (assistant tool call, tool result) pair that records a transfer to ``dest``.

    The call's arguments are JSON, ``{"agent_name": "<dest>"}``, so a model API accepts the
    history when it is replayed (Eino puts the bare name there).
    """
    call_id = new_id()
    call = ToolCall(
        id=call_id,
        function=FunctionCall(
            name=TRANSFER_TO_AGENT_TOOL_NAME, arguments=json.dumps({"agent_name": dest})
        ),
    )
    return (
        assistant_message("", [call]),
        tool_message(transfer_result_text(dest), call_id, TRANSFER_TO_AGENT_TOOL_NAME),
    )
