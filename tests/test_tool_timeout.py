"""Tool time limits: a hung tool ends with ToolTimeoutError (or goes back to the model) and is
abandoned, never waited for; the abandoned call sees the cancellation.

Hung tools block on events the test controls, so a limit fires only because the tool cannot
finish, never because a machine is slow.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    CancelHandle,
    ChatModelAgent,
    Role,
    Runner,
    ToolCallInfo,
    ToolTimeoutError,
    cancellable_sleep,
    check_cancelled,
    tool,
    with_cancel,
)
from agentkit.errors import AgentConfigError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, summarize

GUARD = 30.0  # a failure guard for waits in the test, never a pace


def hung_tool(name: str, started: threading.Event, release: threading.Event, **kw: Any) -> Any:
    def hang() -> str:
        started.set()
        release.wait(GUARD)
        return "too late"

    hang.__name__ = name
    hang.__doc__ = "Hangs until released."
    return tool(hang, **kw)


def test_a_hung_tool_ends_the_run_with_tool_timeout_error_and_is_not_waited_for() -> None:
    started, release = threading.Event(), threading.Event()
    hang = hung_tool("hang", started, release)
    model = ScriptedChatModel([calls_message(call("hang", {}, id="c1")), "unreachable"])
    agent = ChatModelAgent("a", "d", model, tools=[hang], tool_timeout=0.2)
    try:
        # The run ends while the tool still blocks: neither the run nor its pool waits for it.
        events = list(Runner(agent).query("hi"))
        assert started.is_set() and not release.is_set()
    finally:
        release.set()
    error = events[-1].err
    assert isinstance(error, ToolTimeoutError)
    assert (error.tool_name, error.call_id) == ("hang", "c1")
    assert "did not finish within 0.2 seconds" in str(error)
    assert "@tool(timeout=...)" in str(error)
    assert len(model.calls) == 1


def test_a_timed_out_call_goes_back_to_the_model_with_an_exception_handler() -> None:
    started, release = threading.Event(), threading.Event()
    hang = hung_tool("hang", started, release, timeout=0.2)
    seen: list[tuple[str, str]] = []

    def handler(error: Exception, info: ToolCallInfo) -> str:
        seen.append((type(error).__name__, info.call_id))
        return "the tool timed out; answer without it"

    model = ScriptedChatModel([calls_message(call("hang", {}, id="c1")), "fine"])
    agent = ChatModelAgent("a", "d", model, tools=[hang], tool_exception_handler=handler)
    try:
        events = list(Runner(agent).query("hi"))
    finally:
        release.set()
    assert seen == [("ToolTimeoutError", "c1")]
    assert [summarize(e)[2:4] for e in events] == [
        ("assistant", ""),
        ("tool/hang", "the tool timed out; answer without it"),
        ("assistant", "fine"),
    ]


def test_the_abandoned_call_is_cancelled_check_cancelled_raises_and_sleeps_wake() -> None:
    outcome: list[str] = []
    ended = threading.Event()

    @tool(timeout=0.2)
    def slow_poll() -> str:
        """Polls something slow, checking for cancellation."""
        try:
            cancellable_sleep(GUARD)
            outcome.append("slept through")
        except AgentCancelledError:
            outcome.append("sleep woke")
        try:
            check_cancelled()
            outcome.append("not cancelled")
        except AgentCancelledError:
            outcome.append("check raised")
        finally:
            ended.set()
        return "done"

    model = ScriptedChatModel([calls_message(call("slow_poll", {}, id="c1"))])
    with no_thread_leak():
        events = list(Runner(ChatModelAgent("a", "d", model, tools=[slow_poll])).query("hi"))
        assert ended.wait(GUARD)
    assert isinstance(events[-1].err, ToolTimeoutError)
    assert outcome == ["sleep woke", "check raised"]


def test_the_tools_own_limit_wins_over_the_agents() -> None:
    started, release = threading.Event(), threading.Event()
    hang = hung_tool("hang", started, release, timeout=0.2)
    model = ScriptedChatModel([calls_message(call("hang", {}, id="c1"))])
    agent = ChatModelAgent("a", "d", model, tools=[hang], tool_timeout=GUARD * 10)
    try:
        events = list(Runner(agent).query("hi"))
    finally:
        release.set()
    assert isinstance(events[-1].err, ToolTimeoutError)


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
def test_tools_within_their_limit_run_as_usual(streaming: bool) -> None:
    @tool(timeout=GUARD)
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @tool(timeout=GUARD)
    def count(n: int):  # type: ignore[no-untyped-def]
        """Count to n."""
        yield from (str(i) for i in range(1, n + 1))

    @tool(timeout=GUARD)
    def broken() -> str:
        """Fails."""
        raise ValueError("nope")

    model = ScriptedChatModel(
        [
            calls_message(
                call("add", {"a": 1, "b": 2}, id="c1"), call("count", {"n": 3}, id="c2")
            ),
            calls_message(call("broken", {}, id="c3")),
        ]
    )
    with no_thread_leak():
        agent = ChatModelAgent("a", "d", model, tools=[add, count, broken])
        events = list(Runner(agent, enable_streaming=streaming).query("hi"))
    results = [m.content for m in model.calls[1].messages if m.role is Role.TOOL]
    assert results == ["3", "123"]
    assert "nope" in str(events[-1].err)
    assert not isinstance(events[-1].err, ToolTimeoutError)


def test_an_immediate_cancel_ends_the_wait_for_a_timed_tool() -> None:
    started, release = threading.Event(), threading.Event()
    hang = hung_tool("hang", started, release, timeout=GUARD * 10)
    handle = CancelHandle()
    model = ScriptedChatModel([calls_message(call("hang", {}, id="c1"))])
    agent = ChatModelAgent("a", "d", model, tools=[hang])
    try:
        events_iter = Runner(agent).query("hi", with_cancel(handle))
        assert started.wait(GUARD)
        handle.cancel()
        events = list(events_iter)
        assert not release.is_set()  # the run ended while the tool still blocked
    finally:
        release.set()
    assert isinstance(events[-1].err, AgentCancelledError)
    assert handle.wait(GUARD) is True


def test_timeouts_must_be_positive_numbers() -> None:
    with pytest.raises(AgentConfigError, match="timeout must be a number of seconds > 0"):
        tool(lambda: "x", name="x", timeout=0)
    with pytest.raises(AgentConfigError, match="timeout must be a number of seconds > 0"):
        ChatModelAgent("a", "d", ScriptedChatModel([]), tool_timeout=-1)


def test_a_timed_tool_can_interrupt_and_be_resumed() -> None:
    from agentkit import interrupt, with_checkpoint_id
    from agentkit.checkpoint import InMemoryCheckPointStore

    @tool(timeout=GUARD)
    def approve() -> str:
        """Ask for approval."""
        return f"approved: {interrupt('ok?')}"

    model = ScriptedChatModel([calls_message(call("approve", {}, id="c1")), "done"])
    runner = Runner(
        ChatModelAgent("a", "d", model, tools=[approve]), checkpoint_store=InMemoryCheckPointStore()
    )
    with no_thread_leak():
        stopped = list(runner.query("hi", with_checkpoint_id("cp")))
        interrupted = stopped[-1].action.interrupted  # type: ignore[union-attr]
        assert interrupted is not None
        events = list(runner.resume("cp", targets={interrupted.contexts[0].id: "yes"}))
    assert [summarize(e)[2:4] for e in events] == [
        ("tool/approve", "approved: yes"), ("assistant", "done"),
    ]


def test_a_tool_added_by_middleware_gets_the_agents_limit() -> None:
    from agentkit import AgentContext, AgentMiddleware

    started, release = threading.Event(), threading.Event()
    hang = hung_tool("hang", started, release)

    class AddTool(AgentMiddleware):
        def before_agent(self, context: AgentContext) -> None:
            context.tools.append(hang)

    model = ScriptedChatModel([calls_message(call("hang", {}, id="c1"))])
    agent = ChatModelAgent("a", "d", model, tool_timeout=0.2, middlewares=[AddTool()])
    try:
        events = list(Runner(agent).query("hi"))
    finally:
        release.set()
    assert isinstance(events[-1].err, ToolTimeoutError)
