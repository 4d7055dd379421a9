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
import inspect
import logging
import warnings
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from importlib import metadata
from types import ModuleType
from typing import Any

from agentkit.errors import AgentKitTypeError, AgentKitValueError
from agentkit.mcp._errors import MCPNotInstalledError
from agentkit.mcp._http import capped_client
from agentkit.mcp._wire import Wire, excerpt

__all__ = [
    "CONNECTION_CLOSED",
    "PARSE_ERROR",
    "Streams",
    "call_tool",
    "client_session",
    "dump_message",
    "elicitation_callback",
    "logging_callback",
    "error_details",
    "list_roots_callback",
    "is_parse_error",
    "list_all_tools",
    "mcp_major_version",
    "notification_of",
    "open_sse",
    "open_streamable_http",
    "parse_message",
    "require_mcp",
    "send_roots_list_changed",
    "server_environment",
    "wire_shape",
]

_log = logging.getLogger("agentkit.mcp")

CONNECTION_CLOSED = -32000
"""JSON-RPC code both lines use for "the connection closed before the response came"."""

PARSE_ERROR = -32700
"""JSON-RPC code for "the message could not be parsed" (both lines use it for a bad answer)."""

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
            "install a supported version with: pip install 'mcp>=1.10,<3'"
        )
    return major


def server_environment(env: Mapping[str, str] | None) -> dict[str, str]:
    """The environment of a stdio server: the ``mcp`` package's minimal one, plus ``env``.

    The minimal one (``PATH``, ``HOME``, ``USER``, ...) keeps secrets such as API keys of
    this process away from servers.
    """
    stdio = _module("mcp.client.stdio")
    return {**stdio.get_default_environment(), **(env or {})}


def parse_message(line: bytes) -> Any:
    """The session message (``SessionMessage``) of one JSON-RPC message sent as ``line``.

    Raises:
        ValueError: saying what ``line`` is instead: not UTF-8, not JSON, or JSON that is
            not a JSON-RPC message (with the start of the line).
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        raise AgentKitValueError(
            f"a line that is not UTF-8 (byte {line[error.start]:#04x} at position "
            f"{error.start}): {excerpt(line)}"
        ) from None
    pydantic = _module("pydantic")
    types = _module("mcp.types")
    try:
        if mcp_major_version() >= 2:
            message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        else:
            message = types.JSONRPCMessage.model_validate_json(text)
    except pydantic.ValidationError as error:
        if any(each["type"] == "json_invalid" for each in error.errors()):
            raise AgentKitValueError(f"a line that is not JSON: {excerpt(line)}") from None
        raise AgentKitValueError(
            f"a line that is JSON but not a JSON-RPC message: {excerpt(line)}"
        ) from None
    return _module("mcp.shared.message").SessionMessage(message)


def dump_message(session_message: Any) -> bytes:
    """The JSON of a session message to send, as both lines of the package write it."""
    message = session_message.message
    if mcp_major_version() >= 2:
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
    else:
        text = message.model_dump_json(by_alias=True, exclude_none=True)
    return str(text).encode("utf-8")


@asynccontextmanager
async def open_streamable_http(
    url: str, headers: Mapping[str, str] | None, wire: Wire
) -> AsyncIterator[Streams]:
    """Connect with the streamable HTTP transport, answers held to ``wire``'s limit."""
    module = _module("mcp.client.streamable_http")
    if mcp_major_version() >= 2:
        # 2.x takes a configured client of its HTTP library, httpx2.
        http_client = _client_factory(wire)(headers=dict(headers or {}))
        options: dict[str, Any] = {"http_client": http_client}
        if _accepts(module.streamable_http_client, "max_sse_event_size"):
            options["max_sse_event_size"] = None  # the client's own limit covers events
        async with http_client, module.streamable_http_client(url, **options) as streams:
            yield streams[0], streams[1]
        return
    with warnings.catch_warnings():
        # Late 1.x releases deprecate this spelling; it is the one every 1.x release has.
        warnings.simplefilter("ignore", DeprecationWarning)
        opener = module.streamablehttp_client(
            url, headers=dict(headers or {}), httpx_client_factory=_client_factory(wire)
        )
    async with opener as streams:
        yield streams[0], streams[1]


@asynccontextmanager
async def open_sse(
    url: str, headers: Mapping[str, str] | None, wire: Wire
) -> AsyncIterator[Streams]:
    """Connect with the older HTTP+SSE transport, answers held to ``wire``'s limit."""
    module = _module("mcp.client.sse")
    factory = _client_factory(wire)
    async with module.sse_client(
        url, headers=dict(headers or {}), httpx_client_factory=factory
    ) as streams:
        yield streams[0], streams[1]


