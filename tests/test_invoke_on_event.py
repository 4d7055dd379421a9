"""``Runner.invoke(..., on_event=)``: live events in the calling thread, no worker thread."""

from __future__ import annotations

import threading

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    ChatModelAgent,
    ParallelAgent,
    Runner,
    interrupt,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import OpenAIChatModel, ScriptedChatModel
from agentkit.testing import FakeOpenAIServer, Reply, call, calls_message


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _adder(model: ScriptedChatModel) -> ChatModelAgent:
    return ChatModelAgent("calc", "adds", model, tools=[add])


def _role(event: AgentEvent) -> str:
    message = event.get_message()
    assert message is not None
    return message.role.value


def test_on_event_sees_every_event_in_order_in_the_calling_thread() -> None:
    model = ScriptedChatModel(
        [calls_message(call("add", {"a": 2, "b": 3}, id="c1")), "2 + 3 = 5"]
    )
    seen: list[tuple[AgentEvent, threading.Thread]] = []
    result = Runner(_adder(model)).invoke(
        "add", on_event=lambda event: seen.append((event, threading.current_thread()))
    )
    assert result.text == "2 + 3 = 5"
    assert [event for event, _ in seen] == result.events
    assert [_role(event) for event, _ in seen] == [
        "assistant",
        "tool",
        "assistant",
    ]
    assert {thread for _, thread in seen} == {threading.current_thread()}


def test_on_event_reads_a_streamed_answer_as_it_arrives() -> None:
    gate = threading.Event()
    late = threading.Timer(30.0, gate.set)  # a failure guard only: the test never waits for it
    late.start()
    chunks_before_gate: list[str] = []
    text: list[str] = []

    def show(event: AgentEvent) -> None:
        variant = event.output.message_output if event.output else None
        assert variant is not None and variant.message_stream is not None
        for chunk in variant.message_stream:
            text.append(chunk.content)
            if not gate.is_set():
                # The server holds the rest of the stream until the gate opens: this chunk
                # reached the callback live, not after the whole answer was read.
                chunks_before_gate.append(chunk.content)
                gate.set()

    try:
        with FakeOpenAIServer() as server:
            server.queue(Reply("once upon a time", chunks=4, gate=gate))
            model = OpenAIChatModel("m", api_key="sk-test", base_url=server.base_url)
            try:
                runner = Runner(ChatModelAgent("teller", "tells", model), enable_streaming=True)
                result = runner.invoke("a story", on_event=show)
            finally:
                model.close()
    finally:
        late.cancel()
        late.join()
    assert chunks_before_gate and chunks_before_gate[0] != "once upon a time"
    assert "".join(text) == "once upon a time" == result.text


def test_an_exception_in_on_event_cancels_the_run_and_invoke_raises_it() -> None:
    model = ScriptedChatModel(
        [
            calls_message(call("add", {"a": 1, "b": 1}, id="c1")),
            calls_message(call("add", {"a": 2, "b": 2}, id="c2")),
            "done",
        ]
    )
    store = InMemoryCheckPointStore()
    runner = Runner(_adder(model), checkpoint_store=store)
    seen: list[AgentEvent] = []

    class Stop(Exception):
        pass

    def stop_at_first_tool_result(event: AgentEvent) -> None:
        seen.append(event)
        if _role(event) == "tool":
            raise Stop("enough")

    with pytest.raises(Stop, match="enough"):
        runner.invoke("go", with_checkpoint_id("cb"), on_event=stop_at_first_tool_result)
    # The run stopped at once: no second model call, no event after the failing one.
    assert len(model.calls) == 1
    assert len(seen) == 2
    # Cancelled like a closed iterator: saved, and a resume finishes the job.
    resumed = runner.resume("cb").result()
    assert resumed.text == "done"


