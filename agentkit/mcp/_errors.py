"""The errors of :mod:`agentkit.mcp`.

Failures of a tool call are :class:`~agentkit.ToolError` subclasses, so an agent handles them
with its tool-error policy like any other tool failure::

    AgentKitError
    ├── ToolError
    │   ├── MCPConnectionError (ConnectionError)   the server could not be reached, or died
    │   │   └── MCPProtocolError                   it broke the protocol (bad or oversized message)
    │   ├── MCPServerError                         the server refused a request (JSON-RPC error)
    │   └── ToolTimeoutError (TimeoutError)        a call took longer than its timeout
    ├── MCPClientClosedError (RuntimeError)        the client was used after close()
    └── MCPNotInstalledError (ImportError)         the ``mcp`` package is missing

A tool that *ran* and reported a failure (an MCP result with ``isError``) is not an exception:
its text goes back to the model as the tool's result, marked as an error.
"""

from __future__ import annotations

from typing import Any

from agentkit._persist import persisted
from agentkit.errors import AgentKitError, ToolError

__all__ = [
    "MCPClientClosedError",
    "MCPConnectionError",
    "MCPNotInstalledError",
    "MCPProtocolError",
    "MCPServerError",
]


@persisted("agentkit.mcp.MCPConnectionError")  # errors can be kept in checkpoints
class MCPConnectionError(ToolError, ConnectionError):
    """The MCP server could not be started or reached, or the connection broke during a call.

    The client reconnects on its next use, so a later call may succeed.
    """


@persisted("agentkit.mcp.MCPProtocolError")
class MCPProtocolError(MCPConnectionError):
    """The MCP server sent something that is not a valid MCP message, so its connection was dropped.

    A line of a stdio server that is not UTF-8, not JSON or not a JSON-RPC message, or a
    message larger than the client's ``max_message_bytes``. The call in flight fails with
    this error at once, and so does every other call waiting on the same connection; the
    client stops that connection (a stdio server's process is killed) and the next call
    connects again.
    """


@persisted("agentkit.mcp.MCPServerError")
class MCPServerError(ToolError):
    """The MCP server answered a request with a JSON-RPC error instead of a result.

    Attributes:
        code: the JSON-RPC error code the server sent.
    """

    def __init__(
        self, message: str, *, code: int = 0, tool_name: str = "", call_id: str = ""
    ) -> None:
        super().__init__(message, tool_name=tool_name, call_id=call_id)
        self.code = code

    def __reduce__(self) -> tuple[Any, ...]:
        state = {"tool_name": self.tool_name, "call_id": self.call_id, "code": self.code}
        return (type(self), (str(self),), state)


@persisted("agentkit.mcp.MCPClientClosedError")
class MCPClientClosedError(AgentKitError, RuntimeError):
    """An :class:`~agentkit.mcp.MCPClient` (or one of its tools) was used after ``close()``."""


@persisted("agentkit.mcp.MCPNotInstalledError")
class MCPNotInstalledError(AgentKitError, ImportError):
    """The ``mcp`` package, which :mod:`agentkit.mcp` needs, is not installed."""
