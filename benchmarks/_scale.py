"""Scale scenarios in child processes: ``concurrency-1000`` and ``soak``.

Each side runs in a fresh interpreter (``benchmarks._scale_child``) so that its peak RSS and
thread count are its own; the sides alternate round by round (see
:func:`benchmarks._inproc.interleave`). Every child checks a first run (answer, events, the
model calls the loopback server counted) before it times anything, and the model calls of
all its runs after.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from benchmarks._inproc import Settings, interleave
from benchmarks._procs import ROOT, child_env, warm_bytecode
from benchmarks._report import Budget, Row

__all__ = ["SCALE_SCENARIOS", "concurrency_1000", "soak"]

#: Concurrent runs of ``concurrency-1000`` (fewer in quick mode).
CONCURRENT_RUNS = 1000
QUICK_CONCURRENT_RUNS = 100
#: Runs in a row of ``soak`` (fewer in quick mode). The raw loop's reference curve runs a
#: tenth as many (its RSS is flat within a few hundred KiB after its first thousand runs).
SOAK_RUNS = 100_000
QUICK_SOAK_RUNS = 2_000
#: The soak's budget: RSS growth from the first tenth of the runs to the end.
SOAK_GROWTH_MB = 4.0


def scale_child(what: str, side: str, port: int, runs: int) -> dict[str, Any]:
    """Run ``benchmarks._scale_child`` once; return its JSON report (raise if it failed)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks._scale_child", what, side, str(port), str(runs)],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=ROOT,
        timeout=3600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"benchmark child {what}/{side} failed:\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def own_threads_per_run(report: dict[str, Any], runs: int) -> float:
    """The threads a side added per run besides the runs' own (request) threads.

    ``(peak threads - idle threads - runs) / runs``: the child starts one thread per run (a
    request's thread) on top of its idle threads; whatever else was alive at the peak is the
    side's own (agentkit's worker threads, for ``Runner.query``). A request thread that ended
    before the peak makes this a slight undercount, never an overcount of the rest.
    """
    own: float = (report["peak_threads"] - report["idle_threads"] - runs) / runs
    return own


def _ratios(ours: list[float], baseline: list[float]) -> list[float]:
    return [a / b for a, b in zip(ours, baseline, strict=True)]


def concurrency_1000(settings: Settings) -> list[Row]:
    """``concurrency-1000``: 1,000 concurrent ``react-k3-l50`` runs on threads, one process.

    Three sides alternate, each in its own process: the raw loop, agentkit read through
    ``Runner.query`` (the run in a worker thread, as a Flask view streaming it does) and
    agentkit through ``Runner.invoke(on_event=...)`` (the run in the request's thread). Rows:
    wall (<= 1.10x), peak RSS (<= 1.3x) and agentkit's own threads per run (<= 1: the run's
    worker thread; see :func:`own_threads_per_run`).
    """
    warm_bytecode()
    runs = QUICK_CONCURRENT_RUNS if settings.quick else CONCURRENT_RUNS
    reports: dict[str, list[dict[str, Any]]] = {"raw": [], "agentkit": [], "on_event": []}

    def side(label: str) -> Callable[[], float]:
        def measure() -> float:
            report = scale_child("concurrency", label, settings.port, runs)
            reports[label].append(report)
            wall: float = report["wall"]
            return wall

        return measure

    rounds = 1 if settings.quick else 3
    baseline, *ours = interleave(
        [side("raw"), side("agentkit"), side("on_event")], rounds, warmup=0
    )
    raw_rss = [report["maxrss_kib"] / 1024 for report in reports["raw"]]
    raw_threads = [report["peak_threads"] for report in reports["raw"]]
    raw_own = [own_threads_per_run(report, runs) for report in reports["raw"]]
    rows: list[Row] = []
    for label, walls in zip(("agentkit", "on_event"), ours, strict=True):
        title = "concurrency-1000" if label == "agentkit" else "concurrency-1000 on_event"
        how = (
            "Runner.query read live (a worker thread per run)"
            if label == "agentkit"
            else "Runner.invoke(on_event=...) (the run in the request's thread)"
        )
        rss = [report["maxrss_kib"] / 1024 for report in reports[label]]
        threads = [report["peak_threads"] for report in reports[label]]
        extra = [own_threads_per_run(report, runs) for report in reports[label]]
        rows += [
            Row(
                f"{title} wall",
                "ms",
                [x * 1e3 for x in walls],
                [x * 1e3 for x in baseline],
                _ratios(walls, baseline),
                Budget("ratio", 1.10),
                note=f"{runs} runs x 3 tool rounds at 50 ms, one thread each; {how}; "
                "both sides: one client, 100 pooled connections kept alive",
            ),
            Row(
                f"{title} peak RSS",
                "MB",
                rss,
                raw_rss,
                _ratios(rss, raw_rss),
                Budget("ratio", 1.3),
                note="process peak (VmHWM)",
            ),
            Row(
                f"{title} threads/run",
                "threads/run",
                extra,
                budget=Budget("absolute", 1, "threads/run"),
                extra={"peak_threads": {"raw": raw_threads, label: threads}},
                note=f"agentkit's own threads: (peak threads - idle threads - {runs} request "
                f"threads) / runs; peaks: raw {statistics.median(raw_threads):.0f} (the same "
                f"count on the raw side: {statistics.median(raw_own):.3f}/run), agentkit "
                f"{statistics.median(threads):.0f}",
            ),
        ]
    return rows


