"""OpenAIChatModel refuses a response larger than ``max_response_bytes``, quickly and cheaply.

A real loopback server (``tests.misbehaving_server.RawServer``) sends bodies of up to 1 GB,
made lazily block by block and never held in memory: a whole completion (chunked, or with a
``Content-Length``), an error body, a Server-Sent Events stream of honest chunks, one endless
SSE line, a small gzip body that inflates past the limit. The call must fail with
``ResponseTooLargeError`` (no retry), stop reading (the server sees its connection closed
long before 1 GB), keep the pool healthy (the next call works, on a fresh connection), and,
measured in a child process from ``/proc/self/status``, keep its peak RSS near the limit.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

import agentkit
from agentkit.errors import ModelError, ResponseTooLargeError
from agentkit.models import OpenAIChatModel
from agentkit.schema import user_message
from tests.misbehaving_server import RawServer

GB = 1024**3
MiB = 1024**2
DEFAULT_LIMIT = 64 * MiB
BLOCK = 64 * 1024
GUARD = 60.0  # failure guard for a call; a refused 1 GB answer takes well under a second

COMPLETION_HEAD = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"'
COMPLETION_TAIL = b'"},"finish_reason":"stop"}]}'
FRAME = len(COMPLETION_HEAD) + len(COMPLETION_TAIL)  # the bytes around the content
EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"abcdefgh"},"finish_reason":null}]}\n\n'
LAST_EVENTS = (
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


def _head(content_type: str, length: int | None, status: str = "200 OK", extra: str = "") -> bytes:
    framing = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    return f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n{extra}{framing}\r\n\r\n".encode()


def _chunked(blocks: Iterator[bytes]) -> Iterator[bytes]:
    for block in blocks:
        yield b"%x\r\n" % len(block) + block + b"\r\n"
    yield b"0\r\n\r\n"


def _filler(total: int, unit: bytes = b"x") -> Iterator[bytes]:
    """``total`` bytes in blocks of BLOCK, made as they are sent (one block in memory)."""
    block = (unit * (BLOCK // len(unit) + 1))[:BLOCK]
    sent = 0
    while sent + BLOCK <= total:
        yield block
        sent += BLOCK
    if total > sent:
        yield block[: total - sent]


def completion(size: int, chunked: bool = True, status: str = "200 OK") -> Iterator[bytes]:
    """A JSON completion whose content makes the body ``size`` bytes long."""
    parts = _chain(iter([COMPLETION_HEAD]), _filler(size - FRAME), iter([COMPLETION_TAIL]))
    if chunked:
        yield _head("application/json", None, status)
        yield from _chunked(parts)
    else:
        yield _head("application/json", size, status)
        yield from parts


def sse(size: int) -> Iterator[bytes]:
    """An honest event stream of about ``size`` bytes of small content chunks."""
    yield _head("text/event-stream", None)
    yield from _chunked(_chain(_filler(size - len(LAST_EVENTS), EVENT), iter([LAST_EVENTS])))


def endless_line(size: int) -> Iterator[bytes]:
    """An event stream whose first data line never ends."""
    yield _head("text/event-stream", None)
    start = b'data: {"choices":[{"index":0,"delta":{"content":"'
    yield from _chunked(_chain(iter([start]), _filler(size)))


def _chain(*parts: Iterator[bytes]) -> Iterator[bytes]:
    for part in parts:
        yield from part


def ok_reply() -> Iterator[bytes]:
    body = COMPLETION_HEAD + b"fine" + COMPLETION_TAIL
    yield _head("application/json", len(body)) + body


class Script:
    """A behaviour per request (1-based); records how far each one got and how it ended."""

    def __init__(self, *replies: Callable[[], Iterator[bytes]]) -> None:
        self.replies = replies
        self.sent: list[int] = []
        self.errors: list[OSError | None] = []
        self.lock = threading.Lock()
        self.done = threading.Event()  # set when a reply ends (either way)

    def __call__(self, connection: socket.socket, stop: threading.Event, server: RawServer) -> bool:
        with self.lock:
            number = len(self.sent)
            self.sent.append(0)
            self.errors.append(None)
        blocks = self.replies[min(number, len(self.replies) - 1)]()
        try:
            for block in blocks:
                if stop.is_set():
                    return False
                connection.sendall(block)
                self.sent[number] += len(block)
        except OSError as error:  # the client closed the connection
            self.errors[number] = error
            return False
        finally:
            self.done.set()
        return True


def _model(server: RawServer, **kwargs: object) -> OpenAIChatModel:
    options: dict[str, object] = {"api_key": "k", "timeout": GUARD, "max_retries": 3, **kwargs}
    return OpenAIChatModel("m", base_url=server.base_url, **options)  # type: ignore[arg-type]


def _refused(call: Callable[[], object]) -> tuple[ResponseTooLargeError, float]:
    start = time.monotonic()
    with pytest.raises(ResponseTooLargeError) as caught:
        call()
    return caught.value, time.monotonic() - start


# --- in process: the error, no retry, reading stops, the pool stays healthy -------------------


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_a_1gb_completion_is_refused_quickly_and_the_next_call_works(chunked: bool) -> None:
    script = Script(lambda: completion(GB, chunked), ok_reply)
    with RawServer(script) as server, _model(server) as model:
        error, elapsed = _refused(lambda: model.generate([user_message("hi")]))
        assert elapsed < 5.0, f"refusing took {elapsed:.2f} s"
        assert error.limit == DEFAULT_LIMIT and error.status_code == 200
        assert "max_response_bytes=67,108,864 bytes (64 MiB)" in str(error)
        assert "OpenAIChatModel(..., max_response_bytes=...), or None" in str(error)
        assert "reading stopped after" in str(error)
        assert "the connection was closed" in str(error)
        if chunked:
            assert DEFAULT_LIMIT < error.received <= DEFAULT_LIMIT + BLOCK + 100
        else:  # refused on the second read, for the Content-Length
            assert 0 < error.received <= 2 * BLOCK
            assert f"declares {GB:,} bytes (Content-Length)" in str(error)
        assert script.done.wait(GUARD)
        # The connection was closed, not drained: the server could not send the rest.
        assert isinstance(script.errors[0], OSError)
        assert script.sent[0] < DEFAULT_LIMIT + 32 * MiB
        assert server.request_count == 1  # not retried
        assert model.generate([user_message("again")]).content == "fine"
        assert server.connection_count == 2  # the refused connection was not reused


def test_a_1gb_stream_of_honest_chunks_is_refused_by_its_reader() -> None:
    # 4 MiB, not the default: a stream is parsed chunk by chunk up to the limit, and 64 MiB
    # of small chunks take seconds (the child process test below reads that far).
    limit = 4 * MiB
    script = Script(lambda: sse(GB), ok_reply)
    with RawServer(script) as server, _model(server, max_response_bytes=limit) as model:
        reader = model.stream([user_message("hi")])
        assert reader.recv().content == "abcdefgh"
        chunks = 1

        def read_all() -> None:
            nonlocal chunks
            for _ in reader:
                chunks += 1

        error, _ = _refused(read_all)
        assert limit < error.received <= limit + BLOCK + 100
        assert "the response from" in str(error) and "(4 MiB)" in str(error)
        # Every chunk that arrived before the limit was delivered, none after it.
        assert error.received - 2 * BLOCK <= chunks * len(EVENT) <= error.received
        assert script.done.wait(GUARD) and isinstance(script.errors[0], OSError)
        assert script.sent[0] < limit + 32 * MiB
        assert server.request_count == 1
        assert model.generate([user_message("again")]).content == "fine"
        assert server.connection_count == 2


def test_an_endless_sse_line_is_refused_before_the_first_chunk() -> None:
    script = Script(lambda: endless_line(GB))
    with RawServer(script) as server, _model(server) as model:
        error, elapsed = _refused(lambda: model.stream([user_message("hi")]))
        assert elapsed < 5.0, f"refusing took {elapsed:.2f} s"
        assert DEFAULT_LIMIT < error.received <= DEFAULT_LIMIT + BLOCK + 100
        assert server.request_count == 1


def test_a_huge_error_body_is_refused_and_not_retried() -> None:
    script = Script(lambda: completion(GB, chunked=True, status="500 Internal Server Error"))
    with RawServer(script) as server, _model(server) as model:
        error, _ = _refused(lambda: model.generate([user_message("hi")]))
        assert error.status_code == 500
        assert server.request_count == 1  # a 500 is retried; a refused body is not


def test_a_stream_declaring_a_huge_content_length_is_refused_at_the_limit() -> None:
    def declared() -> Iterator[bytes]:
        yield _head("text/event-stream", GB)
        yield from _filler(GB, EVENT)

    script = Script(declared)
    with RawServer(script) as server, _model(server, max_response_bytes=MiB) as model:
        # stream() returns with the chunks of the first read; the reader then refuses.
        error, _ = _refused(lambda: list(model.stream([user_message("hi")])))
        assert MiB < error.received <= MiB + BLOCK + 100 and error.limit == MiB
        assert "(1 MiB)" in str(error)


def test_a_compressed_body_is_held_to_its_decoded_size() -> None:
    inflated = COMPLETION_HEAD + b"x" * (4 * MiB) + COMPLETION_TAIL
    packed = gzip.compress(inflated)
    assert len(packed) < MiB // 10

    def compressed() -> Iterator[bytes]:
        extra = "Content-Encoding: gzip\r\n"
        yield _head("application/json", len(packed), extra=extra) + packed

    with RawServer(Script(compressed)) as server:
        with _model(server, max_response_bytes=MiB) as model:
            error, _ = _refused(lambda: model.generate([user_message("hi")]))
            assert MiB < error.received < 4 * MiB + BLOCK
        with _model(server, max_response_bytes=8 * MiB) as model:
            assert len(model.generate([user_message("hi")]).content) == 4 * MiB


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_a_body_of_exactly_the_limit_passes_and_one_byte_more_does_not(chunked: bool) -> None:
    limit = 300_000
    script = Script(lambda: completion(limit, chunked), lambda: completion(limit + 1, chunked))
    with RawServer(script) as server, _model(server, max_response_bytes=limit) as model:
        assert len(model.generate([user_message("hi")]).content) == limit - FRAME
        error, _ = _refused(lambda: model.generate([user_message("hi")]))
        assert error.limit == limit


def test_none_turns_the_limit_off() -> None:
    size = 3 * MiB
    with RawServer(Script(lambda: completion(size))) as server:
        with _model(server, max_response_bytes=MiB) as model:
            _refused(lambda: model.generate([user_message("hi")]))
        with _model(server, max_response_bytes=None) as model:
            assert len(model.generate([user_message("hi")]).content) == size - FRAME


def test_the_limit_holds_with_a_client_of_the_callers() -> None:
    with (
        RawServer(Script(lambda: completion(GB))) as server,
        httpx.Client() as client,
        _model(server, http_client=client, max_response_bytes=MiB) as model,
    ):
        error, _ = _refused(lambda: model.generate([user_message("hi")]))
        assert MiB < error.received <= MiB + BLOCK + 100


def test_tool_bound_copies_keep_the_limit() -> None:
    with (
        RawServer(Script(lambda: completion(2 * MiB))) as server,
        _model(server, max_response_bytes=MiB) as model,
    ):
        bound = model.with_tools([])
        _refused(lambda: bound.generate([user_message("hi")]))


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "10"])
def test_a_limit_that_is_not_a_positive_number_of_bytes_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match=r"max_response_bytes must be a number of bytes > 0, or None"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", max_response_bytes=value)  # type: ignore[arg-type]


def test_the_error_is_a_model_error_exported_everywhere() -> None:
    assert issubclass(ResponseTooLargeError, ModelError)
    assert agentkit.ResponseTooLargeError is ResponseTooLargeError
    assert agentkit.models.ResponseTooLargeError is ResponseTooLargeError


# --- in a child process: peak RSS stays near the limit -----------------------------------------

CHILD = r"""
import json, resource, sys, time

