"""A hand-written MCP server that breaks the protocol on request, over stdio or streamable HTTP.

    python tests/mcp_servers/rogue.py                   # stdio
    python tests/mcp_servers/rogue.py http [--port N]   # streamable HTTP on 127.0.0.1
    python tests/mcp_servers/rogue.py stubborn FILE     # never answers, ignores SIGTERM
    python tests/mcp_servers/rogue.py silent-http       # accepts connections, never answers

Over HTTP it prints ``PORT <n>`` on stdout once it listens (port 0 picks a free one); the
silent HTTP server also prints ``ACCEPTED`` for each connection. The stubborn stdio "server"
writes its pid to FILE once it runs, then ignores stdin, SIGTERM and everything else.

It speaks just enough MCP (``initialize``, ``tools/list``, ``tools/call``, ``ping``) written by
hand, so that a test decides every byte on the wire. Its tools:

- ``session``: the HTTP session id of the call (``stdio <pid>`` over stdio), to tell a fresh
  connection from an old one;
- ``echo(text)``: the text;
- ``binary_line``, ``bad_json``, ``not_jsonrpc``: answer with a message that is not UTF-8, not
  JSON, or JSON but not JSON-RPC, instead of the result;
- ``stray_line(text)``: write a line that is not JSON first, then the right answer;
- ``after_line(text)``: the right answer, then a line that is not JSON;
- ``stall``: never answer; ``stalled``: how many calls of ``stall`` never got an answer;
- ``big(size, pause=0)``: a text result of ``size`` bytes, written in pieces of 1 MiB with
  ``pause`` seconds between them (the server never holds it whole).

Over HTTP every answer is a JSON body, or one server-sent event with ``{"sse": true}``, and
gzip-compressed with ``{"gzip": true}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_PIECE = 1 << 20
_BIG_TEXT_FIELD = b"x" * _PIECE
_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_TOOLS = [
    {"name": name, "description": description, "inputSchema": {
        "type": "object", "properties": properties, "required": sorted(properties)}}
    for name, description, properties in [
        ("session", "The HTTP session id of this call.", {}),
        ("echo", "Return the text.", {"text": {"type": "string"}}),
        ("binary_line", "Answer with bytes that are not UTF-8.", {}),
        ("bad_json", "Answer with text that is not JSON.", {}),
        ("not_jsonrpc", "Answer with JSON that is not JSON-RPC.", {}),
        ("stray_line", "Write a line that is not JSON, then answer.", {"text": {"type": "string"}}),
        ("after_line", "Answer, then write a line that is not JSON.", {"text": {"type": "string"}}),
        ("stall", "Never answer.", {}),
        ("stalled", "How many calls of stall are unanswered.", {}),
        ("big", "A text result of `size` bytes.", {"size": {"type": "integer"}}),
    ]
]


def _encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def _result(request_id: Any, result: dict[str, Any]) -> bytes:
    return _encode({"jsonrpc": "2.0", "id": request_id, "result": result})


def _text(request_id: Any, text: str) -> bytes:
    return _result(request_id, {"content": [{"type": "text", "text": text}], "isError": False})


def _big(request_id: Any, size: int, pause: float = 0.0) -> Iterator[bytes]:
    head = _encode({"jsonrpc": "2.0", "id": request_id, "result": {
        "content": [{"type": "text", "text": ""}], "isError": False}})
    opening, closing = head.split(b'"text":""', 1)
    yield opening + b'"text":"'
    left = size
    while left > 0:
        piece = min(left, _PIECE)
        yield _BIG_TEXT_FIELD[:piece]
        left -= piece
        if pause:
            time.sleep(pause)
    yield b'"' + closing


_stalled = 0
_BROKEN = {  # what these tools send instead of their answer
    "binary_line": b"\xff\xfe\x00 not utf-8 \xc3\x28",
    "bad_json": b"Traceback (most recent call last): this is not JSON",
    "not_jsonrpc": b'{"hello": "world"}',
}
_BEFORE = {"stray_line": [b"server started!"]}  # lines these tools write before their answer
_AFTER = {"after_line": [b"goodbye!"]}  # ... and after it


def answer(
    message: dict[str, Any], session: str
) -> tuple[list[bytes], Iterator[bytes] | None, list[bytes]]:
    """The lines to write before the answer, the answer (``None``: none) and the lines after."""
    method = message.get("method")
    request_id = message.get("id")
    if request_id is None:
        return [], None, []  # a notification: no answer
    if method == "initialize":
        asked = message.get("params", {}).get("protocolVersion")
        return [], iter([_result(request_id, {
            "protocolVersion": asked if asked in _VERSIONS else _VERSIONS[-1],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "rogue", "version": "1.0"},
        })]), []
    if method == "ping":
        return [], iter([_result(request_id, {})]), []
    if method == "tools/list":
        return [], iter([_result(request_id, {"tools": _TOOLS})]), []
    if method != "tools/call":
        return [], iter([_encode({"jsonrpc": "2.0", "id": request_id, "error": {
            "code": -32601, "message": f"no method {method}"}})]), []
    params = message.get("params", {})
    name = str(params.get("name"))
    reply = _call(request_id, name, params.get("arguments") or {}, session)
    return _BEFORE.get(name, []), reply, _AFTER.get(name, [])


def _call(
    request_id: Any, name: str, arguments: dict[str, Any], session: str
) -> Iterator[bytes] | None:
    global _stalled
    if name in _BROKEN:
        return iter([_BROKEN[name]])
    if name == "stall":
        _stalled += 1
        return None
    if name == "big":
        return _big(request_id, int(arguments["size"]), float(arguments.get("pause", 0)))
    texts = {
        "session": session,
        "stalled": str(_stalled),
        "echo": str(arguments.get("text", "")),
        "stray_line": str(arguments.get("text", "")),
        "after_line": str(arguments.get("text", "")),
    }
    return iter([_text(request_id, texts.get(name, f"no tool {name}"))])


def serve_stdio() -> None:
    """Answer one line at a time on stdin/stdout until stdin closes."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        before, reply, after = answer(json.loads(line), f"stdio {os.getpid()}")
        for stray in before:
            out.write(stray + b"\n")
        if reply is not None:
            for part in reply:
                out.write(part)
                out.flush()
            out.write(b"\n")
        for stray in after:
            out.write(stray + b"\n")
        out.flush()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    sessions: set[str] = set()
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._empty(405)  # no stream for server-initiated messages

    def do_DELETE(self) -> None:
        with self.lock:
            self.sessions.discard(self.headers.get("mcp-session-id", ""))
        self._empty(200)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        message = json.loads(body)
        session = self.headers.get("mcp-session-id", "")
        if message.get("method") == "initialize":
            session = uuid.uuid4().hex
            with self.lock:
                self.sessions.add(session)
        else:
            with self.lock:
                known = session in self.sessions
            if not known:
                self._empty(404)
                return
        _, reply, _ = answer(message, session)
        if reply is None:
            self._empty(202)
            return
        arguments = message.get("params", {}).get("arguments", {})
        sse, compress = bool(arguments.get("sse")), bool(arguments.get("gzip"))
        parts: Any = [b"event: message\ndata: ", *reply, b"\n\n"] if sse else reply
        if compress:
            parts = [gzip.compress(b"".join(parts))]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if sse else "application/json")
        if compress:
            self.send_header("content-encoding", "gzip")
        self.send_header("mcp-session-id", session)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            for part in parts:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client stopped reading (a size limit): drop the connection
            self.close_connection = True

    def _empty(self, status: int) -> None:
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()


def serve_http(port: int) -> None:
    """Serve streamable HTTP on 127.0.0.1 until killed."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler, bind_and_activate=False)
    server.daemon_threads = True
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.server_bind()
    server.server_activate()
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


def stubborn(ready: Path) -> None:
    """Never answer, never read stdin, ignore SIGTERM: only SIGKILL ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.write_text(str(os.getpid()))
    while True:
        time.sleep(3600)


def silent_http(port: int) -> None:
    """Accept HTTP connections and never answer (says ``ACCEPTED`` for each)."""
    listener = socket.create_server(("127.0.0.1", port))
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    held = []
    while True:
        connection, _ = listener.accept()
        held.append(connection)
        print("ACCEPTED", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "transport", nargs="?", default="stdio",
        choices=["stdio", "http", "stubborn", "silent-http"],
    )
    parser.add_argument("ready", nargs="?", type=Path)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.transport == "stdio":
        serve_stdio()
    elif args.transport == "http":
        serve_http(args.port)
    elif args.transport == "stubborn":
        stubborn(args.ready)
    else:
        silent_http(args.port)


if __name__ == "__main__":
    main()
