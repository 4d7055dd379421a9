"""The fast paths of streamed replies read what the general paths read.

* a chunk of the common shape (``_common_chunk``) becomes the same message as through the
  general decoder (``parse_chunk_data``), for any JSON value a server might send;
* chunks that one network read completes reach the reader and its copies in one list
  (``stream_from_batches``), and nothing about order, errors or closing changes;
* the tee buffer hands chunks to cursors in other threads and wakes them when they wait.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit import AgentCancelledError, concat_message_stream
from agentkit._stream_base import CopyReader, TeeBuffer
from agentkit._values import ReadOnlyDict
from agentkit.errors import FrozenError, ModelError
from agentkit.models import OpenAIChatModel
from agentkit.models.openai._chunks import _chunk_message, parse_chunk, parse_chunk_data
from agentkit.schema import FunctionCall, Message, ResponseMeta, Role, ToolCall, user_message
from agentkit.streams import StreamEOF, StreamReader, StreamWriter, pipe, stream_from_batches
from tests.misbehaving_server import RawServer, replay

SETTINGS = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
URL = "http://model.test/v1/chat/completions"

# --- one chunk: the common shape and the general decoder agree ---------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.text(max_size=4))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly ``strategy``; now and then any JSON value in its place (an odd server)."""
    return st.integers(0, 9).flatmap(lambda draw: json_values if draw == 0 else strategy)


functions = st.fixed_dictionaries(
    {},
    optional={
        "name": maybe(st.sampled_from(["add", "", None])),
        "arguments": maybe(st.sampled_from(['{"a": 1', "}", "", None])),
    },
)
call_fragments = st.fixed_dictionaries(
    {},
    optional={
        "index": maybe(st.integers(0, 2)),
        "id": maybe(st.sampled_from(["call_1", "", None])),
        "type": maybe(st.sampled_from(["function", None])),
        "function": maybe(functions),
        "extra_content": json_values,
    },
)
common_fields = {
    "role": maybe(st.just("assistant")),
    "content": maybe(st.one_of(st.none(), st.text(max_size=5))),
    "tool_calls": maybe(st.lists(maybe(call_fragments), max_size=2)),
}
deltas = st.fixed_dictionaries({}, optional=common_fields) | st.fixed_dictionaries(
    {},
    optional={
        **common_fields,
        "refusal": maybe(st.text(max_size=3)),
        "reasoning_content": maybe(st.text(max_size=3)),
    },
)
choices = st.fixed_dictionaries(
    {},
    optional={
        "index": maybe(st.integers(0, 1)),
        "delta": maybe(deltas),
        "finish_reason": maybe(st.sampled_from(["stop", "tool_calls", None])),
    },
)
chunk_values = maybe(
    st.fixed_dictionaries(
        {"choices": maybe(st.lists(maybe(choices), min_size=1, max_size=1) | st.lists(choices))},
        optional={
            "id": st.just("chatcmpl-1"),
            "object": maybe(st.just("chat.completion.chunk")),
            "usage": maybe(st.fixed_dictionaries({"prompt_tokens": st.integers(0, 9)})),
            "error": maybe(st.none()),
        },
    )
)


def general(payload: bytes) -> Message | type[BaseException] | None:
    """What the general decoder makes of ``payload`` (the error type if it raises)."""
    try:
        return parse_chunk_data(json.loads(payload), payload, URL)
    except ModelError as error:
        return type(error)


def fast(payload: bytes) -> Message | type[BaseException] | None:
    """What :func:`parse_chunk` (fast path first) makes of ``payload``."""
    try:
        return parse_chunk(payload, URL)
    except ModelError as error:
        return type(error)


@settings(SETTINGS, max_examples=600)
@given(value=chunk_values)
def test_any_chunk_reads_the_same_through_the_fast_path(value: Any) -> None:
    payload = json.dumps(value).encode()
    assert fast(payload) == general(payload)


