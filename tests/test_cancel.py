"""Cancellation: CancelHandle modes, waiting, checkpoints on cancel, closing a live stream."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import pytest

from agentkit import (
    AgentCancelledError,
    CancelHandle,
    CancelMode,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    assistant_message,
    tool,
    with_cancel,
    with_checkpoint_id,
)
from agentkit._scope import RunScope
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import (
    FakeOpenAIServer,
    Reply,
    call,
    calls_message,
    no_thread_leak,
    run_events,
    summarize,
)

GUARD = 30.0  # a failure guard for waits, never a pace


def test_immediate_cancel_stops_before_the_next_model_call() -> None:
    handle = CancelHandle()

    @tool
    def work() -> str:
        """Cancels the run while running."""
        handle.cancel()
        return "worked"

    model = ScriptedChatModel(lambda messages: calls_message(call("work")))
    events = run_events(Runner(ChatModelAgent("c", "d", model, tools=[work])).query("x", with_cancel(handle)))
    assert len(model.calls) == 1
    err = events[-1].err
    assert isinstance(err, AgentCancelledError)
    assert str(err) == "the run was cancelled (CancelMode.IMMEDIATE: at once)"
    assert handle.wait(10) is True


def test_after_tool_calls_lets_the_round_finish() -> None:
    handle = CancelHandle()
    ran: list[str] = []

    @tool
    def first() -> str:
        """Asks for a cancel after the round."""
        handle.cancel(CancelMode.AFTER_TOOL_CALLS)
        ran.append("first")
        return "1"

    @tool
    def second() -> str:
        """Runs anyway."""
        ran.append("second")
        return "2"

    model = ScriptedChatModel([calls_message(call("first"), call("second")), "never"])
    events = run_events(Runner(ChatModelAgent("c", "d", model, tools=[first, second])).query("x", with_cancel(handle)))
    assert sorted(ran) == ["first", "second"]
    assert len(model.calls) == 1
    assert isinstance(events[-1].err, AgentCancelledError)
    assert events[-1].err.mode is CancelMode.AFTER_TOOL_CALLS


def test_after_chat_model_stops_before_the_tools_run() -> None:
    handle = CancelHandle()
    ran: list[str] = []

    @tool
    def act() -> str:
        """Must not run."""
        ran.append("act")
        return "acted"

    def reply(messages: list[Message]) -> Message:
        handle.cancel(CancelMode.AFTER_CHAT_MODEL)
        return calls_message(call("act"))

    model = ScriptedChatModel([reply])
    events = run_events(Runner(ChatModelAgent("c", "d", model, tools=[act])).query("x", with_cancel(handle)))
    assert ran == []
    assert [summarize(e)[2] for e in events] == ["assistant", "error"]


def test_cancel_saves_a_checkpoint_and_resume_continues_from_there() -> None:
    handle = CancelHandle()
    ran: list[str] = []

    @tool
    def act() -> str:
        """Runs after the resume."""
        ran.append("act")
        return "acted"

    def reply(messages: list[Message]) -> Message:
        handle.cancel(CancelMode.AFTER_CHAT_MODEL)
        return calls_message(call("act", id="a1"))

    model = ScriptedChatModel([reply, "finished"])
    store = InMemoryCheckPointStore()
    runner = Runner(ChatModelAgent("c", "d", model, tools=[act]), checkpoint_store=store)
    first = run_events(runner.query("x", with_cancel(handle), with_checkpoint_id("k")))
    assert isinstance(first[-1].err, AgentCancelledError)
    assert store.get("k") is not None
    rest = run_events(runner.resume("k"))
    assert [summarize(e)[2:4] for e in rest] == [("tool/act", "acted"), ("assistant", "finished")]
    assert ran == ["act"]
    assert len(model.calls) == 2


def test_safe_point_cancel_escalates_after_its_timeout() -> None:
    handle = CancelHandle()

    @tool
    def slow() -> str:
        """Waits until the cancel escalated to immediate."""
        handle.cancel(CancelMode.AFTER_CHAT_MODEL, timeout=0.01)
        scope = cast("RunScope | None", handle._scope)  # the run's scope, attached by the run
        deadline = time.monotonic() + 10
        while scope is not None and scope.mode is not CancelMode.IMMEDIATE and time.monotonic() < deadline:
            time.sleep(0.005)
        return "slow"

    model = ScriptedChatModel(lambda messages: calls_message(call("slow")))
    events = run_events(Runner(ChatModelAgent("c", "d", model, tools=[slow])).query("x", with_cancel(handle)))
    err = events[-1].err
    assert isinstance(err, AgentCancelledError) and err.escalated
    assert len(model.calls) == 1


def test_wait_reports_a_run_that_ended_without_cancel() -> None:
    handle = CancelHandle()
    run_events(Runner(ChatModelAgent("c", "d", ScriptedChatModel(["hi"]))).query("x", with_cancel(handle)))
    assert handle.wait(10) is False
    assert handle.cancel() is False


def test_cancel_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError):
        CancelHandle().cancel("now")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        with_cancel(object())  # type: ignore[arg-type]


def test_closing_the_iterator_aborts_an_open_http_stream() -> None:
    from agentkit.models import OpenAIChatModel

    long_text = " ".join(f"word{i}" for i in range(200))
    with FakeOpenAIServer() as server:
        server.queue(Reply(long_text, chunks=200, chunk_delay=0.05))
        with OpenAIChatModel("m", base_url=server.base_url, api_key="k", max_retries=0) as model:
            agent = ChatModelAgent("s", "d", model)
            with no_thread_leak():
                events = Runner(agent, enable_streaming=True).query("talk")
                first = next(iter(events))
                stream = first.output.message_output.message_stream  # type: ignore[union-attr]
                assert stream is not None
                stream.recv()  # the answer has started
                started = time.monotonic()
                events.close()
                # 200 chunks at 50 ms would take 10 s; a closed run stops long before
                assert time.monotonic() - started < 5


def test_cancel_inside_a_sequence_resumes_the_stage_then_runs_the_rest() -> None:
    from agentkit import SequentialAgent

    handle = CancelHandle()

    @tool
    def step() -> str:
        """Asks for a cancel after this round."""
        handle.cancel(CancelMode.AFTER_TOOL_CALLS)
        return "stepped"

    first_model = ScriptedChatModel([calls_message(call("step", id="s1")), "first done"])
    second_model = ScriptedChatModel(["second done"])
    flow = SequentialAgent("S", "d", [
        ChatModelAgent("A", "d", first_model, tools=[step]),
        ChatModelAgent("B", "d", second_model),
    ])
    store = InMemoryCheckPointStore()
    runner = Runner(flow, checkpoint_store=store)
    first = run_events(runner.query("x", with_cancel(handle), with_checkpoint_id("seq")))
    assert [summarize(e)[2] for e in first] == ["assistant", "tool/step", "error"]
    rest = run_events(runner.resume("seq"))
    assert [summarize(e)[:4] for e in rest] == [
        ("A", ["S", "A"], "assistant", "first done"),
        ("B", ["S", "A", "B"], "assistant", "second done"),
    ]
    assert len(first_model.calls) == 2 and len(second_model.calls) == 1


def test_cancel_between_sequence_children_resumes_with_the_next_child() -> None:
    from agentkit import SequentialAgent

    handle = CancelHandle()

    def answer(messages: list[Message]) -> str:
        handle.cancel(CancelMode.AFTER_TOOL_CALLS)  # no tool round follows: the transition stops
        return "first done"

    second_model = ScriptedChatModel(["second done"])
    flow = SequentialAgent("S", "d", [
        ChatModelAgent("A", "d", ScriptedChatModel([answer])),
        ChatModelAgent("B", "d", second_model),
    ])
    store = InMemoryCheckPointStore()
    runner = Runner(flow, checkpoint_store=store)
    first = run_events(runner.query("x", with_cancel(handle), with_checkpoint_id("t")))
    assert summarize(first[0])[2:4] == ("assistant", "first done")
    assert isinstance(first[-1].err, AgentCancelledError)
    assert second_model.calls == []
    rest = run_events(runner.resume("t"))
    assert [summarize(e)[:4] for e in rest] == [("B", ["S", "A", "B"], "assistant", "second done")]
    assert "For context: [A] said: first done." in [m.content for m in second_model.calls[0].messages]


def test_closing_the_iterator_saves_a_checkpoint_to_resume_from() -> None:
    holder: dict[str, Any] = {}
    ready = threading.Event()

    @tool
    def work() -> str:
        """Closes the consumer's iterator while it runs."""
        assert ready.wait(10)
        holder["events"].close()
        return "worked"

    model = ScriptedChatModel([calls_message(call("work", id="w1")), "finished after resume"])
    store = InMemoryCheckPointStore()
    runner = Runner(ChatModelAgent("c", "d", model, tools=[work]), checkpoint_store=store)
    with no_thread_leak():
        events = runner.query("go", with_checkpoint_id("closed"))
        holder["events"] = events
        ready.set()
        list(events)
    assert store.get("closed") is not None
    rest = run_events(runner.resume("closed"))
    # the cancel arrived while the tool ran: its result was discarded, not delivered, so the
    # resumed run makes the call again
    assert [summarize(e)[2:4] for e in rest] == [
        ("tool/work", "worked"),
        ("assistant", "finished after resume"),
    ]


