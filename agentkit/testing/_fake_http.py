"""What the loopback model servers share: serving, scripting, recording, and the HTTP replies.

:class:`FakeModelServer` is the base of :class:`~agentkit.testing.FakeOpenAIServer`,
:class:`~agentkit.testing.FakeAnthropicServer`, :class:`~agentkit.testing.FakeGeminiServer` and
:class:`~agentkit.testing.FakeResponsesServer`: real HTTP/1.1 on 127.0.0.1, one thread per
connection, replies scripted with :class:`~agentkit.testing.Reply` (failures included: an
error status with ``Retry-After``, a delay, a stream cut after some events, a dropped
connection, a malformed body). A subclass says which paths it serves and how a reply looks on
its wire (:meth:`FakeModelServer._respond`, :meth:`FakeModelServer._error_payload`).
"""

from __future__ import annotations

import abc
import json
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from agentkit.testing._openai_replies import Reply
from agentkit.testing._threads import register_owner

__all__ = ["FakeModelServer", "Handler", "RequestHandler"]

_S = TypeVar("_S", bound="FakeModelServer")

# What a fake server's handler= takes: the request's JSON body in, the reply out.
Handler = Callable[[dict[str, Any]], "Reply | str"]


class FakeModelServer(abc.ABC):
    """A model server on ``127.0.0.1`` (a free port), serving in a background thread.

    Replies come from ``handler(request_json)`` when one is given, else from the replies
    queued with :meth:`queue`, in order (a ``str`` is an assistant message). A request with
    no reply to give gets HTTP 400 saying so. Use it as a context manager; it stops serving,
    drops open connections and joins its threads on exit.

    Each connection is served in a thread of its own (``<class name> connection N``) that
    lives as long as the client keeps the connection open. These threads are the server's:
    :func:`~agentkit.testing.no_thread_leak` inside the server's ``with`` block does not
    count them (see :meth:`owned_threads`).
    """

    _root = ""  # what base_url adds to http://127.0.0.1:PORT

    def __init__(self, handler: Handler | None = None) -> None:
        self._handler = handler
        self._replies: deque[Reply | str] = deque()
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._request_headers: list[dict[str, str]] = []
        self._paths: list[str] = []
        self._connections = 0
        self._stopping = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), RequestHandler)
        self._httpd.fake = self
        self._thread: threading.Thread | None = None
        host, port = self._httpd.server_address[:2]
        self.base_url = f"http://{host!s}:{port}{self._root}"

    # -- what a wire provides --------------------------------------------------------------

    @abc.abstractmethod
    def _serves(self, path: str) -> bool:
        """Whether ``POST path`` is a route of this wire."""

    @abc.abstractmethod
    def _error_payload(self, reply: Reply) -> Any:
        """The JSON body of an error reply (status >= 400) on this wire."""

    @abc.abstractmethod
    def _respond(
        self,
        handler: RequestHandler,
        path: str,
        request: dict[str, Any],
        reply: Reply,
        number: int,
    ) -> None:
        """Send a successful reply: a whole body (:meth:`RequestHandler.send_body`) or a
        stream of events (:meth:`RequestHandler.send_events`)."""

    # -- lifecycle -------------------------------------------------------------------------

    def start(self: _S) -> _S:
        """Start serving (done by ``with``)."""
        if self._thread is None:
            register_owner(self)
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.01},
                name=type(self).__name__,
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections and join the server's threads. Idempotent."""
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.drop_connections()
        self._httpd.server_close()

    def owned_threads(self) -> list[threading.Thread]:
        """The threads serving connections right now (none once stopped: they were joined)."""
        return self._httpd.connection_threads()

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- scripting and inspection ------------------------------------------------------------

    def queue(self, *replies: Reply | str) -> None:
        """Add replies, answered in order to the coming requests."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the requests received so far (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of the requests received so far, names in lower case (a copy)."""
        with self._lock:
            return list(self._request_headers)

    @property
    def request_paths(self) -> list[str]:
        """The paths (with their query) of the requests received so far (a copy)."""
        with self._lock:
            return list(self._paths)

    @property
    def connections(self) -> int:
        """How many TCP connections the server has accepted (kept-alive calls share one)."""
        with self._lock:
            return self._connections

    @property
    def replies_left(self) -> int:
        """How many queued replies have not been used."""
        with self._lock:
            return len(self._replies)

    def _record(self, body: dict[str, Any], headers: dict[str, str], path: str) -> int:
        with self._lock:
            self._requests.append(body)
            self._request_headers.append(headers)
            self._paths.append(path)
            return len(self._requests)

    def _count_connection(self) -> None:
        with self._lock:
            self._connections += 1

    def _reply_for(self, body: dict[str, Any], number: int) -> Reply:
        name = type(self).__name__
        if self._handler is not None:
            try:
                reply: Reply | str = self._handler(body)
            except Exception as error:
                return Reply(status=400, error=f"{name} handler raised {error!r}")
        else:
            with self._lock:
                if not self._replies:
                    return Reply(
                        status=400, error=f"{name} has no reply queued for request {number}"
                    )
                reply = self._replies.popleft()
        return Reply(reply) if isinstance(reply, str) else reply


