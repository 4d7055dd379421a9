"""Model failover: :class:`~agentkit.models.FailoverChatModel` tries other models when one keeps
failing.

The next model is the next one of a list, or the one a function chooses from a
:class:`FailoverContext` (Eino's ``GetFailoverModel``).

``FailoverChatModel`` moved to :mod:`agentkit.models`; their spellings here still work until
agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.models._failover import (
    ChooseModel,
    FailoverChoice,
    FailoverContext,
    ShouldFailover,
)

__all__ = [
    "ChooseModel",
    "FailoverChoice",
    "FailoverContext",
    "ShouldFailover",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "FailoverChatModel": "agentkit.models.FailoverChatModel",
        },
    )
