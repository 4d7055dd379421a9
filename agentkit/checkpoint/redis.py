"""A checkpoint store in Redis (redis-py, the ``agentkit[redis]`` extra), shareable by hosts.

``RedisCheckPointStore`` moved to :mod:`agentkit.checkpoint`; their spellings here still work
until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.checkpoint._redis import (
    DEFAULT_URL,
)

__all__ = [
    "DEFAULT_URL",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "RedisCheckPointStore": "agentkit.checkpoint.RedisCheckPointStore",
        },
    )
