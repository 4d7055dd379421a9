"""The checkpoint store protocols and the lease that makes a run exclusive.

A store keeps opaque bytes under string ids (:class:`CheckPointStore`). Two optional extensions:

* :class:`LeasingCheckPointStore`: expiring, named leases on ids, so that two processes never
  run or resume the same checkpoint at once. :func:`lease_for` takes a lease from any store:
  through the store's lease methods when it has them, otherwise from a registry local to this
  process.
* :class:`JournalingCheckPointStore`: an append-only journal of *step records* per id, beside
  the checkpoint. ``Runner(durability="step")`` appends one small record after each finished
  model reply and tool call, so the cost of a step does not grow with the run's history; a
  store without these methods still works, and the Runner then saves the whole checkpoint at
  each step instead.
"""

from __future__ import annotations

import os
import threading
import uuid
import weakref
from types import TracebackType
from typing import Protocol, TypeGuard, runtime_checkable

from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit._lazy import present
from agentkit.errors import (
    AgentKitTypeError,
    AgentKitValueError,
    CheckpointBusyError,
    CheckpointError,
)

__all__ = [
    "DEFAULT_LEASE_TTL",
    "DEFAULT_MAX_BYTES",
    "CheckPointStore",
    "JournalingCheckPointStore",
    "Lease",
    "LeasingCheckPointStore",
    "ListingCheckPointStore",
    "RebasingCheckPointStore",
    "journals",
    "lease_for",
    "legacy_namespaces_of",
    "namespace_of",
    "new_lease_owner",
    "rebases",
    "StoreLimits",
]

DEFAULT_LEASE_TTL = 600.0
"""Seconds a resume lease lasts unless refreshed (10 minutes)."""

DEFAULT_MAX_BYTES = 64 * 2**20
"""The default largest checkpoint, in bytes (64 MiB), for the serializer and the stores."""