class _HTTPServer(ThreadingHTTPServer):
    # One thread per connection, started and joined here (server_close): none outlives the
    # server. They end promptly because stop() shuts their sockets down and sets the event
    # their waits watch.
    daemon_threads = True
    block_on_close = False
    fake: FakeModelServer

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self._sockets: set[socket.socket] = set()
        self._sockets_lock = threading.Lock()
        self._workers: set[threading.Thread] = set()
        self._started = 0
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._sockets_lock:
            self._sockets.add(request)
            self._started += 1
            worker = threading.Thread(
                target=self._serve_connection,
                args=(request, client_address),
                name=f"{type(self.fake).__name__} connection {self._started}",
                daemon=True,
            )
            self._workers.add(worker)
        worker.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._sockets_lock:
                self._workers.discard(threading.current_thread())

    def connection_threads(self) -> list[threading.Thread]:
        with self._sockets_lock:
            return list(self._workers)

    def server_close(self) -> None:
        super().server_close()
        for worker in self.connection_threads():
            worker.join()

    def shutdown_request(self, request: Any) -> None:
        with self._sockets_lock:
            self._sockets.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        with self._sockets_lock:
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up (timeouts, closed streams) are part of the tests, not errors.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class RequestHandler(BaseHTTPRequestHandler):
    """Serves one connection of a :class:`FakeModelServer`."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small writes go out at once, like a real server's
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.fake._count_connection()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0].rstrip("/")
        if not fake._serves(path):
            reply = Reply(status=404, error=f"no route for POST {self.path}")
            self.send_json(404, fake._error_payload(reply))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            reply = Reply(status=400, error="the request body is not valid JSON")
            self.send_json(400, fake._error_payload(reply))
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        number = fake._record(body, headers, self.path)
        reply = fake._reply_for(body, number)
        if reply.delay and fake._stopping.wait(reply.delay):
            self.drop()
            return
        if reply.disconnect:
            self.drop()
        elif reply.raw_body is not None:
            self.send_json(reply.status, None, reply.headers, reply.raw_body)
        elif reply.status >= 400:
            self._send_error_reply(reply)
        else:
            fake._respond(self, path, body, reply, number)

    # -- responses -------------------------------------------------------------------------

    def drop(self) -> None:
        """Drop the connection without a (further) word."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def send_json(
        self,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> None:
        """Send a JSON body (``raw`` bytes as they are, when given)."""
        data = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error_reply(self, reply: Reply) -> None:
        headers = dict(reply.headers)
        if reply.retry_after is not None:
            headers["Retry-After"] = str(reply.retry_after)
        raw = b'{"error": {"message": ' if reply.malformed else None
        self.send_json(reply.status, self.server.fake._error_payload(reply), headers, raw)

    def send_body(self, payload: Any, reply: Reply) -> None:
        """Send a whole successful reply, or half of it when ``malformed`` or ``cut_after``."""
        data = json.dumps(payload).encode()
        if reply.malformed:
            data = data[: len(data) // 2]
        if reply.cut_after is not None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.drop()
            return
        self.send_json(200, None, reply.headers, data)

    def send_events(self, events: Iterable[bytes], reply: Reply) -> None:
        """Stream Server-Sent Events in chunked transfer encoding, as ``reply`` scripts it.

        Comments (``: ...``) are sent as they are; ``cut_after``, ``gate`` and
        ``chunk_delay`` count the other events.
        """
        fake = self.server.fake
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        sent = 0
        for event in events:
            if not event.startswith(b":"):
                if reply.cut_after is not None and sent >= reply.cut_after:
                    self.drop()
                    return
                sent += 1
                if sent == 2 and reply.gate is not None:
                    while not reply.gate.wait(0.05):
                        if fake._stopping.is_set():
                            self.drop()
                            return
                if reply.chunk_delay and sent > 1 and fake._stopping.wait(reply.chunk_delay):
                    self.drop()
                    return
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.write(b"0\r\n\r\n")
