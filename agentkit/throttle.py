"""Shared limits on calls: :class:`~agentkit.ConcurrencyLimit` and :class:`~agentkit.RateLimit`.

A limit is an object; everything given the same object shares it: the threads of one run,
many runs, many agents, models and tools. Give one to a model or a tool::

    from agentkit import ConcurrencyLimit, RateLimit, tool
    from agentkit.models import OpenAIChatModel

    llm_slots = ConcurrencyLimit(3)                      # at most 3 requests in flight
    quota = RateLimit(requests_per_minute=500, tokens_per_minute=200_000)
    model = OpenAIChatModel("gpt-4o-mini", concurrency=llm_slots, rate_limit=quota)

    @tool(concurrency=ConcurrencyLimit(2))               # at most 2 calls running at once
    def search(query: str) -> str: ...

Across processes (a pool of Celery workers, several web processes), use their Redis
counterparts, :class:`agentkit.integrations.redis.RedisConcurrencyLimit` and
:class:`~agentkit.integrations.redis.RedisRateLimit`: same behaviour, the state in Redis.

How a wait for a turn behaves, for every limit:

* **bounded**: a model call's wait counts toward its ``timeout`` (the wait, the attempts and
  the pauses between them share it); a tool call's toward the tool's ``timeout``. A wait that
  runs out raises :class:`~agentkit.errors.SlotTimeoutError`; a rate wait that cannot end in time
  fails at once.
* **cancellable**: inside a run, an immediate cancel (or closing the run's event iterator)
  ends the wait at once with :class:`~agentkit.AgentCancelledError`.
* **visible**: a call that did not get its turn at once is reported to the run's callback
  handlers with ``on_limit_wait(info, wait)`` (a :class:`LimitWait`: the limit, its kind, the
  seconds waited, and the error if the wait failed);
  :class:`~agentkit.integrations.otel.OpenTelemetryHandler` adds it to the call's span as an
  ``agentkit.limit_wait`` event.

A model given a ``rate_limit`` that gets HTTP 429 pauses the whole limit
(:meth:`~agentkit.RateLimit.pause`) for the ``Retry-After`` the server asked for (for its own
back-off delay when the server named none): every caller sharing the limit holds back, not only
the one that got the 429.

Your own code can take turns too: ``with limit.acquire(timeout=5):`` for a slot,
``limit.acquire(tokens=1200)`` for a place in a rate.

``ConcurrencyLimit``, ``RateLimit`` moved to :mod:`agentkit`; their spellings here still work
until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit._throttle import (
    ConcurrencyLimiter,
    LimitWait,
    RateGrant,
    RateLimiter,
    Slot,
)

__all__ = [
    "ConcurrencyLimiter",
    "LimitWait",
    "RateGrant",
    "RateLimiter",
    "Slot",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "ConcurrencyLimit": "agentkit.ConcurrencyLimit",
            "RateLimit": "agentkit.RateLimit",
        },
    )
