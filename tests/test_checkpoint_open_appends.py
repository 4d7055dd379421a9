"""FileCheckPointStore keeps a durable run's step file open between appends (POSIX).

What must hold: a record never goes to a file that was removed or replaced meanwhile (by
this store, another store object or another process), open files are bounded and closed when
their run's records are removed, threads and forked children are safe.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agentkit.checkpoint import FileCheckPointStore
from agentkit.checkpoint._appends import MAX_OPEN

pytestmark = pytest.mark.skipif(os.name != "posix", reason="files are kept open on POSIX only")


def _open_files(directory: Path) -> list[str]:
    """The files under ``directory`` this process has open (from /proc/self/fd)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            found.append(target)
    return found


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd")
    return tmp_path / "store"


def test_a_step_file_stays_open_until_its_records_are_removed(directory: Path) -> None:
    store = FileCheckPointStore(directory)
    store.append_step("run", b"one")
    store.append_step("run", b"two")
    assert _open_files(directory) == [str(store.steps_path_for("run"))]
    store.set_base("run", b"base")  # a compaction or the tombstone: the records go
    assert _open_files(directory) == []
    store.append_step("run", b"three")
    assert store.read_steps("run") == [b"three"]
    store.delete("run")
    assert _open_files(directory) == []
    store.append_step("other", b"x")
    store.close()
    assert _open_files(directory) == []
    store.append_step("other", b"y")  # usable after close()
    assert store.read_steps("other") == [b"x", b"y"]


def test_records_go_to_the_new_file_after_another_store_replaced_it(directory: Path) -> None:
    writer, other = FileCheckPointStore(directory), FileCheckPointStore(directory)
    writer.append_step("run", b"old")
    other.delete_steps("run")  # as another process's compaction or prune would
    writer.append_step("run", b"new")
    assert other.read_steps("run") == [b"new"]
    other.set_base("run", b"base")
    writer.append_step("run", b"after base")
    assert other.read_steps("run") == [b"after base"]


def test_at_most_max_open_files_are_kept_open(directory: Path) -> None:
    store = FileCheckPointStore(directory)
    for number in range(MAX_OPEN + 10):
        store.append_step(f"run-{number}", b"record")
    assert len(_open_files(directory)) == MAX_OPEN
    for number in range(MAX_OPEN + 10):  # evicted ones are opened again
        store.append_step(f"run-{number}", b"again")
        assert store.read_steps(f"run-{number}") == [b"record", b"again"]
    del store
    import gc

    gc.collect()
    assert _open_files(directory) == []  # a store garbage-collected closes its files


def test_threads_append_while_files_are_closed_under_them(directory: Path) -> None:
    store = FileCheckPointStore(directory)
    stop = threading.Event()
    errors: list[BaseException] = []

    def closer() -> None:
        while not stop.is_set():
            store.close()

    def writer(run: str) -> None:
        try:
            for number in range(300):
                store.append_step(run, f"{run}:{number}".encode())
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(f"run-{n}",)) for n in range(4)]
    closing = threading.Thread(target=closer)
    closing.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    stop.set()
    closing.join(timeout=60)
    assert not errors
    for n in range(4):
        assert store.read_steps(f"run-{n}") == [f"run-{n}:{i}".encode() for i in range(300)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_files(directory: Path) -> None:
    store = FileCheckPointStore(directory)
    store.append_step("parent", b"p1")
    pid = os.fork()
    if pid == 0:  # the child: append to the parent's run and a new one, then exit
        try:
            store.append_step("child", b"c1")
            store.append_step("parent", b"from child")
            store.delete_steps("child")
            store.append_step("child", b"c2")
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    store.append_step("parent", b"p2")
    assert store.read_steps("parent") == [b"p1", b"from child", b"p2"]
    assert store.read_steps("child") == [b"c2"]


def test_a_file_system_that_counts_no_links_does_not_loop(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Some network and FUSE file systems report st_nlink 0 for a file that is open and named;
    # no such file system is mounted here, so fstat says so.
    real_fstat = os.fstat

    class NoLinks:
        def __init__(self, fd: int) -> None:
            self._info = real_fstat(fd)
            self.st_nlink = 0

        def __getattr__(self, name: str) -> object:
            return getattr(self._info, name)

    monkeypatch.setattr(os, "fstat", NoLinks)
    store = FileCheckPointStore(directory)
    store.append_step("run", b"one")
    store.append_step("run", b"two")
    monkeypatch.undo()
    assert store.read_steps("run") == [b"one", b"two"]
    assert _open_files(directory) == []
