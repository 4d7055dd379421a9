"""A fast loopback OpenAI-compatible Chat Completions server with a scripted ReAct policy.

Run as its own process (``python -m benchmarks._server``) so that its CPU work does not share
the GIL with the client being measured; it prints ``PORT <n>`` on stdout once it listens and
exits when its stdin closes (so it never outlives the benchmark that started it).

The policy is stateless and read from the URL, so any number of concurrent runs can share the
server: a base URL ``http://127.0.0.1:<port>/p/k=10,l=50,f=1,t=add+mul/v1`` means

- ``k``: answer with tool calls until the request holds ``k`` assistant messages, then answer
  with text (a run makes ``k`` tool rounds and ``k + 1`` model calls);
- ``l``: milliseconds of latency before every answer;
- ``f``: tool calls per round (fan-out), all in one reply;
- ``t``: the tool names, used in turn, round by round (``+``-separated).

Tool calls ask for ``{"a": <round>, "b": <index in round>}``. The request body's ``stream``
field selects Server-Sent Events (role delta, tool-call fragments, finish, usage, ``[DONE]``)
or one JSON completion; both are sent with ``Content-Length`` on a keep-alive connection.

The server counts the completions it answered: ``GET /count`` returns ``{"requests": n}``, so a
scenario can check that its runs made the model calls they should before it times them
(:func:`request_count`).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Policy", "base_url", "main", "reply_body", "request_count"]


class Policy:
    """The scripted behaviour named by a URL segment such as ``k=10,l=0,f=1,t=add``."""

    __slots__ = ("fanout", "latency_ms", "steps", "tools")

    def __init__(
        self,
        steps: int,
        latency_ms: float = 0.0,
        fanout: int = 1,
        tools: tuple[str, ...] = ("add",),
    ) -> None:
        self.steps = steps
        self.latency_ms = latency_ms
        self.fanout = fanout
        self.tools = tools

    def segment(self) -> str:
        """Return the URL segment that names this policy."""
        latency = f"{self.latency_ms:g}"
        return f"k={self.steps},l={latency},f={self.fanout},t={'+'.join(self.tools)}"

    @classmethod
    def parse(cls, segment: str) -> Policy:
        """Read a policy from its URL segment."""
        fields = dict(part.split("=", 1) for part in segment.split(","))
        return cls(
            int(fields["k"]),
            float(fields.get("l", "0")),
            int(fields.get("f", "1")),
            tuple(fields.get("t", "add").split("+")),
        )


def base_url(port: int, policy: Policy) -> str:
    """Return the OpenAI base URL under which the server plays ``policy``."""
    return f"http://127.0.0.1:{port}/p/{policy.segment()}/v1"


def request_count(port: int) -> int:
    """Return how many completions the server on ``port`` has answered so far."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/count", timeout=30) as response:
        count: int = json.loads(response.read())["requests"]
    return count


_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _reply_parts(policy: Policy, request: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    messages = request.get("messages", [])
    done = sum(1 for message in messages if message.get("role") == "assistant")
    if done >= policy.steps:
        tool_results = sum(1 for message in messages if message.get("role") == "tool")
        return f"done after {tool_results} tool results", []
    name = policy.tools[done % len(policy.tools)]
    calls = [
        {
            "id": f"call_{done}_{index}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps({"a": done, "b": index})},
        }
        for index in range(policy.fanout)
    ]
    return "", calls


def _completion(content: str, calls: list[dict[str, Any]]) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench",
        "choices": [choice],
        "usage": _USAGE,
    }
    return json.dumps(body).encode()


def _sse(content: str, calls: list[dict[str, Any]]) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    parts = [chunk({"role": "assistant", "content": ""})]
    for index, call in enumerate(calls):
        arguments = call["function"]["arguments"]
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        parts.append(chunk({"tool_calls": [head]}))
        middle = len(arguments) // 2
        for piece in (arguments[:middle], arguments[middle:]):
            fragment = {"index": index, "function": {"arguments": piece}}
            parts.append(chunk({"tool_calls": [fragment]}))
    if content:
        third = max(1, len(content) // 3)
        for start in range(0, len(content), third):
            parts.append(chunk({"content": content[start : start + third]}))
    parts.append(chunk({}, "tool_calls" if calls else "stop"))
    usage = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "bench",
        "choices": [],
        "usage": _USAGE,
    }
    parts.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def reply_body(policy: Policy, request: dict[str, Any]) -> tuple[bytes, str]:
    """Return the response body and content type for ``request`` under ``policy``."""
    content, calls = _reply_parts(policy, request)
    if request.get("stream"):
        return _sse(content, calls), "text/event-stream"
    return _completion(content, calls), "application/json"


class _Counter:
    """The number of completions answered (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = 0

    def add(self) -> None:
        with self._lock:
            self._value += 1

    def value(self) -> int:
        with self._lock:
            return self._value


_counter = _Counter()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in one segment, at once: no Nagle / delayed-ACK stalls.
    disable_nagle_algorithm = True
    wbufsize = 1 << 16

    def do_GET(self) -> None:
        if self.path != "/count":
            self.send_error(404, "GET /count is the only GET path")
            return
        body = json.dumps({"requests": _counter.value()}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        segments = self.path.split("/")
        try:
            policy = Policy.parse(segments[segments.index("p") + 1])
        except (ValueError, KeyError, IndexError):
            self.send_error(404, "unknown policy path")
            return
        body, content_type = reply_body(policy, request)
        if policy.latency_ms:
            time.sleep(policy.latency_ms / 1000)
        _counter.add()  # before the reply leaves: a client that has it sees it counted
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the benchmark's output clean."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def main() -> None:
    """Serve on an ephemeral loopback port until stdin closes."""
    server = _Server(("127.0.0.1", 0), _Handler)
    print(f"PORT {server.server_address[1]}", flush=True)

    def watch_parent() -> None:
        sys.stdin.read()
        server.shutdown()

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    server.serve_forever(poll_interval=0.2)
    server.server_close()


if __name__ == "__main__":
    main()
