"""Events are facts: nothing writes to an event once made, and reading one takes nothing away.

``MessageVariant.get_message()`` is pure: any number of calls, from any thread, in any order,
before or after someone read ``message_stream``, give the same message. Each consumer that reads
the chunks has a reader of its own; no reader writes a copy back onto the event.
"""

from __future__ import annotations

import io
import threading
from typing import Any

import attrs
import pytest

from agentkit import (
    AgentAction,
    AgentEvent,
    AgentOutput,
    BreakLoopAction,
    ChatModelAgent,
    InterruptInfo,
    LoopAgent,
    MessageVariant,
    Role,
    Runner,
    TransferToAgentAction,
    assistant_message,
    event_from_message,
    new_break_loop_action,
    pipe,
    print_events,
    stream_from_list,
)
from agentkit.models import ScriptedChatModel
from agentkit.schema import Message
from agentkit.streams import StreamReader, StreamWriter
from agentkit.testing import no_thread_leak

GUARD = 30.0  # a failure guard for waits, never a pace


def streamed(*parts: str) -> AgentEvent:
    chunks = [assistant_message(part) for part in parts]
    return event_from_message(None, stream_from_list(chunks), Role.ASSISTANT)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (AgentEvent(), "agent_name"),
        (AgentEvent(), "action"),
        (AgentOutput(), "customized_output"),
        (MessageVariant(False, assistant_message("x"), None, Role.ASSISTANT), "message"),
        (AgentAction(), "exit"),
        (TransferToAgentAction("b"), "dest_agent_name"),
        (BreakLoopAction("a"), "done"),
        (InterruptInfo(), "data"),
    ],
)
def test_event_types_are_frozen(value: Any, field: str) -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(value, field, None)


def test_get_message_from_three_threads_at_once_gives_one_message() -> None:
    pair: tuple[StreamReader[Message], StreamWriter[Message]] = pipe()
    reader, writer = pair
    event = event_from_message(None, reader, Role.ASSISTANT)
    start = threading.Barrier(4)
    got: list[Message] = []
    lock = threading.Lock()

    def read() -> None:
        start.wait(GUARD)
        message = event.get_message()
        with lock:
            got.append(message)  # type: ignore[arg-type]

    threads = [threading.Thread(target=read) for _ in range(3)]
    for thread in threads:
        thread.start()
    start.wait(GUARD)  # all three are asking while the stream is still being written
    for part in ("one ", "two ", "three"):
        writer.send(assistant_message(part))
    writer.close()
    for thread in threads:
        thread.join(GUARD)
    assert [m.content for m in got] == ["one two three"] * 3
    assert got[0] is got[1] is got[2]  # concatenated once
    # and the stream handed out with the event is still whole
    variant = event.output.message_output  # type: ignore[union-attr]
    assert [c.content for c in variant.message_stream] == ["one ", "two ", "three"]  # type: ignore[union-attr]


def test_a_stream_read_before_get_message_leaves_the_message_whole() -> None:
    # Issue 26: a stream taken from an event before get_message() used to raise
    # "RuntimeError: this StreamReader was copied" when it was read afterwards.
    event = streamed("Hel", "lo")
    stream = event.output.message_output.message_stream  # type: ignore[union-attr]
    first = event.get_message()
    assert [c.content for c in stream] == ["Hel", "lo"]  # type: ignore[union-attr]
    second = event.get_message()
    assert first is second and first.content == "Hello"  # type: ignore[union-attr]
    # the variant is the very same object: nothing was written back onto it
    assert event.output.message_output.message_stream is stream  # type: ignore[union-attr]


def test_get_message_after_the_stream_was_read_and_again_and_again() -> None:
    event = streamed("a", "b", "c")
    variant = event.output.message_output  # type: ignore[union-attr]
    assert "".join(c.content for c in variant.message_stream) == "abc"  # type: ignore[union-attr]
    assert {event.get_message().content for _ in range(5)} == {"abc"}  # type: ignore[union-attr]


