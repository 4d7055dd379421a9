"""LocalRuns at its boundaries (issue 25: N5, N10, N11, N12, N13), with real threads and sockets.

Runs belong to an owner; caller-chosen run ids and Last-Event-IDs are checked; a run's log is
capped and says so with a ``gap`` entry; stopped runs are forgotten after a retention period
or past a count, or at once with ``forget``; 1,000 runs leave memory flat; clients that never
read cost no buffer of their own and leave no thread behind once they hang up.
"""

from __future__ import annotations

import gc
import socket
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from flask import Flask
from werkzeug.serving import WSGIRequestHandler, make_server

from agentkit import ChatModelAgent, Message, Runner, assistant_message, interrupt, tool
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.integrations.flask import run_events_response
from agentkit.integrations.runs import (
    EventIdError,
    LocalRuns,
    RunEvent,
    RunIdError,
    RunNotFoundError,
    RunOwnerError,
    RunStateError,
)
from agentkit.models import ModelOptions, ScriptedChatModel
from agentkit.streams import StreamReader, stream_from_iterator, stream_from_list
from agentkit.testing import ManualClock, call, calls_message

GUARD = 60  # seconds: a failure guard only


class ChunkyModel:
    """Answers with ``chunks`` streamed chunks: a run with that many ``token`` entries.

    With ``after_first``, the stream sends its first chunk and waits for that event before the
    others (bounded by ``GUARD``), so a test can act between them whatever the machine's load.
    """

    def __init__(self, chunks: int, after_first: threading.Event | None = None) -> None:
        self.chunks = chunks
        self.after_first = after_first

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        return assistant_message("x" * self.chunks)

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        if self.after_first is None:
            return stream_from_list([assistant_message(f"{i} ") for i in range(self.chunks)])
        return stream_from_iterator(self._gated(self.after_first))

    def _gated(self, gate: threading.Event) -> Iterator[Message]:
        yield assistant_message("0 ")
        assert gate.wait(GUARD), "the test never let the stream go on"
        for i in range(1, self.chunks):
            yield assistant_message(f"{i} ")


def chatty(chunks: int, after_first: threading.Event | None = None) -> Runner:
    model = ChunkyModel(chunks, after_first)
    return Runner(ChatModelAgent("chatty", "talks", model), enable_streaming=True)


def approval_runner() -> Runner:
    @tool
    def pay(payee: str) -> str:
        """Pay after approval."""
        return "paid" if interrupt(f"Pay {payee}?") else "declined"

    model = ScriptedChatModel(lambda m: calls_message(call("pay", {"payee": "ACME"})) if len(m) == 1 else "done")
    return Runner(ChatModelAgent("payer", "d", model, tools=[pay]), checkpoint_store=InMemoryCheckPointStore())


def read(runs: LocalRuns, run_id: str, owner: str | None, after: str | None = None) -> list[RunEvent]:
    with runs.events(run_id, after, owner=owner) as stream:
        return list(stream)


# --- owners ---------------------------------------------------------------------------------


def test_another_owner_can_neither_read_nor_resume_nor_cancel_nor_forget() -> None:
    with LocalRuns({"payer": approval_runner()}) as runs:
        run_id = runs.submit("payer", "pay", owner="alice")
        assert read(runs, run_id, "alice")[-1].data["status"] == "interrupted"
        interrupt_id = runs.interrupts(run_id, owner="alice")[0]
        calls: list[Callable[[str | None], object]] = [
            lambda owner: runs.events(run_id, owner=owner),
            lambda owner: runs.status(run_id, owner=owner),
            lambda owner: runs.interrupts(run_id, owner=owner),
            lambda owner: runs.cancel(run_id, owner=owner),
            lambda owner: runs.resume(run_id, {interrupt_id: True}, owner=owner),
            lambda owner: runs.forget(run_id, owner=owner),
        ]
        for call_as in calls:
            for stranger in ("mallory", None):
                with pytest.raises(RunOwnerError, match="belongs to another owner"):
                    call_as(stranger)
        assert runs.has_run(run_id, owner="alice")
        assert not runs.has_run(run_id, owner="mallory") and not runs.has_run(run_id, owner=None)
        # Nothing happened to the run: its owner approves it.
        after = runs.resume(run_id, {interrupt_id: True}, owner="alice")
        assert read(runs, run_id, "alice", after)[-1].data["answer"] == "done"
        # A run without an owner is used without one, and only so.
        public = runs.submit("payer", "pay", owner=None)
        assert read(runs, public, None)[-1].kind == "end"
        with pytest.raises(RunOwnerError):
            runs.status(public, owner="alice")


