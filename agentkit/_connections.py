"""One SQLite connection per thread and process, for the stores that open them on demand.

A :class:`sqlite3.Connection` belongs to the thread that opened it and must not cross a
``fork``: :class:`ThreadConnections` hands each thread (of each process) its own, opened on
first use, and closes those it can when the store closes.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Sequence

__all__ = ["ThreadConnections"]


class ThreadConnections:
    """The calling thread's connection to one SQLite database file.

    Args:
        path: the database file.
        timeout: how long a statement waits for another connection's lock, in seconds.
        pragmas: statements run on each new connection (``"PRAGMA journal_mode=WAL"``).
    """

    def __init__(self, path: str, timeout: float, pragmas: Sequence[str] = ()) -> None:
        self._path = path
        self._timeout = timeout
        self._pragmas = tuple(pragmas)
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._guard = threading.Lock()

    def get(self) -> sqlite3.Connection:
        """This thread's connection, opened on its first use (again in a forked child)."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None or getattr(self._local, "pid", None) != os.getpid():
            connection = sqlite3.connect(self._path, timeout=self._timeout)
            for pragma in self._pragmas:
                connection.execute(pragma)
            self._local.connection = connection
            self._local.pid = os.getpid()
            with self._guard:
                self._opened.append(connection)
        return connection

    def close(self) -> None:
        """Close the connections opened so far."""
        with self._guard:
            opened, self._opened = self._opened, []
        for connection in opened:
            # A connection opened by another thread refuses to be closed here
            # (ProgrammingError); it is closed when it is collected.
            with contextlib.suppress(sqlite3.ProgrammingError):
                connection.close()
