"""Shared limits on calls: :class:`ConcurrencyLimit` and :class:`RateLimit`.

The definitions behind :mod:`agentkit.throttle`, whose docstring documents them.
"""

from __future__ import annotations

import abc
import collections
import math
import threading
import time
from collections.abc import Callable

from agentkit._lazy import present
from agentkit._waiting import LimitWait, Waiting, check_timeout
from agentkit.errors import AgentKitValueError

__all__ = [
    "ConcurrencyLimit",
    "ConcurrencyLimiter",
    "LimitWait",
    "RateGrant",
    "RateLimit",
    "RateLimiter",
    "Slot",
]


_monotonic = time.monotonic


def _check_per_minute(value: object, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AgentKitValueError(f"{what} must be a number > 0, or None (got {value!r})")
    if not (value > 0 and math.isfinite(value)):
        raise AgentKitValueError(
            f"{what} must be a finite number > 0, or None for no limit (got {value!r})"
        )
    return float(value)


class Slot:
    """A turn taken under a :class:`ConcurrencyLimiter`: release it when the call is over.

    A context manager (``with limit.acquire():``); :meth:`release` may be called more than
    once, from any thread (the first call releases).

    Attributes:
        waited: the seconds the caller waited for it (``0.0``: it was free at once).
    """

    __slots__ = ("_lock", "_release", "waited")

    def __init__(self, release: Callable[[], None], waited: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._release: Callable[[], None] | None = release
        self.waited = waited

    def release(self) -> None:
        """Give the slot back (once; later calls do nothing)."""
        with self._lock:
            release, self._release = self._release, None
        if release is not None:
            release()

    @property
    def released(self) -> bool:
        """``True`` once the slot was given back."""
        return self._release is None

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class RateGrant:
    """A place taken in a :class:`RateLimiter`: one request, with an estimate of its tokens.

    Once the call knows how many tokens it really used, :meth:`settle` corrects the estimate
    (the difference is charged or given back).

    Attributes:
        waited: the seconds the caller waited for it (``0.0``: admitted at once).
        tokens: the tokens charged when it was granted (the estimate).
    """

    __slots__ = ("_settle", "tokens", "waited")

    def __init__(
        self, settle: Callable[[int], None] | None, tokens: int = 0, waited: float = 0.0
    ) -> None:
        self._settle = settle
        self.tokens = tokens
        self.waited = waited

    def settle(self, tokens_used: int) -> None:
        """Charge ``tokens_used`` instead of the estimate (once; later calls do nothing)."""
        settle, self._settle = self._settle, None
        if settle is not None and tokens_used != self.tokens:
            settle(tokens_used - self.tokens)


class ConcurrencyLimiter(abc.ABC):
    """What ``concurrency=`` takes: :class:`ConcurrencyLimit`, ``RedisConcurrencyLimit``, yours.

    A subclass hands out at most so many :class:`Slot` objects at a time.
    """

    @abc.abstractmethod
    def acquire(self, timeout: float | None = None) -> Slot:
        """Wait for a free slot and take it.

        Raises:
            SlotTimeoutError: no slot came free within ``timeout`` seconds.
            AgentCancelledError: inside a run, the run was cancelled immediately.
            SharedLimitUnavailableError: the limit's store could not be reached.
        """


class RateLimiter(abc.ABC):
    """What ``rate_limit=`` takes: :class:`RateLimit`, ``RedisRateLimit``, or yours."""

    @abc.abstractmethod
    def acquire(self, tokens: int = 0, timeout: float | None = None) -> RateGrant:
        """Wait until one more request (of about ``tokens`` tokens) fits in the rate; take it.

        Raises:
            SlotTimeoutError: it would not fit within ``timeout`` seconds (raised as soon as
                that is known).
            AgentCancelledError: inside a run, the run was cancelled immediately.
            SharedLimitUnavailableError: the limit's store could not be reached.
        """

    @abc.abstractmethod
    def pause(self, seconds: float) -> None:
        """Hold back every caller for ``seconds`` (a server's ``Retry-After``).

        A shorter pause than the one under way changes nothing.
        """


class _Ticket:
    """A caller waiting in a :class:`ConcurrencyLimit`'s queue."""

    __slots__ = ("granted", "waiting")

    def __init__(self, waiting: Waiting) -> None:
        self.waiting = waiting
        self.granted = False


class ConcurrencyLimit(ConcurrencyLimiter):
    """At most ``limit`` calls at once, among all the threads, runs, agents, models and tools
    given this object (in this process; see ``RedisConcurrencyLimit`` across processes).

    Callers that find every slot taken queue, first come, first served; a freed slot goes
    straight to the first caller in the queue.

    Example::

        slots = ConcurrencyLimit(3)
        model = OpenAIChatModel("gpt-4o-mini", concurrency=slots)
        with slots.acquire(timeout=10):      # your own code, in the same three slots
            ...

    Raises:
        ValueError: ``limit`` is not an int >= 1.
    """

    def __init__(self, limit: int) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise AgentKitValueError(
                f"ConcurrencyLimit needs the most calls at once as an int >= 1 (got {limit!r})"
            )
        self._limit = limit
        self._lock = threading.Lock()
        self._in_use = 0
        self._queue: collections.deque[_Ticket] = collections.deque()

    @property
    def limit(self) -> int:
        """The most slots held at once."""
        return self._limit

    @property
    def in_use(self) -> int:
        """How many slots are held now."""
        with self._lock:
            return self._in_use

    @property
    def waiting(self) -> int:
        """How many callers wait for a slot now."""
        with self._lock:
            return len(self._queue)

    def acquire(self, timeout: float | None = None) -> Slot:
        """Wait for a free slot (at most ``timeout`` seconds; ``None``: as long as it takes).

        Inside a run the wait is cancellable (an immediate cancel ends it at once).

        Raises:
            SlotTimeoutError: no slot came free within ``timeout`` seconds.
            AgentCancelledError: inside a run, the run was cancelled immediately.
        """
        timeout = check_timeout(timeout)
        with self._lock:
            if self._in_use < self._limit and not self._queue:
                self._in_use += 1
                return Slot(self._release)
        waiting = Waiting(self, "concurrency", timeout)
        ticket = _Ticket(waiting)
        with waiting:
            with self._lock:
                if self._in_use < self._limit and not self._queue:
                    self._in_use += 1
                    return Slot(self._release)
                self._queue.append(ticket)
            try:
                while True:
                    with self._lock:
                        if ticket.granted:
                            return Slot(self._release, waiting.waited)
                    waiting.pause()
            except BaseException:
                self._abandon(ticket)
                raise

    def _abandon(self, ticket: _Ticket) -> None:
        """A waiter gave up: leave the queue, or pass on the slot it was handed meanwhile."""
        with self._lock:
            if not ticket.granted:
                self._queue.remove(ticket)
                return
        self._release()

    def _release(self) -> None:
        with self._lock:
            if self._queue:
                ticket = self._queue.popleft()
                ticket.granted = True  # the slot passes from hand to hand: in_use stays
            else:
                self._in_use -= 1
                return
        ticket.waiting.wake()

    def __repr__(self) -> str:
        return f"ConcurrencyLimit({self._limit})"


class RateLimit(RateLimiter):
    """At most so many requests and tokens per minute, among everything given this object.

    Each limit is a token bucket, the way model providers count: it holds up to a minute's
    allowance and refills continuously (``requests_per_minute / 60`` requests a second), so a
    quiet minute allows a burst of a full minute's allowance, and a busy one a steady flow.
    A request is admitted when the bucket has room for it; else it waits until it has.

    Tokens are charged before a request with an estimate (a model call estimates a quarter
    of its request body's bytes), then corrected with the usage the server reports
    (:meth:`.RateGrant.settle`); a request larger than a minute's allowance waits for a full
    bucket and runs it into debt, which later requests wait out.

    A server's ``Retry-After`` (HTTP 429) pauses the limit for everybody (:meth:`pause`).

    Example::

        quota = RateLimit(requests_per_minute=500, tokens_per_minute=200_000)
        model = OpenAIChatModel("gpt-4o-mini", rate_limit=quota)

    Raises:
        ValueError: neither limit is given, or one is not a finite number > 0.
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
    ) -> None:
        requests = _check_per_minute(requests_per_minute, "requests_per_minute")
        tokens = _check_per_minute(tokens_per_minute, "tokens_per_minute")
        if requests is None and tokens is None:
            raise AgentKitValueError(
                "RateLimit needs requests_per_minute=, tokens_per_minute= or both "
                "(a RateLimit with neither would limit nothing)"
            )
        self._requests = requests
        self._tokens = tokens
        self._lock = threading.Lock()
        self._request_level = requests or 0.0
        self._token_level = tokens or 0.0
        self._stamp = _monotonic()
        self._paused_until = 0.0

    @property
    def requests_per_minute(self) -> float | None:
        """The requests allowed per minute (``None``: not limited)."""
        return self._requests

    @property
    def tokens_per_minute(self) -> float | None:
        """The tokens allowed per minute (``None``: not limited)."""
        return self._tokens

    @property
    def paused_for(self) -> float:
        """Seconds left of the pause a server asked for (``0.0``: not paused)."""
        with self._lock:
            return max(0.0, self._paused_until - _monotonic())

    def acquire(self, tokens: int = 0, timeout: float | None = None) -> RateGrant:
        """Wait until one more request of about ``tokens`` tokens fits; take its place.

        Raises:
            SlotTimeoutError: it would not fit within ``timeout`` seconds; raised as soon as
                the wait needed is known to be longer.
            AgentCancelledError: inside a run, the run was cancelled immediately.
        """
        timeout = check_timeout(timeout)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise AgentKitValueError(f"tokens must be an int >= 0 (got {tokens!r})")
        with self._lock:
            wait = self._take(tokens)
        if wait <= 0:
            return RateGrant(self._settle, tokens)
        waiting = Waiting(self, "rate", timeout)
        with waiting:
            while True:
                left = waiting.remaining()
                if left is not None and wait > left:
                    raise waiting.timed_out(needed=wait)
                waiting.pause(wait)
                with self._lock:
                    wait = self._take(tokens)
                if wait <= 0:
                    return RateGrant(self._settle, tokens, waiting.waited)

    def pause(self, seconds: float) -> None:
        """Hold back every caller for ``seconds`` from now (a server's ``Retry-After``)."""
        seconds = float(seconds)
        if not seconds > 0:
            return
        with self._lock:
            self._paused_until = max(self._paused_until, _monotonic() + seconds)

    def _take(self, tokens: int) -> float:
        """Admit one request of ``tokens`` (0 returned), or the seconds to wait (lock held)."""
        now = _monotonic()
        elapsed = now - self._stamp
        self._stamp = now
        wait = self._paused_until - now
        requests = self._requests
        if requests is not None:
            self._request_level = min(requests, self._request_level + elapsed * requests / 60)
            if self._request_level < 1:
                wait = max(wait, (1 - self._request_level) * 60 / requests)
        limit = self._tokens
        if limit is not None:
            self._token_level = min(limit, self._token_level + elapsed * limit / 60)
            needed = min(tokens, limit)  # a request above a minute's allowance waits for a full one
            if self._token_level < needed:
                wait = max(wait, (needed - self._token_level) * 60 / limit)
        if wait > 0:
            return wait
        self._request_level -= 1
        self._token_level -= tokens
        return 0.0

    def _settle(self, difference: int) -> None:
        limit = self._tokens
        if limit is None:
            return
        with self._lock:
            self._token_level = min(limit, self._token_level - difference)

    def __repr__(self) -> str:
        parts = []
        if self._requests is not None:
            parts.append(f"requests_per_minute={self._requests:g}")
        if self._tokens is not None:
            parts.append(f"tokens_per_minute={self._tokens:g}")
        return f"RateLimit({', '.join(parts)})"

present(
    (
        ConcurrencyLimit,
        RateLimit,
    ),
    "agentkit",
)

present(
    (
        ConcurrencyLimiter,
        LimitWait,
        RateGrant,
        RateLimiter,
        Slot,
    ),
    "agentkit.throttle",
)
