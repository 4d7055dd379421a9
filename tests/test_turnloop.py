"""TurnLoop: turns made of pushed items, preempted at safe points, stopped, interrupted, resumed.

Each test names the Eino test (cloudwego/eino ``adk/turn_loop_test.go``) it follows. Turns run
real agents (ChatModelAgent with the scripted model, or small BaseAgents) on real threads;
tools meet the tests at events, so nothing depends on timing; every wait has a generous guard.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentRun,
    Approve,
    BaseAgent,
    CancelMode,
    ChatModelAgent,
    CheckpointError,
    Message,
    Role,
    Runner,
    TurnLoop,
    TurnLoopExit,
    assistant_message,
    cancellable_sleep,
    event_from_message,
    tool,
    user_message,
    with_checkpoint_id,
    with_session_values,
)
from agentkit.checkpoint import InMemoryCheckPointStore, PickleSerializer
from agentkit.conversation import InMemoryConversationStore, keep_last_turns
from agentkit.iterators import AsyncIterator
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, summarize
from agentkit.turnloop import SavedTurn, TurnContext, TurnInput, TurnInterruptedError, TurnResume

GUARD = 30.0  # a failure guard for waits, never a pace
KEY = b"turnloop-tests-key-0123456789abcdef"


def serializer() -> PickleSerializer:
    return PickleSerializer(KEY)


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    with no_thread_leak():
        yield


def finished(loop: TurnLoop[Any]) -> TurnLoopExit[Any]:
    return loop.wait(GUARD)


def kinds(events: list[AgentEvent]) -> list[tuple[str, str]]:
    return [summarize(event)[2:4] for event in events]


class Recorder:
    """An ``on_events`` that keeps every turn's events (and its context) for the test."""

    def __init__(self, then: Callable[[TurnContext[Any], list[AgentEvent]], object] | None = None) -> None:
        self.turns: list[tuple[TurnContext[Any], list[AgentEvent]]] = []
        self.then = then
        self.lock = threading.Lock()

    def __call__(self, turn: TurnContext[Any], events: AsyncIterator[AgentEvent]) -> None:
        got = list(events)
        with self.lock:
            self.turns.append((turn, got))
        if self.then is not None:
            self.then(turn, got)


class Echo(BaseAgent):
    """Answers with the text of every message it was given, joined with ``|``."""

    name = "echo"
    description = "echoes its input"

    def __init__(self) -> None:
        self.inputs: list[list[str]] = []

    def execute(self, run: AgentRun) -> None:
        texts = [message.content for message in run.input.messages]
        self.inputs.append(texts)
        run.emit(event_from_message(assistant_message("|".join(texts)), None, Role.ASSISTANT))


class Gated(BaseAgent):
    """Signals ``started`` and waits for ``release`` (or an immediate cancel) before answering."""

    name = "gated"
    description = "waits for the test"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.turns = 0

    def execute(self, run: AgentRun) -> None:
        self.turns += 1
        self.started.set()
        for _ in range(int(GUARD * 100)):
            if self.release.is_set():
                break
            cancellable_sleep(0.01)
        run.emit(event_from_message(assistant_message("work-done"), None, Role.ASSISTANT))


class Worker:
    """A ChatModelAgent whose tool ``work`` waits for the test; records what the model saw.

    The model calls ``work(task=<last user message>)`` for a user message and answers
    ``done: <tool result>`` after a tool result.
    """

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.seen: list[list[tuple[str, str]]] = []
        self.ran: list[str] = []

        @tool
        def work(task: str) -> str:
            """Works on a task until the test lets it finish."""
            self.started.set()
            if not self.release.wait(GUARD):
                raise AssertionError("the test never released the tool")
            self.ran.append(task)
            return f"worked on {task}"

        def reply(messages: list[Message]) -> Message | str:
            self.seen.append([(m.role.value, m.content) for m in messages])
            last = messages[-1]
            if last.role is Role.USER:
                return calls_message(call("work", {"task": last.content}, id=f"w{len(self.seen)}"))
            return f"done: {last.content}"

        self.model = ScriptedChatModel(reply)
        self.agent = ChatModelAgent("worker", "works on tasks", self.model, tools=[work])


# --- lifecycle ---------------------------------------------------------------------------------


def test_stop_is_idempotent() -> None:
    # TestTurnLoop_StopIsIdempotent
    loop: TurnLoop[str] = TurnLoop(Echo()).start()
    loop.stop()
    loop.stop()
    loop.stop(graceful=False)
    assert finished(loop).reason is None


def test_every_waiting_thread_gets_the_same_exit() -> None:
    # TestTurnLoop_WaitMultipleGoroutines
    loop: TurnLoop[str] = TurnLoop(Echo()).start()
    results: list[TurnLoopExit[str]] = []
    barrier = threading.Barrier(4)

    def waiter() -> None:
        barrier.wait(GUARD)
        results.append(loop.wait(GUARD))

    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for thread in threads:
        thread.start()
    barrier.wait(GUARD)
    loop.stop()
    for thread in threads:
        thread.join(GUARD)
    assert len(results) == 3 and results[0] is results[1] is results[2] is loop.wait(GUARD)


def test_items_pushed_before_start_are_handled_and_start_is_idempotent() -> None:
    # TestNewTurnLoop_PushBeforeRun, TestNewTurnLoop_RunIsIdempotent
    echo = Echo()
    recorder = Recorder(lambda turn, events: turn.loop.stop(finish_turn=True))
    loop: TurnLoop[str] = TurnLoop(echo, on_events=recorder)
    assert loop.push("a") and loop.push("b")
    assert loop.start() is loop.start() is loop
    exit_state = finished(loop)
    assert exit_state == TurnLoopExit(reason=None, unhandled_items=[], interrupted_items=[])
    assert echo.inputs == [["a", "b"]]
    assert kinds(recorder.turns[0][1]) == [("assistant", "a|b")]


def test_wait_before_start_waits_for_the_start_and_the_end() -> None:
    # TestNewTurnLoop_WaitBeforeRun
    loop: TurnLoop[str] = TurnLoop(Echo())
    got: list[TurnLoopExit[str]] = []
    waiting = threading.Thread(target=lambda: got.append(loop.wait(GUARD)))
    waiting.start()
    loop.stop()
    assert not loop.done
    loop.start()
    waiting.join(GUARD)
    assert got and got[0].reason is None


def test_wait_is_bounded_and_refused_inside_the_loop() -> None:
    loop: TurnLoop[str] = TurnLoop(Echo())
    with pytest.raises(TimeoutError, match="did not end within 0.01 seconds"):
        loop.wait(0.01)
    refused: list[BaseException] = []

    def on_events(turn: TurnContext[str], events: AsyncIterator[AgentEvent]) -> None:
        try:
            turn.loop.wait(GUARD)
        except RuntimeError as error:
            refused.append(error)
        turn.loop.stop()

    loop = TurnLoop(Echo(), on_events=on_events).start()
    loop.push("x")
    assert finished(loop).reason is None
    assert "wait for itself forever" in str(refused[0])


def test_the_loop_runs_on_one_named_thread_that_ends_with_it() -> None:
    names: list[str] = []

    def on_events(turn: TurnContext[str], events: AsyncIterator[AgentEvent]) -> None:
        names.append(threading.current_thread().name)

    loop: TurnLoop[str] = TurnLoop(Echo(), on_events=on_events)
    with loop:
        loop.push("x")
    assert names == ["agentkit-turnloop"]
    assert "agentkit-turnloop" not in [thread.name for thread in threading.enumerate()]


def test_push_after_stop_returns_false_and_the_item_is_not_taken() -> None:
    # TestTurnLoop_PushAfterStop_BufferedAsLateItems (agentkit: the caller keeps the item)
    loop: TurnLoop[str] = TurnLoop(Echo()).start()
    loop.stop()
    assert loop.push("late") is False
    exit_state = finished(loop)
    assert exit_state.unhandled_items == []
    assert loop.push("later") is False


