"""Deterministic transfer: after an agent finishes, hand the conversation on to fixed agents.

:func:`~agentkit.agent_with_deterministic_transfer_to` wraps an agent so that, once its turn ends
normally, it emits the transfer messages a ``transfer_to_agent`` call would have produced, and
the flow transfers. This is how the workers of a supervisor always report back (see
:mod:`agentkit.prebuilt.supervisor`).

``agent_with_deterministic_transfer_to`` moved to :mod:`agentkit`; their spellings here still
work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.agents._deterministic import (
    DeterministicTransferAgent,
    DeterministicTransferState,
)

__all__ = [
    "DeterministicTransferAgent",
    "DeterministicTransferState",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "agent_with_deterministic_transfer_to": "agentkit.agent_with_deterministic_transfer_to",
        },
    )