def test_a_call_without_owner_cannot_use_an_owned_run_and_bad_owners_are_refused() -> None:
    with LocalRuns({"payer": approval_runner()}) as runs:
        unowned = runs.submit("payer", "pay")  # no owner: anyone who knows the id
        assert runs.status(unowned)["status"] in ("running", "interrupted")
        run_id = runs.submit("payer", "pay", owner="bob")
        with pytest.raises(RunOwnerError):
            runs.events(run_id)
        with pytest.raises(RunOwnerError):
            runs.cancel(run_id)
        for bad in ("", "x" * 257, "a\nb", "\ud800"):
            with pytest.raises(ValueError, match="owner"):
                runs.submit("payer", "pay", owner=bad)
        with pytest.raises(TypeError, match="owner must be a str"):
            runs.submit("payer", "pay", owner=42)  # type: ignore[arg-type]


# --- ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad", ["X:cancel", "", "a" * 129, "white space", "\ud800", "\u00e9t\u00e9", "-x", "a/b", "..", "x\n"]
)
def test_run_ids_outside_the_id_alphabet_are_refused(bad: str) -> None:
    with LocalRuns({"chatty": chatty(3)}) as runs:
        with pytest.raises(RunIdError, match="is not valid"):
            runs.submit("chatty", "hi", owner=None, checkpoint_id=bad)
        with pytest.raises(RunIdError):
            runs.events(bad, owner=None)
        assert runs.held() == 0
        for good in ("order-1234", "A.b_c-9", "a" * 128):
            assert runs.submit("chatty", "hi", owner=None, checkpoint_id=good) == good


@pytest.mark.parametrize(
    "bad",
    ["\u0661\u0662", "\u00b2", "\uff11", str(2**64), "9" * 5000, "1-0", "-1", "0x1", " 1", "1.0"],
    ids=lambda value: ascii(value)[:24],
)
def test_last_event_ids_that_are_not_entry_numbers_are_refused(bad: str) -> None:
    with LocalRuns({"chatty": chatty(3)}) as runs:
        run_id = runs.submit("chatty", "hi", owner=None)
        with pytest.raises(EventIdError, match="is not an event id"):
            runs.events(run_id, bad, owner=None)
        assert isinstance(EventIdError("x"), ValueError)
        assert [e.kind for e in read(runs, run_id, None, str(2**64 - 1))] == []


# --- capped logs ----------------------------------------------------------------------------


def test_a_capped_log_says_how_many_entries_a_reader_lost() -> None:
    # The model holds its other 4,999 chunks back until the first reader has gone: the log is
    # trimmed after that reader's one entry, never before it connects.
    first_read = threading.Event()
    with LocalRuns({"chatty": chatty(5000, after_first=first_read)}, max_entries=100) as runs:
        run_id = runs.submit("chatty", "talk", owner=None)
        with runs.events(run_id, owner=None) as stream:
            first = next(iter(stream))  # a reader that reads one entry and goes away
        first_read.set()
        assert first.id == "1"
        read(runs, run_id, None)  # follow it to its end
        everything = read(runs, run_id, None)  # then read it again from the start
        total = int(everything[-1].id)
        assert total > 5000
        assert everything[0].kind == "gap" and everything[0].data["reason"] == "trimmed"
        kept = everything[1:]
        assert 100 <= len(kept) <= 100 + 100 // 8  # the cap, and the slack it drops in chunks
        assert everything[0].data["lost"] == total - len(kept)
        assert everything[0].id == str(total - len(kept))  # the last entry lost
        assert [int(e.id) for e in kept] == list(range(total - len(kept) + 1, total + 1))
        # The reader that went away reconnects after its one entry.
        rest = read(runs, run_id, None, first.id)
        assert rest[0].data["lost"] == total - len(kept) - 1
        assert rest[1:] == kept
        # A reader that is caught up gets no gap.
        assert read(runs, run_id, None, kept[-2].id) == kept[-1:]