def test_stop_before_start_keeps_the_pushed_items_unhandled() -> None:
    # TestTurnLoop_StopBeforeRun_PushThenStop, TestTurnLoop_StopBeforeRun_StopThenPush
    echo = Echo()
    loop: TurnLoop[str] = TurnLoop(echo)
    loop.push("a")
    loop.stop()
    assert loop.push("b") is False
    loop.start()
    assert finished(loop).unhandled_items == ["a"]
    assert echo.inputs == []


def test_arguments_are_checked_with_clear_errors() -> None:
    # TestWithGracefulTimeout_NonPositive_Panics, TestWithPreempt_ZeroSafePoint_Panics,
    # TestUntilIdleFor_NonPositive_Panics, TestNewTurnLoop_NilGenInput_Panics
    loop: TurnLoop[str] = TurnLoop(Echo())
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        loop.stop(timeout=0)
    with pytest.raises(ValueError, match="idle_for must be a non-negative"):
        loop.stop(idle_for=-1)
    with pytest.raises(ValueError, match="means nothing with graceful=False"):
        loop.stop(graceful=False, timeout=1)
    with pytest.raises(ValueError, match="a preempt never stops a turn at once"):
        loop.push("x", preempt=True, safe_point=CancelMode.IMMEDIATE)
    with pytest.raises(TypeError, match="needs an agent, a Runner or a function"):
        TurnLoop(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="gen_input must be a function"):
        TurnLoop(Echo(), gen_input="nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="both checkpoint_store and checkpoint_id"):
        TurnLoop(Echo(), checkpoint_id="x")  # TestTurnLoop_CheckpointIDWithoutStore_FreshStart
    with pytest.raises(ValueError, match="need keep_history=True"):
        TurnLoop(Echo(), keep_history=False, trim=keep_last_turns(1))
    assert loop.push("fine")
    loop.stop()
    loop.start()
    assert finished(loop).unhandled_items == ["fine"]


# --- planning a turn -----------------------------------------------------------------------------


def consume_first(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
    return TurnInput([user_message(items[0])], consumed=items[:1], remaining=items[1:])


def test_remaining_items_go_to_the_next_turns_in_order() -> None:
    # TestTurnLoop_BatchProcessing
    echo = Echo()
    batches: list[list[str]] = []

    def plan(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
        batches.append(list(items))
        return consume_first(loop, items)

    loop: TurnLoop[str] = TurnLoop(echo, gen_input=plan, keep_history=False)
    for item in ("m1", "m2", "m3"):
        loop.push(item)
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert batches == [["m1", "m2", "m3"], ["m2", "m3"], ["m3"]]
    assert echo.inputs == [["m1"], ["m2"], ["m3"]]


def test_items_in_neither_list_are_dropped() -> None:
    echo = Echo()
    loop: TurnLoop[str] = TurnLoop(
        echo,
        gen_input=lambda loop, items: TurnInput([user_message(items[0])], consumed=items[:1]),
        keep_history=False,
    )
    loop.push("a")
    loop.push("b")
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).unhandled_items == []
    assert echo.inputs == [["a"]]


def test_a_gen_input_error_ends_the_loop_and_keeps_the_items() -> None:
    # TestTurnLoop_GenInputError, TestTurnLoop_GenInputError_RecoverItems
    boom = RuntimeError("gen input error")

    def plan(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
        raise boom

    loop: TurnLoop[str] = TurnLoop(Echo(), gen_input=plan)
    loop.push("m1")
    loop.push("m2")
    exit_state = finished(loop.start())
    assert exit_state.reason is boom
    assert exit_state.unhandled_items == ["m1", "m2"]


def test_gen_input_must_return_a_turn_input() -> None:
    loop: TurnLoop[str] = TurnLoop(Echo(), gen_input=lambda loop, items: ["hi"])  # type: ignore[arg-type, return-value]
    loop.push("m1")
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, TypeError)
    assert "gen_input must return a TurnInput (got list" in str(exit_state.reason)
    assert exit_state.unhandled_items == ["m1"]


def test_options_the_loop_sets_itself_are_refused() -> None:
    loop: TurnLoop[str] = TurnLoop(
        Echo(),
        gen_input=lambda loop, items: TurnInput(
            [user_message("x")], options=[with_checkpoint_id("mine")]
        ),
    )
    loop.push("m1")
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, ValueError)
    assert "has with_checkpoint_id: the TurnLoop sets these itself" in str(exit_state.reason)


def test_turn_options_reach_the_run() -> None:
    seen: list[object] = []

    class Reader(BaseAgent):
        name = "reader"
        description = "reads a session value"

        def execute(self, run: AgentRun) -> None:
            from agentkit import get_session_value

            seen.append(get_session_value("user"))
            run.emit(event_from_message(assistant_message("ok"), None, Role.ASSISTANT))

    loop: TurnLoop[str] = TurnLoop(
        Reader(),
        gen_input=lambda loop, items: TurnInput(
            [user_message(items[0])], options=[with_session_values({"user": items[0]})]
        ),
    )
    loop.push("ann")
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert seen == ["ann"]


def test_an_agent_factory_error_ends_the_loop_and_keeps_the_items_in_order() -> None:
    # TestTurnLoop_GetAgentError, TestTurnLoop_GetAgentError_RecoverConsumed,
    # TestTurnLoop_PrepareAgentError_RecoverItemsInOrder
    boom = RuntimeError("get agent error")
    planned = threading.Event()
    go_on = threading.Event()

    def plan(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
        planned.set()
        assert go_on.wait(GUARD)
        return consume_first(loop, items)

    def factory(consumed: list[str]) -> Echo:
        raise boom

    loop: TurnLoop[str] = TurnLoop(factory, gen_input=plan)
    loop.push("a")
    loop.push("b")
    loop.start()
    assert planned.wait(GUARD)
    loop.push("c")  # pushed while the turn is planned: after the planned ones
    go_on.set()
    exit_state = finished(loop)
    assert exit_state.reason is boom
    assert exit_state.unhandled_items == ["a", "b", "c"]


def test_the_factory_gets_each_turns_items_and_may_return_a_runner() -> None:
    # TestTurnLoop_RunCtx_Propagation (PrepareAgent sees the consumed items)
    made: list[list[str]] = []

    def factory(consumed: list[str]) -> Runner | Echo:
        made.append(consumed)
        if consumed == ["b"]:
            streaming = ChatModelAgent("streamer", "d", ScriptedChatModel(["b"]))
            return Runner(streaming, enable_streaming=True)
        return Echo()

    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(factory, gen_input=consume_first, on_events=recorder, keep_history=False)
    loop.push("a")
    loop.push("b")
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert made == [["a"], ["b"]]
    streamed = [events[0].output.message_output.is_streaming for _, events in recorder.turns]  # type: ignore[union-attr]
    assert streamed == [False, True]  # the Runner's streaming mode is used
    assert [kinds(events) for _, events in recorder.turns] == [[("assistant", "a")], [("assistant", "b")]]


def test_a_factory_that_returns_no_agent_is_a_clear_error() -> None:
    loop: TurnLoop[str] = TurnLoop(lambda consumed: "not an agent")  # type: ignore[arg-type, return-value]
    loop.push("a")
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, TypeError)
    assert "agent factory must return an Agent or a Runner (got str" in str(exit_state.reason)
    assert exit_state.unhandled_items == ["a"]


def test_items_that_are_not_messages_need_a_gen_input() -> None:
    loop: TurnLoop[object] = TurnLoop(Echo())
    loop.push({"task": 1})
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, TypeError)
    assert "cannot make a message of a dict item" in str(exit_state.reason)
    assert exit_state.unhandled_items == [{"task": 1}]


