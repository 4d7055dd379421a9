"""The reading end of a stream, and its copies (framework-internal; see :mod:`agentkit.streams`).

:class:`StreamReader` is the base of every reader. :meth:`StreamReader.copy` hands out readers
of one shared :class:`TeeBuffer`: copying a copy adds a reader to that buffer instead of
stacking buffers.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Iterator, Sequence
from typing import Any, Generic, TypeVar

from agentkit.errors import AgentKitRuntimeError, AgentKitValueError

__all__ = ["CopyReader", "StreamEOF", "StreamReader", "TeeBuffer"]

T = TypeVar("T")
U = TypeVar("U")


class StreamEOF(EOFError):
    """Raised by :meth:`StreamReader.recv` when the stream has no more chunks."""


class StreamReader(Generic[T], abc.ABC):
    """The reading end of a stream of chunks; iterate it or call :meth:`recv`.

    Subclasses provide ``_recv``; this class adds iteration, copying and closing.
    """

    __slots__ = ("__weakref__", "_copied")

    def __init__(self) -> None:
        self._copied = False

    def recv(self) -> T:
        """Return the next chunk.

        Raises:
            StreamEOF: the stream is finished.
            BaseException: the error the producer sent (the stream is finished afterwards).
            RuntimeError: this reader was replaced by :meth:`copy`.
        """
        if self._copied:
            raise AgentKitRuntimeError(
                "this StreamReader was copied; read one of its copies instead"
            )
        return self._recv()

    @abc.abstractmethod
    def _recv(self) -> T:
        """Return the next chunk (subclasses read their source here)."""

    def _recv_batch(self) -> list[T]:
        """Return the next chunks: at least one, and any more the source has ready at once.

        A :class:`TeeBuffer` reads its source this way. Sources that receive chunks in groups
        (several Server-Sent Events in one network read) override it, so that a group costs
        one buffer round instead of one per chunk. Raises like :meth:`_recv`.
        """
        return [self._recv()]

    def close(self) -> None:
        """Stop reading: the producer is told to stop, buffered chunks are dropped. Idempotent."""

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        try:
            return self.recv()
        except StreamEOF:
            raise StopIteration from None

    def __enter__(self) -> StreamReader[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def copy(self, n: int) -> list[StreamReader[T]]:
        """Return ``n`` independent readers of the chunks this reader has not read yet.

        This reader must not be read afterwards (it raises ``RuntimeError``).
        """
        if n < 1:
            raise AgentKitValueError(f"copy() needs n >= 1 (got {n})")
        if self._copied:
            raise AgentKitRuntimeError(
                "this StreamReader was copied already; copy one of its copies"
            )
        self._copied = True
        return TeeBuffer(self).readers(n)


# --- copies -------------------------------------------------------------------------------


class TeeBuffer(Generic[T]):
    """Chunks read once from a source and shared by any number of cursors.

    Whichever cursor needs a chunk that is not buffered yet reads the source (one at a time);
    the others wait for it. A buffered chunk costs a cursor a list index and nothing else: the
    lock is taken only to read the source or to wait, and a waiting cursor is woken only when
    one exists. Results derived from the whole stream (a concatenated message) are memoised
    here so they are computed once.
    """

    __slots__ = (
        "chunks",
        "done",
        "error",
        "lock",
        "memo",
        "open_readers",
        "reading",
        "source",
        "waiters",
    )

    def __init__(self, source: StreamReader[T]) -> None:
        self.source = source
        self.chunks: list[T] = []
        self.lock = threading.Lock()
        self.waiters: list[threading.Lock] = []  # one held lock per waiting cursor
        self.done = False
        self.error: BaseException | None = None
        self.reading = False
        self.open_readers = 0
        self.memo: dict[Any, Any] = {}

    def readers(self, n: int, start: int = 0) -> list[StreamReader[T]]:
        """Add ``n`` cursors starting at chunk ``start``."""
        with self.lock:
            self.open_readers += n
        return [CopyReader(self, start) for _ in range(n)]

    def chunk_at(self, position: int) -> T:
        """Return chunk ``position``, reading the source if needed; StreamEOF/error at the end."""
        chunks = self.chunks
        if position < len(chunks):
            # Chunks are only ever appended, so a buffered one can be read without the lock.
            return chunks[position]
        if not self._claim(position):
            if position < len(chunks):
                return chunks[position]
            raise StreamEOF
        try:
            batch = self.source._recv_batch()
        except StreamEOF:
            self._end(None)
            raise
        except BaseException as error:
            self._end(error)
            raise
        with self.lock:
            chunks.extend(batch)
            self.reading = False
            waiters = self.waiters  # _take_waiters, written out: this runs once per batch
            if waiters:
                self.waiters = []
        for waiter in waiters:
            waiter.release()
        return chunks[position]

    def read_to_end(self) -> None:
        """Read the source to its end; raises its error if this caller was the one reading it.

        A caller that waited for another cursor's read returns normally at the end even when
        the stream failed: check :attr:`error`.
        """
        while True:
            try:
                self.chunk_at(len(self.chunks))
            except StreamEOF:
                return

    def _claim(self, position: int) -> bool:
        """Wait until chunk ``position`` is buffered or the stream ended (``False``), or
        until no cursor reads the source: then this caller reads it (``True``)."""
        lock = self.lock
        while True:
            with lock:
                if position < len(self.chunks) or self.done:
                    return False
                if not self.reading:
                    self.reading = True
                    return True
                waiter = threading.Lock()
                waiter.acquire()
                self.waiters.append(waiter)
            # Released by the reading cursor once its read returned (with a chunk or the end);
            # that read is bounded by the source (a model stream's timeout, a cancel's abort).
            waiter.acquire()

    def _take_waiters(self) -> Sequence[threading.Lock]:
        # Called with the lock held. The list handed out is never the one waiters join.
        waiters = self.waiters
        if not waiters:
            return ()
        self.waiters = []
        return waiters

    def _end(self, error: BaseException | None) -> None:
        with self.lock:
            self.done = True
            self.error = error
            self.reading = False
            waiters = self._take_waiters()
        for waiter in waiters:
            waiter.release()

    def release(self) -> None:
        """Drop a cursor; the last one to go closes the source if it was not read to its end."""
        with self.lock:
            self.open_readers -= 1
            last = self.open_readers == 0 and not self.done
            if last:
                self.done = True
        if last:
            self.source.close()


class CopyReader(StreamReader[T]):
    """One cursor of a :class:`TeeBuffer`."""

    __slots__ = ("_buffer", "_closed", "_error_seen", "_position")

    def __init__(self, buffer: TeeBuffer[T], position: int) -> None:
        self._copied = False
        self._buffer = buffer
        self._position = position
        self._closed = False
        self._error_seen = False

    def _recv(self) -> T:
        if self._closed or self._error_seen:
            raise StreamEOF
        position = self._position
        buffer = self._buffer
        chunks = buffer.chunks
        if position < len(chunks):  # buffered: no call, no lock
            self._position = position + 1
            return chunks[position]
        try:
            chunk = buffer.chunk_at(position)
        except StreamEOF:
            error = buffer.error
            if error is not None:
                self._error_seen = True
                raise error from None
            raise
        except BaseException:
            self._error_seen = True
            raise
        self._position = position + 1
        return chunk

    def __next__(self) -> T:
        if self._copied:
            raise AgentKitRuntimeError(
                "this StreamReader was copied; read one of its copies instead"
            )
        try:
            return self._recv()
        except StreamEOF:
            raise StopIteration from None

    def copy(self, n: int) -> list[StreamReader[T]]:
        if n < 1:
            raise AgentKitValueError(f"copy() needs n >= 1 (got {n})")
        if self._copied or self._closed:
            raise AgentKitRuntimeError("this StreamReader was copied or closed already")
        # A copy of a copy joins the same buffer: one buffer however many readers there are.
        readers = self._buffer.readers(n, self._position)
        self._copied = True
        self._closed = True
        self._buffer.release()
        return readers

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._buffer.release()

    def _read_rest(self) -> int:
        """Read to the end (raises the stream's error); return the position it started from.

        A closed cursor reads nothing more.
        """
        start = self._position
        buffer = self._buffer
        if not (self._closed or self._error_seen):
            try:
                buffer.read_to_end()
            except BaseException:
                self._error_seen = True
                raise
            self._position = len(buffer.chunks)
            error = buffer.error
            if error is not None:
                self._error_seen = True
                raise error
        return start
