"""agentkit.integrations.runs: LocalRuns and RunEventStream (in-process runs, real threads)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    CancelHandle,
    CancelMode,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    interrupt,
    tool,
    with_cancel,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.integrations.runs import LocalRuns, RunNotFoundError, RunStateError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

GUARD = 30  # seconds: a failure guard only
GATE = 100  # seconds a gated tool waits at most: longer than GUARD, so a guard expires first


def gated_runner(release: threading.Event, entered: threading.Event) -> Runner:
    @tool
    def wait_here() -> str:
        """Blocks until the test releases it."""
        entered.set()
        release.wait(GATE)
        return "released"

    model = ScriptedChatModel([calls_message(call("wait_here"), content="waiting"), "done"])
    agent = ChatModelAgent("gated", "d", model, tools=[wait_here])
    return Runner(agent, enable_streaming=True, checkpoint_store=InMemoryCheckPointStore())


def test_a_reader_inside_a_cancelled_run_stops_reading() -> None:
    release, entered, reading = threading.Event(), threading.Event(), threading.Event()
    with LocalRuns({"inner": gated_runner(release, entered)}) as runs:
        inner = runs.submit("inner", "go", owner=None)

        @tool
        def follow() -> str:
            """Follows the inner run until it ends."""
            with runs.events(inner, owner=None) as stream:
                for entry in stream:
                    if entry.kind == "agent":
                        reading.set()
            return "it ended"

        model = ScriptedChatModel([calls_message(call("follow")), "unused"])
        handle = CancelHandle()
        outer = Runner(ChatModelAgent("outer", "d", model, tools=[follow]))
        seen: list[Any] = []
        consumer = threading.Thread(target=lambda: seen.extend(outer.query("x", with_cancel(handle))))
        consumer.start()
        assert reading.wait(GUARD) and entered.wait(GUARD)
        handle.cancel(CancelMode.IMMEDIATE)
        consumer.join(GUARD)
        stopped_before_release = not consumer.is_alive()
        release.set()
        consumer.join(GUARD)
    assert stopped_before_release  # the inner run was still blocked: the reader stopped on the cancel
    assert isinstance(seen[-1].err, AgentCancelledError)


def test_close_from_another_thread_ends_a_waiting_reader() -> None:
    release, entered = threading.Event(), threading.Event()
    with LocalRuns({"inner": gated_runner(release, entered)}) as runs:
        run_id = runs.submit("inner", "go", owner=None)
        assert entered.wait(GUARD)
        stream = runs.events(run_id, owner=None)
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.extend(entry.kind for entry in stream))
        reader.start()
        stream.close()
        reader.join(GUARD)
        assert not reader.is_alive() and not stream.ended
        release.set()
        assert [entry.kind for entry in runs.events(run_id, owner=None)][-1] == "end"
        assert runs.status(run_id, owner=None)["status"] == "completed"
        assert runs.status(run_id, owner=None)["summary"]["answer"] == "done"


def test_errors_say_what_to_do() -> None:
    release, entered = threading.Event(), threading.Event()
    release.set()
    with LocalRuns({"inner": gated_runner(release, entered)}) as runs:
        with pytest.raises(RunNotFoundError, match="no agent named 'x'; the agents are: inner"):
            runs.submit("x", "go", owner=None)
        with pytest.raises(RunNotFoundError, match="no run with id 'nope'"):
            runs.events("nope", owner=None)
        run_id = runs.submit("inner", "go", owner=None, checkpoint_id="fixed")
        with pytest.raises(RunStateError, match="is taken"):
            runs.submit("inner", "go", owner=None, checkpoint_id="fixed")
        with pytest.raises(ValueError, match="whole numbers"):
            runs.events(run_id, "1-0", owner=None)
        assert list(runs.events(run_id, owner=None))[-1].data["status"] == "completed"
        with pytest.raises(RunStateError, match="is completed"):
            runs.resume(run_id, {}, owner=None)
    with pytest.raises(RunStateError, match="closed"):
        runs.submit("inner", "go", owner=None)


def test_a_submitted_run_goes_on_in_its_one_thread_and_a_resume_is_read_there() -> None:
    # A fresh run goes on in the thread LocalRuns starts for it (no worker thread behind it
    # handing each event over); a resume is read there from the thread Runner.resume starts.
    seen: list[tuple[str, list[str]]] = []

    @tool
    def where(step: str) -> str:
        """Say which threads there are."""
        names = [thread.name for thread in threading.enumerate()]
        seen.append((threading.current_thread().name, names))
        if step == "first":
            interrupt("go on?")
        return step

    model = ScriptedChatModel([calls_message(call("where", {"step": "first"})), "done"])
    agent = ChatModelAgent("where", "d", model, tools=[where])
    runs = LocalRuns({"where": Runner(agent, checkpoint_store=InMemoryCheckPointStore())})
    try:
        run_id = runs.submit("where", "go", owner="me")
        with runs.events(run_id, owner="me") as stream:
            assert [entry.kind for entry in stream][-1] == "end"
        assert runs.status(run_id, owner="me")["status"] == "interrupted"
        [(name, names)] = seen
        assert name == f"agentkit-run-{run_id[:8]}"
        assert "agentkit-run" not in names  # the Runner's worker thread
        [target] = runs.interrupts(run_id, owner="me")
        after = runs.resume(run_id, {target: "yes"}, owner="me")
        with runs.events(run_id, owner="me", last_event_id=after) as stream:
            entries = list(stream)
        assert entries[-1].data["status"] == "completed"
        assert seen[-1][0] == "agentkit-run"  # the resume's own thread
    finally:
        runs.close()


def test_a_new_run_under_a_forgotten_interrupted_runs_id_is_refused() -> None:
    """Issue 49 A17: once an interrupted run was forgotten (retention, or ``forget``), a
    submission with its id replaced its checkpoint: the owner's approval could never be given,
    and the new run's prompt took its place."""
    paid: list[str] = []

    @tool
    def pay(payee: str) -> str:
        """Pays after a human approves."""
        if interrupt(f"pay {payee}?") is not True:
            return "refused"
        paid.append(payee)
        return f"paid {payee}"

    def scripted(messages: list[Message]) -> Message | str:
        if messages[-1].role is Role.USER:
            return calls_message(call("pay", {"payee": messages[-1].content}))
        return "done"

    store = InMemoryCheckPointStore()
    agent = ChatModelAgent("payer", "d", ScriptedChatModel(scripted), tools=[pay])
    runner = Runner(agent, checkpoint_store=store)
    with LocalRuns({"payer": runner}) as runs:
        run_id = runs.submit("payer", "ACME", owner="alice", checkpoint_id="invoice-7")
        with runs.events(run_id, owner="alice") as stream:
            assert [entry.kind for entry in stream][-1] == "end"
        [interrupt_id] = runs.interrupts(run_id, owner="alice")
        runs.forget(run_id, owner="alice")  # as retention does
        saved = store.get("invoice-7")
        with pytest.raises(RunStateError, match="'invoice-7' has a checkpoint in the store"):
            runs.submit("payer", "MALLORY", owner="mallory", checkpoint_id="invoice-7")
        assert store.get("invoice-7") == saved
    # The owner's interrupted run is still there to resume, and pays whom it asked for.
    list(runner.resume("invoice-7", targets={interrupt_id: True}))
    assert paid == ["ACME"]
    # Completed, its id still holds a tombstone: reusing the id is refused as well.
    with LocalRuns({"payer": runner}) as runs, pytest.raises(RunStateError, match="in the store"):
        runs.submit("payer", "MALLORY", owner="mallory", checkpoint_id="invoice-7")
    # Deleting the checkpoint frees the id.
    store.delete("invoice-7")
    with LocalRuns({"payer": runner}) as runs:
        assert runs.submit("payer", "BOB", owner="bob", checkpoint_id="invoice-7") == "invoice-7"
