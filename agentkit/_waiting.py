"""One wait for a shared limit, and its report to the callbacks (framework-internal).

The public side is :mod:`agentkit.throttle` (:class:`~agentkit.ConcurrencyLimit`,
:class:`~agentkit.RateLimit`) and the Redis limits of :mod:`agentkit.integrations.redis`; they
all wait through :class:`Waiting`, so that every wait for a slot behaves the same: bounded by
the call's timeout, woken at once by an immediate cancel of the run (the run's
:class:`~agentkit._scope.RunScope` is asked, like every other wait of a run), and reported to
the run's ``on_limit_wait`` callbacks once it is over.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

import attrs

from agentkit._observe import RunInfo, fire
from agentkit._runctx import current_frame
from agentkit._scope import RunScope
from agentkit.errors import AgentKitValueError, SlotTimeoutError

__all__ = ["CallSite", "LimitWait", "Waiting", "admitted", "check_timeout", "report_wait"]

_log = logging.getLogger("agentkit")


class _Turn(Protocol):
    """A turn a limit handed out (a ``Slot``, a ``RateGrant``): how long it took to get."""

    @property
    def waited(self) -> float:
        """Seconds waited for it."""
        ...


T = TypeVar("T", bound=_Turn)
_monotonic = time.monotonic


def check_timeout(timeout: object) -> float | None:
    """``timeout`` as seconds (``None``: no limit); ``ValueError`` for anything else."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or math.isnan(timeout):
        raise AgentKitValueError(f"timeout must be a number of seconds or None (got {timeout!r})")
    return float(timeout)


@attrs.frozen
class LimitWait:
    """How long a call waited for a shared limit: what ``on_limit_wait`` callbacks receive.

    Reported once per wait that did not get its turn at once (a call admitted at once is
    not reported), after the wait: when the call got its turn, or when the wait failed.

    Attributes:
        limit: the limit waited for (a :class:`~agentkit.ConcurrencyLimit`, a
            :class:`~agentkit.RateLimit`, or one of their Redis counterparts).
        kind: ``"concurrency"`` (a free slot) or ``"rate"`` (room in the rate, or the end of
            a pause a server asked for with ``Retry-After``).
        seconds: how long the call waited.
        error: why the wait failed (a :class:`~agentkit.errors.SlotTimeoutError`, an
            :class:`~agentkit.AgentCancelledError`, a
            :class:`~agentkit.errors.SharedLimitUnavailableError`), ``None`` when the call got its
            turn.
    """

    limit: object
    kind: str
    seconds: float
    error: BaseException | None = None


class Waiting:
    """One wait for a shared limit, bounded by ``timeout`` and woken by a cancel or :meth:`wake`.

    Use it as a context manager around the wait: inside a run it registers with the run's
    scope, so an immediate cancel (or closing the run's iterator) ends the wait at once with
    :class:`~agentkit.AgentCancelledError`; entering it in a run that is being cancelled
    raises that error before any wait. :meth:`pause` waits; :meth:`wake` (from the thread
    that frees a slot) ends a pause early.
    """

    __slots__ = ("deadline", "event", "kind", "limit", "scope", "started", "timeout")

    def __init__(self, limit: object, kind: str, timeout: float | None) -> None:
        self.limit = limit
        self.kind = kind
        self.timeout = timeout
        self.started = _monotonic()
        self.deadline = None if timeout is None else self.started + timeout
        self.event = threading.Event()
        frame = current_frame()
        self.scope: RunScope | None = None if frame is None else frame.scope

    def __enter__(self) -> Waiting:
        if self.scope is not None:
            self.scope.open(self)  # raises the cancel error when the run is being cancelled
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.scope is not None:
            self.scope.closed(self)

    def close(self) -> None:
        """Wake the wait for a cancel (called by the run's scope, from any thread)."""
        self.event.set()

    def wake(self) -> None:
        """End a pause early: what the wait is for may be there now."""
        self.event.set()

    @property
    def waited(self) -> float:
        """Seconds since the wait began."""
        return _monotonic() - self.started

    def remaining(self) -> float | None:
        """Seconds left until the deadline (``None``: no deadline; may be negative)."""
        return None if self.deadline is None else self.deadline - _monotonic()

    def pause(self, seconds: float | None = None) -> None:
        """Wait up to ``seconds`` (``None``: until woken), never past the deadline.

        Raises:
            AgentCancelledError: the run was cancelled immediately.
            SlotTimeoutError: the deadline has passed.
        """
        left = self.remaining()
        if left is not None:
            if left <= 0:
                raise self.timed_out()
            seconds = left if seconds is None else min(seconds, left)
        self.event.wait(seconds)
        self.event.clear()
        if self.scope is not None:
            self.scope.check()

    def check(self) -> None:
        """Raise the cancel error when the run is being cancelled immediately."""
        if self.scope is not None:
            self.scope.check()

    def timed_out(self, needed: float | None = None) -> SlotTimeoutError:
        """The error of a wait whose deadline passed (or would pass after ``needed`` s more)."""
        waited = self.waited
        if needed is None:
            what = (
                f"waited {waited:.3g} s for its turn until its timeout of {self.timeout:.3g} s "
                "ran out"
            )
        else:
            what = (
                f"would have to wait {needed:.3g} s more for its turn, past its timeout of "
                f"{self.timeout:.3g} s"
            )
        hint = (
            "raise the limit, lower the load, or give the call a longer timeout"
            if self.kind == "concurrency"
            else "send fewer requests, raise the rate, or give the call a longer timeout"
        )
        return SlotTimeoutError(f"a call under {self.limit!r} {what}; {hint}", limit=self.limit,
                                waited=waited)


@attrs.frozen
class CallSite:
    """Who waits for a limit, as the callbacks name it: a model's or a tool's calls."""

    component: str  # "ChatModel" or "Tool"
    name: str  # the model's or the tool's name
    type_name: str  # its class name


def admitted(acquire: Callable[[], T], limit: object, kind: str, site: CallSite) -> T:
    """Take a turn with ``acquire()``; report the wait if there was one, or if it failed."""
    started = _monotonic()
    try:
        turn = acquire()
    except BaseException as error:
        report_wait(site, LimitWait(limit, kind, _monotonic() - started, error))
        raise
    if turn.waited > 0:
        report_wait(site, LimitWait(limit, kind, turn.waited))
    return turn


def report_wait(site: CallSite, wait: LimitWait) -> None:
    """Tell the current run's ``on_limit_wait`` handlers about ``wait``; outside a run, log it.

    The handlers get a :class:`~agentkit.RunInfo` naming the model or tool (``site``) and the
    agent calling it, as for the other model and tool callbacks.
    """
    frame = current_frame()
    if frame is None:
        _log.debug("agentkit: %s %r waited %.3f s for %r", site.component, site.name,
                   wait.seconds, wait.limit)
        return
    callbacks = frame.observers.callbacks
    if callbacks is None:
        return
    run_path = tuple(str(step) for step in frame.run_path)
    agent = run_path[-1] if run_path else ""  # the agent calling the model or the tool
    handlers = callbacks.for_agent(agent)
    if handlers:
        info = RunInfo(site.name, site.type_name, site.component, run_path, agent)
        fire(handlers, "on_limit_wait", info, wait)