def test_a_stop_while_the_turn_is_planned_puts_its_items_back() -> None:
    # TestTurnLoop_UnhandledItemsOnStop, TestTurnLoop_StopAfterGenInput_RecoverConsumed
    planned = threading.Event()
    go_on = threading.Event()
    echo = Echo()

    def plan(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
        planned.set()
        assert go_on.wait(GUARD)
        return consume_first(loop, items)

    loop: TurnLoop[str] = TurnLoop(echo, gen_input=plan)
    for item in ("msg1", "msg2", "msg3"):
        loop.push(item)
    loop.start()
    assert planned.wait(GUARD)
    loop.stop()
    go_on.set()
    exit_state = finished(loop)
    assert exit_state.reason is None
    assert exit_state.unhandled_items == ["msg1", "msg2", "msg3"]
    assert echo.inputs == []


def test_stop_from_gen_input_ends_the_loop() -> None:
    # TestTurnLoop_StopCallFromGenInput
    def plan(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
        loop.stop()
        return TurnInput([user_message(items[0])])

    loop: TurnLoop[str] = TurnLoop(Echo(), gen_input=plan)
    loop.push("a")
    exit_state = finished(loop.start())
    assert exit_state.reason is None and exit_state.unhandled_items == ["a"]


def test_push_from_on_events_starts_another_turn() -> None:
    # TestTurnLoop_PushFromOnAgentEvents
    echo = Echo()

    def then(turn: TurnContext[str], events: list[AgentEvent]) -> None:
        if turn.consumed == ["first"]:
            assert turn.loop.push("second")
        else:
            turn.loop.stop()

    loop: TurnLoop[str] = TurnLoop(echo, on_events=Recorder(then), keep_history=False)
    loop.push("first")
    assert finished(loop.start()).reason is None
    assert echo.inputs == [["first"], ["second"]]


def test_concurrent_pushes_each_reach_exactly_one_turn() -> None:
    # TestTurnLoop_ConcurrentPush, TestNewTurnLoop_ConcurrentPushAndRun
    echo = Echo()
    loop: TurnLoop[str] = TurnLoop(echo, keep_history=False)
    barrier = threading.Barrier(9)

    def pusher(n: int) -> None:
        barrier.wait(GUARD)
        for i in range(25):
            assert loop.push(f"{n}-{i}")

    threads = [threading.Thread(target=pusher, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    barrier.wait(GUARD)
    loop.start()
    for thread in threads:
        thread.join(GUARD)
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    handled = [item for texts in echo.inputs for item in texts]
    assert sorted(handled) == sorted(f"{n}-{i}" for n in range(8) for i in range(25))
    for n in range(8):  # each pusher's items keep their order
        mine = [item for item in handled if item.startswith(f"{n}-")]
        assert mine == [f"{n}-{i}" for i in range(25)]


# --- events ------------------------------------------------------------------------------------


def test_on_events_gets_each_turns_whole_event_sequence() -> None:
    # TestTurnLoop_OnAgentEventsReceivesEvents
    worker = Worker()
    worker.release.set()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(worker.agent, on_events=recorder)
    loop.push("plan")
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    ((turn, events),) = recorder.turns
    assert turn.consumed == ["plan"] and not turn.resumed and not turn.preempted
    assert [summarize(event) for event in events] == [
        ("worker", ["worker"], "assistant", "", None),
        ("worker", ["worker"], "tool/work", "worked on plan", None),
        ("worker", ["worker"], "assistant", "done: worked on plan", None),
    ]


def test_what_on_events_leaves_unread_is_read_by_the_loop() -> None:
    worker = Worker()
    worker.release.set()
    loop: TurnLoop[str] = TurnLoop(worker.agent, on_events=lambda turn, events: None)
    loop.push("a")
    loop.push("b")
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert worker.seen[0] == [("user", "a"), ("user", "b")]  # one turn of both items
    assert worker.ran == ["b"] and len(worker.seen) == 2  # the turn ran to its end


def test_the_default_on_events_ends_the_loop_with_a_failed_turns_error() -> None:
    # TestTurnLoop_DefaultOnAgentEvents_ErrorPropagation
    def broken(messages: list[Message]) -> str:
        raise RuntimeError("the model broke")

    agent = ChatModelAgent("a", "d", ScriptedChatModel(broken))
    loop: TurnLoop[str] = TurnLoop(agent)
    loop.push("x")
    loop.push("y")
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, RuntimeError) and str(exit_state.reason) == "the model broke"
    assert exit_state.interrupted_items == ["x", "y"]


def test_an_on_events_that_swallows_a_failure_lets_the_loop_go_on() -> None:
    calls: list[str] = []

    def flaky(messages: list[Message]) -> str:
        calls.append(messages[-1].content)
        if len(calls) == 1:
            raise RuntimeError("once")
        return "fine"

    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(
        ChatModelAgent("a", "d", ScriptedChatModel(flaky)),
        gen_input=consume_first,
        on_events=recorder,
    )
    loop.push("x")
    loop.push("y")
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert [kinds(events)[-1] for _, events in recorder.turns] == [("error", "once"), ("assistant", "fine")]


def test_an_on_events_error_cancels_the_turn_and_ends_the_loop() -> None:
    # TestTurnLoop_OnAgentEventsError
    sleeper = Sleeper()
    boom = ValueError("callback failed")

    def on_events(turn: TurnContext[str], events: AsyncIterator[AgentEvent]) -> None:
        next(iter(events))  # the model's tool call
        assert sleeper.started.wait(GUARD)  # the tool runs until a cancel wakes it
        raise boom

    store = InMemoryCheckPointStore()
    loop: TurnLoop[str] = TurnLoop(
        sleeper.agent, on_events=on_events, checkpoint_store=store, checkpoint_id="cb",
        serializer=serializer(),
    )
    loop.push("x")
    exit_state = finished(loop.start())
    assert exit_state.reason is boom
    assert exit_state.interrupted_items == ["x"]
    assert exit_state.checkpoint_attempted and exit_state.checkpoint_error is None


# --- preempt -----------------------------------------------------------------------------------


def test_a_preempt_stops_the_turn_after_its_tool_round_and_the_next_turn_sees_everything() -> None:
    # TestTurnLoop_Preempt_CancelsCurrentAgent, TestTurnLoop_Preempt_DiscardsConsumedItems
    worker = Worker()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(worker.agent, on_events=recorder).start()
    loop.push("first")
    assert worker.started.wait(GUARD)
    assert loop.push("urgent", preempt=True)  # while the tool runs: it finishes, then the stop
    worker.release.set()
    loop.stop(idle_for=0)
    assert finished(loop) == TurnLoopExit(reason=None, unhandled_items=[], interrupted_items=[])
    (first, first_events), (second, second_events) = recorder.turns
    assert first.consumed == ["first"] and first.preempted and not first.stopped
    assert kinds(first_events) == [
        ("assistant", ""),
        ("tool/work", "worked on first"),
        ("error", "the run was cancelled (CancelMode.ANY_SAFE_POINT: at the first safe point, "
                  "after a model call or a round of tool calls)"),
    ]
    assert second.consumed == ["urgent"] and not second.preempted
    assert kinds(second_events) == [
        ("assistant", ""),
        ("tool/work", "worked on urgent"),
        ("assistant", "done: worked on urgent"),
    ]
    # the next turn sees the preempted turn's work, then the new message
    assert worker.seen[1] == [
        ("user", "first"), ("assistant", ""), ("tool", "worked on first"), ("user", "urgent"),
    ]
    assert worker.ran == ["first", "urgent"]


def test_a_preempt_during_the_model_call_answers_the_tool_calls_it_did_not_run() -> None:
    model_started = threading.Event()
    go_on = threading.Event()
    seen: list[list[tuple[str, str]]] = []
    ran: list[str] = []

    @tool
    def book(city: str) -> str:
        """Books a trip."""
        ran.append(city)
        return f"booked {city}"

    def reply(messages: list[Message]) -> Message | str:
        seen.append([(m.role.value, m.content) for m in messages])
        last = messages[-1]
        if last.content == "Lisbon":
            model_started.set()
            assert go_on.wait(GUARD)
        if last.role is Role.USER:
            return calls_message(call("book", {"city": last.content}, id=f"b{len(seen)}"))
        return f"done: {last.content}"

    loop: TurnLoop[str] = TurnLoop(ChatModelAgent("agent", "d", ScriptedChatModel(reply), tools=[book]))
    loop.start()
    loop.push("Lisbon")
    assert model_started.wait(GUARD)
    loop.push("Porto", preempt=True)
    go_on.set()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert ran == ["Porto"]
    assert seen[1] == [
        ("user", "Lisbon"),
        ("assistant", ""),
        ("tool", "The call to book (id b1) did not complete: a new message came in first."),
        ("user", "Porto"),
    ]


def test_a_preempt_at_after_tool_calls_waits_for_the_round() -> None:
    # TestTurnLoop_Preempt_WithAgentCancelMode
    model_started = threading.Event()
    go_on = threading.Event()
    ran: list[str] = []

    @tool
    def book(city: str) -> str:
        """Books a trip."""
        ran.append(city)
        return f"booked {city}"

    def reply(messages: list[Message]) -> Message | str:
        last = messages[-1]
        if last.content == "Lisbon":
            model_started.set()
            assert go_on.wait(GUARD)
        if last.role is Role.USER:
            return calls_message(call("book", {"city": last.content}))
        return f"done: {last.content}"

    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(
        ChatModelAgent("agent", "d", ScriptedChatModel(reply), tools=[book]), on_events=recorder
    ).start()
    loop.push("Lisbon")
    assert model_started.wait(GUARD)
    loop.push("Porto", preempt=True, safe_point=CancelMode.AFTER_TOOL_CALLS)
    go_on.set()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert ran == ["Lisbon", "Porto"]
    error = recorder.turns[0][1][-1].err
    assert isinstance(error, AgentCancelledError) and error.mode is CancelMode.AFTER_TOOL_CALLS


def test_a_push_without_preempt_does_not_cancel_the_turn() -> None:
    # TestTurnLoop_Push_WithoutPreempt_DoesNotCancel
    worker = Worker()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(worker.agent, on_events=recorder).start()
    loop.push("first")
    assert worker.started.wait(GUARD)
    loop.push("second")
    worker.release.set()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert [kinds(events)[-1] for _, events in recorder.turns] == [
        ("assistant", "done: worked on first"),
        ("assistant", "done: worked on second"),
    ]
    assert not recorder.turns[0][0].preempted


def test_a_preempt_while_the_turn_is_planned_cancels_the_turn_that_did_not_see_the_item() -> None:
    # TestTurnLoop_PreemptDuringPlanningCancelsUpcomingAgent
    worker = Worker()
    worker.release.set()
    planned = threading.Event()
    go_on = threading.Event()

    def plan(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
        if items == ["stale"]:
            planned.set()
            assert go_on.wait(GUARD)
        return TurnInput([user_message(item) for item in items])

    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(worker.agent, gen_input=plan, on_events=recorder).start()
    loop.push("stale")
    assert planned.wait(GUARD)
    loop.push("fresh", preempt=True)
    go_on.set()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    (first, first_events), (second, _) = recorder.turns
    assert first.preempted
    assert kinds(first_events)[-1][0] == "error"  # stopped after its first model call
    assert worker.ran == ["fresh"]
    assert second.consumed == ["fresh"]


def test_a_preempt_between_turns_cancels_nothing() -> None:
    # TestTurnLoop_PreemptBetweenTurnsAcksImmediately, TestTurnLoop_PreemptAck_ClosesImmediatelyIfLoopNotStarted
    echo = Echo()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(echo, on_events=recorder, keep_history=False)
    assert loop.push("before start", preempt=True)
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert kinds(recorder.turns[0][1]) == [("assistant", "before start")]


class Stubborn(BaseAgent):
    """First turn: works until an immediate cancel (it has no safe point); then answers."""

    name = "stubborn"
    description = "ignores safe points"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.turns = 0

    def execute(self, run: AgentRun) -> None:
        self.turns += 1
        if self.turns == 1:
            self.started.set()
            cancellable_sleep(GUARD)  # woken by an immediate cancel only
        run.emit(event_from_message(assistant_message(f"turn {self.turns}"), None, Role.ASSISTANT))


def test_a_preempt_timeout_stops_a_turn_that_reaches_no_safe_point() -> None:
    # TestTurnLoop_Preempt_EscalatesOnSecondPreempt (WithPreemptTimeout)
    agent = Stubborn()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(agent, on_events=recorder).start()
    loop.push("long job")
    assert agent.started.wait(GUARD)
    loop.push("urgent", preempt=True, preempt_timeout=0.01)
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    first_error = recorder.turns[0][1][-1].err
    assert isinstance(first_error, AgentCancelledError) and first_error.escalated
    assert kinds(recorder.turns[1][1]) == [("assistant", "turn 2")]


# --- stop --------------------------------------------------------------------------------------


def test_finish_turn_lets_the_running_turn_complete_and_starts_no_other() -> None:
    # TestTurnLoop_BareStop_AgentRunsToCompletion
    agent = Gated()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(agent, gen_input=consume_first, on_events=recorder)
    loop.push("task1")
    loop.push("task2")
    loop.start()
    assert agent.started.wait(GUARD)
    loop.stop(finish_turn=True)
    agent.release.set()
    exit_state = finished(loop)
    assert exit_state == TurnLoopExit(reason=None, unhandled_items=["task2"], interrupted_items=[])
    assert agent.turns == 1
    assert kinds(recorder.turns[0][1]) == [("assistant", "work-done")]
    assert not recorder.turns[0][0].stopped


def test_a_graceful_stop_saves_the_turn_and_a_new_loop_resumes_it() -> None:
    # TestTurnLoop_StopCancel_InterruptedItems_PersistAndRestore,
    # TestTurnLoop_StopCheckPointIDInCancelError, TestTurnLoop_StopWithMode
    worker = Worker()
    store = InMemoryCheckPointStore()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(
        worker.agent, on_events=recorder, checkpoint_store=store, checkpoint_id="chat-1",
        serializer=serializer(),
    ).start()
    loop.push("msg1")
    assert worker.started.wait(GUARD)
    loop.stop(cause="shutting down")
    assert loop.push("too late") is False
    worker.release.set()
    exit_state = finished(loop)
    assert isinstance(exit_state.reason, AgentCancelledError)
    assert exit_state.reason.mode is CancelMode.ANY_SAFE_POINT
    assert exit_state.interrupted_items == ["msg1"] and exit_state.unhandled_items == []
    assert exit_state.stop_cause == "shutting down"
    assert exit_state.checkpoint_attempted and exit_state.checkpoint_error is None
    assert store.get("chat-1") is not None
    turn = recorder.turns[0][0]
    assert turn.stopped and turn.stop_cause == "shutting down"

    saved: list[SavedTurn[str]] = []

    def resume(loop: TurnLoop[str], turn: SavedTurn[str]) -> TurnResume[str]:
        saved.append(turn)
        return TurnResume()

    def plan(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
        raise AssertionError("the saved turn is resumed, not planned again")

    again = Recorder()
    loop2: TurnLoop[str] = TurnLoop(
        worker.agent, gen_input=plan, gen_resume=resume, on_events=again,
        checkpoint_store=store, checkpoint_id="chat-1", serializer=serializer(),
    )
    loop2.start()
    loop2.stop(idle_for=0)
    assert finished(loop2).reason is None
    assert saved == [SavedTurn(["msg1"], [], [], None, "cancelled")]
    ((resumed, events),) = again.turns
    assert resumed.resumed and resumed.consumed == ["msg1"]
    assert kinds(events) == [("assistant", "done: worked on msg1")]
    assert worker.ran == ["msg1"]  # the finished tool call is not run again
    assert store.get("chat-1") is None  # nothing left: the checkpoint is gone


class Sleeper:
    """A ChatModelAgent whose tool sleeps until an immediate cancel wakes it."""

    def __init__(self) -> None:
        self.started = threading.Event()

        @tool
        def research(topic: str) -> str:
            """Researches for a long time."""
            self.started.set()
            cancellable_sleep(GUARD)
            return "never"

        def reply(messages: list[Message]) -> Message | str:
            if messages[-1].role is Role.USER:
                return calls_message(call("research", {"topic": messages[-1].content}))
            return "summary"

        self.agent = ChatModelAgent("researcher", "d", ScriptedChatModel(reply), tools=[research])


def test_an_immediate_stop_cancels_the_turn_at_once() -> None:
    sleeper = Sleeper()
    store = InMemoryCheckPointStore()
    loop: TurnLoop[str] = TurnLoop(
        sleeper.agent, checkpoint_store=store, checkpoint_id="now", serializer=serializer()
    ).start()
    loop.push("stars")
    assert sleeper.started.wait(GUARD)
    loop.stop(graceful=False)
    exit_state = finished(loop)
    assert isinstance(exit_state.reason, AgentCancelledError)
    assert exit_state.reason.mode is CancelMode.IMMEDIATE
    assert exit_state.interrupted_items == ["stars"] and exit_state.checkpoint_attempted


def test_a_second_stop_escalates_a_graceful_one() -> None:
    # TestTurnLoop_Stop_EscalatesCancelMode, TestAttack_BareStopDoesNotDeescalateExistingCancelIntent
    sleeper = Sleeper()
    loop: TurnLoop[str] = TurnLoop(sleeper.agent).start()
    loop.push("stars")
    assert sleeper.started.wait(GUARD)
    loop.stop()  # waits for the tool round, which waits for an immediate cancel
    loop.stop(finish_turn=True)  # does not take the cancel back
    loop.stop(graceful=False)
    exit_state = finished(loop)
    assert isinstance(exit_state.reason, AgentCancelledError)
    assert exit_state.reason.mode is CancelMode.IMMEDIATE


def test_a_graceful_stop_with_a_timeout_escalates() -> None:
    sleeper = Sleeper()
    loop: TurnLoop[str] = TurnLoop(sleeper.agent).start()
    loop.push("stars")
    assert sleeper.started.wait(GUARD)
    loop.stop(timeout=0.01)
    exit_state = finished(loop)
    assert isinstance(exit_state.reason, AgentCancelledError) and exit_state.reason.escalated
    assert exit_state.checkpoint_attempted is False  # TestTurnLoop_CheckpointAttempted_FalseWhenNoStore


def test_the_cancel_is_the_exit_reason_even_when_on_events_ignores_it() -> None:
    # TestTurnLoop_CancelError_CapturedIndependentlyOfCallback
    sleeper = Sleeper()
    loop: TurnLoop[str] = TurnLoop(sleeper.agent, on_events=lambda turn, events: None).start()
    loop.push("stars")
    assert sleeper.started.wait(GUARD)
    loop.stop(graceful=False)
    exit_state = finished(loop)
    assert isinstance(exit_state.reason, AgentCancelledError)
    assert exit_state.interrupted_items == ["stars"]


def test_an_on_events_error_wins_and_the_items_are_still_kept() -> None:
    # TestTurnLoop_CancelError_CustomErrorWins_InterruptedItemsStillSet
    sleeper = Sleeper()
    boom = ValueError("my own error")

    def on_events(turn: TurnContext[str], events: AsyncIterator[AgentEvent]) -> None:
        list(events)
        raise boom

    loop: TurnLoop[str] = TurnLoop(sleeper.agent, on_events=on_events).start()
    loop.push("stars")
    assert sleeper.started.wait(GUARD)
    loop.stop(graceful=False)
    exit_state = finished(loop)
    assert exit_state.reason is boom
    assert exit_state.interrupted_items == ["stars"]


def test_a_stop_while_idle_saves_nothing() -> None:
    # TestTurnLoop_StopWhileIdle_SkipsCheckpoint, TestTurnLoop_StopWithoutCheckpointIDDoesNotPersist
    store = InMemoryCheckPointStore()
    loop: TurnLoop[str] = TurnLoop(
        Echo(), checkpoint_store=store, checkpoint_id="idle", serializer=serializer()
    ).start()
    loop.push("a")
    loop.stop(idle_for=0)
    exit_state = finished(loop)
    assert exit_state.reason is None and not exit_state.checkpoint_attempted
    assert store.get("idle") is None


def test_items_left_between_turns_are_saved_and_taken_by_the_next_loop() -> None:
    # TestTurnLoop_StopBetweenTurnsAndResume, TestTurnLoop_StaleCheckpointDeletion_OnCleanResume
    store = InMemoryCheckPointStore()
    loop: TurnLoop[str] = TurnLoop(
        Echo(), checkpoint_store=store, checkpoint_id="between", serializer=serializer()
    )
    loop.push("a")
    loop.push("b")
    loop.stop()
    exit_state = finished(loop.start())
    assert exit_state.unhandled_items == ["a", "b"] and exit_state.checkpoint_attempted
    assert store.get("between") is not None

    seen: list[list[str]] = []

    def plan(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
        seen.append(list(items))
        return TurnInput([user_message(item) for item in items])

    loop2: TurnLoop[str] = TurnLoop(
        Echo(), gen_input=plan, checkpoint_store=store, checkpoint_id="between", serializer=serializer()
    )
    loop2.push("c")
    loop2.start()
    loop2.stop(idle_for=0)
    assert finished(loop2).reason is None
    assert seen == [["a", "b", "c"]]
    assert store.get("between") is None  # consumed: nothing is left to resume


def test_skip_checkpoint_saves_nothing_removes_the_resumed_one_and_sticks() -> None:
    # TestTurnLoop_StopWithSkipCheckpoint, TestTurnLoop_StopWithSkipCheckpoint_DeletesStaleCheckpoint,
    # TestTurnLoop_SkipCheckpoint_Sticky
    store = InMemoryCheckPointStore()
    first: TurnLoop[str] = TurnLoop(
        Echo(), checkpoint_store=store, checkpoint_id="skip", serializer=serializer()
    )
    first.push("a")
    first.stop()
    assert finished(first.start()).checkpoint_attempted
    second: TurnLoop[str] = TurnLoop(
        Gated(), checkpoint_store=store, checkpoint_id="skip", serializer=serializer()
    )
    second.stop(skip_checkpoint=True)
    second.stop()
    exit_state = finished(second.start())
    assert exit_state.unhandled_items == ["a"] and not exit_state.checkpoint_attempted
    assert store.get("skip") is None


def test_the_first_stop_cause_counts() -> None:
    # TestTurnLoop_StopWithStopCause, TestTurnLoop_StopCause_FirstNonEmptyWins,
    # TestTurnLoop_StopCause_EmptyWhenNoStop
    loop: TurnLoop[str] = TurnLoop(Echo())
    loop.stop(idle_for=GUARD * 10)
    loop.stop(cause="first")
    loop.stop(cause="second")
    assert finished(loop.start()).stop_cause == "first"
    quiet: TurnLoop[str] = TurnLoop(Echo(), gen_input=lambda loop, items: 1 / 0)  # type: ignore[arg-type, return-value]
    quiet.push("x")
    assert finished(quiet.start()).stop_cause == ""


def test_idle_for_ends_the_loop_once_idle_that_long_and_leaves_the_running_turn_alone() -> None:
    # TestUntilIdleFor, TestUntilIdleFor_DoesNotCancelRunningAgent
    agent = Gated()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(agent, on_events=recorder).start()
    loop.push("job")
    assert agent.started.wait(GUARD)
    loop.stop(idle_for=0.05)
    agent.release.set()
    exit_state = finished(loop)
    assert exit_state.reason is None
    assert kinds(recorder.turns[0][1]) == [("assistant", "work-done")]
    assert not recorder.turns[0][0].stopped


def test_a_plain_stop_overrides_a_long_idle_wait() -> None:
    # TestAttack_BareStopOverridesUntilIdleFor, TestAttack_UntilIdleFor_MultipleStopCallsFirstWins
    loop: TurnLoop[str] = TurnLoop(Echo()).start()
    loop.stop(idle_for=GUARD * 10)
    loop.stop(idle_for=0)  # the first idle wait counts
    with pytest.raises(TimeoutError):
        loop.wait(0.05)
    loop.stop()
    assert finished(loop).reason is None


# --- interrupts, checkpoints and resume --------------------------------------------------------


def payer() -> tuple[ChatModelAgent, list[str]]:
    """A payment agent whose ``pay`` tool needs approval; returns it and the payments made."""
    paid: list[str] = []

    @tool(needs_approval=True)
    def pay(payee: str, amount: int) -> str:
        """Pays a payee."""
        paid.append(f"{amount} to {payee}")
        return f"paid {amount} to {payee}"

    def reply(messages: list[Message]) -> Message | str:
        last = messages[-1]
        if last.role is Role.USER:
            return calls_message(call("pay", {"payee": last.content, "amount": 120}, id="p1"))
        return f"Done: {last.content}"

    return ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[pay]), paid


def test_an_interrupt_ends_the_loop_with_a_checkpoint_that_a_new_loop_resumes() -> None:
    # TestTurnLoop_BusinessInterrupt_PersistAndResume
    agent, paid = payer()
    store = InMemoryCheckPointStore()
    recorder = Recorder()
    settings: dict[str, Any] = {
        "checkpoint_store": store, "checkpoint_id": "pay-session", "serializer": serializer(),
    }
    loop: TurnLoop[str] = TurnLoop(agent, gen_input=consume_first, on_events=recorder, **settings)
    loop.push("ACME")
    loop.push("Globex")
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, TurnInterruptedError)
    interrupt_info = exit_state.interrupt
    assert interrupt_info is not None and exit_state.reason.interrupt is interrupt_info
    (point,) = interrupt_info.contexts
    assert point.address == ("agent:payer", "tool:pay:p1")
    assert str(exit_state.reason).startswith("the turn was interrupted at 1 point(s) waiting for input")
    assert exit_state.interrupted_items == ["ACME"] and exit_state.unhandled_items == ["Globex"]
    assert exit_state.checkpoint_attempted and exit_state.checkpoint_error is None
    assert paid == []
    assert kinds(recorder.turns[0][1]) == [("assistant", ""), ("", "")]
    assert summarize(recorder.turns[0][1][-1])[4] == "interrupt"

    saved: list[SavedTurn[str]] = []

    def answer(loop: TurnLoop[str], turn: SavedTurn[str]) -> TurnResume[str]:
        saved.append(turn)
        assert turn.interrupt is not None
        return TurnResume(targets={turn.interrupt.contexts[0].id: Approve()})

    again = Recorder()
    loop2: TurnLoop[str] = TurnLoop(
        agent, gen_input=consume_first, gen_resume=answer, on_events=again, **settings
    )
    loop2.push("Initech")
    second = finished(loop2.start())
    (turn,) = saved
    assert (turn.interrupted_items, turn.unhandled_items, turn.new_items, turn.reason) == (
        ["ACME"], ["Globex"], ["Initech"], "interrupted",
    )
    assert turn.interrupt is not None and turn.interrupt.contexts[0].id == point.id
    assert (again.turns[0][0].consumed, again.turns[0][0].resumed) == (["ACME"], True)
    assert kinds(again.turns[0][1]) == [("tool/pay", "paid 120 to ACME"), ("assistant", "Done: paid 120 to ACME")]
    assert paid == ["120 to ACME"]
    # the next turn (Globex) asks for its own approval: the loop ends there, saved again
    assert isinstance(second.reason, TurnInterruptedError)
    assert second.interrupted_items == ["Globex"] and second.unhandled_items == ["Initech"]
    assert second.checkpoint_attempted and store.get("pay-session") is not None


def test_the_items_after_a_resumed_turn_run_as_usual() -> None:
    agent, paid = payer()
    store = InMemoryCheckPointStore()
    settings: dict[str, Any] = {"checkpoint_store": store, "checkpoint_id": "s", "serializer": serializer()}
    loop: TurnLoop[str] = TurnLoop(agent, gen_input=consume_first, **settings)
    loop.push("ACME")
    loop.push("Globex")
    first = finished(loop.start())
    assert first.interrupt is not None
    def approve_all(loop: TurnLoop[str], turn: SavedTurn[str]) -> TurnResume[str]:
        assert turn.interrupt is not None
        return TurnResume(targets={context.id: True for context in turn.interrupt.contexts})

    loop2: TurnLoop[str] = TurnLoop(agent, gen_input=consume_first, gen_resume=approve_all, **settings)
    second = finished(loop2.start())
    # ACME is paid; Globex's turn then stops for its own approval, saved under the same id
    assert paid == ["120 to ACME"]
    assert isinstance(second.reason, TurnInterruptedError)
    assert second.interrupted_items == ["Globex"] and second.unhandled_items == []
    loop3: TurnLoop[str] = TurnLoop(agent, gen_input=consume_first, gen_resume=approve_all, **settings)
    loop3.start()
    loop3.stop(idle_for=0)
    assert finished(loop3).reason is None
    assert paid == ["120 to ACME", "120 to Globex"]
    assert store.get("s") is None


def test_a_resumed_turn_is_dropped_from_the_checkpoint_before_the_next_turn_starts() -> None:
    agent, paid = payer()
    store = InMemoryCheckPointStore()
    settings: dict[str, Any] = {"checkpoint_store": store, "checkpoint_id": "once", "serializer": serializer()}
    loop: TurnLoop[str] = TurnLoop(agent, **settings)
    loop.push("ACME")
    assert finished(loop.start()).interrupt is not None
    during_next_turn: list[bytes | None] = []

    def on_events(turn: TurnContext[str], events: AsyncIterator[AgentEvent]) -> None:
        list(events)
        if not turn.resumed:
            during_next_turn.append(store.get("once"))
            turn.loop.stop(finish_turn=True)

    loop2: TurnLoop[str] = TurnLoop(
        lambda consumed: agent if consumed == ["ACME"] else Echo(),
        gen_resume=lambda loop, turn: TurnResume(targets={turn.interrupt.contexts[0].id: True}),  # type: ignore[union-attr]
        on_events=on_events,
        **settings,
    )
    loop2.push("next")
    finished(loop2.start())
    # The resumed payment is no longer in the checkpoint once its turn ended: a crash in the
    # next turn would not pay twice. Only the item that was waiting is left.
    (data,) = during_next_turn
    assert data is not None
    left = serializer().loads(data, checkpoint_id="once")
    assert (left.turn, left.unhandled_items, left.interrupted_items) == (None, ["next"], [])
    assert paid == ["120 to ACME"]


def test_resuming_without_answers_interrupts_again_and_keeps_the_streaming_mode() -> None:
    # TestTurnLoop_ResumeInterruptAgain_PreservesEnableStreamingCheckpoint, TestTurnLoop_SameCheckpointID_OverwritePattern
    agent, paid = payer()
    store = InMemoryCheckPointStore()
    settings: dict[str, Any] = {"checkpoint_store": store, "checkpoint_id": "st", "serializer": serializer()}
    loop: TurnLoop[str] = TurnLoop(agent, enable_streaming=True, **settings)
    loop.push("ACME")
    first = finished(loop.start())
    loop2: TurnLoop[str] = TurnLoop(agent, **settings)  # default gen_resume: no answers
    second = finished(loop2.start())
    assert isinstance(second.reason, TurnInterruptedError)
    assert second.interrupt is not None and first.interrupt is not None
    assert second.interrupt.contexts[0].id != first.interrupt.contexts[0].id  # a new interrupt
    assert second.interrupted_items == ["ACME"]
    recorder = Recorder()
    loop3: TurnLoop[str] = TurnLoop(
        agent,
        gen_resume=lambda loop, turn: TurnResume(targets={turn.interrupt.contexts[0].id: True}),  # type: ignore[union-attr]
        on_events=recorder,
        **settings,
    )
    loop3.start()
    loop3.stop(idle_for=0)
    assert finished(loop3).reason is None
    streamed = [e.output.message_output.is_streaming for e in recorder.turns[0][1] if e.output and e.output.message_output]
    assert streamed == [False, True]  # the tool result, then the model's answer, streamed
    assert paid == ["120 to ACME"]


def test_an_interrupt_without_a_store_ends_the_loop_and_saves_nothing() -> None:
    # TestAttack_BusinessInterrupt_NoStore_ExitsWithoutPanic
    agent, _ = payer()
    loop: TurnLoop[str] = TurnLoop(agent)
    loop.push("ACME")
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, TurnInterruptedError)
    assert exit_state.interrupted_items == ["ACME"] and not exit_state.checkpoint_attempted


def test_unknown_resume_targets_end_the_loop_and_keep_the_checkpoint() -> None:
    # TestTurnLoop_ResumeWithParams
    agent, paid = payer()
    store = InMemoryCheckPointStore()
    settings: dict[str, Any] = {"checkpoint_store": store, "checkpoint_id": "t", "serializer": serializer()}
    loop: TurnLoop[str] = TurnLoop(agent, **settings)
    loop.push("ACME")
    finished(loop.start())
    loop2: TurnLoop[str] = TurnLoop(
        agent, gen_resume=lambda loop, turn: TurnResume(targets={"some-address": "data"}), **settings
    )
    exit_state = finished(loop2.start())
    assert isinstance(exit_state.reason, ValueError)
    assert "unknown interrupt id(s) 'some-address'" in str(exit_state.reason)
    assert exit_state.interrupted_items == ["ACME"] and exit_state.checkpoint_attempted
    loop3: TurnLoop[str] = TurnLoop(  # the checkpoint still resumes
        agent,
        gen_resume=lambda loop, turn: TurnResume(targets={turn.interrupt.contexts[0].id: True}),  # type: ignore[union-attr]
        **settings,
    )
    loop3.start()
    loop3.stop(idle_for=0)
    assert finished(loop3).reason is None and paid == ["120 to ACME"]


def test_a_gen_resume_error_ends_the_loop_and_keeps_the_checkpoint() -> None:
    # TestTurnLoop_GenResumeReturnsError, TestTurnLoop_GenResumeNil_Error
    agent, paid = payer()
    store = InMemoryCheckPointStore()
    settings: dict[str, Any] = {"checkpoint_store": store, "checkpoint_id": "g", "serializer": serializer()}
    loop: TurnLoop[str] = TurnLoop(agent, **settings)
    loop.push("ACME")
    finished(loop.start())
    before = store.get("g")
    loop2: TurnLoop[str] = TurnLoop(agent, gen_resume=lambda loop, turn: None, **settings)  # type: ignore[arg-type, return-value]
    loop2.push("new")
    exit_state = finished(loop2.start())
    assert isinstance(exit_state.reason, TypeError)
    assert "gen_resume must return a TurnResume (got NoneType" in str(exit_state.reason)
    assert exit_state.interrupted_items == ["ACME"] and exit_state.unhandled_items == ["new"]
    assert exit_state.checkpoint_attempted and store.get("g") != before  # re-saved, with "new"
    assert paid == []


def test_a_failed_turn_is_saved_and_the_next_loop_retries_it() -> None:
    calls: list[str] = []

    @tool
    def fetch(url: str) -> str:
        """Fetches a page."""
        calls.append(url)
        return f"page {url}"

    failures = [RuntimeError("model down")]

    def reply(messages: list[Message]) -> Message | str:
        last = messages[-1]
        if last.role is Role.USER:
            return calls_message(call("fetch", {"url": "a.example"}, id="f1"))
        if failures:
            raise failures.pop()
        return f"summary of {last.content}"

    agent = ChatModelAgent("reader", "d", ScriptedChatModel(reply), tools=[fetch])
    store = InMemoryCheckPointStore()
    settings: dict[str, Any] = {"checkpoint_store": store, "checkpoint_id": "f", "serializer": serializer()}
    loop: TurnLoop[str] = TurnLoop(agent, **settings)
    loop.push("read a.example")
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, RuntimeError) and exit_state.interrupted_items == ["read a.example"]
    saved: list[str] = []

    def resume(loop: TurnLoop[str], turn: SavedTurn[str]) -> TurnResume[str]:
        saved.append(turn.reason)
        return TurnResume()

    recorder = Recorder()
    loop2: TurnLoop[str] = TurnLoop(agent, gen_resume=resume, on_events=recorder, **settings)
    loop2.start()
    loop2.stop(idle_for=0)
    assert finished(loop2).reason is None
    assert saved == ["failed"]
    assert kinds(recorder.turns[0][1]) == [("assistant", "summary of page a.example")]
    assert calls == ["a.example"]  # the finished tool call is not repeated


class BrokenStore(InMemoryCheckPointStore):
    def __init__(self, *, get: bool = False, set: bool = False) -> None:
        super().__init__()
        self.fail_get, self.fail_set = get, set

    def get(self, checkpoint_id: str) -> bytes | None:
        if self.fail_get:
            raise OSError("disk on fire")
        return super().get(checkpoint_id)

    def set(self, checkpoint_id: str, data: bytes) -> None:
        if self.fail_set:
            raise OSError("disk full")
        super().set(checkpoint_id, data)


def test_a_checkpoint_that_cannot_be_read_ends_the_loop_with_a_checkpoint_error() -> None:
    # TestTurnLoop_CheckpointLoadError_ReturnsError, TestTurnLoop_CheckpointCorruptData_ReturnsError
    store = BrokenStore(get=True)
    loop: TurnLoop[str] = TurnLoop(Echo(), checkpoint_store=store, checkpoint_id="x", serializer=serializer())
    loop.push("a")
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, CheckpointError)
    assert "the store failed to read it: OSError: disk on fire" in str(exit_state.reason)
    assert exit_state.unhandled_items == ["a"]

    corrupt = InMemoryCheckPointStore()
    corrupt.set("x", b"not a checkpoint")
    loop = TurnLoop(Echo(), checkpoint_store=corrupt, checkpoint_id="x", serializer=serializer())
    loop.push("b")
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, CheckpointError)
    assert exit_state.unhandled_items == ["b"] and not exit_state.checkpoint_attempted
    assert corrupt.get("x") == b"not a checkpoint"  # left as it was, never overwritten