# --- retention ------------------------------------------------------------------------------


def test_stopped_runs_are_forgotten_past_the_count_and_live_ones_never() -> None:
    release = threading.Event()

    @tool
    def wait_here() -> str:
        """Blocks until the test releases it."""
        release.wait(GUARD)
        return "released"

    model = ScriptedChatModel(lambda m: calls_message(call("wait_here")) if len(m) == 1 else "ok")
    slow = Runner(ChatModelAgent("slow", "d", model, tools=[wait_here]))
    with LocalRuns({"slow": slow, "chatty": chatty(3)}, max_stopped=3) as runs:
        live = runs.submit("slow", "go", owner=None)
        done = []
        for _ in range(5):
            done.append(runs.submit("chatty", "hi", owner=None))
            assert read(runs, done[-1], None)[-1].kind == "end"
        finished = [r for r in done if runs.has_run(r, owner=None)]
        assert len(finished) <= 3 and done[-1] in finished
        assert runs.has_run(live, owner=None)  # running: never forgotten
        with pytest.raises(RunNotFoundError, match="forgotten"):
            runs.status(done[0], owner=None)
        with pytest.raises(RunStateError, match="running; cancel it"):
            runs.forget(live, owner=None)
        release.set()
        assert read(runs, live, None)[-1].data["status"] == "completed"
        runs.forget(live, owner=None)
        assert not runs.has_run(live, owner=None)


def test_a_stopped_run_is_forgotten_after_the_retention_period() -> None:
    release = threading.Event()

    @tool
    def wait_here() -> str:
        """Blocks until the test releases it."""
        release.wait(GUARD)
        return "released"

    model = ScriptedChatModel(lambda m: calls_message(call("wait_here")) if len(m) == 1 else "ok")
    slow = Runner(ChatModelAgent("slow", "d", model, tools=[wait_here]))
    with LocalRuns({"slow": slow}, retention=0.0) as runs:
        run_id = runs.submit("slow", "go", owner=None)
        stream = runs.events(run_id, owner=None)
        release.set()
        assert [e.kind for e in stream][-1] == "end"  # a reader holding it reads it whole
        assert not runs.has_run(run_id, owner=None)  # forgotten as it stopped
    with pytest.raises(ValueError, match="retention"):
        LocalRuns({}, retention=-1)


def test_a_stopped_run_is_kept_for_the_retention_period_on_the_clock() -> None:
    clock = ManualClock()
    runner = Runner(ChatModelAgent("quick", "d", ScriptedChatModel(lambda messages: "done")))

    def stopped(runs: LocalRuns) -> str:
        run_id = runs.submit("quick", "go", owner=None)
        assert [e.kind for e in runs.events(run_id, owner=None)][-1] == "end"
        assert runs.status(run_id, owner=None)["status"] == "completed"  # its stop is noted
        return run_id

    with LocalRuns({"quick": runner}, retention=3600.0, clock=clock) as runs:
        first = stopped(runs)
        clock.advance(1800.0)
        second = stopped(runs)
        clock.advance(1799.0)  # the first stopped an hour less a second ago
        for run_id in (first, second):
            runs.status(run_id, owner=None)  # kept
        clock.advance(2.0)  # an hour and a second: the first is forgotten, not the second
        with pytest.raises(RunNotFoundError, match="retention"):
            runs.status(first, owner=None)
        runs.status(second, owner=None)
        clock.advance(1800.0)
        with pytest.raises(RunNotFoundError):
            runs.status(second, owner=None)


def test_memory_stays_flat_over_a_thousand_runs() -> None:
    with LocalRuns({"chatty": chatty(50)}, max_stopped=100) as runs:

        def one() -> None:
            run_id = runs.submit("chatty", "hi", owner="u")
            with runs.events(run_id, owner="u") as stream:
                assert [e.kind for e in stream][-1] == "end"

        tracemalloc.start()
        try:
            for _ in range(200):  # past the count: from here on, one run in, one out
                one()
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(800):
                one()
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert runs.held() <= 100
    # 800 more runs of 50 tokens would hold about 14 MB if kept; forgotten, growth is noise.
    assert grown < 500_000, f"{grown} bytes more after 800 more runs"


