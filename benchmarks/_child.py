"""Children of the process-level scenarios: ``python -m benchmarks._child WHAT SIDE URL``.

Each child imports only what its side needs (the raw side never imports agentkit), does its
work, and prints one JSON line: the wall time of the measured part and the process's peak
RSS (``VmHWM``). ``what`` is ``concurrency`` (50 concurrent runs of a 3-tool agent, 50 ms
latency; the wall covers the runs only) or ``oneshot`` (import + set-up + one 10-step run,
the whole process timed by the parent; the agentkit side is the script a user would write:
``Runner(agent).invoke(...).text``).
"""

from __future__ import annotations

import json
import sys
import threading
import time

__all__ = ["main"]

CONCURRENT_RUNS = 50
#: The tools of the concurrency scenario's agent (its server policy must name the same).
CONCURRENCY_TOOLS = ("add", "mul", "sub")


def _status_kib(field: str) -> int:
    """Read a ``/proc/self/status`` field in KiB (``VmRSS`` now, ``VmHWM`` the peak).

    ``getrusage().ru_maxrss`` is not used: Linux carries it over ``fork`` + ``exec``, so a
    child would report its parent's peak when that is higher.
    """
    with open("/proc/self/status") as file:
        for line in file:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field} field (Linux only)")


def _rss_now_kib() -> int:
    return _status_kib("VmRSS")


def _concurrency(side: str, url: str) -> dict[str, float]:
    if side == "raw":
        from benchmarks._raw import RawLoop

        loop = RawLoop(url, CONCURRENCY_TOOLS)
        loop.run("warm up")
        before = _rss_now_kib()
        started = time.perf_counter()
        threads = [threading.Thread(target=loop.run, args=("go",)) for _ in range(CONCURRENT_RUNS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        loop.close()
    else:
        from benchmarks._agentkit_side import AgentkitLoop, drain

        agent = AgentkitLoop(url, CONCURRENCY_TOOLS, steps=3)
        agent.run("warm up")
        before = _rss_now_kib()
        started = time.perf_counter()
        runs = [agent.runner.query("go") for _ in range(CONCURRENT_RUNS)]
        for events in runs:
            drain(events)
        wall = time.perf_counter() - started
        agent.close()
    return {"wall": wall, "rss_before_runs_kib": before}


def _oneshot(side: str, url: str) -> dict[str, float]:
    if side == "raw":
        from benchmarks._raw import RawLoop

        loop = RawLoop(url, ("add",))
        answer = loop.run("go")
        loop.close()
    else:
        # What a user's one-shot script imports and does: one agent, one answer.
        from agentkit import ChatModelAgent, Runner, tool
        from agentkit.models import OpenAIChatModel
        from benchmarks._raw import add

        model = OpenAIChatModel("bench", api_key="sk-bench", base_url=url)
        agent = ChatModelAgent("bench", "a benchmark agent", model, tools=[tool(add)])
        answer = Runner(agent).invoke("go").text
        model.close()
    if "10 tool results" not in answer:
        raise RuntimeError(f"the one-shot run ended with an unexpected answer: {answer!r}")
    return {"wall": 0.0}


def main() -> None:
    """Run the scenario named on the command line and print its JSON line."""
    what, side, url = sys.argv[1], sys.argv[2], sys.argv[3]
    if side not in ("raw", "agentkit"):
        raise SystemExit(f"side must be 'raw' or 'agentkit', not {side!r}")
    result = _concurrency(side, url) if what == "concurrency" else _oneshot(side, url)
    result["maxrss_kib"] = _status_kib("VmHWM")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
