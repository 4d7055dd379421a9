"""A test MCP server with tools that add, fail, sleep, die, grow, send big texts and meet.

    python tests/mcp_servers/toolbox.py                      # stdio
    python tests/mcp_servers/toolbox.py http [--port N]      # streamable HTTP on 127.0.0.1
    python tests/mcp_servers/toolbox.py sse [--port N]       # HTTP+SSE on 127.0.0.1

Over HTTP it prints ``PORT <n>`` on stdout once it listens (port 0 picks a free one).
Written for both mcp 1.x (FastMCP) and 2.x (MCPServer).
"""

# No ``from __future__ import annotations``: early mcp 1.x servers need real annotations.
import argparse
import asyncio
import os
import socket
import sys
from typing import Any

try:  # mcp 2.x
    from mcp.server.mcpserver import Context, Image, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    # mcp 1.x names: the installed mcp 2.x type-checks the branch above.
    from mcp.server.fastmcp import Context, Image  # type: ignore[attr-defined, no-redef]
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[attr-defined, no-redef]
    from mcp.server.fastmcp.exceptions import (  # type: ignore[import-not-found, no-redef]
        ToolError,
    )

server = MCPServer("toolbox", log_level="WARNING")

_cancelled = 0
_cancelled_event: asyncio.Event | None = None
_started_event: asyncio.Event | None = None
_waiting: list[asyncio.Event] = []
_arrived = 0


def _cancel_event() -> asyncio.Event:
    global _cancelled_event
    if _cancelled_event is None:
        _cancelled_event = asyncio.Event()
    return _cancelled_event


def _started() -> asyncio.Event:
    global _started_event
    if _started_event is None:
        _started_event = asyncio.Event()
    return _started_event


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def fail(message: str) -> str:
    """Fail with the given message (an MCP error result)."""
    raise ToolError(message)


# A 1x1 red PNG (70 bytes).
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f0005000201e2d6e1c10000000049454e44ae426082"
)


@server.tool()
def picture() -> Image:
    """A tiny PNG image (70 bytes)."""
    return Image(data=PNG, format="png")


@server.tool()
def pictures(count: int) -> list[Image]:
    """``count`` copies of the tiny PNG."""
    return [Image(data=PNG, format="png")] * count


@server.tool()
def broken_picture() -> Image:
    """A PNG cut after its signature (8 bytes)."""
    return Image(data=PNG[:8], format="png")


@server.tool()
def big(size: int) -> str:
    """A text of ``size`` bytes."""
    return "x" * size


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer; counts calls cancelled while sleeping."""
    global _cancelled
    _started().set()
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _cancelled += 1
        _cancel_event().set()
        raise
    return f"slept {seconds}"


@server.tool()
async def cancelled_calls(wait: bool = False) -> int:
    """How many slow calls were cancelled; with wait, first wait (30 s at most) for one."""
    if wait:
        await asyncio.wait_for(_cancel_event().wait(), 30)
    return _cancelled


@server.tool()
async def slow_started() -> str:
    """Return once a slow call is sleeping (30 s at most); HTTP clients share the server."""
    await asyncio.wait_for(_started().wait(), 30)
    return "started"


@server.tool()
async def meet(count: int) -> str:
    """Return once ``count`` calls of meet are running at the same time (30 s at most)."""
    global _arrived
    _arrived += 1
    event = asyncio.Event()
    _waiting.append(event)
    if _arrived >= count:
        for waiting in _waiting:
            waiting.set()
    await asyncio.wait_for(event.wait(), 30)
    return f"met {count}"


@server.tool()
def request_header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header ("" over stdio or when it is missing)."""
    headers = getattr(ctx, "headers", None)  # mcp 2.x
    if headers is None:  # mcp 1.x
        request = ctx.request_context.request
        headers = getattr(request, "headers", None) or {}
    return str(headers.get(name.lower(), ""))


@server.tool()
def die() -> str:
    """Exit the server process in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and tell the client that the tool list changed."""

    def extra(value: str) -> str:
        return f"{name}: {value}"

    server.add_tool(extra, name=name, description=f"A tool added at run time ({name}).")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


def _serve_http(kind: str, port: int) -> None:
    import uvicorn

    app: Any = server.streamable_http_app() if kind == "http" else server.sse_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uv_server = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    asyncio.run(uv_server.serve(sockets=[sock]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", nargs="?", default="stdio", choices=["stdio", "http", "sse"])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run()
    else:
        _serve_http(args.transport, args.port)


if __name__ == "__main__":
    main()
