"""Exactly-once human-in-the-loop: consumed checkpoints, failed saves, retry from failure,
leases, cancels that can be resumed, and Eino's held return-directly event (E08)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentInput,
    CancelHandle,
    CancelMode,
    ChatModelAgent,
    CheckpointBusyError,
    CheckpointConsumedError,
    CheckpointError,
    ExitTool,
    ModelError,
    ParallelAgent,
    Role,
    Runner,
    assistant_message,
    check_cancelled,
    event_from_message,
    interrupt,
    run_in_worker,
    tool,
    with_cancel,
    with_checkpoint_id,
    with_session_values,
)
from agentkit.checkpoint import FileCheckPointStore, InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import (
    ManualClock,
    call,
    calls_message,
    no_thread_leak,
    run_events,
    summarize,
)

ROOT = Path(__file__).resolve().parent.parent


def payment_agent(payments: list[int], script: list[Any]) -> ChatModelAgent:
    @tool
    def pay(amount: int) -> str:
        """Pay an amount once a human approved it."""
        if not interrupt(f"approve paying {amount}?"):
            return "declined"
        payments.append(amount)
        return f"paid {amount}"

    return ChatModelAgent("Payer", "pays bills", ScriptedChatModel(script), tools=[pay])


def root_id(event: AgentEvent) -> str:
    assert event.action is not None and event.action.interrupted is not None
    (context,) = event.action.interrupted.contexts
    return context.id


# --- consumed checkpoints -----------------------------------------------------------------------


def test_resuming_a_completed_checkpoint_again_raises_and_pays_once() -> None:
    payments: list[int] = []
    script = [calls_message(call("pay", {"amount": 7}, id="p1")), "done"]
    store = InMemoryCheckPointStore()
    runner = Runner(payment_agent(payments, script), checkpoint_store=store)
    first = run_events(runner.query("pay 7", with_checkpoint_id("bill")))
    target = root_id(first[-1])
    rest = run_events(runner.resume("bill", targets={target: True}))
    assert summarize(rest[-1])[2:4] == ("assistant", "done")
    for _ in range(2):
        with pytest.raises(CheckpointConsumedError, match="completed at .*start a new run"):
            runner.resume("bill", targets={target: True})
    assert payments == [7]


def test_consumed_error_is_a_checkpoint_error() -> None:
    assert issubclass(CheckpointConsumedError, CheckpointError)


def test_a_resumed_run_that_interrupts_again_overwrites_the_checkpoint() -> None:
    payments: list[int] = []
    script = [calls_message(call("pay", {"amount": 3}, id="p1")), "done"]
    runner = Runner(payment_agent(payments, script), checkpoint_store=InMemoryCheckPointStore())
    first = run_events(runner.query("pay", with_checkpoint_id("c")))
    old = root_id(first[-1])
    again = run_events(runner.resume("c"))  # no data: the tool interrupts again, with a new id
    new = root_id(again[-1])
    assert new != old
    with pytest.raises(ValueError, match="ids change each time a run interrupts"):
        runner.resume("c", targets={old: True})
    run_events(runner.resume("c", targets={new: True}))
    assert payments == [3]


# --- saving fails -------------------------------------------------------------------------------


def test_a_checkpoint_that_cannot_be_saved_is_the_last_event_and_names_the_value() -> None:
    payments: list[int] = []
    script = [calls_message(call("pay", {"amount": 1}, id="p1")), "done"]
    store = InMemoryCheckPointStore()
    runner = Runner(payment_agent(payments, script), checkpoint_store=store)
    events = run_events(
        runner.query("pay", with_checkpoint_id("x"), with_session_values({"lock": threading.Lock()}))
    )
    last = events[-1]
    assert isinstance(last.err, CheckpointError)
    assert (last.agent_name, [str(s) for s in last.run_path]) == ("Payer", ["Payer"])
    assert "session value 'lock'" in str(last.err)
    assert "cannot be pickled at all" in str(last.err)
    assert "allowed_types" not in str(last.err)  # allowing the type would not help
    assert not any(e.action is not None and e.action.interrupted for e in events)
    assert store.get("x") is None


class Opaque:
    """A user type the serializer was not told about."""


def test_a_value_of_a_type_not_allowed_says_how_to_allow_it() -> None:
    script = [calls_message(call("pay", {"amount": 1}, id="p1")), "done"]
    runner = Runner(payment_agent([], script), checkpoint_store=InMemoryCheckPointStore())
    events = run_events(
        runner.query("pay", with_checkpoint_id("x"), with_session_values({"thing": Opaque()}))
    )
    assert isinstance(events[-1].err, CheckpointError)
    assert "session value 'thing'" in str(events[-1].err)
    assert "allowed_types" in str(events[-1].err)


class BrokenStore(InMemoryCheckPointStore):
    def set(self, checkpoint_id: str, data: bytes) -> None:
        raise ConnectionError("Redis is down")


def test_a_store_that_is_down_ends_the_run_with_a_checkpoint_error() -> None:
    script = [calls_message(call("pay", {"amount": 1}, id="p1")), "done"]
    runner = Runner(payment_agent([], script), checkpoint_store=BrokenStore())
    events = run_events(runner.query("pay", with_checkpoint_id("x")))
    assert isinstance(events[-1].err, CheckpointError)
    assert "Redis is down" in str(events[-1].err)
    assert [e for e in events if e.err is not None] == [events[-1]]


# --- retry from failure -------------------------------------------------------------------------


def test_a_run_that_fails_after_an_approved_payment_resumes_without_paying_again() -> None:
    payments: list[int] = []
    script = [
        calls_message(call("pay", {"amount": 9}, id="p1")),
        ModelError("the model server is down"),
        "all paid",
    ]
    store = InMemoryCheckPointStore()
    runner = Runner(payment_agent(payments, script), checkpoint_store=store)
    first = run_events(runner.query("pay 9", with_checkpoint_id("f")))
    failed = run_events(runner.resume("f", targets={root_id(first[-1]): True}))
    assert payments == [9]
    assert isinstance(failed[-1].err, ModelError)
    assert (failed[-1].agent_name, summarize(failed[-1])[1]) == ("Payer", ["Payer"])
    if sys.version_info >= (3, 11):
        assert any("runner.resume('f')" in note for note in failed[-1].err.__notes__)
    retried = run_events(runner.resume("f"))
    assert summarize(retried[-1])[2:4] == ("assistant", "all paid")
    assert payments == [9]
    with pytest.raises(CheckpointConsumedError):
        runner.resume("f")


def test_a_tool_exception_is_retried_from_the_failed_call_only() -> None:
    runs: list[str] = []
    fail_once = threading.Event()

    @tool
    def flaky() -> str:
        """Fails the first time."""
        runs.append("flaky")
        if not fail_once.is_set():
            fail_once.set()
            raise RuntimeError("flaky failed")
        return "ok"

    @tool
    def steady() -> str:
        """Always works."""
        runs.append("steady")
        return "fine"

    model = ScriptedChatModel(
        [calls_message(call("steady", id="s1"), call("flaky", id="f1")), "finished"]
    )
    runner = Runner(
        ChatModelAgent("A", "d", model, tools=[flaky, steady]),
        checkpoint_store=InMemoryCheckPointStore(),
    )
    events = run_events(runner.query("go", with_checkpoint_id("t")))
    assert events[-1].err is not None
    rest = run_events(runner.resume("t"))
    assert summarize(rest[-1])[2:4] == ("assistant", "finished")
    assert sorted(runs) == ["flaky", "flaky", "steady"]
    # the model saw both results, in call order
    last_call = model.calls[-1].messages
    assert [m.content for m in last_call if m.role is Role.TOOL] == ["fine", "ok"]


def test_a_run_without_a_checkpoint_id_saves_nothing_when_it_fails() -> None:
    store = InMemoryCheckPointStore()
    runner = Runner(
        ChatModelAgent("A", "d", ScriptedChatModel([ModelError("down")])), checkpoint_store=store
    )
    events = run_events(runner.query("go"))
    assert isinstance(events[-1].err, ModelError)
    assert store.get("") is None


# --- leases -------------------------------------------------------------------------------------


def test_a_checkpoint_that_fails_to_load_releases_its_lease(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path / "store")
    script = [calls_message(call("pay", {"amount": 1}, id="p1")), "done"]
    runner = Runner(payment_agent([], script), checkpoint_store=store)
    first = run_events(runner.query("pay", with_checkpoint_id("L")))
    good = store.get("L")
    assert good is not None
    store.set("L", good[:-20] + b"edited by hand......")
    with pytest.raises(CheckpointError):
        runner.resume("L")
    store.set("L", good)  # restored: resumable at once, not busy
    rest = run_events(runner.resume("L", targets={root_id(first[-1]): True}))
    assert summarize(rest[-1])[2:4] == ("assistant", "done")


def test_a_resumed_run_longer_than_the_lease_keeps_it() -> None:
    started = threading.Event()
    release = threading.Event()

    @tool
    def slow() -> str:
        """Takes a while after approval."""
        if not interrupt("go?"):
            return "no"
        started.set()
        assert release.wait(30)
        return "done slowly"

    model = ScriptedChatModel([calls_message(call("slow", id="s1")), "finished"])
    store = InMemoryCheckPointStore()
    runner = Runner(ChatModelAgent("A", "d", model, tools=[slow]), checkpoint_store=store, lease_ttl=1.0)
    first = run_events(runner.query("go", with_checkpoint_id("long")))
    with no_thread_leak():
        events = runner.resume("long", targets={root_id(first[-1]): True})
        assert started.wait(10)
        threading.Event().wait(3.0)  # three lease times pass while the run works
        with pytest.raises(CheckpointBusyError):
            runner.resume("long")
        release.set()
        assert summarize(list(events)[-1])[3] == "finished"


def test_the_lease_of_a_killed_process_expires(tmp_path: Path) -> None:
    location = tmp_path / "store"
    script = textwrap.dedent(
        f"""
        import sys, threading
        sys.path.insert(0, {str(ROOT)!r})
        from agentkit import ChatModelAgent, Runner, interrupt, tool, with_checkpoint_id
        from agentkit.checkpoint import FileCheckPointStore
        from agentkit.models import ScriptedChatModel
        from agentkit.testing import call, calls_message, summarize

        @tool
        def pay(amount: int) -> str:
            '''Pay after approval.'''
            if not interrupt("approve?"):
                return "declined"
            if sys.argv[1] == "hang":
                print("resumed", flush=True)
                threading.Event().wait()  # killed here
            return "paid"

        # a new process: the scripted model answers the call it gets there
        first = [calls_message(call("pay", {{"amount": 2}}, id="p"))]
        model = ScriptedChatModel(first if sys.argv[1] == "run" else ["finished"])
        agent = ChatModelAgent("Payer", "pays", model, tools=[pay])
        runner = Runner(agent, checkpoint_store=FileCheckPointStore({str(location)!r}), lease_ttl=3)
        if sys.argv[1] == "run":
            events = list(runner.query("pay", with_checkpoint_id("k")))
            print(events[-1].action.interrupted.contexts[0].id)
        else:
            events = runner.resume("k", targets={{sys.argv[2]: True}})
            print("|".join(str(summarize(e)[2:4]) for e in events), flush=True)
        """
    )
    first = subprocess.run(
        [sys.executable, "-c", script, "run"], capture_output=True, text=True, timeout=60
    )
    assert first.returncode == 0, first.stderr
    point = first.stdout.strip()
    hanging = subprocess.Popen(
        [sys.executable, "-c", script, "hang", point], stdout=subprocess.PIPE, text=True
    )
    try:
        assert hanging.stdout is not None
        assert hanging.stdout.readline().strip() == "resumed"
        busy = subprocess.run(
            [sys.executable, "-c", script, "resume", point], capture_output=True, text=True,
            timeout=60,
        )
        assert "CheckpointBusyError" in busy.stderr
    finally:
        os.kill(hanging.pid, signal.SIGKILL)
        hanging.wait(30)
    # The dead process's claim expires after its lease time (3 s): this process's store reads a
    # clock moved past it, so the resume goes through without waiting for it.
    @tool
    def pay(amount: int) -> str:
        """Pay after approval."""
        return "paid"

    clock = ManualClock()
    store = FileCheckPointStore(location, clock=clock)
    agent = ChatModelAgent("Payer", "pays", ScriptedChatModel(["finished"]), tools=[pay])
    runner = Runner(agent, checkpoint_store=store, lease_ttl=3)
    clock.advance(4)
    events = run_events(runner.resume("k", targets={point: True}))
    assert [summarize(event)[2:4] for event in events] == [
        ("tool/pay", "paid"),
        ("assistant", "finished"),
    ]


# --- cancel -------------------------------------------------------------------------------------


def test_parallel_cancel_is_one_event_and_resume_finishes_only_the_unfinished_branch() -> None:
    handle = CancelHandle()
    fast_done = threading.Event()
    slow_runs: list[str] = []

    @tool
    def slow() -> str:
        """Waits until the fast branch is done, then the user cancels."""
        slow_runs.append("slow")
        if len(slow_runs) == 1:
            assert fast_done.wait(10)
            handle.cancel()
            check_cancelled()
        return "slow result"

    fast_model = ScriptedChatModel(["fast answer"])
    slow_model = ScriptedChatModel([calls_message(call("slow", id="s1")), "slow answer"])
    fast = ChatModelAgent("Fast", "d", fast_model)
    slow_agent = ChatModelAgent("Slow", "d", slow_model, tools=[slow])
    par = ParallelAgent("P", "d", [fast, slow_agent])
    store = InMemoryCheckPointStore()
    runner = Runner(par, checkpoint_store=store)
    events = runner.query("go", with_cancel(handle), with_checkpoint_id("p"))
    seen: list[AgentEvent] = []
    with no_thread_leak():
        for event in events:
            seen.append(event)
            if summarize(event)[:4] == ("Fast", ["P", "Fast"], "assistant", "fast answer"):
                fast_done.set()
    errors = [e for e in seen if e.err is not None]
    assert len(errors) == 1 and isinstance(errors[0].err, AgentCancelledError)
    assert errors[0] is seen[-1]
    assert (seen[-1].agent_name, summarize(seen[-1])[1]) == ("P", ["P"])
    assert handle.wait(10) is True
    rest = run_events(runner.resume("p"))
    assert [summarize(e)[:4] for e in rest] == [
        ("Slow", ["P", "Slow"], "tool/slow", "slow result"),
        ("Slow", ["P", "Slow"], "assistant", "slow answer"),
    ]
    assert len(fast_model.calls) == 1


def test_parallel_cancelled_before_its_branches_start_saves_a_checkpoint() -> None:
    handle = CancelHandle()
    handle.cancel(CancelMode.AFTER_TOOL_CALLS)  # before the run: honoured at the spawn
    a_model = ScriptedChatModel(["a"])
    par = ParallelAgent(
        "P", "d", [ChatModelAgent("A", "d", a_model), ChatModelAgent("B", "d", ScriptedChatModel(["b"]))]
    )
    runner = Runner(par, checkpoint_store=InMemoryCheckPointStore())
    events = run_events(runner.query("go", with_cancel(handle), with_checkpoint_id("s")))
    assert [summarize(e)[:3] for e in events] == [("P", ["P"], "error")]
    assert isinstance(events[-1].err, AgentCancelledError)
    assert a_model.calls == []
    rest = run_events(runner.resume("s"))
    assert sorted(summarize(e)[3] for e in rest) == ["a", "b"]


class Chatty:
    """A custom agent written the documented way: it stops when send returns False."""

    name = "Chatty"
    description = "talks until told to stop"

    def __init__(self) -> None:
        self.sent = 0
        self.talking = threading.Event()
        self.stopped = threading.Event()

    def run(self, input: AgentInput, *options: Any) -> Any:
        def work(gen: Any) -> None:
            while gen.send(event_from_message(assistant_message("blah"), None, Role.ASSISTANT)):
                self.sent += 1
                self.talking.set()
                threading.Event().wait(0.001)
            self.stopped.set()

        return run_in_worker(work)


def test_a_custom_agent_sees_the_cancel() -> None:
    agent = Chatty()
    handle = CancelHandle()
    with no_thread_leak():
        events = Runner(agent).query("hi", with_cancel(handle))
        assert agent.talking.wait(10)
        handle.cancel()
        seen = list(events)
    assert agent.stopped.is_set()
    assert isinstance(seen[-1].err, AgentCancelledError)
    assert (seen[-1].agent_name, summarize(seen[-1])[1]) == ("Chatty", ["Chatty"])
    assert handle.wait(10) is True


def test_check_cancelled_stops_a_long_tool() -> None:
    handle = CancelHandle()
    working = threading.Event()
    steps: list[int] = []

    @tool
    def crunch() -> str:
        """Works in many small steps."""
        for step in range(100_000):
            check_cancelled()
            steps.append(step)
            working.set()
            threading.Event().wait(0.001)
        return "crunched"

    model = ScriptedChatModel([calls_message(call("crunch", id="c1")), "never"])
    with no_thread_leak():
        events = Runner(ChatModelAgent("A", "d", model, tools=[crunch])).query(
            "go", with_cancel(handle)
        )
        assert working.wait(10)
        handle.cancel()
        seen = list(events)
    assert isinstance(seen[-1].err, AgentCancelledError)
    assert len(steps) < 100_000
    assert handle.wait(10) is True


def test_check_cancelled_outside_a_run_does_nothing() -> None:
    check_cancelled()


def test_an_immediate_cancel_during_a_blocking_model_call_discards_its_answer() -> None:
    handle = CancelHandle()

    def answer(messages: Any) -> str:
        handle.cancel()  # the cancel arrives while the model is answering
        return "too late"

    store = InMemoryCheckPointStore()
    calls: list[int] = []

    def counted(messages: Any) -> str:
        calls.append(1)
        return answer(messages) if len(calls) == 1 else "answer after resume"

    runner = Runner(ChatModelAgent("A", "d", ScriptedChatModel(counted)), checkpoint_store=store)
    events = run_events(runner.query("go", with_cancel(handle), with_checkpoint_id("m")))
    assert [summarize(e)[2] for e in events] == ["error"]
    assert isinstance(events[-1].err, AgentCancelledError)
    rest = run_events(runner.resume("m"))
    assert [summarize(e)[2:4] for e in rest] == [("assistant", "answer after resume")]


# --- E08: a return-directly tool in a round that also interrupts ------------------------------------


def test_held_return_directly_event_is_delivered_after_resume_and_the_run_ends() -> None:
    @tool
    def ask() -> str:
        """Asks a human."""
        return "human said yes" if interrupt("ok?") else "human said no"

    @tool
    def finish() -> str:
        """Returns the final answer directly."""
        return "final answer"

    model = ScriptedChatModel([calls_message(call("finish", id="f1"), call("ask", id="a1"))])
    agent = ChatModelAgent("A", "d", model, tools=[ask, finish], return_directly=["finish"])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    first = run_events(runner.query("go", with_checkpoint_id("e8")))
    assert "final answer" not in [summarize(e)[3] for e in first]
    rest = run_events(runner.resume("e8", targets={root_id(first[-1]): True}))
    assert [summarize(e)[2:4] for e in rest] == [
        ("tool/ask", "human said yes"),
        ("tool/finish", "final answer"),
    ]
    assert len(model.calls) == 1


def test_held_exit_action_is_kept_across_a_resume() -> None:
    @tool
    def ask() -> str:
        """Asks a human."""
        return "yes" if interrupt("ok?") else "no"

    model = ScriptedChatModel(
        [calls_message(call("exit", {"final_result": "bye"}, id="x1"), call("ask", id="a1"))]
    )
    agent = ChatModelAgent("A", "d", model, tools=[ask], exit_tool=ExitTool())
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    first = run_events(runner.query("go", with_checkpoint_id("x")))
    rest = run_events(runner.resume("x", targets={root_id(first[-1]): True}))
    assert summarize(rest[-1])[2:] == ("tool/exit", "bye", "exit")
