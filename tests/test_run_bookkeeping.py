"""The per-step bookkeeping of a run: freed without the garbage collector, events built once.

These pin down behaviour the per-step cost work (issue 19) relies on: a finished run leaves
no reference cycles behind, the history shares a non-streamed output and copies a stream,
a tool round delivers its reports in the documented order, and callback handlers that watch
only agents keep a run off the middleware path.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentInput,
    AgentTool,
    CancelMode,
    ChatModelAgent,
    Role,
    Runner,
    RunStep,
    abort_on_cancel,
    assistant_message,
    event_from_message,
    tool,
    tool_message,
    with_callbacks,
)
from agentkit._agent import open_run
from agentkit._interrupt import InterruptSignal, ToolRoundState
from agentkit._runctx import EventLog, RunFrame, ToolCallFrame, current_frame, use_frame
from agentkit._scope import RunScope
from agentkit.agents._react import ReactState, RoundOutcome, ToolItem, return_directly_call
from agentkit.models import ScriptedChatModel
from agentkit.schema import FunctionCall, ToolCall
from agentkit.streams import stream_from_list
from agentkit.testing import call, calls_message


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _adder() -> ChatModelAgent:
    model = ScriptedChatModel(
        [
            calls_message(call("add", {"a": 1, "b": 2})),
            calls_message(call("add", {"a": 3, "b": 4})),
            "the sums are 3 and 7",
        ]
    )
    return ChatModelAgent("adder", "adds", model, tools=[add])


@pytest.fixture
def no_collector() -> Iterator[None]:
    """Switch the garbage collector off, keeping what it finds for inspection."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()


def _agentkit_garbage() -> list[str]:
    gc.collect()
    return sorted(
        {type(obj).__qualname__ for obj in gc.garbage if type(obj).__module__.startswith("agentkit")}
    )


def test_a_finished_run_is_freed_without_the_garbage_collector(no_collector: None) -> None:
    result = Runner(_adder()).invoke("add things")
    assert result.text == "the sums are 3 and 7"
    del result
    assert _agentkit_garbage() == []


def test_a_run_iterated_live_is_freed_without_the_garbage_collector(no_collector: None) -> None:
    events = list(Runner(_adder()).query("add things"))
    assert [event.agent_name for event in events] == ["adder"] * 5
    del events
    assert _agentkit_garbage() == []


def test_a_nested_agent_tool_run_is_freed_without_the_garbage_collector(
    no_collector: None,
) -> None:
    outer_model = ScriptedChatModel([calls_message(call("adder", {"request": "go"})), "done"])
    outer = ChatModelAgent("boss", "delegates", outer_model, tools=[AgentTool(_adder())])
    assert Runner(outer).invoke("go").text == "done"
    assert _agentkit_garbage() == []


def test_history_keeps_each_output_as_emitted_without_copying_it() -> None:
    log = EventLog()
    steps = (RunStep("me"),)
    downstream: list[AgentEvent] = []

    class Collect:
        def send(self, item: AgentEvent) -> None:
            downstream.append(item)

    run = open_run(RunFrame(scope=RunScope(), log=log, run_path=steps), Collect(), AgentInput())
    whole = event_from_message(assistant_message("hi"), None, Role.ASSISTANT)
    streamed = event_from_message(
        None, stream_from_list([assistant_message("a"), assistant_message("b")]), Role.ASSISTANT
    )
    run.emit(whole)
    run.emit(streamed)

    named_whole, named_stream = downstream
    assert whole.agent_name == "" and whole.run_path == ()  # the emitted events are not changed
    assert named_whole.agent_name == "me" and named_whole.run_path == (RunStep("me"),)
    assert named_stream.run_path == (RunStep("me"),)
    assert named_stream.run_path is named_whole.run_path  # a tuple: one, shared
    first, second = log.own()
    assert first.run_path == steps and second.run_path == steps
    # one output, shared: the history, the named event and the emitted one
    assert first.variant is whole.output.message_output  # type: ignore[union-attr]
    assert second.variant is streamed.output.message_output  # type: ignore[union-attr]
    assert named_stream.output is streamed.output
    # the user reads the event's stream; the history still reads the whole message
    assert [chunk.content for chunk in named_stream.output.message_output.message_stream] == [  # type: ignore[union-attr]
        "a",
        "b",
    ]
    assert second.message().content == "ab"  # type: ignore[union-attr]
    assert streamed.get_message().content == "ab"  # type: ignore[union-attr]


def _round(*names: str) -> ToolRoundState:
    calls = [ToolCall(f"id{i}", FunctionCall(name, "{}")) for i, name in enumerate(names)]
    return ToolRoundState(messages=[], remaining=3, calls=calls)


def _tool_event(text: str) -> AgentEvent:
    return event_from_message(tool_message(text, "x"), None, Role.TOOL)


def test_round_holds_the_return_directly_event_until_the_round_is_over() -> None:
    round_state = _round("lookup", "finish", "lookup")
    direct = return_directly_call(round_state.calls, frozenset({"finish"}))
    assert direct == "id1"
    emitted: list[str] = []
    outcome = RoundOutcome(
        lambda event: emitted.append(event.get_message().content),  # type: ignore[union-attr]
        round_state,
        direct,
    )
    for index in (1, 0, 2):
        text = f"result {index}"
        outcome.handle(ToolItem(index, _tool_event(text), tool_message(text, f"id{index}")))
    assert emitted == ["result 0", "result 2"]
    state = ReactState(messages=[], remaining=3)
    final = outcome.finish(state, None)
    assert emitted == ["result 0", "result 2", "result 1"]
    assert [message.content for message in state.messages] == [
        "result 0",
        "result 1",
        "result 2",
    ]
    assert final is not None and final.content == "result 1"


