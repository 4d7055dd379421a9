"""MCP connections heal: protocol errors, size limits, cancel and timeouts while connecting.

Against real server processes over stdio and streamable HTTP: the hand-written rogue server
(tests/mcp_servers/rogue.py) decides every byte it sends; the toolbox server is the ``mcp``
package's own server.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    CancelHandle,
    ChatModelAgent,
    Runner,
    ToolError,
    ToolTimeoutError,
    tool,
    with_cancel,
)
from agentkit.mcp import MCPClient, MCPClientClosedError, MCPConnectionError, MCPProtocolError
from agentkit.mcp._http import BodySize, EventSize
from agentkit.mcp._stdio import LineSplitter, LineTooLongError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak
from tests.mcp_servers.support import (
    ROGUE,
    http_server,
    mcp_connections,
    toolbox_client,
    wait_until,
)

MiB = 2**20
BIG_RESULT = Path(__file__).resolve().parent / "mcp_servers" / "big_result.py"


@contextmanager
def rogue(transport: str, **options: object) -> Iterator[MCPClient]:
    """A client of the rogue server over ``"stdio"`` or ``"http"`` (its own process)."""
    if transport == "stdio":
        with MCPClient.stdio(sys.executable, [str(ROGUE)], **options) as client:  # type: ignore[arg-type]
            yield client
    else:
        with http_server("http", ROGUE) as server, MCPClient.http(
            server.url, **options  # type: ignore[arg-type]
        ) as client:
            yield client


def text(result: dict[str, object]) -> str:
    content = result["content"]
    assert isinstance(content, list)
    return str(content[0]["text"])


def identity(client: MCPClient) -> str:
    """The server process (stdio) or HTTP session answering: changes when the client reconnects."""
    return text(client.call_tool("session"))


# --- N6: a message that is not MCP breaks the connection, and the next call heals it ---

STDIO_BREAKAGES = [
    ("binary_line", r"a line that is not UTF-8 \(byte 0xff at position 0\): b'\\xff\\xfe"),
    ("bad_json", r"a line that is not JSON: b'Traceback \(most recent call last\)"),
    ("not_jsonrpc", r"a line that is JSON but not a JSON-RPC message: b'{\"hello\": \"world\"}'"),
    ("stray_line", r"a line that is not JSON: b'server started!'"),
]


@pytest.mark.parametrize(("name", "what"), STDIO_BREAKAGES)
def test_a_stdio_line_that_is_not_a_message_fails_the_call_at_once_and_the_next_reconnects(
    name: str, what: str
) -> None:
    with no_thread_leak(), rogue("stdio", timeout=60) as client:
        before = identity(client)
        started = time.monotonic()
        with pytest.raises(MCPProtocolError) as info:
            client.call_tool(name, {"text": "hi"})
        assert time.monotonic() - started < 30  # at once, not at the 60 s timeout
        message = str(info.value)
        assert message.startswith(f"the call to tool {name} failed: the MCP server ")
        assert "rogue.py broke the protocol: it sent " in message
        assert "must write only MCP messages to its stdout (logs go to stderr)" in message
        assert message.endswith("the connection was dropped and the next call reconnects")
        assert _search(what, message)
        error = info.value
        assert isinstance(error, MCPConnectionError) and isinstance(error, ToolError)
        assert error.tool_name == name
        after = identity(client)  # a fresh server process answers
        assert after != before and after.startswith("stdio ")
        assert text(client.call_tool("echo", {"text": "healed"})) == "healed"
        assert len(mcp_connections()) == 1


def _search(pattern: str, message: str) -> bool:
    import re

    return re.search(pattern, message) is not None


@pytest.mark.parametrize("framing", ["json", "sse"])
@pytest.mark.parametrize("name", ["binary_line", "bad_json", "not_jsonrpc"])
def test_an_http_answer_that_is_not_a_message_fails_the_call_and_the_next_gets_a_new_session(
    name: str, framing: str
) -> None:
    with no_thread_leak(), rogue("http", timeout=60) as client:
        before = identity(client)
        started = time.monotonic()
        with pytest.raises(MCPProtocolError, match="could not be parsed") as info:
            client.call_tool(name, {"sse": framing == "sse"})
        assert time.monotonic() - started < 30
        assert f"the call to tool {name} failed: the MCP server http://127.0.0.1:" in str(info.value)
        assert info.value.tool_name == name
        after = identity(client)
        assert after != before  # a new session
        assert text(client.call_tool("echo", {"text": "healed"})) == "healed"


def test_a_stray_line_between_calls_is_logged_and_the_next_call_reconnects(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agentkit.mcp")
    with no_thread_leak(), rogue("stdio") as client:
        before = identity(client)
        # The answer comes first, then a line that is not JSON while no call waits.
        assert text(client.call_tool("after_line", {"text": "fine"})) == "fine"
        wait_until(lambda: any("broke the protocol" in r.getMessage() for r in caplog.records))
        (record,) = [r for r in caplog.records if "broke the protocol" in r.getMessage()]
        assert "rogue.py" in record.getMessage() and "b'goodbye!'" in record.getMessage()
        assert identity(client) != before


def test_every_call_waiting_on_a_connection_that_breaks_fails_with_the_protocol_error() -> None:
    with no_thread_leak(), rogue("stdio", timeout=120) as client:
        errors: list[BaseException] = []

        def stall() -> None:
            try:
                client.call_tool("stall")
            except BaseException as error:
                errors.append(error)

        waiting = threading.Thread(target=stall)
        waiting.start()
        wait_until(lambda: text(client.call_tool("stalled")) == "1")  # it waits for an answer
        with pytest.raises(MCPProtocolError):
            client.call_tool("binary_line")
        waiting.join(30)  # a guard: it fails at once, not at its 120 s timeout
        assert not waiting.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], MCPProtocolError)
        assert "the call to tool stall failed: " in str(errors[0])
        assert "not UTF-8" in str(errors[0])


# --- N7: size limits ---


@pytest.mark.parametrize("transport", ["stdio", "http-json", "http-sse"])
def test_a_result_over_max_message_bytes_fails_the_call_and_the_next_call_reconnects(
    transport: str,
) -> None:
    with no_thread_leak(), rogue(transport[:5].rstrip("-"), max_message_bytes=MiB) as client:
        before = identity(client)
        with pytest.raises(MCPProtocolError) as info:
            client.call_tool("big", {"size": 4 * MiB, "sse": transport == "http-sse"})
        message = str(info.value)
        assert "broke the protocol: it sent a message larger than max_message_bytes=1048576 " in (
            message
        )
        assert "raise the client's max_message_bytes if results this large are expected" in message
        assert identity(client) != before
        assert len(text(client.call_tool("big", {"size": MiB // 2}))) == MiB // 2


@pytest.mark.parametrize("transport", ["stdio", "http-json", "http-sse"])
def test_a_result_under_the_default_limit_arrives_whole(transport: str) -> None:
    # Over HTTP as an event too: the mcp package's own 1 MiB cap on events does not apply.
    with rogue(transport[:5].rstrip("-")) as client:
        result = client.call_tool("big", {"size": 3 * MiB, "sse": transport == "http-sse"})
        assert text(result) == "x" * (3 * MiB)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_mcp_packages_own_server_is_held_to_the_limit_and_heals(transport: str) -> None:
    with ExitStack() as stack:
        if transport == "stdio":
            client = stack.enter_context(toolbox_client(max_message_bytes=MiB))
        else:
            server = stack.enter_context(http_server("http"))
            client = stack.enter_context(MCPClient.http(server.url, max_message_bytes=MiB))
        # (Its answer holds the text twice: as content and as structured content.)
        assert len(text(client.call_tool("big", {"size": MiB // 4}))) == MiB // 4
        with pytest.raises(MCPProtocolError, match="larger than max_message_bytes=1048576"):
            client.call_tool("big", {"size": 2 * MiB})
        assert text(client.call_tool("add", {"a": 2, "b": 3})) == "5"


def test_a_two_mib_answer_of_the_mcp_packages_http_server_arrives() -> None:
    # Its answers are events: mcp 2.x alone refuses events over 1 MiB.
    with http_server("http") as server, MCPClient.http(server.url) as client:
        assert len(text(client.call_tool("big", {"size": 2 * MiB}))) == 2 * MiB


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_huge_result_is_refused_in_a_moment_at_bounded_memory(transport: str) -> None:
    # In a process of its own, to read its peak memory; 200 MB, with the default 16 MiB limit.
    done = subprocess.run(
        [sys.executable, str(BIG_RESULT), transport, str(200 * 10**6)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["error"] == "MCPProtocolError"
    assert report["next"] == "healed"
    assert report["seconds"] < 20  # measured: 0.1 s (it was 118 s for 50 MB)
    grown_mib = (report["peak_kb"] - report["baseline_kb"]) / 1024
    assert grown_mib < 48, f"the client grew by {grown_mib:.0f} MiB"  # measured: ~16 MiB


def test_a_timed_out_call_leaves_no_work_burning() -> None:
    # 15 MiB trickling in over 3 s: the call times out after 1 s, and reading the rest of
    # the answer (which the client then drops) costs little CPU (it cost seconds: every
    # piece copied all that came before it).
    with no_thread_leak(), rogue("stdio", timeout=1.0) as client:
        identity(client)
        with pytest.raises(ToolTimeoutError):
            client.call_tool("big", {"size": 15 * MiB, "pause": 0.2})
        cpu = time.process_time()

        def answers() -> bool:
            # The server answers in order: echo answers once the big answer was read whole.
            try:
                return text(client.call_tool("echo", {"text": "after"})) == "after"
            except ToolTimeoutError:
                return False

        wait_until(answers, timeout=60)
        spent = time.process_time() - cpu
        assert spent < 1.0, f"reading the dropped answer took {spent:.2f} s of CPU"


def test_a_compressed_http_answer_is_refused() -> None:
    with no_thread_leak(), rogue("http") as client:
        with pytest.raises(MCPProtocolError, match="compressed as 'gzip'"):
            client.call_tool("echo", {"text": "hi", "gzip": True})
        assert text(client.call_tool("echo", {"text": "plain"})) == "plain"


@pytest.mark.parametrize("value", [0, 1023, True, 1.5e6, "16MiB"])
def test_a_bad_max_message_bytes_is_refused_at_once(value: object) -> None:
    with pytest.raises(ValueError, match="max_message_bytes must be an int of at least 1024"):
        MCPClient.stdio("server", max_message_bytes=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_message_bytes"):
        MCPClient.http("http://127.0.0.1:9/mcp", max_message_bytes=value)  # type: ignore[arg-type]


# --- N16: connecting is cancellable and bounded ---


def cancel_while_connecting(client: MCPClient, connecting: Callable[[], object]) -> float:
    """Cancel a run whose tool connects ``client`` once ``connecting()`` returned; seconds taken."""

    @tool
    def use_server() -> str:
        """Call the server."""
        return str(client.call_tool("echo", {"text": "x"}))

    model = ScriptedChatModel([calls_message(call("use_server", {})), "never"])
    handle = CancelHandle()
    events: list[AgentEvent] = []
    agent = ChatModelAgent("a", "d", model, tools=[use_server])
    runner = threading.Thread(
        target=lambda: events.extend(Runner(agent).query("go", with_cancel(handle)))
    )
    runner.start()
    connecting()
    started = time.monotonic()
    handle.cancel()
    runner.join(60)
    took = time.monotonic() - started
    assert not runner.is_alive()
    assert isinstance(events[-1].err, AgentCancelledError)
    return took


def test_cancel_while_a_stdio_server_starts_ends_within_a_second(tmp_path: Path) -> None:
    ready = tmp_path / "pid"
    with no_thread_leak(), MCPClient.stdio(
        sys.executable, [str(ROGUE), "stubborn", str(ready)], connect_timeout=120
    ) as client:
        took = cancel_while_connecting(client, lambda: wait_until(ready.exists))
        assert took < 1.0, f"the cancel took {took:.2f} s"  # it took 2-4 s
        pid = int(ready.read_text())
        with pytest.raises(ProcessLookupError):  # killed, and reaped
            os.kill(pid, 0)


def test_cancel_while_an_http_server_does_not_answer_ends_within_a_second() -> None:
    with http_server("silent-http", ROGUE) as server, no_thread_leak(), MCPClient.http(
        server.url, connect_timeout=120
    ) as client:
        took = cancel_while_connecting(client, lambda: server.said("ACCEPTED"))
        assert took < 1.0, f"the cancel took {took:.2f} s"


def getting_a_connection(besides: threading.Thread) -> bool:
    """Whether a thread other than ``besides`` is in the client's connection getter."""
    frames = sys._current_frames()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1) if thread is not besides else None
        while frame is not None:
            if frame.f_code.co_name == "_live_connection":
                return True
            frame = frame.f_back
    return False


