"""Run limits and model pricing: :class:`~agentkit.RunLimits`, :class:`~agentkit.LimitReached`,
:class:`~agentkit.ModelPricing`.

A run given limits (``with_limits(RunLimits(...))`` or ``Runner(limits=...)``) counts its model
calls, tool calls, tokens, cost and running time over the whole run: every agent, sub-agents,
agents used as tools and parallel branches (thread-safe), and across resumes (the count is
saved in the checkpoint). Reaching a limit stops the run at the next safe point, before the
next model call or tool call:

* with a checkpoint id (and a checkpoint store), the run **pauses**: it interrupts with a
  :class:`~agentkit.LimitReached` as the interrupt context's ``info``, and
  ``runner.resume(checkpoint_id, with_limits(larger))`` goes on (in any process);
* without one, it ends with an error event whose ``err`` is a
  :class:`~agentkit.RunLimitError` naming the limit, the amount used and the allowance.

Either way ``RunResult.usage`` and ``RunResult.cost`` hold what the run used.

:class:`~agentkit.ModelPricing` prices a model's token usage (``OpenAIChatModel(pricing=...)``,
``ScriptedChatModel(pricing=...)``): a priced model sets ``ResponseMeta.cost`` on its replies,
which the run sums into ``RunResult.cost`` and the ``cost`` limit, and which callbacks and
tracing see.

``LimitReached``, ``ModelPricing``, ``RunLimits`` moved to :mod:`agentkit`; their spellings
here still work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit._limits import (
    LIMIT_NAMES,
)

__all__ = [
    "LIMIT_NAMES",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "LimitReached": "agentkit.LimitReached",
            "ModelPricing": "agentkit.ModelPricing",
            "RunLimits": "agentkit.RunLimits",
        },
    )