def test_a_checkpoint_another_key_signed_is_left_for_the_right_serializer() -> None:
    store = InMemoryCheckPointStore()
    first: TurnLoop[str] = TurnLoop(Echo(), checkpoint_store=store, checkpoint_id="k", serializer=serializer())
    first.push("kept")
    first.stop()
    finished(first.start())
    saved = store.get("k")
    wrong: TurnLoop[str] = TurnLoop(
        Echo(), checkpoint_store=store, checkpoint_id="k", serializer=PickleSerializer(b"another key, 32 bytes long......")
    )
    wrong.push("new")
    exit_state = finished(wrong.start())
    assert isinstance(exit_state.reason, CheckpointError)
    assert store.get("k") == saved
    echo = Echo()
    right: TurnLoop[str] = TurnLoop(echo, checkpoint_store=store, checkpoint_id="k", serializer=serializer())
    right.start()
    right.stop(idle_for=0)
    assert finished(right).reason is None and echo.inputs == [["kept"]]


def test_a_runners_checkpoint_is_not_a_loops() -> None:
    store = InMemoryCheckPointStore()
    agent, _ = payer()
    Runner(agent, checkpoint_store=store, serializer=serializer()).invoke("ACME", with_checkpoint_id("r"))
    loop: TurnLoop[str] = TurnLoop(agent, checkpoint_store=store, checkpoint_id="r", serializer=serializer())
    exit_state = finished(loop.start())
    assert isinstance(exit_state.reason, CheckpointError)
    assert "it holds a Checkpoint, not a TurnLoop's checkpoint" in str(exit_state.reason)


