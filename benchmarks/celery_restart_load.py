"""The Celery load with a Redis restart (issue 49): no worker dies, no run stays queued, no tool
runs twice.

    python -m benchmarks.celery_restart_load [--runs 2000] [--restart-at 0.4] [--outage 3]

Starts a redis-server with an append-only file (``appendfsync always``), two Celery workers
(``--pool=threads --concurrency=4``, the tests' app ``tests/celery_app.py``, no supervisor:
a worker that dies stays dead), and submits ``--runs`` runs of the ``counter`` agent (one tool
call each; each run's tool counts its calls in Redis under the run's own tag, through a
client that waits out the restart), each with an
idempotency key, retried by the client while Redis is away, as a web client does. When
``--restart-at`` of the runs are submitted, Redis is stopped, kept away ``--outage`` seconds
and started again. Then every run is awaited to its end (a guard of ``--guard`` seconds).
The broker's ``visibility_timeout`` is 30 s (the scaling-out guide's advice: several times
``lease_ttl``): a task message a worker had taken but not started when Redis went away is
delivered again that much later.

With ``--resubmit-after S``, the client submits a run still queued S seconds after the last
submission again with its idempotency key (a client that polls and retries), which sends its
task again: kombu's Redis transport can lose a task message a worker popped from the queue
just as Redis stopped (before it noted it as unacknowledged); the run's record then stays
queued until such a retry.

Prints the figures (JSON): workers dead, runs not ended ("queued for ever"), runs per status,
tools run twice, tools never run for a completed run, the wall time; exits 1 unless the
first three and the twice count are 0. The same code runs in ``tests/test_celery_restart_load.py``
(marker ``stress``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
KEY = "celery-tests-checkpoint-key-0123456789abcdef"
OWNER = "load"
STARTUP = 60.0  # seconds: a failure guard for a process to start
# The workers' lease: longer than the outage, as a production lease (30 s by default) is; a
# lease that expires while Redis is away is lost for good (another worker may hold the run).
LEASE_TTL = 10.0
# Several times the lease, as the scaling-out guide advises: a task message a worker had
# taken, but not started, when Redis went away is delivered again this much later.
VISIBILITY_TIMEOUT = 30


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _Redis:
    """A redis-server with an append-only file, stopped and started on the same port."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import redis

        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not installed")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.directory,
             "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        probe = redis.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + STARTUP
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
            self.process.terminate()
            self.process.wait(timeout=STARTUP)
            self.process = None


