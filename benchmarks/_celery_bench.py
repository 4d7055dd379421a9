"""``celery-throughput``: runs through ``AgentQueue`` on real Celery workers and redis-server.

Starts a throwaway ``redis-server`` and 2, then 4, Celery worker processes
(``--pool=threads --concurrency=4``, app :mod:`benchmarks._celery_app`), and times, interleaved
in rounds, agentkit's :class:`~agentkit.integrations.celery.AgentQueue` against a plain Celery
task that runs the raw httpx loop and XADDs the same entries:

- throughput: submit a batch of short runs (1 tool round, 10 ms model latency) and read every
  run's entries to its ``end``, as a web process does; the wall of the batch (and runs/s);
  also for a queue of ``durability="stop"`` (an information row: the difference is what the
  durable steps cost);
- latency: one run at a time on idle workers, from ``submit`` to the first ``agent`` entry
  (the first model reply) read by this process.

Each side's first run is checked (its entries, its answer, the model calls the loopback server
counted) before anything is timed, and every batch is checked after. Refuses to run (raises
:class:`ScenarioUnavailable`) without ``redis-server``, celery or redis-py.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks._inproc import Settings, interleave
from benchmarks._procs import ROOT, child_env
from benchmarks._report import Budget, Row, ScenarioUnavailable
from benchmarks._server import Policy, base_url, request_count

__all__ = ["CELERY_SCENARIOS", "celery_throughput", "celery_unavailable"]

GUARD = 120.0  # seconds: a failure guard for every wait, never a pacing
OWNER = "bench"
RUNS = 200
QUICK_RUNS = 20
STEPS = 1
LATENCY_MS = 10
EXPECTED_ANSWER = f"done after {STEPS} tool results"
EXPECTED_AGENT_ENTRIES = 2 * STEPS + 1  # each model reply and each tool result


def celery_unavailable() -> str | None:
    """Say why ``celery-throughput`` cannot run here, or return ``None`` when it can."""
    missing = [name for name in ("celery", "redis") if importlib.util.find_spec(name) is None]
    if missing:
        return (
            f"celery-throughput needs {' and '.join(missing)} (pip install 'agentkit[celery]'); "
            "it was not run"
        )
    if shutil.which("redis-server") is None:
        return (
            "celery-throughput needs the redis-server binary on PATH (apt-get install "
            "redis-server); it was not run"
        )
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """Start a throwaway redis-server (no persistence); yield its URL; stop it."""
    import redis

    executable = shutil.which("redis-server")
    if executable is None:
        raise ScenarioUnavailable("redis-server is not on PATH")
    with tempfile.TemporaryDirectory(prefix="agentkit-bench-redis-") as directory:
        port = _free_port()
        command = [executable, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory]
        command += ["--save", "", "--appendonly", "no"]
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        url = f"redis://127.0.0.1:{port}/0"
        try:
            client = redis.Redis.from_url(url)
            deadline = time.monotonic() + GUARD
            while True:
                try:
                    client.ping()
                    break
                except redis.ConnectionError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise ScenarioUnavailable(
                            f"redis-server did not start on port {port}"
                        ) from None
                    time.sleep(0.02)
            client.close()
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def workers(
    count: int, env: dict[str, str], client: Any, log_dir: Path
) -> Iterator[list[int]]:
    """Start ``count`` Celery worker processes (threads pool, 4 threads); yield their pids;
    stop them on exit."""
    started: list[tuple[subprocess.Popen[bytes], Path]] = []
    try:
        for index in range(count):
            name = f"bench{index}-{uuid.uuid4().hex[:6]}"
            log_path = log_dir / f"worker-{name}.log"
            command = [sys.executable, "-m", "celery", "-A", "benchmarks._celery_app", "worker"]
            command += ["--pool=threads", "--concurrency=4", "-n", f"{name}@bench"]
            command += ["--without-gossip", "--without-mingle", "--loglevel=WARNING"]
            with open(log_path, "wb") as log:
                process = subprocess.Popen(
                    command,
                    cwd=ROOT,
                    env={**env, "BENCH_WORKER_NAME": name},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            started.append((process, log_path))
            if client.blpop([f"bench:ready:{name}"], timeout=GUARD) is None:
                raise RuntimeError(
                    f"Celery worker {name} did not start:\n{log_path.read_text()[-3000:]}"
                )
        yield [process.pid for process, _ in started]
    finally:
        for process, _ in started:
            if process.poll() is None:
                process.terminate()
        for process, _ in started:
            try:
                process.wait(timeout=GUARD)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _raw_entries(client: Any, stream: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Read a baseline run's stream to its ``end`` entry, blocking (as the run log reads)."""
    last = "0-0"
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        reply = client.xread({stream: last}, count=100, block=1000)
        for _name, items in reply or []:
            for entry_id, fields in items:
                last = entry_id
                kind = fields[b"kind"].decode()
                yield kind, json.loads(fields[b"data"])
                if kind == "end":
                    return
    raise TimeoutError(f"{stream} got no end entry within {GUARD:.0f} s")


