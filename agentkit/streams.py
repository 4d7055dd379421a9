"""Streams of chunks between threads: :func:`pipe`, :class:`StreamReader`, :class:`StreamWriter`.

A :class:`StreamReader` has one consumer. :meth:`StreamReader.copy` hands out independent
readers of the same chunks. Copies share one buffer: copying a copy adds a reader to that
buffer instead of stacking buffers, so a model stream read by the user, the history and the
agent is buffered once. Readers of a lazily produced stream (an HTTP response, a generator)
pull from the source themselves; no thread is started to pump a stream.

Errors travel in band: a producer sends an error, the reader's :meth:`~StreamReader.recv`
raises it, and the stream is over.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from agentkit._stream_base import CopyReader, StreamEOF, StreamReader, TeeBuffer
from agentkit.errors import AgentKitRuntimeError, AgentKitValueError
from agentkit.schema import Message, concat_messages

__all__ = [
    "StreamEOF",
    "StreamReader",
    "StreamWriter",
    "concat_message_stream",
    "pipe",
    "stream_from_batches",
    "stream_from_iterator",
    "stream_from_list",
]

T = TypeVar("T")
U = TypeVar("U")


# --- pipe -------------------------------------------------------------------------------


class _Channel(Generic[T]):
    """A FIFO of (chunk, error) items with optional capacity and two-sided close."""

    __slots__ = ("capacity", "cond", "items", "reader_closed", "writer_closed")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.cond = threading.Condition(threading.Lock())
        self.items: deque[tuple[T | None, BaseException | None]] = deque()
        self.reader_closed = False
        self.writer_closed = False


class StreamWriter(Generic[T]):
    """The writing end of a :func:`pipe`."""

    __slots__ = ("_channel",)

    def __init__(self, channel: _Channel[T]) -> None:
        self._channel = channel

    def send(self, chunk: T | None, error: BaseException | None = None) -> bool:
        """Send a chunk, or an error that ends the stream (``chunk`` is then ignored).

        Blocks while a bounded pipe is full. Returns ``False`` once the reader was closed:
        the producer should stop.

        Raises:
            RuntimeError: the writer was closed.
        """
        channel = self._channel
        with channel.cond:
            if channel.writer_closed:
                raise AgentKitRuntimeError("send() on a closed StreamWriter")
            while (
                channel.capacity
                and len(channel.items) >= channel.capacity
                and not channel.reader_closed
            ):
                channel.cond.wait()
            if channel.reader_closed:
                return False
            channel.items.append((chunk, error))
            channel.cond.notify_all()
            return True

    def close(self) -> None:
        """End the stream; the reader gets ``StreamEOF`` after the buffered chunks. Idempotent."""
        channel = self._channel
        with channel.cond:
            channel.writer_closed = True
            channel.cond.notify_all()

    def __enter__(self) -> StreamWriter[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _PipeReader(StreamReader[T]):
    __slots__ = ("_channel", "_failed")

    def __init__(self, channel: _Channel[T]) -> None:
        super().__init__()
        self._channel = channel
        self._failed = False

    def _recv(self) -> T:
        channel = self._channel
        with channel.cond:
            while True:
                if self._failed or channel.reader_closed:
                    raise StreamEOF
                if channel.items:
                    chunk, error = channel.items.popleft()
                    channel.cond.notify_all()
                    if error is not None:
                        self._failed = True
                        raise error
                    return chunk  # type: ignore[return-value]
                if channel.writer_closed:
                    raise StreamEOF
                channel.cond.wait()

    def close(self) -> None:
        channel = self._channel
        with channel.cond:
            channel.reader_closed = True
            channel.items.clear()
            channel.cond.notify_all()

    def __del__(self) -> None:
        # A reader dropped unread must not leave its writer blocked on a full pipe forever.
        if getattr(self, "_channel", None) is not None:
            self.close()


def pipe(capacity: int = 0) -> tuple[StreamReader[T], StreamWriter[T]]:
    """Return a connected ``(reader, writer)`` pair; ``capacity`` 0 means unbounded.

    With a capacity, :meth:`StreamWriter.send` blocks while that many chunks are unread
    (back-pressure) and returns ``False`` as soon as the reader closes.
    """
    if capacity < 0:
        raise AgentKitValueError(f"pipe() capacity must be >= 0 (got {capacity})")
    channel: _Channel[T] = _Channel(capacity)
    return _PipeReader(channel), StreamWriter(channel)


# --- lazy sources -----------------------------------------------------------------------


class _IteratorReader(StreamReader[T]):
    """Reads a Python iterator on demand, in the reading thread.

    :meth:`close` may come from another thread while a read is in progress (a cancel): a
    generator cannot be closed while it runs, so the close is then deferred to the reading
    thread, which performs it as soon as its read returns, and ``abort`` (if given) is called
    at once to make the blocked read return early.

    A reader replaced by :meth:`copy` is closed by its buffer only once no copy reads any
    more; a close from anywhere else (a cancel) cuts the stream under its copies, so they get
    :class:`~agentkit.AgentCancelledError` rather than a silent, truncated end.
    """

    __slots__ = (
        "_abort",
        "_close_requested",
        "_cut",
        "_done",
        "_iterator",
        "_lock",
        "_on_close",
        "_reading",
    )

    def __init__(
        self,
        iterator: Iterator[Any],
        on_close: Callable[[], object] | None,
        abort: Callable[[], object] | None,
    ) -> None:
        super().__init__()
        self._iterator = iterator
        self._on_close = on_close
        self._abort = abort
        self._done = False
        self._reading = False
        self._close_requested = False
        self._cut = False
        self._lock = threading.Lock()

    def _recv(self) -> T:
        return self._pull()  # type: ignore[no-any-return]

    def _pull(self) -> Any:
        """Return the iterator's next item (the read protocol of the class docstring)."""
        with self._lock:
            if self._done:
                if self._cut:
                    raise _closed_while_reading()
                raise StreamEOF
            if self._reading:
                raise AgentKitRuntimeError(
                    "a StreamReader was read from two threads at once; use copy()"
                )
            self._reading = True
        try:
            item = next(self._iterator)
        except StopIteration:
            self._end_last_read()
            raise StreamEOF from None
        except BaseException:
            self._end_last_read()
            raise
        if self._end_read():
            # Closed by another thread during the read (a cancel): the chunk is dropped, as
            # close() does, and this reader learns that the stream was cut, not finished.
            self._close_iterator()
            raise _closed_while_reading()
        return item

    def _end_read(self) -> bool:
        """Leave the read; return ``True`` if a close came in meanwhile."""
        with self._lock:
            self._reading = False
            if self._close_requested:
                self._done = True
                return True
            return False

    def _end_last_read(self) -> None:
        """Leave the read that ended the iterator (or failed): :meth:`_finish`, in the same
        round of the lock (a close that came in meanwhile has nothing left to close)."""
        with self._lock:
            self._reading = False
            self._done = True
            on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    def _finish(self) -> None:
        with self._lock:
            self._done = True
            on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    def _close_iterator(self) -> None:
        close = getattr(self._iterator, "close", None)
        try:
            if close is not None:
                close()
        finally:
            self._finish()

    def close(self) -> None:
        with self._lock:
            if self._done or self._close_requested:
                return
            self._cut = self._copied
            if self._reading:
                # Another thread is inside next(): it closes the iterator when it returns.
                self._close_requested = True
                deferred, abort = True, self._abort
            else:
                self._done = True
                deferred, abort = False, None
        if not deferred:
            self._close_iterator()
        elif abort is not None:
            abort()


