"""Store hygiene under attack: replay across stores, size caps, modes, symlinks, temp files."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkit.checkpoint import (
    FileCheckPointStore,
    InMemoryCheckPointStore,
    PickleSerializer,
    RedisCheckPointStore,
    SQLiteCheckPointStore,
    lease_for,
    namespace_of,
)
from agentkit.checkpoint._binding import dumps_for_store, loads_for_store
from agentkit.checkpoint._keys import key_file_path
from agentkit.errors import CheckpointError
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

ROOT = Path(__file__).resolve().parents[1]
KEY = b"k" * 32
posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX modes and symlinks")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def umask_zero() -> Iterator[None]:
    """Modes must not depend on the umask: run with none at all."""
    old = os.umask(0)
    yield
    os.umask(old)


# -- replay across stores -------------------------------------------------------------------


@pytest.fixture(params=["file", "sqlite", "redis"])
def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """Two stores of one kind that differ only in where their data lives."""
    kind = request.param
    if kind == "file":
        yield FileCheckPointStore(tmp_path / "a"), FileCheckPointStore(tmp_path / "b")
    elif kind == "sqlite":
        sqlite_a = SQLiteCheckPointStore(tmp_path / "a.db")
        sqlite_b = SQLiteCheckPointStore(tmp_path / "b.db")
        yield sqlite_a, sqlite_b
        sqlite_a.close()
        sqlite_b.close()
    else:
        url = request.getfixturevalue("redis_url")
        run = uuid.uuid4().hex
        a = RedisCheckPointStore(url, prefix=f"{run}:tenantA:")
        b = RedisCheckPointStore(url, prefix=f"{run}:tenantB:")
        yield a, b
        for store in (a, b):
            store.delete("42")
            store.close()


def test_a_checkpoint_copied_to_another_store_under_the_same_id_is_refused(
    two_stores: tuple[Any, Any],
) -> None:
    tenant_a, tenant_b = two_stores
    assert namespace_of(tenant_a) != namespace_of(tenant_b)
    serializer = PickleSerializer(KEY)
    tenant_a.set("42", dumps_for_store(serializer, tenant_a, "42", {"approved": True}))
    assert loads_for_store(serializer, tenant_a, "42", tenant_a.get("42")) == {"approved": True}
    tenant_b.set("42", tenant_a.get("42"))
    with pytest.raises(CheckpointError, match="in another store"):
        loads_for_store(serializer, tenant_b, "42", tenant_b.get("42"))


def test_namespaces_name_where_the_data_lives(tmp_path: Path, redis_url: str) -> None:  # noqa: F811
    assert namespace_of(FileCheckPointStore(tmp_path / "d")) == f"file:{tmp_path / 'd'}"
    with SQLiteCheckPointStore(tmp_path / "x.db") as sqlite_store:
        expected = f"sqlite:{tmp_path / 'x.db'}:agentkit_checkpoints"
        assert namespace_of(sqlite_store) == expected
    with RedisCheckPointStore(redis_url, prefix="tenantA:") as redis_store:
        assert namespace_of(redis_store) == "redis/0:tenantA:"
    assert namespace_of(InMemoryCheckPointStore()) == ""


class LegacySerializer:
    """A user serializer written for the two-argument protocol."""

    def dumps(self, obj: Any, *, checkpoint_id: str) -> bytes:
        return repr(obj).encode()

    def loads(self, data: bytes, *, checkpoint_id: str) -> Any:
        return data.decode()


def test_serializers_without_a_namespace_keyword_keep_working(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path)
    data = dumps_for_store(LegacySerializer(), store, "x", [1])
    assert loads_for_store(LegacySerializer(), store, "x", data) == "[1]"


# -- size caps ------------------------------------------------------------------------------

SPARSE_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # reading 3 GiB would fail
from agentkit.checkpoint import FileCheckPointStore
from agentkit.errors import CheckpointError
store = FileCheckPointStore(sys.argv[1])
with open(store.path_for("big"), "wb") as file:
    file.truncate(3 * 2**30)  # sparse: takes no disk space
try:
    store.get("big")
except CheckpointError as error:
    print(error)
"""


