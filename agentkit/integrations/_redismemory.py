"""A memory store in Redis (redis-py): memories shared by every process of an app."""

from __future__ import annotations

import builtins
import json
import os
import uuid
from collections.abc import Mapping
from typing import Any

from agentkit.checkpoint._redisscripts import Scripts
from agentkit.errors import MissingDependencyError
from agentkit.memory._base import (
    DEFAULT_MAX_MEMORIES,
    Memory,
    MemoryStoreError,
    MemoryStoreFullError,
    check_id,
    check_limit,
    check_max_memories,
    check_namespace,
    checked_memory,
    decode_metadata,
    query_text,
)
from agentkit.memory._words import MAX_QUERY_WORDS, words

__all__ = ["RedisMemoryStore"]

# KEYS: the memories (a hash: id -> JSON), their order (a sorted set: id -> seq), the
# namespace's counter, then one set per word of the text. ARGV: id, JSON, max_memories.
# Returns the new memory's seq, or -1 when the namespace is full.
_SAVE = """
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
    return -1
end
local seq = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
for i = 4, #KEYS do
    redis.call('SADD', KEYS[i], ARGV[1])
end
return seq
"""

# KEYS: the memories, their order, then the word sets of the memory's text. ARGV: the id.
_DELETE = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
    return 0
end
redis.call('ZREM', KEYS[2], ARGV[1])
for i = 3, #KEYS do
    redis.call('SREM', KEYS[i], ARGV[1])
end
return 1
"""

# KEYS: the memories, their order, a scratch key, then the word sets of the query. ARGV: the
# limit. Each memory scores the sum of the weights (_words.idf, computed here) of the
# query's words it has, computed by the server (ZUNIONSTORE); returns id, score, JSON for
# the best ones.
_SEARCH = """
local total = redis.call('ZCARD', KEYS[2])
if total == 0 then
    return {}
