"""Every checkpoint store passes the public conformance suite, plus store-specific behaviour."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkit.checkpoint import (
    CheckPointStore,
    FileCheckPointStore,
    InMemoryCheckPointStore,
    JournalingCheckPointStore,
    LeasingCheckPointStore,
    RedisCheckPointStore,
    SQLiteCheckPointStore,
    lease_for,
)
from agentkit.errors import CheckpointBusyError, CheckpointError
from agentkit.testing import ALL_CHECKS, ManualClock, StoreCheck, check_checkpoint_store
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

STORE_KINDS = ["memory", "file", "sqlite", "redis"]


@pytest.fixture(params=STORE_KINDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """A factory of stores of one kind; all stores it makes share one backend."""
    kind = request.param
    created: list[Any] = []
    clock = ManualClock()  # the lease checks move it on instead of sleeping
    if kind == "memory":
        shared = InMemoryCheckPointStore(clock=clock)

        def make() -> Any:
            return shared

    elif kind == "file":

        def make() -> Any:
            return FileCheckPointStore(tmp_path / "checkpoints", clock=clock)

    elif kind == "sqlite":

        def make() -> Any:
            store = SQLiteCheckPointStore(tmp_path / "checkpoints.db", clock=clock)
            created.append(store)
            return store

    else:
        url = request.getfixturevalue("redis_url")
        prefix = f"test:{request.node.name}:"

        def make() -> Any:
            store = RedisCheckPointStore(url, prefix=prefix, clock=clock)
            created.append(store)
            return store

    yield make
    for store in created:
        store.close()


@pytest.mark.parametrize("check", ALL_CHECKS, ids=lambda check: check.__name__)
def test_store_conformance(make_store: Callable[[], CheckPointStore], check: StoreCheck) -> None:
    check(make_store)


def test_every_store_implements_the_lease_protocol(make_store: Callable[[], Any]) -> None:
    store = make_store()
    assert isinstance(store, CheckPointStore)
    assert isinstance(store, LeasingCheckPointStore)


def test_every_store_keeps_step_records(make_store: Callable[[], Any]) -> None:
    store = make_store()
    assert isinstance(store, JournalingCheckPointStore)
    check_checkpoint_store(make_store, require_steps=True, checks=())


def test_step_records_are_refused_over_max_bytes(
    make_store: Callable[[], Any], tmp_path: Path
) -> None:
    small = _small_twin(make_store(), tmp_path, max_bytes=100)
    with pytest.raises(CheckpointError, match="over the store's max_bytes=100"):
        small.append_step("big", b"x" * 101)
    for _ in range(3):
        small.append_step("many", b"y" * 60)
    with pytest.raises(CheckpointError, match="over the (store.s max_bytes=|limit of )100"):
        small.read_steps("many")
    small.delete("many")


# -- step records in files: a torn last record ----------------------------------------------


def test_a_torn_last_step_record_is_dropped_and_earlier_ones_kept(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path)
    store.append_step("run", b"one")
    store.append_step("run", b"two" * 100)
    path = store.steps_path_for("run")
    whole = path.read_bytes()
    for cut in range(len(whole) - 1, len(whole) - 300, -37):  # inside the last record's frame
        path.write_bytes(whole[:cut])
        assert store.read_steps("run") == [b"one"]
    path.write_bytes(whole[:-1] + bytes([whole[-1] ^ 0xFF]))  # complete, but damaged
    assert store.read_steps("run") == [b"one"]
    path.write_bytes(whole)
    assert store.read_steps("run") == [b"one", b"two" * 100]


def test_a_damaged_step_record_before_the_last_is_refused(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path)
    store.append_step("run", b"one")
    store.append_step("run", b"two")
    path = store.steps_path_for("run")
    data = bytearray(path.read_bytes())
    data[9] ^= 0xFF  # a byte of the first record
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="fails its CRC and is not the last one"):
        store.read_steps("run")


def test_step_records_never_follow_a_planted_symlink(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path / "store")
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    store.steps_path_for("run").symlink_to(target)
    with pytest.raises(CheckpointError, match="symbolic link"):
        store.append_step("run", b"record")
    assert target.read_bytes() == b""


def test_step_records_are_private_files(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path / "store", sync_steps=True)
    store.append_step("run", b"record")
    assert store.steps_path_for("run").stat().st_mode & 0o777 == 0o600
    assert store.read_steps("run") == [b"record"]


def _small_twin(store: Any, tmp_path: Path, *, max_bytes: int) -> Any:
    """A store of the same kind as ``store`` (a fresh backend) with a small ``max_bytes``."""
    if isinstance(store, InMemoryCheckPointStore):
        return InMemoryCheckPointStore(max_bytes=max_bytes)
    if isinstance(store, FileCheckPointStore):
        return FileCheckPointStore(tmp_path / "small", max_bytes=max_bytes)
    if isinstance(store, SQLiteCheckPointStore):
        return SQLiteCheckPointStore(tmp_path / "small.db", max_bytes=max_bytes)
    assert isinstance(store, RedisCheckPointStore)
    return RedisCheckPointStore(client=store.client, prefix=f"small:{time.time_ns()}:",
                                max_bytes=max_bytes)


def test_stores_refuse_non_str_ids_and_non_bytes_data(make_store: Callable[[], Any]) -> None:
    store = make_store()
    with pytest.raises(TypeError, match="checkpoint_id must be a str"):
        store.get(b"bytes-id")
    with pytest.raises(TypeError, match="checkpoint data must be bytes"):
        store.set("x", "text")


def test_lease_for_is_exclusive_until_released(make_store: Callable[[], Any]) -> None:
    store = make_store()
    lease = lease_for(store, "run-1")
    with pytest.raises(CheckpointBusyError, match="'run-1' is being resumed by another run"):
        lease_for(store, "run-1")
    with lease_for(store, "run-2"):  # other ids are free
        pass
    assert lease.refresh() is True
    lease.release()
    lease.release()  # idempotent
    assert lease.refresh() is False
    with lease_for(store, "run-1") as again:
        assert not again.released
    assert again.released


def test_lease_for_rejects_a_non_positive_ttl(make_store: Callable[[], Any]) -> None:
    with pytest.raises(ValueError, match="positive"):
        lease_for(make_store(), "x", ttl=0)


# -- stores without lease methods ----------------------------------------------------------


class PlainStore:
    """A third-party store without lease methods."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def get(self, checkpoint_id: str) -> bytes | None:
        return self.data.get(checkpoint_id)

    def set(self, checkpoint_id: str, data: bytes) -> None:
        self.data[checkpoint_id] = data

    def delete(self, checkpoint_id: str) -> None:
        self.data.pop(checkpoint_id, None)