@posix_only
def test_an_oversized_checkpoint_file_is_refused_without_being_read(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SPARSE_CHILD, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"is {3 * 2**30} bytes, over the limit of {64 * 2**20}" in result.stdout


def test_the_file_store_honours_its_max_bytes(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path, max_bytes=100)
    assert store.max_bytes == 100
    store.set("ok", b"x" * 100)
    assert store.get("ok") == b"x" * 100
    with pytest.raises(CheckpointError, match="over the store's max_bytes=100"):
        store.set("big", b"x" * 101)
    store.path_for("big").write_bytes(b"x" * 101)
    with pytest.raises(CheckpointError, match="101 bytes, over the limit of 100"):
        store.get("big")


def test_the_sqlite_store_refuses_an_oversized_row_from_its_length(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SQLiteCheckPointStore(path, max_bytes=1000) as store:
        store.set("ok", b"x" * 1000)
        with pytest.raises(CheckpointError, match="over the store's max_bytes=1000"):
            store.set("big", b"x" * 1001)
        with sqlite3.connect(path) as connection:  # planted by someone with file access
            connection.execute(
                "INSERT INTO agentkit_checkpoints VALUES (?, ?, 0)", (b"big", b"x" * 5000)
            )
        with pytest.raises(CheckpointError, match="5000 bytes, over the store's max_bytes"):
            store.get("big")
        assert store.get("ok") == b"x" * 1000


def test_the_redis_store_refuses_an_oversized_value_from_its_length(redis_url: str) -> None:  # noqa: F811
    prefix = f"test-size:{uuid.uuid4().hex}:"
    with RedisCheckPointStore(redis_url, prefix=prefix, max_bytes=1000) as store:
        store.set("ok", b"x" * 1000)
        with pytest.raises(CheckpointError, match="over the store's max_bytes=1000"):
            store.set("big", b"x" * 1001)
        store.client.set(store.key_for("big"), b"x" * 5000)
        with pytest.raises(CheckpointError, match="5000 bytes, over the store's max_bytes"):
            store.get("big")
        assert store.get("ok") == b"x" * 1000
        assert store.get("missing") is None
        store.client.delete(store.key_for("ok"), store.key_for("big"))


def test_the_memory_store_honours_its_max_bytes() -> None:
    store = InMemoryCheckPointStore(max_bytes=10)
    store.set("ok", b"x" * 10)
    with pytest.raises(CheckpointError, match="max_bytes=10"):
        store.set("big", b"x" * 11)


# -- file modes -----------------------------------------------------------------------------


@posix_only
def test_the_file_store_creates_private_directories_and_files(
    tmp_path: Path, umask_zero: None
) -> None:
    store = FileCheckPointStore(tmp_path / "new" / "checkpoints")
    store.set("a", b"data")
    with lease_for(store, "a"):
        assert mode(tmp_path / "new") == 0o700
        assert mode(tmp_path / "new" / "checkpoints") == 0o700
        assert mode(store.path_for("a")) == 0o600
        files = [path for path in (tmp_path / "new" / "checkpoints").iterdir() if path.is_file()]
        assert {path.suffix for path in files} == {".ckpt", ".lease", ".lock"}
        assert all(mode(path) == 0o600 for path in files)
        assert mode(tmp_path / "new" / "checkpoints" / ".tmp") == 0o700


@posix_only
def test_the_sqlite_store_creates_a_private_database(tmp_path: Path, umask_zero: None) -> None:
    path = tmp_path / "checkpoints.db"
    with SQLiteCheckPointStore(path) as store:
        store.set("a", b"data")
        with lease_for(store, "a"):
            files = sorted(tmp_path.iterdir())
            assert [file.name for file in files] == [
                "checkpoints.db",
                "checkpoints.db-shm",
                "checkpoints.db-wal",
            ]
            assert all(mode(file) == 0o600 for file in files)


@posix_only
def test_the_key_file_is_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_zero: None
) -> None:
    monkeypatch.delenv("AGENTKIT_CHECKPOINT_KEY", raising=False)
    monkeypatch.delenv("AGENTKIT_CHECKPOINT_KEY_FILE")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert key_file_path() == tmp_path / "config" / "agentkit" / "checkpoint.key"
    assert PickleSerializer().signed
    assert mode(tmp_path / "config" / "agentkit") == 0o700
    assert mode(key_file_path()) == 0o600
    assert len(key_file_path().read_bytes().strip()) == 64
    assert [path.name for path in key_file_path().parent.iterdir()] == ["checkpoint.key"]


@posix_only
def test_a_key_file_others_can_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTKIT_CHECKPOINT_KEY", raising=False)
    path = tmp_path / "key"
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY_FILE", str(path))
    PickleSerializer()
    path.chmod(0o644)
    with pytest.raises(CheckpointError, match="chmod 600"):
        PickleSerializer()


def create_key(barrier: Any, results: Any) -> None:
    """Child process: wait for all, then create or read the key file at once."""
    from agentkit.checkpoint import _keys

    barrier.wait(timeout=60)
    key, _ = _keys.default_key()
    results.put(_keys.key_id(key))


def test_processes_creating_the_key_file_at_once_end_with_one_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTKIT_CHECKPOINT_KEY", raising=False)
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY_FILE", str(tmp_path / "cfg" / "checkpoint.key"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(6), context.Queue()
    processes = [context.Process(target=create_key, args=(barrier, results)) for _ in range(6)]
    for process in processes:
        process.start()
    ids = {results.get(timeout=120) for _ in processes}
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert len(ids) == 1
    assert [path.name for path in (tmp_path / "cfg").iterdir()] == ["checkpoint.key"]


# -- symlinks -------------------------------------------------------------------------------


@posix_only
def test_a_planted_checkpoint_symlink_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"the secret of another user")
    store = FileCheckPointStore(tmp_path / "store")
    store.path_for("a").symlink_to(secret)
    with pytest.raises(CheckpointError, match="symbolic link"):
        store.get("a")
    store.set("a", b"new")  # replaces the link, never writes through it
    assert secret.read_bytes() == b"the secret of another user"
    assert not store.path_for("a").is_symlink()
    assert store.get("a") == b"new"


