"""One live MCP session, held open by a task on agentkit's event loop.

The ``mcp`` package is asynchronous; agentkit is not. A :class:`Connection` is one task on
the process's private event loop (:mod:`agentkit._aioloop`, shared with ``async def`` tools;
never the caller's loop: a Jupyter kernel's loop is left alone). The task enters the
transport and the ``ClientSession``, initializes it, and then waits until it is told to stop.
Callers in any thread hand it coroutines with :meth:`Connection.submit` and wait on the
returned :class:`concurrent.futures.Future`, which they may cancel (that cancels the asyncio
task, and the session tells the server the request was cancelled).

A connection is used until it breaks (the server process exits, the HTTP session ends, the
server breaks the protocol) and is then replaced by a fresh one; it never reconnects by
itself. Its transport holds the server to :attr:`Connection.max_message_bytes` and reports a
broken protocol with :meth:`Connection.protocol_error`, which fails every call in flight at
once and stops the connection. When it ends, the calls still running on it are cancelled
(only its own: other connections and async tools share the loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import threading
from collections.abc import Callable, Coroutine, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from agentkit._aioloop import Task, in_loop_thread, start_task
from agentkit._runctx import abort_on_cancel, check_cancelled
from agentkit.mcp import _compat
from agentkit.mcp._errors import MCPConnectionError, MCPProtocolError
from agentkit.mcp._wire import Wire, unparsable

__all__ = ["Connection", "describe_error"]

_log = logging.getLogger("agentkit.mcp")

T = TypeVar("T")
Opener = Callable[[Wire], AbstractAsyncContextManager[_compat.Streams]]
"""Makes the transport (an async context manager yielding the stream pair) for a connection."""
Work = Callable[[Any], Coroutine[Any, Any, T]]


_GROUPS: tuple[type[Any], ...] = ()
if sys.version_info >= (3, 11):
    _GROUPS = (BaseExceptionGroup,)  # noqa: F821 - a builtin since 3.11


def describe_error(error: BaseException) -> str:
    """A one-line text for ``error``; exception groups of one error are unwrapped."""
    while isinstance(error, _GROUPS) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class _WatchedReadStream:
    """The transport's read stream, reporting when it ends (the server went away)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        # The session reads the sender's context from the stream when it has one.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except Exception:
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except Exception:  # StopAsyncIteration included: the stream ended
            self._on_end()
            raise

    async def __aenter__(self) -> _WatchedReadStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._inner.__aexit__(*exc_info)


