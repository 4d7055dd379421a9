"""MCPClient: a synchronous client of one MCP server, and the source of its tools."""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar

import attrs

from agentkit._aioloop import in_loop_thread
from agentkit._runctx import abort_on_cancel, check_cancelled
from agentkit.errors import (
    AgentKitRuntimeError,
    AgentKitTypeError,
    AgentKitValueError,
    ToolTimeoutError,
)
from agentkit.mcp import _catalog, _compat, _notices, _sampling, _stdio
from agentkit.mcp._connection import Connection, describe_error
from agentkit.mcp._elicit import ElicitationRouter
from agentkit.mcp._endpoint import Endpoint, redacted, session_ended
from agentkit.mcp._errors import (
    MCPClientClosedError,
    MCPConnectionError,
    MCPProtocolError,
    MCPServerError,
)
from agentkit.mcp._roots import RootLike, normalize_roots
from agentkit.mcp._tool import MCPTool
from agentkit.mcp._wire import DEFAULT_MAX_MESSAGE_BYTES, check_max_message_bytes, unparsable
from agentkit.models._base import ChatModel
from agentkit.schema import ToolInfo
from agentkit.tools._base import BaseTool

__all__ = ["MCPClient"]

T = TypeVar("T")
HTTPTransport = Literal["auto", "streamable-http", "sse"]

_log = logging.getLogger("agentkit.mcp")

_TOOLS_CHANGED = "notifications/tools/list_changed"
_RESOURCE_UPDATED = "notifications/resources/updated"
_STOP_ALLOWANCE = 10.0  # seconds a given-up connection attempt may take to stop, past its timeout