@posix_only
@pytest.mark.parametrize("planted", ["lease", "lock"])
def test_a_planted_lease_or_lock_symlink_creates_nothing_elsewhere(
    tmp_path: Path, planted: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    store = FileCheckPointStore(tmp_path / "store", lease_ttl=5)
    link = store.path_for("a").with_suffix(".lease") if planted == "lease" else None
    link = link or (tmp_path / "store" / ".leases.lock")
    link.symlink_to(elsewhere)
    with pytest.raises(CheckpointError, match="symbolic link"):
        lease_for(store, "a")
    assert not elsewhere.exists()


# -- temporary files of interrupted saves ---------------------------------------------------

KILLED_CHILD = """
import os, signal, sys
from agentkit.checkpoint import FileCheckPointStore
store = FileCheckPointStore(sys.argv[1])
os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # die in the middle of a save
store.set("a", b"x" * 1000)
"""


@posix_only
def test_temp_files_of_a_save_killed_midway_are_removed_when_a_store_opens(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "store"
    result = subprocess.run(
        [sys.executable, "-c", KILLED_CHILD, str(directory)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=False,
    )
    assert result.returncode == -signal.SIGKILL
    leftovers = [path for path in (directory / ".tmp").iterdir() if path.name.startswith(".tmp-")]
    assert len(leftovers) == 1
    # its writer is dead (its lock is free): no need to wait for it to grow old
    store = FileCheckPointStore(directory)
    assert not leftovers[0].exists()
    assert store.get("a") is None  # the killed save never became visible


def test_unlocked_temp_files_of_earlier_releases_are_removed_when_stale(tmp_path: Path) -> None:
    # earlier releases kept unlocked temporary files in the directory itself: only age tells
    store = FileCheckPointStore(tmp_path)
    legacy = tmp_path / ".tmp-abcdefgh"
    legacy.write_bytes(b"half a checkpoint")
    FileCheckPointStore(tmp_path)  # young: a save of an earlier release may still be running
    store.set("x", b"a write does not touch it either")
    assert legacy.exists()
    old = time.time() - 3600
    os.utime(legacy, (old, old))
    FileCheckPointStore(tmp_path)
    assert not legacy.exists()


# -- lease TTLs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda where, url: InMemoryCheckPointStore(lease_ttl=7),
        lambda where, url: FileCheckPointStore(where / "d", lease_ttl=7),
        lambda where, url: SQLiteCheckPointStore(where / "s.db", lease_ttl=7),
        lambda where, url: RedisCheckPointStore(url, prefix=uuid.uuid4().hex, lease_ttl=7),
    ],
    ids=["memory", "file", "sqlite", "redis"],
)
def test_the_lease_ttl_is_configured_on_the_store(
    make: Callable[[Path, str], Any], tmp_path: Path, redis_url: str  # noqa: F811
) -> None:
    store = make(tmp_path, redis_url)
    assert store.lease_ttl == 7
    with lease_for(store, "a") as lease:
        assert lease.ttl == 7
    with lease_for(store, "b", ttl=2) as lease:
        assert lease.ttl == 2
    if isinstance(store, (SQLiteCheckPointStore, RedisCheckPointStore)):
        store.close()


def test_a_lease_ttl_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="positive"):
        InMemoryCheckPointStore(lease_ttl=0)
    with pytest.raises(ValueError, match="positive"):
        FileCheckPointStore(tmp_path, lease_ttl=-1)


# -- the Runner ------------------------------------------------------------------------------


def test_the_runner_signs_by_default_and_binds_checkpoints_to_their_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentkit import ChatModelAgent, Runner, interrupt, tool, with_checkpoint_id
    from agentkit.models import ScriptedChatModel
    from agentkit.testing import call, calls_message

    monkeypatch.delenv("AGENTKIT_CHECKPOINT_KEY", raising=False)

    @tool
    def pay(amount: int) -> str:
        """Pay after approval."""
        return f"paid {amount}" if interrupt("approve?") else "declined"

    def runner(directory: Path) -> Runner:
        model = ScriptedChatModel([calls_message(call("pay", {"amount": 5}, id="p1")), "done"])
        agent = ChatModelAgent("Payer", "pays", model, tools=[pay])
        return Runner(agent, checkpoint_store=FileCheckPointStore(directory))

    original = runner(tmp_path / "tenant-a")
    list(original.query("pay", with_checkpoint_id("42")))
    store = original.checkpoint_store
    assert isinstance(store, FileCheckPointStore)
    data = store.get("42")
    assert data is not None and data[7:9] == b"\x02\x01"  # version 2, signed

    copy = runner(tmp_path / "tenant-b")
    assert isinstance(copy.checkpoint_store, FileCheckPointStore)
    copy.checkpoint_store.set("42", data)
    with pytest.raises(CheckpointError, match="in another store"):
        copy.resume("42")
    list(original.resume("42"))  # the original still loads (and interrupts again)
