"""The streamed step's cheaper paths deliver exactly what the general paths delivered.

* :class:`~agentkit.agents._react.UniqueCallIds` passes a call's later fragments over without
  looking them up, and still gives every chunk the ids the spec (its docstring) gives them,
  read chunk by chunk or a batch at a time, without changing the source's lists;
* a tool-call fragment of the common shape is built like the constructor builds it;
* a streamed event's whole message is the concatenation, however (and in which thread) the
  stream was read, and copies read in two threads each see every chunk in order while the
  producer is still streaming.
"""

from __future__ import annotations

import copy
import json
import threading
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit import AgentEvent, ChatModelAgent, MessageVariant, Runner
from agentkit._stream_base import CopyReader
from agentkit.agents._react import UniqueCallIds
from agentkit.errors import FrozenError
from agentkit.models import OpenAIChatModel
from agentkit.schema import FunctionCall, Message, Role, ToolCall
from agentkit.streams import StreamReader, StreamWriter, _BatchReader, pipe, stream_from_batches
from tests.misbehaving_server import RawServer, replay

SETTINGS = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])

# --- unique call ids ---------------------------------------------------------------------

def reference_ids(chunks: list[Message]) -> list[Message]:
    """The ids :class:`UniqueCallIds` gives, per its docstring, looking at every call."""
    by_index: dict[int, str] = {}
    seen: set[str] = set()
    out: list[Message] = []
    for chunk in chunks:
        calls: list[ToolCall] = []
        for call in chunk.tool_calls:
            index, call_id = call.index, call.id
            if index is not None and index in by_index:
                wanted = by_index[index] if call_id else call_id
            elif index is not None and not call_id:
                wanted = call_id  # the id comes in a later fragment
            else:
                wanted = call_id
                if wanted in seen:
                    number = 2
                    while f"{call_id}#{number}" in seen:
                        number += 1
                    wanted = f"{call_id}#{number}"
                    seen.add(wanted)
                seen.add(wanted)
                if index is not None:
                    by_index[index] = wanted
            calls.append(attrs.evolve(call, id=wanted))
        out.append(attrs.evolve(chunk, tool_calls=calls) if chunk.tool_calls else chunk)
    return out

fragments = st.builds(
    lambda call_id, index, args: ToolCall(call_id, FunctionCall("f", args), index=index),
    st.sampled_from(["", "a", "b"]),
    st.sampled_from([None, 0, 1, 2]),
    st.sampled_from(["", "{", "}"]),
)
chunks = st.builds(
    lambda calls, text: Message(Role.ASSISTANT, text, calls),
    st.lists(fragments, max_size=3),
    st.sampled_from(["", "x"]),
)
batch_lists = st.lists(st.lists(chunks, min_size=1, max_size=4), max_size=5)

@SETTINGS
@given(batches=batch_lists)
def test_unique_call_ids_give_the_ids_of_the_spec_batch_by_batch(
    batches: list[list[Message]],
) -> None:
    source = copy.deepcopy(batches)
    stream = UniqueCallIds(stream_from_batches(source))
    (reader,) = stream.copy(1)  # a copy's buffer reads the source a batch at a time
    got = list(reader)
    expected = reference_ids([chunk for batch in batches for chunk in batch])
    assert [attrs.asdict(chunk) for chunk in got] == [attrs.asdict(c) for c in expected]
    assert source == batches  # the source's lists and chunks are left as they were

@SETTINGS
@given(batches=batch_lists)
def test_unique_call_ids_give_the_ids_of_the_spec_chunk_by_chunk(
    batches: list[list[Message]],
) -> None:
    got = list(UniqueCallIds(stream_from_batches(copy.deepcopy(batches))))
    expected = reference_ids([chunk for batch in batches for chunk in batch])
    assert [attrs.asdict(chunk) for chunk in got] == [attrs.asdict(c) for c in expected]

def test_later_fragments_keep_no_id_and_a_repeated_id_is_derived() -> None:
    def call(call_id: str, index: int | None) -> Message:
        return Message(Role.ASSISTANT, "", [ToolCall(call_id, FunctionCall("f", "{}"), index=index)])

    batch = [call("a", 0), call("", 0), call("a", 1), call("", 1), call("a", 1)]
    (reader,) = UniqueCallIds(stream_from_batches([batch])).copy(1)
    assert [chunk.tool_calls[0].id for chunk in reader] == ["a", "", "a#2", "", "a#2"]
    assert [chunk.tool_calls[0].id for chunk in batch] == ["a", "", "a", "", "a"]

