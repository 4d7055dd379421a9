"""Cancellation: :class:`CancelHandle` and :class:`CancelMode`.

Cancellation is cooperative. A run checks for it at step boundaries: before each model call,
before each tool call, between sub-agents. An immediate cancel also closes the run's open
model streams, so a run blocked reading a slow response stops at once.
"""

from __future__ import annotations

import enum
import threading
from typing import Protocol

from agentkit._lazy import present
from agentkit._persist import persisted
from agentkit.errors import AgentKitTimeoutError, AgentKitTypeError, AgentKitValueError

__all__ = ["CancelHandle", "CancelMode"]


@persisted("agentkit.CancelMode")
class CancelMode(enum.Enum):
    """When a cancel takes effect."""

    IMMEDIATE = "immediate"
    """Stop at the next step boundary and abort open model streams."""
    AFTER_CHAT_MODEL = "after_chat_model"
    """Stop after a model call that asked for tools, before the tools run."""
    AFTER_TOOL_CALLS = "after_tool_calls"
    """Stop after a round of tool calls, before the next model call."""
    ANY_SAFE_POINT = "any_safe_point"
    """Stop at whichever safe point comes first: after a model call that asked for tools, or
    after a round of tool calls (Eino's ``AnySafePoint``)."""

    def join(self, other: CancelMode) -> CancelMode:
        """The mode of two cancel requests made on one run: an immediate one wins; two
        different safe points join into :attr:`ANY_SAFE_POINT` (the run stops at either)."""
        if self is CancelMode.IMMEDIATE or other is CancelMode.IMMEDIATE:
            return CancelMode.IMMEDIATE
        return self if self is other else CancelMode.ANY_SAFE_POINT


class _Cancellable(Protocol):
    """What a handle cancels: the run's scope (``agentkit._scope.RunScope``)."""

    def request_cancel(self, mode: CancelMode, timeout: float | None = None) -> None:
        """Record a cancel request."""


class CancelHandle:
    """Cancels a run from any thread.

    Example::

        handle = CancelHandle()
        events = runner.query("long task", with_cancel(handle))
        ...
        handle.cancel(CancelMode.AFTER_TOOL_CALLS, timeout=5.0)
        handle.wait()

    A handle belongs to one run at a time; a cancel requested before the run starts takes
    effect as soon as it does. Repeated requests add up, as in Eino: an immediate one wins,
    two different safe points join into ``CancelMode.ANY_SAFE_POINT``, the earliest
    escalation deadline counts.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scope: _Cancellable | None = None
        self._pending: tuple[CancelMode, float | None] | None = None
        self._stopped = threading.Event()
        self._took_effect = False

    def cancel(self, mode: CancelMode = CancelMode.IMMEDIATE, timeout: float | None = None) -> bool:
        """Ask the run to stop; returns ``False`` if it already ended.

        ``timeout`` (seconds) applies to the safe-point modes: if the safe point has not come
        by then, the cancel escalates to an immediate one.
        """
        if not isinstance(mode, CancelMode):
            raise AgentKitTypeError(f"mode must be a CancelMode (got {mode!r})")
        if timeout is not None and timeout < 0:
            raise AgentKitValueError(f"timeout must be >= 0 seconds (got {timeout})")
        with self._lock:
            if self._stopped.is_set():
                return False
            scope = self._scope
            if scope is None:
                self._pending = _merged(self._pending, mode, timeout)
                return True
        scope.request_cancel(mode, timeout)
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run stopped; ``True`` if the cancel took effect, ``False`` otherwise.

        Raises:
            TimeoutError: the run did not stop within ``timeout`` seconds.
        """
        if not self._stopped.wait(timeout):
            raise AgentKitTimeoutError(f"the run did not stop within {timeout} seconds")
        return self._took_effect

    def _attach(self, scope: _Cancellable) -> None:
        with self._lock:
            self._scope = scope
            self._stopped.clear()
            self._took_effect = False
            pending, self._pending = self._pending, None
        if pending is not None:
            scope.request_cancel(*pending)

    def _run_ended(self, cancelled: bool) -> None:
        with self._lock:
            self._scope = None
            self._took_effect = cancelled
        self._stopped.set()


def _merged(
    pending: tuple[CancelMode, float | None] | None, mode: CancelMode, timeout: float | None
) -> tuple[CancelMode, float | None]:
    """Two requests made before the run started, as one (the shorter timeout counts)."""
    if pending is None:
        return mode, timeout
    joined = pending[0].join(mode)
    timeouts = [t for t in (pending[1], timeout) if t is not None]
    return joined, (min(timeouts) if timeouts and joined is not CancelMode.IMMEDIATE else None)

present(
    (
        CancelHandle,
        CancelMode,
    ),
    "agentkit",
)
