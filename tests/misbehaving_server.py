"""A tiny raw-socket HTTP server for peers that misbehave: silent, trickling, keep-alive only.

:class:`RawServer` accepts connections on 127.0.0.1, reads each request (headers and a
``Content-Length`` body), counts it, and hands the socket to a *behaviour*: a function that
writes whatever it likes until the server stops. Waits are on the server's stop event, so
stopping ends every behaviour at once; a behaviour also ends when the client closes or
shuts down its end (its connection thread then ends too, which tests check).

Example::

    with RawServer(trickle_json(interval=0.05)) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, timeout=0.5)
        ...
        assert server.request_count == 1
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable

__all__ = [
    "RawServer",
    "rate_limited",
    "replay",
    "silent",
    "sse_comments",
    "sse_first_chunk_then_trickle",
    "trickle_json",
]

Behaviour = Callable[[socket.socket, threading.Event, "RawServer"], bool]

_FIRST_CHUNK = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}'
    b"\n\n"
)


class RawServer:
    """A loopback server whose every request gets the same ``behaviour``."""

    def __init__(self, behaviour: Behaviour, tls: ssl.SSLContext | None = None) -> None:
        self.behaviour = behaviour
        self.tls = tls
        self.stop = threading.Event()
        self.request_arrived = threading.Semaphore(0)
        self.responded = threading.Event()  # set by behaviours after their first bytes
        self._count = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        port = self._listener.getsockname()[1]
        scheme = "https" if tls is not None else "http"
        self.base_url = f"{scheme}://127.0.0.1:{port}/v1"
        self._connections: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="raw-server", daemon=True)

    @property
    def request_count(self) -> int:
        """How many requests have arrived."""
        with self._lock:
            return self._count

    @property
    def connection_count(self) -> int:
        """How many connections have been accepted."""
        with self._lock:
            return len(self._connections)

    def wait_for_request(self, timeout: float = 30.0) -> None:
        """Block until one more request has arrived (``AssertionError`` after ``timeout``)."""
        assert self.request_arrived.acquire(timeout=timeout), "no request reached the server"

    def __enter__(self) -> RawServer:
        self._acceptor.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self._acceptor.join(30)
        with self._lock:
            connections = list(self._connections)
            threads = list(self._threads)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in threads:
            thread.join(30)
        for connection in connections:
            connection.close()
        self._listener.close()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection.settimeout(None)
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            with self._lock:
                self._connections.append(connection)
                self._threads.append(thread)
            thread.start()

    def _serve(self, connection: socket.socket) -> None:
        try:
            if self.tls is not None:
                plain = connection
                connection = self.tls.wrap_socket(plain, server_side=True)
                with self._lock:
                    self._connections[self._connections.index(plain)] = connection
            while not self.stop.is_set():
                if not _read_request(connection):
                    return
                with self._lock:
                    self._count += 1
                self.request_arrived.release()
                if not self.behaviour(connection, self.stop, self):
                    return
        except OSError:
            return


def _read_request(connection: socket.socket) -> bool:
    """Read one request; ``False`` when the client closed the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = connection.recv(65536)
        if not piece:
            return False
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        piece = connection.recv(65536)
        if not piece:
            return False
        body += piece
    return True


def silent(connection: socket.socket, stop: threading.Event, server: RawServer) -> bool:
    """Read the request and never answer (until the client goes away or the server stops)."""
    connection.recv(1)
    return False


def trickle_json(interval: float) -> Behaviour:
    """Answer with a JSON response whose body arrives one byte per ``interval``, forever."""

    def behave(connection: socket.socket, stop: threading.Event, server: RawServer) -> bool:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
        )
        server.responded.set()
        while not stop.wait(interval):
            connection.sendall(b" ")
        return False

    return behave


def sse_comments(interval: float) -> Behaviour:
    """Open an event stream and send only keep-alive comments, one per ``interval``."""

    def behave(connection: socket.socket, stop: threading.Event, server: RawServer) -> bool:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        )
        server.responded.set()
        while not stop.wait(interval):
            connection.sendall(b": keep-alive\n\n")
        return False

    return behave


def sse_first_chunk_then_trickle(interval: float) -> Behaviour:
    """Send one data chunk, then the next event one byte per ``interval``, never finishing it."""

    def behave(connection: socket.socket, stop: threading.Event, server: RawServer) -> bool:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            + _FIRST_CHUNK
        )
        server.responded.set()
        while not stop.wait(interval):
            connection.sendall(b":")  # a comment line that never ends
        return False

    return behave


def rate_limited(retry_after: int) -> Behaviour:
    """Answer 429 with ``Retry-After`` and close the connection (a retry connects again)."""

    def behave(connection: socket.socket, stop: threading.Event, server: RawServer) -> bool:
        body = b'{"error":{"message":"slow down","type":"rate_limit_error"}}'
        connection.sendall(
            b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
            + f"Retry-After: {retry_after}\r\nContent-Length: {len(body)}\r\n".encode()
            + b"Connection: close\r\n\r\n"
            + body
        )
        server.responded.set()
        return False

    return behave


def replay(body: bytes, content_type: str = "text/event-stream", status: int = 200) -> Behaviour:
    """Answer with ``body`` verbatim (a recorded response), then close the connection."""

    def behave(connection: socket.socket, stop: threading.Event, server: RawServer) -> bool:
        connection.sendall(
            f"HTTP/1.1 {status} Status\r\nContent-Type: {content_type}\r\n".encode()
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        server.responded.set()
        return False

    return behave
