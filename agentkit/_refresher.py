"""The one thread that keeps a process's leases and locks alive while their runs live.

A durable run holds a lease on its checkpoint id, a run in a Redis conversation holds the
conversation's lock; both expire unless refreshed every third of their ttl. Rather than a
thread each (a thousand live runs, a thousand sleeping threads), every such holder is a
:class:`Refreshed` registered with :data:`REFRESHER`, whose single ``agentkit-lease`` thread
refreshes each one when it is due. The thread starts with the first holder and is retired,
and joined, when the last one is removed (unless that removal comes from the thread itself,
in a callback of a refresh); a holder added meanwhile starts a new one. So no thread outlives
the runs it serves.

One thread serves all, so a refresh that hangs (a store that does not answer) delays the
ones behind it; a holder whose refresh comes too late finds out from its store (the lease
expired and was taken, the lock is gone) and reacts as it would to any lost refresh.

The schedule is read on a :class:`~agentkit._clock.Clock`: :data:`REFRESHER` reads the
system's; :func:`refresher_for` gives the refresher of another clock (a test's
:class:`~agentkit.testing.ManualClock`: moving it on makes the refreshes that fall due, at
once, with no real time passing). Due times on two clocks cannot be compared, so each clock
has its refresher (and its thread, while it has holders). The thread waits in
:meth:`Clock.wait_until <agentkit._clock.Clock.wait_until>`, on the refresher's condition:
an added holder, a retirement or a move of a manual clock wakes it; it never sleeps.
"""

from __future__ import annotations

import abc
import heapq
import itertools
import logging
import os
import threading
import weakref

from agentkit._clock import SYSTEM_CLOCK, Clock

__all__ = ["REFRESHER", "Refreshed", "Refresher", "refresher_for"]

_log = logging.getLogger("agentkit")


class Refreshed(abc.ABC):
    """Something the refreshing thread refreshes every :attr:`refresh_interval` seconds."""

    __slots__ = ("refresh_stopped",)

    def __init__(self) -> None:
        self.refresh_stopped = False  # set under the refresher's lock by Refresher.remove

    @property
    @abc.abstractmethod
    def refresh_interval(self) -> float:
        """Seconds between two refreshes (a third of the ttl)."""

    @abc.abstractmethod
    def refresh_once(self) -> bool:
        """Refresh now, in the refreshing thread; ``False``: never again (it was lost).

        Must not raise, and must return quickly: every other holder waits for it.
        """


