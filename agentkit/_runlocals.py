"""Run-local values and custom events of one ChatModelAgent run (framework-internal).

The public side is :func:`agentkit.set_run_local_value`, :func:`agentkit.get_run_local_value`
and :func:`agentkit.send_event`.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any

from agentkit.errors import AgentKitRuntimeError
from agentkit.events import AgentEvent

__all__ = ["RunLocals", "current_run_locals", "run_locals"]


class RunLocals:
    """The run-local values of one agent run and where its custom events go."""

    __slots__ = ("_at_end", "_lock", "_values", "emit")

    def __init__(self, emit: Callable[[AgentEvent], object]) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}
        self._at_end: list[Callable[[], object]] = []
        self.emit = emit

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default``."""
        with self._lock:
            return self._values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        """Keep ``value`` under ``key``."""
        with self._lock:
            self._values[key] = value

    def setdefault(self, key: str, make: Callable[[], Any]) -> Any:
        """The value of ``key``; when there is none, ``make()`` is kept under it (made once,
        also when several threads of the run ask at once)."""
        with self._lock:
            if key not in self._values:
                self._values[key] = make()
            return self._values[key]

    def at_end(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` when the agent run ends, however it ends (work the run
        started that must not outlive it is stopped there)."""
        with self._lock:
            self._at_end.append(callback)

    def end(self) -> None:
        """The agent run ended: call the :meth:`at_end` callbacks, last registered first."""
        with self._lock:
            callbacks, self._at_end = self._at_end, []
        for callback in reversed(callbacks):
            callback()


run_locals: contextvars.ContextVar[RunLocals | None] = contextvars.ContextVar(
    "agentkit_run_locals", default=None
)


def current_run_locals(what: str) -> RunLocals:
    """The run-local values of the current agent run; ``what`` names the caller in the error.

    Raises:
        RuntimeError: outside a ChatModelAgent run.
    """
    locals_ = run_locals.get()
    if locals_ is None:
        raise AgentKitRuntimeError(
            f"{what}() must be called within a ChatModelAgent run: from a middleware hook or "
            "a tool of an agent that is running"
        )
    return locals_
