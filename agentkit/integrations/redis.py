"""Shared limits across processes, and long-term memory, kept in Redis (redis-py, the
``agentkit[redis]`` extra).

:class:`RedisMemoryStore` is a :class:`~agentkit.memory.MemoryStore` (see
:mod:`agentkit.memory`) that every process of an app shares.

:class:`RedisConcurrencyLimit` and :class:`RedisRateLimit` behave like
:class:`~agentkit.ConcurrencyLimit` and :class:`~agentkit.RateLimit` (see
:mod:`agentkit.throttle`), for every process that uses the same Redis and the same ``name``:
a pool of Celery workers, several web processes, several machines::

    from agentkit.integrations.redis import RedisConcurrencyLimit, RedisRateLimit

    slots = RedisConcurrencyLimit(8, "openai", url=REDIS_URL)        # 8 requests in flight
    quota = RedisRateLimit("openai", requests_per_minute=500, url=REDIS_URL)
    model = OpenAIChatModel("gpt-4o-mini", concurrency=slots, rate_limit=quota)

A slot is a **lease**: held for ``lease`` seconds and refreshed by the holding process while
the call lasts (every third of the lease), so a process that dies (kill -9, OOM, a lost
machine) holds its slots for at most ``lease`` seconds; then they come back. Each grant and
each release is one Lua script, timed by the Redis server's clock, so the processes' clocks
do not matter (unless a limit is given a clock of its own, ``clock=``: a test's
:class:`~agentkit.testing.ManualClock`, see :class:`RedisConcurrencyLimit`). A freed slot is
announced on a Redis channel, which wakes the waiters of every process at once (a waiter
also looks again at least every half second).

A limit is as durable as its Redis: a Redis that restarts **without persistence** (no AOF,
no snapshot) forgets the slots held at that moment, so until those calls end up to ``limit``
more calls may start (each holder's next refresh logs a warning saying so). Run the Redis of
shared limits with ``appendonly yes`` when the limit must hold across a restart.

Waits are those of :mod:`agentkit.throttle`: bounded by the call's timeout, cancelled with
the run, reported to ``on_limit_wait``. When Redis cannot be reached (down, or not answering
within ``socket_timeout``), the call fails with
:class:`~agentkit.errors.SharedLimitUnavailableError` saying so, before its request is sent.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from typing import Any

from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit._lazy import present
from agentkit._refresher import Refreshed, refresher_for
from agentkit._throttle import ConcurrencyLimiter, RateGrant, RateLimit, RateLimiter, Slot
from agentkit._waiting import Waiting, check_timeout
from agentkit.checkpoint._redisscripts import Scripts
from agentkit.errors import AgentKitValueError, MissingDependencyError, SharedLimitUnavailableError
from agentkit.integrations._redismemory import RedisMemoryStore

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_SOCKET_TIMEOUT",
    "RedisConcurrencyLimit",
    "RedisMemoryStore",
    "RedisRateLimit",
]

present((RedisMemoryStore,), __name__)

_log = logging.getLogger("agentkit")

DEFAULT_PREFIX = "agentkit:limit:"
"""What the Redis keys of a limit start with (then its name)."""

DEFAULT_SOCKET_TIMEOUT = 2.0
"""Seconds one Redis command may take (connect included) on a client made from ``url``."""

_LOOK_AGAIN = 0.5  # the longest a waiter goes without asking Redis again

# Now in ms: the caller's clock when it passes one (ARGV[now], a limit with a clock of its
# own), else the Redis server's.
_NOW = """
local now = tonumber(ARGV[%d])
if not now then
    local time = redis.call('TIME')
    now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
"""

# KEYS[1]: the holders (a sorted set: token -> lease end, in ms of the clock the limit reads).
# ARGV: the limit, the token, the lease in ms, now ("": the server's clock). Returns {1, 0}
# when the token got a slot, else {0, ms until the first lease ends}. The key itself expires
# on the server's clock (garbage collection of a limit nobody uses any more).
_ACQUIRE = _NOW % 4 + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return {1, 0}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(first[2]) - now}
"""

