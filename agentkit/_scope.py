"""The per-run cancel scope: cancel state, the tool-call pool and open model streams.

Framework-internal; the public side is :mod:`agentkit.cancel` (:class:`~agentkit.CancelHandle`,
:class:`~agentkit.CancelMode`, :func:`~agentkit.with_cancel`).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from agentkit.cancel import CancelMode
from agentkit.errors import AgentCancelledError

if TYPE_CHECKING:
    from agentkit.cancel import CancelHandle

_log = logging.getLogger("agentkit")


class Point(enum.Enum):
    """Places where a run checks for cancellation (framework-internal)."""

    STEP = "step"
    AFTER_CHAT_MODEL = "after_chat_model"
    AFTER_TOOL_CALLS = "after_tool_calls"
    TRANSITION = "transition"


class RunScope:
    """Per-run resources and cancel state (framework-internal).

    Owns the run's tool-call thread pool (created on first use, shut down when the run
    ends) and the model streams open right now (closed by an immediate cancel).
    """

    __slots__ = (
        "_closeables",
        "_executor",
        "_handles",
        "_lock",
        "_stop",
        "_timer",
        "escalated",
        "fired",
        "mode",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.mode: CancelMode | None = None
        self.escalated = False
        self.fired = False  # a cancel actually stopped the run
        self._closeables: set[Any] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._timer: threading.Timer | None = None
        self._handles: list[CancelHandle] = []
        self._stop = threading.Event()  # set by an immediate cancel: wakes cancellable waits

    # --- cancel state ---

    @property
    def cancelled(self) -> bool:
        """``True`` once any cancel was requested."""
        return self.mode is not None

    def request_cancel(self, mode: CancelMode, timeout: float | None = None) -> None:
        """Record a cancel request; an immediate one closes open streams."""
        with self._lock:
            if self.mode is CancelMode.IMMEDIATE:
                return
            self.mode = mode
            if mode is not CancelMode.IMMEDIATE and timeout is not None and self._timer is None:
                self._timer = threading.Timer(timeout, self._escalate)
                self._timer.daemon = True
                self._timer.start()
            closeables = list(self._closeables) if mode is CancelMode.IMMEDIATE else []
        if mode is CancelMode.IMMEDIATE:
            self._stop.set()
        for closeable in closeables:
            try:
                closeable.close()
            except Exception:  # a cancel never raises in the cancelling thread
                _log.debug("closing %r on cancel failed", closeable, exc_info=True)

    def _escalate(self) -> None:
        with self._lock:
            if self.mode is CancelMode.IMMEDIATE or self.mode is None:
                return
            self.escalated = True
        self.request_cancel(CancelMode.IMMEDIATE)

    @property
    def stop_event(self) -> threading.Event:
        """Set once an immediate cancel was requested (for waits that a cancel must wake)."""
        return self._stop

    @property
    def stopping(self) -> bool:
        """``True`` once an immediate cancel (or an escalated one) was requested."""
        return self._stop.is_set()

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; an immediate cancel ends the wait at once with the cancel error."""
        if self._stop.wait(seconds) if seconds > 0 else self._stop.is_set():
            self.fired = True
            raise AgentCancelledError(CancelMode.IMMEDIATE, self.escalated)

    def check(self, point: Point = Point.STEP) -> None:
        """Raise :class:`AgentCancelledError` if a cancel applies at ``point``."""
        mode = self.mode
        if mode is None:
            return
        if (
            mode is CancelMode.IMMEDIATE
            or point is Point.TRANSITION
            or (point is Point.AFTER_CHAT_MODEL and mode is CancelMode.AFTER_CHAT_MODEL)
            or (point is Point.AFTER_TOOL_CALLS and mode is CancelMode.AFTER_TOOL_CALLS)
        ):
            self.fired = True
            raise AgentCancelledError(mode, self.escalated)

    # --- resources ---

    def open(self, closeable: Any) -> None:
        """Track an open stream so an immediate cancel can close it."""
        with self._lock:
            immediate = self.mode is CancelMode.IMMEDIATE
            if not immediate:
                self._closeables.add(closeable)
        if immediate:
            closeable.close()
            self.fired = True
            raise AgentCancelledError(CancelMode.IMMEDIATE, self.escalated)

    def closed(self, closeable: Any) -> None:
        """Stop tracking a stream."""
        with self._lock:
            self._closeables.discard(closeable)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the run's thread pool (the caller copies its context)."""
        with self._lock:
            if self._executor is None:
                # Threads are created on demand, one per concurrently running call; the cap
                # only guards against runaway fan-out.
                self._executor = ThreadPoolExecutor(
                    max_workers=256, thread_name_prefix="agentkit-tool"
                )
            executor = self._executor
        return executor.submit(fn, *args)

    def attach(self, handle: CancelHandle) -> None:
        """Let ``handle`` cancel this run."""
        self._handles.append(handle)
        handle._attach(self)

    def finish(self) -> None:
        """Release the run's resources: join pool threads, stop the escalation timer."""
        with self._lock:
            executor, self._executor = self._executor, None
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            if timer is not threading.current_thread():
                timer.join()
        if executor is not None:
            executor.shutdown(wait=True)
        for handle in self._handles:
            handle._run_ended(self.fired)
