"""``set_base``: a durable run's first image, compactions and tombstone, written like its steps.

A :class:`~agentkit.checkpoint.RebasingCheckPointStore` replaces a run's base and drops its
step records in one call, with the durability of a step record: the file store ``fsync``-s
the new file and its directory only with ``sync`` or ``sync_steps``; SQLite and Redis do both
in one transaction (SQLite syncs it only with ``sync`` or ``sync_steps``). The checkpoint of an
interrupted run is
still stored with ``set`` (which ``fsync``-s the directory).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from agentkit import ChatModelAgent, Runner, with_approval, with_checkpoint_id
from agentkit.checkpoint import (
    FileCheckPointStore,
    InMemoryCheckPointStore,
    PickleSerializer,
    RebasingCheckPointStore,
    RedisCheckPointStore,
    SQLiteCheckPointStore,
)
from agentkit.checkpoint.base import rebases
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)
from tests.test_durable_steps import add

KEY = b"rebase tests key, 32 bytes long!"
SERIALIZER = PickleSerializer(KEY)


@pytest.fixture
def directory_syncs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The directories ``fsync``-ed by the file store (the real call still runs)."""
    import agentkit.checkpoint._atomic as atomic
    import agentkit.checkpoint._file as file
    from agentkit.checkpoint._files import fsync_directory as real

    synced: list[Path] = []

    def spy(directory: Path) -> None:
        synced.append(directory)
        real(directory)

    monkeypatch.setattr(file, "fsync_directory", spy)
    monkeypatch.setattr(atomic, "fsync_directory", spy)
    return synced


