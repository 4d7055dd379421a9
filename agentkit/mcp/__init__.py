"""MCP tools from synchronous code: the tools of a Model Context Protocol server as agentkit tools.

Needs the ``mcp`` extra (``pip install 'agentkit[mcp]'``; mcp 1.x and 2.x are supported),
imported when the first client is made::

    from agentkit.mcp import MCPClient

    with MCPClient.stdio("python", ["server.py"]) as client:
        agent = ChatModelAgent("assistant", "answers questions", model, tools=client.tools())
        ...

    client = MCPClient.http("http://localhost:8000/mcp", headers={"Authorization": "Bearer ..."})

Each client keeps one background thread with its own asyncio event loop (started on first
use, ended by ``close()``); nothing runs in the caller's event loop, so clients work the same
in scripts, Flask request threads and Jupyter notebooks.

Results: text content becomes the tool message; images and audio become placeholders such
as ``[image/png, 1234 bytes]``; a result the server marks with ``isError`` goes to the model
as ``error from tool <name>: <text>``. Failures of the call itself raise
:class:`~agentkit.ToolError` subclasses (:class:`MCPConnectionError`, :class:`MCPServerError`,
:class:`~agentkit.ToolTimeoutError`), which the agent handles with its tool-error policy.
"""

from __future__ import annotations

from agentkit.mcp._client import MCPClient
from agentkit.mcp._errors import (
    MCPClientClosedError,
    MCPConnectionError,
    MCPNotInstalledError,
    MCPServerError,
)
from agentkit.mcp._tool import MCPTool

__all__ = [
    "MCPClient",
    "MCPClientClosedError",
    "MCPConnectionError",
    "MCPNotInstalledError",
    "MCPServerError",
    "MCPTool",
]

# Public objects present themselves as ``agentkit.mcp.X`` in reprs and tracebacks.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
