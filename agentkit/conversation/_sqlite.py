"""A conversation store in an SQLite database (stdlib ``sqlite3``)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from agentkit._connections import ThreadConnections
from agentkit._lazy import present
from agentkit.conversation._base import DEFAULT_MAX_RECORD_BYTES, ConversationLock
from agentkit.conversation._filelock import FileLocks
from agentkit.conversation._records import (
    check_id,
    check_index,
    check_max_record_bytes,
    decode_records,
    encode_records,
    out_of_range,
)
from agentkit.schema import Message

__all__ = ["SQLiteConversationStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS agentkit_conversation_messages (
    conversation_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
)
"""


class SQLiteConversationStore:
    """Conversations as rows ``(conversation_id, seq, JSON payload)`` of one table.

    Args:
        path: the database file (created with mode 0600 if missing).
        timeout: how long a statement waits for another process's write lock (seconds).
        max_record_bytes: the largest record (one message as UTF-8 JSON) appended or loaded.

    An append is one transaction (all its messages or none); so is :meth:`drop_record`.
    Payloads are read as bytes and decoded by the store, so a row that is not UTF-8 is
    reported as a bad record instead of failing the whole query. A connection is opened per
    thread. The writer lock is an OS file lock next to the database (``<path>.locks/``), so
    processes using the same database file are kept apart too, and a crashed process never
    leaves a conversation locked. The database file is created with mode 0600.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self._max_record_bytes = check_max_record_bytes(max_record_bytes)
        self._path = os.fspath(path)
        self._connections = ThreadConnections(self._path, timeout)
        if self._path != ":memory:" and not os.path.exists(self._path):
            os.close(os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600))
        self._locks = FileLocks(Path(self._path + ".locks"))
        with self._connect() as connection:
            connection.execute(_SCHEMA)

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    @property
    def max_record_bytes(self) -> int:
        """The largest record this store appends or loads, in bytes."""
        return self._max_record_bytes

    def _connect(self) -> sqlite3.Connection:
        return self._connections.get()

    def load(self, conversation_id: str) -> list[Message]:
        """Return the conversation's messages, oldest first."""
        rows = self._connect().execute(
            "SELECT CAST(payload AS BLOB) FROM agentkit_conversation_messages "
            "WHERE conversation_id = ? ORDER BY seq",
            (check_id(conversation_id),),
        )
        payloads = [payload for (payload,) in rows.fetchall()]
        return decode_records(conversation_id, payloads, self._max_record_bytes)

    def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the conversation (one transaction)."""
        key = check_id(conversation_id)
        # Records are valid UTF-8, so the TEXT column holds them as they are.
        records = encode_records(key, messages, self._max_record_bytes)
        lines = [record.decode("utf-8") for record in records]
        if not lines:
            return
        connection = self._connect()
        with connection:
            connection.execute("BEGIN IMMEDIATE")
            (last,) = connection.execute(
                "SELECT COALESCE(MAX(seq), -1) FROM agentkit_conversation_messages "
                "WHERE conversation_id = ?",
                (key,),
            ).fetchone()
            connection.executemany(
                "INSERT INTO agentkit_conversation_messages VALUES (?, ?, ?)",
                [(key, last + 1 + index, line) for index, line in enumerate(lines)],
            )

    def delete(self, conversation_id: str) -> None:
        """Forget the conversation."""
        connection = self._connect()
        with connection:
            connection.execute(
                "DELETE FROM agentkit_conversation_messages WHERE conversation_id = ?",
                (check_id(conversation_id),),
            )

    def drop_record(self, conversation_id: str, index: int) -> None:
        """Remove the record at position ``index`` (0 is the oldest; the later ones move up).

        Raises:
            IndexError: there is no record at ``index``.
            ConversationBusyError: a turn of the conversation is running.
        """
        key = check_id(conversation_id)
        check_index(index)
        lock = self.lock(key)
        try:
            connection = self._connect()
            with connection:
                connection.execute("BEGIN IMMEDIATE")
                (count,) = connection.execute(
                    "SELECT COUNT(*) FROM agentkit_conversation_messages "
                    "WHERE conversation_id = ?",
                    (key,),
                ).fetchone()
                if not 0 <= index < count:
                    raise out_of_range(key, index, count)
                connection.execute(
                    "DELETE FROM agentkit_conversation_messages WHERE conversation_id = ? "
                    "AND seq = (SELECT seq FROM agentkit_conversation_messages "
                    "WHERE conversation_id = ? ORDER BY seq LIMIT 1 OFFSET ?)",
                    (key, key, index),
                )
        finally:
            lock.release()

    def lock(self, conversation_id: str) -> ConversationLock:
        """Take the conversation's writer lock (raises ConversationBusyError if taken)."""
        return self._locks.take(check_id(conversation_id))

    def close(self) -> None:
        """Close the connections this store opened."""
        self._connections.close()

    def __enter__(self) -> SQLiteConversationStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteConversationStore({self._path!r})"


# Defined here; documented and imported as agentkit.conversation.
present((SQLiteConversationStore,), "agentkit.conversation")