def test_a_plain_store_passes_the_suite_without_leases() -> None:
    store = PlainStore()
    assert isinstance(store, CheckPointStore)
    assert not isinstance(store, LeasingCheckPointStore)
    check_checkpoint_store(lambda: store)
    with pytest.raises(AssertionError, match="no acquire_lease"):
        check_checkpoint_store(lambda: store, require_leases=True)


def test_lease_for_falls_back_to_a_process_lock_for_plain_stores() -> None:
    store, other_store = PlainStore(), PlainStore()
    start = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()
    held: list[Any] = []

    def contend() -> None:
        start.wait()
        try:
            lease = lease_for(store, "id")
        except CheckpointBusyError:
            outcome = "busy"
        else:
            outcome = "won"
            held.append(lease)
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=contend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["busy"] * 7 + ["won"]
    with lease_for(other_store, "id"):  # another store object is another namespace
        pass
    held[0].release()
    with lease_for(store, "id"):
        pass


class ClockedPlainStore(PlainStore):
    """A store without lease methods, with a clock: its process leases run on it."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()


def test_process_lease_for_plain_stores_expires() -> None:
    store = ClockedPlainStore()
    abandoned = lease_for(store, "id", ttl=30)
    store.clock.advance(29)
    with pytest.raises(CheckpointBusyError):
        lease_for(store, "id")
    store.clock.advance(2)
    with lease_for(store, "id"):
        assert abandoned.refresh() is False  # taken over: the old holder learns it lost it


def test_the_suite_reports_a_broken_store() -> None:
    class ForgetfulStore(PlainStore):
        def set(self, checkpoint_id: str, data: bytes) -> None:
            self.data[checkpoint_id] = data[:1]

    store = ForgetfulStore()
    with pytest.raises(AssertionError, match=r"check_round_trip: after set: get\("):
        check_checkpoint_store(lambda: store)


# -- FileCheckPointStore -------------------------------------------------------------------


def test_file_store_names_files_from_an_encoding_of_the_id(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path / "nested" / "dir")
    store.set("../../escape", b"x")
    store.set("A", b"upper")
    store.set("a", b"lower")
    store.set("y" * 500, b"long")
    names = sorted(path.name for path in store.directory.iterdir())
    assert all(name.startswith(("c-", "h-", ".")) for name in names)
    assert store.path_for("../../escape").parent == store.directory
    assert not (tmp_path / "escape").exists()
    # case-insensitive file systems cannot confuse ids that differ in case
    assert store.path_for("A").name.lower() != store.path_for("a").name.lower()
    assert len(store.path_for("y" * 500).name) < 100
    assert [store.get("A"), store.get("a"), store.get("y" * 500)] == [b"upper", b"lower", b"long"]


def test_file_store_writes_atomically_and_leaves_no_temp_files(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path)
    store.set("id", b"old")
    store.set("id", b"new")
    assert store.get("id") == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp", store.path_for("id").name]
    assert list((tmp_path / ".tmp").iterdir()) == []


def test_file_store_failed_write_keeps_the_old_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileCheckPointStore(tmp_path)
    store.set("id", b"old")

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(CheckpointError, match=r"cannot write checkpoint 'id'.*No space left"):
        store.set("id", b"new")
    monkeypatch.undo()
    assert store.get("id") == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp", store.path_for("id").name]
    assert list((tmp_path / ".tmp").iterdir()) == []


def test_file_store_io_errors_are_checkpoint_errors(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path)
    store.path_for("dir").mkdir()
    with pytest.raises(CheckpointError, match="cannot read checkpoint 'dir'"):
        store.get("dir")
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    with pytest.raises(CheckpointError, match="cannot create the checkpoint directory"):
        FileCheckPointStore(blocker / "sub")


def test_file_store_treats_a_damaged_lease_file_as_free(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path)
    assert store.acquire_lease("id", "alice", 30)
    lease_file = store.path_for("id").with_suffix(".lease")
    assert lease_file.exists()
    lease_file.write_bytes(b"{not json")
    assert store.acquire_lease("id", "bob", 30)
    store.release_lease("id", "bob")
    assert not lease_file.exists()


# -- SQLiteCheckPointStore -----------------------------------------------------------------


def test_sqlite_store_uses_wal_and_binds_ids_as_parameters(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SQLiteCheckPointStore(path) as store:
        evil = "x'); DROP TABLE agentkit_checkpoints; --"
        store.set(evil, b"data")
        assert store.get(evil) == b"data"
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    connection.close()
    assert {"agentkit_checkpoints", "agentkit_checkpoint_leases"} <= tables


def test_sqlite_store_errors_are_checkpoint_errors(tmp_path: Path) -> None:
    not_a_db = tmp_path / "garbage.db"
    not_a_db.write_bytes(b"this is not an sqlite database, just some text" * 100)
    with pytest.raises(CheckpointError, match=r"SQLite database .*garbage\.db"):
        SQLiteCheckPointStore(not_a_db)
    store = SQLiteCheckPointStore(tmp_path / "ok.db")
    store.close()
    with pytest.raises(CheckpointError, match="closed"):
        store.get("x")


def test_sqlite_store_is_shared_by_threads(tmp_path: Path) -> None:
    store = SQLiteCheckPointStore(tmp_path / "c.db")
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for round_ in range(20):
                store.set(f"{index}", f"{round_}".encode())
                assert store.get(f"{index}") == f"{round_}".encode()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    assert errors == []


# -- RedisCheckPointStore ------------------------------------------------------------------


def test_redis_store_ttl_expires_checkpoints(redis_url: str) -> None:  # noqa: F811
    # A ttl long enough for the checks before it runs out even on a loaded machine; the
    # expiry is then waited for (bounded), not slept for.
    with RedisCheckPointStore(redis_url, prefix="test:ttl:", ttl=1.0) as store:
        store.set("id", b"data")
        assert store.get("id") == b"data"
        ttl_ms = store.client.pttl(store.key_for("id"))
        assert 0 < ttl_ms <= 1000
        deadline = time.monotonic() + 30
        while store.get("id") is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.get("id") is None


def test_redis_store_keys_and_lease_keys(redis_url: str) -> None:  # noqa: F811
    with RedisCheckPointStore(redis_url, prefix="test:keys:") as store:
        store.set("run/1", b"data")
        assert store.client.get(b"test:keys:run/1") == b"data"
        assert store.acquire_lease("run/1", "alice", 30)
        lease_keys = store.client.keys(b"test:keys:\xfflease:*")
        assert lease_keys == [b"test:keys:\xfflease:run/1"]
        assert store.client.pttl(lease_keys[0]) > 25_000
        store.release_lease("run/1", "alice")
        assert store.client.keys(b"test:keys:\xfflease:*") == []
        store.delete("run/1")


def test_redis_store_defaults_to_redis_url_env(
    redis_url: str, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_url)
    with RedisCheckPointStore(prefix="test:env:") as store:
        store.set("x", b"1")
        assert store.get("x") == b"1"
        store.delete("x")


def test_redis_store_uses_a_given_client_and_leaves_it_open(redis_url: str) -> None:  # noqa: F811
    import redis

    client = redis.Redis.from_url(redis_url)
    store = RedisCheckPointStore(client=client, prefix="test:client:")
    store.set("x", b"1")
    store.close()
    assert client.get(b"test:client:x") == b"1"
    client.delete(b"test:client:x")
    decoding = RedisCheckPointStore(
        client=redis.Redis.from_url(redis_url, decode_responses=True), prefix="test:client:"
    )
    decoding.set("y", b"text")
    with pytest.raises(CheckpointError, match="decode_responses=False"):
        decoding.get("y")
    decoding.delete("y")
    client.close()


def test_redis_store_connection_errors_are_checkpoint_errors() -> None:
    pytest.importorskip("redis")
    store = RedisCheckPointStore("redis://127.0.0.1:1/0")
    with pytest.raises(CheckpointError, match="cannot read checkpoint 'x' in Redis"):
        store.get("x")
    store.close()


def test_redis_store_repr_hides_passwords() -> None:
    pytest.importorskip("redis")
    store = RedisCheckPointStore("redis://user:s3cret@127.0.0.1:1/0")
    assert "s3cret" not in repr(store)
    store.close()
