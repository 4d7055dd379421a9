"""Checkpoints: where interrupted runs are saved, and how they are encoded.

* Stores keep checkpoint bytes under string ids: :class:`InMemoryCheckPointStore`,
  :class:`FileCheckPointStore`, :class:`SQLiteCheckPointStore`, :class:`RedisCheckPointStore`,
  or any object with the :class:`CheckPointStore` shape. Stores that also implement
  :class:`LeasingCheckPointStore` make a run exclusive across processes; those that implement
  :class:`JournalingCheckPointStore` keep a run's step records (``Runner(durability="step")``)
  so that a step costs the same however long the run is; :class:`RebasingCheckPointStore`
  adds ``set_base``, which writes a durable run's first image, compactions and tombstone with
  the durability of a step record. The built-in stores do the first two; the file, SQLite
  and Redis stores also rebase.
* :class:`PickleSerializer` encodes checkpoint state: pickle in a versioned envelope, signed
  with HMAC-SHA256 by default (bound to the id and the store's namespace), read by an
  unpickler that cannot touch anything but the new objects it builds.
* :func:`lease_for` takes the lease that makes a resume exclusive.

The store and serializer modules are imported on first use, so importing this package is cheap
(and never imports ``sqlite3`` or ``redis``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.checkpoint._base import (
    DEFAULT_LEASE_TTL,
    DEFAULT_MAX_BYTES,
    CheckPointStore,
    JournalingCheckPointStore,
    Lease,
    LeasingCheckPointStore,
    ListingCheckPointStore,
    RebasingCheckPointStore,
    lease_for,
    legacy_namespaces_of,
    namespace_of,
)

__all__ = [
    "DEFAULT_LEASE_TTL",
    "DEFAULT_MAX_BYTES",
    "CheckPointStore",
    "FileCheckPointStore",
    "InMemoryCheckPointStore",
    "JournalingCheckPointStore",
    "Lease",
    "LeasingCheckPointStore",
    "ListingCheckPointStore",
    "PickleSerializer",
    "RebasingCheckPointStore",
    "RedisCheckPointStore",
    "SQLiteCheckPointStore",
    "Serializer",
    "UnsignedCheckpointWarning",
    "lease_for",
    "legacy_namespaces_of",
    "namespace_of",
]

if TYPE_CHECKING:
    from agentkit.checkpoint._file import FileCheckPointStore
    from agentkit.checkpoint._memory import InMemoryCheckPointStore
    from agentkit.checkpoint._redis import RedisCheckPointStore
    from agentkit.checkpoint._serializer import (
        PickleSerializer,
        Serializer,
        UnsignedCheckpointWarning,
    )
    from agentkit.checkpoint._sqlite import SQLiteCheckPointStore
else:
    __getattr__, __dir__ = attach(
        __name__,
        {
            "FileCheckPointStore": "agentkit.checkpoint._file",
            "InMemoryCheckPointStore": "agentkit.checkpoint._memory",
            "PickleSerializer": "agentkit.checkpoint._serializer",
            "RedisCheckPointStore": "agentkit.checkpoint._redis",
            "SQLiteCheckPointStore": "agentkit.checkpoint._sqlite",
            "Serializer": "agentkit.checkpoint._serializer",
            "UnsignedCheckpointWarning": "agentkit.checkpoint._serializer",
            # The one global checkpoint payloads name (see agentkit.checkpoint._codec).
            "_restore": "agentkit.checkpoint._codec",
        },
        submodules=("base", "file", "memory", "redis", "serializer", "sqlite"),
    )
