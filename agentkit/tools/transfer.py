"""The ``transfer_to_agent`` tool and the transfer instruction added to the system prompt."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentkit import _prompts_zh as zh
from agentkit._events import (
    TRANSFER_TO_AGENT_TOOL_NAME,
    Agent,
    new_transfer_to_agent_action,
    transfer_result_text,
)
from agentkit._language import resolve
from agentkit._runctx import send_tool_gen_action
from agentkit.errors import ToolArgumentsError
from agentkit.schema import ToolInfo

__all__ = ["TransferToAgentTool", "transfer_instruction"]

_TRANSFER_INFO = ToolInfo(
    name=TRANSFER_TO_AGENT_TOOL_NAME,
    description="Transfer the question to another agent.",
    parameters={
        "type": "object",
        "properties": {
            "agent_name": {"type": "string", "description": "the name of the agent to transfer to"}
        },
        "required": ["agent_name"],
    },
)

_INSTRUCTION = """Available other agents: {agents}

Decision rule:
- If you're best suited for the question according to your description: ANSWER
- If another agent is better according its description: CALL '{tool}' function with their agent name

When transferring: OUTPUT ONLY THE FUNCTION CALL"""


_AGENT_LINE = "\n- Agent name: {name}\n  Agent description: {description}"

_TEXTS = {
    "en": (_INSTRUCTION, _AGENT_LINE),
    "zh": (zh.TRANSFER_INSTRUCTION, zh.TRANSFER_AGENT_LINE),
}


def transfer_instruction(targets: Sequence[Agent], language: str | None = None) -> str:
    """Return the system-prompt text that lists ``targets`` and tells the model how to transfer.

    ``language``: ``"en"`` or ``"zh"`` (``None``: the process's, see
    :func:`agentkit.language.set_language`).
    """
    instruction, line = _TEXTS[resolve(language)]
    agents = "".join(
        line.format(name=agent.name, description=agent.description) for agent in targets
    )
    return instruction.format(agents=agents, tool=TRANSFER_TO_AGENT_TOOL_NAME)


class TransferToAgentTool:
    """The ``transfer_to_agent`` tool; the flow wrapper performs the transfer after the round.

    Args:
        targets: the names of the agents a transfer may go to. Given, a call naming another
            agent raises :class:`~agentkit.ToolArgumentsError` listing them, which a
            ``ChatModelAgent`` that recovers tool errors sends back to the model. ``None`` (Eino's
            behaviour) accepts any name: the flow wrapper then ends the run with a
            :class:`~agentkit.TransferError` for an unknown one.
    """

    def __init__(self, targets: Sequence[str] | None = None) -> None:
        self._targets = None if targets is None else tuple(targets)

    def info(self) -> ToolInfo:
        """Return the tool's name, description and ``agent_name`` parameter."""
        return _TRANSFER_INFO

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Attach a transfer action to this call's event and confirm the transfer."""
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as error:
            raise ToolArgumentsError(
                f"{TRANSFER_TO_AGENT_TOOL_NAME}: arguments are not valid JSON: {error} "
                f"(got {arguments!r})",
                tool_name=TRANSFER_TO_AGENT_TOOL_NAME,
            ) from error
        dest = parsed.get("agent_name") if isinstance(parsed, dict) else None
        if not isinstance(dest, str):
            raise ToolArgumentsError(
                f"{TRANSFER_TO_AGENT_TOOL_NAME}: 'agent_name' is required and must be a string "
                f"(got {parsed!r})",
                tool_name=TRANSFER_TO_AGENT_TOOL_NAME,
            )
        if self._targets is not None and dest not in self._targets:
            known = ", ".join(repr(name) for name in self._targets)
            raise ToolArgumentsError(
                f"{TRANSFER_TO_AGENT_TOOL_NAME}: there is no agent named {dest!r} to transfer "
                f"to; the agents you can transfer to are: {known}",
                tool_name=TRANSFER_TO_AGENT_TOOL_NAME,
            )
        send_tool_gen_action(new_transfer_to_agent_action(dest))
        return transfer_result_text(dest)

    def __repr__(self) -> str:
        if self._targets is None:
            return "TransferToAgentTool()"
        return f"TransferToAgentTool(targets={list(self._targets)!r})"