@pytest.mark.parametrize(
    "value",
    [
        {"choices": [{"delta": {"tool_calls": [{"function": "add"}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": None, "index": 0}]}}]},
        {"choices": [{"delta": {"tool_calls": ["call"]}}]},
        {"choices": [{"delta": {"tool_calls": {"index": 0}}}]},
        {"choices": [{"delta": {"content": ["a", {"type": "text", "text": "b"}]}}]},
        {"choices": [{"delta": {"content": "a", "refusal": "no"}}]},
        {"choices": [{"delta": {"content": "a", "reasoning": "hm"}}]},
        {"choices": [{"delta": {"content": "a"}, "index": 1}]},
        {"choices": [{"delta": "text"}]},
        {"choices": [{"delta": {"content": "a"}}], "usage": {"total_tokens": 3}},
        {"choices": [{"delta": {"content": "a"}}], "error": {"message": "overloaded"}},
        {"choices": [{"delta": {"content": "a"}}], "object": "error"},
        {"choices": [{"delta": {}, "finish_reason": "stop"}, {"delta": {"content": "b"}}]},
        {"choices": []},
        {"choices": None, "usage": {"prompt_tokens": 1}},
        [{"choices": []}],
    ],
)
def test_odd_chunks_read_the_same_through_the_fast_path(value: Any) -> None:
    payload = json.dumps(value).encode()
    assert fast(payload) == general(payload)


def test_a_chunk_message_is_built_like_the_constructor_builds_it() -> None:
    calls = [ToolCall("call_1", FunctionCall("add", "{}"), index=0)]
    meta = ResponseMeta("tool_calls")
    built = _chunk_message("hi", calls, meta)
    assert _chunk_message.__name__ == "build"  # the fast builder, not the fallback
    assert type(built) is Message
    assert built == Message(Role.ASSISTANT, "hi", calls, response_meta=meta)
    assert attrs.asdict(built) == attrs.asdict(
        Message(Role.ASSISTANT, "hi", calls, response_meta=meta)
    )
    other = _chunk_message("", [], None)
    assert other.extra == {} and type(other.extra) is ReadOnlyDict  # as the constructor's
    assert type(built.tool_calls) is tuple
    with pytest.raises(FrozenError, match="Message.role"):  # a value, as a constructed one
        built.role = Role.USER  # type: ignore[misc]


@pytest.mark.parametrize(
    "payload",
    [
        b' {"choices": [{"index": 0, "delta": {"content": "a"}}]}',
        b'{"choices": [{"index": 0, "delta": {"content": "a"}}]}\t ',
        b'{"choices": [{"index": 0, "delta": {"content": "\\u00e9"}}]}',
    ],
)
def test_json_with_whitespace_or_escapes_reads_as_json(payload: bytes) -> None:
    chunk = parse_chunk(payload, URL)
    assert chunk is not None
    assert chunk.content == json.loads(payload)["choices"][0]["delta"]["content"]


@pytest.mark.parametrize("payload", [b"", b"{", b'{"choices": []} x', b"\xff", b"[1] [2]"])
def test_a_chunk_that_is_not_json_is_a_model_error_that_shows_it(payload: bytes) -> None:
    with pytest.raises(ModelError, match="not valid JSON"):
        parse_chunk(payload, URL)


# --- chunk lists: stream_from_batches ------------------------------------------------------


def numbers(*batches: list[int]) -> StreamReader[int]:
    return stream_from_batches(iter(list(batches)))


def test_a_batch_stream_reads_chunk_by_chunk_in_order() -> None:
    assert list(numbers([1, 2], [], [3], [4, 5, 6])) == [1, 2, 3, 4, 5, 6]


def test_copies_of_a_batch_stream_read_the_same_chunks() -> None:
    reader = numbers([1, 2], [3])
    assert reader.recv() == 1  # read directly, then copied: the copies start at 2
    first, second = reader.copy(2)
    assert list(first) == [2, 3]
    assert list(second) == [2, 3]


def test_closing_a_batch_stream_drops_the_rest_of_its_list() -> None:
    closed = threading.Event()
    reader = stream_from_batches(iter([[1, 2, 3]]), on_close=closed.set)
    assert reader.recv() == 1
    reader.close()
    assert closed.is_set()
    with pytest.raises(StreamEOF):
        reader.recv()


def test_an_error_after_a_list_comes_after_its_chunks() -> None:
    def batches() -> Any:
        yield [1, 2]
        raise ValueError("broken")

    first, second = stream_from_batches(batches()).copy(2)
    assert [first.recv(), first.recv()] == [1, 2]
    with pytest.raises(ValueError, match="broken"):
        first.recv()
    with pytest.raises(StreamEOF):
        first.recv()
    assert [second.recv(), second.recv()] == [1, 2]
    with pytest.raises(ValueError, match="broken"):
        second.recv()


def test_a_batch_stream_closed_from_another_thread_while_read_is_cut() -> None:
    reading = threading.Event()
    release = threading.Event()

    def batches() -> Any:
        yield [1]
        reading.set()
        assert release.wait(60), "the test never released the read"
        yield [2, 3]

    original = stream_from_batches(batches(), abort=release.set)
    (reader,) = original.copy(1)
    assert reader.recv() == 1
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            reader.recv()
        except BaseException as error:  # handed to the test thread
            outcome.append(error)

    thread = threading.Thread(target=read)
    thread.start()
    assert reading.wait(60)
    original.close()  # a cancel closes the model's stream under its copies
    thread.join(60)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], AgentCancelledError)


# --- the tee buffer across threads ---------------------------------------------------------


def wait_until(condition: Callable[[], object], what: str) -> None:
    """Wait for another thread to reach a state (60 s is only a guard against a hang)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.001)


def buffer_of(reader: StreamReader[Any]) -> TeeBuffer[Any]:
    assert isinstance(reader, CopyReader)
    return reader._buffer


def test_a_cursor_waiting_for_another_threads_read_is_woken_with_the_chunk() -> None:
    source: StreamReader[int]
    writer: StreamWriter[int]
    source, writer = pipe()
    first, second = source.copy(2)
    buffer = buffer_of(first)
    got: list[int] = []
    reader_thread = threading.Thread(target=lambda: got.append(first.recv()))
    reader_thread.start()  # reads the source: blocks until the writer sends
    wait_until(lambda: buffer.reading, "the first copy reads the source")
    waiter = threading.Thread(target=lambda: got.append(second.recv()))
    waiter.start()
    wait_until(lambda: buffer.waiters, "the second copy waits for the first one's read")
    writer.send(7)
    writer.send(8)
    reader_thread.join(60)
    waiter.join(60)
    assert not reader_thread.is_alive() and not waiter.is_alive()
    assert got == [7, 7]
    writer.close()
    assert list(first) == [8]
    assert list(second) == [8]


def test_many_cursors_in_many_threads_read_every_chunk_once_each() -> None:
    source: StreamReader[int]
    writer: StreamWriter[int]
    source, writer = pipe(capacity=2)
    readers = source.copy(6)
    barrier = threading.Barrier(len(readers) + 1)
    results: list[list[int]] = [[] for _ in readers]

    def read(index: int) -> None:
        barrier.wait(60)
        results[index].extend(readers[index])

    threads = [threading.Thread(target=read, args=(i,)) for i in range(len(readers))]
    for thread in threads:
        thread.start()
    barrier.wait(60)
    for number in range(200):
        writer.send(number)
    writer.close()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()
    assert results == [list(range(200))] * len(readers)


def test_a_failed_stream_raises_its_error_to_a_cursor_that_waited() -> None:
    source: StreamReader[Message]
    writer: StreamWriter[Message]
    source, writer = pipe()
    first, second = source.copy(2)
    buffer = buffer_of(first)
    outcome: list[BaseException] = []

    def read(reader: StreamReader[Message]) -> None:
        try:
            concat_message_stream(reader)
        except BaseException as error:  # handed to the test thread
            outcome.append(error)

    threads = [threading.Thread(target=read, args=(reader,)) for reader in (first, second)]
    threads[0].start()
    wait_until(lambda: buffer.reading, "the first copy reads the source")
    threads[1].start()
    wait_until(lambda: buffer.waiters, "the second copy waits for the first one's read")
    writer.send(None, RuntimeError("server went away"))
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()
    assert [str(error) for error in outcome] == ["server went away"] * 2


# --- a real stream: an error inside one network read ---------------------------------------


def sse(*events: dict[str, Any] | bytes) -> bytes:
    out = b""
    for event in events:
        data = event if isinstance(event, bytes) else json.dumps(event).encode()
        out += b"data: " + data + b"\n\n"
    return out


def delta(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}


def test_chunks_before_a_malformed_one_in_the_same_read_are_delivered_first() -> None:
    body = sse(delta("Hel"), delta("lo"), b"{not json")
    with (
        RawServer(replay(body)) as server,
        OpenAIChatModel("m", base_url=server.base_url, api_key="k", max_retries=3) as model,
    ):
        stream = model.stream([user_message("hi")])
        assert stream.recv().content == "Hel"
        assert stream.recv().content == "lo"
        with pytest.raises(ModelError, match="not valid JSON"):
            stream.recv()
        assert server.request_count == 1  # never retried once a chunk was delivered


def test_a_stream_read_by_two_copies_concatenates_once_to_the_same_message() -> None:
    body = (
        sse(
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            delta("4"),
            delta("2"),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        )
        + b"data: [DONE]\n\n"
    )
    with (
        RawServer(replay(body)) as server,
        OpenAIChatModel("m", base_url=server.base_url, api_key="k") as model,
    ):
        history, user = model.stream([user_message("hi")]).copy(2)
        merged = concat_message_stream(history)
        assert merged.content == "42"
        assert merged.role is Role.ASSISTANT
        assert concat_message_stream(user) is merged
