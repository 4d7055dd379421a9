"""The one place that knows the ``mcp`` package: its import, its versions and their differences.

agentkit supports the ``mcp`` package's 1.x and 2.x lines. They share the client session
(``ClientSession`` over a pair of streams) and the wire format, but differ in transport
functions, HTTP client library and Python attribute names of the types; everything else in
:mod:`agentkit.mcp` works on plain JSON dictionaries (the wire shape), which both lines
produce with ``model_dump(by_alias=True, mode="json")``.

The modules are looked up with :func:`importlib.import_module`, so the rest of the package is
typed against neither line.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from importlib import metadata
from types import ModuleType
from typing import Any, TextIO

from agentkit.mcp._errors import MCPNotInstalledError

__all__ = [
    "CONNECTION_CLOSED",
    "Streams",
    "call_tool",
    "client_session",
    "error_details",
    "list_all_tools",
    "mcp_major_version",
    "notification_method",
    "open_sse",
    "open_stdio",
    "open_streamable_http",
    "require_mcp",
    "wire",
]

_log = logging.getLogger("agentkit.mcp")

CONNECTION_CLOSED = -32000
"""JSON-RPC code both lines use for "the connection closed before the response came"."""

Streams = tuple[Any, Any]
"""The (read stream, write stream) pair a transport yields."""

_CANCEL_NOTICE_TIMEOUT = 5.0  # seconds to hand a cancel notice to a (possibly dead) transport
_HTTP_TIMEOUT = 30.0  # seconds to connect, write, get a pooled connection
_HTTP_READ_TIMEOUT = 300.0  # seconds between two reads of a response stream
_INSTALL_HINT = "install it with: pip install 'agentkit[mcp]'"


def _module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise MCPNotInstalledError(
            f"agentkit.mcp needs the 'mcp' package ({name} could not be imported: {error}); "
            + _INSTALL_HINT
        ) from error


def require_mcp() -> None:
    """Import ``mcp`` now, raising :class:`MCPNotInstalledError` with the fix if it is missing."""
    mcp_major_version()
    _module("mcp")


def mcp_major_version() -> int:
    """The major version of the installed ``mcp`` package (1 or 2)."""
    try:
        version = metadata.version("mcp")
    except metadata.PackageNotFoundError as error:
        raise MCPNotInstalledError(
            "agentkit.mcp needs the 'mcp' package; " + _INSTALL_HINT
        ) from error
    major = int(version.split(".", 1)[0])
    if major not in (1, 2):
        raise MCPNotInstalledError(
            f"agentkit.mcp supports mcp 1.x and 2.x, but mcp {version} is installed; "
            "install a supported version with: pip install 'mcp>=1.9,<3'"
        )
    return major


@asynccontextmanager
async def open_stdio(
    command: str, args: Sequence[str], env: Mapping[str, str] | None, cwd: str | None
) -> AsyncIterator[Streams]:
    """Start the server process and yield the streams to its stdin and stdout."""
    stdio = _module("mcp.client.stdio")
    params = stdio.StdioServerParameters(
        command=command, args=list(args), env=dict(env) if env is not None else None, cwd=cwd
    )
    async with stdio.stdio_client(params, errlog=_server_stderr()) as streams:
        yield streams[0], streams[1]


def _server_stderr() -> TextIO:
    """Where a server process writes its errors: our stderr, if it is a real file.

    In Jupyter ``sys.stderr`` is the kernel's stream object, which has no file descriptor for
    a child process; the kernel process's own stderr (``sys.__stderr__``) has one.
    """
    for stream in (sys.stderr, sys.__stderr__):
        if stream is None:
            continue
        try:
            stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        return stream
    return _devnull()


@functools.lru_cache(maxsize=1)
def _devnull() -> TextIO:
    return open(os.devnull, "w")  # kept open: shared by every server of the process


@asynccontextmanager
async def open_streamable_http(
    url: str, headers: Mapping[str, str] | None
) -> AsyncIterator[Streams]:
    """Connect with the streamable HTTP transport."""
    module = _module("mcp.client.streamable_http")
    if mcp_major_version() >= 2:
        if not headers:
            async with module.streamable_http_client(url) as streams:
                yield streams[0], streams[1]
            return
        # 2.x takes headers through a configured client of its HTTP library, httpx2, with the
        # timeouts its own default client uses (a response stream may stay open for long).
        httpx2 = _module("httpx2")
        http_client = httpx2.AsyncClient(
            headers=dict(headers), timeout=httpx2.Timeout(_HTTP_TIMEOUT, read=_HTTP_READ_TIMEOUT)
        )
        opener = module.streamable_http_client(url, http_client=http_client)
        async with http_client, opener as streams:
            yield streams[0], streams[1]
        return
    with warnings.catch_warnings():
        # Late 1.x releases deprecate this spelling; it is the one every 1.x release has.
        warnings.simplefilter("ignore", DeprecationWarning)
        opener = module.streamablehttp_client(url, headers=dict(headers or {}))
    async with opener as streams:
        yield streams[0], streams[1]


@asynccontextmanager
async def open_sse(url: str, headers: Mapping[str, str] | None) -> AsyncIterator[Streams]:
    """Connect with the older HTTP+SSE transport."""
    module = _module("mcp.client.sse")
    async with module.sse_client(url, headers=dict(headers or {})) as streams:
        yield streams[0], streams[1]


def client_session(read: Any, write: Any, on_message: Callable[[Any], Any]) -> Any:
    """A ``ClientSession`` over ``read``/``write`` (an async context manager, not yet entered).

    ``on_message`` (a coroutine function) gets every server notification and transport error.
    """
    session_module = _module("mcp.client.session")
    return session_module.ClientSession(read, write, message_handler=on_message)


def wire(model: Any) -> dict[str, Any]:
    """The JSON (wire) shape of an ``mcp`` type: camelCase keys, ``None`` fields left out."""
    data = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    if not isinstance(data, dict):
        raise TypeError(f"expected an MCP object, got {type(model).__name__}")
    return data


def error_details(error: BaseException) -> tuple[int, str] | None:
    """``(code, message)`` of an error the server (or the session) reported, else ``None``.

    1.x raises ``McpError``, 2.x ``MCPError``; both carry the JSON-RPC ``ErrorData``.
    """
    exceptions = _module("mcp.shared.exceptions")
    error_type = exceptions.MCPError if mcp_major_version() >= 2 else exceptions.McpError
    if not isinstance(error, error_type):
        return None
    data = error.error
    return int(data.code), str(data.message)


def notification_method(message: Any) -> str | None:
    """The JSON-RPC method of a server notification, or ``None`` for anything else."""
    pydantic = _module("pydantic")
    if not isinstance(message, pydantic.BaseModel):
        return None  # 1.x also hands server requests (RequestResponder) to the handler
    method = wire(message).get("method")
    return method if isinstance(method, str) else None


async def list_all_tools(session: Any) -> list[dict[str, Any]]:
    """Every tool the server offers (all pages), in the wire shape."""
    types = _module("mcp.types")
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        if cursor is None:
            result = await session.list_tools()
        else:
            result = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        page = wire(result)
        tools.extend(page.get("tools", []))
        cursor = page.get("nextCursor")
        if not cursor:
            return tools


async def call_tool(session: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool and return its result in the wire shape (``content``, ``isError``, ...).

    Cancelling the task cancels the request at the server: 2.x sends
    ``notifications/cancelled`` itself, for 1.x this function does.
    """
    if mcp_major_version() >= 2:
        return wire(await session.call_tool(name, arguments))
    # 1.x numbers requests with this counter and reads it before its first await, so it
    # is this call's id; no public API tells it.
    request_id = session._request_id
    try:
        return wire(await session.call_tool(name, arguments))
    except asyncio.CancelledError:
        await _send_cancelled(session, request_id)
        raise


async def _send_cancelled(session: Any, request_id: int) -> None:
    types = _module("mcp.types")
    try:
        notification = types.ClientNotification(
            types.CancelledNotification(
                method="notifications/cancelled",  # early 1.x releases have no default
                params=types.CancelledNotificationParams(
                    requestId=request_id, reason="cancelled by the client"
                ),
            )
        )
        await asyncio.wait_for(session.send_notification(notification), _CANCEL_NOTICE_TIMEOUT)
    except Exception:  # best effort: the server may be gone already
        _log.debug("telling the MCP server that request %s was cancelled failed", request_id,
                   exc_info=True)
