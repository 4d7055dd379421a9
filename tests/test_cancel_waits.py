"""One way a run stops: a cancel reaches a run blocked in each kind of wait within a second.

Every blocking wait inside a run asks the run's scope: the model's HTTP call (plain and
streamed), a tool in ``cancellable_sleep`` or under ``abort_on_cancel``, parallel tool calls
(even ones that ignore the cancel), a Parallel branch, a time-limited tool, a custom agent's
iterator. Each test blocks the run there, cancels it from another thread, and measures how long
the run's cancel event takes to arrive. The runs block on events the test controls; the 1 s
bound is the property under test, and ``GUARD`` only bounds a failure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentInput,
    AgentRunOption,
    CancelHandle,
    ChatModelAgent,
    ParallelAgent,
    Role,
    Runner,
    abort_on_cancel,
    assistant_message,
    cancellable_sleep,
    check_cancelled,
    event_from_message,
    run_in_worker,
    tool,
    with_cancel,
)
from agentkit.models import OpenAIChatModel, ScriptedChatModel
from agentkit.testing import FakeOpenAIServer, Reply, call, calls_message, no_thread_leak

GUARD = 30.0  # a failure guard for waits, never a pace
WITHIN = 1.0  # the property: a cancel reaches a blocked run this fast


def cancel_when(started: Callable[[], bool], events: Iterator[AgentEvent], handle: CancelHandle
                ) -> tuple[list[AgentEvent], float]:
    """Cancel once ``started()`` holds; return the events and how long the cancel took."""
    cancelled_at: list[float] = []

    def canceller() -> None:
        deadline = time.monotonic() + GUARD
        while not started():
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)
        cancelled_at.append(time.monotonic())
        handle.cancel()

    thread = threading.Thread(target=canceller, name="test-canceller")
    thread.start()
    seen: list[AgentEvent] = []
    arrived = 0.0
    for event in events:
        seen.append(event)
        if event.err is not None:
            arrived = time.monotonic()
    thread.join(GUARD)
    assert cancelled_at, "the run never got to the blocking wait"
    assert isinstance(seen[-1].err, AgentCancelledError), seen[-1]
    return seen, arrived - cancelled_at[0]


def model_for(tool_name: str) -> ScriptedChatModel:
    return ScriptedChatModel([calls_message(call(tool_name, {})), "never reached"])


@pytest.mark.parametrize("streaming", [False, True])
def test_a_model_call_the_server_holds(streaming: bool) -> None:
    gate = threading.Event()
    handle = CancelHandle()
    try:
        with no_thread_leak(), FakeOpenAIServer() as server:
            server.queue(Reply("slow", delay=0 if streaming else GUARD, gate=gate))
            with OpenAIChatModel("m", base_url=server.base_url, api_key="k", timeout=60) as model:
                runner = Runner(ChatModelAgent("a", "d", model), enable_streaming=streaming)
                _, took = cancel_when(
                    lambda: len(server.requests) == 1,
                    runner.query("hi", with_cancel(handle)),
                    handle,
                )
    finally:
        gate.set()
    assert took < WITHIN


def test_a_tool_in_cancellable_sleep() -> None:
    started = threading.Event()

    @tool
    def wait() -> str:
        """Waits a long time."""
        started.set()
        cancellable_sleep(GUARD)
        return "woke up"

    handle = CancelHandle()
    agent = ChatModelAgent("a", "d", model_for("wait"), tools=[wait])
    with no_thread_leak():
        _, took = cancel_when(started.is_set, Runner(agent).query("hi", with_cancel(handle)), handle)
    assert took < WITHIN


def test_a_tool_under_abort_on_cancel() -> None:
    started = threading.Event()
    blocked = threading.Event()  # what the tool waits on: set only by the abort

    @tool
    def fetch() -> str:
        """Blocks on something only its abort ends."""
        with abort_on_cancel(blocked.set):
            started.set()
            blocked.wait(GUARD)
        check_cancelled()
        return "fetched"

    handle = CancelHandle()
    agent = ChatModelAgent("a", "d", model_for("fetch"), tools=[fetch])
    with no_thread_leak():
        _, took = cancel_when(started.is_set, Runner(agent).query("hi", with_cancel(handle)), handle)
    assert took < WITHIN


def test_parallel_tool_calls_even_ones_that_ignore_the_cancel() -> None:
    both = threading.Barrier(3)
    release = threading.Event()  # set by the test: the stubborn call returns

    @tool
    def polite() -> str:
        """Waits, and wakes on a cancel."""
        both.wait(GUARD)
        cancellable_sleep(GUARD)
        return "polite"

    @tool
    def stubborn() -> str:
        """Waits, ignoring any cancel."""
        both.wait(GUARD)
        release.wait(GUARD)
        return "stubborn"

    model = ScriptedChatModel([calls_message(call("polite", {}), call("stubborn", {})), "no"])
    agent = ChatModelAgent("a", "d", model, tools=[polite, stubborn])
    handle = CancelHandle()
    seen: list[AgentEvent] = []
    took = GUARD
    try:
        with no_thread_leak():
            events = Runner(agent).query("hi", with_cancel(handle))
            both.wait(GUARD)  # both calls run
            cancelled_at = time.monotonic()
            handle.cancel()
            for event in events:
                seen.append(event)
                if event.err is not None:
                    took = time.monotonic() - cancelled_at
                    release.set()  # the run's end joins the stubborn call: let it return
    finally:
        release.set()
    assert isinstance(seen[-1].err, AgentCancelledError)
    assert took < WITHIN  # the round stopped waiting for the stubborn call


def test_a_parallel_branch() -> None:
    started = threading.Event()

    @tool
    def wait() -> str:
        """Waits a long time."""
        started.set()
        cancellable_sleep(GUARD)
        return "woke up"

    quick = ChatModelAgent("Quick", "d", ScriptedChatModel(["quick answer"]))
    slow = ChatModelAgent("Slow", "d", model_for("wait"), tools=[wait])
    handle = CancelHandle()
    runner = Runner(ParallelAgent("P", "d", [quick, slow]))
    with no_thread_leak():
        seen, took = cancel_when(started.is_set, runner.query("hi", with_cancel(handle)), handle)
    assert took < WITHIN
    assert seen[-1].agent_name == "P"  # the Parallel reports one cancel for its branches


def test_a_time_limited_tool_that_ignores_the_cancel() -> None:
    started = threading.Event()
    release = threading.Event()

    @tool(timeout=GUARD)
    def stubborn() -> str:
        """Waits, ignoring any cancel, within a time limit."""
        started.set()
        release.wait(GUARD)
        return "done"

    handle = CancelHandle()
    agent = ChatModelAgent("a", "d", model_for("stubborn"), tools=[stubborn])
    try:
        _, took = cancel_when(started.is_set, Runner(agent).query("hi", with_cancel(handle)), handle)
    finally:
        release.set()
    assert took < WITHIN


def test_a_custom_agents_iterator() -> None:
    started = threading.Event()

    class Ticker:
        name = "Ticker"
        description = "ticks until cancelled"

        def run(self, input: AgentInput, *options: AgentRunOption) -> Any:
            def work(generator: Any) -> None:
                tick = 0
                while generator.send(
                    event_from_message(assistant_message(f"tick {tick}"), None, Role.ASSISTANT)
                ):
                    started.set()
                    tick += 1
                    cancellable_sleep(0.01)

            return run_in_worker(work)

    handle = CancelHandle()
    with no_thread_leak():
        _, took = cancel_when(
            started.is_set, Runner(Ticker()).query("hi", with_cancel(handle)), handle
        )
    assert took < WITHIN


def test_a_tool_that_swallows_the_cancel_does_not_make_the_run_go_on() -> None:
    started = threading.Event()
    swallowed: list[str] = []

    @tool
    def careless() -> str:
        """Catches every exception, the cancel included."""
        started.set()
        try:
            cancellable_sleep(GUARD)
        except Exception as error:
            swallowed.append(type(error).__name__)
        return "carried on"

    model = ScriptedChatModel([calls_message(call("careless", {})), "must not be reached"])
    agent = ChatModelAgent("a", "d", model, tools=[careless])
    handle = CancelHandle()
    with no_thread_leak():
        seen, took = cancel_when(started.is_set, Runner(agent).query("hi", with_cancel(handle)), handle)
    assert swallowed == ["AgentCancelledError"]
    # the scope stays cancelled: the next check raised again, before the next model call
    assert len(model.calls) == 1
    assert all(e.get_message() is None or "carried on" not in e.get_message().content for e in seen)  # type: ignore[union-attr]
    assert took < WITHIN


def test_a_cancel_made_while_the_first_wait_starts_still_wakes_it() -> None:
    # The scope makes its stop event when a wait first needs it; a cancel made at that same
    # moment (from another thread) must wake the wait all the same: many rounds, both sides
    # released together by a barrier, each wait bounded only by GUARD.
    from agentkit import CancelMode
    from agentkit._scope import RunScope

    def sleep(scope: RunScope, barrier: threading.Barrier, outcome: list[BaseException]) -> None:
        barrier.wait(GUARD)
        try:
            scope.sleep(GUARD)
        except AgentCancelledError as error:
            outcome.append(error)

    for _ in range(200):
        scope = RunScope()
        barrier = threading.Barrier(2)
        outcome: list[BaseException] = []
        sleeper = threading.Thread(target=sleep, args=(scope, barrier, outcome))
        sleeper.start()
        barrier.wait(GUARD)
        scope.request_cancel(CancelMode.IMMEDIATE)
        sleeper.join(GUARD)
        assert not sleeper.is_alive(), "a wait missed the cancel made as it started"
        assert len(outcome) == 1
        scope.finish()
