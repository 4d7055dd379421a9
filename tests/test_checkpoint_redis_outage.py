"""RedisCheckPointStore(outage_wait=...): operations wait out a Redis restart.

A real redis-server is stopped; an append waits (with growing pauses) and goes through once
the server is back on the same port, started by the test when the store says it is waiting.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentkit import CheckpointError

redis = pytest.importorskip("redis")

from agentkit.checkpoint import RedisCheckPointStore  # noqa: E402

GUARD = 30.0  # failure guard only


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """A redis-server that can be started again on the same port."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.directory), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        probe = redis.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + GUARD
        while True:
            try:
                if probe.ping():
                    return
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=GUARD)
            self.process = None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    running = Server(tmp_path)
    running.start()
    try:
        yield running
    finally:
        running.stop()


class _Waiting(logging.Handler):
    """Sets ``seen`` when the store logs that it waits for Redis."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "Redis is away" in record.getMessage():
            self.seen.set()


def test_an_append_waits_for_redis_to_come_back(server: Server) -> None:
    store = RedisCheckPointStore(f"redis://127.0.0.1:{server.port}/0", outage_wait=GUARD)
    store.append_step("run", b"first")
    server.stop()
    waiting = _Waiting()
    logger = logging.getLogger("agentkit")
    logger.addHandler(waiting)

    def restart() -> None:
        assert waiting.seen.wait(GUARD)
        server.start()

    restarter = threading.Thread(target=restart)
    restarter.start()
    try:
        store.append_step("run", b"second")  # waits until the server is back
    finally:
        restarter.join(GUARD)
        logger.removeHandler(waiting)
        store.close()
    assert waiting.seen.is_set()
    # The server came back empty (no persistence): only what was written since is there.
    with RedisCheckPointStore(f"redis://127.0.0.1:{server.port}/0") as fresh:
        assert fresh.read_steps("run") == [b"second"]


def test_without_outage_wait_a_lost_redis_fails_at_once(server: Server) -> None:
    store = RedisCheckPointStore(f"redis://127.0.0.1:{server.port}/0")
    server.stop()
    started = time.monotonic()
    with pytest.raises(CheckpointError, match="cannot append a step of checkpoint 'run' in Redis"):
        store.append_step("run", b"x")
    assert time.monotonic() - started < GUARD
    store.close()


@pytest.mark.parametrize("wait", [-1, float("inf"), float("nan"), "5"])
def test_outage_wait_must_be_seconds(wait: object) -> None:
    with pytest.raises(ValueError, match="outage_wait must be a number of seconds >= 0"):
        RedisCheckPointStore("redis://127.0.0.1:1/0", outage_wait=wait)  # type: ignore[arg-type]