def test_no_checkpoint_under_the_id_is_a_fresh_start() -> None:
    # TestTurnLoop_CheckpointNotFound_FreshStart, TestTurnLoop_CheckpointEmptyData_TreatedAsNoCheckpoint
    echo = Echo()
    loop: TurnLoop[str] = TurnLoop(echo, checkpoint_store=InMemoryCheckPointStore(), checkpoint_id="new", serializer=serializer())
    loop.push("hi")
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None and echo.inputs == [["hi"]]


def test_a_failed_save_is_reported_apart_from_the_exit_reason() -> None:
    # TestTurnLoop_CheckpointSaveError_ReturnsError, TestTurnLoop_CheckpointErr_SeparateFromExitReason
    store = BrokenStore(set=True)
    loop: TurnLoop[str] = TurnLoop(Echo(), checkpoint_store=store, checkpoint_id="x", serializer=serializer())
    loop.push("a")
    loop.stop()
    exit_state = finished(loop.start())
    assert exit_state.reason is None and exit_state.checkpoint_attempted
    assert isinstance(exit_state.checkpoint_error, CheckpointError)
    assert "the store refused it: OSError: disk full" in str(exit_state.checkpoint_error)


class Order:
    def __init__(self, number: int) -> None:
        self.number = number


def test_items_of_a_type_the_serializer_refuses_are_named() -> None:
    store = InMemoryCheckPointStore()
    loop: TurnLoop[Order] = TurnLoop(Echo(), checkpoint_store=store, checkpoint_id="o", serializer=serializer())
    loop.push(Order(1))
    loop.stop()
    exit_state = finished(loop.start())
    assert isinstance(exit_state.checkpoint_error, CheckpointError)
    assert "Order" in str(exit_state.checkpoint_error) and "allowed_types" in str(exit_state.checkpoint_error)
    allowing: TurnLoop[Order] = TurnLoop(
        Echo(), checkpoint_store=store, checkpoint_id="o", serializer=PickleSerializer(KEY, allowed_types=[Order])
    )
    allowing.push(Order(2))
    allowing.stop()
    exit_state = finished(allowing.start())
    assert exit_state.checkpoint_error is None
    assert [order.number for order in exit_state.unhandled_items] == [2]


