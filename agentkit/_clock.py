"""The clock leases, TTLs and retention read: one small object, so tests can move time.

:class:`Clock` answers ``monotonic()`` (intervals: when a lease held in this process
expires) and ``time()`` (the wall clock: a lease or an age written down for other processes).
Stores take one as ``clock=``; :class:`agentkit.testing.ManualClock` is a clock a test moves
on by hand instead of sleeping until a lease runs out.
"""

from __future__ import annotations

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

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


SYSTEM_CLOCK = Clock()