@pytest.fixture
def file_syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The file descriptors ``fsync``-ed (the real call still runs)."""
    import os

    real = os.fsync
    synced: list[int] = []

    def spy(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return synced


def test_file_set_base_syncs_no_file_unless_asked(
    tmp_path: Path, file_syncs: list[int], directory_syncs: list[Path]
) -> None:
    store = FileCheckPointStore(tmp_path)
    store.set_base("first", b"base")  # the first write makes the store's temporary directory
    file_syncs.clear()
    store.set_base("run", b"base")
    assert file_syncs == []  # a step record's durability: no fsync at all
    assert store.get("run") == b"base"
    store.set_base("run", b"synced base", sync=True)
    assert len(file_syncs) == 2  # the new file's data, then the directory
    assert directory_syncs == [tmp_path]
    file_syncs.clear()
    store.set("run", b"a checkpoint")  # set() is unchanged: it always syncs
    assert len(file_syncs) == 2


def test_the_file_sqlite_and_redis_stores_rebase_the_others_fall_back(tmp_path: Path) -> None:
    assert rebases(FileCheckPointStore(tmp_path / "f"))
    assert isinstance(FileCheckPointStore(tmp_path / "g"), RebasingCheckPointStore)
    assert not rebases(InMemoryCheckPointStore())
    with SQLiteCheckPointStore(tmp_path / "s.db") as sqlite:
        assert rebases(sqlite)
        assert isinstance(sqlite, RebasingCheckPointStore)


def test_file_set_base_replaces_the_base_and_drops_the_records(
    tmp_path: Path, directory_syncs: list[Path]
) -> None:
    store = FileCheckPointStore(tmp_path)
    store.set("run", b"old base")
    store.append_step("run", b"record 1")
    directory_syncs.clear()
    store.set_base("run", b"new base")
    assert store.get("run") == b"new base"
    assert store.read_steps("run") == []
    assert not store.steps_path_for("run").exists()
    assert directory_syncs == []  # like an unsynced step record
    assert not [path for path in tmp_path.rglob("*") if path.is_file() and ".tmp" in path.parts]


def test_file_set_base_syncs_the_directory_when_asked(
    tmp_path: Path, directory_syncs: list[Path]
) -> None:
    store = FileCheckPointStore(tmp_path / "a")
    store.set_base("first", b"base")  # the first write makes the store's temporary directory
    directory_syncs.clear()
    store.set_base("run", b"base", sync=True)
    assert directory_syncs == [tmp_path / "a"]
    always = FileCheckPointStore(tmp_path / "b", sync_steps=True)
    always.set_base("first", b"base")
    directory_syncs.clear()
    always.set_base("run", b"base")
    assert directory_syncs == [tmp_path / "b"]
    directory_syncs.clear()
    always.set("run", b"a checkpoint")  # set() is unchanged: it always syncs
    assert directory_syncs == [tmp_path / "b"]


def _agent(rounds: int) -> ChatModelAgent:
    script: list[Any] = [
        calls_message(call("add", {"a": i, "b": 1}, id=f"c{i}")) for i in range(rounds)
    ]
    return ChatModelAgent(
        "A", "adds", ScriptedChatModel([*script, "done"]), tools=[add],
        max_iterations=rounds + 1,
    )


def test_a_durable_run_on_files_syncs_no_directory_unless_sync_steps(
    tmp_path: Path, directory_syncs: list[Path]
) -> None:
    store = FileCheckPointStore(tmp_path / "plain")
    store.set_base("first", b"base")  # the first write makes the store's temporary directory
    directory_syncs.clear()
    runner = Runner(_agent(3), checkpoint_store=store, serializer=SERIALIZER)
    result = runner.invoke("go", with_checkpoint_id("r1"))
    assert result.text == "done"
    assert directory_syncs == []  # first image, 6 records, tombstone: no directory fsync
    assert not store.steps_path_for("r1").exists()
    with pytest.raises(Exception, match="completed"):
        runner.resume("r1")  # the tombstone is there: a completed run does not run again

    synced = FileCheckPointStore(tmp_path / "synced", sync_steps=True)
    runner = Runner(_agent(3), checkpoint_store=synced, serializer=SERIALIZER)
    assert runner.invoke("go", with_checkpoint_id("r2")).text == "done"
    assert len(directory_syncs) >= 2  # the first image and the tombstone, at least


def test_an_interrupted_runs_checkpoint_is_still_saved_with_set(
    tmp_path: Path, directory_syncs: list[Path]
) -> None:
    store = FileCheckPointStore(tmp_path)
    store.set_base("first", b"base")  # the first write makes the store's temporary directory
    directory_syncs.clear()
    agent = ChatModelAgent(
        "A", "adds", ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 2}, id="c")),
                                        "done"]),
        tools=[with_approval(add)],
    )
    runner = Runner(agent, checkpoint_store=store, serializer=SERIALIZER)
    result = runner.invoke("go", with_checkpoint_id("held"))
    assert result.status == "interrupted"
    assert directory_syncs == [tmp_path]  # the interrupt's set(); the first image none
    assert store.get("held") is not None


def test_redis_set_base_replaces_the_base_and_drops_the_records(
    redis_url: str,  # noqa: F811
) -> None:
    with RedisCheckPointStore(redis_url, prefix="test:rebase:") as store:
        assert rebases(store)
        store.set("run", b"old base")
        store.append_step("run", b"record 1")
        store.set_base("run", b"new base")
        assert store.get("run") == b"new base"
        assert store.read_steps("run") == []
        store.delete("run")


@pytest.fixture
def sqlite_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How the SQLite store commits each checkpoint write: ``"synced"`` or ``"unsynced"``."""
    import agentkit.checkpoint._sqlite as module

    real_synced, real_transaction = module._synced, module._transaction
    seen: list[str] = []

    def synced(connection: sqlite3.Connection, statement: str, parameters: Any) -> None:
        seen.append("synced")
        real_synced(connection, statement, parameters)

    def transaction(connection: sqlite3.Connection, sync: bool, statements: Any) -> None:
        seen.append("synced" if sync else "unsynced")
        real_transaction(connection, sync, statements)

    monkeypatch.setattr(module, "_synced", synced)
    monkeypatch.setattr(module, "_transaction", transaction)
    return seen


