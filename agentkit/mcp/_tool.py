"""MCPTool: one tool of an MCP server, usable by agents like any agentkit tool."""

from __future__ import annotations

import json
from typing import Any, Protocol

from agentkit.errors import AgentKitValueError, ToolArgumentsError
from agentkit.mcp._elicit import ElicitationRouter
from agentkit.mcp._results import result_content, result_text
from agentkit.schema import ContentPart, ToolInfo

__all__ = ["MCPTool", "ToolSource"]


class ToolSource(Protocol):
    """What a tool needs of its MCP client (framework-internal); ``MCPClient`` is one.

    A protocol, so that this module sits below the client that makes the tools.
    """

    def tool_info(self, remote_name: str, prefix: str = "") -> ToolInfo | None:
        """The newest known description of the server's tool ``remote_name``."""

    def _call_tool(
        self, remote_name: str, arguments: dict[str, Any], tool_name: str
    ) -> dict[str, Any]:
        """Call the server's tool ``remote_name``; returns the ``CallToolResult`` wire shape."""

    @property
    def _elicitations(self) -> ElicitationRouter:
        """Where the server's questions during a call are routed."""


class MCPTool:
    """A tool of an MCP server, an :class:`~agentkit.InvokableTool`; ``client.tools()`` makes them.

    :meth:`info` gives the server's name (with the client's prefix), description and input
    schema, as of the server's newest tool listing. :meth:`invoke` calls the tool on the
    server and returns the result as text (see :mod:`agentkit.mcp` for how content, images
    and errors are rendered). It can be called from inside another tool, for example a
    ``@tool`` function that asks for approval with :func:`~agentkit.interrupt` first.
    """

    def __init__(self, client: ToolSource, remote_name: str, prefix: str = "") -> None:
        info = client.tool_info(remote_name, prefix)
        if info is None:
            raise AgentKitValueError(f"the MCP server has no tool named {remote_name!r}")
        self.client = client
        self.remote_name = remote_name
        self.prefix = prefix
        self._last_info = info

    @property
    def name(self) -> str:
        """The tool's name as the model sees it (prefix + the server's name)."""
        return self.prefix + self.remote_name

    def __repr__(self) -> str:
        return f"<MCPTool {self.name!r} of {self.client!r}>"

    def info(self) -> ToolInfo:
        """Name, description and input schema, from the newest listing of the server's tools."""
        info = self.client.tool_info(self.remote_name, self.prefix)
        if info is not None:
            self._last_info = info
        return self._last_info

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Call the tool on the server with the model's JSON ``arguments``; returns the result
        text (images and sounds as placeholders such as ``[image/png, 1234 bytes]``; agents
        use :meth:`invoke_content`, which returns them as parts).

        A result the server marks as an error (``isError``) is returned as
        ``"error from tool <name>: <text>"`` for the model to read, not raised.

        Raises:
            ToolArgumentsError: ``arguments`` is not a JSON object.
            MCPConnectionError: the server could not be reached or died during the call.
            MCPServerError: the server refused the request (for example an unknown tool).
            ToolTimeoutError: the call took longer than the client's ``timeout``.
            AgentCancelledError: the agent run was cancelled during the call.
        """
        return result_text(self.name, self._call(arguments))

    def invoke_content(self, arguments: str, **tool_options: Any) -> str | tuple[ContentPart, ...]:
        """Call the tool on the server; returns the result text, or content parts when it
        holds images, sounds or binary resources (see :mod:`agentkit.mcp`).

        Raises:
            ToolError: as :meth:`invoke` (its subclasses), and for a result of more blocks
                than a message may have parts or with media the part checks refuse.
        """
        return result_content(self.name, self._call(arguments))

    def _call(self, arguments: str) -> dict[str, Any]:
        """The server's result for the model's JSON ``arguments``, in its wire shape."""
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as error:
            raise ToolArgumentsError(
                f"{self.name}: the arguments are not valid JSON ({error.msg} at position "
                f"{error.pos}): {arguments[:200]!r}",
                tool_name=self.name,
            ) from None
        if not isinstance(parsed, dict):
            raise ToolArgumentsError(
                f"{self.name}: the arguments must be a JSON object, got {type(parsed).__name__} "
                f"{arguments[:200]!r}",
                tool_name=self.name,
            )
        return call_with_elicitation(self.client, self.remote_name, parsed, self.name)


def call_with_elicitation(
    client: ToolSource, remote_name: str, arguments: dict[str, Any], tool_name: str
) -> dict[str, Any]:
    """Call a tool; a server's question during the call interrupts the agent run.

    See :mod:`agentkit.mcp._elicit`: the first question is cancelled at the server and the
    run interrupts with an :class:`~agentkit.mcp.MCPElicitation`; resumed, the call is made
    again and the answer given when the server asks.
    """
    from agentkit._interrupt import get_interrupt_state, interrupt
    from agentkit._runctx import current_frame
    from agentkit.mcp import _elicit

    frame = current_frame()
    in_tool_call = frame is not None and frame.tool is not None
    answer: Any = _elicit.NO_ANSWER
    asked = _elicit.asked_before(get_interrupt_state()) if in_tool_call else None
    if asked is not None:
        answer = interrupt(asked, state=_elicit.interrupt_state(asked.message, asked.schema))
        _elicit.check_answer(answer, asked.schema, tool_name)
    with client._elicitations.call(answer if in_tool_call else None) as slot:
        result = client._call_tool(remote_name, arguments, tool_name)
    if slot.asked is not None:
        message, schema = slot.asked
        interrupt(
            _elicit.MCPElicitation(message, schema),
            state=_elicit.interrupt_state(message, schema),
        )
    return result
