"""The checkpoint store protocols and the lease that makes a run exclusive.

A store keeps opaque bytes under string ids (:class:`~agentkit.checkpoint.CheckPointStore`).
Two optional extensions:

* :class:`~agentkit.checkpoint.LeasingCheckPointStore`: expiring, named leases on ids, so that
  two processes never run or resume the same checkpoint at once.
  :func:`~agentkit.checkpoint.lease_for` takes a lease from any store: through the store's
  lease methods when it has them, otherwise from a registry local to this process.
* :class:`~agentkit.checkpoint.JournalingCheckPointStore`: an append-only journal of *step
  records* per id, beside the checkpoint. ``Runner(durability="step")`` appends one small
  record after each finished model reply and tool call, so the cost of a step does not grow
  with the run's history; a store without these methods still works, and the Runner then saves
  the whole checkpoint at each step instead.

``CheckPointStore``, ``DEFAULT_LEASE_TTL``, ``DEFAULT_MAX_BYTES``,
``JournalingCheckPointStore``, ``Lease``, ``LeasingCheckPointStore``,
``ListingCheckPointStore``, ``RebasingCheckPointStore``, ``lease_for``,
``legacy_namespaces_of``, ``namespace_of`` moved to :mod:`agentkit.checkpoint`; their spellings
here still work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.checkpoint._base import (
    StoreLimits,
    journals,
    new_lease_owner,
    rebases,
)

__all__ = [
    "StoreLimits",
    "journals",
    "new_lease_owner",
    "rebases",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "CheckPointStore": "agentkit.checkpoint.CheckPointStore",
            "DEFAULT_LEASE_TTL": "agentkit.checkpoint.DEFAULT_LEASE_TTL",
            "DEFAULT_MAX_BYTES": "agentkit.checkpoint.DEFAULT_MAX_BYTES",
            "JournalingCheckPointStore": "agentkit.checkpoint.JournalingCheckPointStore",
            "Lease": "agentkit.checkpoint.Lease",
            "LeasingCheckPointStore": "agentkit.checkpoint.LeasingCheckPointStore",
            "ListingCheckPointStore": "agentkit.checkpoint.ListingCheckPointStore",
            "RebasingCheckPointStore": "agentkit.checkpoint.RebasingCheckPointStore",
            "lease_for": "agentkit.checkpoint.lease_for",
            "legacy_namespaces_of": "agentkit.checkpoint.legacy_namespaces_of",
            "namespace_of": "agentkit.checkpoint.namespace_of",
        },
    )