def test_sqlite_set_base_replaces_the_base_and_drops_the_records(
    tmp_path: Path, sqlite_writes: list[str]
) -> None:
    with SQLiteCheckPointStore(tmp_path / "c.db") as store:
        store.set("run", b"old base")
        store.append_step("run", b"record 1")
        store.append_step("other", b"another id's record")
        sqlite_writes.clear()
        store.set_base("run", b"new base")
        assert sqlite_writes == ["unsynced"]  # like a step record
        assert store.get("run") == b"new base"
        assert store.read_steps("run") == []
        assert store.read_steps("other") == [b"another id's record"]
        store.append_step("run", b"record of the new base")
        assert store.read_steps("run") == [b"record of the new base"]
        store.set_base("fresh", b"a first base")  # no earlier base: inserted
        assert store.get("fresh") == b"a first base"
        sqlite_writes.clear()
        store.set_base("run", b"synced base", sync=True)
        assert sqlite_writes == ["synced"]
    with SQLiteCheckPointStore(tmp_path / "c.db", sync_steps=True) as always:
        sqlite_writes.clear()
        always.set_base("run", b"base")
        assert sqlite_writes == ["synced"]
    with SQLiteCheckPointStore(tmp_path / "c.db") as reopened:  # it committed
        assert reopened.get("run") == b"base"
        assert reopened.read_steps("run") == []


def test_sqlite_set_base_refuses_what_set_refuses(tmp_path: Path) -> None:
    with SQLiteCheckPointStore(tmp_path / "c.db", max_bytes=8) as store:
        store.set("run", b"old")
        store.append_step("run", b"kept")
        with pytest.raises(Exception, match="over the store's max_bytes=8"):
            store.set_base("run", b"far too large")
        with pytest.raises(TypeError):
            store.set_base("run", "text")  # type: ignore[arg-type]
        assert store.get("run") == b"old"  # nothing half done
        assert store.read_steps("run") == [b"kept"]


def test_a_sqlite_reader_sees_the_old_base_and_records_or_the_new_base_never_a_mix(
    tmp_path: Path,
) -> None:
    """Another connection reads base and records in one snapshot while bases are replaced."""
    path = tmp_path / "c.db"
    rounds = 200
    mixes: list[tuple[bytes, list[bytes]]] = []
    stop = threading.Event()
    started = threading.Event()
    reads = 0

    def reader() -> None:
        nonlocal reads
        connection = sqlite3.connect(path, timeout=30, isolation_level=None)
        try:
            while not stop.is_set():
                connection.execute("BEGIN")
                row = connection.execute(
                    "SELECT data FROM agentkit_checkpoints WHERE id = ?", (b"run",)
                ).fetchone()
                steps = [bytes(r[0]) for r in connection.execute(
                    "SELECT data FROM agentkit_checkpoint_steps WHERE id = ? ORDER BY seq",
                    (b"run",),
                )]
                connection.execute("COMMIT")
                reads += 1
                started.set()
                base = bytes(row[0]) if row is not None else b""
                if any(not step.startswith(base + b":") for step in steps):
                    mixes.append((base, steps))
        finally:
            connection.close()

    with SQLiteCheckPointStore(path) as store:
        store.set_base("run", b"g0")
        thread = threading.Thread(target=reader)
        thread.start()
        try:
            assert started.wait(30)
            for generation in range(1, rounds + 1):
                base = b"g%d" % generation
                store.set_base("run", base)
                for number in range(3):
                    store.append_step("run", base + b":%d" % number)
        finally:
            stop.set()
            thread.join(30)
    assert not thread.is_alive()
    assert reads > 0
    assert mixes == []


def test_a_durable_run_on_sqlite_writes_its_base_and_tombstone_with_set_base(
    tmp_path: Path, sqlite_writes: list[str]
) -> None:
    with SQLiteCheckPointStore(tmp_path / "c.db") as store:
        runner = Runner(_agent(3), checkpoint_store=store, serializer=SERIALIZER)
        assert runner.invoke("go", with_checkpoint_id("r1")).text == "done"
        assert sqlite_writes == ["unsynced", "unsynced"]  # the first image, the tombstone
        assert store.read_steps("r1") == []
        with pytest.raises(Exception, match="completed"):
            runner.resume("r1")
