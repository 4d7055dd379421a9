"""A memory store in an SQLite database: full-text search with FTS5, or vector search by
cosine similarity when it is given an embedding function."""

from __future__ import annotations

import builtins
import functools
import hashlib
import heapq
import math
import operator
import os
import sqlite3
import threading
import uuid
from array import array
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentkit._connections import ThreadConnections
from agentkit.errors import AgentKitValueError
from agentkit.memory._base import (
    DEFAULT_MAX_MEMORIES,
    EmbedFunction,
    Memory,
    MemoryStoreFullError,
    check_id,
    check_limit,
    check_max_memories,
    check_namespace,
    checked_memory,
    decode_metadata,
    query_text,
    unit_vector,
)
from agentkit.memory._words import MAX_QUERY_WORDS, words

__all__ = ["SQLiteMemoryStore"]

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS agentkit_memories (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        nskey TEXT NOT NULL,
        text TEXT NOT NULL,
        metadata TEXT NOT NULL,
        vector BLOB
    )
    """,
    "CREATE INDEX IF NOT EXISTS agentkit_memories_by_namespace "
    "ON agentkit_memories (namespace, seq)",
    # The namespace is in the index as one opaque word (a hash), so that a search reads only
    # its namespace's postings; the join then compares the namespace itself.
    "CREATE VIRTUAL TABLE IF NOT EXISTS agentkit_memories_fts USING fts5("
    "nskey, text, content='agentkit_memories', content_rowid='seq', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS agentkit_memories_added AFTER INSERT ON agentkit_memories "
    "BEGIN INSERT INTO agentkit_memories_fts (rowid, nskey, text) "
    "VALUES (new.seq, new.nskey, new.text); END",
    "CREATE TRIGGER IF NOT EXISTS agentkit_memories_removed AFTER DELETE ON agentkit_memories "
    "BEGIN INSERT INTO agentkit_memories_fts (agentkit_memories_fts, rowid, nskey, text) "
    "VALUES ('delete', old.seq, old.nskey, old.text); END",
    "CREATE TABLE IF NOT EXISTS agentkit_memory_settings (key TEXT PRIMARY KEY, value TEXT)",
    # A namespace's version changes with each save and delete (in the same transaction, by
    # any process): a search reuses the vectors it read before while the version is the same.
    "CREATE TABLE IF NOT EXISTS agentkit_memory_versions "
    "(namespace TEXT PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS agentkit_memories_count_added AFTER INSERT ON "
    "agentkit_memories BEGIN "
    "INSERT OR IGNORE INTO agentkit_memory_versions VALUES (new.namespace, 0); "
    "UPDATE agentkit_memory_versions SET version = version + 1 "
    "WHERE namespace = new.namespace; END",
    "CREATE TRIGGER IF NOT EXISTS agentkit_memories_count_removed AFTER DELETE ON "
    "agentkit_memories BEGIN "
    "UPDATE agentkit_memory_versions SET version = version + 1 "
    "WHERE namespace = old.namespace; END",
)

_CACHE_BYTES = 64 * 1024 * 1024
"""The most vector bytes a store keeps between searches (the namespaces searched last)."""

# The dot product of two vectors: C's sumprod where Python has it (3.12), else map and sum.
_dot: Callable[[Sequence[float], Sequence[float]], float] = getattr(
    math, "sumprod", lambda a, b: sum(map(operator.mul, a, b))
)


@functools.cache
def _load_numpy() -> Any:
    """numpy, or ``None`` when it is not installed (the ``agentkit[memory]`` extra has it)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _similarities(wanted: Sequence[float], vectors: array[float]) -> builtins.list[float]:
    """The cosine similarity of ``wanted`` to each vector of ``vectors`` (unit vectors of
    ``wanted``'s length, one after another): one matrix product with numpy, else one dot
    product each."""
    numpy = _load_numpy()
    width = len(wanted)
    if numpy is not None:
        matrix = numpy.frombuffer(vectors, dtype=numpy.float32).reshape(-1, width)
        products: builtins.list[float] = (
            matrix @ numpy.asarray(wanted, dtype=numpy.float32)
        ).tolist()
        return products
    return [_dot(wanted, vectors[i : i + width]) for i in range(0, len(vectors), width)]


