"""A checkpoint store in Redis (redis-py, the ``agentkit[redis]`` extra), shareable by hosts."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit._lazy import present
from agentkit.checkpoint._base import (
    DEFAULT_LEASE_TTL,
    DEFAULT_MAX_BYTES,
    StoreLimits,
    _check_data,
    _check_owner,
    _check_size,
    _check_ttl,
    _encode_id,
    _steps_too_large,
    _too_large,
)
from agentkit.checkpoint._redisscripts import Scripts
from agentkit.errors import (
    AgentKitTypeError,
    AgentKitValueError,
    CheckpointBusyError,
    CheckpointError,
    MissingDependencyError,
)

if TYPE_CHECKING:
    from agentkit.checkpoint._base import CheckPointStore

_log = logging.getLogger("agentkit")

__all__ = [
    "RedisCheckPointStore",
    "DEFAULT_URL",
]

_T = TypeVar("_T")

DEFAULT_URL = "redis://localhost:6379/0"
"""The Redis server a store connects to when given no client and no URL."""

# Byte 0xFF never occurs in UTF-8, so a lease key can never equal a data key
# (prefix + UTF-8 id), whatever the prefix and the ids are.
_LEASE_INFIX = b"\xfflease:"
_STEPS_INFIX = b"\xffsteps:"

# KEYS[1] = checkpoint key, ARGV[1] = max bytes: the value, or its length (an integer reply)
# when it is over the limit, so an oversized value never crosses the network.
_GET_SCRIPT = """
local size = redis.call('STRLEN', KEYS[1])
if size > tonumber(ARGV[1]) then
    return size
end
return redis.call('GET', KEYS[1])
"""
# KEYS[1] = steps key, ARGV[1] = max bytes: the records, or their total size (an integer
# reply) when it is over the limit.
_READ_STEPS_SCRIPT = """
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local size = 0
for _, item in ipairs(items) do
    size = size + #item
end
if size > tonumber(ARGV[1]) then
    return size
end
return items
"""
# KEYS[1] = steps key, KEYS[2] = checkpoint key, ARGV[1] = record, ARGV[2] = ttl in ms: append
# and keep the checkpoint and its records alive while the run writes them.
_APPEND_EXPIRING_SCRIPT = """
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""
# KEYS[1] = steps key, ARGV[1] = the record: an RPUSH, as a script so that it goes where the
# other writes of a run go (agentkit.checkpoint._redisscripts).
_APPEND_SCRIPT = """
return redis.call('RPUSH', KEYS[1], ARGV[1])
"""
# KEYS[1] = checkpoint key, KEYS[2] = steps key, ARGV[1] = the new base, ARGV[2] = ttl in ms
# ("" = none): the new base and the removal of the old base's records, atomically.
_SET_BASE_SCRIPT = """
if ARGV[2] == '' then
    redis.call('SET', KEYS[1], ARGV[1])
else
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
redis.call('DEL', KEYS[2])
return 1
"""
# KEYS[1] = lease key, ARGV[1] = owner: delete the lease only if the owner still holds it.
_RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""
# KEYS[1] = lease key, ARGV[1] = owner, ARGV[2] = ttl in ms, ARGV[3] = now in ms on the
# store's clock ("" = the server's clock). Take the lease when it is free or expired, or extend
# it when the owner holds it: one round trip for both (a refresh is this call again, every
# third of the ttl). A key without an expiry is not a lease (agentkit never writes one): it is
# taken over (reply 2). With a clock of its own, a lease expires when its expiry time (the
# server's, TIME + PTTL) is past that clock's now; Redis still deletes the key by its own.
_ACQUIRE_SCRIPT = """
local current = redis.call('GET', KEYS[1])
local reply = 1
if current then
    local left = redis.call('PTTL', KEYS[1])
    if left < 0 then
        reply = 2
    elseif current ~= ARGV[1] then
        if ARGV[3] == '' then
            return 0
        end
        local t = redis.call('TIME')
        local expires = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + left
        if expires > tonumber(ARGV[3]) then
            return 0
        end
    end
end
if ARGV[3] == '' then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
    redis.call('SET', KEYS[1], ARGV[1], 'PXAT', tonumber(ARGV[3]) + tonumber(ARGV[2]))
end
return reply
"""
# KEYS[1] = lease key, ARGV[1] = owner, ARGV[2] = ttl in ms, ARGV[3] = now in ms on the
# store's clock ("" = the server's clock). Extend the lease only while the owner holds it: a
# lease whose key went (expired, or deleted by someone with write access to Redis) is lost,
# never taken again by a refresh, since another run may have held it meanwhile.
_REFRESH_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
if ARGV[3] == '' then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
    redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[3]) + tonumber(ARGV[2]))