@contextmanager
def _workers(
    env: dict[str, str], count: int, logs: Path
) -> Iterator[list[subprocess.Popen[bytes]]]:
    import redis

    client = redis.Redis.from_url(env["REDIS_URL"], socket_timeout=STARTUP + 5)
    processes = []
    try:
        for number in range(count):
            name = f"load{number}-{uuid.uuid4().hex[:6]}"
            with open(logs / f"{name}.log", "wb") as log:
                processes.append(subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "celery_app", "worker",
                     "--pool=threads", "--concurrency=4", "-Q", "load", "-n", f"{name}@load",
                     "--without-gossip", "--without-mingle", "--loglevel=WARNING"],
                    cwd=TESTS, env={**env, "TEST_WORKER_NAME": name},
                    stdout=log, stderr=subprocess.STDOUT,
                ))
            if client.blpop([f"test:ready:{name}"], timeout=STARTUP) is None:
                raise SystemExit(f"worker {name} did not start (see {logs})")
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=STARTUP)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _submit(queue: Any, city: str) -> str:
    """Submit one run as a web client does: retried with its idempotency key until accepted."""
    deadline = time.monotonic() + STARTUP
    while True:
        try:
            return str(queue.submit("counter", city, owner=OWNER, queue="load",
                                    idempotency_key=city))
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def run_load(
    runs: int = 2000,
    *,
    restart_at: float = 0.4,
    outage: float = 3.0,
    workers: int = 2,
    guard: float = 900.0,
    resubmit_after: float | None = None,
) -> dict[str, Any]:
    """Run the load; the figures as a dict (see the module's docstring)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentkit-restart-load-") as directory:
        server = _Redis(directory)
        server.start()
        env = {**os.environ, "REDIS_URL": server.url, "RUNS_REDIS_URL": server.url,
               "AGENTKIT_CHECKPOINT_KEY": KEY, "TEST_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
               "TEST_LEASE_TTL": str(LEASE_TTL),
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
        saved = {name: os.environ.get(name) for name in ("REDIS_URL", "RUNS_REDIS_URL",
                                                          "AGENTKIT_CHECKPOINT_KEY",
                                                          "TEST_LEASE_TTL")}
        os.environ.update({name: env[name] for name in saved})
        sys.path[:0] = [str(ROOT), str(TESTS)]
        try:
            import importlib

            module = importlib.import_module("celery_app")
            module = importlib.reload(module)  # this Redis
            queue = module.queue
            logs = Path(directory) / "logs"
            logs.mkdir()
            with _workers(env, workers, logs) as processes:
                cities = [f"load-{uuid.uuid4().hex[:10]}" for _ in range(runs)]
                run_ids: list[str] = []
                restart_done = threading.Event()

                def restart() -> None:
                    server.stop()
                    time.sleep(outage)  # Redis is away this long (the point of the load)
                    server.start()
                    restart_done.set()

                restarter = threading.Thread(target=restart)
                for number, city in enumerate(cities):
                    if number == int(runs * restart_at):
                        restarter.start()
                    run_ids.append(_submit(queue, city))
                if not restarter.is_alive() and not restart_done.is_set():
                    restarter.start()
                restarter.join()
                resubmitted: list[str] = []
                statuses = _wait_for_ends(queue, run_ids, guard,
                                          dict(zip(run_ids, cities, strict=True)),
                                          resubmit_after, resubmitted)
                failures = Counter(
                    _error_of(queue, run_id)
                    for run_id, status in statuses.items()
                    if status == "failed"
                )
                dead = sum(1 for process in processes if process.poll() is not None)
                stuck = [run_id for run_id, status in statuses.items()
                         if status in ("queued", "running")]
                where = {run_id: _where_is(queue.store.client, run_id) for run_id in stuck}
                client = queue.store.client
                counts = [int(client.get(f"test:ran:count:{city}") or 0) for city in cities]
                unrecoverable = sum(
                    log.read_text(errors="replace").count("Unrecoverable error")
                    for log in logs.glob("*.log")
                )
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            server.stop()
    by_status = Counter(statuses.values())
    return {
        "runs": runs,
        "workers": workers,
        "restart_at": restart_at,
        "outage_s": outage,
        "workers_dead": dead,
        "unrecoverable_errors": unrecoverable,
        "runs_not_ended": sum(by_status[s] for s in ("queued", "running")),
        "statuses": dict(by_status),
        "resubmitted": len(resubmitted),
        "failures": dict(failures),
        "not_ended": where,
        "tools_run_twice": sum(1 for count in counts if count > 1),
        "completed_without_tool": sum(
            1 for run_id, count in zip(run_ids, counts, strict=True)
            if count == 0 and statuses[run_id] == "completed"
        ),
        "wall_s": round(time.monotonic() - started, 1),
    }


def _where_is(client: Any, run_id: str) -> str:
    """Where the broker holds a task message of ``run_id``: the queue, the unacknowledged
    index (delivered to a worker, not acknowledged), or nowhere (lost)."""
    import base64

    def holds(raw: bytes) -> bool:
        try:
            body = json.loads(raw)["body"]
            return run_id in base64.b64decode(body).decode("utf-8", "replace")
        except (ValueError, KeyError, TypeError):
            return run_id.encode() in raw

    found = []
    if any(holds(item) for item in client.lrange("load", 0, -1)):
        found.append("queue")
    if any(holds(item) for item in client.hvals("unacked")):
        found.append("unacked")
    return ", ".join(found) or "nowhere"


def _error_of(queue: Any, run_id: str) -> str:
    """A failed run's error, as ``type: message`` (cut to 160 characters)."""
    error = (queue.status(run_id, owner=OWNER).get("summary") or {}).get("error") or {}
    return f"{error.get('type')}: {error.get('message')}"[:160]


def _wait_for_ends(
    queue: Any,
    run_ids: list[str],
    guard: float,
    cities: dict[str, str],
    resubmit_after: float | None,
    resubmitted: list[str],
) -> dict[str, str]:
    """Each run's status once none is queued or running (or when ``guard`` seconds passed).

    With ``resubmit_after``, a run still queued that long after the last submission is
    submitted again with its idempotency key, as a client that polls and retries does (the
    queue then sends its task again; see ``AgentQueue.submit``); ``resubmitted`` gets its id.
    """
    start = time.monotonic()
    deadline = start + guard
    statuses: dict[str, str] = {}
    pending = list(run_ids)
    while True:
        if resubmit_after is not None and time.monotonic() - start > resubmit_after:
            for run_id in pending:
                if statuses.get(run_id) == "queued" and run_id not in resubmitted:
                    resubmitted.append(run_id)
                    _submit(queue, cities[run_id])
        still = []
        for run_id in pending:
            try:
                status = queue.status(run_id, owner=OWNER)["status"]
            except Exception:  # Redis answering slowly: ask again
                status = "queued"
            statuses[run_id] = status
            if status in ("queued", "running"):
                still.append(run_id)
        pending = still
        if not pending or time.monotonic() > deadline:
            return statuses
        time.sleep(1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--restart-at", type=float, default=0.4)
    parser.add_argument("--outage", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--guard", type=float, default=900.0)
    parser.add_argument("--resubmit-after", type=float, default=None)
    args = parser.parse_args(argv)
    figures = run_load(args.runs, restart_at=args.restart_at, outage=args.outage,
                       workers=args.workers, guard=args.guard,
                       resubmit_after=args.resubmit_after)
    print(json.dumps(figures, indent=2))
    ok = not (figures["workers_dead"] or figures["runs_not_ended"] or figures["tools_run_twice"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