# KEYS[1]: the holders. ARGV: the lease in ms, now ("": the server's clock), then the tokens
# to refresh. Returns how many of them still held their slot (a lease that ran out is not
# renewed: its slot is gone).
_REFRESH = _NOW % 2 + """
local kept = 0
for i = 3, #ARGV do
    local ends = redis.call('ZSCORE', KEYS[1], ARGV[i])
    if ends and tonumber(ends) > now then
        redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[i])
        kept = kept + 1
    end
end
if kept > 0 then
    redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return kept
"""

# KEYS[1]: the holders, KEYS[2]: the channel that wakes waiters. ARGV[1]: the token.
_RELEASE = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
    redis.call('PUBLISH', KEYS[2], '1')
end
return 1
"""

# The rate's state is a hash at KEYS[1]: the request and token levels of the two buckets, the
# time they were measured ('at', ms of the server's clock) and the end of a pause. A missing
# state is two full buckets. ARGV[1] and ARGV[2] are the requests and tokens per minute (0:
# not limited). This prelude refills the buckets up to now into `requests` and `level`.
_REFILL = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'requests', 'tokens', 'at', 'paused')
local elapsed = math.max(0, now - (tonumber(state[3]) or now))
local paused = tonumber(state[4]) or 0
local requests = math.min(rpm, (tonumber(state[1]) or rpm) + elapsed * rpm / 60000)
local level = math.min(tpm, (tonumber(state[2]) or tpm) + elapsed * tpm / 60000)
"""

# Writes the levels back; the state is kept while it differs from full buckets (and a minute
# more), so that a debt or a pause outlives an idle spell.
_STORE = """
redis.call('HSET', KEYS[1], 'requests', tostring(requests), 'tokens', tostring(level), 'at', now)
local keep = math.max(0, paused - now)
if rpm > 0 then keep = math.max(keep, (rpm - requests) * 60000 / rpm) end
if tpm > 0 then keep = math.max(keep, (tpm - level) * 60000 / tpm) end
redis.call('PEXPIRE', KEYS[1], 60000 + math.ceil(keep))
"""

# ARGV[3]: the tokens of this request. Returns 0 when it was admitted, else the ms to wait.
_TAKE = _REFILL + """
local tokens = tonumber(ARGV[3])
local wait = paused - now
if rpm > 0 and requests < 1 then wait = math.max(wait, (1 - requests) * 60000 / rpm) end
if tpm > 0 then
    local needed = math.min(tokens, tpm)
    if level < needed then wait = math.max(wait, (needed - level) * 60000 / tpm) end
end
if wait <= 0 then
    if rpm > 0 then requests = requests - 1 end
    if tpm > 0 then level = level - tokens end
    wait = 0
end
""" + _STORE + """
return math.ceil(wait)
"""

# ARGV[3]: the tokens to charge (negative: to give back); never above a full bucket.
_SETTLE = _REFILL + """
if tpm > 0 then level = math.min(tpm, level - tonumber(ARGV[3])) end
""" + _STORE + """
return 1
"""

# KEYS[1]: the rate's state. ARGV[1]: the pause in ms. A pause only ever gets longer.
_PAUSE = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ends = now + tonumber(ARGV[1])
local paused = tonumber(redis.call('HGET', KEYS[1], 'paused')) or 0
if ends > paused then
    redis.call('HSET', KEYS[1], 'paused', ends)
    local keep = 60000 + tonumber(ARGV[1])
    if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
end
return 1
"""

# KEYS[1]: the rate's state. Returns the ms left of the pause (0: none).
_PAUSED = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local paused = tonumber(redis.call('HGET', KEYS[1], 'paused')) or 0
return math.max(0, paused - now)
"""


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise AgentKitValueError(
            f"a Redis limit needs a name, the same in every process that shares it (got {name!r})"
        )
    return name


def _connect(url: str | None, client: Any, what: str) -> tuple[Any, bool]:
    """The client to use and whether it is ours to close."""
    if client is not None:
        return client, False
    try:
        import redis
    except ImportError as error:  # pragma: no cover - the extra is missing
        raise MissingDependencyError(
            f"{what} needs redis-py: pip install 'agentkit[redis]'"
        ) from error
    made = redis.Redis.from_url(
        url or os.environ.get("REDIS_URL") or "redis://localhost:6379/0",
        socket_timeout=DEFAULT_SOCKET_TIMEOUT,
        socket_connect_timeout=DEFAULT_SOCKET_TIMEOUT,
    )
    return made, True


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)