# --- clients that never read ----------------------------------------------------------------


class WriteTimeoutHandler(WSGIRequestHandler):
    """A request handler whose socket operations time out after a second (a write timeout)."""

    timeout = 1.0


@contextmanager
def serving(app: Any, handler: type[WSGIRequestHandler] = WSGIRequestHandler) -> Iterator[tuple[str, int]]:
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ("127.0.0.1", server.server_port)
    finally:
        server.shutdown()
        thread.join(GUARD)


def stalled_client(address: tuple[str, int], path: str) -> socket.socket:
    """A client that asks for an event stream and never reads a byte of it."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(address)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def test_twenty_clients_that_never_read_hold_no_buffer_and_no_thread_after_they_leave() -> None:
    with LocalRuns({"chatty": chatty(100_000)}, max_entries=10_000) as runs:
        app = Flask(__name__)
        arrived = threading.Semaphore(0)

        @app.get("/events/<run_id>")
        def events(run_id: str) -> Any:
            arrived.release()
            return run_events_response(runs, run_id, owner=None)

        run_id = runs.submit("chatty", "talk", owner=None)
        assert read(runs, run_id, None)[-1].kind == "end"
        gc.collect()
        threads_before = threading.active_count()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            with serving(app) as address:
                clients = [stalled_client(address, f"/events/{run_id}") for _ in range(20)]
                for _ in clients:
                    assert arrived.acquire(timeout=GUARD)
                held = tracemalloc.get_traced_memory()[0] - before
                for sock in clients:
                    sock.close()  # they hang up; the server's writes fail, its threads end
                deadline = time.monotonic() + GUARD
                while threading.active_count() > threads_before + 1 and time.monotonic() < deadline:
                    time.sleep(0.05)
                leftover = threading.active_count() - threads_before - 1  # + the server's
        finally:
            tracemalloc.stop()
        log_entries = runs.status(run_id, owner=None)
    assert log_entries["status"] == "completed"
    assert leftover <= 0, f"{leftover} request threads still run after their clients left"
    # Each stalled client holds at most one batch of entries (200) and its frames: the run's
    # log (about 10,000 entries) is shared, never copied per client.
    assert held < 20 * 400_000, f"{held} bytes for 20 stalled clients"


def test_a_server_write_timeout_drops_clients_that_stopped_reading() -> None:
    with LocalRuns({"chatty": chatty(100_000)}) as runs:
        app = Flask(__name__)
        arrived = threading.Semaphore(0)

        @app.get("/events/<run_id>")
        def events(run_id: str) -> Any:
            arrived.release()
            return run_events_response(runs, run_id, owner=None)

        run_id = runs.submit("chatty", "talk", owner=None)
        assert read(runs, run_id, None)[-1].kind == "end"
        threads_before = threading.active_count()
        with serving(app, WriteTimeoutHandler) as address:
            clients = [stalled_client(address, f"/events/{run_id}") for _ in range(5)]
            for _ in clients:
                assert arrived.acquire(timeout=GUARD)
            deadline = time.monotonic() + GUARD
            while threading.active_count() > threads_before + 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            leftover = threading.active_count() - threads_before - 1
            for sock in clients:
                sock.close()
    assert leftover <= 0  # the clients are still connected; the server dropped them


def test_by_default_a_hundred_stopped_runs_are_kept() -> None:
    """Issue 49 A19: the default bound was 10,000 entries x 1,000 stopped runs (~3 GB of
    streamed tokens); it is 100 stopped runs now, as documented."""
    quick = Runner(ChatModelAgent("quick", "d", ScriptedChatModel(lambda m: "ok")))
    with LocalRuns({"quick": quick}) as runs:
        done = []
        for _ in range(101):
            done.append(runs.submit("quick", "hi", owner=None))
            assert read(runs, done[-1], None)[-1].kind == "end"
        assert not runs.has_run(done[0], owner=None)  # the oldest went first
        assert all(runs.has_run(run_id, owner=None) for run_id in done[1:])
        assert runs.held() == 100
