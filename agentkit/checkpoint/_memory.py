"""A checkpoint store in a dict: for tests, notebooks and single-process runs."""

from __future__ import annotations

import threading

from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit._lazy import present
from agentkit.checkpoint._base import (
    DEFAULT_LEASE_TTL,
    DEFAULT_MAX_BYTES,
    StoreLimits,
    _check_age,
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

    Nothing expires by itself: the tombstone of every completed durable run stays (so that a
    late ``resume`` says the run completed) until :meth:`delete` or :meth:`prune`. A process
    that runs many durable runs on one store calls ``store.prune(older_than=...)`` now and
    then, as with the file and SQLite stores.

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
        self._written: dict[str, float] = {}  # id -> clock.monotonic() of its latest write
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
            self._written[checkpoint_id] = self._clock.monotonic()

    def checkpoint_ids(self) -> list[str]:
        """Every id that holds a checkpoint, sorted."""
        with self._lock:
            return sorted(self._data)

    def delete(self, checkpoint_id: str) -> None:
        """Remove the checkpoint; an unknown id is not an error."""
        _check_id(checkpoint_id)
        with self._lock:
            self._data.pop(checkpoint_id, None)
            self._steps.pop(checkpoint_id, None)
            self._written.pop(checkpoint_id, None)

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """Append the step record ``data`` to ``checkpoint_id``'s (``sync`` changes nothing)."""
        _check_id(checkpoint_id)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        with self._lock:
            self._steps.setdefault(checkpoint_id, []).append(data)
            self._written[checkpoint_id] = self._clock.monotonic()

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
            if checkpoint_id not in self._data:
                self._written.pop(checkpoint_id, None)

    def prune(self, *, older_than: float) -> int:
        """Remove every checkpoint last written more than ``older_than`` seconds ago.

        As ``FileCheckPointStore.prune``: the way to expire the tombstones of completed
        durable runs and anything else left behind. A checkpoint's age is that of its latest
        write, its step records included; its step records go with it. A checkpoint whose
        lease is held is never removed; leases that expired more than ``older_than`` seconds
        ago are removed. This removes interrupted runs waiting for an answer too: choose
        ``older_than`` longer than a run may wait for an approval. Returns how many
        checkpoints (ids) were removed.

        Raises:
            ValueError: ``older_than`` is not a number of seconds >= 0.
        """
        age = _check_age(older_than)
        with self._lock:
            now = self._clock.monotonic()
            cutoff = now - age
            for checkpoint_id, (_, deadline) in list(self._leases.items()):
                if deadline <= cutoff:
                    del self._leases[checkpoint_id]
            old = [
                checkpoint_id
                for checkpoint_id, written in self._written.items()
                if written <= cutoff
                and not (checkpoint_id in self._leases and self._leases[checkpoint_id][1] > now)
            ]
            for checkpoint_id in old:
                self._data.pop(checkpoint_id, None)
                self._steps.pop(checkpoint_id, None)
                del self._written[checkpoint_id]
            return len(old)

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

present((InMemoryCheckPointStore,), "agentkit.checkpoint")