def test_a_parallel_tool_closing_the_iterator_does_not_deadlock() -> None:
    holder: dict[str, Any] = {}
    ready = threading.Event()

    @tool
    def closer() -> str:
        """Runs on the run's pool and closes the consumer's iterator."""
        assert ready.wait(10)
        holder["events"].close()
        return "closed"

    @tool
    def other() -> str:
        """A sibling call."""
        return "other"

    model = ScriptedChatModel([calls_message(call("closer"), call("other")), "never"])
    runner = Runner(ChatModelAgent("c", "d", model, tools=[closer, other]))
    with no_thread_leak():
        events = runner.query("go")
        holder["events"] = events
        ready.set()
        list(events)
    assert len(model.calls) == 1


def test_an_iterator_nobody_closes_lets_its_run_finish() -> None:
    # Nothing cancels a run from __del__ (issue 26): a dropped iterator is not a cancel.
    # Closing it, or leaving its `with` block, is (see the tests above).
    import gc

    started = threading.Event()
    go_on = threading.Event()
    finished = threading.Event()

    @tool
    def step() -> str:
        """Works until told to go on."""
        started.set()
        assert go_on.wait(GUARD)
        return "worked"

    def reply(messages: list[Message]) -> Message:
        if any(m.role is Role.TOOL for m in messages):
            finished.set()
            return assistant_message("all done")
        return calls_message(call("step"))

    agent = ChatModelAgent("c", "d", ScriptedChatModel(reply), tools=[step])
    with no_thread_leak(timeout=GUARD):
        events = Runner(agent).query("go")
        assert started.wait(GUARD)
        del events
        gc.collect()
        go_on.set()  # the run goes on after its iterator was dropped
        assert finished.wait(GUARD)


