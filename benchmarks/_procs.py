"""Scenarios measured as whole processes: concurrency and peak RSS, one-shot script, import.

Each side runs in fresh interpreters (so peak RSS is its own), the two sides alternating
round by round. Children get ``PYTHONPATH`` set to this checkout, so they measure the
agentkit next to this ``benchmarks`` package, not an installed one.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from benchmarks._inproc import Settings, interleave
from benchmarks._report import Budget, Row
from benchmarks._server import Policy, base_url

__all__ = ["PROCESS_SCENARIOS", "child_env", "port_server"]

ROOT = Path(__file__).resolve().parent.parent


#: Where children cache bytecode, so this checkout's tree gets no ``__pycache__`` litter.
PYCACHE = Path(tempfile.gettempdir()) / "agentkit-bench-pycache"


def child_env() -> dict[str, str]:
    """Return the environment for child interpreters: this checkout first on the path.

    Bytecode caching is switched on (``PYTHONDONTWRITEBYTECODE`` removed, cache under
    :data:`PYCACHE`): an installed agentkit has its ``.pyc`` files like httpx has, and
    compiling agentkit's sources on every start would make it look about 60 ms slower.
    """
    env = dict(os.environ)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


_warmed: list[bool] = []


@contextlib.contextmanager
def port_server(module: str, *args: str, what: str, stop_wait: float) -> Iterator[int]:
    """Run ``python -m module *args`` (a server that prints ``PORT <n>`` and serves until its
    stdin closes); yield its port; stop it on exit (killed after ``stop_wait`` seconds)."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"{what} did not start (it printed {line!r})")
        yield int(line.split()[1])
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=stop_wait)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def warm_bytecode() -> None:
    """Compile every module the children import, once, before anything is timed."""
    if _warmed:
        return
    modules = "agentkit, agentkit.models.openai, agentkit.checkpoint, httpx, benchmarks._child"
    code = f"import {modules}, benchmarks._agentkit_side, benchmarks._raw"
    subprocess.run([sys.executable, "-c", code], env=child_env(), cwd=ROOT, check=True)
    _warmed.append(True)


def _child(what: str, side: str, url: str) -> tuple[float, dict[str, float]]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks._child", what, side, url],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"benchmark child {what}/{side} failed:\n{done.stderr}")
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


def _ratios(agentkit: list[float], baseline: list[float]) -> list[float]:
    return [a / b for a, b in zip(agentkit, baseline, strict=True)]


def concurrency(settings: Settings) -> list[Row]:
    """``concurrency-50``: 50 concurrent runs of a 3-tool agent at 50 ms latency, per process."""
    from benchmarks._child import CONCURRENCY_TOOLS, CONCURRENT_RUNS

    warm_bytecode()
    url = base_url(settings.port, Policy(3, 50, tools=CONCURRENCY_TOOLS))
    reports: dict[str, list[dict[str, float]]] = {"raw": [], "agentkit": []}

    def side(label: str) -> Callable[[], float]:
        def measure() -> float:
            _, report = _child("concurrency", label, url)
            reports[label].append(report)
            return report["wall"]

        return measure

    rounds = 1 if settings.quick else 7
    baseline, ours = interleave([side("raw"), side("agentkit")], rounds, warmup=0)
    raw_rss = [report["maxrss_kib"] / 1024 for report in reports["raw"]]
    our_rss = [report["maxrss_kib"] / 1024 for report in reports["agentkit"]]
    raw_idle = statistics.median(r["rss_before_runs_kib"] / 1024 for r in reports["raw"])
    our_idle = statistics.median(r["rss_before_runs_kib"] / 1024 for r in reports["agentkit"])
    note = f"{CONCURRENT_RUNS} runs x 3 tool rounds, 50 ms latency; wall of the runs only"
    return [
        Row(
            "concurrency-50 wall",
            "ms",
            [x * 1e3 for x in ours],
            [x * 1e3 for x in baseline],
            _ratios(ours, baseline),
            Budget("ratio", 1.10),
            note=note,
        ),
        Row(
            "concurrency-50 peak RSS",
            "MB",
            our_rss,
            raw_rss,
            _ratios(our_rss, raw_rss),
            Budget("ratio", 1.5),
            extra={"rss_before_runs_mb": {"raw": raw_idle, "agentkit": our_idle}},
            note=f"RSS before the runs (after import + set-up + 1 run): raw {raw_idle:.1f} MB, "
            f"agentkit {our_idle:.1f} MB",
        ),
    ]


def oneshot(settings: Settings) -> list[Row]:
    """``oneshot``: a whole process that imports, sets up and runs 10 tool steps."""
    warm_bytecode()
    url = base_url(settings.port, Policy(10))
    rss: dict[str, list[float]] = {"raw": [], "agentkit": []}

    def side(label: str) -> Callable[[], float]:
        def measure() -> float:
            wall, report = _child("oneshot", label, url)
            rss[label].append(report["maxrss_kib"] / 1024)
            return wall

        return measure

    rounds = 2 if settings.quick else 15
    baseline, ours = interleave([side("raw"), side("agentkit")], rounds)
    rss = {label: values[-rounds:] for label, values in rss.items()}
    return [
        Row(
            "oneshot script (process)",
            "ms",
            [x * 1e3 for x in ours],
            [x * 1e3 for x in baseline],
            _ratios(ours, baseline),
            Budget("ratio", 1.3),
            note="python -m benchmarks._child: import + set-up + 10 steps (Runner.invoke), "
            "whole process",
        ),
        Row(
            "oneshot peak RSS",
            "MB",
            rss["agentkit"],
            rss["raw"],
            _ratios(rss["agentkit"], rss["raw"]),
            note="no budget",
        ),
    ]


def _python(code: str) -> Callable[[], float]:
    def measure() -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=child_env(), cwd=ROOT, check=True)
        return time.perf_counter() - started

    return measure


def imports(settings: Settings) -> list[Row]:
    """``import``: ``python -c 'import agentkit'`` vs ``'import httpx'``, fresh interpreters."""
    warm_bytecode()
    rounds = 3 if settings.quick else 25
    bare, httpx, agentkit = interleave(
        [_python("pass"), _python("import httpx"), _python("import agentkit")], rounds
    )
    startup = statistics.median(bare)
    net_httpx = statistics.median(httpx) - startup
    net_agentkit = statistics.median(agentkit) - startup
    return [
        Row(
            "import agentkit vs httpx (process)",
            "ms",
            [x * 1e3 for x in agentkit],
            [x * 1e3 for x in httpx],
            _ratios(agentkit, httpx),
            Budget("ratio", 1.2),
            extra={
                "interpreter_startup_ms": startup * 1e3,
                "net_httpx_ms": net_httpx * 1e3,
                "net_agentkit_ms": net_agentkit * 1e3,
            },
            note=f"raw column = import httpx; net of a bare interpreter ({startup * 1e3:.0f} ms): "
            f"httpx {net_httpx * 1e3:.0f} ms, agentkit {net_agentkit * 1e3:.0f} ms "
            f"({net_agentkit / net_httpx:.2f}x)",
        )
    ]


PROCESS_SCENARIOS: dict[str, Callable[[Settings], list[Row]]] = {
    "concurrency-50": concurrency,
    "oneshot": oneshot,
    "import": imports,
}
