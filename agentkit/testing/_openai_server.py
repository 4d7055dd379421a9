"""A loopback OpenAI-compatible Chat Completions server, to test agents over real HTTP.

:class:`FakeOpenAIServer` speaks the real wire format over real HTTP/1.1 on 127.0.0.1: JSON
responses with ``Content-Length``, streamed responses as Server-Sent Events in chunked
transfer encoding (a first delta with the role, content and tool-call arguments in several
deltas, keep-alive comments, a usage chunk with empty ``choices`` when the request asks for
it, ``data: [DONE]``), and keep-alive connections. Replies are scripted with :class:`Reply`,
which can also describe failures: an error status with ``Retry-After``, a delay, a stream
cut after some chunks, a dropped connection or a malformed body.

Example::

    with FakeOpenAIServer() as server:
        server.queue(Reply("Hello!"), Reply(status=429, error="slow down", retry_after=0))
        model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="sk-test")
        model.generate([user_message("Hi")])
        assert server.requests[0]["messages"] == [{"role": "user", "content": "Hi"}]

``python -m agentkit.testing._openai_server`` serves one fixed reply in its own process (see
:func:`main`); the benchmarks measure the client against it.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

from agentkit.schema import TokenUsage, ToolCall


@attrs.define
class Reply:
    """What :class:`FakeOpenAIServer` answers to one request.

    Build tool calls with :func:`call`: ``Reply(tool_calls=[call("add", {"a": 1})])``.

    Attributes:
        content: the assistant's text.
        tool_calls: tool calls the assistant requests.
        finish_reason: defaults to ``"tool_calls"`` when there are tool calls, else ``"stop"``.
        usage: token usage; by default counted in words of the request and the reply.
        reasoning_content: DeepSeek-style reasoning text, sent before the content.
        status: the HTTP status; 400 and above answer with an OpenAI-shaped error body.
        error: the error message of an error status.
        retry_after: the ``Retry-After`` header value (seconds, or an HTTP date string).
        headers: more response headers.
        delay: seconds to wait before answering (interrupted when the server stops).
        chunk_delay: seconds to wait between streamed events.
        chunks: how many deltas the content and each tool call's arguments are split into.
        cut_after: for a stream, drop the connection after this many ``data`` events; for a
            plain response, send half the body and drop the connection.
        disconnect: drop the connection without answering at all.
        malformed: send a body, or a first stream event, that is not valid JSON.
        stream_error: send an error event with this message after the first stream chunk.
        raw_body: send these bytes as the body of a 200 JSON response, verbatim.
        gate: pause a stream after its first data event until this event is set.
        done: end a stream with ``data: [DONE]``.
        keepalive: send ``: keep-alive`` comment lines in streams.
    """

    content: str = ""
    tool_calls: list[ToolCall] = attrs.field(factory=list, converter=list)
    finish_reason: str | None = None
    usage: TokenUsage | None = None
    reasoning_content: str = ""
    status: int = 200
    error: str = ""
    retry_after: float | str | None = None
    headers: dict[str, str] = attrs.Factory(dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunks: int = 3
    cut_after: int | None = None
    disconnect: bool = False
    malformed: bool = False
    stream_error: str = ""
    raw_body: bytes | None = None
    gate: threading.Event | None = None
    done: bool = True
    keepalive: bool = True


# What FakeOpenAIServer(handler=...) takes: the request's JSON body in, the reply out.
Handler = Callable[[dict[str, Any]], "Reply | str"]


class FakeOpenAIServer:
    """An OpenAI-compatible server on ``127.0.0.1`` (a free port), serving in a background thread.

    Replies come from ``handler(request_json)`` when one is given, else from the replies
    queued with :meth:`queue`, in order (a ``str`` is an assistant message). A request with
    no reply to give gets HTTP 400 saying so. Use it as a context manager; it stops serving,
    drops open connections and joins its threads on exit.

    Attributes:
        base_url: ``"http://127.0.0.1:PORT/v1"``.
    """

    def __init__(self, handler: Handler | None = None) -> None:
        self._handler = handler
        self._replies: deque[Reply | str] = deque()
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._request_headers: list[dict[str, str]] = []
        self._connections = 0
        self._stopping = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _RequestHandler)
        self._httpd.fake = self
        self._thread: threading.Thread | None = None
        host, port = self._httpd.server_address[:2]
        self.base_url = f"http://{host!s}:{port}/v1"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        """Start serving (done by ``with``)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.01},
                name="FakeOpenAIServer",
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

    def __enter__(self) -> FakeOpenAIServer:
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
    def connections(self) -> int:
        """How many TCP connections the server has accepted (kept-alive calls share one)."""
        with self._lock:
            return self._connections

    @property
    def replies_left(self) -> int:
        """How many queued replies have not been used."""
        with self._lock:
            return len(self._replies)

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        with self._lock:
            self._requests.append(body)
            self._request_headers.append(headers)
            return len(self._requests)

    def _count_connection(self) -> None:
        with self._lock:
            self._connections += 1

    def _reply_for(self, body: dict[str, Any], number: int) -> Reply:
        if self._handler is not None:
            try:
                reply: Reply | str = self._handler(body)
            except Exception as error:
                return Reply(status=400, error=f"FakeOpenAIServer handler raised {error!r}")
        else:
            with self._lock:
                if not self._replies:
                    return Reply(
                        status=400,
                        error=f"FakeOpenAIServer has no reply queued for request {number}",
                    )
                reply = self._replies.popleft()
        return Reply(reply) if isinstance(reply, str) else reply


