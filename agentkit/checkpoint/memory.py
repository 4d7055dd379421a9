"""A checkpoint store in a dict: for tests, notebooks and single-process runs."""

from __future__ import annotations

import threading

from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit.checkpoint.base import (
    DEFAULT_LEASE_TTL,
    DEFAULT_MAX_BYTES,
    StoreLimits,
    _check_data,
    _check_id,
    _check_owner,
    _check_size,
    _check_ttl,
    _steps_too_large,
)

__all__ = ["InMemoryCheckPointStore"]


class InMemoryCheckPointStore(StoreLimits):
    """Checkpoints kept in memory, lost when the process ends; thread-safe, with leases.

    Leases are exclusive among the threads of this process that share the store object and
    last ``lease_ttl`` seconds unless refreshed (on ``clock``, the system's by default; a
    test passes :class:`agentkit.testing.ManualClock`); ``set`` refuses data over ``max_bytes``. Its
    namespace is ``""``: checkpoints are signed with their id only. It keeps step records
    (:class:`~agentkit.checkpoint.JournalingCheckPointStore`) in a list per id.

    Example::

        store = InMemoryCheckPointStore()
        runner = Runner(agent, checkpoint_store=store)
        store.get("run-1")   # the checkpoint bytes after an interrupted run, else None
    """

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._set_limits(max_bytes, lease_ttl)
        self._clock = clock
        self._lock = threading.Lock()
        self._data: dict[str, bytes] = {}
        self._steps: dict[str, list[bytes]] = {}
        # checkpoint id -> (owner, clock.monotonic() deadline)
        self._leases: dict[str, tuple[str, float]] = {}

    @property
    def namespace(self) -> str:
        """``""``: checkpoints kept in memory are bound to their id only."""
        return ""

    def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes stored under ``checkpoint_id``, or ``None``."""
        _check_id(checkpoint_id)
        with self._lock:
            return self._data.get(checkpoint_id)

    def set(self, checkpoint_id: str, data: bytes) -> None:
        """Store a copy of ``data`` under ``checkpoint_id``."""
        _check_id(checkpoint_id)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        with self._lock:
            self._data[checkpoint_id] = data

    def delete(self, checkpoint_id: str) -> None:
        """Remove the checkpoint; an unknown id is not an error."""
        _check_id(checkpoint_id)
        with self._lock:
            self._data.pop(checkpoint_id, None)
            self._steps.pop(checkpoint_id, None)

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """Append the step record ``data`` to ``checkpoint_id``'s (``sync`` changes nothing)."""
        _check_id(checkpoint_id)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        with self._lock:
            self._steps.setdefault(checkpoint_id, []).append(data)

    def read_steps(self, checkpoint_id: str) -> list[bytes]:
        """Return the step records of ``checkpoint_id``, oldest first."""
        _check_id(checkpoint_id)
        with self._lock:
            steps = list(self._steps.get(checkpoint_id, ()))
        size = sum(map(len, steps))
        if size > self._max_bytes:
            raise _steps_too_large(checkpoint_id, size, self._max_bytes)
        return steps

    def delete_steps(self, checkpoint_id: str) -> None:
        """Remove the step records of ``checkpoint_id``."""
        _check_id(checkpoint_id)
        with self._lock:
            self._steps.pop(checkpoint_id, None)

    def acquire_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool:
        """Lease ``checkpoint_id`` for ``owner``.

        See :class:`~agentkit.checkpoint.LeasingCheckPointStore`.
        """
        _check_id(checkpoint_id)
        _check_owner(owner)
        _check_ttl(ttl)
        now = self._clock.monotonic()
        with self._lock:
            current = self._leases.get(checkpoint_id)
            if current is not None and current[0] != owner and current[1] > now:
                return False
            self._leases[checkpoint_id] = (owner, now + ttl)
            return True

    def release_lease(self, checkpoint_id: str, owner: str) -> None:
        """Release the lease if ``owner`` holds it."""
        _check_id(checkpoint_id)
        with self._lock:
            current = self._leases.get(checkpoint_id)
            if current is not None and current[0] == owner:
                del self._leases[checkpoint_id]

    def __repr__(self) -> str:
        with self._lock:
            count = len(self._data)
        return f"<InMemoryCheckPointStore: {count} checkpoints>"