def connect_for(client: MCPClient) -> tuple[float, BaseException]:
    started = time.monotonic()
    try:
        client.tools()
    except BaseException as error:
        return time.monotonic() - started, error
    raise AssertionError("the connection was made")


def test_connect_timeout_is_honoured_for_a_server_that_ignores_sigterm(tmp_path: Path) -> None:
    with no_thread_leak(), MCPClient.stdio(
        sys.executable, [str(ROGUE), "stubborn", str(tmp_path / "pid")], connect_timeout=3
    ) as client:
        took, error = connect_for(client)
    assert isinstance(error, MCPConnectionError)
    assert "did not complete the connection within 3 s" in str(error)
    assert 3.0 <= took < 4.5, f"it took {took:.2f} s"  # it took 7 s
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "pid").read_text()), 0)


def test_connect_timeout_bounds_both_http_transports_together() -> None:
    with http_server("silent-http", ROGUE) as server, no_thread_leak(), MCPClient.http(
        server.url, connect_timeout=3
    ) as client:
        took, error = connect_for(client)
    assert isinstance(error, MCPConnectionError)
    assert "did not complete the connection within 3 s" in str(error)
    assert 3.0 <= took < 4.5, f"it took {took:.2f} s"  # it took 6 s: 3 s per transport


def test_a_run_waiting_for_another_threads_connection_is_cancelled_within_a_second(
    tmp_path: Path,
) -> None:
    ready = tmp_path / "pid"
    with no_thread_leak():
        client = MCPClient.stdio(
            sys.executable, [str(ROGUE), "stubborn", str(ready)], connect_timeout=120
        )
        first: list[BaseException] = []

        def connect() -> None:
            try:
                client.tools()
            except BaseException as error:
                first.append(error)

        connecting = threading.Thread(target=connect)
        connecting.start()
        wait_until(ready.exists)  # the first caller is connecting; the run's call waits for it
        # The run's call waits for the first caller's attempt.
        took = cancel_while_connecting(
            client, lambda: wait_until(lambda: getting_a_connection(besides=connecting))
        )
        assert took < 1.0, f"the cancel took {took:.2f} s"
        client.close()  # stops the first caller's attempt too
        connecting.join(60)
        assert len(first) == 1 and isinstance(first[0], MCPClientClosedError)