def status(key):
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024

from agentkit.models import OpenAIChatModel
from agentkit.schema import user_message

url, kind = sys.argv[1], sys.argv[2]
model = OpenAIChatModel("m", base_url=url, api_key="k", timeout=60, max_retries=0)
model.generate([user_message("warm up")])  # imports and first allocations, before measuring
# Should the limit fail, do not let the child take the machine: 1.5 GiB more, then MemoryError.
resource.setrlimit(resource.RLIMIT_AS, (status("VmPeak") + 1536 * 2**20, resource.RLIM_INFINITY))
before = status("VmHWM")
start = time.monotonic()
try:
    if kind == "stream":
        for chunk in model.stream([user_message("hi")]):
            pass
    else:
        model.generate([user_message("hi")])
    outcome = "no error"
except BaseException as error:
    outcome = type(error).__name__
elapsed = time.monotonic() - start
print(json.dumps({"growth": status("VmHWM") - before, "elapsed": elapsed, "outcome": outcome}))
"""


@pytest.mark.parametrize(
    ("kind", "reply", "seconds"),
    [
        ("generate", lambda: completion(GB), 5.0),
        ("stream", lambda: endless_line(GB), 5.0),
        # 64 MiB of 88-byte events are 760,000 chunks to parse (about 5 s here): the time
        # is that of reading up to the limit, bounded by the guard only.
        ("stream", lambda: sse(GB), GUARD),
    ],
    ids=["completion", "sse-endless-line", "sse-chunks"],
)
def test_a_1gb_answer_is_refused_at_a_bounded_peak_rss(
    kind: str, reply: Callable[[], Iterator[bytes]], seconds: float
) -> None:
    with RawServer(Script(ok_reply, reply)) as server:
        child = subprocess.run(
            [sys.executable, "-c", CHILD, server.base_url, kind],
            capture_output=True,
            text=True,
            timeout=GUARD,
            env=os.environ,
            check=False,
        )
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    assert report["outcome"] == "ResponseTooLargeError", report
    assert report["elapsed"] < seconds, report
    # At most the body up to the limit is held, once (64 MiB): far from the 1 GB sent, which
    # took 3.9 GB before there was a limit. A stream holds one network read at a time.
    assert report["growth"] < 2 * DEFAULT_LIMIT, report