def test_each_consumer_reads_the_chunks_through_a_reader_of_its_own() -> None:
    event = streamed("x", "y")
    variant = event.output.message_output  # type: ignore[union-attr]
    own = variant.open_stream()  # type: ignore[union-attr]
    other = variant.open_stream()  # type: ignore[union-attr]
    assert [c.content for c in own] == ["x", "y"]
    assert [c.content for c in variant.message_stream] == ["x", "y"]  # type: ignore[union-attr]
    assert [c.content for c in other] == ["x", "y"]


def test_a_failed_stream_raises_the_same_error_every_time() -> None:
    pair: tuple[StreamReader[Message], StreamWriter[Message]] = pipe()
    reader, writer = pair
    event = event_from_message(None, reader, Role.ASSISTANT)
    writer.send(assistant_message("half"))
    writer.send(None, ValueError("the server hung up"))
    with pytest.raises(ValueError, match="hung up") as first:
        event.get_message()
    with pytest.raises(ValueError, match="hung up") as second:
        event.get_message()
    assert first.value is second.value


def test_printing_a_run_and_reading_its_result_share_one_stream() -> None:
    agent = ChatModelAgent("a", "d", ScriptedChatModel(["streamed answer"]))
    out = io.StringIO()
    with no_thread_leak():
        events = Runner(agent, enable_streaming=True).query("hi")
        seen = print_events(events, file=out)
    assert "streamed answer" in out.getvalue()
    # the printer read its own reader: the event's stream is still the user's, and whole
    stream = seen[-1].output.message_output.message_stream  # type: ignore[union-attr]
    assert "".join(c.content for c in stream) == "streamed answer"  # type: ignore[union-attr]
    assert events.result().text == "streamed answer"


def test_on_event_and_result_see_the_events_the_run_made() -> None:
    agent = ChatModelAgent("a", "d", ScriptedChatModel(["live"]))
    called: list[AgentEvent] = []
    result = Runner(agent, enable_streaming=True).invoke("hi", on_event=called.append)
    assert called == result.events and called[0] is result.events[0]
    stream = called[0].output.message_output.message_stream  # type: ignore[union-attr]
    assert "".join(c.content for c in stream) == "live"  # type: ignore[union-attr]
    assert result.text == "live"


def test_a_loop_marks_a_copy_of_a_break_and_leaves_the_event_as_sent() -> None:
    sent: list[AgentEvent] = []

    class Breaker:
        name = "B"
        description = "breaks the loop"

        def run(self, input: Any, *options: Any) -> Any:
            from agentkit import run_in_worker

            def work(generator: Any) -> None:
                event = attrs.evolve(
                    event_from_message(assistant_message("stop"), None, Role.ASSISTANT),
                    action=new_break_loop_action("B"),
                )
                sent.append(event)
                generator.send(event)

            return run_in_worker(work)

    events = list(Runner(LoopAgent("L", "d", [Breaker()], max_iterations=3)).query("go"))
    [out] = events
    brk = out.action.break_loop  # type: ignore[union-attr]
    assert brk is not None and (brk.done, brk.current_iterations) == (True, 0)
    original = sent[0].action.break_loop  # type: ignore[union-attr]
    assert original is not None and original.done is False  # the sender's event is unchanged


def test_naming_an_emitted_event_makes_a_named_copy() -> None:
    sent: list[AgentEvent] = []

    class Sayer:
        name = "S"
        description = "says"

        def run(self, input: Any, *options: Any) -> Any:
            from agentkit import run_in_worker

            def work(generator: Any) -> None:
                event = event_from_message(assistant_message("hi"), None, Role.ASSISTANT)
                sent.append(event)
                generator.send(event)

            return run_in_worker(work)

    [out] = list(Runner(Sayer()).query("go"))
    assert (out.agent_name, [str(s) for s in out.run_path]) == ("S", ["S"])
    assert (sent[0].agent_name, sent[0].run_path) == ("", ())
    assert out.output is sent[0].output