class _Vectors:
    """The vectors of the namespaces searched last, each with the version it was read at
    (thread-safe; at most ``_CACHE_BYTES``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, tuple[int, int, builtins.list[int], array[float]]] = (
            OrderedDict()
        )
        self._bytes = 0

    def get(
        self, namespace: str, version: int, width: int
    ) -> tuple[builtins.list[int], array[float]] | None:
        with self._lock:
            kept = self._kept.get(namespace)
            if kept is None or kept[0] != version or kept[1] != width:
                return None
            self._kept.move_to_end(namespace)
            return kept[2], kept[3]

    def put(
        self, namespace: str, version: int, width: int, seqs: builtins.list[int],
        vectors: array[float],
    ) -> None:
        size = len(vectors) * vectors.itemsize
        if size > _CACHE_BYTES:
            return
        with self._lock:
            old = self._kept.pop(namespace, None)
            if old is not None:
                self._bytes -= len(old[3]) * old[3].itemsize
            self._kept[namespace] = (version, width, seqs, vectors)
            self._bytes += size
            while self._bytes > _CACHE_BYTES:
                _, dropped = self._kept.popitem(last=False)
                self._bytes -= len(dropped[3]) * dropped[3].itemsize


def _nskey(namespace: str) -> str:
    return "n" + hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:24]


class SQLiteMemoryStore:
    """Memories as rows of one SQLite table, searched with FTS5 or by their embeddings.

    Args:
        path: the database file (created with mode 0600 if missing; several stores and
            processes may share it).
        embed: ``embed(text) -> vector``: with it, each memory is saved with its embedding
            and :meth:`search` ranks by cosine similarity to the query's embedding (memories
            saved without one, and those whose similarity is not above 0, are not found);
            without it, :meth:`search` is full-text (FTS5, ranked by BM25: a memory matches
            when it shares a word with the query, English words reduced to their stem by
            FTS5's Porter stemmer, so "invoice" finds "invoices").
        max_memories: how many memories one namespace holds.
        timeout: how long a statement waits for another process's write lock (seconds).

    Vector search is exact: the query is compared with every vector of the namespace, in one
    matrix product when numpy is installed (``pip install 'agentkit[memory]'``), else in
    plain Python (the memory guide has the measurements). The vectors read for a search are
    kept for the next ones (up to 64 MiB, the namespaces searched last) until a save or a
    delete in that namespace, by any process, changes its version. A connection is opened
    per thread; a save is one transaction.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embed: EmbedFunction | None = None,
        max_memories: int = DEFAULT_MAX_MEMORIES,
        timeout: float = 30.0,
    ) -> None:
        self._path = os.fspath(path)
        if self._path == ":memory:" or not self._path:
            raise AgentKitValueError(
                "SQLiteMemoryStore needs a database file (each thread opens its own "
                "connection); for memories kept in memory use InMemoryMemoryStore()"
            )
        if embed is not None and not callable(embed):
            raise AgentKitValueError(f"embed must be a function of a text (got {embed!r})")
        self._embed = embed
        self._max = check_max_memories(max_memories)
        self._connections = ThreadConnections(self._path, timeout, ["PRAGMA journal_mode=WAL"])
        self._vectors = _Vectors()
        if not os.path.exists(self._path):
            os.close(os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600))
        connection = self._connect()
        with connection:
            for statement in _SCHEMA:
                connection.execute(statement)

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def _connect(self) -> sqlite3.Connection:
        return self._connections.get()

    def save(
        self, namespace: str, text: str, *, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """Keep ``text`` in ``namespace``; return the new memory's id."""
        namespace = check_namespace(namespace)
        text, encoded = checked_memory(text, metadata)
        blob: bytes | None = None
        dimensions = 0
        if self._embed is not None:
            vector = unit_vector(self._embed(text), None)
            dimensions = len(vector)
            blob = array("f", vector).tobytes()
        memory_id = uuid.uuid4().hex
        connection = self._connect()
        with connection:
            connection.execute("BEGIN IMMEDIATE")
            if blob is not None:
                self._check_dimensions(connection, dimensions)
            (count,) = connection.execute(
                "SELECT COUNT(*) FROM agentkit_memories WHERE namespace = ?", (namespace,)
            ).fetchone()
            if count >= self._max:
                raise MemoryStoreFullError(
                    f"memory namespace {namespace!r:.80} holds {self._max} memories, the most "
                    "this store keeps: delete some, or open the store with a larger "
                    "max_memories"
                )
            connection.execute(
                "INSERT INTO agentkit_memories (id, namespace, nskey, text, metadata, vector) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (memory_id, namespace, _nskey(namespace), text, encoded, blob),
            )
        return memory_id

    def _check_dimensions(self, connection: sqlite3.Connection, dimensions: int) -> None:
        row = connection.execute(
            "SELECT value FROM agentkit_memory_settings WHERE key = 'dimensions'"
        ).fetchone()
        if row is None:
            connection.execute(
                "INSERT INTO agentkit_memory_settings VALUES ('dimensions', ?)", (str(dimensions),)
            )
        elif int(row[0]) != dimensions:
            raise AgentKitValueError(
                f"embed() returned a vector of {dimensions} numbers; the memories in "
                f"{self._path} have {row[0]}: use one embedding model per database"
            )

    def search(self, namespace: str, query: str, *, limit: int = 5) -> builtins.list[Memory]:
        """The memories of ``namespace`` that best match ``query``, best first."""
        namespace = check_namespace(namespace)
        limit = check_limit(limit)
        text = query_text(query)
        if self._embed is not None:
            return self._nearest(namespace, text, limit)
        asked = words(text)[:MAX_QUERY_WORDS]
        if not asked:
            return []
        # Each word quoted: the query's text is never FTS5 syntax.
        match = f'nskey : "{_nskey(namespace)}" AND text : (' + " OR ".join(
            f'"{word}"' for word in asked
        ) + ")"
        rows = self._connect().execute(
            "SELECT m.id, m.text, m.metadata, bm25(agentkit_memories_fts, 0.0, 1.0) AS rank "
            "FROM agentkit_memories_fts JOIN agentkit_memories AS m "
            "ON m.seq = agentkit_memories_fts.rowid "
            "WHERE agentkit_memories_fts MATCH ? AND m.namespace = ? "
            "ORDER BY rank, m.seq DESC LIMIT ?",
            (match, namespace, limit),
        ).fetchall()
        # bm25() is lower for better matches: the score turns it round.
        return [
            Memory(memory_id, text, decode_metadata(metadata), -rank)
            for memory_id, text, metadata, rank in rows
        ]

    def _nearest(self, namespace: str, text: str, limit: int) -> builtins.list[Memory]:
        assert self._embed is not None
        if not text.strip():
            return []
        wanted = unit_vector(self._embed(text), None)
        width = len(wanted)
        connection = self._connect()
        row = connection.execute(
            "SELECT version FROM agentkit_memory_versions WHERE namespace = ?", (namespace,)
        ).fetchone()
        if row is None:
            return []
        # Read after the version: the vectors are at least that new (a newer version read
        # next time reads them again).
        cached = self._vectors.get(namespace, row[0], width)
        if cached is None:
            rows = connection.execute(
                "SELECT seq, vector FROM agentkit_memories "
                "WHERE namespace = ? AND length(vector) = ?",
                (namespace, 4 * width),  # float32
            ).fetchall()
            seqs = [seq for seq, _ in rows]
            vectors = array("f", b"".join(blob for _, blob in rows))
            self._vectors.put(namespace, row[0], width, seqs, vectors)
        else:
            seqs, vectors = cached
        if not seqs:
            return []
        similarities = _similarities(wanted, vectors)
        best = [
            (similarity, seq)
            for similarity, seq in heapq.nlargest(
                limit, zip(similarities, seqs, strict=True)
            )
            if similarity > 0.0  # orthogonal or opposite: nothing in common
        ]
        if not best:
            return []
        by_seq = {
            seq: (memory_id, memory_text, metadata)
            for seq, memory_id, memory_text, metadata in self._connect().execute(
                "SELECT seq, id, text, metadata FROM agentkit_memories WHERE seq IN ("
                + ",".join("?" * len(best)) + ")",
                [seq for _, seq in best],
            )
        }
        found = []
        for score, seq in best:
            row = by_seq.get(seq)
            if row is not None:  # deleted since
                found.append(Memory(row[0], row[1], decode_metadata(row[2]), score))
        return found

    def delete(self, namespace: str, memory_id: str) -> None:
        """Forget the memory ``memory_id`` of ``namespace`` (if it is there)."""
        namespace = check_namespace(namespace)
        memory_id = check_id(memory_id)
        connection = self._connect()
        with connection:
            connection.execute(
                "DELETE FROM agentkit_memories WHERE namespace = ? AND id = ?",
                (namespace, memory_id),
            )

    def list(self, namespace: str) -> builtins.list[Memory]:
        """Every memory of ``namespace``, oldest first."""
        namespace = check_namespace(namespace)
        rows = self._connect().execute(
            "SELECT id, text, metadata FROM agentkit_memories WHERE namespace = ? ORDER BY seq",
            (namespace,),
        ).fetchall()
        return [Memory(i, text, decode_metadata(metadata)) for i, text, metadata in rows]

    def close(self) -> None:
        """Close the connections this store opened."""
        self._connections.close()

    def __enter__(self) -> SQLiteMemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        vector = ", embed=..." if self._embed is not None else ""
        return f"SQLiteMemoryStore({self._path!r}{vector})"