def test_raise_errors_false_returns_a_failed_run_but_still_raises_what_on_event_raised() -> None:
    class Broken(Exception):
        pass

    def failing(messages: object) -> str:
        raise Broken("the model is down")

    runner = Runner(_adder(ScriptedChatModel(failing)))
    with pytest.raises(Broken, match="the model is down"):
        runner.invoke("go")
    seen: list[AgentEvent] = []
    result = runner.invoke("go", on_event=seen.append, raise_errors=False)
    assert isinstance(result.error, Broken)
    assert seen and seen[-1].err is result.error  # the error event reached on_event first

    def refuse(event: AgentEvent) -> None:
        raise RuntimeError("the consumer broke")

    ok = Runner(_adder(ScriptedChatModel(["fine"])))
    with pytest.raises(RuntimeError, match="the consumer broke"):
        ok.invoke("go", on_event=refuse, raise_errors=False)


def test_parallel_branches_call_on_event_one_at_a_time() -> None:
    both_running = threading.Barrier(2, timeout=30)

    @tool
    def meet() -> str:
        """Waits until the other branch's tool runs too."""
        both_running.wait()
        return "met"

    def branch(name: str) -> ChatModelAgent:
        model = ScriptedChatModel([calls_message(call("meet", id=f"{name}1")), f"{name} done"])
        return ChatModelAgent(name, "meets", model, tools=[meet])

    inside = 0
    overlaps = 0
    guard = threading.Lock()
    seen: list[AgentEvent] = []

    def record(event: AgentEvent) -> None:
        nonlocal inside, overlaps
        with guard:
            inside += 1
            overlaps += inside > 1
        seen.append(event)
        with guard:
            inside -= 1

    agent = ParallelAgent("both", "runs two branches", [branch("left"), branch("right")])
    result = Runner(agent).invoke("go", on_event=record)
    assert overlaps == 0
    assert seen == result.events
    assert {event.agent_name for event in seen} == {"left", "right"}
    assert len(seen) == 6


def test_on_event_sees_the_interrupt_and_invoke_returns_it() -> None:
    @tool
    def approve(amount: int) -> str:
        """Asks a human to approve a payment."""
        return "paid" if interrupt(f"pay {amount}?") else "refused"

    model = ScriptedChatModel([calls_message(call("approve", {"amount": 5}, id="p1")), "ok"])
    runner = Runner(
        ChatModelAgent("payer", "pays", model, tools=[approve]),
        checkpoint_store=InMemoryCheckPointStore(),
    )
    seen: list[AgentEvent] = []
    result = runner.invoke("pay", with_checkpoint_id("pay"), on_event=seen.append)
    assert result.interrupt is not None
    assert seen == result.events
    assert seen[-1].action is not None and seen[-1].action.interrupted is not None


def test_a_cancel_error_from_on_event_is_the_one_raised() -> None:
    # Raising AgentCancelledError itself (e.g. a user's stop button) is not confused with the
    # run's own end: invoke raises the very exception the callback raised.
    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 2}, id="c1")), "3"])
    from agentkit import CancelMode

    raised = AgentCancelledError(CancelMode.IMMEDIATE, False)

    def stop(event: AgentEvent) -> None:
        raise raised

    with pytest.raises(AgentCancelledError) as caught:
        Runner(_adder(model)).invoke("go", on_event=stop)
    assert caught.value is raised


def test_result_after_a_loop_that_read_the_streams_itself() -> None:
    # Reading event.output.message_output.message_stream in the loop (the natural way to
    # print a streamed answer) used to leave result() an empty stream: "no messages".
    model = ScriptedChatModel(
        [calls_message(call("add", {"a": 20, "b": 22}, id="c1")), "the sum is 42"]
    )
    runner = Runner(_adder(model), enable_streaming=True)
    printed: list[str] = []
    with runner.query("add") as events:
        for event in events:
            variant = event.output.message_output if event.output else None
            if variant is not None and variant.message_stream is not None:
                printed.extend(chunk.content for chunk in variant.message_stream)
        result = events.result()
    assert result.error is None
    assert result.text == "the sum is 42"
    assert "".join(printed).endswith("the sum is 42")
    last = result.events[-1].get_message()
    assert last is not None and last.content == "the sum is 42"