def _client_factory(wire: Wire) -> Callable[..., Any]:
    """An ``httpx_client_factory`` for the transports: the package's client, held to the limit.

    With the timeouts the package's own clients use (a response stream may stay open long).
    """
    httpx = _module("httpx2" if mcp_major_version() >= 2 else "httpx")

    def make(
        headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
    ) -> Any:
        options: dict[str, Any] = {
            "timeout": timeout or httpx.Timeout(_HTTP_TIMEOUT, read=_HTTP_READ_TIMEOUT)
        }
        if auth is not None:
            options["auth"] = auth
        if mcp_major_version() < 2:
            options["follow_redirects"] = True  # as 1.x's own factory does
        return capped_client(httpx, wire, dict(headers or {}), **options)

    return make


@functools.cache
def _accepts(function: Callable[..., Any], parameter: str) -> bool:
    return parameter in inspect.signature(function).parameters


def client_session(
    read: Any, write: Any, on_message: Callable[[Any], Any], **options: Any
) -> Any:
    """A ``ClientSession`` over ``read``/``write`` (an async context manager, not yet entered).

    ``on_message`` (a coroutine function) gets every server notification and transport error;
    ``options`` are further callbacks of the session (``elicitation_callback``, ...).
    """
    session_module = _module("mcp.client.session")
    return session_module.ClientSession(read, write, message_handler=on_message, **options)


def elicitation_callback(answer: Callable[[str, dict[str, Any]], dict[str, Any]]) -> Any:
    """A session's ``elicitation_callback`` that answers with ``answer(message, schema)``
    (an ``ElicitResult`` in the wire shape)."""
    types = _module("mcp.types")

    async def on_elicit(context: Any, params: Any) -> Any:
        asked = wire_shape(params)
        result = answer(str(asked.get("message", "")), dict(asked.get("requestedSchema") or {}))
        return types.ElicitResult.model_validate(result)

    return on_elicit


def logging_callback(handle: Callable[[dict[str, Any]], None]) -> Any:
    """A session's ``logging_callback`` handing each log message's params (wire shape) on."""

    async def on_log(params: Any) -> None:
        handle(wire_shape(params))

    return on_log


def list_roots_callback(roots: Callable[[], Sequence[Mapping[str, str]]]) -> Any:
    """A session's ``list_roots_callback`` answering ``roots/list`` with ``roots()`` (wire
    shape; read at each request, so a change is seen by the server's next listing)."""
    types = _module("mcp.types")

    async def on_list_roots(context: Any) -> Any:
        return types.ListRootsResult.model_validate({"roots": [dict(root) for root in roots()]})

    return on_list_roots


async def send_roots_list_changed(session: Any) -> None:
    """Tell the server the roots changed (``notifications/roots/list_changed``)."""
    types = _module("mcp.types")
    if mcp_major_version() >= 2:
        # Not the session's send_roots_list_changed: 2.x marks it deprecated (2026 drafts),
        # and its warning would reach the user's code.
        await session.send_notification(types.RootsListChangedNotification())
    else:
        await session.send_roots_list_changed()


def wire_shape(model: Any) -> dict[str, Any]:
    """The JSON (wire) shape of an ``mcp`` type: camelCase keys, ``None`` fields left out."""
    data = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    if not isinstance(data, dict):
        raise AgentKitTypeError(f"expected an MCP object, got {type(model).__name__}")
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


def is_parse_error(error: BaseException) -> bool:
    """Whether ``error`` (handed to the session's message handler) is a message that did not parse.

    Both lines parse messages with pydantic; other errors handed over (a network failure, an
    answer to a request the session no longer waits for) are not the server's protocol errors.
    """
    return isinstance(error, _module("pydantic").ValidationError)


def notification_of(message: Any) -> tuple[str, dict[str, Any]] | None:
    """The JSON-RPC method and params (wire shape, ``{}`` without) of a server notification,
    or ``None`` for anything else."""
    pydantic = _module("pydantic")
    if not isinstance(message, pydantic.BaseModel):
        return None  # 1.x also hands server requests (RequestResponder) to the handler
    shape = wire_shape(message)
    method, params = shape.get("method"), shape.get("params")
    if not isinstance(method, str):
        return None
    return method, params if isinstance(params, dict) else {}


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
        page = wire_shape(result)
        tools.extend(page.get("tools", []))
        cursor = page.get("nextCursor")
        if not cursor:
            return tools


async def call_tool(
    session: Any,
    name: str,
    arguments: dict[str, Any],
    progress: Callable[[float, float | None, str | None], Any] | None = None,
) -> dict[str, Any]:
    """Call a tool and return its result in the wire shape (``content``, ``isError``, ...).

    With ``progress`` (a coroutine function of progress, total, message), the call asks for
    progress notifications. Cancelling the task cancels the request at the server: 2.x sends
    ``notifications/cancelled`` itself, for 1.x this function does.
    """
    options: dict[str, Any] = {} if progress is None else {"progress_callback": progress}
    if mcp_major_version() >= 2:
        return wire_shape(await session.call_tool(name, arguments, **options))
    # 1.x numbers requests with this counter and reads it before its first await, so it
    # is this call's id; no public API tells it.
    request_id = session._request_id
    try:
        return wire_shape(await session.call_tool(name, arguments, **options))
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
