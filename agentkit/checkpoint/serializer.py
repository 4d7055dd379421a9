"""Serializer: the names that live only here; the others moved.

``PickleSerializer``, ``Serializer``, ``UnsignedCheckpointWarning`` are imported from
:mod:`agentkit.checkpoint`; their
old spellings here still work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.checkpoint._serializer import (
    FLAG_SIGNED,
    FORMAT_VERSION,
    MAGIC,
    MAX_DEPTH,
    MAX_OBJECTS,
)

__all__ = [
    "FLAG_SIGNED",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_DEPTH",
    "MAX_OBJECTS",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "PickleSerializer": "agentkit.checkpoint.PickleSerializer",
            "Serializer": "agentkit.checkpoint.Serializer",
            "UnsignedCheckpointWarning": "agentkit.checkpoint.UnsignedCheckpointWarning",
        },
    )
