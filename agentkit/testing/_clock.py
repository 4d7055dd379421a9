"""A clock a test moves by hand (see :mod:`agentkit._clock`)."""

from __future__ import annotations

import threading
import time

from agentkit._clock import Clock
from agentkit.errors import AgentKitValueError

__all__ = ["ManualClock"]


class ManualClock(Clock):
    """A :class:`Clock` that stands still until :meth:`advance` moves it: a test waits out a
    lease or a TTL at once instead of sleeping.

    It starts at the system's times (so ages compare with real file times) and is
    thread-safe. A :class:`~agentkit.checkpoint.RedisCheckPointStore` on it decides when a
    lease expired by this clock, but Redis still deletes the key by its own: keep the leases
    of such a test longer than the test runs (30 s and up). A thread waiting for a time on
    this clock (:meth:`wait_until`: the lease refresher's) is woken by :meth:`advance`, so a
    refresh that falls due is made without any real time passing. Example::

        clock = ManualClock()
        store = InMemoryCheckPointStore(clock=clock)
        store.acquire_lease("run-1", "alice", ttl=30)
        clock.advance(31)                     # the lease ran out
        assert store.acquire_lease("run-1", "bob", ttl=30)
    """

    __slots__ = ("_lock", "_monotonic", "_time", "_waiters", "_waiters_changed")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters_changed = threading.Condition(self._lock)
        self._monotonic = time.monotonic()
        self._time = time.time()
        self._waiters: list[threading.Condition] = []  # one entry per thread in wait_until()

    def monotonic(self) -> float:
        """The monotonic reading: where it started, plus every :meth:`advance`."""
        with self._lock:
            return self._monotonic

    def time(self) -> float:
        """The wall-clock reading: where it started, plus every :meth:`advance`."""
        with self._lock:
            return self._time

    def advance(self, seconds: float) -> None:
        """Move both readings on by ``seconds`` (``>= 0``), and wake the threads waiting in
        :meth:`wait_until` (each looks at the time again)."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise AgentKitValueError(f"a clock moves on by seconds >= 0 (got {seconds!r})")
        with self._lock:
            self._monotonic += seconds
            self._time += seconds
            waiters = set(self._waiters)
        for condition in waiters:
            with condition:
                condition.notify_all()

    def wait_until(self, condition: threading.Condition, deadline: float) -> None:
        """Wait on ``condition`` (held by the caller) until it is notified, or until an
        :meth:`advance` (from another thread) moved :meth:`monotonic` on; at once if it is at
        ``deadline`` already.

        No real time counts here: the wait ends only when the condition is notified or the
        clock is moved (the caller looks at the time again, and waits again if it is early).
        """
        with self._lock:
            if self._monotonic >= deadline:
                return
            # Registered before the caller lets go of `condition`: an advance() from now on
            # notifies it only once the caller waits, so no move of the clock is missed.
            self._waiters.append(condition)
            self._waiters_changed.notify_all()
        try:
            condition.wait()
        finally:
            with self._lock:
                self._waiters.remove(condition)

    def wait_for_waiters(self, count: int = 1, timeout: float = 30.0) -> bool:
        """Wait until ``count`` threads wait for a time on this clock (in :meth:`wait_until`),
        at most ``timeout`` real seconds; ``False`` if they did not.

        A test moves the clock on once the thread that acts on it (the lease refresher) is
        back to waiting, so that the next :meth:`advance` is measured from where that thread
        left off, not from a move made while it was still busy::

            clock.advance(10)                 # a refresh falls due
            lease_refreshed.wait(30)          # the refresh was made...
            assert clock.wait_for_waiters()   # ...and the next one scheduled
            clock.advance(10)
        """
        with self._waiters_changed:
            return self._waiters_changed.wait_for(lambda: len(self._waiters) >= count, timeout)