def _where(client: Any) -> str:
    """Where ``client`` connects to, for error messages."""
    try:
        settings = dict(client.connection_pool.connection_kwargs)
    except AttributeError:  # a client of another kind (a cluster, a test double)
        return repr(client)
    if "path" in settings:
        return f"unix://{settings['path']}"
    return f"{settings.get('host', '?')}:{settings.get('port', '?')}"


class _Wakeups:
    """Wakes this process's waiters of one limit when a slot is freed in any process.

    A thread subscribed to the limit's channel runs while anyone here waits (it ends within
    half a second once nobody does). It only makes waits shorter: a waiter also asks Redis
    again every half second, so a lost message or a Redis outage costs at most that.
    """

    def __init__(self, client: Any, channel: str, name: str) -> None:
        self._client = client
        self._channel = channel
        self._name = name
        self._lock = threading.Lock()
        self._waiters: set[Waiting] = set()
        self._thread: threading.Thread | None = None

    def add(self, waiting: Waiting) -> None:
        with self._lock:
            self._waiters.add(waiting)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._listen, name=f"agentkit-limit-wakeups {self._name}", daemon=True
                )
                self._thread.start()

    def remove(self, waiting: Waiting) -> None:
        with self._lock:
            self._waiters.discard(waiting)

    def join(self) -> None:
        """Wait for the thread to end (after the last waiter left)."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def _listen(self) -> None:
        pubsub = None
        try:
            pubsub = self._client.pubsub(ignore_subscribe_messages=True)
            pubsub.subscribe(self._channel)
            while True:
                with self._lock:
                    if not self._waiters:
                        self._thread = None
                        return
                if pubsub.get_message(timeout=_LOOK_AGAIN) is not None:
                    with self._lock:
                        waiters = list(self._waiters)
                    for waiting in waiters:
                        waiting.wake()
        except Exception as error:  # the waiters go on asking Redis themselves
            _log.warning(
                "agentkit: the wake-ups of limit %r stopped (%s: %s); its waiters look again "
                "every %.1f s", self._name, type(error).__name__, error, _LOOK_AGAIN,
            )
            with self._lock:
                self._thread = None
        finally:
            if pubsub is not None:
                try:
                    pubsub.close()
                except Exception as error:
                    _log.debug("agentkit: closing a pubsub failed: %s", error)


class _Keeper:
    """The slots this process holds on a limit; their leases are refreshed, in one script
    every third of the lease, by the process's refreshing thread while any is held."""

    def __init__(self, limit: RedisConcurrencyLimit) -> None:
        self._limit = limit
        self._refresher = refresher_for(limit.clock)  # refreshes on the limit's clock
        self._condition = threading.Condition()
        self._held: set[str] = set()
        self._leases: _SlotLeases | None = None  # registered with the refresher while held
        self._leaving = 0  # removals from the refresher under way

    def hold(self, token: str) -> None:
        with self._condition:
            self._held.add(token)
            if self._leases is None:
                self._leases = _SlotLeases(self)
                self._refresher.add(self._leases)

    def drop(self, token: str) -> None:
        with self._condition:
            self._held.discard(token)
            if self._held or self._leases is None:
                return
            leases, self._leases = self._leases, None
            self._leaving += 1
        try:
            # Outside the lock: a refresh under way (which reads the tokens) is waited for.
            self._refresher.remove(leases)
        finally:
            with self._condition:
                self._leaving -= 1
                self._condition.notify_all()

    def tokens(self) -> list[str]:
        """The tokens held now, sorted."""
        with self._condition:
            return sorted(self._held)

    @property
    def held(self) -> int:
        with self._condition:
            return len(self._held)

    def join(self) -> None:
        """Wait until no slot is held and no refresh of these leases is under way."""
        with self._condition:
            self._condition.wait_for(lambda: self._leases is None and not self._leaving)


class _SlotLeases(Refreshed):
    """What the refresher refreshes for a :class:`_Keeper` while it holds slots."""

    __slots__ = ("_keeper",)

    def __init__(self, keeper: _Keeper) -> None:
        super().__init__()
        self._keeper = keeper

    @property
    def refresh_interval(self) -> float:
        """A third of the limit's lease."""
        return self._keeper._limit.lease / 3

    def refresh_once(self) -> bool:
        """Refresh every slot held (a failure is logged; the next round tries again)."""
        tokens = self._keeper.tokens()
        if tokens:
            self._keeper._limit._refresh(tokens)
        return True