end
return 1
"""
# Prepended to a write script to fence it: KEYS[#KEYS] = the id's lease key, ARGV[#ARGV] =
# the writer's lease owner. The write is made only while that owner holds the lease.
_FENCE = """
if redis.call('GET', KEYS[#KEYS]) ~= ARGV[#ARGV] then
    return 'agentkit:fenced'
end
"""
_FENCED = b"agentkit:fenced"
# KEYS[1] = checkpoint key, ARGV[1] = data, ARGV[2] = ttl in ms ("" = none).
_SET_SCRIPT = """
if ARGV[2] == '' then
    redis.call('SET', KEYS[1], ARGV[1])
else
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
"""
# KEYS = the keys to delete (the fence's lease key last, not deleted).
_DELETE_SCRIPT = """
for i = 1, #KEYS - 1 do
    redis.call('DEL', KEYS[i])
end
return 1
"""


def _glob_escape(prefix: bytes) -> bytes:
    """``prefix`` as a literal in a Redis glob pattern (``SCAN MATCH``)."""
    out = bytearray()
    for byte in prefix:
        if byte in b"*?[]\\^-":
            out += b"\\"
        out.append(byte)
    return bytes(out)


def _redact(url: str) -> str:
    """Hide the credentials of a Redis URL (for reprs and messages)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def _namespace(client: Any, prefix: str) -> str:
    """The namespace of checkpoints under ``prefix`` in the database ``client`` selects."""
    # redis.Redis names its database in its connection settings; a cluster has only db 0.
    settings = getattr(client, "get_connection_kwargs", None)
    database = int(settings().get("db") or 0) if callable(settings) else 0
    return f"redis/{database}:{prefix}"


class RedisCheckPointStore(StoreLimits):
    """Checkpoints as Redis strings, with leases; usable by every process that reaches Redis.

    Args:
        url: a ``redis://`` / ``rediss://`` / ``unix://`` URL; default: the ``REDIS_URL``
            environment variable, else ``redis://localhost:6379/0``. Ignored when ``client``
            is given.
        client: an existing ``redis.Redis`` client to use (it must not decode responses).
            The store does not close a client it was given. Its scripts (the reads and
            writes of checkpoints, step records and leases) go on connections made with the
            client pool's settings and kept by the store for them (as many as threads wrote
            at once, apart from the pool's ``max_connections``; ``close()`` closes them);
            with a Sentinel, cluster or blocking pool, a pool capped below 100
            connections, or a client-side cache, through the pool as any command.
        prefix: prepended to every key; a checkpoint lives at ``prefix + id``.
        ttl: when given, checkpoints expire this many seconds after they were last written
            (a step record written counts for its checkpoint too: a live run's checkpoint does
            not expire under it), and so do the tombstones of completed runs. Redis expires
            them (``PX``), on its own clock whatever ``clock`` is: retention needs no
            precision a test could lose by waiting, while an expiry time compared with the
            caller's clock would leave keys Redis never deletes and make every read a script.
            A test of it waits for Redis (a short ``ttl``).
        max_bytes: the largest checkpoint read or written; a bigger value is refused from its
            ``STRLEN`` (checked in the same server-side script as the ``GET``) unread.
        lease_ttl: how long a resume lease lasts unless refreshed (seconds).
        outage_wait: how long (seconds) an operation keeps trying, with growing pauses, while
            Redis cannot be reached (a restart, a failover) before it fails; default 0: at
            once. A durable run's step writes then wait out a short outage instead of failing
            the run. A retried append whose first try did reach Redis leaves the record twice
            in a row, which loading applies once. :class:`~agentkit.integrations.celery.AgentQueue`
            uses 60 seconds.
        clock: the clock leases expire on. With the system's (a plain
            :class:`~agentkit.testing.Clock`, the default), Redis's own: a lease is a key Redis
            expires, one clock for every host. Any other clock (a test's
            :class:`agentkit.testing.ManualClock`) decides when a lease has expired: its
            expiry is set with ``PXAT`` on that clock's time (Redis 6.2 or later), and a lease
            whose expiry is past that clock's now is taken over although Redis still keeps
            the key. Checkpoints' ``ttl`` stays on Redis's clock.

    Checkpoints are bound to the store's database and prefix (see :attr:`namespace`): one
    copied to another database or prefix does not load.

    A lease on an id is a key holding the owner name, set with ``PX`` (so Redis itself expires
    it) when the key is missing or expired, and refreshed or released only by its owner,
    through small Lua scripts that compare and then ``SET`` / ``DEL`` atomically (taking and
    refreshing a lease: one round trip each). Lease keys are
    ``prefix + b"\\xfflease:" + id`` and can never collide with a checkpoint key. A lease key
    without an expiry is not a lease (agentkit never writes one; someone with write access to
    Redis may): it is taken over, with a warning, instead of blocking every resume for ever.
    A durable run writes through :meth:`fenced`: each of its writes checks, in the script
    that makes it, that the run still holds the lease, so a run whose lease was taken (its
    key deleted or rewritten) writes nothing more from its next step on and stops.

    Step records (:class:`~agentkit.checkpoint.JournalingCheckPointStore`) are a Redis list at
    ``prefix + b"\\xffsteps:" + id``, one ``RPUSH`` each (atomic). How durable a record is
    after a crash of the Redis server itself is Redis's persistence setting (``appendonly``
    and ``appendfsync``); ``sync=True`` changes nothing here.

    redis-py is imported when a store is constructed, not when this module is imported.
    Redis errors are raised as :class:`~agentkit.errors.CheckpointError`.

    Example::

        store = RedisCheckPointStore("redis://localhost:6379/0", ttl=7 * 24 * 3600)
        runner = Runner(agent, checkpoint_store=store)
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "agentkit:checkpoint:",
        ttl: float | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        outage_wait: float = 0.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._clock = clock
        if ttl is not None:
            _check_ttl(ttl)
        _check_ttl(lease_ttl)
        if not isinstance(outage_wait, (int, float)) or not 0 <= outage_wait < float("inf"):
            raise AgentKitValueError(
                f"outage_wait must be a number of seconds >= 0 (got {outage_wait!r})"
            )
        self._outage_wait = float(outage_wait)
        self._set_limits(max_bytes, lease_ttl)
        if not isinstance(prefix, str):
            raise AgentKitTypeError(f"prefix must be a str, not {type(prefix).__name__}")
        self._prefix = prefix.encode("utf-8")
        self._ttl_ms = None if ttl is None else max(1, round(ttl * 1000))
        self._owns_client = client is None
        if client is None:
            try:
                import redis
            except ImportError as exc:
                raise MissingDependencyError(
                    "RedisCheckPointStore needs redis-py: pip install 'agentkit[redis]'"
                ) from exc
            url = url or os.environ.get("REDIS_URL") or DEFAULT_URL
            client = redis.Redis.from_url(url)
        self._client = client
        self._url = url
        self._namespace = _namespace(client, prefix)
        self._scripts = Scripts(client)
        self._get_script = self._scripts.register(_GET_SCRIPT)
        self._release_script = self._scripts.register(_RELEASE_SCRIPT)
        self._read_steps_script = self._scripts.register(_READ_STEPS_SCRIPT)
        self._append_expiring_script = self._scripts.register(_APPEND_EXPIRING_SCRIPT)
        self._append_script = self._scripts.register(_APPEND_SCRIPT)
        self._acquire_script = self._scripts.register(_ACQUIRE_SCRIPT)
        self._refresh_script = self._scripts.register(_REFRESH_SCRIPT)
        self._set_base_script = self._scripts.register(_SET_BASE_SCRIPT)
        self._fenced_scripts = {
            name: self._scripts.register(_FENCE + source)
            for name, source in (
                ("append", _APPEND_SCRIPT),
                ("append_expiring", _APPEND_EXPIRING_SCRIPT),
                ("set_base", _SET_BASE_SCRIPT),
                ("set", _SET_SCRIPT),
                ("delete", _DELETE_SCRIPT),
            )
        }

    @property
    def client(self) -> Any:
        """The ``redis.Redis`` client in use."""
        return self._client

    @property
    def namespace(self) -> str:
        """Where checkpoints here live, which they are signed with: ``"redis/<db>:<prefix>"``.

        A checkpoint copied to another database or under another prefix is refused.
        """
        return self._namespace

    @property
    def legacy_namespaces(self) -> tuple[str, ...]:
        """``("redis:<prefix>",)``: the namespace earlier releases signed checkpoints with.

        Accepted when loading only, so checkpoints saved by an earlier release (in any
        database) still resume after an upgrade. Nothing is signed with it any more, so a
        checkpoint saved by this release is bound to its database; one saved before cannot be
        told apart from a copy made in another database of the same server.
        """
        return ("redis:" + self._prefix.decode("utf-8"),)

    def key_for(self, checkpoint_id: str) -> bytes:
        """Return the Redis key of the checkpoint ``checkpoint_id``."""
        return self._prefix + _encode_id(checkpoint_id)

    def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes stored under ``checkpoint_id``, or ``None``."""
        key = self.key_for(checkpoint_id)
        value = self._run(
            f"read checkpoint {checkpoint_id!r}",
            lambda: self._get_script(keys=[key], args=[self._max_bytes]),
        )
        if isinstance(value, int):
            raise _too_large(checkpoint_id, value, self._max_bytes)
        if value is None or isinstance(value, bytes):
            return value
        raise CheckpointError(
            f"Redis returned {type(value).__name__} for checkpoint {checkpoint_id!r}; create the "
            "client with decode_responses=False so checkpoints stay bytes"
        )

    def set(self, checkpoint_id: str, data: bytes) -> None:
        """Store ``data`` under ``checkpoint_id`` (expiring after ``ttl`` when one was given)."""
        key = self.key_for(checkpoint_id)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        self._run(
            f"write checkpoint {checkpoint_id!r}",
            lambda: self._client.set(key, data, px=self._ttl_ms),
        )

    def set_base(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """Store ``data`` under ``checkpoint_id`` and remove its step records, atomically.

        See :class:`~agentkit.checkpoint.RebasingCheckPointStore`: one round trip (a Lua
        script: ``SET`` and ``DEL``), so no reader sees the new base beside the old records.
        ``sync`` changes nothing: what survives a crash of Redis itself is the server's
        persistence setting (``appendfsync``), for this as for every write.
        """
        keys = [self.key_for(checkpoint_id), self._steps_key(checkpoint_id)]
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        ttl = "" if self._ttl_ms is None else self._ttl_ms
        self._run(
            f"write checkpoint {checkpoint_id!r}",
            lambda: self._set_base_script(keys=keys, args=[data, ttl]),
        )

    def delete(self, checkpoint_id: str) -> None:
        """Remove the checkpoint and its step records; an unknown id is not an error."""
        keys = (self.key_for(checkpoint_id), self._steps_key(checkpoint_id))
        self._run(f"delete checkpoint {checkpoint_id!r}", lambda: self._client.delete(*keys))

    def checkpoint_ids(self) -> list[str]:
        """Every id that holds a checkpoint under this store's prefix, sorted (``SCAN``).

        An expired checkpoint (``ttl``) is not listed; a scan runs in many round trips, so a
        checkpoint written or deleted meanwhile may be listed or not.
        """
        pattern = _glob_escape(self._prefix) + b"*"
        start = len(self._prefix)

        def scan() -> list[str]:
            ids = []
            for key in self._client.scan_iter(match=pattern, count=500):
                name = bytes(key)[start:]
                if not name.startswith(b"\xff"):  # a lease or step key (never UTF-8)
                    ids.append(name.decode("utf-8", "surrogatepass"))
            return sorted(ids)

        return self._run("list the checkpoints", scan)

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """Append the step record ``data`` (``RPUSH``, in a script); with a ``ttl``, renew the
        expiry of the checkpoint and its records."""
        key = self._steps_key(checkpoint_id)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        ttl_ms = self._ttl_ms
        if ttl_ms is None:
            operation: Callable[[], object] = lambda: self._append_script(keys=[key], args=[data])  # noqa: E731
        else:
            keys = [key, self.key_for(checkpoint_id)]
            operation = lambda: self._append_expiring_script(keys=keys, args=[data, ttl_ms])  # noqa: E731
        self._run(f"append a step of checkpoint {checkpoint_id!r}", operation)

    def read_steps(self, checkpoint_id: str) -> list[bytes]:
        """Return the step records of ``checkpoint_id``, oldest first."""
        key = self._steps_key(checkpoint_id)
        value = self._run(
            f"read the steps of checkpoint {checkpoint_id!r}",
            lambda: self._read_steps_script(keys=[key], args=[self._max_bytes]),
        )
        if isinstance(value, int):
            raise _steps_too_large(checkpoint_id, value, self._max_bytes)
        if not all(isinstance(item, bytes) for item in value):
            raise CheckpointError(
                f"Redis returned text for the steps of checkpoint {checkpoint_id!r}; create the "
                "client with decode_responses=False so step records stay bytes"
            )
        return list(value)

    def delete_steps(self, checkpoint_id: str) -> None:
        """Remove the step records of ``checkpoint_id``; an unknown id is not an error."""
        key = self._steps_key(checkpoint_id)
        self._run(
            f"delete the steps of checkpoint {checkpoint_id!r}", lambda: self._client.delete(key)
        )

    def acquire_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool:
        """Lease ``checkpoint_id`` for ``owner``.

        See :class:`~agentkit.checkpoint.LeasingCheckPointStore`.
        """
        key = self._lease_key(checkpoint_id)
        _check_owner(owner)
        _check_ttl(ttl)
        ttl_ms = max(1, round(ttl * 1000))
        clock = self._clock
        own_clock = type(clock) is not Clock  # the system's clock: Redis's decides

        def acquire() -> int:
            now = round(clock.time() * 1000) if own_clock else ""
            return int(self._acquire_script(keys=[key], args=[owner.encode("utf-8"), ttl_ms, now]))

        taken = self._run(f"take the lease on checkpoint {checkpoint_id!r}", acquire)
        if taken == 2:
            _log.warning(
                "agentkit: the lease key of checkpoint %r had no expiry, so it was no lease "
                "(agentkit's leases always expire; someone with write access to Redis wrote "
                "it): %s took it over",
                checkpoint_id,
                owner,
            )
        return taken > 0

    def refresh_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool:
        """Extend ``owner``'s lease on ``checkpoint_id`` to ``ttl`` seconds from now, only
        while ``owner`` holds it (:meth:`~agentkit.checkpoint.Lease.refresh` calls this).

        Returns ``False`` when the lease key is gone or holds another owner: the lease was
        lost, and is not taken again even if it is free now (another run may have held it
        and ended meanwhile).
        """
        key = self._lease_key(checkpoint_id)
        _check_owner(owner)
        _check_ttl(ttl)
        ttl_ms = max(1, round(ttl * 1000))
        clock = self._clock
        own_clock = type(clock) is not Clock

        def refresh() -> int:
            now = round(clock.time() * 1000) if own_clock else ""
            return int(self._refresh_script(keys=[key], args=[owner.encode("utf-8"), ttl_ms, now]))

        return self._run(f"refresh the lease on checkpoint {checkpoint_id!r}", refresh) == 1

    def release_lease(self, checkpoint_id: str, owner: str) -> None:
        """Release the lease if ``owner`` holds it."""
        key = self._lease_key(checkpoint_id)
        self._run(
            f"release the lease on checkpoint {checkpoint_id!r}",
            lambda: self._release_script(keys=[key], args=[owner.encode("utf-8")]),
        )

    def fenced(self, checkpoint_id: str, owner: str) -> CheckPointStore:
        """This store, as the holder ``owner`` of the lease on ``checkpoint_id`` writes it.

        The returned store reads as this one; each of its writes of ``checkpoint_id`` (``set``,
        ``set_base``, ``append_step``, ``delete``, ``delete_steps``) is one script that first
        checks that the lease key holds ``owner``, and raises
        :class:`~agentkit.errors.CheckpointBusyError` (writing nothing) when it does not: the
        lease expired and was taken, or someone with write access to Redis deleted or
        rewrote it. A durable run writes through it, so a second run given the id cannot
        have the first one go on writing beside it. Writes of other ids are not fenced.
        """
        return _FencedRedisStore(self, checkpoint_id, _check_owner(owner))

    def close(self) -> None:
        """Close the connections kept for the store's scripts, and the client if this store
        created it."""
        self._scripts.close()
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> RedisCheckPointStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = _redact(self._url) if self._owns_client and self._url else "client=..."
        return f"RedisCheckPointStore({where!r}, prefix={self._prefix.decode('utf-8')!r})"

    def _steps_key(self, checkpoint_id: str) -> bytes:
        return self._prefix + _STEPS_INFIX + _encode_id(checkpoint_id)

    def lease_key(self, checkpoint_id: str) -> bytes:
        """The Redis key of the lease on ``checkpoint_id`` (it holds the owner's name).

        For a caller whose own Lua script frees a lease with other writes (the Celery worker
        frees a run's lease with the script that records its end), after it stopped
        refreshing it.
        """
        return self._lease_key(checkpoint_id)

    def _lease_key(self, checkpoint_id: str) -> bytes:
        return self._prefix + _LEASE_INFIX + _encode_id(checkpoint_id)

    def _run(self, what: str, operation: Callable[[], _T]) -> _T:
        import redis

        deadline = time.monotonic() + self._outage_wait
        pause = 0.05
        warned = False
        while True:
            try:
                return operation()
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if time.monotonic() + pause > deadline:
                    raise CheckpointError(f"cannot {what} in Redis: {exc}") from exc
                if not warned:
                    warned = True
                    _log.warning("agentkit: Redis is away (%s); trying to %s again", exc, what)
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
            except redis.RedisError as exc:
                raise CheckpointError(f"cannot {what} in Redis: {exc}") from exc


class _FencedRedisStore:
    """A :class:`RedisCheckPointStore` whose writes of one id are fenced by its lease."""

    __slots__ = ("_checkpoint_id", "_lease_key", "_owner", "_store")

    def __init__(self, store: RedisCheckPointStore, checkpoint_id: str, owner: str) -> None:
        self._store = store
        self._checkpoint_id = checkpoint_id
        self._owner = owner.encode("utf-8")
        self._lease_key = store.lease_key(checkpoint_id)

    @property
    def namespace(self) -> str:
        """The store's namespace."""
        return self._store.namespace

    @property
    def legacy_namespaces(self) -> tuple[str, ...]:
        """The store's legacy namespaces."""
        return self._store.legacy_namespaces

    @property
    def max_bytes(self) -> int:
        """The store's ``max_bytes``."""
        return self._store.max_bytes

    @property
    def lease_ttl(self) -> float:
        """The store's ``lease_ttl``."""
        return self._store.lease_ttl

    @property
    def clock(self) -> Clock:
        """The store's clock."""
        return self._store.clock

    def get(self, checkpoint_id: str) -> bytes | None:
        """Read as the store does."""
        return self._store.get(checkpoint_id)

    def read_steps(self, checkpoint_id: str) -> list[bytes]:
        """Read as the store does."""
        return self._store.read_steps(checkpoint_id)

    def acquire_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool:
        """As the store does."""
        return self._store.acquire_lease(checkpoint_id, owner, ttl)

    def release_lease(self, checkpoint_id: str, owner: str) -> None:
        """As the store does."""
        self._store.release_lease(checkpoint_id, owner)

    def set(self, checkpoint_id: str, data: bytes) -> None:
        """``set``, fenced."""
        if checkpoint_id != self._checkpoint_id:
            self._store.set(checkpoint_id, data)
            return
        store = self._store
        data = _check_size(checkpoint_id, _check_data(data), store.max_bytes)
        ttl = "" if store._ttl_ms is None else store._ttl_ms
        self._write("write", "set", [store.key_for(checkpoint_id)], [data, ttl])

    def set_base(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """``set_base``, fenced."""
        if checkpoint_id != self._checkpoint_id:
            self._store.set_base(checkpoint_id, data, sync=sync)
            return
        store = self._store
        data = _check_size(checkpoint_id, _check_data(data), store.max_bytes)
        ttl = "" if store._ttl_ms is None else store._ttl_ms
        keys = [store.key_for(checkpoint_id), store._steps_key(checkpoint_id)]
        self._write("write", "set_base", keys, [data, ttl])

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """``append_step``, fenced."""
        if checkpoint_id != self._checkpoint_id:
            self._store.append_step(checkpoint_id, data, sync=sync)
            return
        store = self._store
        data = _check_size(checkpoint_id, _check_data(data), store.max_bytes)
        steps = store._steps_key(checkpoint_id)
        if store._ttl_ms is None:
            self._write("append a step of", "append", [steps], [data])
        else:
            keys = [steps, store.key_for(checkpoint_id)]
            self._write("append a step of", "append_expiring", keys, [data, store._ttl_ms])

    def delete(self, checkpoint_id: str) -> None:
        """``delete``, fenced."""
        if checkpoint_id != self._checkpoint_id:
            self._store.delete(checkpoint_id)
            return
        store = self._store
        keys = [store.key_for(checkpoint_id), store._steps_key(checkpoint_id)]
        self._write("delete", "delete", keys, [])

    def delete_steps(self, checkpoint_id: str) -> None:
        """``delete_steps``, fenced."""
        if checkpoint_id != self._checkpoint_id:
            self._store.delete_steps(checkpoint_id)
            return
        self._write("delete the steps of", "delete", [self._store._steps_key(checkpoint_id)], [])

    def _write(self, what: str, script: str, keys: list[bytes], args: list[Any]) -> None:
        checkpoint_id = self._checkpoint_id
        run = self._store._fenced_scripts[script]
        keys = [*keys, self._lease_key]
        args = [*args, self._owner]
        reply = self._store._run(
            f"{what} checkpoint {checkpoint_id!r}", lambda: run(keys=keys, args=args)
        )
        if reply == _FENCED:
            raise CheckpointBusyError(
                f"checkpoint {checkpoint_id!r}: this run no longer holds its lease (it expired "
                "and another run took it, or someone with write access to Redis deleted or "
                "rewrote the lease key), so another run may be running it; this run writes "
                "nothing more and stops"
            )

    def __repr__(self) -> str:
        return f"<fenced {self._store!r} id={self._checkpoint_id!r}>"

present((RedisCheckPointStore,), "agentkit.checkpoint")
