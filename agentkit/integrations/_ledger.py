"""Replay ledgers: what Celery workers remember outside Redis about the messages they ran.

A run's record, its checkpoint and its sealed task message all live in Redis. Someone who can
write Redis can copy them, let a worker run the message (a resume a human approved: a
payment), then restore the copies and push the message again: everything verifies, and the
payment runs twice. No seal stops that, since every copy is genuine; what stops it is a
memory of consumed messages that the restore does not roll back. A
:class:`ReplayLedger` is that memory: the worker notes each message whose run stopped (its
nonce) there, and refuses a message the ledger has seen end, whatever Redis says.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["ReplayLedger", "SQLiteReplayLedger"]


@runtime_checkable
class ReplayLedger(Protocol):
    """Where workers (and web processes) note the task messages whose runs stopped.

    It must live outside the Redis that holds the runs (someone with write access to that
    Redis must not be able to roll it back), be shared by every process of the deployment,
    and remember a message at least as long as the message is valid (``message_ttl`` of
    :class:`~agentkit.integrations.celery.AgentQueue`). Thread-safe.
    """

    def end(self, nonce: str) -> None:
        """Note that the run of the message ``nonce`` stopped (the message is consumed)."""
        ...

    def ended(self, nonce: str) -> bool:
        """``True`` if :meth:`end` was called for ``nonce`` (and not forgotten since)."""
        ...


class SQLiteReplayLedger:
    """A :class:`ReplayLedger` in a SQLite file, for the workers and web processes of one host.

    Every process on the host opens the same ``path`` (SQLite locks it between processes).
    Entries older than ``keep`` seconds are pruned; keep them at least as long as task
    messages are valid (``message_ttl``, one day by default). Several hosts need a ledger
    they all share: implement :class:`ReplayLedger` over a database of yours (not the runs'
    Redis).
    """

    _PRUNE_EVERY = 1000  # writes between two prunings

    def __init__(self, path: str | os.PathLike[str], *, keep: float = 2 * 24 * 3600.0) -> None:
        self.path = os.fspath(path)
        self.keep = float(keep)
        self._lock = threading.Lock()
        self._writes = 0
        self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False,
                                   isolation_level=None)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS ended (nonce TEXT PRIMARY KEY, at REAL NOT NULL)"
            )

    def __repr__(self) -> str:
        return f"SQLiteReplayLedger({self.path!r}, keep={self.keep:g})"

    def end(self, nonce: str) -> None:
        """Note that the run of the message ``nonce`` stopped."""
        now = time.time()
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO ended VALUES (?, ?)", (nonce, now))
            self._writes += 1
            if self._writes % self._PRUNE_EVERY == 0:
                self._db.execute("DELETE FROM ended WHERE at < ?", (now - self.keep,))

    def ended(self, nonce: str) -> bool:
        """``True`` if the run of the message ``nonce`` stopped (within ``keep`` seconds)."""
        with self._lock:
            row = self._db.execute("SELECT 1 FROM ended WHERE nonce = ?", (nonce,)).fetchone()
        return row is not None

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()