def test_wait_reports_a_safe_point_cancel_that_never_came() -> None:
    handle = CancelHandle()

    def answer(messages: list[Message]) -> str:
        handle.cancel(CancelMode.AFTER_TOOL_CALLS)  # no tool round follows
        return "done anyway"

    events = run_events(Runner(ChatModelAgent("c", "d", ScriptedChatModel([answer]))).query("x", with_cancel(handle)))
    assert summarize(events[-1])[3] == "done anyway"
    assert handle.wait(10) is False


# --- several requests on one run add up (Eino: cancel options merge) ------------------------


def test_any_safe_point_stops_after_the_model_call_that_asked_for_tools() -> None:
    handle = CancelHandle()
    ran: list[str] = []

    @tool
    def act() -> str:
        """Must not run."""
        ran.append("act")
        return "acted"

    def reply(messages: list[Message]) -> Message:
        handle.cancel(CancelMode.ANY_SAFE_POINT)
        return calls_message(call("act"))

    events = run_events(Runner(ChatModelAgent("c", "d", ScriptedChatModel([reply]), tools=[act])).query("x", with_cancel(handle)))
    assert ran == []
    err = events[-1].err
    assert isinstance(err, AgentCancelledError) and err.mode is CancelMode.ANY_SAFE_POINT
    assert str(err) == (
        "the run was cancelled (CancelMode.ANY_SAFE_POINT: at the first safe point, after a "
        "model call or a round of tool calls)"
    )