class Refresher:
    """Refreshes every registered :class:`Refreshed` when due on ``clock``, from one thread.

    A holder being refreshed stays in flight until its refresh returns: :meth:`remove`
    waits for that, so what a holder gives back after its removal (a lease, a lock) is never
    given back under a refresh of it.
    """

    __slots__ = ("__weakref__", "_due", "_in_flight", "_order", "_thread", "_wake", "clock", "live")

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self._wake = threading.Condition(threading.Lock())
        self._due: list[tuple[float, int, Refreshed]] = []  # a heap
        self._order = itertools.count()  # ties in due time: first added, first refreshed
        self.live = 0
        self._in_flight: set[Refreshed] = set()  # being refreshed (by a retired thread, too)
        self._thread: _RefreshThread | None = None

    def forget_all(self) -> None:
        """Start empty, with a new lock: in a forked child, where the thread is not.

        What the parent kept belongs to its runs, whose threads the child does not have; a
        lock another parent thread held at the fork would never be released here.
        """
        self._wake = threading.Condition(threading.Lock())
        self._due = []
        self.live = 0
        self._in_flight = set()
        self._thread = None

    def add(self, item: Refreshed) -> None:
        """Refresh ``item`` every :attr:`~Refreshed.refresh_interval` seconds from now on."""
        with self._wake:
            self._push(item)
            self.live += 1
            if self._thread is None:
                self._thread = _RefreshThread(self)
                self._thread.start()
            elif self._due[0][2] is item:  # due before every other: the thread waits less
                self._wake.notify()

    def remove(self, item: Refreshed) -> None:
        """Stop refreshing ``item``, after a refresh of it under way (idempotent).

        A ``KeyboardInterrupt`` in that wait still takes ``item`` out (and retires the thread
        after the last one), then propagates.
        """
        retired = None
        with self._wake:
            if item.refresh_stopped:
                return
            item.refresh_stopped = True  # its heap entry is dropped when it comes up
            try:
                # From a refreshing thread (a callback that removes a holder) nothing is waited for.
                while item in self._in_flight and not isinstance(
                    threading.current_thread(), _RefreshThread
                ):
                    self._wake.wait()
            finally:
                self.live -= 1
                if not self.live:
                    retired, self._thread = self._thread, None
                    self._due.clear()
                    if retired is not None:
                        retired.retired = True
                    self._wake.notify_all()
        if retired is not None and retired is not threading.current_thread():
            retired.join()

    def _push(self, item: Refreshed) -> None:
        due = self.clock.monotonic() + item.refresh_interval
        heapq.heappush(self._due, (due, next(self._order), item))

    def serve(self, thread: _RefreshThread) -> None:
        """The thread's loop: refresh each holder when due, until ``thread`` is retired."""
        wake = self._wake
        while True:
            with wake:
                item = self._next_due(thread)
                if item is None:
                    return
                self._in_flight.add(item)
            try:
                keep = item.refresh_once()
            except Exception:  # a bug in a holder: the others must go on being refreshed
                _log.exception("agentkit: refreshing %r failed; it is tried again when due", item)
                keep = True
            with wake:
                self._in_flight.discard(item)
                if keep and not item.refresh_stopped:
                    self._push(item)
                elif item.refresh_stopped:
                    wake.notify_all()  # its remove() may be waiting for this refresh

    def _next_due(self, thread: _RefreshThread) -> Refreshed | None:
        """Wait (holding the lock) for the next holder due; ``None`` once ``thread`` retired."""
        due = self._due
        while not thread.retired:
            if due and due[0][2].refresh_stopped:
                heapq.heappop(due)
                continue
            if not due:
                self._wake.wait()  # woken by add() or by the retirement
                continue
            when = due[0][0]
            if self.clock.monotonic() >= when:
                return heapq.heappop(due)[2]
            self.clock.wait_until(self._wake, when)  # or woken by add(), a retirement
        return None


class _RefreshThread(threading.Thread):
    """The ``agentkit-lease`` thread of a :class:`Refresher`; ``retired`` ends it."""

    def __init__(self, refresher: Refresher) -> None:
        super().__init__(name="agentkit-lease", daemon=True)
        self.refresher = refresher
        self.retired = False

    def run(self) -> None:
        self.refresher.serve(self)


REFRESHER = Refresher()
"""The process's refresher, on the system clock (a forked child starts with an empty one)."""

# The refreshers of other clocks, while a holder or their thread keeps them.
_BY_CLOCK: weakref.WeakValueDictionary[Clock, Refresher] = weakref.WeakValueDictionary()
_BY_CLOCK_LOCK = threading.Lock()


def refresher_for(clock: Clock) -> Refresher:
    """The refresher whose schedule is read on ``clock``: :data:`REFRESHER` for the system's
    (any plain :class:`~agentkit._clock.Clock`), else one per clock object.

    A holder removes itself from the refresher it was added to: it keeps the one returned.
    """
    if type(clock) is Clock:
        return REFRESHER
    with _BY_CLOCK_LOCK:
        refresher = _BY_CLOCK.get(clock)
        if refresher is None:
            refresher = _BY_CLOCK[clock] = Refresher(clock)
        return refresher


def _forget_all_in_child() -> None:
    global _BY_CLOCK_LOCK
    _BY_CLOCK_LOCK = threading.Lock()  # a parent thread may have held it at the fork
    REFRESHER.forget_all()
    for refresher in list(_BY_CLOCK.values()):
        refresher.forget_all()


os.register_at_fork(after_in_child=_forget_all_in_child)
