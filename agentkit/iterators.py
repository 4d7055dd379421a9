"""The :class:`AsyncIterator` / :class:`AsyncGenerator` pair (:func:`new_async_iterator_pair`):
a thread-safe FIFO, under Eino's names.

"Async" means the producer and the consumer are decoupled, each in its own thread; nothing
here uses asyncio, so it works the same in scripts, inside Jupyter's running event loop and
in WSGI request threads. The queue is the standard library's C-implemented
:class:`queue.SimpleQueue`.

When a run produces into the pair, the iterator knows the run's worker thread: reaching the
end of the iterator, or closing it, returns only after that thread has ended, so no thread
outlives the run.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentkit._lazy import attach
from agentkit.errors import AgentKitRuntimeError

__all__ = [
    "AsyncGenerator",
    "AsyncIterator",
    "new_async_iterator_pair",
]

T = TypeVar("T")

_END = object()


class _Pair:
    """State shared by the two ends."""

    __slots__ = (
        "consumer_closed",
        "inside",
        "lock",
        "on_close",
        "producer_closed",
        "queue",
        "refused",
        "stop",
        "threads",
    )

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.producer_closed = False
        self.consumer_closed = False
        self.on_close: list[Callable[[], object]] = []
        self.threads: list[threading.Thread] = []
        # Tells whether the calling thread does work for the producer (then it must not
        # wait for the producer: the producer may be waiting for it).
        self.inside: Callable[[], bool] | None = None
        # True once the run producing into this pair is being cancelled: sends are refused.
        self.stop: Callable[[], bool] | None = None
        self.refused = False  # a send was refused because of ``stop``


class AsyncGenerator(Generic[T]):
    """The producing end: :meth:`send` items, then :meth:`close`.
    """

    __slots__ = ("_pair",)

    def __init__(self, pair: _Pair) -> None:
        self._pair = pair

    def send(self, item: T) -> bool:
        """Append an item; never blocks. ``False`` once the consumer closed the iterator.

        Inside an agent run, ``send`` also returns ``False`` (dropping the item) once the run
        is being cancelled: the producer should stop.

        Raises:
            RuntimeError: the generator was closed already.
        """
        pair = self._pair
        if pair.consumer_closed:
            return False
        if pair.stop is not None and pair.stop():
            pair.refused = True
            return False
        if pair.producer_closed:
            raise AgentKitRuntimeError("send() on a closed AsyncGenerator")
        pair.queue.put(item)
        return True

    @property
    def closed_by_consumer(self) -> bool:
        """``True`` once the consumer closed the iterator (the producer should stop)."""
        return self._pair.consumer_closed

    def close(self) -> None:
        """Mark the end of the items; the consumer sees it after draining them. Idempotent."""
        pair = self._pair
        with pair.lock:
            if pair.producer_closed:
                return
            pair.producer_closed = True
        pair.queue.put(_END)


class AsyncIterator(Generic[T]):
    """The consuming end: iterate with ``for``, or call :meth:`next`.

    A plain (thread-based) iterator, not an asyncio one.

    Use it as a context manager to close it when the block ends::

        with runner.query("hi") as events:
            for event in events:
                ...
    """

    __slots__ = ("_finished", "_pair")

    def __init__(self, pair: _Pair) -> None:
        self._pair = pair
        self._finished = False

    def next(self) -> tuple[T | None, bool]:
        """Block until the next item: ``(item, True)``, or ``(None, False)`` at the end."""
        if self._finished:
            return None, False
        item = self._pair.queue.get()
        if item is _END:
            self._finish()
            return None, False
        return item, True  # type: ignore[return-value]

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        item = self._pair.queue.get()
        if item is _END:
            self._finish()
            raise StopIteration
        return item  # type: ignore[return-value]

    def close(self, timeout: float | None = None) -> None:
        """Stop consuming: cancel the run producing into this iterator and wait for it to end.

        The producer's next :meth:`AsyncGenerator.send` returns ``False``; a run started by
        agentkit stops at its next step boundary and closes its open model streams. Returns
        once the producing threads have ended, or after ``timeout`` seconds. Idempotent.

        Only closing cancels: an iterator that is dropped without being closed (or read to
        its end) lets its run finish; nothing is cancelled from ``__del__``.
        """
        pair = self._pair
        with pair.lock:
            already = pair.consumer_closed
            pair.consumer_closed = True
            callbacks = [] if already else pair.on_close[:]
        for callback in callbacks:
            callback()
        self._finished = True
        self._join(timeout, closing=True)

    def __enter__(self) -> AsyncIterator[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _finish(self) -> None:
        self._finished = True
        # Put the end marker back so a concurrent or later next() also ends.
        self._pair.queue.put(_END)
        self._join(None)

    def _join(self, timeout: float | None, closing: bool = False) -> None:
        inside = self._pair.inside
        if closing and inside is not None and inside():
            # Closed early by code working for the producer: the producer may be waiting
            # for that very code, so waiting for the producer here could never end.
            return
        current = threading.current_thread()
        for thread in self._pair.threads:
            if thread is not current:
                thread.join(timeout)


def new_async_iterator_pair() -> tuple[AsyncIterator[T], AsyncGenerator[T]]:
    """Return a connected ``(iterator, sender)`` pair (unbounded).

    Example::

        events, sender = new_async_iterator_pair()
        sender.send(event)
        sender.close()
        for event in events:
            ...
    """
    pair = _Pair()
    return AsyncIterator(pair), AsyncGenerator(pair)


if not TYPE_CHECKING:
    # The Pythonic second names of 0.2 (one name per object now; API.md uses Eino's).
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "ItemIterator": "agentkit.iterators.AsyncIterator",
            "ItemSender": "agentkit.iterators.AsyncGenerator",
            "channel": "agentkit.iterators.new_async_iterator_pair",
        },
    )


def _attach_producer(
    iterator: AsyncIterator[Any],
    thread: threading.Thread | None = None,
    on_close: Callable[[], object] | None = None,
    inside: Callable[[], bool] | None = None,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Tie a producer thread and a cancel hook to an iterator (used by run_in_worker)."""
    pair = iterator._pair
    with pair.lock:
        if stop is not None:
            pair.stop = stop
        if thread is not None:
            pair.threads.append(thread)
        if on_close is not None:
            pair.on_close.append(on_close)
        if inside is not None:
            pair.inside = inside


def _wait_for_end(iterator: AsyncIterator[Any]) -> None:
    """Wait until the producer of ``iterator`` closed it, dropping what it still sends.

    For a consumer that stopped reading (it closed the iterator) but must know when the
    producer is done. Unlike ``Thread.join``, the wait can be cut by ``KeyboardInterrupt``
    and started again (an interrupted join may take a live thread for ended).
    """
    pair = iterator._pair
    while pair.queue.get() is not _END:
        pass
    pair.queue.put(_END)  # the end stays visible to every later read
    iterator._join(None)


def _end_refused(generator: AsyncGenerator[T], last: Callable[[], T]) -> None:
    """If ``generator`` refused items because its run was being cancelled, queue ``last()``.

    The producer stopped early (it was told to): the item that says so (a cancel error) ends
    what it produced. Used by the worker that owns ``generator``.
    """
    if generator._pair.refused:
        _put_last(generator, last())


def _put_last(generator: AsyncGenerator[T], item: T) -> None:
    """Queue ``item``, the producer's last, even while sends are refused for a cancel.

    The item that ends a producer's work (its error, the cancel that stopped it) is what the
    consumer needs most; only a consumer that closed the iterator does not get it.
    """
    pair = generator._pair
    if not pair.consumer_closed and not pair.producer_closed:
        pair.queue.put(item)
