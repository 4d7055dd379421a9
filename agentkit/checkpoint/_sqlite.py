"""A checkpoint store in an SQLite database file (stdlib ``sqlite3``), shareable by processes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit._lazy import present
from agentkit.checkpoint._base import (
    DEFAULT_LEASE_TTL,
    DEFAULT_MAX_BYTES,
    StoreLimits,
    _check_age,
    _check_data,
    _check_owner,
    _check_size,
    _check_ttl,
    _encode_id,
    _steps_too_large,
    _too_large,
)
from agentkit.checkpoint._files import open_nofollow
from agentkit.errors import CheckpointError

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SQLiteCheckPointStore"]

_T = TypeVar("_T")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS agentkit_checkpoints (
        id BLOB PRIMARY KEY,
        data BLOB NOT NULL,
        updated_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS agentkit_checkpoint_leases (
        id BLOB PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS agentkit_checkpoint_steps (
        id BLOB NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        at REAL,
        PRIMARY KEY (id, seq)
    ) WITHOUT ROWID""",
)
# Tables made by earlier releases have no "at" (when a record was appended), which prune()
# reads; it is added when the store opens the database (NULL for the records already there).
_STEPS_COLUMNS = "PRAGMA table_info(agentkit_checkpoint_steps)"
_ADD_AT = "ALTER TABLE agentkit_checkpoint_steps ADD COLUMN at REAL"
_TABLE = "agentkit_checkpoints"
# length() of a BLOB is read from the record header: an oversized row is refused unread.
_GET = """SELECT length(data), CASE WHEN length(data) <= ? THEN data END
    FROM agentkit_checkpoints WHERE id = ?"""
_IDS = "SELECT id FROM agentkit_checkpoints"
_SET = """INSERT INTO agentkit_checkpoints (id, data, updated_at) VALUES (?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at"""
_DELETE = "DELETE FROM agentkit_checkpoints WHERE id = ?"
# One statement: the next number and the row, so a record is appended whole or not at all.
_APPEND_STEP = """INSERT INTO agentkit_checkpoint_steps (id, seq, data, at) VALUES (?,
    (SELECT COALESCE(MAX(seq), 0) + 1 FROM agentkit_checkpoint_steps WHERE id = ?), ?, ?)"""
_STEPS_SIZE = "SELECT COALESCE(SUM(length(data)), 0) FROM agentkit_checkpoint_steps WHERE id = ?"
_READ_STEPS = "SELECT data FROM agentkit_checkpoint_steps WHERE id = ? ORDER BY seq"
_DELETE_STEPS = "DELETE FROM agentkit_checkpoint_steps WHERE id = ?"
# Taken when free; taken over when expired; refreshed when already ours. One statement, so
# the check and the write are a single atomic step for every process using the file.
_ACQUIRE = """INSERT INTO agentkit_checkpoint_leases (id, owner, expires_at) VALUES (?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
    WHERE agentkit_checkpoint_leases.expires_at <= ?
       OR agentkit_checkpoint_leases.owner = excluded.owner"""
_RELEASE = "DELETE FROM agentkit_checkpoint_leases WHERE id = ? AND owner = ?"
# The ids whose checkpoint and step records were all written before the cutoff (a record of
# an earlier release, without a time, counts as old as its checkpoint) and that no one leases.
_PRUNABLE = """SELECT id FROM (SELECT id FROM agentkit_checkpoints
        UNION SELECT id FROM agentkit_checkpoint_steps) AS known
    WHERE COALESCE((SELECT updated_at FROM agentkit_checkpoints AS c WHERE c.id = known.id),
                   -1) < :cutoff
      AND COALESCE((SELECT MAX(at) FROM agentkit_checkpoint_steps AS s WHERE s.id = known.id),
                   -1) < :cutoff
      AND NOT EXISTS (SELECT 1 FROM agentkit_checkpoint_leases AS l
                      WHERE l.id = known.id AND l.expires_at > :now)"""
_PRUNE_LEASES = "DELETE FROM agentkit_checkpoint_leases WHERE expires_at < ?"


