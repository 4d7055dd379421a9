"""The per-run scope: cancel state, the run's thread pool and open model streams.

Framework-internal; the public side is :mod:`agentkit.cancel` (:class:`~agentkit.CancelHandle`,
:class:`~agentkit.CancelMode`; :func:`~agentkit.with_cancel` is in :mod:`agentkit.options`).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from agentkit._cancel import CancelHandle, CancelMode
from agentkit._spawn import RunPool
from agentkit.errors import AgentCancelledError

_log = logging.getLogger("agentkit")

T = TypeVar("T")


class Point(enum.Enum):
    """Places where a run checks for cancellation (framework-internal)."""

    STEP = "step"
    AFTER_CHAT_MODEL = "after_chat_model"
    AFTER_TOOL_CALLS = "after_tool_calls"
    TRANSITION = "transition"


_SAFE_POINTS = (Point.AFTER_CHAT_MODEL, Point.AFTER_TOOL_CALLS)


class Closeable(Protocol):
    """Something an immediate cancel closes (a model stream, a wait to wake)."""

    def close(self) -> object:
        """Stop at once; must not block and may be called from any thread."""


class RunScope:
    """Per-run resources and cancel state (framework-internal).

    Owns the run's thread pool (:meth:`spawn`; created on first use, joined when the run
    ends) and the model streams open right now (closed by an immediate cancel).
    """

    __slots__ = (
        "_closeables",
        "_deadline",
        "_ended",
        "_escalated",
        "_escalating",
        "_fired",
        "_handles",
        "_lock",
        "_mode",
        "_pool",
        "_protected",
        "_stop",
        "_stopped",
        "_unsettled",
        "_wake",
        "_woke",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mode: CancelMode | None = None
        self._escalated = False
        self._fired = False  # a cancel actually stopped the run
        self._closeables: set[Closeable] = set()
        self._woke = False  # an immediate cancel closed a wait registered with open()
        self._pool = RunPool()  # starts no thread until work is spawned
        self._escalating = False  # a wait to escalate a safe-point cancel was spawned
        self._handles: list[CancelHandle] = []
        # Made when first needed (most runs never cancel, sleep or escalate; a run in flight
        # is a few KiB, and these were a third of it): the event an immediate cancel sets to
        # wake cancellable waits (_stopped says it was set, for an event made later), and
        # the condition that wakes the escalation wait (ended, or an earlier deadline).
        self._stop: threading.Event | None = None
        self._stopped = False
        self._wake: threading.Condition | None = None
        self._ended = False  # set by finish()
        self._deadline: float | None = None  # when a safe-point cancel escalates (monotonic)
        # An immediate cancel made by a signal handler (Ctrl-C), whose waits are not woken
        # yet: a handler takes no lock (the thread it interrupted may hold it), so the next
        # call of this scope from ordinary code wakes them (settle()).
        self._unsettled = False
        self._protected = 0  # sections a Ctrl-C must not cut (a checkpoint being saved)

    # --- cancel state ---

    @property
    def mode(self) -> CancelMode | None:
        """The cancel requested (``None``: none)."""
        return self._mode

    @property
    def escalated(self) -> bool:
        """``True`` once a safe-point cancel escalated to an immediate one after its timeout."""
        return self._escalated

    @property
    def fired(self) -> bool:
        """``True`` once the cancel took effect: it stopped the run."""
        return self._fired

    @property
    def cancelled(self) -> bool:
        """``True`` once any cancel was requested."""
        return self._mode is not None

    def request_cancel(self, mode: CancelMode, timeout: float | None = None) -> None:
        """Record a cancel request; an immediate one wakes every wait of the run (it closes
        the streams and waits registered with :meth:`open`).

        Requests add up (Eino's merge): an immediate one wins, two different safe points join
        into ``CancelMode.ANY_SAFE_POINT``, and the earliest escalation deadline counts.
        """
        if self._unsettled:
            self.settle()
            return
        with self._lock:
            if self._mode is CancelMode.IMMEDIATE:
                return
            mode = mode if self._mode is None else self._mode.join(mode)
            self._mode = mode
            if mode is not CancelMode.IMMEDIATE and timeout is not None:
                self._escalate_by(time.monotonic() + timeout)
            closeables = list(self._closeables) if mode is CancelMode.IMMEDIATE else []
            self._woke = self._woke or bool(closeables)
        if mode is CancelMode.IMMEDIATE:
            self._set_stop()
        for closeable in closeables:
            try:
                closeable.close()
            except Exception:  # a cancel never raises in the cancelling thread
                _log.debug("closing %r on cancel failed", closeable, exc_info=True)

    def interrupt(self) -> None:
        """Cancel the run at once from a signal handler (Ctrl-C); takes no lock.

        The run's checks raise from now on; the waits an immediate cancel wakes are woken by
        :meth:`settle`, which every other method of the scope calls first, from ordinary code.
        (A signal handler runs in the middle of whatever the main thread was doing, maybe
        holding this scope's lock or a stream's: it must not wait for a lock.)
        """
        if self._mode is not CancelMode.IMMEDIATE and not self._ended:
            self._mode = CancelMode.IMMEDIATE
            self._unsettled = True

    def settle(self) -> None:
        """Wake the waits of a cancel made by :meth:`interrupt`, if it has not been done yet.

        Call it from ordinary code (never from a signal handler) before waiting for work of
        the run that a cancel must stop.
        """
        with self._lock:
            unsettled, self._unsettled = self._unsettled, False
            if not unsettled:
                return
            self._mode = CancelMode.IMMEDIATE
            closeables = list(self._closeables)
            self._woke = self._woke or bool(closeables)
        self._set_stop()
        for closeable in closeables:
            try:
                closeable.close()
            except Exception:  # a cancel never raises in the cancelling thread
                _log.debug("closing %r on cancel failed", closeable, exc_info=True)

    @property
    def woke_a_wait(self) -> bool:
        """``True`` once an immediate cancel closed a wait registered with :meth:`open`.

        Such a wait ends when closed (an ``async def`` tool's task, an
        :func:`~agentkit.abort_on_cancel` block), so the work behind it is ending: a caller
        about to abandon it can wait a little for its cleanup.
        """
        return self._woke

    @property
    def protected(self) -> bool:
        """``True`` while the run is in a section a Ctrl-C must not cut (see :meth:`protect`)."""
        return self._protected > 0

    def protect(self) -> _Protected:
        """A ``with`` block a Ctrl-C must not cut: the run saving its checkpoint.

        A Ctrl-C that arrives meanwhile waits for the block to end (see ``agentkit._ctrlc``).
        """
        return _Protected(self)

    def _escalate_by(self, deadline: float) -> None:
        """Escalate the cancel at ``deadline`` unless an earlier one is set (lock held)."""
        if self._ended or (self._deadline is not None and self._deadline <= deadline):
            return
        self._deadline = deadline
        if self._wake is None:
            self._wake = threading.Condition(self._lock)
        if self._escalating:
            self._wake.notify_all()  # the waiting escalation takes the earlier deadline
            return
        self._escalating = True
        self._pool.spawn(self._escalate_at_deadline, name="agentkit-cancel-escalation")

    def _escalate_at_deadline(self) -> None:
        with self._lock:
            wake = self._wake
            assert wake is not None  # made before this wait was spawned
            while not self._ended:
                left = (self._deadline or 0.0) - time.monotonic()
                if left <= 0:
                    break
                wake.wait(left)
            if self._ended:
                return
        self._escalate()

    def _escalate(self) -> None:
        with self._lock:
            if self._mode is CancelMode.IMMEDIATE or self._mode is None:
                return
            self._escalated = True
        self.request_cancel(CancelMode.IMMEDIATE)

    def _set_stop(self) -> None:
        """Mark the immediate cancel as made and wake the waits on the stop event."""
        # With stop_event: whichever of the two runs second sees the other's write, so
        # an event made while the cancel is being made is set all the same.
        self._stopped = True
        event = self._stop
        if event is not None:
            event.set()

    @property
    def stop_event(self) -> threading.Event:
        """Set once an immediate cancel was made (for waits that a cancel must wake).

        Made on first use, set at once if the cancel was made before.
        """
        event = self._stop
        if event is None:
            with self._lock:
                event = self._stop
                if event is None:
                    event = self._stop = threading.Event()
                    if self._stopped:
                        event.set()
        return event

    def stop_requested(self) -> bool:
        """``True`` once an immediate cancel was made (its waits are being woken)."""
        return self._stopped

    @property
    def stopping(self) -> bool:
        """``True`` once an immediate cancel (or an escalated one) was requested."""
        # _stopped is set only after the mode became immediate: a run without a cancel
        # (every step asks) answers with the first test.
        return self._mode is CancelMode.IMMEDIATE and self._stopped

    def cancel_error(self) -> AgentCancelledError:
        """The error that ends a run stopped by its cancel (the cancel takes effect)."""
        if self._unsettled:
            self.settle()
        self._fired = True
        return AgentCancelledError(self._mode, self._escalated)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; an immediate cancel ends the wait at once with the cancel error."""
        if self._unsettled:
            self.settle()
        if self.stop_event.wait(seconds) if seconds > 0 else self._stopped:
            raise self.cancel_error()

    def check(self, point: Point = Point.STEP) -> None:
        """Raise :class:`AgentCancelledError` if a cancel applies at ``point``.

        The one check of a run: every step boundary and every woken wait asks it. A cancel
        stays requested, so after an ``AgentCancelledError`` that someone caught, the next
        check raises again.
        """
        mode = self._mode
        if mode is None:
            return
        if (
            mode is CancelMode.IMMEDIATE
            or point is Point.TRANSITION
            or (point is Point.AFTER_CHAT_MODEL and mode is CancelMode.AFTER_CHAT_MODEL)
            or (point is Point.AFTER_TOOL_CALLS and mode is CancelMode.AFTER_TOOL_CALLS)
            or (mode is CancelMode.ANY_SAFE_POINT and point in _SAFE_POINTS)
        ):
            raise self.cancel_error()

    def check_failure(self, error: BaseException) -> None:
        """A wait of the run failed with ``error``: raise the cancel error instead when an
        immediate cancel made it fail (it closed the stream or connection waited on)."""
        if self._mode is CancelMode.IMMEDIATE:
            if isinstance(error, AgentCancelledError):
                self._fired = True
                raise error
            raise self.cancel_error() from error

    # --- resources ---

    def open(self, closeable: Closeable) -> None:
        """Register a wait an immediate cancel must wake: it calls ``closeable.close()``.

        Raises:
            AgentCancelledError: the run is being cancelled already (``close()`` was called).
        """
        if self._unsettled:
            self.settle()
        with self._lock:
            immediate = self._mode is CancelMode.IMMEDIATE
            if not immediate:
                self._closeables.add(closeable)
        if immediate:
            closeable.close()
            raise self.cancel_error()

    def closed(self, closeable: Closeable) -> None:
        """Stop tracking a stream."""
        if self._unsettled:
            self.settle()
        with self._lock:
            self._closeables.discard(closeable)

    def spawn(self, fn: Callable[..., T], *args: object, name: str) -> Future[T]:
        """Run ``fn(*args)`` on a thread of the run, in a copy of the caller's context.

        The one way code inside a run starts concurrent work: the thread is named ``name``
        and sees the caller's run frame (session values, run path, this cancel scope); the
        future carries the result or the exception back. The run's pool grows on demand, so
        spawned work never waits for a free thread (work that waits for work it spawned
        cannot deadlock), and :meth:`finish` joins every thread.

        Raises:
            RunEndedError: the run already ended.
        """
        if self._unsettled:
            self.settle()
        return self._pool.spawn(fn, *args, name=name)

    def release(self, future: Future[Any]) -> None:
        """Let the run end without waiting for the spawned work behind ``future``.

        For a tool call abandoned after its time limit: its thread ends on its own when the
        call returns (see ``agentkit.agents._react.call_with_timeout``).
        """
        self._pool.release(future)

    def attach(self, handle: CancelHandle) -> None:
        """Let ``handle`` cancel this run."""
        self._handles.append(handle)
        handle._attach(self)

    def finish(self) -> None:
        """Release the run's resources: stop the escalation wait, join the spawned threads."""
        if self._unsettled:
            self.settle()
        with self._lock:
            self._ended = True
            if self._wake is not None:
                self._wake.notify_all()
        self._pool.close()
        for handle in self._handles:
            handle._run_ended(self._fired)


class _Protected:
    """The ``with`` block of :meth:`RunScope.protect`."""

    __slots__ = ("_scope",)

    def __init__(self, scope: RunScope) -> None:
        self._scope = scope

    def __enter__(self) -> None:
        scope = self._scope
        with scope._lock:
            scope._protected += 1

    def __exit__(self, *exc_info: object) -> None:
        scope = self._scope
        with scope._lock:
            scope._protected -= 1
