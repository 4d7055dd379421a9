"""The shared limits of the HTTP models' calls (``concurrency=``, ``rate_limit=``).

A model without limits has none of this: it never builds a :class:`CallLimits`, and its calls
do no work for limits. With limits, every attempt of a call (the first one and each retry)
takes its turn before its request is sent: a place in the rate first (waiting for it holds no
slot), then a slot. The slot is held until the response is read to its end (a stream: until it
ends or is closed), so the limit counts requests in flight at the server; the tokens charged
to the rate are corrected with the usage the response reports.
"""

from __future__ import annotations

from agentkit._throttle import ConcurrencyLimiter, RateGrant, RateLimiter, Slot
from agentkit._waiting import CallSite, admitted
from agentkit.errors import AgentKitTypeError

__all__ = ["Admission", "CallLimits", "check_limits", "estimate_tokens"]


def check_limits(concurrency: object, rate_limit: object) -> None:
    """Refuse, with a ``TypeError`` that says what to pass, limits of the wrong kind."""
    if concurrency is not None and not isinstance(concurrency, ConcurrencyLimiter):
        hint = " (a rate limit goes to rate_limit=)" if isinstance(concurrency, RateLimiter) else ""
        raise AgentKitTypeError(
            "concurrency= takes a ConcurrencyLimit, a RedisConcurrencyLimit or another "
            f"ConcurrencyLimiter (got {concurrency!r}){hint}"
        )
    if rate_limit is not None and not isinstance(rate_limit, RateLimiter):
        hint = (
            " (a concurrency limit goes to concurrency=)"
            if isinstance(rate_limit, ConcurrencyLimiter)
            else ""
        )
        raise AgentKitTypeError(
            "rate_limit= takes a RateLimit, a RedisRateLimit or another RateLimiter "
            f"(got {rate_limit!r}){hint}"
        )


def estimate_tokens(body: bytes) -> int:
    """The tokens a request is charged before its usage is known: a quarter of its bytes."""
    return len(body) // 4 + 1


class Admission:
    """The turn one attempt took: give it back with :meth:`release` when the attempt is over."""

    __slots__ = ("grant", "slot")

    def __init__(self, grant: RateGrant | None, slot: Slot | None) -> None:
        self.grant = grant
        self.slot = slot

    def release(self, tokens_used: int | None = None) -> None:
        """Free the slot; charge ``tokens_used`` instead of the estimate when it is known."""
        grant, self.grant = self.grant, None
        if grant is not None and tokens_used is not None:
            grant.settle(tokens_used)
        slot, self.slot = self.slot, None
        if slot is not None:
            slot.release()


class CallLimits:
    """The limits one model (and the models ``with_tools`` derives from it) calls under."""

    __slots__ = ("concurrency", "rate", "site")

    def __init__(
        self,
        concurrency: ConcurrencyLimiter | None,
        rate: RateLimiter | None,
        site: CallSite,
    ) -> None:
        self.concurrency = concurrency
        self.rate = rate
        self.site = site

    def admit(self, body: bytes, timeout: float) -> Admission:
        """Wait for this attempt's turn, at most ``timeout`` seconds (the call's time left).

        Raises:
            SlotTimeoutError: the turn did not come in time.
            AgentCancelledError: inside a run, the run was cancelled immediately.
            SharedLimitUnavailableError: a limit's store could not be reached.
        """
        grant: RateGrant | None = None
        rate = self.rate
        if rate is not None:
            tokens = estimate_tokens(body)
            grant = admitted(lambda: rate.acquire(tokens, timeout), rate, "rate", self.site)
            timeout -= grant.waited
        concurrency = self.concurrency
        if concurrency is None:
            return Admission(grant, None)
        try:
            slot = admitted(
                lambda: concurrency.acquire(timeout), concurrency, "concurrency", self.site
            )
        except BaseException:
            if grant is not None:
                grant.settle(0)  # no request was sent: nothing was used
            raise
        return Admission(grant, slot)

    def rate_limited(self, seconds: float) -> None:
        """The server answered HTTP 429: hold back every caller of the rate for ``seconds``."""
        if self.rate is not None:
            self.rate.pause(seconds)