def test_round_a_failed_return_directly_call_ends_nothing_and_is_delivered_at_once() -> None:
    round_state = _round("finish")
    emitted: list[str] = []
    outcome = RoundOutcome(
        lambda event: emitted.append(event.get_message().content),  # type: ignore[union-attr]
        round_state,
        "id0",
    )
    outcome.handle(
        ToolItem(0, _tool_event("no such agent"), tool_message("no such agent", "id0"), failed=True)
    )
    assert emitted == ["no such agent"]
    assert outcome.finish(ReactState(messages=[], remaining=3), None) is None


def test_round_raises_a_real_error_before_a_cancel_and_the_first_calls_interrupt() -> None:
    outcome = RoundOutcome(lambda event: None, _round("a", "b", "c"), None)
    cancel = AgentCancelledError(CancelMode.IMMEDIATE, False)
    boom = ValueError("boom")
    outcome.handle(ToolItem(0, error=cancel))
    outcome.handle(ToolItem(1, error=boom))
    with pytest.raises(ValueError, match="boom"):
        outcome.raise_stop()

    signals = RoundOutcome(lambda event: None, _round("a", "b", "c"), None)
    later = InterruptSignal(("agent:x", "tool:c:id2"))
    earlier = InterruptSignal(("agent:x", "tool:b:id1"))
    signals.handle(ToolItem(2, error=later))
    signals.handle(ToolItem(1, error=earlier))
    with pytest.raises(InterruptSignal) as raised:
        signals.raise_stop()
    assert raised.value is earlier


class _AgentsOnly:
    def __init__(self) -> None:
        self.started: list[str] = []

    def on_agent_start(self, info: Any, input: Any) -> None:
        self.started.append(info.name)


class _ModelWatcher:
    def __init__(self) -> None:
        self.calls = 0

    def on_model_start(self, info: Any, messages: Any) -> None:
        self.calls += 1


def test_handlers_that_watch_only_agents_keep_the_plain_path_and_others_still_fire() -> None:
    agents_only = _AgentsOnly()
    watcher = _ModelWatcher()
    assert Runner(_adder()).invoke("go", with_callbacks(agents_only)).text
    assert agents_only.started == ["adder"]
    assert Runner(_adder()).invoke("go", with_callbacks(agents_only, watcher)).text
    assert watcher.calls == 3
    assert agents_only.started == ["adder", "adder"]


def test_use_frame_restores_the_previous_frame_after_an_error() -> None:
    outer = RunFrame(scope=RunScope(), log=EventLog())
    inner = outer.at_agent(RunStep("a"))
    with use_frame(outer):
        with pytest.raises(RuntimeError), use_frame(inner) as entered:
            assert entered is inner and current_frame() is inner
            raise RuntimeError("inside")
        assert current_frame() is outer
    assert current_frame() is None
    assert inner.run_path == (RunStep("a"),) and inner.address == ("agent:a",)
    assert outer.at_agent(RunStep("a")).log is outer.log


def test_abort_on_cancel_aborts_a_blocked_call_from_the_cancelling_thread() -> None:
    scope = RunScope()
    frame = RunFrame(scope=scope, log=EventLog())
    released = threading.Event()
    entered = threading.Event()
    aborted_in: list[str] = []

    def abort() -> None:
        aborted_in.append(threading.current_thread().name)
        released.set()

    def canceller() -> None:
        assert entered.wait(10)
        scope.request_cancel(CancelMode.IMMEDIATE)

    thread = threading.Thread(target=canceller, name="canceller")
    thread.start()
    with use_frame(frame):
        with abort_on_cancel(abort):
            entered.set()
            assert released.wait(10)
        # once cancelled, a new block is aborted before it runs
        with pytest.raises(AgentCancelledError), abort_on_cancel(abort):
            pytest.fail("the block must not run once the run is cancelled")
    thread.join(10)
    assert aborted_in == ["canceller", "MainThread"]
    scope.finish()


def test_abort_on_cancel_outside_a_run_does_nothing() -> None:
    with abort_on_cancel(lambda: pytest.fail("no run, nothing to abort")):
        pass


def test_moving_a_frame_keeps_every_field_but_the_ones_it_moves() -> None:
    # at_agent/at_tool build the frame field by field: a field added to RunFrame later must
    # be carried there too, or it is silently dropped on every agent turn and tool call.
    values: dict[str, Any] = {field.name: object() for field in attrs.fields(RunFrame)}
    values["run_path"] = (RunStep("outer"),)
    values["address"] = ("agent:outer",)
    frame = RunFrame(**values)
    tool_call = ToolCallFrame(name="lookup", call_id="c1", options={})
    agent_frame = frame.at_agent(RunStep("inner"))
    tool_frame = frame.at_tool(tool_call)
    for field in attrs.fields(RunFrame):
        if field.name not in ("run_path", "address"):
            assert getattr(agent_frame, field.name) is values[field.name], field.name
        if field.name not in ("address", "tool"):
            assert getattr(tool_frame, field.name) is values[field.name], field.name
    assert agent_frame.run_path == (RunStep("outer"), RunStep("inner"))
    assert agent_frame.address == ("agent:outer", "agent:inner")
    assert tool_frame.address == ("agent:outer", "tool:lookup:c1")
    assert tool_frame.tool is tool_call
