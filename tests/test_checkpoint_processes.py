"""Stores shared by processes: data written by one is read by another; leases are exclusive."""

from __future__ import annotations

import os
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
    LeasingCheckPointStore,
    RedisCheckPointStore,
    SQLiteCheckPointStore,
)
from agentkit.testing import Clock, ManualClock
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

SYSTEM_CLOCK = Clock()

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 60.0  # failure guard only

# Every child script starts with this: it builds the store named by argv[1:4].
MAKE_STORE = """
import sys
kind, where, prefix = sys.argv[1:4]
args = sys.argv[4:]
if kind == "file":
    from agentkit.checkpoint import FileCheckPointStore
    store = FileCheckPointStore(where)
elif kind == "sqlite":
    from agentkit.checkpoint import SQLiteCheckPointStore
    store = SQLiteCheckPointStore(where)
else:
    from agentkit.checkpoint import RedisCheckPointStore
    store = RedisCheckPointStore(where, prefix=prefix)
"""


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def run_child(location: list[str], script: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", MAKE_STORE + script, *location, *args],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"child failed:\n{result.stderr}"
    return result.stdout.strip()


@pytest.fixture(params=["file", "sqlite", "redis"])
def shared(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[list[str], Callable[..., Any]]]:
    """(argv naming a store for child processes, a factory of the same store in this process)."""
    kind = request.param
    created: list[Any] = []
    if kind == "file":
        where = str(tmp_path / "checkpoints")
        yield [kind, where, ""], lambda clock=SYSTEM_CLOCK: FileCheckPointStore(where, clock=clock)
        return
    if kind == "sqlite":
        where = str(tmp_path / "checkpoints.db")
        location = [kind, where, ""]

        def make(clock: Clock = SYSTEM_CLOCK) -> Any:
            created.append(SQLiteCheckPointStore(where, clock=clock))
            return created[-1]

    else:
        url = request.getfixturevalue("redis_url")
        prefix = f"test-processes:{uuid.uuid4().hex}:"
        location = [kind, url, prefix]

        def make(clock: Clock = SYSTEM_CLOCK) -> Any:
            created.append(RedisCheckPointStore(url, prefix=prefix, clock=clock))
            return created[-1]

    yield location, make
    for store in created:
        store.close()


@pytest.mark.parametrize("key_from", ["environment", "key file"])
def test_a_checkpoint_written_by_one_process_is_read_by_another(
    shared: tuple[list[str], Callable[[], Any]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    key_from: str,
) -> None:
    location, make_store = shared
    if key_from == "environment":
        monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "shared secret of both processes")
    else:  # no set-up at all: both processes find the key file the first one created
        monkeypatch.delenv("AGENTKIT_CHECKPOINT_KEY", raising=False)
        monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY_FILE", str(tmp_path / "config" / "key"))
    write = """
from agentkit.checkpoint import PickleSerializer, namespace_of
from agentkit.schema import Message, Role
state = {"messages": [Message(role=Role.USER, content="pay 100 EUR")], "step": 3}
data = PickleSerializer().dumps(state, checkpoint_id="run/1", namespace=namespace_of(store))
store.set("run/1", data)
"""
    read = """
from agentkit.checkpoint import PickleSerializer, namespace_of
data = store.get("run/1")
state = PickleSerializer().loads(data, checkpoint_id="run/1", namespace=namespace_of(store))
print(state["messages"][0].content, state["messages"][0].role.value, state["step"])
"""
    run_child(location, write)
    assert run_child(location, read) == "pay 100 EUR user 3"
    assert make_store().get("run/1") is not None


def test_a_lease_held_by_one_process_refuses_every_other(
    shared: tuple[list[str], Callable[[], Any]],
) -> None:
    location, make_store = shared
    acquire = "print(store.acquire_lease('run/1', args[0], float(args[1])))"
    take = """
from agentkit.checkpoint import lease_for
from agentkit.errors import CheckpointBusyError
print(store.acquire_lease("run/1", "second", 60.0))
try:
    lease = lease_for(store, "run/1")
except CheckpointBusyError as error:
    print("busy:", error)
else:
    print("won")
    lease.release()
"""
    # The first process takes the lease and exits without releasing it, like a crash.
    assert run_child(location, acquire, "first", "60") == "True"
    refused, busy = run_child(location, take).splitlines()
    assert refused == "False"
    assert busy.startswith("busy: checkpoint 'run/1' is being resumed by another run")
    store: LeasingCheckPointStore = make_store()
    assert store.acquire_lease("run/1", "parent", 60) is False
    store.release_lease("run/1", "first")
    store.release_lease("run/1", "second")
    assert run_child(location, take).splitlines() == ["True", "busy: " + busy[6:]]
    store.release_lease("run/1", "second")
    assert store.acquire_lease("run/1", "parent", 60) is True


def test_the_lease_of_a_crashed_process_expires(
    shared: tuple[list[str], Callable[..., Any]],
) -> None:
    location, make_store = shared
    acquire = "print(store.acquire_lease('run/1', args[0], float(args[1])))"
    assert run_child(location, acquire, "crashed", "5") == "True"  # the child exits holding it
    store: LeasingCheckPointStore = make_store()
    assert store.acquire_lease("run/1", "parent", 60) is False
    # The parent's clock moves past the crashed holder's expiry: no waiting for it.
    late = make_store(clock := ManualClock())
    clock.advance(6)
    assert late.acquire_lease("run/1", "probe", 60) is True
    late.release_lease("run/1", "probe")
    assert run_child(location, acquire, "successor", "60") == "True"
    assert store.acquire_lease("run/1", "parent", 60) is False


def test_racing_processes_get_the_lease_exactly_once(
    shared: tuple[list[str], Callable[[], Any]], tmp_path: Path
) -> None:
    location, _ = shared
    signals = tmp_path / "signals"
    signals.mkdir()
    # Each child announces it is ready, then waits for "go" so all acquire at the same moment.
    race = """
import os, time
signals, name = args
open(os.path.join(signals, "ready-" + name), "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(signals, "go")):
    if time.monotonic() > deadline:
        raise SystemExit("never got the start signal")
    time.sleep(0.001)
print(store.acquire_lease("contested", name, 60.0))
"""
    contenders = [f"p{index}" for index in range(6)]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", MAKE_STORE + race, *location, str(signals), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for name in contenders
    ]
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while len(list(signals.glob("ready-*"))) < len(contenders):
            assert time.monotonic() < deadline, "the child processes did not start"
            assert all(p.poll() is None for p in processes), "a child process died early"
            time.sleep(0.01)
        (signals / "go").touch()
        outputs = [process.communicate(timeout=120) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    for process, (_, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, stderr
    results = [stdout.strip() for stdout, _ in outputs]
    assert sorted(results) == ["False"] * (len(contenders) - 1) + ["True"]