class _Attempt:
    """A connection attempt in progress, which other callers of the client wait for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._waiters: list[threading.Event] = []

    def wait(self, timeout: float) -> bool:
        """Wait until the attempt ended (``True``) or ``timeout`` passed; a cancel ends it too.

        Raises:
            AgentCancelledError: the agent run was cancelled while waiting.
        """
        woken = threading.Event()
        with self._lock:
            if self._done:
                return True
            self._waiters.append(woken)
        with abort_on_cancel(woken.set):
            woken.wait(timeout)
        check_cancelled()
        return self._done

    def finish(self) -> None:
        """The attempt ended (connected or not): wake every waiter."""
        with self._lock:
            self._done = True
            waiters, self._waiters = self._waiters, []
        for woken in waiters:
            woken.set()


class MCPClient:
    """A synchronous client of one MCP server; its tools are agentkit tools.

    Make one with :meth:`stdio` (a server started as a subprocess) or :meth:`http` (a server at
    a URL), then take its tools for an agent::

        with MCPClient.stdio("python", ["weather_server.py"]) as client:
            agent = ChatModelAgent("assistant", "answers", model, tools=client.tools())
            print_events(Runner(agent).query("Weather in Paris?"))

    Threading: the client connects on first use, as a task on agentkit's event loop (one
    background thread per process, shared with ``async def`` tools; the caller's thread and
    any loop running there are not touched), and :meth:`close` ends the connection and waits
    for its end. Tool calls may come from many threads at once. A client
    made before a WSGI server forks its workers works in each worker: a process that
    inherited it starts its own connection. When the connection breaks (the server process
    exits, the HTTP session is gone) the next call reconnects.

    When the server breaks the protocol (a line that is not UTF-8, not JSON or not JSON-RPC,
    or a message over ``max_message_bytes``), the calls in flight fail at once with
    :class:`MCPProtocolError`, the connection is dropped (a stdio server is killed) and the
    next call connects again.

    Notifications: set ``on_log`` to get the server's log messages (each
    ``{"level", "logger", "data"}``), ``on_progress`` to get the progress of tool calls,
    resource reads and prompts (each ``{"tool", "progress", "total", "message"}``, with
    ``"resource"`` (the URI) or ``"prompt"`` (the name) in place of ``"tool"``; the requests
    then ask for progress) and ``on_resource_updated`` to get the updates of the resources
    subscribed to with :meth:`subscribe_resource` (each ``{"uri"}``). They run in agentkit's
    event loop thread: keep them quick. A server's question during a tool call of an agent
    (an elicitation) interrupts the run with an :class:`MCPElicitation`.

    Args:
        timeout: seconds one tool call (or tool listing) may take before it fails with
            :class:`~agentkit.ToolTimeoutError`; ``None`` waits as long as the server takes.
        connect_timeout: seconds to start the server or reach it and finish the MCP handshake
            (for ``transport="auto"``, both transports together).
        max_message_bytes: the largest message the server may send (a tool result, a tool
            listing), in bytes; 16 MiB by default. A larger one is not read past the limit.
        roots: the directories the server may work in, answered to its ``roots/list``
            requests: ``file://`` URIs, paths or ``{"uri", "name"}`` dicts. ``None`` (the
            default) declares no roots capability; :meth:`set_roots` changes them.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeout: float | None,
        connect_timeout: float,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        roots: Iterable[RootLike] | None = None,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise AgentKitValueError(f"timeout must be > 0 seconds or None (got {timeout})")
        if connect_timeout <= 0:
            raise AgentKitValueError(f"connect_timeout must be > 0 seconds (got {connect_timeout})")
        self.max_message_bytes = check_max_message_bytes(max_message_bytes)
        _compat.require_mcp()
        self._endpoint = endpoint
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._state_lock = threading.Lock()
        self._connection: Connection | None = None
        self._connecting: Connection | None = None  # being started, so close() can stop it
        self._attempt: _Attempt | None = None  # the connection attempt in progress
        self._closed = False
        self._pid = os.getpid()
        # The tool list: the last listing and the notification count it reflects.
        self._catalog: dict[str, dict[str, Any]] | None = None
        self._catalog_generation = -1
        self._generation = 0
        self._elicitations = ElicitationRouter()
        self.on_log: Callable[[dict[str, Any]], None] | None = None
        self.on_progress: Callable[[dict[str, Any]], None] | None = None
        self.on_resource_updated: Callable[[dict[str, Any]], None] | None = None
        self._roots = None if roots is None else normalize_roots(roots)
        self._subscriptions: set[str] = set()  # subscribed again on a new connection
        self._sampling: _sampling.SamplingPolicy | None = None
        _live_clients.add(self)

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        roots: Iterable[RootLike] | None = None,
    ) -> MCPClient:
        """A client of a server started as a subprocess, speaking MCP on its stdin and stdout.

        The process starts on first use and is stopped by :meth:`close`; if it exits, the
        next call starts it again. Its environment is not this process's: the ``mcp``
        package passes a minimal one (``PATH``, ``HOME``, ``USER``, ...) so that secrets such
        as API keys do not leak to servers; ``env`` adds variables to it (pass
        ``env=dict(os.environ)`` to hand over everything). The server's stderr goes to this
        process's stderr (in Jupyter, to the kernel's own stderr).

        Every line the server writes to its stdout must be one MCP message of at most
        ``max_message_bytes``; anything else (a log line, a banner) is a protocol error.
        """
        if isinstance(args, str):
            raise AgentKitTypeError(
                f"args must be a sequence of strings, not one string (got {args!r})"
            )
        argv = tuple(args)
        directory = os.fspath(cwd) if cwd is not None else None
        label = " ".join((command, *argv))
        opener = functools.partial(_stdio.open_stdio, command, argv, env, directory)
        return cls(
            Endpoint(label, (opener,)),
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_message_bytes=max_message_bytes,
            roots=roots,
        )

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        transport: HTTPTransport = "auto",
        timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        roots: Iterable[RootLike] | None = None,
    ) -> MCPClient:
        """A client of a server at ``url``, over streamable HTTP (or the older HTTP+SSE).

        ``headers`` go with every request (for example ``{"Authorization": "Bearer ..."}``).
        With ``transport="auto"`` the client tries streamable HTTP first and falls back to
        HTTP+SSE when the server does not speak it; ``"streamable-http"`` or ``"sse"`` pick one.

        Every answer (a JSON body, or one event of an event stream) is held to
        ``max_message_bytes``; the client asks for uncompressed answers and refuses compressed
        ones. (The HTTP+SSE transport of mcp 2.x also refuses events over 1 MiB by itself.)
        """
        if transport not in ("auto", "streamable-http", "sse"):
            raise AgentKitValueError(
                f"transport must be 'auto', 'streamable-http' or 'sse' (got {transport!r})"
            )
        header_map = dict(headers or {})
        streamable = functools.partial(_compat.open_streamable_http, url, header_map)
        sse = functools.partial(_compat.open_sse, url, header_map)
        openers = {
            "auto": (streamable, sse), "streamable-http": (streamable,), "sse": (sse,)
        }[transport]
        parts = urllib.parse.urlsplit(url)
        # (Very short parts are left alone: replacing them would garble the messages.)
        secrets = tuple(part for part in (parts.password, parts.query) if part and len(part) >= 4)
        endpoint = Endpoint(redacted(url), openers, sessions=True, secrets=secrets)
        return cls(
            endpoint,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_message_bytes=max_message_bytes,
            roots=roots,
        )

    def __repr__(self) -> str:
        connected = self._connection is not None
        state = "closed" if self._closed else "connected" if connected else "idle"
        return f"<MCPClient {self._endpoint.label!r} {state}>"

    def __enter__(self) -> MCPClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """``True`` once :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Disconnect (stopping a stdio server) and wait until the connection ended. Idempotent.

        Calls still running fail with :class:`MCPConnectionError`; later use raises
        :class:`MCPClientClosedError`.
        """
        with self._state_lock:
            self._closed = True
            connection, self._connection = self._connection, None
            connecting = self._connecting
            inherited = self._pid != os.getpid()
        _live_clients.discard(self)
        if inherited:
            return
        for each in (connection, connecting):
            if each is not None:
                each.close()

    # --- tools ---

    def tools(
        self, prefix: str | None = None, allow: Iterable[str] | None = None
    ) -> list[BaseTool]:
        """The server's tools as agentkit tools (connecting if needed).

        Name, description and JSON Schema are the server's, as it sent them. ``prefix`` is put
        before every name (``prefix="fs_"`` makes ``read_file`` ``fs_read_file``), to keep
        tools of several servers apart; ``allow`` keeps only the tools with these names (the
        server's, or prefixed), in the server's order; a name the server does not have is a
        ``ValueError``.

        The list is listed again after the server announces a change
        (``notifications/tools/list_changed``); tools already handed out describe themselves
        with the newest listing, and a later ``tools()`` call includes tools added since.

        Raises:
            MCPConnectionError: the server could not be reached.
            ToolTimeoutError: the listing took longer than ``timeout``.
        """
        prefix = prefix or ""
        allowed = None if allow is None else ({allow} if isinstance(allow, str) else set(allow))
        catalog = self._fresh_catalog()
        if allowed is None:
            return [MCPTool(self, name, prefix) for name in catalog]
        known = set(catalog) | {prefix + name for name in catalog}
        unknown = sorted(allowed - known)
        if unknown:
            raise AgentKitValueError(
                f"allow names tools the MCP server {self._endpoint.label} does not have: "
                f"{', '.join(unknown)} (it has: {', '.join(catalog) or 'no tools'})"
            )
        return [
            MCPTool(self, name, prefix)
            for name in catalog
            if name in allowed or prefix + name in allowed
        ]

    def tool_info(self, remote_name: str, prefix: str = "") -> ToolInfo | None:
        """The newest known description of the server's tool ``remote_name`` (no network)."""
        with self._state_lock:
            entry = None if self._catalog is None else self._catalog.get(remote_name)
        if entry is None:
            return None
        parameters = entry.get("inputSchema") or {"type": "object", "properties": {}}
        return ToolInfo(prefix + remote_name, entry.get("description") or "", dict(parameters))

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call the server's tool ``name`` and return its raw result (the MCP wire shape).

        For code that wants the result's parts (``content``, ``structuredContent``,
        ``isError``); agents use :meth:`tools` instead.

        Raises:
            MCPConnectionError, MCPServerError, ToolTimeoutError: see :mod:`agentkit.mcp`.
            AgentCancelledError: the agent run was cancelled during the call (the call is
                cancelled at the server too).
        """
        return self._call_tool(name, dict(arguments or {}), name)

    # --- what the client offers the server (elicitation, logging, sampling) ---

    def allow_sampling(
        self,
        model: ChatModel,
        *,
        max_tokens: int = 1024,
        max_requests: int = 20,
        max_input_chars: int = 100_000,
    ) -> None:
        """Answer the server's sampling requests (``sampling/createMessage``) with ``model``.

        Off until called. A request is refused (a JSON-RPC error to the server) when it asks
        for more than ``max_tokens`` tokens, sends more than ``max_input_chars`` characters or
        anything but text, or comes after ``max_requests`` answered ones. Takes effect on the
        next connection: a connected client reconnects on its next call.
        """
        policy = _sampling.SamplingPolicy(
            model,
            max_tokens=max_tokens,
            max_requests=max_requests,
            max_input_chars=max_input_chars,
        )
        with self._state_lock:
            self._sampling = policy
            connection = self._connection
        if connection is not None:
            self._discard(connection, "sampling was allowed; the next call reconnects")

    def _session_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "elicitation_callback": _compat.elicitation_callback(self._elicitations.answer),
            "logging_callback": _compat.logging_callback(
                lambda params: _notices.deliver(self.on_log, params)
            ),
        }
        if self._sampling is not None:
            options["sampling_callback"] = _sampling.sampling_callback(self._sampling)
        if self._roots is not None:
            options["list_roots_callback"] = _compat.list_roots_callback(
                lambda: self._roots or ()
            )
        return options

    # --- roots ---

    @property
    def roots(self) -> tuple[dict[str, str], ...] | None:
        """The declared roots in the wire shape (``{"uri"}`` or ``{"uri", "name"}``), or
        ``None`` when the client declares no roots capability."""
        return self._roots

    def set_roots(self, roots: Iterable[RootLike]) -> None:
        """Declare the roots the server may work in (``file://`` URIs, paths or
        ``{"uri", "name"}`` dicts), replacing the previous ones.

        A connected server is told at once (``notifications/roots/list_changed``) and lists
        them again when it wants; a client that declared no roots before reconnects on its
        next call, to declare the roots capability. A server that is not connected reads
        the new roots when it connects.

        Raises:
            TypeError, ValueError: a root is not a ``file://`` URI, a path or such a dict.
        """
        normalized = normalize_roots(roots)
        with self._state_lock:
            declared = self._roots is not None
            self._roots = normalized
            connection = self._connection
        if connection is None:
            return
        if not declared:
            self._discard(connection, "roots were declared; the next call reconnects")
            return
        try:
            # Not waited for: a notification has no answer, and a connection that breaks
            # meanwhile is replaced by one that reads the new roots anyway.
            connection.submit(_compat.send_roots_list_changed)
        except MCPConnectionError:
            pass

    # --- resources and prompts (the wire shapes of _catalog) ---

    def resources(self) -> list[dict[str, Any]]:
        """The server's resources (all pages), each in the wire shape (``uri``, ``name``,
        ``mimeType``...).

        Raises:
            MCPConnectionError, MCPServerError, ToolTimeoutError: see :mod:`agentkit.mcp`.
        """
        return self._run(
            lambda session: _catalog.list_all(session, "list_resources", "resources"),
            what="listing the resources",
            tool_name="",
        )

    def resource_templates(self) -> list[dict[str, Any]]:
        """The server's resource templates (``uriTemplate``, ``name``...), all pages."""
        return self._run(
            lambda session: _catalog.list_all(
                session, "list_resource_templates", "resourceTemplates"
            ),
            what="listing the resource templates",
            tool_name="",
        )

    def read_resource(self, uri: str) -> dict[str, Any]:
        """Read the resource ``uri`` (or a URI of a template); returns ``{"contents": [...]}``,
        each content with ``uri`` and ``text`` or ``blob`` (base64).

        Raises:
            MCPServerError: the server has no such resource.
        """
        if not isinstance(uri, str) or not uri:
            raise AgentKitValueError(f"uri must be a non-empty string (got {uri!r})")
        progress = _notices.progress_of(self, "resource", uri)
        return self._run(
            lambda session: _catalog.read_resource(session, uri, progress),
            what=f"reading the resource {uri[:200]}",
            tool_name="",
        )

    def subscribe_resource(self, uri: str) -> None:
        """Ask the server for the updates of the resource ``uri``: each of its
        ``notifications/resources/updated`` goes to ``on_resource_updated``.

        The subscription is kept across reconnections (the client subscribes again on a
        new connection) until :meth:`unsubscribe_resource`.

        Raises:
            MCPServerError: the server does not support subscriptions, or refused this one.
        """
        if not isinstance(uri, str) or not uri:
            raise AgentKitValueError(f"uri must be a non-empty string (got {uri!r})")
        self._run(
            lambda session: _catalog.subscribe(session, uri),
            what=f"subscribing to the resource {uri[:200]}",
            tool_name="",
        )
        with self._state_lock:
            self._subscriptions.add(uri)

    def unsubscribe_resource(self, uri: str) -> None:
        """Stop the updates of the resource ``uri`` (see :meth:`subscribe_resource`)."""
        with self._state_lock:
            self._subscriptions.discard(uri)
        self._run(
            lambda session: _catalog.unsubscribe(session, uri),
            what=f"unsubscribing from the resource {uri[:200]}",
            tool_name="",
        )

    def prompts(self) -> list[dict[str, Any]]:
        """The server's prompts (``name``, ``description``, ``arguments``), all pages."""
        return self._run(
            lambda session: _catalog.list_all(session, "list_prompts", "prompts"),
            what="listing the prompts",
            tool_name="",
        )

    def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The prompt ``name`` filled with ``arguments``: ``{"description", "messages"}``, each
        message ``{"role", "content"}`` in the wire shape.

        Raises:
            MCPServerError: the server has no such prompt, or the arguments do not fit it.
        """
        values = {str(key): str(value) for key, value in (arguments or {}).items()}
        progress = _notices.progress_of(self, "prompt", name)
        return self._run(
            lambda session: _catalog.get_prompt(session, name, values or None, progress),
            what=f"getting the prompt {name[:200]}",
            tool_name="",
        )

    def _call_tool(
        self, remote_name: str, arguments: dict[str, Any], tool_name: str
    ) -> dict[str, Any]:
        return self._run(
            lambda session: _compat.call_tool(
                session, remote_name, arguments, _notices.progress_of(self, "tool", tool_name)
            ),
            what=f"the call to tool {tool_name}",
            tool_name=tool_name,
        )

    def _fresh_catalog(self) -> dict[str, dict[str, Any]]:
        with self._state_lock:
            self._check_open()
            if self._catalog is not None and self._catalog_generation == self._generation:
                return self._catalog
            generation = self._generation
        tools = self._run(_compat.list_all_tools, what="listing the tools", tool_name="")
        return self._install_catalog(tools, generation)

    def _install_catalog(
        self, tools: list[dict[str, Any]], generation: int
    ) -> dict[str, dict[str, Any]]:
        catalog = {str(entry["name"]): entry for entry in tools}
        with self._state_lock:
            if generation >= self._catalog_generation:
                self._catalog, self._catalog_generation = catalog, generation
        return catalog

    def _on_notification(
        self, connection: Connection, method: str, params: dict[str, Any]
    ) -> None:
        # Runs in the loop thread: hand updates on; note a change and list again in the
        # background.
        if method == _RESOURCE_UPDATED:
            _notices.deliver(self.on_resource_updated, params)
            return
        if method != _TOOLS_CHANGED:
            return
        with self._state_lock:
            self._generation += 1
            generation = self._generation

        async def refresh(session: Any) -> None:
            try:
                tools = await _compat.list_all_tools(session)
            except Exception:  # the next tools() call lists again and reports the error
                return
            self._install_catalog(tools, generation)

        connection.spawn(refresh)

    # --- calls ---

    def _run(
        self, work: Callable[[Any], Coroutine[Any, Any, T]], *, what: str, tool_name: str
    ) -> T:
        """Run ``work(session)`` on the connection and wait, with timeout and cancel.

        Raises:
            RuntimeError: called on agentkit's event loop thread (from an async tool), where
                waiting would block the very loop the call runs on.
        """
        if in_loop_thread():
            raise AgentKitRuntimeError(
                f"{what} on the MCP server {self._endpoint.label} cannot wait on agentkit's "
                "event loop thread (this is an async tool or an MCP callback): make the calling "
                "tool a plain function, or run the call in a thread "
                "(await asyncio.to_thread(...))"
            )
        for attempt in (1, 2):
            connection = self._live_connection()
            try:
                future = connection.submit(work)
            except MCPConnectionError:
                if attempt == 2:
                    raise
                continue  # it broke just now; the request was not sent, so try a new one
            with abort_on_cancel(future.cancel):
                try:
                    return future.result(self.timeout)
                except concurrent.futures.TimeoutError:
                    future.cancel()
                    raise ToolTimeoutError(
                        f"{what} on the MCP server {self._endpoint.label} took longer than "
                        f"{self.timeout} s and was cancelled; raise the client's timeout if the "
                        "tool is slow by nature",
                        tool_name=tool_name,
                    ) from None
                except concurrent.futures.CancelledError:
                    # Not this caller's cancel: the connection failed the call (it broke or
                    # closed), unless the run is being cancelled.
                    check_cancelled()
                    self._check_open()
                    raise self._broke(connection, what, tool_name) from None
                except Exception as error:
                    details = _compat.error_details(error)
                    if (
                        attempt == 1
                        and self._endpoint.sessions
                        and details is not None
                        and session_ended(details[1])
                    ):
                        self._discard(connection, "the server ended the session")
                        continue
                    raise self._translate(error, details, connection, what, tool_name) from error
        raise AssertionError("unreachable")  # pragma: no cover

    def _translate(
        self,
        error: Exception,
        details: tuple[int, str] | None,
        connection: Connection,
        what: str,
        tool_name: str,
    ) -> Exception:
        label = self._endpoint.label
        if details is not None and details[0] == _compat.PARSE_ERROR:
            # The transport (or the server) could not parse a message: the channel is unsound.
            connection.protocol_error(unparsable(details[1]))
        if connection.fault is not None:
            return self._broke(connection, what, tool_name)
        if details is None and connection.usable:
            # Not a transport failure: the session could not use the server's answer.
            return MCPServerError(
                self._endpoint.scrub(
                    f"{what} failed: the answer of the MCP server {label} could not be used "
                    f"({describe_error(error)})"
                ),
                tool_name=tool_name,
            )
        if details is None or details[0] == _compat.CONNECTION_CLOSED:
            reason = details[1] if details is not None else describe_error(error)
            self._discard(connection, reason)
            return MCPConnectionError(
                self._endpoint.scrub(
                    f"{what} failed: the connection to the MCP server {label} broke ({reason}); "
                    "the next call reconnects"
                ),
                tool_name=tool_name,
            )
        code, message = details
        return MCPServerError(
            self._endpoint.scrub(
                f"{what} failed: the MCP server {label} answered with error {code}: {message}"
            ),
            code=code,
            tool_name=tool_name,
        )

    def _broke(self, connection: Connection, what: str, tool_name: str) -> MCPConnectionError:
        """Drop a connection that failed a call; the error that call raises."""
        label = self._endpoint.label
        reason = connection.broken or "closed"
        self._discard(connection, reason)
        if connection.fault is not None:
            return MCPProtocolError(
                self._endpoint.scrub(
                    f"{what} failed: the MCP server {label} broke the protocol: "
                    f"{connection.fault}; the connection was dropped and the next call reconnects"
                ),
                tool_name=tool_name,
            )
        return MCPConnectionError(
            self._endpoint.scrub(
                f"{what} failed: the connection to the MCP server {label} broke ({reason}); "
                "the next call reconnects"
            ),
            tool_name=tool_name,
        )

    # --- the connection ---

    def _check_open(self) -> None:
        if self._closed:
            raise MCPClientClosedError(
                f"the MCP client for {self._endpoint.label} is closed; make a new MCPClient "
                "(or use its tools inside the 'with' block)"
            )

    def _forget_inherited(self) -> None:
        """In a forked child: drop the parent's connection without touching it."""
        self._state_lock = threading.Lock()
        if self._connection is not None:
            # Its loop thread does not exist here, and finalizing its objects would stop the
            # parent's server process: keep them alive, untouched, for this process's life.
            _inherited.append(self._connection)
        self._connection = None
        self._connecting = None
        self._attempt = None  # a thread of the parent was connecting; none does here
        self._pid = os.getpid()

    def _live_connection(self) -> Connection:
        if self._pid != os.getpid():
            self._forget_inherited()
        while True:
            with self._state_lock:
                self._check_open()
                connection, stale = self._connection, None
                if connection is not None and connection.usable:
                    return connection
                if connection is not None:
                    stale, self._connection = connection, None
                attempt, mine = self._attempt, self._attempt is None
                if attempt is None:
                    attempt = self._attempt = _Attempt()
            if stale is not None:
                stale.close()  # broken: stop what is left of it
            if mine:
                return self._connect_as(attempt)
            # Another thread is connecting; its attempt ends within connect_timeout.
            wait = self.connect_timeout + _STOP_ALLOWANCE
            if not attempt.wait(wait):
                raise MCPConnectionError(
                    f"waited {wait} s for another thread to connect to {self._endpoint.label}"
                )

    def _connect_as(self, attempt: _Attempt) -> Connection:
        try:
            connection = self._connect()
            with self._state_lock:
                closed = self._closed
                if not closed:
                    self._connection = connection
                subscribed = sorted(self._subscriptions)
            if closed:
                connection.close()
                self._check_open()
            if subscribed:
                self._resubscribe(connection, subscribed)
            return connection
        finally:
            with self._state_lock:
                self._attempt = None
            attempt.finish()

    def _resubscribe(self, connection: Connection, uris: list[str]) -> None:
        """On a new connection, subscribe again to ``uris`` (in the background: a failure is
        logged, and the caller's request goes on)."""

        async def subscribe_all(session: Any) -> None:
            for uri in uris:
                try:
                    await _catalog.subscribe(session, uri)
                except Exception as error:
                    _log.warning(
                        "subscribing again to %s on the MCP server %s failed: %s",
                        uri, self._endpoint.label, describe_error(error),
                    )

        try:
            connection.submit(subscribe_all)
        except MCPConnectionError:
            pass  # broke at once: the next connection subscribes again

    def _connect(self) -> Connection:
        errors: list[MCPConnectionError] = []
        deadline = time.monotonic() + self.connect_timeout
        for opener in self._endpoint.openers:
            left = deadline - time.monotonic()
            if left <= 0:
                break  # the transports tried so far took all of connect_timeout
            connection = Connection(
                opener,
                self._endpoint.label,
                self._on_notification,
                max_message_bytes=self.max_message_bytes,
                session_options=self._session_options(),
            )
            with self._state_lock:
                self._check_open()
                self._connecting = connection
            try:
                connection.start(left, connect_timeout=self.connect_timeout)
            except MCPConnectionError as error:
                self._check_open()  # close() stopped the attempt
                errors.append(error)
                continue
            finally:
                with self._state_lock:
                    self._connecting = None
            if errors:  # a fallback worked: reconnect with it directly next time
                self._endpoint = attrs.evolve(self._endpoint, openers=(opener,))
            return connection
        text = "; ".join(str(error) for error in errors)
        if len(errors) > 1:
            text += " (tried streamable HTTP, then HTTP+SSE)"
        kind = (
            MCPProtocolError
            if all(isinstance(error, MCPProtocolError) for error in errors)
            else MCPConnectionError
        )
        raise kind(self._endpoint.scrub(text)) from errors[-1]

    def _discard(self, connection: Connection, reason: str) -> None:
        connection.mark_broken(reason)
        with self._state_lock:
            if self._connection is connection:
                self._connection = None
        connection.close()


_live_clients: weakref.WeakSet[MCPClient] = weakref.WeakSet()
_inherited: list[object] = []


def _after_fork_in_child() -> None:
    for client in list(_live_clients):
        client._forget_inherited()


os.register_at_fork(after_in_child=_after_fork_in_child)


# Documented, and loaded on first use, as ``agentkit.mcp.MCPClient``.
MCPClient.__module__ = "agentkit.mcp"