class RedisConcurrencyLimit(ConcurrencyLimiter):
    """At most ``limit`` calls at once among every process using this Redis and ``name``.

    Args:
        limit: the most slots held at once (an int >= 1).
        name: the limit's name: every process that passes the same name (and Redis) shares it.
        url: a ``redis://`` / ``rediss://`` / ``unix://`` URL; default: ``REDIS_URL``, else
            ``redis://localhost:6379/0``. Ignored with ``client``. Each command on a client
            made from it may take :data:`DEFAULT_SOCKET_TIMEOUT` seconds at most.
        client: an existing ``redis.Redis`` client (this object does not close it; its own
            socket timeouts bound each command). Its scripts go on connections kept for
            them, as :class:`~agentkit.checkpoint.RedisCheckPointStore`'s do.
        lease: seconds a slot stays held without a refresh: how long the slots of a process
            that died stay taken. The holder refreshes every third of it.
        prefix: what the Redis keys start with.
        clock: the clock slot leases are timed on. With the system's (a plain
            :class:`~agentkit.testing.Clock`, the default), the Redis server's clock times
            them: one clock for every process and host, so theirs do not matter. Any other
            clock (a test's :class:`~agentkit.testing.ManualClock`) times this object's
            grants, refreshes and :attr:`in_use`: a lease it finds ended by that clock is
            given to another caller (a test moves the clock past a dead holder's lease
            instead of waiting for it), and the refreshes of its own slots fall due as that
            clock moves. The Redis key still expires on the server's clock, ``lease``
            seconds after the last grant or refresh (garbage collection): keep the lease of
            such a test longer than the test runs (30 s and up). Lease ends written on
            different clocks are compared with each other, so give a clock of its own only
            in tests.

    Every process must give the same ``limit`` for the same ``name``: each grant compares
    the slots held with the limit its caller knows.

    Raises:
        ValueError: ``limit`` is not an int >= 1, ``name`` is empty, or ``lease`` is not > 0.
    """

    def __init__(
        self,
        limit: int,
        name: str,
        *,
        url: str | None = None,
        client: Any = None,
        lease: float = 60.0,
        prefix: str = DEFAULT_PREFIX,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise AgentKitValueError(
                f"RedisConcurrencyLimit needs the most calls at once as an int >= 1 "
                f"(got {limit!r})"
            )
        self._name = _check_name(name)
        if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not lease > 0:
            raise AgentKitValueError(f"lease must be a number of seconds > 0 (got {lease!r})")
        self._limit = limit
        self._clock = clock
        self._lease = float(lease)
        self._lease_ms = max(1, round(lease * 1000))
        self._client, self._owns_client = _connect(url, client, "RedisConcurrencyLimit")
        self._key = f"{prefix}{name}:slots"
        self._channel = f"{prefix}{name}:freed"
        self._scripts = Scripts(self._client)
        self._acquire_script = self._scripts.register(_ACQUIRE)
        self._refresh_script = self._scripts.register(_REFRESH)
        self._release_script = self._scripts.register(_RELEASE)
        self._wakeups = _Wakeups(self._client, self._channel, name)
        self._keeper = _Keeper(self)

    @property
    def limit(self) -> int:
        """The most slots held at once."""
        return self._limit

    @property
    def name(self) -> str:
        """The name the processes share the limit by."""
        return self._name

    @property
    def lease(self) -> float:
        """Seconds a slot stays held without a refresh."""
        return self._lease

    @property
    def clock(self) -> Clock:
        """The clock slot leases are timed on (``clock=``; the system's: Redis's clock)."""
        return self._clock

    @property
    def held_here(self) -> int:
        """How many slots this object holds now (in this process)."""
        return self._keeper.held

    @property
    def in_use(self) -> int:
        """How many slots are held now, by every process (leases that ran out not counted).

        Asks Redis.

        Raises:
            SharedLimitUnavailableError: Redis could not be reached.
        """
        try:
            mine = self._now()
            if isinstance(mine, int):
                now = mine
            else:
                seconds, microseconds = self._client.time()
                now = int(seconds) * 1000 + int(microseconds) // 1000
            return int(self._client.zcount(self._key, now + 1, "+inf"))
        except _redis_errors() as error:
            raise self._unavailable(error) from error

    def acquire(self, timeout: float | None = None) -> Slot:
        """Wait for a free slot (at most ``timeout`` seconds; ``None``: as long as it takes).

        Raises:
            SlotTimeoutError: no slot came free within ``timeout`` seconds.
            AgentCancelledError: inside a run, the run was cancelled immediately.
            SharedLimitUnavailableError: Redis could not be reached.
        """
        timeout = check_timeout(timeout)
        token = uuid.uuid4().hex
        wait_ms = self._try(token)
        if wait_ms is None:
            return self._granted(token, 0.0)
        waiting = Waiting(self, "concurrency", timeout)
        with waiting:
            self._wakeups.add(waiting)
            try:
                while True:
                    waiting.pause(min(_LOOK_AGAIN, max(wait_ms, 1) / 1000))
                    wait_ms = self._try(token)
                    if wait_ms is None:
                        return self._granted(token, waiting.waited)
            finally:
                self._wakeups.remove(waiting)

    def close(self) -> None:
        """Close the connections kept for this object's scripts, and the client if this
        object made it, once its calls are over.

        Waits for the calls that hold or wait for a slot of this object to end first (the
        refreshing of their leases and the wake-up thread end with them).
        """
        self._wakeups.join()
        self._keeper.join()
        self._scripts.close()
        if self._owns_client:
            self._client.close()

    def _try(self, token: str) -> int | None:
        """Ask for a slot: ``None`` when ``token`` got one, else the ms until a lease ends."""
        try:
            granted, wait_ms = self._acquire_script(
                keys=[self._key], args=[self._limit, token, self._lease_ms, self._now()]
            )
        except _redis_errors() as error:
            raise self._unavailable(error) from error
        return None if int(granted) == 1 else int(wait_ms)

    def _granted(self, token: str, waited: float) -> Slot:
        self._keeper.hold(token)
        return Slot(lambda: self._release(token), waited)

    def _release(self, token: str) -> None:
        self._keeper.drop(token)
        try:
            self._release_script(keys=[self._key, self._channel], args=[token])
        except _redis_errors() as error:
            # Its lease ends within `lease` seconds and frees the slot then.
            _log.warning(
                "agentkit: could not give a slot of %r back (%s: %s); it comes back when its "
                "lease ends, within %g s", self, type(error).__name__, error, self._lease,
            )

    def _refresh(self, tokens: list[str]) -> None:
        try:
            kept = int(
                self._refresh_script(keys=[self._key], args=[self._lease_ms, self._now(), *tokens])
            )
        except _redis_errors() as error:
            _log.warning(
                "agentkit: could not refresh the leases of %r (%s: %s); will try again",
                self, type(error).__name__, error,
            )
            return
        if kept < len(tokens):
            _log.warning(
                "agentkit: %d lease(s) of %r ran out before they were refreshed (the process "
                "stalled longer than lease=%g s, or Redis lost them: it restarted without "
                "persistence): the limit may be exceeded until those calls end",
                len(tokens) - kept, self, self._lease,
            )

    def _now(self) -> int | str:
        """Now in ms on the limit's clock, or ``""``: the Redis server's clock decides."""
        clock = self._clock
        return "" if type(clock) is Clock else round(clock.time() * 1000)

    def _unavailable(self, error: BaseException) -> SharedLimitUnavailableError:
        return SharedLimitUnavailableError(
            f"{self!r} could not reach Redis at {_where(self._client)} "
            f"({type(error).__name__}: {error}); the call did not start. Check that Redis "
            "is running and reachable, or give the model a limit that does not need it",
            limit=self,
        )

    def __repr__(self) -> str:
        return f"RedisConcurrencyLimit({self._limit}, {self._name!r})"


class RedisRateLimit(RateLimiter):
    """At most so many requests and tokens per minute among every process using ``name``.

    The same token buckets as :class:`~agentkit.RateLimit`, kept in Redis and measured with
    the Redis server's clock; a pause (a server's ``Retry-After``) holds back the callers of
    every process.

    Args:
        name: the limit's name: every process that passes the same name (and Redis) shares it.
        requests_per_minute: the requests allowed per minute (``None``: not limited).
        tokens_per_minute: the tokens allowed per minute (``None``: not limited).
        url: as for :class:`RedisConcurrencyLimit`.
        client: as for :class:`RedisConcurrencyLimit`.
        prefix: what the Redis keys start with.

    Raises:
        ValueError: ``name`` is empty, neither limit is given, or one is not a finite
            number > 0.
    """

    def __init__(
        self,
        name: str,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        url: str | None = None,
        client: Any = None,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        self._name = _check_name(name)
        # The same checks and messages as the in-process limit.
        checked = RateLimit(requests_per_minute, tokens_per_minute)
        self._requests = checked.requests_per_minute
        self._tokens = checked.tokens_per_minute
        self._client, self._owns_client = _connect(url, client, "RedisRateLimit")
        self._key = f"{prefix}{name}:rate"
        self._scripts = Scripts(self._client)
        self._take_script = self._scripts.register(_TAKE)
        self._settle_script = self._scripts.register(_SETTLE)
        self._pause_script = self._scripts.register(_PAUSE)
        self._paused_script = self._scripts.register(_PAUSED)

    @property
    def name(self) -> str:
        """The name the processes share the limit by."""
        return self._name

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
        """Seconds left of the pause a server asked for, in any process (``0.0``: none).

        Asks Redis.

        Raises:
            SharedLimitUnavailableError: Redis could not be reached.
        """
        try:
            return int(self._paused_script(keys=[self._key])) / 1000
        except _redis_errors() as error:
            raise self._unavailable(error) from error

    def acquire(self, tokens: int = 0, timeout: float | None = None) -> RateGrant:
        """Wait until one more request of about ``tokens`` tokens fits; take its place.

        Raises:
            SlotTimeoutError: it would not fit within ``timeout`` seconds; raised as soon as
                the wait needed is known to be longer.
            AgentCancelledError: inside a run, the run was cancelled immediately.
            SharedLimitUnavailableError: Redis could not be reached.
        """
        timeout = check_timeout(timeout)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise AgentKitValueError(f"tokens must be an int >= 0 (got {tokens!r})")
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
                wait = self._take(tokens)
                if wait <= 0:
                    return RateGrant(self._settle, tokens, waiting.waited)

    def pause(self, seconds: float) -> None:
        """Hold back every caller, in every process, for ``seconds`` from now.

        A failure to reach Redis is logged, not raised: the caller that got the 429 backs
        off by itself all the same.
        """
        seconds = float(seconds)
        if not seconds > 0:
            return
        try:
            self._pause_script(keys=[self._key], args=[max(1, round(seconds * 1000))])
        except _redis_errors() as error:
            _log.warning(
                "agentkit: could not pause %r for %g s (%s: %s); only the caller that was "
                "refused backs off", self, seconds, type(error).__name__, error,
            )

    def close(self) -> None:
        """Close the connections kept for this object's scripts, and the client if this
        object made it."""
        self._scripts.close()
        if self._owns_client:
            self._client.close()

    def _take(self, tokens: int) -> float:
        try:
            wait_ms = self._take_script(
                keys=[self._key], args=[self._requests or 0, self._tokens or 0, tokens]
            )
        except _redis_errors() as error:
            raise self._unavailable(error) from error
        return int(wait_ms) / 1000

    def _settle(self, difference: int) -> None:
        if self._tokens is None:
            return
        try:
            self._settle_script(
                keys=[self._key], args=[self._requests or 0, self._tokens, difference]
            )
        except _redis_errors() as error:
            _log.warning(
                "agentkit: could not correct the tokens of %r by %d (%s: %s)",
                self, difference, type(error).__name__, error,
            )

    def _unavailable(self, error: BaseException) -> SharedLimitUnavailableError:
        return SharedLimitUnavailableError(
            f"{self!r} could not reach Redis at {_where(self._client)} "
            f"({type(error).__name__}: {error}); the call did not start. Check that Redis "
            "is running and reachable",
            limit=self,
        )

    def __repr__(self) -> str:
        parts = [repr(self._name)]
        if self._requests is not None:
            parts.append(f"requests_per_minute={self._requests:g}")
        if self._tokens is not None:
            parts.append(f"tokens_per_minute={self._tokens:g}")
        return f"RedisRateLimit({', '.join(parts)})"
