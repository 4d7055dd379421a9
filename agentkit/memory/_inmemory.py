"""A memory store in this process's memory: for tests, notebooks and single-process apps."""

from __future__ import annotations

import builtins
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from agentkit.memory._base import (
    DEFAULT_MAX_MEMORIES,
    Memory,
    MemoryStoreFullError,
    check_id,
    check_limit,
    check_max_memories,
    check_namespace,
    checked_memory,
    decode_metadata,
    query_text,
)
from agentkit.memory._words import MAX_QUERY_WORDS, idf, words

__all__ = ["InMemoryMemoryStore"]


class _Kept:
    __slots__ = ("metadata", "seq", "text", "words")

    def __init__(self, text: str, metadata: str, seq: int) -> None:
        self.text = text
        self.metadata = metadata
        self.seq = seq
        self.words = words(text)


class _Namespace:
    """The memories of one namespace and the index of their words."""

    __slots__ = ("index", "kept")

    def __init__(self) -> None:
        self.kept: dict[str, _Kept] = {}  # in the order saved
        self.index: dict[str, set[str]] = {}  # word -> ids of the memories that have it


class InMemoryMemoryStore:
    """Memories in a dict per namespace, searched by shared words (thread-safe).

    Args:
        max_memories: how many memories one namespace holds; :meth:`save` raises
            :class:`~agentkit.memory.MemoryStoreFullError` beyond.

    A memory matches a query when they share a word (case and accents ignored); rarer words
    count more. Nothing survives the process.
    """

    def __init__(self, *, max_memories: int = DEFAULT_MAX_MEMORIES) -> None:
        self._max = check_max_memories(max_memories)
        self._lock = threading.Lock()
        self._spaces: dict[str, _Namespace] = {}
        self._seq = 0

    def save(
        self, namespace: str, text: str, *, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """Keep ``text`` in ``namespace``; return the new memory's id."""
        namespace = check_namespace(namespace)
        text, encoded = checked_memory(text, metadata)
        memory_id = uuid.uuid4().hex
        with self._lock:
            space = self._spaces.setdefault(namespace, _Namespace())
            if len(space.kept) >= self._max:
                raise MemoryStoreFullError(
                    f"memory namespace {namespace!r:.80} holds {self._max} memories, the most "
                    "this store keeps: delete some, or make the store with a larger max_memories"
                )
            self._seq += 1
            kept = _Kept(text, encoded, self._seq)
            space.kept[memory_id] = kept
            for word in kept.words:
                space.index.setdefault(word, set()).add(memory_id)
        return memory_id

    def search(self, namespace: str, query: str, *, limit: int = 5) -> builtins.list[Memory]:
        """The memories of ``namespace`` sharing the most (and rarest) words with ``query``."""
        namespace = check_namespace(namespace)
        limit = check_limit(limit)
        asked = words(query_text(query))[:MAX_QUERY_WORDS]
        with self._lock:
            space = self._spaces.get(namespace)
            if space is None or not asked:
                return []
            total = len(space.kept)
            scores: dict[str, float] = {}
            for word in asked:
                having = space.index.get(word)
                if not having:
                    continue
                weight = idf(total, len(having))
                for memory_id in having:
                    scores[memory_id] = scores.get(memory_id, 0.0) + weight
            # Best first; of equal scores, the newest first.
            best = sorted(scores, key=lambda i: (-scores[i], -space.kept[i].seq))[:limit]
            found = [(i, space.kept[i], scores[i]) for i in best]
        return [
            Memory(i, kept.text, decode_metadata(kept.metadata), score)
            for i, kept, score in found
        ]

    def delete(self, namespace: str, memory_id: str) -> None:
        """Forget the memory ``memory_id`` of ``namespace`` (if it is there)."""
        namespace = check_namespace(namespace)
        memory_id = check_id(memory_id)
        with self._lock:
            space = self._spaces.get(namespace)
            if space is None:
                return
            kept = space.kept.pop(memory_id, None)
            if kept is None:
                return
            for word in kept.words:
                having = space.index[word]
                having.discard(memory_id)
                if not having:
                    del space.index[word]
            if not space.kept:
                del self._spaces[namespace]

    def list(self, namespace: str) -> builtins.list[Memory]:
        """Every memory of ``namespace``, oldest first."""
        namespace = check_namespace(namespace)
        with self._lock:
            space = self._spaces.get(namespace)
            items = [] if space is None else list(space.kept.items())
        return [Memory(i, kept.text, decode_metadata(kept.metadata)) for i, kept in items]

    def __repr__(self) -> str:
        return f"InMemoryMemoryStore(max_memories={self._max})"
