"""The clock leases, TTLs and retention read: one small object, so tests can move time.

:class:`Clock` answers ``monotonic()`` (intervals: when a lease held in this process
expires) and ``time()`` (the wall clock: a lease or an age written down for other processes).
Stores take one as ``clock=``, and so do the Redis limits' slot leases and the Celery
watcher's lease checks; the lease refresher reads its schedule on the clock of the lease it
keeps. :class:`agentkit.testing.ManualClock` is a clock a test moves on by hand instead of
sleeping until a lease runs out; :meth:`Clock.wait_until` is how a thread that waits for a
time on the clock is woken when a test moves it.
"""

from __future__ import annotations

import math
import threading
import time

__all__ = ["SYSTEM_CLOCK", "Clock"]


class Clock:
    """The system's clocks (``time.monotonic`` and ``time.time``); subclass to change them."""

    __slots__ = ()

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for intervals)."""
        return time.monotonic()

    def time(self) -> float:
        """Seconds since the epoch (for times written down, read by other processes)."""
        return time.time()

    def wait_until(self, condition: threading.Condition, deadline: float) -> None:
        """Wait on ``condition`` (held by the caller) until it is notified or :meth:`monotonic`
        reaches ``deadline`` (``inf``: until notified).

        It may return early, as :meth:`threading.Condition.wait` may: the caller looks at the
        time again. A subclass whose time does not run with the system's
        (:class:`agentkit.testing.ManualClock`) wakes the waiter when its time moves.
        """
        left = deadline - self.monotonic()
        if left > 0:
            condition.wait(None if math.isinf(left) else left)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


SYSTEM_CLOCK = Clock()