def test_a_second_loop_on_the_same_checkpoint_id_is_refused_while_the_first_runs() -> None:
    store = InMemoryCheckPointStore()
    agent = Gated()
    settings: dict[str, Any] = {"checkpoint_store": store, "checkpoint_id": "busy", "serializer": serializer()}
    first: TurnLoop[str] = TurnLoop(agent, **settings).start()
    first.push("work")
    assert agent.started.wait(GUARD)
    second: TurnLoop[str] = TurnLoop(Echo(), **settings)
    second.push("x")
    exit_state = finished(second.start())
    from agentkit import CheckpointBusyError

    assert isinstance(exit_state.reason, CheckpointBusyError)
    assert exit_state.unhandled_items == ["x"] and not exit_state.checkpoint_attempted
    agent.release.set()
    first.stop(idle_for=0)
    assert finished(first).reason is None


# --- the conversation's history ----------------------------------------------------------------


def test_turns_are_one_conversation_kept_in_the_store() -> None:
    echo = Echo()
    conversations = InMemoryConversationStore()
    loop: TurnLoop[str] = TurnLoop(
        echo, gen_input=consume_first, conversation_store=conversations, conversation_id="ann"
    )
    loop.push("hello")
    loop.push("again")
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert echo.inputs == [["hello"], ["hello", "hello", "again"]]
    assert [m.content for m in conversations.load("ann")] == ["hello", "hello", "again", "hello|hello|again"]


