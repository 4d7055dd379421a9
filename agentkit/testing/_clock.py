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
    of such a test longer than the test runs (30 s and up). Example::

        clock = ManualClock()
        store = InMemoryCheckPointStore(clock=clock)
        store.acquire_lease("run-1", "alice", ttl=30)
        clock.advance(31)                     # the lease ran out
        assert store.acquire_lease("run-1", "bob", ttl=30)
    """

    __slots__ = ("_lock", "_monotonic", "_time")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._monotonic = time.monotonic()
        self._time = time.time()

    def monotonic(self) -> float:
        """The monotonic reading: where it started, plus every :meth:`advance`."""
        with self._lock:
            return self._monotonic

    def time(self) -> float:
        """The wall-clock reading: where it started, plus every :meth:`advance`."""
        with self._lock:
            return self._time

    def advance(self, seconds: float) -> None:
        """Move both readings on by ``seconds`` (``>= 0``)."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise AgentKitValueError(f"a clock moves on by seconds >= 0 (got {seconds!r})")
        with self._lock:
            self._monotonic += seconds
            self._time += seconds
