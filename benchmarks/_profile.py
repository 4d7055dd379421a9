"""``python -m benchmarks --profile NAME``: where agentkit's side of a scenario spends its time.

Runs only the agentkit side, many times, under cProfile (all threads: the profiler is enabled
in every thread the runs start, through ``threading.setprofile``), and prints the functions
with the most own time and the most cumulative time. Saves ``<out>/profile-<NAME>.prof`` for
``python -m pstats`` or snakeviz.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._inproc import Settings
from benchmarks._server import Policy, base_url

__all__ = ["profile"]


def _workload(name: str, settings: Settings) -> tuple[Callable[[], object], Callable[[], None]]:
    from benchmarks._agentkit_side import NESTING_KINDS, AgentkitLoop, build_nested, drain

    react = {
        "react-k10-l0": (10, False),
        "react-k10-l0-stream": (10, True),
        "react-k50-l0": (50, False),
        "react-k10-l50": (10, False),
    }
    base = name.removesuffix("-invoke")
    if base in react:
        steps, stream = react[base]
        latency = 50 if base.endswith("l50") else 0
        agent = AgentkitLoop(
            base_url(settings.port, Policy(steps, latency)), ("add",), steps=steps, stream=stream
        )
        if name.endswith("-invoke"):  # the run in the calling thread, no live events
            return lambda: agent.invoke("go"), agent.close
        return lambda: agent.run("go"), agent.close
    if name == "fanout-8-l200":
        url = base_url(settings.port, Policy(1, 0, fanout=8, tools=("slow_add",)))
        agent = AgentkitLoop(url, ("slow_add",), steps=1)
        return lambda: agent.run("go"), agent.close
    kind = name.removeprefix("nesting-")
    if kind in NESTING_KINDS:
        runner = build_nested(kind, 6)
        return lambda: drain(runner.query("go")), lambda: None
    raise SystemExit(
        f"cannot profile {name!r}; choose one of {', '.join(react)} (each also with "
        "-invoke), fanout-8-l200, "
        + ", ".join(f"nesting-{kind}" for kind in NESTING_KINDS)
    )


def profile(name: str, settings: Settings, out: Path) -> int:
    """Profile agentkit's side of scenario ``name``; print the top functions; return 0."""
    run, close = _workload(name, settings)
    run()  # warm up: imports and first-call caches stay out of the profile
    profiler = cProfile.Profile()
    profilers: list[cProfile.Profile] = [profiler]
    lock = threading.Lock()

    def per_thread(frame: Any, event: str, arg: Any) -> None:
        # Enable a profiler in each new thread; cProfile replaces this hook at once.
        thread_profiler = cProfile.Profile()
        with lock:
            profilers.append(thread_profiler)
        thread_profiler.enable()

    repeats = 20 if settings.quick else 200
    threading.setprofile(per_thread)
    profiler.enable()
    try:
        for _ in range(repeats):
            run()
    finally:
        profiler.disable()
        threading.setprofile(None)
        close()
    for thread_profiler in profilers[1:]:
        thread_profiler.disable()
    stats = pstats.Stats(profiler)
    for thread_profiler in profilers[1:]:
        thread_profiler.create_stats()
        stats.add(thread_profiler)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"profile-{name}.prof"
    stats.dump_stats(path)
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(str(path), stream=text).sort_stats(order).print_stats(35)
        print(f"== {name}: {repeats} runs, all threads, by {order} ==")
        print(text.getvalue())
    print(f"saved {path}")
    return 0