class _BatchReader(_IteratorReader[T]):
    """An :class:`_IteratorReader` of an iterator of chunk lists, read chunk by chunk.

    A :class:`~agentkit._stream_base.TeeBuffer` takes a whole list in one round.
    """

    __slots__ = ("_pending",)

    def __init__(
        self,
        batches: Iterator[list[T]],
        on_close: Callable[[], object] | None,
        abort: Callable[[], object] | None,
    ) -> None:
        # _IteratorReader.__init__, written out (a stream is made per model call).
        self._copied = False
        self._iterator = batches
        self._on_close = on_close
        self._abort = abort
        self._done = False
        self._reading = False
        self._close_requested = False
        self._cut = False
        self._lock = threading.Lock()
        self._pending: deque[T] = deque()  # the rest of the last list, for _recv

    def _recv(self) -> T:
        pending = self._pending
        if pending and not self._done:
            return pending.popleft()
        batch = self._next_batch()
        pending.extend(itertools.islice(batch, 1, None))
        return batch[0]

    def _recv_batch(self) -> list[T]:
        pending = self._pending
        if pending and not self._done:
            batch = list(pending)
            pending.clear()
            return batch
        return self._next_batch()

    def _next_batch(self) -> list[T]:
        while True:
            batch: list[T] = self._pull()
            if batch:
                return batch


