"""Deadlines and aborts for in-flight HTTP requests of the HTTP chat models.

httpx has no total deadline (its timeouts are per connect, per write and per read, so a
server that trickles one byte a second never times out) and no way to abort a request that
another thread is blocked in. Both are built here at the socket level:

* Every request runs under a :class:`_Guard`, which holds the call's deadline and an
  ``aborted`` flag. The guard is made current for the thread doing the I/O (a thread-local,
  set around each blocking step), so the socket layer below httpx can find it.
* The model's own client talks through :class:`_Backend`, an httpcore network backend whose
  streams consult the current guard before every read, write and connect: the timeout httpx
  asks for is shortened to what is left until the deadline (so the deadline holds even
  between bytes of a trickle), and an aborted guard fails the operation at once. The
  backend is put under httpx with public APIs only: :class:`GuardedTransport` is an
  :class:`httpx.BaseTransport` over an :class:`httpcore.ConnectionPool` given that backend.
* :meth:`_Guard.abort` (called from the cancelling thread) marks the guard aborted and, if a
  read or write is blocked right now, shuts the socket down: ``shutdown(SHUT_RDWR)`` wakes a
  blocked ``recv`` on every platform, unlike ``close``. The socket is registered only for the
  duration of each operation, under the guard's lock, so an abort can never shut down a
  connection that went back to the pool and now serves another request.

With an ``http_client`` of the caller's, the backend is not in place: the deadline is checked
between reads, and an abort reaches the request once its response headers have arrived (the
response's ``network_stream`` is registered then).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn, cast

import httpcore
import httpx

__all__: list[str] = []

_monotonic = time.monotonic


class _Current(threading.local):
    guard: _Guard | None = None


_current = _Current()


class _Guard:
    """The deadline and abort state of one model call (all its attempts)."""

    __slots__ = ("aborted", "deadline", "lock", "stream")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.aborted = False
        self.lock = threading.Lock()
        self.stream: Any = None  # the network stream blocked in I/O right now, if any

    def remaining(self) -> float:
        """Seconds left until the deadline (may be negative)."""
        return self.deadline - _monotonic()

    def enter(self, stream: Any, timeout: float | None, what: str) -> float:
        """Register ``stream`` for an I/O step; return the timeout to use for it.

        Raises the httpcore error httpx maps to its own: a ``ReadError`` when the call was
        aborted, a timeout when the deadline has passed.
        """
        with self.lock:
            if self.aborted:
                raise httpcore.ReadError("the request was aborted (the run was cancelled)")
            left = self.deadline - _monotonic()
            if left <= 0:
                raise (httpcore.WriteTimeout if what == "write" else httpcore.ReadTimeout)(
                    "the model call's deadline passed"
                )
            self.stream = stream
        return left if timeout is None or left < timeout else timeout

    def leave(self) -> None:
        """Unregister the stream after an I/O step."""
        with self.lock:
            self.stream = None

    def abort(self) -> None:
        """Abort the call from any thread: fail its next I/O step and wake a blocked one."""
        with self.lock:
            self.aborted = True
            stream = self.stream
            if stream is not None:
                _shutdown(stream)

    def attach(self, stream: Any) -> None:
        """Register a response's network stream for the rest of the call (callers' clients)."""
        with self.lock:
            if self.aborted and stream is not None:
                _shutdown(stream)
            self.stream = stream


def _shutdown(stream: Any) -> None:
    try:
        sock = stream.get_extra_info("socket")
    except Exception:  # an exotic stream: nothing to shut down
        return
    if not isinstance(sock, socket.socket):
        return
    # socket.socket's own method: SSLSocket.shutdown would also drop its TLS state, which
    # the reading thread is still using. An OSError means it is closed or not connected yet.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Stream(httpcore.NetworkStream):
    """A network stream whose I/O obeys the current guard."""

    __slots__ = ("_inner",)

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        guard = _current.guard
        if guard is None:
            return self._inner.read(max_bytes, timeout)
        timeout = guard.enter(self, timeout, "read")
        try:
            return self._inner.read(max_bytes, timeout)
        finally:
            guard.leave()

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        guard = _current.guard
        if guard is None:
            self._inner.write(buffer, timeout)
            return
        timeout = guard.enter(self, timeout, "write")
        try:
            self._inner.write(buffer, timeout)
        finally:
            guard.leave()

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        guard = _current.guard
        if guard is not None:
            timeout = guard.enter(self, timeout, "read")
        try:
            return _Stream(self._inner.start_tls(ssl_context, server_hostname, timeout))
        finally:
            if guard is not None:
                guard.leave()

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's synchronous backend, with streams that obey the current guard."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        guard = _current.guard
        if guard is not None:
            # A connect cannot be woken by an abort (there is no socket to shut down yet);
            # it is bounded by the deadline, and an abort fails the first write after it.
            timeout = guard.enter(None, timeout, "read")
            guard.leave()
        return _Stream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


_ssl_lock = threading.Lock()
_ssl_context: ssl.SSLContext | None = None


def _default_ssl_context() -> ssl.SSLContext:
    # Loading the certificate bundle costs tens of milliseconds; httpx pays it per client.
    # The models of a process share one context (SSLContext is made to be shared), built
    # like httpx's default on first use (certificate checks on, SSL_CERT_FILE honoured).
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            _ssl_context = httpx.create_ssl_context()
        return _ssl_context


# httpcore's exceptions and the httpx ones a caller expects, most specific first (the same
# correspondence httpx's own transport makes; tests/test_models_transport.py checks it).
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


def httpx_error(error: Exception) -> httpx.TransportError | None:
    """Return the httpx exception for an httpcore one (``None`` for any other exception)."""
    for source, target in _ERRORS:
        if isinstance(error, source):
            return target(str(error))
    return None


def _reraise(error: Exception) -> NoReturn:
    """Raise the httpx exception for ``error`` (``error`` itself if httpx has none)."""
    mapped = httpx_error(error)
    if mapped is None:
        raise error
    raise mapped from error


class _ResponseStream(httpx.SyncByteStream):
    """The body of an httpcore response, for an httpx response."""

    __slots__ = ("_stream",)

    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream  # httpcore.Response.stream of a synchronous pool

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._stream
        except Exception as error:
            _reraise(error)

    def close(self) -> None:
        # Closing a response that was not read to its end closes its connection (httpcore
        # never returns a half-read connection to the pool).
        close = getattr(self._stream, "close", None)  # a byte stream may have no close
        if close is not None:
            try:
                close()
            except Exception as error:
                _reraise(error)


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport whose connections obey the current guard.

    httpx's own :class:`httpx.HTTPTransport` builds its httpcore connection pool with
    httpcore's default network backend and takes no other. This transport is the other way
    httpx documents for connecting it to something else: a :class:`httpx.BaseTransport`
    whose ``handle_request`` hands the request to a :class:`httpcore.ConnectionPool` over
    :class:`_Backend` (the public APIs of both libraries; no private attribute of either).
    Pool settings come from :class:`httpx.Limits`; HTTP/1.1, as httpx's default.
    """

    def __init__(self, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._connections = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_Backend(),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` over the pool; return the response with its body unread."""
        url = request.url
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = self._connections.handle_request(core_request)
        except Exception as error:
            _reraise(error)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(cast("Iterable[bytes]", response.stream)),
            extensions=response.extensions,
        )

    def close(self) -> None:
        """Close every connection of the pool."""
        self._connections.close()


def make_client(timeout: httpx.Timeout, headers: dict[str, str]) -> httpx.Client:
    """Return an httpx client whose requests obey the current guard."""
    transport = GuardedTransport(_default_ssl_context(), httpx.Limits())
    return httpx.Client(timeout=timeout, headers=headers, transport=transport)
