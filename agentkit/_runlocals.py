"""Run-local values and custom events of one ChatModelAgent run (framework-internal).

The public side is :func:`agentkit.set_run_local_value`, :func:`agentkit.get_run_local_value`,
:func:`agentkit.delete_run_local_value` and :func:`agentkit.send_event`. The values are part of
the agent's saved state (a resumed run starts with them); the objects the framework keeps per
run (:meth:`RunLocals.setdefault`) are not.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping
from typing import Any

from agentkit._events import AgentEvent
from agentkit.errors import AgentKitRuntimeError

__all__ = ["RunLocals", "current_run_locals", "run_locals"]


class RunLocals:
    """The run-local values of one agent run and where its custom events go.

    ``values``: the values a resumed run starts with (copied).
    """

    __slots__ = ("_at_end", "_lock", "_objects", "_values", "emit")

    def __init__(
        self, emit: Callable[[AgentEvent], object], values: Mapping[str, Any] | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, Any] = dict(values or {})
        self._objects: dict[str, Any] = {}  # the framework's, never saved
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

    def delete(self, key: str) -> None:
        """Forget the value of ``key`` (nothing happens when there is none)."""
        with self._lock:
            self._values.pop(key, None)

    def snapshot(self) -> dict[str, Any]:
        """The values, as a new dict (what the agent's saved state keeps)."""
        with self._lock:
            return dict(self._values)

    def setdefault(self, key: str, make: Callable[[], Any]) -> Any:
        """The framework's object ``key`` of this run; when there is none, ``make()`` is kept
        under it (made once, also when several threads of the run ask at once). These objects
        (a task manager, a lock) live as long as the run and are never saved."""
        with self._lock:
            if key not in self._objects:
                self._objects[key] = make()
            return self._objects[key]

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