# --- a tool-call fragment of the common shape ----------------------------------------------

def test_a_fragment_is_built_like_the_constructors_build_it() -> None:
    from agentkit.models.openai._chunks import _fragment, _function, parse_chunk

    assert (_fragment.__name__, _function.__name__) == ("fragment", "function_call")  # fast
    built = _fragment("call_1", _function("add", '{"a": 1}'), "function", 0)
    expected = ToolCall("call_1", FunctionCall("add", '{"a": 1}'), "function", 0, {})
    assert type(built) is ToolCall and type(built.function) is FunctionCall
    assert built == expected and attrs.asdict(built) == attrs.asdict(expected)
    with pytest.raises(FrozenError):  # a value, as the constructors' are
        built.function.arguments = "{}"  # type: ignore[misc]
    with pytest.raises(FrozenError):
        built.extra["k"] = 1
    chunk = parse_chunk(
        b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function",'
        b'"function":{"name":"add","arguments":null}}]}}]}',
        "http://model.test/v1",
    )
    assert chunk is not None
    assert chunk.tool_calls == (ToolCall("c", FunctionCall("add", ""), "function", 0, {}),)

# --- a streamed event's message, and copies in two threads ---------------------------------

def sse(*deltas: dict[str, Any]) -> bytes:
    out = b""
    for delta, finish in zip(deltas, [None] * (len(deltas) - 1) + ["stop"], strict=True):
        body = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        out += b"data: " + json.dumps(body).encode() + b"\n\n"
    return out + b"data: [DONE]\n\n"

def test_a_streamed_events_message_is_the_concatenation_made_once_without_another_copy() -> None:
    body = sse({"role": "assistant", "content": ""}, {"content": "4"}, {"content": "2"}, {})
    events: list[AgentEvent] = []
    with (
        RawServer(replay(body)) as server,
        OpenAIChatModel("m", base_url=server.base_url, api_key="k") as model,
    ):
        runner = Runner(ChatModelAgent("a", "an agent", model), enable_streaming=True)
        result = runner.invoke("hi", on_event=events.append)
    assert result.text == "42"
    (event,) = events
    assert event.output is not None and event.output.message_output is not None
    variant = event.output.message_output
    stream = variant.message_stream
    assert isinstance(stream, CopyReader)
    buffer = stream._buffer
    message = variant.get_message()  # result() took it already, in the run
    # The run concatenated the stream for its history: the event's message is that one,
    # taken as it is. The buffer has the run's two cursors (the event's and the history's),
    # and none that the event made of its own to read the stream to its end again.
    assert buffer.open_readers == 2
    assert message.content == "42" and message.role is Role.ASSISTANT
    assert message is variant.get_message()
    assert [chunk.content for chunk in stream] == ["", "4", "2", ""]  # still all there
    assert [chunk.content for chunk in variant.open_stream()] == ["", "4", "2", ""]

def test_a_streamed_events_message_that_failed_raises_its_error() -> None:
    source: StreamReader[Message]
    writer: StreamWriter[Message]
    source, writer = pipe()
    history, user = source.copy(2)
    variant = MessageVariant(True, None, user, Role.ASSISTANT)
    writer.send(Message(Role.ASSISTANT, "4"))
    writer.send(None, RuntimeError("server went away"))
    with pytest.raises(RuntimeError, match="went away"):
        list(history)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="went away"):
            variant.get_message()

def test_copies_in_two_threads_each_see_every_chunk_as_it_is_sent() -> None:
    source: StreamReader[int]
    writer: StreamWriter[int]
    source, writer = pipe()
    readers = source.copy(2)
    got: list[list[int]] = [[], []]
    seen = [threading.Semaphore(0), threading.Semaphore(0)]

    def read(index: int) -> None:
        for chunk in readers[index]:
            got[index].append(chunk)
            seen[index].release()

    threads = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for number in range(50):
        writer.send(number)
        # Each reader has this chunk before the next one is even sent: nothing waits for
        # the end of the stream (60 s only guards against a hang).
        for index in range(2):
            assert seen[index].acquire(timeout=60)
            assert got[index] == list(range(number + 1))
    writer.close()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()
    assert got == [list(range(50))] * 2

def test_a_batch_reader_has_every_field_of_an_iterator_reader() -> None:
    reader = stream_from_batches([[1, 2], [3]])
    assert isinstance(reader, _BatchReader)
    for cls in type(reader).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if name != "__weakref__":
                getattr(reader, name)  # set by _BatchReader's own __init__
    assert list(reader) == [1, 2, 3]
