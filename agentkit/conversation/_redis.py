"""A conversation store in Redis (redis-py, the ``agentkit[redis]`` extra), shareable by hosts."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Sequence
from typing import Any

from agentkit._lazy import present
from agentkit._refresher import REFRESHER, Refreshed
from agentkit.conversation._base import DEFAULT_MAX_RECORD_BYTES, ConversationLock, busy
from agentkit.conversation._records import (
    ThreadLocks,
    check_id,
    check_index,
    check_max_record_bytes,
    decode_records,
    encode_records,
    out_of_range,
)
from agentkit.errors import AgentKitValueError, MissingDependencyError
from agentkit.schema import Message

__all__ = [
    "RedisConversationStore",
    "DEFAULT_LOCK_TTL",
    "DEFAULT_URL",
]

DEFAULT_URL = "redis://localhost:6379/0"
"""The Redis server a store connects to when given no client and no URL."""
DEFAULT_LOCK_TTL = 30.0
"""Seconds a writer lock lasts without a refresh, by default."""

# Byte 0xFF never occurs in UTF-8, so a lock key never equals a conversation key.
_log = logging.getLogger("agentkit")
_LOCK_INFIX = b"\xfflock:"

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""
# KEYS[1] = the list, ARGV[1] = position, ARGV[2] = a fresh token: the list's length when
# there is no record at that position, else -1 once the record is removed (marked with the
# token, then that one mark removed).
_DROP = """
local length = redis.call('LLEN', KEYS[1])
local index = tonumber(ARGV[1])
if index >= length then
    return length
end
redis.call('LSET', KEYS[1], index, ARGV[2])
redis.call('LREM', KEYS[1], 1, ARGV[2])
return -1
"""
_REFRESH = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


class RedisConversationStore:
    """Conversations as Redis lists of JSON strings, at ``prefix + id``.

    Args:
        url: a ``redis://`` / ``rediss://`` / ``unix://`` URL; default: the ``REDIS_URL``
            environment variable, else ``redis://localhost:6379/0``. Ignored with ``client``.
        client: an existing ``redis.Redis`` client (the store does not close it).
        prefix: prepended to every key.
        lock_ttl: seconds a writer lock lasts without a refresh; the lock is refreshed
            every third of that while it is held (by the one thread that also keeps the
            process's run leases: a held lock starts no thread of its own), so this only
            bounds how long a conversation stays locked after its writer's process died.
        max_record_bytes: the largest record (one message as UTF-8 JSON) appended or loaded.

    An append is one ``RPUSH`` (atomic); :meth:`drop_record` is one Lua script. The writer
    lock is a key set with ``SET NX PX`` and a random owner token; only its owner refreshes
    or deletes it (Lua scripts).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "agentkit:conversation:",
        lock_ttl: float = DEFAULT_LOCK_TTL,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self._max_record_bytes = check_max_record_bytes(max_record_bytes)
        if lock_ttl <= 0:
            raise AgentKitValueError(
                f"lock_ttl must be a positive number of seconds (got {lock_ttl!r})"
            )
        self._owns_client = client is None
        if client is None:
            try:
                import redis
            except ImportError as error:  # pragma: no cover - the extra is missing
                raise MissingDependencyError(
                    "RedisConversationStore needs redis-py: pip install 'agentkit[redis]'"
                ) from error
            client = redis.Redis.from_url(url or os.environ.get("REDIS_URL") or DEFAULT_URL)
        self._client = client
        self._prefix = prefix.encode("utf-8")
        self._lock_ttl = float(lock_ttl)
        self._threads = ThreadLocks()

    @property
    def max_record_bytes(self) -> int:
        """The largest record this store appends or loads, in bytes."""
        return self._max_record_bytes

    def key_for(self, conversation_id: str) -> bytes:
        """Return the Redis key of the conversation ``conversation_id`` (a list)."""
        return self._prefix + check_id(conversation_id).encode("utf-8")

    def load(self, conversation_id: str) -> list[Message]:
        """Return the conversation's messages, oldest first."""
        records = self._client.lrange(self.key_for(conversation_id), 0, -1)
        return decode_records(conversation_id, records, self._max_record_bytes)

    def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the conversation (one RPUSH)."""
        key = self.key_for(conversation_id)
        records = encode_records(conversation_id, messages, self._max_record_bytes)
        if records:
            self._client.rpush(key, *records)

    def delete(self, conversation_id: str) -> None:
        """Forget the conversation."""
        self._client.delete(self.key_for(conversation_id))

    def drop_record(self, conversation_id: str, index: int) -> None:
        """Remove the record at position ``index`` (0 is the oldest; the later ones move up).

        Raises:
            IndexError: there is no record at ``index``.
            ConversationBusyError: a turn of the conversation is running.
        """
        key = self.key_for(conversation_id)
        check_index(index)
        lock = self.lock(conversation_id)
        try:
            if index < 0:
                count = self._client.llen(key)
            else:
                count = self._client.eval(_DROP, 1, key, index, b"\xff" + uuid.uuid4().bytes)
            if count >= 0:
                raise out_of_range(conversation_id, index, count)
        finally:
            lock.release()

    def lock(self, conversation_id: str) -> ConversationLock:
        """Take the conversation's writer lock (raises ConversationBusyError if taken)."""
        key = self.key_for(conversation_id) + _LOCK_INFIX
        if not self._threads.take(conversation_id):
            raise busy(conversation_id, "in this process")
        token = uuid.uuid4().hex
        try:
            taken = self._client.set(key, token, nx=True, px=int(self._lock_ttl * 1000))
        except BaseException:
            self._threads.give_back(conversation_id)
            raise
        if not taken:
            self._threads.give_back(conversation_id)
            raise busy(conversation_id, "held by another process")
        return _RedisLock(self, conversation_id, key, token)

    def close(self) -> None:
        """Close the client, if the store made it."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> RedisConversationStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedisConversationStore(prefix={self._prefix.decode('utf-8')!r})"


class _RedisLock(Refreshed):
    """A held Redis lock, refreshed by the process's refreshing thread until :meth:`release`."""

    __slots__ = ("_id", "_key", "_released", "_store", "_token")

    def __init__(self, store: RedisConversationStore, conversation_id: str, key: bytes, token: str):
        super().__init__()
        self._store = store
        self._id = conversation_id
        self._key = key
        self._token = token
        self._released = False
        REFRESHER.add(self)

    @property
    def refresh_interval(self) -> float:
        """A third of the lock's ttl."""
        return self._store._lock_ttl / 3

    def refresh_once(self) -> bool:
        """Extend the lock; ``False`` once it is gone (it expired: nothing brings it back)."""
        ttl_ms = int(self._store._lock_ttl * 1000)
        try:
            return bool(self._store._client.eval(_REFRESH, 1, self._key, self._token, ttl_ms))
        except Exception:  # a blip: the next refresh tries again before the lock expires
            _log.warning(
                "agentkit: could not refresh the lock of conversation %r", self._id, exc_info=True
            )
            return True

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        REFRESHER.remove(self)
        try:
            self._store._client.eval(_RELEASE, 1, self._key, self._token)
        finally:
            self._store._threads.give_back(self._id)


# Defined here; documented and imported as agentkit.conversation.
present((RedisConversationStore,), "agentkit.conversation")
