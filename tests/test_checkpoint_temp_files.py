"""Temporary files of saves killed with SIGKILL are gone after the next save to the store.

Real child processes save into a :class:`FileCheckPointStore` and are killed with SIGKILL in
the middle of the save (between writing the temporary file and moving it into place); the
next save in another process removes what they left, and never the temporary file of a
save that is still running in a live process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkit.checkpoint import FileCheckPointStore
from agentkit.errors import CheckpointError

ROOT = Path(__file__).resolve().parent.parent

posix_only = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and flock are POSIX")

# Saves ``size`` bytes under ``checkpoint_id``; says "mid-save" once the data is written and
# waits for a line on stdin before going on (the parent kills it there, or lets it finish).
SAVER = """
import os, sys
from agentkit.checkpoint import FileCheckPointStore
from agentkit.errors import CheckpointError
directory, checkpoint_id, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = FileCheckPointStore(directory)
real_fsync = os.fsync
stalled = []
def stall(fd):
    if not stalled:  # the first fsync is the temporary file's, before it is moved into place
        stalled.append(fd)
        print("mid-save", flush=True)
        sys.stdin.readline()
    real_fsync(fd)
os.fsync = stall
store.set(checkpoint_id, bytes([size % 251]) * size)
print("saved", flush=True)
"""


def temp_files(directory: Path) -> list[Path]:
    """Every temporary file of a save, wherever the store keeps them."""
    return [path for path in directory.rglob(".tmp-*") if path.is_file()]


@pytest.fixture
def savers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(60)


def start_saver(
    savers: list[subprocess.Popen[str]], directory: Path, checkpoint_id: str, size: int
) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", SAVER, str(directory), checkpoint_id, str(size)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    savers.append(process)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "mid-save"
    return process


@posix_only
def test_temp_files_of_killed_saves_are_removed_by_the_next_save(
    tmp_path: Path, savers: list[subprocess.Popen[str]]
) -> None:
    directory = tmp_path / "store"
    store = FileCheckPointStore(directory)
    kills = 8
    # all in the middle of their saves at once, then all killed: nobody sweeps in between
    victims = [start_saver(savers, directory, f"run-{n}", 1 << 20) for n in range(kills)]
    for victim in victims:
        os.kill(victim.pid, signal.SIGKILL)
    for victim in victims:
        assert victim.wait(60) == -signal.SIGKILL
    left = temp_files(directory)
    assert len(left) == kills  # each kill left its temporary file (1 MiB each)
    assert sum(path.stat().st_size for path in left) == kills << 20
    store.set("next", b"the next save")  # a store opened before the kills: no reopening
    assert temp_files(directory) == []
    assert store.get("next") == b"the next save"
    assert all(store.get(f"run-{number}") is None for number in range(kills))


@posix_only
def test_the_temp_file_of_a_save_running_in_a_live_process_is_kept(
    tmp_path: Path, savers: list[subprocess.Popen[str]]
) -> None:
    directory = tmp_path / "store"
    store = FileCheckPointStore(directory)
    alive = start_saver(savers, directory, "alive", 5000)  # stopped in the middle of its save
    [alive_temp] = temp_files(directory)
    dead = start_saver(savers, directory, "dead", 1000)
    os.kill(dead.pid, signal.SIGKILL)
    dead.wait(60)
    assert len(temp_files(directory)) == 2
    store.set("other", b"a save meanwhile")
    FileCheckPointStore(directory)  # opening the store sweeps as well
    assert temp_files(directory) == [alive_temp]
    assert alive.stdin is not None and alive.stdout is not None
    alive.stdin.write("\n")
    alive.stdin.flush()
    assert alive.stdout.readline().strip() == "saved"
    assert alive.wait(60) == 0
    assert store.get("alive") == bytes([5000 % 251]) * 5000
    assert temp_files(directory) == []


def test_saves_racing_with_each_others_sweeps_all_succeed(tmp_path: Path) -> None:
    # every save sweeps; a sweep must never take the temporary file of a save in progress
    store = FileCheckPointStore(tmp_path / "store")
    writers, saves = 6, 60
    barrier = threading.Barrier(writers, timeout=60)
    errors: list[BaseException] = []

    def write(number: int) -> None:
        try:
            barrier.wait()
            for round_ in range(saves):
                store.set(f"w{number}", f"{number}:{round_}".encode())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=write, args=(number,)) for number in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert [store.get(f"w{number}") for number in range(writers)] == [
        f"{number}:{saves - 1}".encode() for number in range(writers)
    ]
    assert temp_files(tmp_path / "store") == []


@posix_only
def test_a_symlink_planted_as_the_temp_directory_is_not_followed(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path / "store")
    store.set("a", b"first")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "store" / ".tmp").rmdir()
    (tmp_path / "store" / ".tmp").symlink_to(elsewhere)
    with pytest.raises(CheckpointError, match="cannot write checkpoint 'a'.*symbolic link"):
        store.set("a", b"second")
    assert list(elsewhere.iterdir()) == []
    assert store.get("a") == b"first"
    FileCheckPointStore(tmp_path / "store")  # opening the store is not refused for it