def test_a_server_that_prints_a_banner_before_the_handshake_fails_with_a_protocol_error() -> None:
    banner = "print('Starting server...', flush=True); import sys; sys.stdin.read()"
    with no_thread_leak(), MCPClient.stdio(
        sys.executable, ["-c", banner]
    ) as client, pytest.raises(MCPProtocolError) as info:
        client.tools()
    message = str(info.value)
    assert message.startswith("could not connect to the MCP server ")
    assert "it broke the protocol: it sent a line that is not JSON: b'Starting server...'" in message


# --- the counting underneath ---


def test_lines_are_split_across_chunks_with_either_line_end() -> None:
    lines = LineSplitter(limit=64)
    assert lines.feed(b'{"a":') == []
    assert lines.feed(b'1}\r\n{"b"') == [b'{"a":1}']
    assert lines.feed(b':2}\n\n') == [b'{"b":2}', b""]


def test_a_line_over_the_limit_is_refused_as_soon_as_it_is_seen() -> None:
    assert LineSplitter(limit=10).feed(b"x" * 10 + b"\r\n") == [b"x" * 10]
    with pytest.raises(LineTooLongError):
        LineSplitter(limit=10).feed(b"x" * 12)  # no line end yet
    lines = LineSplitter(limit=10)
    lines.feed(b"x" * 6)
    with pytest.raises(LineTooLongError):
        lines.feed(b"x" * 6)
    with pytest.raises(LineTooLongError):
        LineSplitter(limit=10).feed(b"x" * 11 + b"\n")


def test_an_event_stream_is_counted_per_event() -> None:
    size = EventSize()
    assert size.add(b"event: message\ndata: ab") == 23
    assert size.add(b"cd\n\ndata: x") == 7  # a new event began
    assert size.add(b"\r\n\r") == 0  # a blank line, split between chunks
    assert size.add(b"\ndata: yy") == 9
    assert size.add(b"\r\rdata") == 4
    body = BodySize()
    assert body.add(b"ab\n\n") == 4 and body.add(b"cd") == 6