def stream_from_batches(
    batches: Iterable[list[T]],
    on_close: Callable[[], object] | None = None,
    *,
    abort: Callable[[], object] | None = None,
) -> StreamReader[T]:
    """Like :func:`stream_from_iterator`, for an iterator that yields lists of chunks.

    For model clients: a source that receives several chunks at once (all the SSE events of
    one network read) hands them over together, and copies of the reader buffer them in one
    round instead of one round per chunk. Readers still see one chunk at a time; an empty
    list is skipped.
    """
    return _BatchReader(iter(batches), on_close, abort)


def _closed_while_reading() -> BaseException:
    from agentkit._cancel import CancelMode
    from agentkit.errors import AgentCancelledError

    return AgentCancelledError(CancelMode.IMMEDIATE)


def stream_from_iterator(
    iterator: Iterable[T],
    on_close: Callable[[], object] | None = None,
    *,
    abort: Callable[[], object] | None = None,
) -> StreamReader[T]:
    """Return a reader that pulls ``iterator`` lazily; an exception it raises is the stream error.

    ``on_close`` runs once when the stream ends, fails or is closed (release a connection here).
    :meth:`~StreamReader.close` is safe from any thread: while another thread is reading,
    the iterator is closed by that thread once its read returns, which then raises
    :class:`~agentkit.AgentCancelledError` (the stream was cut, not finished), and ``abort``
    (which must not block) is called right away to make a blocked read return sooner, for
    example by shutting down a socket.
    """
    return _IteratorReader(iter(iterator), on_close, abort)


class _ListReader(StreamReader[T]):
    __slots__ = ("_items", "_position")

    def __init__(self, items: list[T]) -> None:
        super().__init__()
        self._items = items
        self._position = 0

    def _recv(self) -> T:
        position = self._position
        if position >= len(self._items):
            raise StreamEOF
        self._position = position + 1
        return self._items[position]

    def close(self) -> None:
        self._position = len(self._items)


def stream_from_list(items: Iterable[T]) -> StreamReader[T]:
    """Return a reader of the given chunks."""
    return _ListReader(list(items))


def _collect(reader: StreamReader[T]) -> list[T]:
    return list(reader)


def concat_message_stream(reader: StreamReader[Message]) -> Message:
    """Read a message stream to its end and return the concatenated message.

    The result for copies of one stream is computed once and shared. Raises the stream's
    error if it has one, and ``ValueError`` for a stream without chunks.
    """
    if isinstance(reader, CopyReader) and not reader._copied:
        closed = reader._closed
        start = reader._read_rest()
        buffer = reader._buffer
        if closed:  # a closed copy reads no further: the chunks it had, not the whole stream
            return _concat(buffer.chunks[start:])
        key = (_CONCAT, start)
        cached: Message | None = buffer.memo.get(key)
        if cached is None:
            # Copies read in other threads may get here together: the first result stored wins.
            cached = buffer.memo.setdefault(key, _concat(buffer.chunks[start:]))
        return cached
    return _concat(_collect(reader))


_CONCAT = "concat_messages"


def _concatenated(buffer: TeeBuffer[Message], start: int) -> Message | None:
    """What :func:`concat_message_stream` of a new copy of ``buffer`` from chunk ``start``
    returns, when that is known without a copy: the stream ended without an error and a copy
    from ``start`` was concatenated already. ``None`` otherwise."""
    if buffer.done and buffer.error is None:
        cached: Message | None = buffer.memo.get((_CONCAT, start))
        return cached
    return None


def _concat(chunks: list[Message]) -> Message:
    if not chunks:
        raise AgentKitValueError("no messages in MessageVariant.MessageStream")
    return concat_messages(chunks)
