"""Children of the scale scenarios: ``python -m benchmarks._scale_child WHAT SIDE PORT RUNS``.

Each child imports only what its side needs (the raw side never imports agentkit), checks
one run first (its answer, its events, and the number of model calls the loopback server
counted), then does the measured work and prints one JSON line.

``what`` is

- ``concurrency``: ``RUNS`` concurrent ReAct runs of 3 tool rounds at 50 ms latency, each on
  its own thread (as a Flask or Celery threads pool runs requests); agentkit's threads read
  their run's events live, through ``Runner.query`` (side ``agentkit``) or
  ``Runner.invoke(on_event=...)`` (side ``on_event``). Reports the wall time of the runs, the
  process's peak RSS (``VmHWM``) and its peak thread count (sampled every 2 ms by a monitor
  thread that both sides have);
- ``soak``: ``RUNS`` one-step runs, one after the other, on one agent (or one raw loop);
  reports RSS and thread count at :data:`SOAK_POINTS` points of the way (the curve).
"""

from __future__ import annotations

import gc
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks._server import Policy, base_url, request_count

__all__ = ["CONCURRENCY_STEPS", "SIDES", "SOAK_POINTS", "main"]

#: ``raw``: the raw loop; ``agentkit``: ``Runner.query`` read live (a worker thread per run);
#: ``on_event``: ``Runner.invoke(on_event=...)`` (the run in the calling thread).
SIDES = ("raw", "agentkit", "on_event")

#: Tool rounds of every concurrent run (``react-k3-l50``), and its model latency.
CONCURRENCY_STEPS = 3
CONCURRENCY_LATENCY_MS = 50
#: The connection pool of both sides in the concurrency scenario (httpx's default maximum).
CONNECTIONS = 100
#: Points of the soak curve (RSS and threads are read after each of these fractions of runs).
SOAK_POINTS = 10


class CheckFailed(RuntimeError):
    """A run's answer, events or model calls were not what the scenario expects."""


def _status(field: str) -> int:
    """Read a ``/proc/self/status`` field (``VmRSS``/``VmHWM`` in KiB, ``Threads``)."""
    with open("/proc/self/status") as file:
        for line in file:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field} field (Linux only)")


def _answer(steps: int) -> str:
    return f"done after {steps} tool results"


def _one_run(
    side: str, url: str, steps: int, limits: Any = None
) -> tuple[Callable[[], None], Callable[[], None]]:
    """Return ``(run, close)``: ``run`` does one checked run of ``steps`` tool rounds.

    ``limits`` (an ``httpx.Limits``) sets both sides' connection pool.
    """
    expected = _answer(steps)
    if side == "raw":
        from benchmarks._raw import RawLoop

        loop = RawLoop(url, ("add",), limits=limits)

        def raw_run() -> None:
            answer = loop.run("go")
            if answer != expected:
                raise CheckFailed(f"raw run answered {answer!r}, expected {expected!r}")

        return raw_run, loop.close

    from agentkit import AgentEvent, Role
    from benchmarks._agentkit_side import AgentkitLoop, read_event

    agent = AgentkitLoop(url, ("add",), steps=steps, limits=limits)

    def check(events: list[AgentEvent]) -> None:
        messages = [event.get_message() for event in events]
        tools = sum(1 for message in messages if message is not None and message.role is Role.TOOL)
        last = messages[-1] if messages else None
        if tools != steps or last is None or last.content != expected:
            answer = None if last is None else last.content
            raise CheckFailed(
                f"agentkit run gave {tools} tool events and answered {answer!r}; expected "
                f"{steps} tool events and {expected!r}"
            )

    def query_run() -> None:
        check(agent.run("go"))

    def on_event_run() -> None:
        seen: list[AgentEvent] = []

        def on_event(event: AgentEvent) -> None:
            read_event(event)
            seen.append(event)

        agent.runner.invoke("go", on_event=on_event)
        check(seen)

    return (on_event_run if side == "on_event" else query_run), agent.close


def _check_calls(port: int, before: int, runs: int, steps: int, what: str) -> None:
    made = request_count(port) - before
    if made != runs * (steps + 1):
        raise CheckFailed(
            f"{what}: the server answered {made} model calls, expected {runs * (steps + 1)} "
            f"({runs} runs x {steps + 1} calls)"
        )


class _PeakThreads:
    """A monitor thread that samples the process's thread count every 2 ms until stopped."""

    def __init__(self) -> None:
        self.peak = threading.active_count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="peak-threads", daemon=True)

    def __enter__(self) -> _PeakThreads:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _watch(self) -> None:
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _status("Threads"))


def _concurrency(side: str, port: int, runs: int) -> dict[str, Any]:
    steps = CONCURRENCY_STEPS
    import httpx

    url = base_url(port, Policy(steps, CONCURRENCY_LATENCY_MS))
    # Both sides keep every pooled connection alive: with httpx's default (20 kept of 100),
    # httpcore closes surplus idle connections, at times one already handed to a waiting
    # request (encode/httpcore#1110): a few of 1,000 raw runs then fail with EBADF (agentkit's
    # retries hide it), and both sides spend their time reconnecting.
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
    run, close = _one_run(side, url, steps, limits)
    before = request_count(port)
    run()  # the check run (and warm-up): right answer, events and model calls
    _check_calls(port, before, 1, steps, f"{side} check run")
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            run()
        except BaseException as error:  # reported by the parent, with the others
            errors.append(error)

    rss_before = _status("VmRSS")
    before = request_count(port)
    with _PeakThreads() as peak:
        idle_threads = _status("Threads")  # the monitor's thread counts as idle: it is ours
        started = time.perf_counter()
        threads = [threading.Thread(target=guarded) for _ in range(runs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
    close()
    if errors:
        raise CheckFailed(f"{len(errors)} of {runs} runs failed; the first: {errors[0]!r}")
    _check_calls(port, before, runs, steps, f"{side}, {runs} concurrent runs")
    return {
        "wall": wall,
        "idle_threads": idle_threads,
        "peak_threads": peak.peak,
        "rss_before_runs_kib": rss_before,
    }


def _soak(side: str, port: int, runs: int) -> dict[str, Any]:
    url = base_url(port, Policy(1))
    run, close = _one_run(side, url, 1)
    before = request_count(port)
    run()
    _check_calls(port, before, 1, 1, f"{side} check run")
    from benchmarks import _raw

    before = request_count(port)
    gc.collect()
    curve = [{"runs": 0, "rss_kib": _status("VmRSS"), "threads": _status("Threads")}]
    started = time.perf_counter()
    step = max(1, runs // SOAK_POINTS)
    for done in range(1, runs + 1):
        run()
        if done % step == 0 or done == runs:
            _raw.stamps.clear()  # the tools' time stamps, kept for other scenarios
            curve.append(
                {"runs": done, "rss_kib": _status("VmRSS"), "threads": _status("Threads")}
            )
    wall = time.perf_counter() - started
    close()
    _check_calls(port, before, runs, 1, f"{side}, {runs} runs in a row")
    return {"wall": wall, "curve": curve}


def main() -> None:
    """Run the scenario named on the command line and print its JSON line."""
    what, side, port, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if side not in SIDES:
        raise SystemExit(f"side must be one of {', '.join(SIDES)}, not {side!r}")
    if what == "concurrency":
        result = _concurrency(side, port, runs)
    elif what == "soak":
        result = _soak(side, port, runs)
    else:
        raise SystemExit(f"unknown scale scenario {what!r}; use 'concurrency' or 'soak'")
    result["maxrss_kib"] = _status("VmHWM")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
