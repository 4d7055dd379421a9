"""What the Celery tests share: the environment, the Celery app, worker processes, readers.

Workers are started by the tests (``celery -A celery_app worker --pool=threads``, each on its
own queue so a test decides which worker runs what); "web processes" are subprocesses running
``celery_client.py``. Barriers are Redis lists the workers and tools push to, and status
entries in the run's own stream; timeouts are failure guards only.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

redis = pytest.importorskip("redis")

from agentkit.integrations.runs import RunEvent  # noqa: E402

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
GUARD = 60  # seconds: a failure guard for every wait, never a pacing
TEST_KEY = "celery-tests-checkpoint-key-0123456789abcdef"
OWNER = "tester"  # the owner of the tests' runs (celery_client.py calls as this owner too)


@pytest.fixture(scope="module")
def env(redis_url: str) -> Iterator[dict[str, str]]:
    """The environment of every process: the test's Redis, a fixed checkpoint key."""
    values = {
        "REDIS_URL": redis_url,
        "AGENTKIT_CHECKPOINT_KEY": TEST_KEY,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
    }
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield {**os.environ, **values}
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def app_module(env: dict[str, str]) -> Any:
    """``celery_app`` imported in the test process (it only submits and reads here).

    Each test module that imports the ``redis_url`` fixture gets its own redis-server, so a
    module imported for an earlier test module's server is loaded again for this one.
    """
    module = importlib.import_module("celery_app")
    if env["REDIS_URL"] != module.REDIS_URL:
        module = importlib.reload(module)
    return module


@pytest.fixture(scope="module")
def client(env: dict[str, str]) -> Any:
    # Blocking waits (BLPOP up to GUARD) need a socket timeout longer than the wait: redis-py
    # 8 reads with a 5 s timeout by default, which a worker starting under load exceeds.
    return redis.Redis.from_url(env["REDIS_URL"], socket_timeout=GUARD + 10)


class Worker(NamedTuple):
    """A worker process the test started, and the file its output goes to."""

    process: subprocess.Popen[bytes]
    log: Path

    def log_has(self, text: str) -> bool:
        """``True`` once the worker wrote ``text`` to its log (waits up to :data:`GUARD`)."""
        deadline = time.monotonic() + GUARD
        while text not in self.log.read_text(errors="replace"):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


@contextlib.contextmanager
def worker(
    env: dict[str, str],
    client: Any,
    name: str,
    queue: str,
    log_dir: Path,
    *,
    app: str = "celery_app",
) -> Iterator[Worker]:
    """A Celery worker process of ``app`` consuming ``queue``; started, ready, then stopped.

    A worker the test killed already is simply reaped.
    """
    unique = f"{name}-{uuid.uuid4().hex[:6]}"
    log_path = log_dir / f"worker-{unique}.log"
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        app,
        "worker",
        "--pool=threads",
        "--concurrency=4",
        "-Q",
        queue,
        "-n",
        f"{unique}@test",
        "--without-gossip",
        "--without-mingle",
        "--loglevel=INFO",
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=TESTS,
            env={**env, "TEST_WORKER_NAME": unique},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        if client.blpop([f"test:ready:{unique}"], timeout=GUARD) is None:
            pytest.fail(f"worker {unique} did not start:\n{log_path.read_text()[-3000:]}")
        yield Worker(process, log_path)
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout=GUARD)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def workers(
    env: dict[str, str], client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Worker]]:
    """Two workers: ``a`` consumes queue ``a``, ``b`` consumes queue ``b``."""
    log_dir = tmp_path_factory.mktemp("celery")
    with (
        worker(env, client, "a", "a", log_dir) as first,
        worker(env, client, "b", "b", log_dir) as second,
    ):
        yield {"a": first, "b": second}


def web(env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    """Run ``celery_client.py`` in a new process (another web server); its JSON lines."""
    done = subprocess.run(
        [sys.executable, str(TESTS / "celery_client.py"), *args],
        cwd=TESTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def read_all(queue: Any, run_id: str, after: str | None = None) -> list[RunEvent]:
    with queue.events(run_id, after, owner=OWNER) as stream:
        return list(stream)


def read_until(queue: Any, run_id: str, status: str) -> list[RunEvent]:
    """Read the run's stream until a status entry with ``status`` (or its end)."""
    seen: list[RunEvent] = []
    with queue.events(run_id, owner=OWNER, idle_timeout=GUARD) as stream:
        for entry in stream:
            seen.append(entry)
            if entry.kind == "status" and entry.data["status"] == status:
                return seen
    pytest.fail(f"no {status!r} status in {[(e.kind, e.data) for e in seen]}")


def workers_of(entries: list[Any]) -> list[str]:
    return [
        (e.data if isinstance(e, RunEvent) else e["data"])["worker"].split("@")[0].rsplit("-", 1)[0]
        for e in entries
        if (e.kind if isinstance(e, RunEvent) else e["kind"]) == "status"
        and (e.data if isinstance(e, RunEvent) else e["data"])["status"] == "started"
    ]


def read_until_after(queue: Any, run_id: str, after: str, status: str) -> list[RunEvent]:
    seen: list[RunEvent] = []
    with queue.events(run_id, after, owner=OWNER, idle_timeout=GUARD) as stream:
        for entry in stream:
            seen.append(entry)
            if entry.kind == "status" and entry.data["status"] == status:
                return seen
    pytest.fail(f"no {status!r} status in {[(e.kind, e.data) for e in seen]}")


# --- a Redis restart ----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RestartableRedis:
    """A redis-server with an append-only file, stopped and started again on the same port."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.directory), "--appendonly", "yes", "--appendfsync", "always",
             "--save", ""],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        probe = redis.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + GUARD
        while True:
            try:
                if probe.ping():
                    return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()  # a clean shutdown: the append-only file is complete
            self.process.wait(timeout=GUARD)
            self.process = None


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[RestartableRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = RestartableRedis(Path(tempfile.mkdtemp(dir=tmp_path)))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[dict[str, str]]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield {**os.environ}
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