def test_trim_chooses_what_of_the_history_a_turn_sees() -> None:
    echo = Echo()
    loop: TurnLoop[str] = TurnLoop(echo, gen_input=consume_first, trim=keep_last_turns(1))
    for item in ("one", "two", "three"):
        loop.push(item)
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert echo.inputs == [["one"], ["one", "one", "two"], ["two", "one|one|two", "three"]]


def test_without_history_each_turn_sees_its_own_messages_only() -> None:
    # Eino's behaviour: GenInput builds the whole input
    echo = Echo()
    loop: TurnLoop[str] = TurnLoop(echo, gen_input=consume_first, keep_history=False)
    loop.push("one")
    loop.push("two")
    loop.start()
    loop.stop(idle_for=0)
    assert finished(loop).reason is None
    assert echo.inputs == [["one"], ["two"]]


def test_the_history_defaults_to_the_checkpoint_id_so_a_durable_store_carries_it_over(tmp_path: Any) -> None:
    from agentkit.conversation import FileConversationStore

    conversations = FileConversationStore(tmp_path)
    store = InMemoryCheckPointStore()
    for text in ("first", "second"):
        echo = Echo()
        loop: TurnLoop[str] = TurnLoop(
            echo, checkpoint_store=store, checkpoint_id="chat-7", serializer=serializer(),
            conversation_store=conversations,
        )
        loop.push(text)
        loop.start()
        loop.stop(idle_for=0)
        assert finished(loop).reason is None
    assert echo.inputs == [["first", "first", "second"]]
    assert loop.conversation_id == "chat-7"


