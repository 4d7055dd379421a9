"""``sse-fanout``: many browsers following runs of the sample Flask app over Server-Sent Events.

The sample app (``samples/flask_app``) runs in its own process on werkzeug's threaded WSGI
server (:mod:`benchmarks._sse_server`); its agent calls the loopback model server (10 tool
rounds at 100 ms latency, so a run lasts about a second). Each round starts :data:`RUNS` runs
(``POST /api/runs``, each from a session of its own whose client reads the stream it gets
back) and has :data:`CLIENTS` clients in all follow them (the others ``GET
/api/runs/<id>/events`` in the run's session), every client on a thread of its own with its
own connection.

Checks, before any figure is kept: every client got every entry of its run's log (the same
ids, in order, up to ``end``), every run's answer is right, and the model server answered
exactly the calls the runs should make. Latency is read from the tool results: the tool
returns the time it ran, and a client that was already connected then notes when the entry
reached it (server and clients share the machine's clock). Server RSS is read from the server
process before and after.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from benchmarks._inproc import Settings
from benchmarks._procs import ROOT, port_server
from benchmarks._report import Row, ScenarioUnavailable
from benchmarks._server import Policy, base_url, request_count

__all__ = ["SSE_SCENARIOS", "sse_fanout", "sse_unavailable"]

GUARD = 120.0  # seconds: a failure guard for every wait, never a pacing
RUNS = 20
CLIENTS = 200
QUICK_RUNS = 4
QUICK_CLIENTS = 20
STEPS = 10
LATENCY_MS = 100


def sse_unavailable() -> str | None:
    """Say why ``sse-fanout`` cannot run here, or return ``None`` when it can."""
    if importlib.util.find_spec("flask") is None:
        return "sse-fanout needs Flask (pip install 'agentkit[flask]'); it was not run"
    if not (ROOT / "samples" / "flask_app" / "__init__.py").is_file():
        where = ROOT / "samples" / "flask_app"
        return f"sse-fanout needs the sample app in {where}; it was not run"
    return None


@contextlib.contextmanager
def sample_app_server(model_url: str) -> Iterator[int]:
    """Start the sample app's server process; yield its port; stop it on exit."""
    with port_server(
        "benchmarks._sse_server", model_url, what="the sample app's server", stop_wait=30
    ) as port:
        yield port


@dataclass
class _Client:
    """One SSE client: the entries it read, when, and when it was connected."""

    ids: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    answer: str | None = None
    connected: float = 0.0
    error: BaseException | None = None

    def read(self, lines: Iterator[str]) -> None:
        """Read SSE frames to the ``end`` entry, noting each tool result's delivery latency."""
        self.connected = time.time()
        event_id, kind, data = "", "", ""
        for line in lines:
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif not line and kind:
                self._entry(time.time(), event_id, kind, json.loads(data))
                if kind == "end":
                    return
                event_id, kind, data = "", "", ""

    def _entry(self, now: float, event_id: str, kind: str, data: dict[str, Any]) -> None:
        self.ids.append(event_id)
        self.kinds.append(kind)
        if kind == "end":
            self.answer = data.get("answer")
        message = (data.get("output") or {}).get("message") or {} if kind == "agent" else {}
        if message.get("role") == "tool":
            stamped = float(message["content"])
            if stamped >= self.connected:  # live, not replayed from the log
                self.latencies.append(now - stamped)


def _follow(client: Any, method: str, path: str, body: Any, result: _Client) -> None:
    try:
        kwargs: dict[str, Any] = {"json": body} if body is not None else {}
        with client.stream(method, path, **kwargs) as response:
            response.raise_for_status()
            result.read(response.iter_lines())
    except BaseException as error:  # reported by the round, with the others
        result.error = error