class _HTTPServer(ThreadingHTTPServer):
    # Handler threads are joined by server_close(): none outlives the server. They end
    # promptly because stop() shuts their sockets down and sets the event their waits watch.
    daemon_threads = False
    block_on_close = True
    fake: FakeOpenAIServer

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self._sockets: set[socket.socket] = set()
        self._sockets_lock = threading.Lock()
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._sockets_lock:
            self._sockets.add(request)
        super().process_request(request, client_address)

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


class _RequestHandler(BaseHTTPRequestHandler):
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
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, _error_body(f"no route for POST {self.path}", "not_found"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_json(400, _error_body("the request body is not valid JSON", "invalid_json"))
            return
        number = fake._record(body, {name.lower(): value for name, value in self.headers.items()})
        reply = fake._reply_for(body, number)
        if reply.delay and fake._stopping.wait(reply.delay):
            self._drop()
            return
        if reply.disconnect:
            self._drop()
        elif reply.raw_body is not None:
            self._send_json(reply.status, None, reply.headers, reply.raw_body)
        elif reply.status >= 400:
            self._send_error_reply(reply)
        elif body.get("stream"):
            self._send_stream(body, reply, number)
        else:
            self._send_completion(body, reply, number)

    # -- responses -------------------------------------------------------------------------

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_json(
        self,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> None:
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
        self._send_json(
            reply.status, _error_body(reply.error, _error_type(reply.status)), headers, raw
        )

    def _send_completion(self, request: dict[str, Any], reply: Reply, number: int) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in reply.tool_calls
            ]
        else:
            message["content"] = reply.content
        if reply.reasoning_content:
            message["reasoning_content"] = reply.reasoning_content
        payload = {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", ""),
            "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply)}],
            "usage": _usage(request, reply),
        }
        data = json.dumps(payload).encode()
        if reply.malformed:
            data = data[: len(data) // 2]
        if reply.cut_after is not None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self._drop()
            return
        self._send_json(200, None, reply.headers, data)

    def _send_stream(self, request: dict[str, Any], reply: Reply, number: int) -> None:
        fake = self.server.fake
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        sent = 0
        for event in _stream_events(request, reply, number):
            if event.startswith(b"data:"):
                if reply.cut_after is not None and sent >= reply.cut_after:
                    self._drop()
                    return
                sent += 1
                if sent == 2 and reply.gate is not None:
                    while not reply.gate.wait(0.05):
                        if fake._stopping.is_set():
                            self._drop()
                            return
                if reply.chunk_delay and sent > 1 and fake._stopping.wait(reply.chunk_delay):
                    self._drop()
                    return
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.write(b"0\r\n\r\n")


def _error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(status, "server_error")


def _error_body(message: str, error_type: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": None}}


def _finish_reason(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def _words(text: Any) -> int:
    return len(text.split()) if isinstance(text, str) else 0


def _usage(request: dict[str, Any], reply: Reply) -> dict[str, int]:
    usage = reply.usage
    if usage is None:
        prompt = sum(_words(message.get("content")) for message in request.get("messages", ()))
        completion = _words(reply.content) + len(reply.tool_calls)
        usage = TokenUsage(prompt, completion, prompt + completion)
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def _pieces(text: str, count: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, count)))
    return [text[start : start + size] for start in range(0, len(text), size)]


def _stream_events(request: dict[str, Any], reply: Reply, number: int) -> Iterable[bytes]:
    """Return the SSE events of a streamed reply, comments included, as the real API sends them."""
    include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model", ""),
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        payload = {
            **base,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if include_usage:
            payload["usage"] = None
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    events: list[bytes] = []
    if reply.keepalive:
        events.append(b": keep-alive\n\n")
    events.append(chunk({"role": "assistant", "content": "", "refusal": None}))
    for piece in _pieces(reply.reasoning_content, reply.chunks):
        events.append(chunk({"reasoning_content": piece}))
    for position, piece in enumerate(_pieces(reply.content, reply.chunks)):
        events.append(chunk({"content": piece}))
        if position == 0 and reply.keepalive:
            events.append(b": keep-alive\n\n")
    for index, call in enumerate(reply.tool_calls):
        first = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.function.name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [first]}))
        for piece in _pieces(call.function.arguments, reply.chunks):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    events.append(chunk({}, _finish_reason(reply)))
    if include_usage:
        events.append(
            b"data: "
            + json.dumps({**base, "choices": [], "usage": _usage(request, reply)}).encode()
            + b"\n\n"
        )
    first_data = 1 if reply.keepalive else 0
    if reply.stream_error:
        error = json.dumps(_error_body(reply.stream_error, "server_error")).encode()
        events.insert(first_data + 1, b"data: " + error + b"\n\n")
    if reply.malformed:
        events.insert(first_data, b'data: {"choices": [{"delta": \n\n')
    if reply.done:
        events.append(b"data: [DONE]\n\n")
    return events


def main() -> None:
    """Serve one fixed reply to every request until standard input closes.

    Prints the base URL on the first line of standard output, and the number of TCP
    connections accepted on the last. Benchmarks run the server this way, in its own process.
    """
    import argparse

    parser = argparse.ArgumentParser(
        description=main.__doc__.splitlines()[0] if main.__doc__ else ""
    )
    parser.add_argument("--content", default="It is clear and 21 degrees in Paris today.")
    parser.add_argument("--chunks", type=int, default=4)
    args = parser.parse_args()
    reply = Reply(args.content, chunks=args.chunks)
    with FakeOpenAIServer(handler=lambda request: reply) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
        connections = server.connections
    print(f"connections: {connections}", flush=True)


if __name__ == "__main__":
    main()