def _check(side: str, entries: list[tuple[str, dict[str, Any]]]) -> None:
    kinds = [kind for kind, _ in entries]
    agents = kinds.count("agent")
    end = entries[-1][1] if entries and kinds[-1] == "end" else {}
    if agents != EXPECTED_AGENT_ENTRIES or end.get("answer") != EXPECTED_ANSWER:
        raise RuntimeError(
            f"celery-throughput: a {side} run wrote entries {kinds} ending {end!r}; expected "
            f"{EXPECTED_AGENT_ENTRIES} agent entries and the answer {EXPECTED_ANSWER!r}"
        )


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes ``pids`` used so far (``/proc``, Linux)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


class _Sides:
    """Submit and read one run (or a batch) on each side."""

    def __init__(self, tasks: ModuleType, client: Any, port: int) -> None:
        self.tasks = tasks
        self.client = client
        self.port = port
        self.worker_pids: list[int] = []
        self.worker_cpu: dict[str, list[float]] = {}  # side -> worker CPU ms per run, per batch

    def _queue(self, side: str) -> Any:
        return self.tasks.queue_stop if side == "agentkit-stop" else self.tasks.queue

    def submit(self, side: str) -> str:
        if side != "raw":
            run_id: str = self._queue(side).submit(self.tasks.AGENT, "go", owner=OWNER)
            return run_id
        run_id = uuid.uuid4().hex
        self.tasks.raw_run.apply_async((run_id, "go"))
        return run_id

    def entries(self, side: str, run_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
        if side != "raw":
            with self._queue(side).events(run_id, owner=OWNER, idle_timeout=GUARD) as stream:
                for entry in stream:
                    yield entry.kind, entry.data
        else:
            yield from _raw_entries(self.client, self.tasks.raw_stream(run_id))

    def batch(self, side: str, runs: int) -> float:
        """Submit ``runs`` runs, read each to its end; return the wall; check them all."""
        before = request_count(self.port)
        cpu_before = _cpu_seconds(self.worker_pids)
        started = time.perf_counter()
        run_ids = [self.submit(side) for _ in range(runs)]
        results = [list(self.entries(side, run_id)) for run_id in run_ids]
        wall = time.perf_counter() - started
        cpu_ms = (_cpu_seconds(self.worker_pids) - cpu_before) * 1e3 / runs
        self.worker_cpu.setdefault(side, []).append(cpu_ms)
        for entries in results:
            _check(side, entries)
        made = request_count(self.port) - before
        if made != runs * (STEPS + 1):
            raise RuntimeError(
                f"celery-throughput: {runs} {side} runs made {made} model calls, expected "
                f"{runs * (STEPS + 1)}"
            )
        return wall

    def first_event(self, side: str) -> float:
        """Time from submit to the first ``agent`` entry read; then read the run to its end."""
        started = time.perf_counter()
        entries = self.entries(side, self.submit(side))
        seen: list[tuple[str, dict[str, Any]]] = []
        elapsed = 0.0
        for entry in entries:
            if entry[0] == "agent" and not elapsed:
                elapsed = time.perf_counter() - started
            seen.append(entry)
        _check(side, seen)
        return elapsed


def _load_tasks(redis_url: str, model_url: str) -> ModuleType:
    os.environ["BENCH_REDIS_URL"] = redis_url
    os.environ["BENCH_MODEL_URL"] = model_url
    module = importlib.import_module("benchmarks._celery_app")
    loaded_for = (module.REDIS_URL, module.MODEL_URL)
    if loaded_for != (redis_url, model_url):
        module = importlib.reload(module)
    return module


def celery_throughput(settings: Settings) -> list[Row]:
    """``celery-throughput``: see the module's docstring; rows for 2 and 4 workers."""
    reason = celery_unavailable()
    if reason is not None:
        raise ScenarioUnavailable(reason)
    import redis

    runs = QUICK_RUNS if settings.quick else RUNS
    model_url = base_url(settings.port, Policy(STEPS, LATENCY_MS))
    rows: list[Row] = []
    with redis_server() as redis_url, tempfile.TemporaryDirectory() as log_dir:
        tasks = _load_tasks(redis_url, model_url)
        # Blocking waits (a worker's start, up to GUARD) need a longer socket timeout than
        # redis-py's default (5 s), which a worker starting on a loaded machine exceeds.
        client = redis.Redis.from_url(redis_url, socket_timeout=GUARD + 10)
        env = {**child_env(), "BENCH_REDIS_URL": redis_url, "BENCH_MODEL_URL": model_url}
        sides = _Sides(tasks, client, settings.port)
        for count in (2, 4):
            with workers(count, env, client, Path(log_dir)) as pids:
                sides.worker_pids = pids
                for side in ("raw", "agentkit", "agentkit-stop"):  # check runs (and warm-up)
                    sides.batch(side, 1)
                sides.worker_cpu.clear()  # the check runs' are not counted
                baseline, ours, ours_stop = interleave(
                    [
                        lambda: sides.batch("raw", runs),
                        lambda: sides.batch("agentkit", runs),
                        lambda: sides.batch("agentkit-stop", runs),
                    ],
                    1 if settings.quick else 5,  # 5: the machine swings
                    warmup=0,
                )
                first_raw, first_ours = interleave(
                    [lambda: sides.first_event("raw"), lambda: sides.first_event("agentkit")],
                    3 if settings.quick else 15,
                )
            cpu = {side: statistics.median(each) for side, each in sides.worker_cpu.items()}
            rows += _rows(count, runs, baseline, ours, first_raw, first_ours, cpu)
            rows.append(_stop_row(count, runs, baseline, ours_stop, cpu))
        client.close()
    return rows


def _rows(
    count: int,
    runs: int,
    baseline: list[float],
    ours: list[float],
    first_raw: list[float],
    first_ours: list[float],
    cpu: dict[str, float],
) -> list[Row]:
    extra_ms = [(a - b) * 1e3 for a, b in zip(first_ours, first_raw, strict=True)]
    rate_raw = runs / statistics.median(baseline)
    rate_ours = runs / statistics.median(ours)
    return [
        Row(
            f"celery-throughput-{count}w",
            "s/batch",
            ours,
            baseline,
            [a / b for a, b in zip(ours, baseline, strict=True)],
            Budget("ratio", 1.15),
            extra={
                "runs_per_s": {"raw": rate_raw, "agentkit": rate_ours},
                "worker_cpu_ms_per_run": {"raw": cpu["raw"], "agentkit": cpu["agentkit"]},
            },
            note=f"{runs} runs (1 tool round, {LATENCY_MS} ms model latency) on {count} workers "
            f"x 4 threads, read to their end: {rate_raw:.1f} runs/s raw task, "
            f"{rate_ours:.1f} runs/s AgentQueue; the workers' CPU per run (steadier than the "
            f"wall): raw task {cpu['raw']:.2f} ms, AgentQueue {cpu['agentkit']:.2f} ms",
        ),
        Row(
            f"celery-first-event-{count}w",
            "ms over raw",
            extra_ms,
            budget=Budget("absolute", 5, "ms"),
            extra={
                "first_event_ms": {
                    "raw": [x * 1e3 for x in first_raw],
                    "agentkit": [x * 1e3 for x in first_ours],
                }
            },
            note=f"submit -> first agent entry read, idle workers: raw task "
            f"{statistics.median(first_raw) * 1e3:.1f} ms, AgentQueue "
            f"{statistics.median(first_ours) * 1e3:.1f} ms (median)",
        ),
    ]


def _stop_row(
    count: int, runs: int, baseline: list[float], ours: list[float], cpu: dict[str, float]
) -> Row:
    return Row(
        f"celery-throughput-{count}w durability=stop",
        "s/batch",
        ours,
        baseline,
        [a / b for a, b in zip(ours, baseline, strict=True)],
        extra={
            "runs_per_s": {"raw": runs / statistics.median(baseline),
                           "agentkit": runs / statistics.median(ours)},
            "worker_cpu_ms_per_run": {"raw": cpu["raw"], "agentkit": cpu["agentkit-stop"]},
        },
        note=f"the same on AgentQueue(durability='stop'), saved only when a run stops (no "
        f"budget: the row above less this one is what the durable steps cost): "
        f"{runs / statistics.median(ours):.1f} runs/s; the workers' CPU per run "
        f"{cpu['agentkit-stop']:.2f} ms",
    )


CELERY_SCENARIOS: dict[str, Callable[[Settings], list[Row]]] = {
    "celery-throughput": celery_throughput,
}