def _curve_text(curve: list[dict[str, int]]) -> str:
    rss = "/".join(f"{point['rss_kib'] / 1024:.1f}" for point in curve)
    threads = "/".join(str(point["threads"]) for point in curve)
    return f"RSS MB {rss}; threads {threads}"


def soak(settings: Settings) -> list[Row]:
    """``soak``: 100,000 one-step runs in a row in one process; RSS and threads stay flat.

    Each side runs in its own process (the raw loop a tenth as many runs, as a reference); the
    curve (RSS and thread count after every tenth of the runs) is printed and kept in the row.
    Budget: agentkit's RSS grows by at most :data:`SOAK_GROWTH_MB` from the first tenth to the
    end, and its thread count never exceeds the idle count + 1 (a finished run's worker thread
    may still be exiting when the count is read).
    """
    warm_bytecode()
    runs = QUICK_SOAK_RUNS if settings.quick else SOAK_RUNS
    reports: dict[str, dict[str, Any]] = {}
    counts = {"raw": max(QUICK_SOAK_RUNS, runs // 10), "agentkit": runs}
    for label in ("raw", "agentkit"):
        reports[label] = scale_child("soak", label, settings.port, counts[label])
        print(f"soak {label}: {_curve_text(reports[label]['curve'])}", file=sys.stderr)
    growth = {
        label: (report["curve"][-1]["rss_kib"] - report["curve"][1]["rss_kib"]) / 1024
        for label, report in reports.items()
    }
    curve = reports["agentkit"]["curve"]
    idle = curve[0]["threads"]
    row = Row(
        "soak RSS growth",
        "MB",
        [growth["agentkit"]],
        budget=Budget("absolute", SOAK_GROWTH_MB, "MB"),
        extra={label: report for label, report in reports.items()},
        note=f"{runs} runs of 1 tool round in a row, one process; RSS growth from the first "
        f"tenth to the end (raw loop, {counts['raw']} runs: {growth['raw']:.2f} MB). agentkit: "
        f"{_curve_text(curve)}. raw: {_curve_text(reports['raw']['curve'])}; runs/s raw "
        f"{counts['raw'] / reports['raw']['wall']:.0f}, agentkit "
        f"{runs / reports['agentkit']['wall']:.0f}",
    )
    row.checks["threads flat: at most idle + 1"] = max(p["threads"] for p in curve) <= idle + 1
    return [row]


SCALE_SCENARIOS: dict[str, Callable[[Settings], list[Row]]] = {
    "concurrency-1000": concurrency_1000,
    "soak": soak,
}