class SQLiteCheckPointStore(StoreLimits):
    """Checkpoints as rows of an SQLite database file, with leases; thread- and process-safe.

    The database is opened in WAL mode, so readers do not block the writer, and several
    processes can use the same file (on a local file system; SQLite does not support network
    file systems well). Every statement is parameterized; ids are stored as the bytes of their
    UTF-8 encoding, so any string is a valid id. A connection is shared by the threads of a
    process under a lock (a forked child opens its own); ``timeout`` is how long a statement
    waits for another process's write lock (SQLite's busy timeout).

    Tables: ``agentkit_checkpoints(id, data, updated_at)``,
    ``agentkit_checkpoint_leases(id, owner, expires_at)`` and
    ``agentkit_checkpoint_steps(id, seq, data, at)`` (step records, see
    :class:`~agentkit.checkpoint.JournalingCheckPointStore`: one row each, appended by one
    ``INSERT`` that numbers it); a lease is taken with one ``INSERT ... ON CONFLICT DO UPDATE
    ... WHERE expired OR same owner`` statement. Lease expiry uses the wall clock, shared by
    the processes of one machine.

    Durability: a checkpoint write (``set``, ``delete``) is synced to disk when it commits
    (``PRAGMA synchronous = FULL``). A step record commits with ``synchronous = NORMAL``: it
    survives the death of the process at once and a power loss once SQLite syncs its log
    (its next checkpoint write, or a record appended with ``sync=True``), which keeps a step
    at a few hundredths of a millisecond; ``sync_steps=True`` syncs every record. A durable
    run's first image, its compactions and its tombstone are written with :meth:`set_base`
    (:class:`~agentkit.checkpoint.RebasingCheckPointStore`): the new checkpoint and the removal
    of the old step records in one transaction, committed like a step record.

    A database file the store creates gets mode 0600 (SQLite gives its ``-wal`` and ``-shm``
    files the database's mode); an existing file keeps its mode. A row over ``max_bytes`` is
    refused from ``length(data)`` without being read, and ``set`` refuses data over
    ``max_bytes``. ``lease_ttl`` is how long a resume lease lasts unless refreshed; leases
    and ages are read on ``clock`` (its ``time()``; an
    :class:`agentkit.testing.ManualClock` moves them on in a test without sleeping).

    Nothing expires by itself: :meth:`delete` removes a checkpoint, :meth:`prune` every
    checkpoint not written for a given time (the tombstones of completed runs included).
    Each step record keeps when it was appended (``at``; a table made by an earlier release
    gets the column when the store opens the database).

    Database errors are raised as :class:`~agentkit.errors.CheckpointError`. The store is a
    context manager; :meth:`close` closes its connection.

    Example::

        with SQLiteCheckPointStore("checkpoints.db") as store:
            runner = Runner(agent, checkpoint_store=store)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        sync_steps: bool = False,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._clock = clock
        self._path = os.fspath(path)
        self._timeout = timeout
        self._sync_steps = bool(sync_steps)
        self._set_limits(max_bytes, lease_ttl)
        self._namespace = f"sqlite:{os.path.realpath(self._path)}:{_TABLE}"
        _create_private(self._path)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = 0
        self._closed = False
        # Connections inherited through fork() are kept, never used or closed in the child.
        self._inherited: list[sqlite3.Connection] = []
        self._run("open the database", lambda connection: None)

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    @property
    def namespace(self) -> str:
        """``"sqlite:<absolute path>:<table>"``: what checkpoints here are signed with."""
        return self._namespace

    def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes stored under ``checkpoint_id``, or ``None``."""
        key = _encode_id(checkpoint_id)

        def get(connection: sqlite3.Connection) -> bytes | None:
            row = connection.execute(_GET, (self._max_bytes, key)).fetchone()
            if row is None:
                return None
            if row[1] is None:
                raise _too_large(checkpoint_id, row[0], self._max_bytes)
            return bytes(row[1])

        return self._run(f"read checkpoint {checkpoint_id!r}", get)

    def set(self, checkpoint_id: str, data: bytes) -> None:
        """Store ``data`` under ``checkpoint_id`` (one atomic, durable transaction)."""
        key = _encode_id(checkpoint_id)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        self._run(
            f"write checkpoint {checkpoint_id!r}",
            lambda connection: _synced(connection, _SET, (key, data, self._clock.time())),
        )

    def set_base(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """Store ``data`` as the checkpoint of ``checkpoint_id`` and remove its step records.

        See :class:`~agentkit.checkpoint.RebasingCheckPointStore`. One transaction: a reader
        (another thread or process) sees the old checkpoint with its records or the new one
        without them, never a mix. It commits like a step record: it survives the death of
        the process at once, and a power loss once SQLite syncs its log (at once with
        ``sync=True`` or ``sync_steps=True``); a power loss never leaves half of it.
        """
        key = _encode_id(checkpoint_id)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        synced = sync or self._sync_steps

        def rebase(connection: sqlite3.Connection) -> None:
            _transaction(
                connection,
                synced,
                [(_DELETE_STEPS, (key,)), (_SET, (key, data, self._clock.time()))],
            )

        self._run(f"write checkpoint {checkpoint_id!r}", rebase)

    def checkpoint_ids(self) -> list[str]:
        """Every id that holds a checkpoint, sorted."""

        def ids(connection: sqlite3.Connection) -> list[str]:
            rows = connection.execute(_IDS).fetchall()
            return sorted(bytes(row[0]).decode("utf-8", "surrogatepass") for row in rows)

        return self._run("list the checkpoints", ids)

    def delete(self, checkpoint_id: str) -> None:
        """Remove the checkpoint and its step records; an unknown id is not an error."""
        key = _encode_id(checkpoint_id)
        self._run(
            f"delete checkpoint {checkpoint_id!r}",
            lambda connection: _transaction(
                connection, True, [(_DELETE_STEPS, (key,)), (_DELETE, (key,))]
            ),
        )

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """Append the step record ``data`` (one row); see the class docs for durability."""
        key = _encode_id(checkpoint_id)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        synced = sync or self._sync_steps

        def append(connection: sqlite3.Connection) -> None:
            if synced:
                _synced(connection, _APPEND_STEP, (key, key, data, self._clock.time()))
            else:
                connection.execute(_APPEND_STEP, (key, key, data, self._clock.time()))

        self._run(f"append a step of checkpoint {checkpoint_id!r}", append)

    def read_steps(self, checkpoint_id: str) -> list[bytes]:
        """Return the step records of ``checkpoint_id``, oldest first."""
        key = _encode_id(checkpoint_id)

        def read(connection: sqlite3.Connection) -> list[bytes]:
            connection.execute("BEGIN")  # one snapshot: the size checked is the size read
            try:
                size = connection.execute(_STEPS_SIZE, (key,)).fetchone()[0]
                if size > self._max_bytes:
                    raise _steps_too_large(checkpoint_id, size, self._max_bytes)
                return [bytes(row[0]) for row in connection.execute(_READ_STEPS, (key,))]
            finally:
                connection.execute("COMMIT")

        return self._run(f"read the steps of checkpoint {checkpoint_id!r}", read)

    def delete_steps(self, checkpoint_id: str) -> None:
        """Remove the step records of ``checkpoint_id``; an unknown id is not an error."""
        key = _encode_id(checkpoint_id)
        self._run(
            f"delete the steps of checkpoint {checkpoint_id!r}",
            lambda connection: connection.execute(_DELETE_STEPS, (key,)),
        )

    def prune(self, *, older_than: float) -> int:
        """Remove every checkpoint last written more than ``older_than`` seconds ago.

        The way to expire consumed checkpoints (the tombstones of completed durable runs,
        kept so that a late ``resume`` says the run completed) and any other left behind:
        call it from a periodic job. A checkpoint's age is that of its latest write, its
        step records included (``updated_at``, and each record's ``at``); its step records go
        with it. A checkpoint whose lease is held (a live run, a resume going on) is never
        removed, whatever its age. Leases that expired more than ``older_than`` seconds ago
        are removed too. One transaction, synced like :meth:`delete`.

        Like ``RedisCheckPointStore(ttl=...)``, this removes interrupted runs waiting for an
        answer as well: choose ``older_than`` longer than a run may wait for an approval (or
        delete consumed ids yourself with :meth:`delete`). Returns how many checkpoints (ids)
        were removed.

        Raises:
            ValueError: ``older_than`` is not a number of seconds >= 0.
        """
        age = _check_age(older_than)

        def prune(connection: sqlite3.Connection) -> int:
            now = self._clock.time()
            cutoff = now - age
            connection.execute("PRAGMA synchronous = FULL")
            try:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    ids = [(row[0],) for row in connection.execute(
                        _PRUNABLE, {"cutoff": cutoff, "now": now}
                    )]
                    connection.executemany(_DELETE_STEPS, ids)
                    connection.executemany(_DELETE, ids)
                    connection.execute(_PRUNE_LEASES, (cutoff,))
                except BaseException:
                    connection.execute("ROLLBACK")
                    raise
                connection.execute("COMMIT")
            finally:
                connection.execute("PRAGMA synchronous = NORMAL")
            return len(ids)

        return self._run("prune the checkpoints", prune)

    def acquire_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool:
        """Lease ``checkpoint_id`` for ``owner``.

        See :class:`~agentkit.checkpoint.LeasingCheckPointStore`.
        """
        key = _encode_id(checkpoint_id)
        _check_owner(owner)
        _check_ttl(ttl)

        def acquire(connection: sqlite3.Connection) -> bool:
            now = self._clock.time()
            cursor = connection.execute(_ACQUIRE, (key, owner, now + ttl, now))
            return cursor.rowcount == 1

        return self._run(f"take the lease on checkpoint {checkpoint_id!r}", acquire)

    def release_lease(self, checkpoint_id: str, owner: str) -> None:
        """Release the lease if ``owner`` holds it."""
        key = _encode_id(checkpoint_id)
        self._run(
            f"release the lease on checkpoint {checkpoint_id!r}",
            lambda connection: connection.execute(_RELEASE, (key, owner)),
        )

    def close(self) -> None:
        """Close the database connection; the store cannot be used afterwards."""
        with self._lock:
            self._closed = True
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None

    def __enter__(self) -> SQLiteCheckPointStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteCheckPointStore({self._path!r})"

    def _run(self, what: str, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        import sqlite3

        with self._lock:
            if self._closed:
                raise CheckpointError(f"cannot {what}: the SQLite checkpoint store was closed")
            try:
                return operation(self._connect())
            except sqlite3.Error as exc:
                raise CheckpointError(
                    f"cannot {what} in SQLite database {self._path!r}: {exc}"
                ) from exc

    def _connect(self) -> sqlite3.Connection:
        """Return this process's connection, opening it (and the schema) on first use."""
        import sqlite3

        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        if self._connection is not None:
            self._inherited.append(self._connection)
            self._connection = None
        # isolation_level=None: autocommit; every statement above is its own transaction.
        connection = sqlite3.connect(
            self._path, timeout=self._timeout, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            # Step records commit without a sync; checkpoint writes sync (see _synced).
            connection.execute("PRAGMA synchronous = NORMAL")
            for statement in _SCHEMA:
                connection.execute(statement)
            _add_record_times(connection)
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        self._pid = os.getpid()
        return connection


def _synced(connection: sqlite3.Connection, statement: str, parameters: tuple[object, ...]) -> None:
    """Run ``statement`` so that its commit reaches the disk (``synchronous = FULL``)."""
    connection.execute("PRAGMA synchronous = FULL")
    try:
        connection.execute(statement, parameters)
    finally:
        connection.execute("PRAGMA synchronous = NORMAL")


def _add_record_times(connection: sqlite3.Connection) -> None:
    """Give a step table made by an earlier release its ``at`` column (once, whoever first)."""
    import sqlite3

    columns = {row[1] for row in connection.execute(_STEPS_COLUMNS)}
    if "at" in columns:
        return
    try:
        connection.execute(_ADD_AT)
    except sqlite3.OperationalError as error:
        if "duplicate column" not in str(error):  # another process added it meanwhile
            raise


def _transaction(
    connection: sqlite3.Connection,
    synced: bool,
    statements: list[tuple[str, tuple[object, ...]]],
) -> None:
    """Run ``statements`` in one write transaction (synced to disk when ``synced``)."""
    if synced:
        connection.execute("PRAGMA synchronous = FULL")
    try:
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement, parameters in statements:
                connection.execute(statement, parameters)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
    finally:
        if synced:
            connection.execute("PRAGMA synchronous = NORMAL")


def _create_private(path: str) -> None:
    """Create the database file with mode 0600 unless it exists (or is not a plain file)."""
    if path == ":memory:" or path.startswith("file:") or not path:
        return
    try:
        fd = open_nofollow(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise CheckpointError(f"cannot create the SQLite database {path!r}: {exc}") from exc
    os.close(fd)

present((SQLiteCheckPointStore,), "agentkit.checkpoint")
