"""A conversation store in an SQLite database (stdlib ``sqlite3``)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from agentkit.conversation._filelock import FileLocks
from agentkit.conversation._records import check_id, decode, encode
from agentkit.conversation.base import ConversationLock
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

    An append is one transaction (all its messages or none). A connection is opened per
    thread. The writer lock is an OS file lock next to the database (``<path>.locks/``), so
    processes using the same database file are kept apart too, and a crashed process never
    leaves a conversation locked. The database file is created with mode 0600.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self._path = os.fspath(path)
        self._timeout = timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        if self._path != ":memory:" and not os.path.exists(self._path):
            os.close(os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600))
        self._locks = FileLocks(Path(self._path + ".locks"))
        with self._connect() as connection:
            connection.execute(_SCHEMA)

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    def _connect(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None or getattr(self._local, "pid", None) != os.getpid():
            connection = sqlite3.connect(self._path, timeout=self._timeout)
            self._local.connection = connection
            self._local.pid = os.getpid()
            with self._guard:
                self._connections.append(connection)
        return connection

    def load(self, conversation_id: str) -> list[Message]:
        """Return the conversation's messages, oldest first."""
        rows = self._connect().execute(
            "SELECT payload FROM agentkit_conversation_messages WHERE conversation_id = ? "
            "ORDER BY seq",
            (check_id(conversation_id),),
        )
        return [decode(payload) for (payload,) in rows.fetchall()]

    def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the conversation (one transaction)."""
        lines = [encode(message) for message in messages]
        if not lines:
            return
        key = check_id(conversation_id)
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

    def lock(self, conversation_id: str) -> ConversationLock:
        """Take the conversation's writer lock (raises ConversationBusyError if taken)."""
        return self._locks.take(check_id(conversation_id))

    def close(self) -> None:
        """Close the connections this store opened."""
        with self._guard:
            connections, self._connections = self._connections, []
        for connection in connections:
            # A connection opened by another thread refuses to be closed here (ProgrammingError);
            # it is closed when it is collected.
            with contextlib.suppress(sqlite3.ProgrammingError):
                connection.close()

    def __enter__(self) -> SQLiteConversationStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteConversationStore({self._path!r})"
