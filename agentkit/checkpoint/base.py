"""Base: the names that live only here; the others moved.

``CheckPointStore``, ``DEFAULT_LEASE_TTL``, ``DEFAULT_MAX_BYTES``,
``JournalingCheckPointStore``, ``Lease``, ``LeasingCheckPointStore``,
``ListingCheckPointStore``, ``RebasingCheckPointStore``, ``lease_for``,
``legacy_namespaces_of``, ``namespace_of`` are imported from :mod:`agentkit.checkpoint`; their
old spellings here still work until agentkit 0.4, with a :class:`DeprecationWarning`.
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
