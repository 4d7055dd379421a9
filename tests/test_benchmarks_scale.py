"""The scale rows of the benchmark suite run end to end, check their runs, refuse without servers.

Quick runs (tiny counts) of ``concurrency-1000``, ``soak``, ``sse-fanout`` and
``celery-throughput`` through ``python -m benchmarks``, with real processes, a real redis-server
and real Celery workers; no timing is asserted. ``test_soak_keeps_rss_and_threads_flat`` is the
long soak (``-m stress``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _suite(*args: str, timeout: float = 110, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=ROOT,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    document = json.loads((out / "results.json").read_text())
    return {row["name"]: row for row in document["rows"]}


@pytest.mark.timeout(240)
def test_concurrency_and_soak_rows_and_the_markdown_file(tmp_path: Path) -> None:
    table = tmp_path / "RESULTS.md"
    done = _suite(
        "--quick", "--only", "concurrency-1000,soak", "--out", str(tmp_path),
        "--markdown", str(table), timeout=230,
    )
    assert done.returncode == 0, done.stderr
    rows = _rows(tmp_path)
    for title in ("concurrency-1000", "concurrency-1000 on_event"):
        wall, rss, threads = rows[f"{title} wall"], rows[f"{title} peak RSS"], rows[f"{title} threads/run"]
        assert wall["budget"] == {"kind": "ratio", "limit": 1.1, "unit": ""}
        assert rss["budget"] == {"kind": "ratio", "limit": 1.3, "unit": ""}
        assert all(value > 0 for value in wall["samples"]["agentkit"] + wall["samples"]["baseline"])
        assert all(value > 30 for value in rss["samples"]["agentkit"] + rss["samples"]["baseline"])
        peaks = threads["extra"]["peak_threads"]
        assert min(peaks["raw"]) > 1  # the runs ran on threads (how many overlap: load's say)
        assert threads["budget"] == {"kind": "absolute", "limit": 1, "unit": "threads/run"}
    soak = rows["soak RSS growth"]
    curve = soak["extra"]["agentkit"]["curve"]
    assert [point["runs"] for point in curve] == [0, *range(200, 2001, 200)]
    assert "RSS MB " in soak["note"] and "threads " in soak["note"]
    assert "soak agentkit: RSS MB" in done.stderr  # the curve is printed as it is measured
    written = table.read_text()
    assert written.startswith("Run ") and "load average" in written.splitlines()[0]
    assert "| concurrency-1000 wall | ms |" in written
    assert written == (tmp_path / "results.md").read_text()


@pytest.mark.timeout(120)
def test_sse_fanout_delivers_every_entry_to_every_client(tmp_path: Path) -> None:
    done = _suite("--quick", "--only", "sse-fanout", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = _rows(tmp_path)
    p50, p99 = rows["sse-fanout latency p50"], rows["sse-fanout latency p99"]
    assert 0 < p50["samples"]["agentkit"][0] <= p99["samples"]["agentkit"][0]
    assert "every entry reached every client" in p50["note"]
    assert rows["sse-fanout server RSS"]["samples"]["agentkit"][0] > 20


def _redis_required() -> bool:
    return os.environ.get("AGENTKIT_REQUIRE_REDIS", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture
def redis_binary() -> Iterator[None]:
    if shutil.which("redis-server") is None:
        if _redis_required():
            pytest.fail("redis-server is required (AGENTKIT_REQUIRE_REDIS is set) but not on PATH")
        pytest.skip("the redis-server binary is not on PATH (apt-get install redis-server)")
    yield


@pytest.mark.timeout(240)
def test_celery_throughput_on_real_workers(tmp_path: Path, redis_binary: None) -> None:
    done = _suite("--quick", "--only", "celery-throughput", "--out", str(tmp_path), timeout=230)
    assert done.returncode == 0, done.stderr
    rows = _rows(tmp_path)
    for count in (2, 4):
        batch = rows[f"celery-throughput-{count}w"]
        assert batch["budget"] == {"kind": "ratio", "limit": 1.15, "unit": ""}
        assert f"on {count} workers" in batch["note"]
        assert batch["extra"]["runs_per_s"]["raw"] > 0
        assert all(ms > 0 for ms in batch["extra"]["worker_cpu_ms_per_run"].values())
        first = rows[f"celery-first-event-{count}w"]
        assert first["budget"] == {"kind": "absolute", "limit": 5, "unit": "ms"}
        assert len(first["extra"]["first_event_ms"]["agentkit"]) == 3
        stop = rows[f"celery-throughput-{count}w durability=stop"]
        assert stop["budget"] is None and stop["extra"]["runs_per_s"]["agentkit"] > 0


def test_celery_throughput_is_refused_without_redis_server(tmp_path: Path) -> None:
    done = _suite(
        "--quick", "--only", "react-k10-l0,celery-throughput", "--out", str(tmp_path),
        PATH=str(tmp_path),  # no redis-server on this PATH
    )
    assert done.returncode == 2
    assert "celery-throughput needs the redis-server binary on PATH" in done.stderr
    assert "nothing was run" in done.stderr
    assert not (tmp_path / "results.json").exists()


def test_the_loopback_server_counts_the_model_calls() -> None:
    from benchmarks._raw import RawLoop
    from benchmarks._server import Policy, base_url, request_count

    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._server"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(), cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        port = int(process.stdout.readline().split()[1])
        assert request_count(port) == 0
        loop = RawLoop(base_url(port, Policy(3)), ("add",))
        try:
            assert loop.run("go") == "done after 3 tool results"
        finally:
            loop.close()
        assert request_count(port) == 4
    finally:
        process.stdin.close()
        process.wait(timeout=30)


@pytest.mark.stress
@pytest.mark.timeout(300)
def test_soak_keeps_rss_and_threads_flat() -> None:
    """10,000 runs in one process: RSS grows by at most 2 MB after the first tenth; no thread
    is left behind (at most the idle count + 1: a finished run's worker may still be exiting)."""
    from benchmarks._server import request_count

    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks._server"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(), cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        port = int(process.stdout.readline().split()[1])
        runs = 10_000
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks._scale_child", "soak", "agentkit", str(port), str(runs)],
            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=280, check=False,
        )
        assert done.returncode == 0, done.stderr
        curve = json.loads(done.stdout.splitlines()[-1])["curve"]
        assert request_count(port) == 2 * (runs + 1)  # every run made its two model calls
    finally:
        process.stdin.close()
        process.wait(timeout=30)
    assert [point["runs"] for point in curve] == [0, *range(1000, 10_001, 1000)]
    growth_kib = curve[-1]["rss_kib"] - curve[1]["rss_kib"]
    assert growth_kib <= 2048, curve
    assert max(point["threads"] for point in curve) <= curve[0]["threads"] + 1, curve


def test_own_threads_per_run_leaves_out_the_idle_and_request_threads() -> None:
    from benchmarks._scale import own_threads_per_run

    # 1,000 request threads on 3 idle ones, each with one worker thread at the peak.
    assert own_threads_per_run({"peak_threads": 2003, "idle_threads": 3}, 1000) == 1.0
    # The raw loop: no thread of its own, even when not all request threads overlapped.
    assert own_threads_per_run({"peak_threads": 991, "idle_threads": 3}, 1000) < 0
    assert own_threads_per_run({"peak_threads": 1003, "idle_threads": 3}, 1000) == 0.0
