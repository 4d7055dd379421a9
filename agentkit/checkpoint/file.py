"""A checkpoint store in a directory: one file per checkpoint, atomic writes, leases.

``FileCheckPointStore`` moved to :mod:`agentkit.checkpoint`; their spellings here still work
until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.checkpoint._file import (
    STALE_TEMP_SECONDS,
)

__all__ = [
    "STALE_TEMP_SECONDS",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "FileCheckPointStore": "agentkit.checkpoint.FileCheckPointStore",
        },
    )