end
local keys, weights = {}, {}
for i = 4, #KEYS do
    local having = redis.call('SCARD', KEYS[i])
    if having > 0 then
        keys[#keys + 1] = KEYS[i]
        weights[#weights + 1] = tostring(math.log(1 + (total - having + 0.5) / (having + 0.5)))
    end
end
if #keys == 0 then
    return {}
end
local args = {'ZUNIONSTORE', KEYS[3], #keys}
for _, key in ipairs(keys) do args[#args + 1] = key end
args[#args + 1] = 'WEIGHTS'
for _, weight in ipairs(weights) do args[#args + 1] = weight end
redis.call(unpack(args))
local best = redis.call('ZREVRANGE', KEYS[3], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
redis.call('DEL', KEYS[3])
local found = {}
for i = 1, #best, 2 do
    local doc = redis.call('HGET', KEYS[1], best[i])
    if doc then
        found[#found + 1] = best[i]
        found[#found + 1] = best[i + 1]
        found[#found + 1] = doc
    end
end
return found
"""

_SOCKET_TIMEOUT = 2.0  # seconds one command may take, connect included


class RedisMemoryStore:
    """Memories in Redis, searched by shared words (the same search as
    :class:`~agentkit.memory.InMemoryMemoryStore`, computed by the server).

    Args:
        url: a ``redis://`` / ``rediss://`` / ``unix://`` URL; default: the ``REDIS_URL``
            environment variable, else ``redis://localhost:6379/0``. Ignored with ``client``.
        client: an existing ``redis.Redis`` client (the store does not close it).
        prefix: what every key of the store starts with.
        max_memories: how many memories one namespace holds.

    A namespace's keys are ``prefix + "{" + hex(namespace) + "}:..."``: the namespace is
    hex-encoded, so no namespace's keys can be another's (``"a"`` and ``"a:b"`` included),
    and the braces keep them in one Redis Cluster slot. A save, a delete and a search are
    one Lua script each (atomic); the ranking is idf-weighted word overlap (rarer shared
    words count more). A Redis that cannot be reached raises
    :class:`~agentkit.memory.MemoryStoreError` saying so.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Any = None,
        prefix: str = "agentkit:memory:",
        max_memories: int = DEFAULT_MAX_MEMORIES,
    ) -> None:
        self._max = check_max_memories(max_memories)
        self._owns_client = client is None
        if client is None:
            try:
                import redis
            except ImportError as error:  # pragma: no cover - the extra is missing
                raise MissingDependencyError(
                    "RedisMemoryStore needs redis-py: pip install 'agentkit[redis]'"
                ) from error
            client = redis.Redis.from_url(
                url or os.environ.get("REDIS_URL") or "redis://localhost:6379/0",
                socket_timeout=_SOCKET_TIMEOUT,
                socket_connect_timeout=_SOCKET_TIMEOUT,
            )
        self._client = client
        self._prefix = prefix
        self._scripts = Scripts(client)
        self._save = self._scripts.register(_SAVE)
        self._delete = self._scripts.register(_DELETE)
        self._search = self._scripts.register(_SEARCH)

    def _base(self, namespace: str) -> str:
        return f"{self._prefix}{{{namespace.encode('utf-8').hex()}}}:"

    def _word_keys(self, base: str, text: str, limit: int | None = None) -> list[str]:
        found = words(text)
        if limit is not None:
            found = found[:limit]
        return [f"{base}w:{word}" for word in found]

    def save(
        self, namespace: str, text: str, *, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """Keep ``text`` in ``namespace``; return the new memory's id."""
        namespace = check_namespace(namespace)
        text, encoded = checked_memory(text, metadata)
        memory_id = uuid.uuid4().hex
        base = self._base(namespace)
        document = json.dumps({"text": text, "metadata": encoded}, ensure_ascii=False)
        keys = [f"{base}m", f"{base}o", f"{base}n", *self._word_keys(base, text)]
        seq = self._call(self._save, keys, [memory_id, document, self._max])
        if int(seq) < 0:
            raise MemoryStoreFullError(
                f"memory namespace {namespace!r:.80} holds {self._max} memories, the most "
                "this store keeps: delete some, or make the store with a larger max_memories"
            )
        return memory_id

    def search(self, namespace: str, query: str, *, limit: int = 5) -> builtins.list[Memory]:
        """The memories of ``namespace`` sharing the most (and rarest) words with ``query``."""
        namespace = check_namespace(namespace)
        limit = check_limit(limit)
        base = self._base(namespace)
        word_keys = self._word_keys(base, query_text(query), MAX_QUERY_WORDS)
        if not word_keys:
            return []
        scratch = f"{base}tmp:{uuid.uuid4().hex}"
        reply = self._call(
            self._search, [f"{base}m", f"{base}o", scratch, *word_keys], [limit]
        )
        found = []
        for index in range(0, len(reply), 3):
            memory_id, score, document = reply[index : index + 3]
            found.append(self._memory(memory_id, document, float(score)))
        return found

    def delete(self, namespace: str, memory_id: str) -> None:
        """Forget the memory ``memory_id`` of ``namespace`` (if it is there)."""
        namespace = check_namespace(namespace)
        memory_id = check_id(memory_id)
        base = self._base(namespace)
        document = self._guarded(lambda: self._client.hget(f"{base}m", memory_id))
        if document is None:
            return
        text = json.loads(document)["text"]
        keys = [f"{base}m", f"{base}o", *self._word_keys(base, text)]
        self._call(self._delete, keys, [memory_id])

    def list(self, namespace: str) -> builtins.list[Memory]:
        """Every memory of ``namespace``, oldest first."""
        namespace = check_namespace(namespace)
        base = self._base(namespace)

        def read() -> Any:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.zrange(f"{base}o", 0, -1)
                pipe.hgetall(f"{base}m")
                return pipe.execute()

        order, documents = self._guarded(read)
        memories = []
        for raw_id in order:
            document = documents.get(raw_id)
            if document is not None:
                memories.append(self._memory(raw_id, document, None))
        return memories

    def _memory(self, raw_id: bytes | str, document: bytes | str, score: float | None) -> Memory:
        memory_id = raw_id.decode("utf-8") if isinstance(raw_id, bytes) else raw_id
        kept = json.loads(document)
        return Memory(memory_id, kept["text"], decode_metadata(kept["metadata"]), score)

    def _call(self, script: Any, keys: builtins.list[str], args: builtins.list[Any]) -> Any:
        return self._guarded(lambda: script(keys=keys, args=args))

    def _guarded(self, call: Any) -> Any:
        import redis

        try:
            return call()
        except redis.exceptions.RedisError as error:
            raise MemoryStoreError(
                f"RedisMemoryStore could not reach Redis ({type(error).__name__}: {error}); "
                "check that the server runs and the URL is right"
            ) from error

    def close(self) -> None:
        """Close the connections the store opened (not a client it was given)."""
        self._scripts.close()
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> RedisMemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RedisMemoryStore(prefix={self._prefix!r}, max_memories={self._max})"
