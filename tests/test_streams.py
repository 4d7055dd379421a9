"""Streams: pipe, back-pressure, errors in band, copies, concatenation."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit import (
    AgentCancelledError,
    Message,
    Role,
    StreamEOF,
    StreamReader,
    StreamWriter,
    concat_message_stream,
    pipe,
    stream_from_iterator,
    stream_from_list,
)


def int_pipe(capacity: int = 0) -> tuple[StreamReader[int | None], StreamWriter[int | None]]:
    """A pipe of ints (``None`` is the chunk sent along with an error)."""
    return pipe(capacity)


@given(st.lists(st.integers(), max_size=50), st.integers(0, 4))
@settings(deadline=None, max_examples=50)
def test_pipe_preserves_order_across_threads(items: list[int], capacity: int) -> None:
    reader, writer = int_pipe(capacity)

    def produce() -> None:
        for item in items:
            writer.send(item)
        writer.close()

    thread = threading.Thread(target=produce)
    thread.start()
    assert list(reader) == items
    thread.join()


def test_recv_raises_eof_at_the_end_and_keeps_raising() -> None:
    reader, writer = int_pipe()
    writer.send(1)
    writer.close()
    writer.close()  # idempotent
    assert reader.recv() == 1
    with pytest.raises(StreamEOF):
        reader.recv()
    with pytest.raises(EOFError):
        reader.recv()


def test_error_is_raised_once_then_stream_is_over() -> None:
    reader, writer = int_pipe()
    writer.send(1)
    writer.send(None, error=ValueError("boom"))
    assert reader.recv() == 1
    with pytest.raises(ValueError, match="boom"):
        reader.recv()
    with pytest.raises(StreamEOF):
        reader.recv()


def test_send_returns_false_once_reader_closed() -> None:
    reader, writer = int_pipe()
    assert writer.send(1)
    reader.close()
    assert writer.send(2) is False


def test_bounded_pipe_blocks_the_writer_until_the_reader_takes() -> None:
    reader, writer = int_pipe(capacity=2)
    sent: list[int] = []
    third_sent = threading.Event()

    def produce() -> None:
        for item in range(3):
            writer.send(item)
            sent.append(item)
            if item == 2:
                third_sent.set()
        writer.close()

    thread = threading.Thread(target=produce)
    thread.start()
    # The third send cannot complete while two chunks wait unread.
    assert not third_sent.wait(0.2)
    assert sent == [0, 1]
    assert reader.recv() == 0
    assert third_sent.wait(10)
    assert list(reader) == [1, 2]
    thread.join()


def test_closing_the_reader_releases_a_blocked_writer() -> None:
    reader, writer = int_pipe(capacity=1)
    writer.send(0)
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(writer.send(1)))
    thread.start()
    reader.close()
    thread.join(10)
    assert results == [False]


@given(st.lists(st.integers(), max_size=30), st.integers(1, 4), st.data())
@settings(deadline=None, max_examples=40)
def test_copies_are_independent(items: list[int], n: int, data: st.DataObject) -> None:
    source = stream_from_list(items)
    copies = source.copy(n)
    # read the copies in a random interleaving
    results: list[list[int]] = [[] for _ in copies]
    active = list(range(n))
    while active:
        index = data.draw(st.sampled_from(active))
        try:
            results[index].append(copies[index].recv())
        except StreamEOF:
            active.remove(index)
    assert results == [items] * n


def test_reading_the_original_after_copy_raises() -> None:
    source = stream_from_list([1])
    source.copy(2)
    with pytest.raises(RuntimeError):
        source.recv()


def test_copy_of_a_copy_shares_one_buffer_and_one_read_of_the_source() -> None:
    pulled: list[int] = []

    def generate() -> Iterator[int]:
        for item in range(3):
            pulled.append(item)
            yield item

    a, b = stream_from_iterator(generate()).copy(2)
    c, d = a.copy(2)
    assert list(b) == [0, 1, 2]
    assert list(c) == [0, 1, 2] and list(d) == [0, 1, 2]
    assert pulled == [0, 1, 2]


def test_copies_see_the_error_too() -> None:
    reader, writer = int_pipe()
    writer.send(1)
    writer.send(None, error=KeyError("k"))
    a, b = reader.copy(2)
    for copy in (a, b):
        assert copy.recv() == 1
        with pytest.raises(KeyError):
            copy.recv()


def test_closing_all_copies_closes_the_source() -> None:
    closed = threading.Event()
    source = stream_from_iterator(iter([1, 2, 3]), on_close=closed.set)
    a, b = source.copy(2)
    a.close()
    assert not closed.is_set()
    b.close()
    assert closed.is_set()


def test_stream_from_iterator_is_lazy_and_propagates_errors() -> None:
    def generate() -> Iterator[int]:
        yield 1
        raise RuntimeError("late")

    reader = stream_from_iterator(generate())
    assert reader.recv() == 1
    with pytest.raises(RuntimeError, match="late"):
        reader.recv()


@given(st.lists(st.text(max_size=5), min_size=1, max_size=10))
def test_concat_message_stream_is_computed_once_for_copies(parts: list[str]) -> None:
    chunks = [Message(Role.ASSISTANT, p) for p in parts]
    a, b = stream_from_list(chunks).copy(2)
    first = concat_message_stream(a)
    assert first.content == "".join(parts)
    assert concat_message_stream(b) is first


def test_concat_of_empty_stream_names_the_problem() -> None:
    with pytest.raises(ValueError, match="no messages in MessageVariant.MessageStream"):
        concat_message_stream(stream_from_list([]))


def test_a_dropped_reader_releases_a_blocked_writer() -> None:
    import gc

    reader, writer = int_pipe(capacity=1)
    writer.send(0)
    results: list[bool] = []
    blocked = threading.Thread(target=lambda: results.append(writer.send(1)))
    blocked.start()
    del reader
    gc.collect()
    blocked.join(10)
    assert results == [False]


def test_close_from_another_thread_while_a_generator_runs_is_deferred_to_the_reader() -> None:
    inside = threading.Event()
    release = threading.Event()
    aborted = threading.Event()
    closed: list[str] = []

    def produce() -> Iterator[int]:
        try:
            yield 1
            inside.set()
            assert release.wait(30)
            yield 2
            yield 3
        finally:
            closed.append(threading.current_thread().name)

    def abort() -> None:
        aborted.set()
        release.set()

    reader = stream_from_iterator(produce(), abort=abort)
    assert reader.recv() == 1
    results: list[object] = []

    def read() -> None:
        try:
            results.append(reader.recv())
        except BaseException as error:
            results.append(error)

    thread = threading.Thread(target=read, name="reader")
    thread.start()
    assert inside.wait(30)
    reader.close()  # the generator is executing in "reader": must not raise here
    assert aborted.is_set()
    thread.join(30)
    assert not thread.is_alive()
    # The reader learns that the stream was cut by a close, not that it ended.
    assert len(results) == 1 and isinstance(results[0], AgentCancelledError)
    assert closed == ["reader"]  # the generator was closed by the thread that ran it
    with pytest.raises(StreamEOF):
        reader.recv()
    reader.close()  # idempotent


def test_close_while_idle_closes_the_generator_at_once_and_runs_on_close() -> None:
    closed: list[str] = []
    ended: list[bool] = []

    def produce() -> Iterator[int]:
        try:
            yield 1
            yield 2
        finally:
            closed.append("generator")

    reader = stream_from_iterator(produce(), on_close=lambda: ended.append(True))
    assert reader.recv() == 1
    reader.close()
    assert closed == ["generator"] and ended == [True]
    with pytest.raises(StreamEOF):
        reader.recv()


def test_an_error_raised_by_an_aborted_read_reaches_the_reader() -> None:
    inside = threading.Event()
    release = threading.Event()

    def produce() -> Iterator[int]:
        yield 1
        inside.set()
        assert release.wait(30)
        raise ConnectionAbortedError("aborted")

    reader = stream_from_iterator(produce(), abort=release.set)
    assert reader.recv() == 1
    errors: list[BaseException] = []

    def read() -> None:
        try:
            reader.recv()
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=read)
    thread.start()
    assert inside.wait(30)
    reader.close()
    thread.join(30)
    assert [type(error) for error in errors] == [ConnectionAbortedError]


def test_closing_a_copied_source_cuts_its_copies_with_the_cancel_error() -> None:
    # A run's cancel closes the model stream it registered, which the run has copied for the
    # user and the history: the copies must not end as if the reply were complete.
    source = stream_from_iterator(iter(["a", "b", "c"]))
    first, second = source.copy(2)
    assert first.recv() == "a"
    source.close()  # nobody is reading at this moment
    assert second.recv() == "a"  # buffered chunks are still there
    with pytest.raises(AgentCancelledError):
        second.recv()
    with pytest.raises(AgentCancelledError):
        first.recv()


def test_copies_released_by_their_readers_close_the_source_quietly() -> None:
    closed: list[bool] = []
    source = stream_from_iterator(iter(["a", "b"]), on_close=lambda: closed.append(True))
    first, second = source.copy(2)
    assert first.recv() == "a"
    first.close()
    second.close()
    assert closed == [True]
