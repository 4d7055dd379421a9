"""The exit tool: calling it ends the agent's run with an Exit action."""

from __future__ import annotations

import json
from typing import Any

from agentkit._events import new_exit_action
from agentkit._lazy import present
from agentkit._runctx import send_tool_gen_action
from agentkit.errors import ToolArgumentsError
from agentkit.schema import ToolInfo

__all__ = ["ExitTool"]

_EXIT_INFO = ToolInfo(
    name="exit",
    description="Exit the agent process and return the final result.",
    parameters={
        "type": "object",
        "properties": {
            "final_result": {"type": "string", "description": "the final result to return"}
        },
        "required": ["final_result"],
    },
)


class ExitTool:
    """The ``exit`` tool: returns ``final_result`` and ends the run with an Exit action.

    Give it to a :class:`~agentkit.ChatModelAgent` as ``exit_tool=ExitTool()``; it is a
    return-directly tool, so its result is the agent's final output.
    """

    def info(self) -> ToolInfo:
        """Return the tool's name (``exit``), description and parameters."""
        return _EXIT_INFO

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Attach an Exit action to this call's event and return ``final_result``."""
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as error:
            raise ToolArgumentsError(
                f"exit: arguments are not valid JSON: {error} (got {arguments!r})",
                tool_name="exit",
            ) from error
        if not isinstance(parsed, dict) or not isinstance(parsed.get("final_result"), str):
            raise ToolArgumentsError(
                f"exit: 'final_result' is required and must be a string (got {parsed!r})",
                tool_name="exit",
            )
        send_tool_gen_action(new_exit_action())
        return str(parsed["final_result"])

    def __repr__(self) -> str:
        return "ExitTool()"

present(
    (
        ExitTool,
    ),
    "agentkit",
)