@runtime_checkable
class CheckPointStore(Protocol):
    """Where a :class:`~agentkit.Runner` keeps checkpoints: bytes under string ids.

    Any ``str`` is a valid id (empty, unicode, slashes, ``..``, quotes, NUL...) and must
    round-trip: a store encodes ids as it needs, and an id is never interpreted as a path, a
    query or a pattern. Implementations must be safe to call from several threads; a ``set``
    is atomic (a concurrent ``get`` sees the old or the new value, never a mix).
    """

    def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes stored under ``checkpoint_id``, or ``None`` when there are none."""
        ...

    def set(self, checkpoint_id: str, data: bytes) -> None:
        """Store ``data`` under ``checkpoint_id``, replacing what was there."""
        ...

    def delete(self, checkpoint_id: str) -> None:
        """Remove the checkpoint; an unknown id is not an error."""
        ...


@runtime_checkable
class LeasingCheckPointStore(CheckPointStore, Protocol):
    """A store that also grants expiring, named leases on checkpoint ids.

    A lease is independent of the data: it may be taken on an id that holds no checkpoint,
    and deleting a checkpoint does not release its lease.
    """

    def acquire_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool:
        """Try to lease ``checkpoint_id`` for ``owner`` during ``ttl`` seconds.

        Returns ``True`` when the lease is now held by ``owner``: it was free, it had expired
        (an expired lease is taken over), or ``owner`` already held it (then its expiry is
        pushed to ``ttl`` seconds from now). Returns ``False`` while another owner holds an
        unexpired lease. Never blocks waiting for the lease.
        """
        ...

    def release_lease(self, checkpoint_id: str, owner: str) -> None:
        """Release the lease if ``owner`` still holds it; otherwise do nothing."""
        ...


@runtime_checkable
class JournalingCheckPointStore(CheckPointStore, Protocol):
    """A store that also keeps an append-only journal of step records beside each checkpoint.

    With ``Runner(durability="step")`` a run writes its checkpoint once (the *base*) and then
    appends one record per finished step (a model reply, a tool call): only what changed, so
    a step costs the same at the first step and the thousandth. Loading reads the base and
    its records. The records are opaque signed bytes to the store; the Runner checks that each
    belongs to its id, its store and its place in the journal.

    What a store must guarantee:

    * ``append_step`` is atomic: after a crash of the writing process (SIGKILL, OOM) a reader
      sees each record whole or not at all, never a torn one, and the records it sees are the
      first ones appended, in order. Once ``append_step`` returns, the record survives the
      death of the writing process; with ``sync=True`` it (and every record before it) also
      survives a power loss or an OS crash.
    * ``read_steps`` returns the records of ``checkpoint_id`` in the order they were appended
      (``[]`` when there are none).
    * ``set`` leaves the records alone; ``delete`` removes the checkpoint *and* its records;
      ``delete_steps`` removes the records only.
    * Records of different ids are independent, whatever the ids (see
      :class:`CheckPointStore`). One writer appends to an id at a time (it holds the id's
      lease); reads may run concurrently with it.

    ``agentkit.testing.check_checkpoint_store`` checks all of this.
    """

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """Append the record ``data`` to the steps of ``checkpoint_id``.

        ``sync=True``: the record must survive a power loss when this returns (``fsync``);
        otherwise surviving the death of this process is enough.
        """
        ...

    def read_steps(self, checkpoint_id: str) -> list[bytes]:
        """Return the records of ``checkpoint_id`` in the order they were appended."""
        ...

    def delete_steps(self, checkpoint_id: str) -> None:
        """Remove every record of ``checkpoint_id`` (not the checkpoint); unknown ids are fine."""
        ...


@runtime_checkable
class ListingCheckPointStore(CheckPointStore, Protocol):
    """A store that can say which ids hold a checkpoint (the built-in stores all can).

    :class:`agentkit.approvals.ApprovalInbox` lists the runs waiting for a decision with it.
    """

    def checkpoint_ids(self) -> list[str]:
        """Every id that holds a checkpoint (written with ``set`` or ``set_base``), sorted.

        An id with step records or a lease only is not listed; a consumed checkpoint (the
        tombstone of a completed run) is, as any other bytes are.
        """
        ...


@runtime_checkable
class RebasingCheckPointStore(JournalingCheckPointStore, Protocol):
    """A journaling store that replaces a run's base and drops its step records in one call.

    A durable run (``Runner(durability="step")``) writes a base when it starts, when its
    records grow past the base (a compaction) and when it completes (its tombstone); each
    time, the records of the old base are dropped. A store with ``set_base`` does both at
    once, with the durability of a step record:

    * the new base is written whole or not at all (a reader, and a process that died
      meanwhile, see the old base or the new one, never a mix), and once ``set_base``
      returns it survives the death of the writing process;
    * ``sync=False``: a power loss or an OS crash may leave the previous base (none for a
      run's first one), or a base that fails its signature check and is refused as damaged
      when read, and lose the records, as it may lose unsynced step records; never a base
      that loads as something the run did not write. ``sync=True`` (or a store configured
      to sync every record, such as ``FileCheckPointStore(sync_steps=True)``): the new base
      survives that too.

    The Runner calls it for those three writes only. The checkpoint of an interrupted or
    cancelled run is always stored with ``set``, which survives a power loss. Without
    ``set_base`` the Runner calls ``set`` and then ``delete_steps``.
    """

    def set_base(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """Store ``data`` as the base of ``checkpoint_id`` and remove its step records."""
        ...


@runtime_checkable
class _Namespaced(Protocol):
    @property
    def namespace(self) -> str: ...


@runtime_checkable
class _WithLegacyNamespaces(Protocol):
    @property
    def legacy_namespaces(self) -> tuple[str, ...]: ...


@runtime_checkable
class _WithLeaseTTL(Protocol):
    @property
    def lease_ttl(self) -> float: ...


@runtime_checkable
class _WithClock(Protocol):
    @property
    def clock(self) -> Clock: ...


@runtime_checkable
class _Refreshing(Protocol):
    def refresh_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool: ...


@runtime_checkable
class _Fencing(Protocol):
    def fenced(self, checkpoint_id: str, owner: str) -> CheckPointStore: ...


class _Leased(Protocol):
    @property
    def checkpoint_id(self) -> str: ...


@runtime_checkable
class _Owned(Protocol):
    @property
    def owner(self) -> str | None: ...


def _clock_of(store: object) -> Clock:
    """The clock ``store`` reads (its ``clock``), else the system's.

    A store without lease methods gets its process leases (see :func:`lease_for`) on it:
    give such a store a ``clock`` attribute (an :class:`agentkit.testing.ManualClock`) to
    move its leases on by hand in a test.
    """
    if _has_clock(store):
        clock = store.clock
        if isinstance(clock, Clock):
            return clock
    return SYSTEM_CLOCK


def _fenced_by(store: CheckPointStore, lease: _Leased) -> CheckPointStore:
    """``store`` with its writes of ``lease.checkpoint_id`` fenced by ``lease``, when it can.

    A store with a ``fenced(checkpoint_id, owner)`` method (the Redis store) returns a view
    whose every write of that id first checks, atomically with the write, that ``owner``
    still holds the id's lease, and refuses it with :class:`.CheckpointBusyError` otherwise:
    a run whose lease was taken from it (expired, or its key deleted by someone with write
    access to the store) writes nothing more from its next step on. Other stores (and leases
    whose owner is not known, as a lease object of an earlier release's making) are returned as
    they are: their runs are fenced when a lease refresh fails.
    """
    owner = lease.owner if isinstance(lease, _Owned) else None
    if owner is None or not _fences(store):
        return store
    return store.fenced(lease.checkpoint_id, owner)


def namespace_of(store: CheckPointStore) -> str:
    """The store's ``namespace`` (which checkpoints are signed with), or ``""`` without one.

    The built-in stores name where their data lives: ``"redis/<db>:<prefix>"``,
    ``"sqlite:<absolute path>:<table>"``, ``"file:<absolute directory>"`` (the in-memory
    store has ``""``). A checkpoint signed in one namespace is refused in another, so a
    checkpoint copied to another store under the same id does not load. Moving an SQLite file
    or a checkpoint directory therefore invalidates the checkpoints in it.
    """
    if isinstance(store, _Namespaced):
        namespace = store.namespace
        if not isinstance(namespace, str):
            raise AgentKitTypeError(
                f"{store!r}.namespace must be a str, not {type(namespace).__name__}"
            )
        return namespace
    return ""


def legacy_namespaces_of(store: CheckPointStore) -> tuple[str, ...]:
    """Namespaces a store used in earlier releases, accepted when loading only (or ``()``).

    A store whose namespace changed (the Redis store's now names its database) lists the old
    one here, so checkpoints saved before an upgrade still load; nothing is signed with it.
    """
    if isinstance(store, _WithLegacyNamespaces):
        return tuple(store.legacy_namespaces)
    return ()


def new_lease_owner() -> str:
    """Return a fresh, globally unique lease owner name (host, process id and a random part)."""
    import socket  # only needed once a lease is taken; keeps the package import cheap

    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"


class Lease:
    """A lease held on one checkpoint id; returned by :func:`lease_for`.

    The lease is held from the moment :func:`lease_for` returns. Leaving a ``with`` block or
    calling :meth:`release` gives it back; :meth:`refresh` extends it.

    Attributes:
        checkpoint_id: the leased id.
        owner: the unique owner name this lease was taken under.
        ttl: the lease duration in seconds.
    """

    __slots__ = ("_released", "_store", "checkpoint_id", "owner", "ttl")

    def __init__(self, store: CheckPointStore, checkpoint_id: str, owner: str, ttl: float) -> None:
        self._store = store
        self.checkpoint_id = checkpoint_id
        self.owner = owner
        self.ttl = ttl
        self._released = False

    @property
    def released(self) -> bool:
        """Whether :meth:`release` was called."""
        return self._released

    @property
    def clock(self) -> Clock:
        """The clock the lease is timed on: its store's (``clock=`` of the built-in stores;
        the system's for a store without one). A run keeping the lease refreshes it on
        this clock."""
        return _clock_of(self._store)

    def refresh(self, ttl: float | None = None) -> bool:
        """Extend the lease to ``ttl`` (default: the original ttl) seconds from now.

        Returns ``False`` when the lease was lost meanwhile (it expired and another run took
        it) or was released; the caller should then stop working on the checkpoint. A store
        with a ``refresh_lease(checkpoint_id, owner, ttl)`` method (the Redis store) extends
        the lease only while it is held: a lease whose key went is lost, even if it is free.
        """
        if self._released:
            return False
        ttl = self.ttl if ttl is None else ttl
        _check_ttl(ttl)
        store = self._store
        if _refreshes(store):  # extends the lease only while it is held
            return store.refresh_lease(self.checkpoint_id, self.owner, ttl)
        return _acquire(store, self.checkpoint_id, self.owner, ttl)

    def release(self) -> None:
        """Give the lease back. Idempotent; does nothing if another owner took it over."""
        if self._released:
            return
        self._released = True
        _release(self._store, self.checkpoint_id, self.owner)

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self._released else "held"
        return f"<Lease {self.checkpoint_id!r} owner={self.owner!r} ttl={self.ttl:g} {state}>"


def lease_for(store: CheckPointStore, checkpoint_id: str, ttl: float | None = None) -> Lease:
    """Take the lease on ``checkpoint_id`` in ``store`` now, or raise :class:`.CheckpointBusyError`.

    ``ttl`` defaults to the store's ``lease_ttl`` (the built-in stores take it as a
    constructor argument), else :data:`DEFAULT_LEASE_TTL`.

    Stores that implement :class:`LeasingCheckPointStore` grant the lease themselves, which
    makes it exclusive across every process sharing the store. For other stores the lease
    comes from a thread-safe registry in this process, keyed by the store object and the id,
    so it is exclusive within this process only, and read on the store's ``clock`` attribute
    when it has one. Either way the lease expires after ``ttl`` seconds unless
    refreshed, so a run that died without releasing it cannot block the id forever.

    The returned :class:`Lease` is already held; use it as a context manager, or call
    :meth:`Lease.release` yourself (for example when an event iterator ends)::

        with lease_for(store, "run-1"):
            ...  # only this run resumes "run-1" meanwhile

    Raises:
        CheckpointBusyError: another owner holds an unexpired lease on the id.
        ValueError: ``ttl`` is not positive.
    """
    if ttl is None:
        ttl = store.lease_ttl if _has_lease_ttl(store) else DEFAULT_LEASE_TTL
    _check_ttl(ttl)
    owner = new_lease_owner()
    if not _acquire(store, checkpoint_id, owner, ttl):
        raise CheckpointBusyError(
            f"checkpoint {checkpoint_id!r} is being resumed by another run; try again when it "
            "has finished (the claim of a run that crashed expires by itself)"
        )
    return Lease(store, checkpoint_id, owner, ttl)


def _acquire(store: CheckPointStore, checkpoint_id: str, owner: str, ttl: float) -> bool:
    if _leases(store):
        return store.acquire_lease(checkpoint_id, owner, ttl)
    return _LOCAL_LEASES.acquire(store, checkpoint_id, owner, ttl, _clock_of(store))


def _release(store: CheckPointStore, checkpoint_id: str, owner: str) -> None:
    if _leases(store):
        store.release_lease(checkpoint_id, owner)
    else:
        _LOCAL_LEASES.release(store, checkpoint_id, owner)


# What each protocol needs a class to define for its instances to pass isinstance().
_MEMBERS: dict[type, tuple[str, ...]] = {
    LeasingCheckPointStore: ("get", "set", "delete", "acquire_lease", "release_lease"),
    JournalingCheckPointStore: ("get", "set", "delete", "append_step", "read_steps",
                                "delete_steps"),
    RebasingCheckPointStore: ("get", "set", "delete", "append_step", "read_steps",
                              "delete_steps", "set_base"),
    _WithLeaseTTL: ("lease_ttl",),
    _WithClock: ("clock",),
    _Fencing: ("fenced",),
    _Refreshing: ("refresh_lease",),
}
_CONFORMING: weakref.WeakKeyDictionary[type, set[type]] = weakref.WeakKeyDictionary()


def _conforms(store: object, protocol: type) -> bool:
    """``isinstance(store, protocol)``, remembered for classes that define every member.

    A runtime protocol check looks each member up (several microseconds), and a resume asks
    three times; a class that passed once and defines the members itself passes for every
    instance, so only that verdict is kept. Anything else is checked each time.
    """
    cls = type(store)
    known = _CONFORMING.get(cls)
    if known is not None and protocol in known:
        return True
    if not isinstance(store, protocol):
        return False
    if all(hasattr(cls, name) for name in _MEMBERS[protocol]):
        _CONFORMING.setdefault(cls, set()).add(protocol)
    return True


def _leases(store: object) -> TypeGuard[LeasingCheckPointStore]:
    return _conforms(store, LeasingCheckPointStore)


def journals(store: object) -> TypeGuard[JournalingCheckPointStore]:
    """Whether ``store`` keeps step records (:class:`JournalingCheckPointStore`)."""
    return _conforms(store, JournalingCheckPointStore)


def rebases(store: object) -> TypeGuard[RebasingCheckPointStore]:
    """Whether ``store`` has ``set_base`` (:class:`RebasingCheckPointStore`)."""
    return _conforms(store, RebasingCheckPointStore)


def _has_lease_ttl(store: object) -> TypeGuard[_WithLeaseTTL]:
    return _conforms(store, _WithLeaseTTL)


def _has_clock(store: object) -> TypeGuard[_WithClock]:
    return _conforms(store, _WithClock)


def _fences(store: object) -> TypeGuard[_Fencing]:
    return _conforms(store, _Fencing)


def _refreshes(store: object) -> TypeGuard[_Refreshing]:
    return _conforms(store, _Refreshing)


# Helpers shared by the stores of this package.


def _check_ttl(ttl: float) -> None:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
        raise AgentKitValueError(f"a lease ttl must be a positive number of seconds, got {ttl!r}")


def _check_age(older_than: object) -> float:
    """Check the ``older_than`` of a store's ``prune``: a number of seconds, at least 0."""
    if (
        isinstance(older_than, bool)
        or not isinstance(older_than, (int, float))
        or not 0 <= older_than < float("inf")
    ):
        raise AgentKitValueError(
            f"older_than must be a number of seconds >= 0, got {older_than!r} (for example "
            "older_than=7 * 24 * 3600 removes what was last written over a week ago)"
        )
    return float(older_than)


def _check_id(checkpoint_id: object) -> str:
    if not isinstance(checkpoint_id, str):
        raise AgentKitTypeError(f"checkpoint_id must be a str, not {type(checkpoint_id).__name__}")
    return checkpoint_id


def _encode_id(checkpoint_id: object) -> bytes:
    """Encode any ``str`` id reversibly (lone surrogates included) as bytes."""
    return _check_id(checkpoint_id).encode("utf-8", "surrogatepass")


def _check_data(data: object) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise AgentKitTypeError(f"checkpoint data must be bytes, not {type(data).__name__}")
    return bytes(data)


class StoreLimits:
    """What every built-in store has: the largest checkpoint it takes, its lease time and the
    clock its leases and ages are read on."""

    _max_bytes: int
    _lease_ttl: float
    _clock: Clock = SYSTEM_CLOCK

    def _set_limits(self, max_bytes: int, lease_ttl: float) -> None:
        self._max_bytes = _check_max_bytes(max_bytes)
        _check_ttl(lease_ttl)
        self._lease_ttl = float(lease_ttl)

    @property
    def max_bytes(self) -> int:
        """The largest checkpoint this store reads or writes, in bytes."""
        return self._max_bytes

    @property
    def lease_ttl(self) -> float:
        """How long a resume lease lasts unless refreshed, in seconds."""
        return self._lease_ttl

    @property
    def clock(self) -> Clock:
        """The clock leases expire on and ages are read on (the store's ``clock=``)."""
        return self._clock


def _check_max_bytes(max_bytes: object) -> int:
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise AgentKitValueError(f"max_bytes must be a positive int, got {max_bytes!r}")
    return max_bytes


def _check_size(checkpoint_id: str, data: bytes, max_bytes: int) -> bytes:
    if len(data) > max_bytes:
        raise CheckpointError(
            f"cannot store checkpoint {checkpoint_id!r}: it is {len(data)} bytes, over the "
            f"store's max_bytes={max_bytes} (raise it on the store and the serializer if "
            "checkpoints this large are expected)"
        )
    return data


def _steps_too_large(checkpoint_id: str, size: int, max_bytes: int) -> CheckpointError:
    return CheckpointError(
        f"the step records of checkpoint {checkpoint_id!r} take {size} bytes, over the store's "
        f"max_bytes={max_bytes}; refusing to read them (raise max_bytes on the store and the "
        "serializer if they are legitimate)"
    )


def _too_large(checkpoint_id: str, size: int, max_bytes: int) -> CheckpointError:
    return CheckpointError(
        f"checkpoint {checkpoint_id!r} is {size} bytes, over the store's max_bytes={max_bytes}; "
        "refusing to read it (raise max_bytes on the store and the serializer if it is "
        "legitimate)"
    )


def _check_owner(owner: object) -> str:
    if not isinstance(owner, str) or not owner:
        raise AgentKitValueError(f"a lease owner must be a non-empty str, got {owner!r}")
    return owner


class _LocalLeases:
    """Leases for stores without lease methods, keyed by (store identity, checkpoint id)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (id(store), checkpoint id) -> (owner, monotonic deadline, store). Keeping the store
        # referenced stops its id() from being reused by another store while the lease exists.
        self._leases: dict[tuple[int, str], tuple[str, float, CheckPointStore]] = {}

    def acquire(
        self, store: CheckPointStore, checkpoint_id: str, owner: str, ttl: float, clock: Clock
    ) -> bool:
        _check_ttl(ttl)
        key = (id(store), checkpoint_id)
        now = clock.monotonic()
        with self._lock:
            current = self._leases.get(key)
            if current is not None and current[0] != owner and current[1] > now:
                return False
            # Drop expired leases, so abandoned ones do not keep their stores alive forever.
            for stale in [k for k, lease in self._leases.items() if lease[1] <= now]:
                del self._leases[stale]
            self._leases[key] = (owner, now + ttl, store)
            return True

    def release(self, store: CheckPointStore, checkpoint_id: str, owner: str) -> None:
        key = (id(store), checkpoint_id)
        with self._lock:
            current = self._leases.get(key)
            if current is not None and current[0] == owner and current[2] is store:
                del self._leases[key]


_LOCAL_LEASES = _LocalLeases()

present(
    (
        CheckPointStore,
        JournalingCheckPointStore,
        Lease,
        LeasingCheckPointStore,
        ListingCheckPointStore,
        RebasingCheckPointStore,
        lease_for,
        legacy_namespaces_of,
        namespace_of,
    ),
    "agentkit.checkpoint",
)

present((StoreLimits, journals, new_lease_owner, rebases,), "agentkit.checkpoint.base")