def test_a_stop_after_a_preempt_of_the_same_turn_keeps_the_turn() -> None:
    # TestTurnLoop_TurnContext_BothPreemptedAndStopped (agentkit: the stop wins, the turn is kept)
    worker = Worker()
    recorder = Recorder()
    store = InMemoryCheckPointStore()
    loop: TurnLoop[str] = TurnLoop(
        worker.agent, on_events=recorder, checkpoint_store=store, checkpoint_id="both",
        serializer=serializer(),
    ).start()
    loop.push("first")
    assert worker.started.wait(GUARD)
    assert loop.push("second", preempt=True)
    loop.stop()
    worker.release.set()
    exit_state = finished(loop)
    assert isinstance(exit_state.reason, AgentCancelledError)
    assert exit_state.interrupted_items == ["first"] and exit_state.unhandled_items == ["second"]
    ((turn, _),) = recorder.turns
    assert turn.preempted and turn.stopped


def test_the_interrupted_items_are_those_of_the_turn_the_stop_cancelled() -> None:
    # TestTurnLoop_PreemptThenStop_InterruptedItems_ReflectsStoppedTurn
    sleeper = Sleeper()
    second_started = threading.Event()

    def on_events(turn: TurnContext[str], events: AsyncIterator[AgentEvent]) -> None:
        for event in events:
            if turn.consumed == ["b"] and summarize(event)[2] == "assistant":
                second_started.set()  # turn 2 asked for its tool

    loop: TurnLoop[str] = TurnLoop(sleeper.agent, on_events=on_events).start()
    loop.push("a")
    assert sleeper.started.wait(GUARD)
    loop.push("b", preempt=True, preempt_timeout=0.01)  # turn 1's tool never ends by itself
    assert second_started.wait(GUARD)
    loop.stop(graceful=False)
    exit_state = finished(loop)
    assert isinstance(exit_state.reason, AgentCancelledError)
    assert exit_state.interrupted_items == ["b"]


def test_a_turn_that_does_not_start_puts_back_every_item_it_was_planned_from() -> None:
    # TestTurnLoop_StopAfterGenInput_RecoverConsumed: dropped items come back too
    boom = RuntimeError("no agent today")

    def factory(consumed: list[str]) -> Echo:
        raise boom

    loop: TurnLoop[str] = TurnLoop(
        factory, gen_input=lambda loop, items: TurnInput([user_message(items[0])], consumed=items[:1])
    )
    loop.push("a")
    loop.push("b")  # neither consumed nor remaining: dropped only by a turn that runs
    exit_state = finished(loop.start())
    assert exit_state.reason is boom and exit_state.unhandled_items == ["a", "b"]