class Connection:
    """A session with one MCP server, held open by a task on agentkit's event loop.

    It is the :class:`~agentkit.mcp._wire.Wire` its transport serves.

    Args:
        opener: makes the transport (an async context manager yielding the stream pair).
        label: names the server in task names and error texts.
        on_notification: called in the loop thread with this connection, the method and the
            params (wire shape) of every server notification; must not block.
        max_message_bytes: the largest message the transport accepts from the server.
    """

    def __init__(
        self,
        opener: Opener,
        label: str,
        on_notification: Callable[[Connection, str, dict[str, Any]], None],
        *,
        max_message_bytes: int,
        session_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._session_options = dict(session_options or {})
        self._opener = opener
        self.label = label
        self._on_notification = on_notification
        self._max_message_bytes = max_message_bytes
        self._lock = threading.Lock()
        self._ready = threading.Event()  # set once connected, or once the attempt ended
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._main_task: asyncio.Task[None] | None = None
        self._session: Any = None
        self._accepting = False
        self._closing = False
        self._tasks: set[asyncio.Task[Any]] = set()  # its calls and background work (loop only)
        self._ended = False  # set in the loop when the session is over (loop only)
        self._error: BaseException | None = None
        self.broken: str | None = None
        """Why the connection can no longer be used (``None`` while it works)."""
        self.fault: str | None = None
        """How the server broke the protocol, if it did (then also :attr:`broken`)."""
        self._life: Task[None] | None = None  # the task that holds the session open

    def __repr__(self) -> str:
        state = "usable" if self.usable else f"broken ({self.broken})" if self.broken else "idle"
        return f"<Connection {self.label} {state}>"

    @property
    def usable(self) -> bool:
        """``True`` while calls can be submitted."""
        return self._accepting and self.broken is None

    @property
    def max_message_bytes(self) -> int:
        """The largest message the transport accepts from the server, in bytes."""
        return self._max_message_bytes

    @property
    def graceful(self) -> bool:
        """``True`` when the server had a session and kept to the protocol (see ``Wire``)."""
        return self._session is not None and self.fault is None

    # --- caller side (any thread) ---

    def start(self, timeout: float, *, connect_timeout: float | None = None) -> None:
        """Start the session's task and wait until the session is initialized.

        ``connect_timeout`` is the setting an expired ``timeout`` is reported as (the
        time left of it, when an earlier transport used some); ``timeout`` by default.

        Raises:
            MCPConnectionError: the server could not be started or reached, or did not
                finish the handshake within ``timeout`` seconds.
            MCPProtocolError: the server broke the protocol during the handshake.
            AgentCancelledError: the agent run was cancelled while connecting.
        """
        # A fresh context: the connection outlives the run (if any) that opened it.
        self._life = start_task(
            self._live, inherit_context=False, name=f"agentkit-mcp {self.label}"
        )
        try:
            with abort_on_cancel(self._request_stop):
                ready = self._ready.wait(timeout)
            check_cancelled()
        except BaseException:
            self.close()
            raise
        if ready and self.usable:
            return
        self.close()
        if not ready:
            stated = timeout if connect_timeout is None else connect_timeout
            raise MCPConnectionError(
                f"the MCP server {self.label} did not complete the connection within {stated} s; "
                "check that it starts and speaks MCP, or raise connect_timeout"
            )
        if self.fault is not None:
            raise MCPProtocolError(
                f"could not connect to the MCP server {self.label}: it broke the protocol: "
                f"{self.fault}"
            )
        reason = describe_error(self._error) if self._error is not None else self.broken
        raise MCPConnectionError(
            f"could not connect to the MCP server {self.label}: {reason}; check that the server "
            "starts on its own and speaks MCP (a command's own errors go to stderr)"
        ) from self._error

    def submit(self, work: Work[T]) -> concurrent.futures.Future[T]:
        """Run ``work(session)`` in the loop; the future can be cancelled from any thread.

        Raises:
            MCPConnectionError: the connection is closed or broken (get a new one).
        """
        with self._lock:
            if not self.usable or self._loop is None:
                raise MCPConnectionError(
                    f"the connection to the MCP server {self.label} is closed "
                    f"({self.broken or 'closed'})"
                )
            return asyncio.run_coroutine_threadsafe(self._call(work), self._loop)

    def spawn(self, work: Callable[[Any], Coroutine[Any, Any, object]]) -> None:
        """From inside the loop thread: run ``work(session)`` as a background task."""
        if not self.usable or self._ended:
            return
        task = asyncio.ensure_future(work(self._session))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, work: Work[T]) -> T:
        """One call, counted among the connection's tasks so that its end cancels it."""
        task = asyncio.current_task()
        if self._ended or task is None:  # submitted just before the session ended
            raise asyncio.CancelledError
        self._tasks.add(task)
        try:
            return await work(self._session)
        finally:
            self._tasks.discard(task)

    def mark_broken(self, reason: str) -> None:
        """Stop using this connection (a call found the transport dead)."""
        with self._lock:
            if self.broken is None:
                self.broken = reason

    def protocol_error(self, reason: str) -> None:
        """The server broke the protocol: stop the connection, from any thread; does not block.

        No call is accepted any more, and the connection stops without the grace a
        well-behaved server gets. The calls in flight fail at once: the session answers
        each request still waiting with "connection closed" when its transport ends (a
        request answered before the bad message keeps its answer), and :meth:`close`
        cancels whatever is left. Their callers read :attr:`fault`. The first reason is kept.
        """
        with self._lock:
            first = self.fault is None
            if first:
                self.fault = reason
            if self.broken is None:
                self.broken = reason
            self._accepting = False
        if first:  # the calls in flight raise it too; a bad line may come when none waits
            _log.warning("the MCP server %s broke the protocol: %s", self.label, reason)
        self._request_stop()

    def close(self, timeout: float = 10.0) -> None:
        """Leave the session, stop the transport and wait for its end (up to ``timeout``)."""
        self._request_stop()
        life = self._life
        if life is None or in_loop_thread():
            return
        if not life.wait(timeout):
            _log.warning(
                "the MCP connection to %s did not end within %s s; it ends when the "
                "server's transport closes", self.label, timeout,
            )

    def _request_stop(self) -> None:
        with self._lock:
            self._closing = True
            self._accepting = False
            loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._stop_in_loop)
        except RuntimeError:  # the loop already closed: nothing left to stop
            pass

    # --- loop side (agentkit's event loop thread) ---

    def _stop_in_loop(self) -> None:
        if self._session is not None and self._stop is not None:
            self._stop.set()  # leave the session and the transport in order
        elif self._main_task is not None:
            self._main_task.cancel()  # still connecting: abandon the attempt

    async def _live(self) -> None:
        """The connection's task: the session, then the end of what is left of it."""
        try:
            await self._main(asyncio.get_running_loop())
        finally:
            with self._lock:
                self._accepting = False
                if self.broken is None:
                    self.broken = "closed"
            try:
                await self._cancel_leftovers()
            finally:
                self._ready.set()

    async def _main(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._closing:
                return
            self._loop = loop
            self._stop = asyncio.Event()
            self._main_task = asyncio.current_task()
        try:
            async with self._opener(self) as (read, write):
                watched = _WatchedReadStream(read, self._transport_ended)
                async with _compat.client_session(
                    watched, write, self._on_message, **self._session_options
                ) as session:
                    await session.initialize()
                    with self._lock:
                        self._session = session
                        self._accepting = not self._closing
                    self._ready.set()
                    await self._stop.wait()
        except BaseException as error:  # the task ends quietly; callers see self.broken
            self._error = error
            with self._lock:
                if self.broken is None:
                    self.broken = describe_error(error)
            if not isinstance(error, (Exception, asyncio.CancelledError)):
                raise

    async def _cancel_leftovers(self) -> None:
        # Calls submitted before the gate closed and not started yet see _ended and end
        # cancelled as they start; the ones running now are cancelled here.
        self._ended = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _transport_ended(self) -> None:
        self.mark_broken("the server closed the connection")

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            if _compat.is_parse_error(message):
                # The transport could not parse a message of the server (not JSON, not
                # JSON-RPC): what else it sent cannot be trusted either.
                self.protocol_error(unparsable(describe_error(message)))
            else:  # a network error, a late answer to a cancelled call: the session goes on
                _log.debug("MCP transport error from %s: %s", self.label, describe_error(message))
            return
        notification = _compat.notification_of(message)
        if notification is not None:
            method, params = notification
            try:
                self._on_notification(self, method, params)
            except Exception:
                _log.exception(
                    "handling the MCP notification %s from %s failed", method, self.label
                )