def test_any_safe_point_stops_after_the_tool_round_it_was_asked_in() -> None:
    handle = CancelHandle()

    @tool
    def act() -> str:
        """Asks for the cancel while the round runs."""
        handle.cancel(CancelMode.ANY_SAFE_POINT)
        return "acted"

    model = ScriptedChatModel([calls_message(call("act")), "never"])
    events = run_events(Runner(ChatModelAgent("c", "d", model, tools=[act])).query("x", with_cancel(handle)))
    assert [summarize(e)[2:4] for e in events[:-1]] == [("assistant", ""), ("tool/act", "acted")]
    assert isinstance(events[-1].err, AgentCancelledError)
    assert len(model.calls) == 1


def test_two_different_safe_points_join_and_the_first_to_come_stops_the_run() -> None:
    # AFTER_CHAT_MODEL then AFTER_TOOL_CALLS, both during the model call: the run stops after
    # that call, before its tools (the later request no longer replaces the earlier one).
    handle = CancelHandle()
    ran: list[str] = []

    @tool
    def act() -> str:
        """Must not run."""
        ran.append("act")
        return "acted"

    def reply(messages: list[Message]) -> Message:
        handle.cancel(CancelMode.AFTER_CHAT_MODEL)
        handle.cancel(CancelMode.AFTER_TOOL_CALLS)
        return calls_message(call("act"))

    events = run_events(Runner(ChatModelAgent("c", "d", ScriptedChatModel([reply]), tools=[act])).query("x", with_cancel(handle)))
    assert ran == []
    err = events[-1].err
    assert isinstance(err, AgentCancelledError) and err.mode is CancelMode.ANY_SAFE_POINT


def test_requests_made_before_the_run_starts_join_too() -> None:
    handle = CancelHandle()
    handle.cancel(CancelMode.AFTER_CHAT_MODEL)
    handle.cancel(CancelMode.AFTER_TOOL_CALLS)
    model = ScriptedChatModel([calls_message(call("act")), "never"])

    @tool
    def act() -> str:
        """Must not run."""
        raise AssertionError("the tool ran")

    events = run_events(Runner(ChatModelAgent("c", "d", model, tools=[act])).query("x", with_cancel(handle)))
    err = events[-1].err
    assert isinstance(err, AgentCancelledError) and err.mode is CancelMode.ANY_SAFE_POINT


def test_an_immediate_request_wins_over_a_safe_point_and_is_not_undone() -> None:
    handle = CancelHandle()
    handle.cancel(CancelMode.AFTER_TOOL_CALLS)
    handle.cancel(CancelMode.IMMEDIATE)
    handle.cancel(CancelMode.AFTER_CHAT_MODEL)
    events = run_events(Runner(ChatModelAgent("c", "d", ScriptedChatModel(["never"]))).query("x", with_cancel(handle)))
    err = events[-1].err
    assert isinstance(err, AgentCancelledError) and err.mode is CancelMode.IMMEDIATE


def test_a_later_request_with_an_earlier_deadline_escalates_sooner() -> None:
    handle = CancelHandle()
    escalated = threading.Event()

    @tool
    def wait_for_it() -> str:
        """Asks for two safe-point cancels; the second has the shorter timeout."""
        handle.cancel(CancelMode.AFTER_TOOL_CALLS, timeout=GUARD * 10)
        handle.cancel(CancelMode.AFTER_TOOL_CALLS, timeout=0.01)
        scope = cast("RunScope", handle._scope)
        if scope.stop_event.wait(GUARD):  # woken by the escalation to an immediate cancel
            escalated.set()
        return "woken"

    model = ScriptedChatModel([calls_message(call("wait_for_it")), "never"])
    events = run_events(Runner(ChatModelAgent("c", "d", model, tools=[wait_for_it])).query("x", with_cancel(handle)))
    assert escalated.is_set()
    err = events[-1].err
    assert isinstance(err, AgentCancelledError) and err.escalated
