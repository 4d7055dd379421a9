"""MCP tools from synchronous code: the tools of a Model Context Protocol server as agentkit tools.

Needs the ``mcp`` extra (``pip install 'agentkit[mcp]'``; mcp 1.x and 2.x are supported),
imported when the first client is made::

    from agentkit.mcp import MCPClient

    with MCPClient.stdio("python", ["server.py"]) as client:
        agent = ChatModelAgent("assistant", "answers questions", model, tools=client.tools())
        ...

    client = MCPClient.http("http://localhost:8000/mcp", headers={"Authorization": "Bearer ..."})

Each client's connection is a task on agentkit's own asyncio event loop, which runs in one
background thread per process (``agentkit-asyncio``, started on first use, shared with
``async def`` tools, joined at exit); ``close()`` ends the connection. Nothing runs in the
caller's event loop, so clients work the same in scripts, Flask request threads and Jupyter
notebooks.

Results: text content becomes the tool message; images, audio and embedded binary resources
become content parts of it (:class:`~agentkit.ImagePart`, :class:`~agentkit.AudioPart`,
:class:`~agentkit.FilePart`), checked and capped like any part (a server that sends more blocks
than :class:`~agentkit.schema.PartLimits` allows, or a broken image, is refused with a
:class:`~agentkit.ToolError`); a result the server marks with ``isError`` goes to the model
as ``error from tool <name>: <text>``. Failures of the call itself raise
:class:`~agentkit.ToolError` subclasses (:class:`MCPConnectionError`, :class:`MCPServerError`,
:class:`~agentkit.ToolTimeoutError`), which the agent handles with its tool-error policy.

Limits and healing: every message a server sends (a tool result, a tool listing) is held to
the client's ``max_message_bytes`` (16 MiB by default). A server that breaks the protocol (a
line that is not UTF-8, not JSON or not JSON-RPC, or a message over the limit) fails the calls
in flight with :class:`MCPProtocolError`; its connection is dropped and the next call
connects again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach, present
from agentkit.mcp._elicit import MCPElicitation, MCPElicitationError
from agentkit.mcp._errors import (
    MCPClientClosedError,
    MCPConnectionError,
    MCPNotInstalledError,
    MCPProtocolError,
    MCPServerError,
)
from agentkit.mcp._tool import MCPTool

__all__ = [
    "AgentMCPServer",
    "MCPClient",
    "MCPClientClosedError",
    "MCPConnectionError",
    "MCPElicitation",
    "MCPElicitationError",
    "MCPNotInstalledError",
    "MCPProtocolError",
    "MCPServerError",
    "MCPTool",
    "to_mcp_server",
]

# Public objects present themselves as ``agentkit.mcp.X`` in reprs and tracebacks (the client
# does so itself, as it loads on first use).
present(
    (
        MCPClientClosedError,
        MCPConnectionError,
        MCPElicitation,
        MCPElicitationError,
        MCPNotInstalledError,
        MCPProtocolError,
        MCPServerError,
        MCPTool,
    ),
    __name__,
)

if TYPE_CHECKING:
    from agentkit.mcp._client import MCPClient
    from agentkit.mcp._server import AgentMCPServer, to_mcp_server
else:
    # The client brings asyncio and the mcp version probe: loaded when first asked for, so
    # ``import agentkit.mcp`` (and loading a checkpoint that holds an MCP error) stays cheap.
    __getattr__, __dir__ = attach(
        __name__,
        {
            "MCPClient": "agentkit.mcp._client",
            "AgentMCPServer": "agentkit.mcp._server",
            "to_mcp_server": "agentkit.mcp._server",
        },
    )
