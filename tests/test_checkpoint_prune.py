"""``prune(older_than=...)``: the file and SQLite stores expire consumed checkpoints on request.

A completed durable run leaves a tombstone under its id (so a late resume says it completed);
nothing in the file or SQLite store expires by itself. ``prune`` removes every checkpoint not
written for ``older_than`` seconds, its step records with it, and never one that is leased.
The clock is not waited on: the tests age what they wrote (file modification times, the
SQLite rows' times).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from agentkit import ChatModelAgent, Runner, with_approval, with_checkpoint_id
from agentkit.checkpoint import (
    FileCheckPointStore,
    InMemoryCheckPointStore,
    PickleSerializer,
    SQLiteCheckPointStore,
    lease_for,
)
from agentkit.errors import CheckpointConsumedError, CheckpointNotFoundError
from agentkit.models import ScriptedChatModel
from agentkit.testing import ManualClock, call, calls_message
from tests.test_durable_steps import add

SERIALIZER = PickleSerializer(b"prune tests key, 32 bytes long!!")
HOUR = 3600.0
DAY = 24 * HOUR


def completed_run(store: Any, checkpoint_id: str) -> Runner:
    """A durable run that completed under ``checkpoint_id`` (its tombstone is in ``store``)."""
    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 2}, id="c")), "done"])
    runner = Runner(ChatModelAgent("A", "adds", model, tools=[add]), checkpoint_store=store,
                    serializer=SERIALIZER)
    assert runner.invoke("go", with_checkpoint_id(checkpoint_id)).text == "done"
    with pytest.raises(CheckpointConsumedError):
        runner.resume(checkpoint_id)
    return runner


def interrupted_run(store: Any, checkpoint_id: str) -> None:
    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 2}, id="c")), "done"])
    runner = Runner(ChatModelAgent("A", "adds", model, tools=[with_approval(add)]),
                    checkpoint_store=store, serializer=SERIALIZER)
    assert runner.invoke("go", with_checkpoint_id(checkpoint_id)).interrupt is not None


# --- the file store ---------------------------------------------------------------------------


def age_files(store: FileCheckPointStore, checkpoint_id: str, seconds: float,
              which: tuple[str, ...] = ("checkpoint", "steps", "lease")) -> None:
    paths = {
        "checkpoint": store.path_for(checkpoint_id),
        "steps": store.steps_path_for(checkpoint_id),
        "lease": store.path_for(checkpoint_id).with_suffix(".lease"),
    }
    when = time.time() - seconds
    for name in which:
        if paths[name].exists():
            os.utime(paths[name], (when, when))


def names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.is_file()
                  and not path.name.startswith("."))


def test_file_prune_removes_an_old_tombstone_and_keeps_what_is_newer(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path)
    runner = completed_run(store, "old")
    completed_run(store, "recent")
    store.set("fresh", b"written now")
    age_files(store, "old", 2 * DAY)
    age_files(store, "recent", HOUR)
    assert store.prune(older_than=DAY) == 1
    assert store.get("old") is None
    with pytest.raises(CheckpointNotFoundError):
        runner.resume("old")
    with pytest.raises(CheckpointConsumedError):
        runner.resume("recent")
    assert store.get("fresh") == b"written now"
    assert names(tmp_path) == sorted([store.path_for("recent").name,
                                      store.path_for("fresh").name])
    assert store.prune(older_than=DAY) == 0  # nothing left that old
    assert store.prune(older_than=0) == 2  # every id no one leases


def test_file_prune_counts_a_checkpoints_latest_step_record(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path)
    store.set("run", b"base")
    store.append_step("run", b"a record written since")
    age_files(store, "run", 2 * DAY, ("checkpoint",))
    assert store.prune(older_than=DAY) == 0  # the record is fresh: the run lives on
    assert store.read_steps("run") == [b"a record written since"]
    age_files(store, "run", 2 * DAY, ("steps",))
    assert store.prune(older_than=DAY) == 1
    assert store.get("run") is None and store.read_steps("run") == []
    store.append_step("orphan", b"records without a checkpoint")
    age_files(store, "orphan", 2 * DAY)
    assert store.prune(older_than=DAY) == 1
    assert names(tmp_path) == []


def test_file_prune_never_removes_a_leased_checkpoint(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path)
    interrupted_run(store, "waiting")
    age_files(store, "waiting", 2 * DAY)
    lease = lease_for(store, "waiting", ttl=HOUR)
    assert store.prune(older_than=DAY) == 0
    assert store.prune(older_than=0) == 0
    assert store.get("waiting") is not None
    lease.release()
    # An interrupted run is removed like any other once that old: the doc says to choose
    # older_than longer than an approval may take.
    assert store.prune(older_than=DAY) == 1
    assert store.get("waiting") is None


def test_file_prune_removes_old_expired_lease_files(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path)
    assert store.acquire_lease("gone", "a dead resumer", 0.001)  # never released
    assert store.acquire_lease("held", "a live run", HOUR)
    lease_file = store.path_for("gone").with_suffix(".lease")
    assert lease_file.exists()
    assert store.prune(older_than=DAY) == 0
    assert lease_file.exists()  # expired, but not a day ago
    data = json.loads(lease_file.read_text())  # its expiry two days back
    data["expires"] -= 2 * DAY
    lease_file.write_text(json.dumps(data))
    assert store.prune(older_than=DAY) == 0  # a lease alone is not a checkpoint
    assert not lease_file.exists()
    assert store.path_for("held").with_suffix(".lease").exists()


def test_file_prune_never_follows_a_planted_symlink(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path / "store")
    target = tmp_path / "precious"
    target.write_bytes(b"not a checkpoint")
    link = store.path_for("planted")
    link.symlink_to(target)
    when = time.time() - 2 * DAY
    os.utime(link, (when, when), follow_symlinks=False)
    assert store.prune(older_than=DAY) == 1
    assert not link.is_symlink()
    assert target.read_bytes() == b"not a checkpoint"


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "1d", None, True])
def test_prune_refuses_a_bad_age(tmp_path: Path, bad: Any) -> None:
    with SQLiteCheckPointStore(tmp_path / "c.db") as sqlite:
        for store in (FileCheckPointStore(tmp_path / "files"), sqlite):
            with pytest.raises(ValueError, match="older_than must be a number of seconds >= 0"):
                store.prune(older_than=bad)


# --- the SQLite store -------------------------------------------------------------------------


def age_rows(path: Path, checkpoint_id: str, seconds: float,
             which: tuple[str, ...] = ("checkpoint", "steps")) -> None:
    when = time.time() - seconds
    key = checkpoint_id.encode()
    with sqlite3.connect(path) as connection:
        if "checkpoint" in which:
            connection.execute("UPDATE agentkit_checkpoints SET updated_at = ? WHERE id = ?",
                               (when, key))
        if "steps" in which:
            connection.execute("UPDATE agentkit_checkpoint_steps SET at = ? WHERE id = ?",
                               (when, key))
    connection.close()


def test_sqlite_prune_removes_an_old_tombstone_and_keeps_what_is_newer(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SQLiteCheckPointStore(path) as store:
        runner = completed_run(store, "old")
        completed_run(store, "recent")
        store.set("fresh", b"written now")
        age_rows(path, "old", 2 * DAY)
        age_rows(path, "recent", HOUR)
        assert store.prune(older_than=DAY) == 1
        assert store.get("old") is None
        with pytest.raises(CheckpointNotFoundError):
            runner.resume("old")
        with pytest.raises(CheckpointConsumedError):
            runner.resume("recent")
        assert store.get("fresh") == b"written now"
        assert store.prune(older_than=DAY) == 0
        assert store.prune(older_than=0) == 2


def test_sqlite_prune_counts_a_checkpoints_latest_step_record(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SQLiteCheckPointStore(path) as store:
        store.set("run", b"base")
        store.append_step("run", b"old record")
        store.append_step("run", b"a record written since")
        age_rows(path, "run", 2 * DAY, ("checkpoint",))
        with sqlite3.connect(path) as connection:  # only the first record is old
            connection.execute("UPDATE agentkit_checkpoint_steps SET at = ? WHERE seq = 1",
                               (time.time() - 2 * DAY,))
        connection.close()
        assert store.prune(older_than=DAY) == 0
        assert store.read_steps("run") == [b"old record", b"a record written since"]
        age_rows(path, "run", 2 * DAY, ("steps",))
        assert store.prune(older_than=DAY) == 1
        assert store.get("run") is None and store.read_steps("run") == []
        store.append_step("orphan", b"records without a checkpoint")
        age_rows(path, "orphan", 2 * DAY)
        assert store.prune(older_than=DAY) == 1
        assert store.read_steps("orphan") == []


def test_sqlite_prune_never_removes_a_leased_checkpoint_and_drops_old_leases(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    with SQLiteCheckPointStore(path) as store:
        interrupted_run(store, "waiting")
        age_rows(path, "waiting", 2 * DAY)
        lease = lease_for(store, "waiting", ttl=HOUR)
        assert store.prune(older_than=0) == 0
        assert store.get("waiting") is not None
        lease.release()
        assert store.acquire_lease("gone", "a dead resumer", HOUR)
        with sqlite3.connect(path) as connection:
            connection.execute("UPDATE agentkit_checkpoint_leases SET expires_at = ?",
                               (time.time() - 2 * DAY,))
        connection.close()
        assert store.prune(older_than=DAY) == 1  # the interrupted run, no longer leased
        with sqlite3.connect(path) as connection:
            leases = connection.execute("SELECT id FROM agentkit_checkpoint_leases").fetchall()
        connection.close()
        assert leases == []


OLD_STEPS_TABLE = """CREATE TABLE agentkit_checkpoint_steps (
    id BLOB NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (id, seq)
) WITHOUT ROWID"""


def test_sqlite_a_database_of_an_earlier_release_gets_record_times(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as connection:
        connection.execute(OLD_STEPS_TABLE)
        connection.execute(
            "CREATE TABLE agentkit_checkpoints (id BLOB PRIMARY KEY, data BLOB NOT NULL, "
            "updated_at REAL NOT NULL)")
        connection.execute("INSERT INTO agentkit_checkpoints VALUES (?, ?, ?)",
                           (b"run", b"base", time.time() - 2 * DAY))
        connection.execute("INSERT INTO agentkit_checkpoint_steps VALUES (?, 1, ?)",
                           (b"run", b"a record without a time"))
    connection.close()
    with SQLiteCheckPointStore(path) as store, SQLiteCheckPointStore(path) as again:
        assert store.read_steps("run") == [b"a record without a time"]
        store.append_step("run", b"a new record")
        assert again.read_steps("run") == [b"a record without a time", b"a new record"]
        assert store.prune(older_than=DAY) == 0  # the new record is fresh
        age_rows(path, "run", 2 * DAY, ("steps",))
        with sqlite3.connect(path) as connection:  # the old record keeps no time
            connection.execute("UPDATE agentkit_checkpoint_steps SET at = NULL WHERE seq = 1")
        connection.close()
        assert store.prune(older_than=DAY) == 1  # a record without a time: as old as its base
        assert store.read_steps("run") == []


# --- the in-memory store ----------------------------------------------------------------------


def test_memory_prune_removes_old_tombstones_and_keeps_what_is_newer_or_leased() -> None:
    """Issue 49 A19: ``InMemoryCheckPointStore`` kept the tombstone of every completed run."""
    clock = ManualClock()
    store = InMemoryCheckPointStore(clock=clock)
    runner = completed_run(store, "old")
    interrupted_run(store, "waiting")
    store.append_step("orphan", b"records without a checkpoint")
    clock.advance(10)  # what was written before `between` is older than what comes after it
    between = clock.monotonic()
    clock.advance(10)
    completed_run(store, "recent")
    store.set("touched", b"base")
    lease = lease_for(store, "waiting", ttl=HOUR)
    assert store.prune(older_than=DAY) == 0
    assert store.prune(older_than=clock.monotonic() - between) == 2  # "old" and "orphan"
    assert store.get("old") is None and store.read_steps("orphan") == []
    with pytest.raises(CheckpointNotFoundError):
        runner.resume("old")
    with pytest.raises(CheckpointConsumedError):
        runner.resume("recent")
    assert store.get("waiting") is not None  # leased: never removed, whatever its age
    lease.release()
    assert store.prune(older_than=0) == 3  # "waiting", "recent", "touched"
    assert repr(store) == "<InMemoryCheckPointStore: 0 checkpoints>"
    with pytest.raises(ValueError, match="older_than must be a number of seconds >= 0"):
        store.prune(older_than=-1)