def _round(port: int, runs: int, clients: int) -> tuple[list[_Client], list[list[_Client]]]:
    """Start ``runs`` runs and have ``clients`` clients follow them; return them per run."""
    import httpx

    url = f"http://127.0.0.1:{port}"
    sessions = [httpx.Client(base_url=url, timeout=GUARD) for _ in range(runs)]
    starters = [_Client() for _ in range(runs)]
    followers: list[list[_Client]] = [[] for _ in range(runs)]
    threads: list[threading.Thread] = []
    try:
        for session in sessions:
            session.get("/")  # the session cookie (the owner of the run)
        run_ids: list[str] = []
        for session, starter in zip(sessions, starters, strict=True):
            ready = threading.Event()
            got: list[str] = []

            def start(session: Any = session, starter: _Client = starter,
                      ready: threading.Event = ready, got: list[str] = got) -> None:
                try:
                    with session.stream("POST", "/api/runs", json={"message": "go"}) as response:
                        response.raise_for_status()
                        got.append(response.headers["X-Run-Id"])
                        ready.set()
                        starter.read(response.iter_lines())
                except BaseException as error:
                    starter.error = error
                finally:
                    ready.set()

            thread = threading.Thread(target=start, name="sse-starter")
            thread.start()
            threads.append(thread)
            if not ready.wait(GUARD) or not got:
                raise RuntimeError(f"POST /api/runs gave no run id: {starter.error!r}")
            run_ids.append(got[0])
        for index in range(clients - runs):
            which = index % runs
            follower = _Client()
            followers[which].append(follower)
            path = f"/api/runs/{run_ids[which]}/events"
            thread = threading.Thread(
                target=_follow,
                args=(sessions[which], "GET", path, None, follower),
                name="sse-follower",
            )
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join(GUARD)
            if thread.is_alive():
                raise RuntimeError(f"an SSE client still reads after {GUARD:.0f} s")
    finally:
        for session in sessions:
            session.close()
    return starters, followers


def _check(starters: list[_Client], followers: list[list[_Client]]) -> None:
    expected = f"done after {STEPS} tool results"
    for starter, others in zip(starters, followers, strict=True):
        for client in [starter, *others]:
            if client.error is not None:
                raise RuntimeError(f"sse-fanout: a client failed: {client.error!r}")
            if client.ids != starter.ids or client.kinds[-1:] != ["end"]:
                raise RuntimeError(
                    f"sse-fanout: a client read {len(client.ids)} entries ending "
                    f"{client.kinds[-1:]}, the run's starter {len(starter.ids)}: not every "
                    "entry reached every client"
                )
            if client.answer != expected or client.kinds.count("agent") != 2 * STEPS + 1:
                raise RuntimeError(
                    f"sse-fanout: a run answered {client.answer!r} with "
                    f"{client.kinds.count('agent')} agent entries; expected {expected!r} and "
                    f"{2 * STEPS + 1}"
                )


def _stats(port: int) -> dict[str, int]:
    import httpx

    stats: dict[str, int] = httpx.get(f"http://127.0.0.1:{port}/bench/stats").json()
    return stats


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def sse_fanout(settings: Settings) -> list[Row]:
    """``sse-fanout``: see the module's docstring; rows for latency p50/p99 and server RSS."""
    reason = sse_unavailable()
    if reason is not None:
        raise ScenarioUnavailable(reason)
    runs, clients = (QUICK_RUNS, QUICK_CLIENTS) if settings.quick else (RUNS, CLIENTS)
    model_url = base_url(settings.port, Policy(STEPS, LATENCY_MS, tools=("stamp",)))
    latencies: list[float] = []
    live_counts: list[int] = []
    with sample_app_server(model_url) as port:
        idle = _stats(port)
        before = request_count(settings.port)
        _check(*_round(port, 1, 2))  # the check round (and warm-up)
        made = request_count(settings.port) - before
        if made != STEPS + 1:
            raise RuntimeError(f"sse-fanout: a run made {made} model calls, expected {STEPS + 1}")
        for _ in range(1 if settings.quick else 3):
            before = request_count(settings.port)
            starters, followers = _round(port, runs, clients)
            _check(starters, followers)
            made = request_count(settings.port) - before
            if made != runs * (STEPS + 1):
                raise RuntimeError(
                    f"sse-fanout: {runs} runs made {made} model calls, expected "
                    f"{runs * (STEPS + 1)}"
                )
            every = [*starters, *(c for group in followers for c in group)]
            for client in every:
                latencies.extend(client.latencies)
            live_counts.append(sum(len(client.latencies) for client in every))
        after = _stats(port)
    ms = [x * 1e3 for x in latencies]
    p50, p99 = statistics.median(ms), _percentile(ms, 0.99)
    note = (
        f"{clients} clients on {runs} runs ({STEPS} tool rounds at {LATENCY_MS} ms), sample "
        f"app on werkzeug threaded; every entry reached every client; {len(ms)} live tool "
        f"results timed"
    )
    return [
        Row("sse-fanout latency p50", "ms", [p50], note=note),
        Row("sse-fanout latency p99", "ms", [p99], note=f"max {max(ms):.1f} ms"),
        Row(
            "sse-fanout server RSS",
            "MB",
            [after["VmHWM"] / 1024],
            extra={"idle_rss_mb": idle["VmRSS"] / 1024, "threads_after": after["Threads"]},
            note=f"peak of the app's process; idle {idle['VmRSS'] / 1024:.1f} MB",
        ),
    ]


SSE_SCENARIOS: dict[str, Callable[[Settings], list[Row]]] = {"sse-fanout": sse_fanout}
