"""Scenarios measured in this process, agentkit and the raw loop interleaved in rounds.

Every scenario runs both sides once per round, alternating which goes first so that drift
in the machine's speed hits both alike, and keeps the per-round ratio. The loopback server
runs in another process (see ``benchmarks._server``).
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks import _raw
from benchmarks._report import Budget, Row
from benchmarks._server import Policy, base_url

__all__ = ["SCENARIOS", "Settings", "interleave"]


@dataclass(frozen=True)
class Settings:
    """What a scenario needs: the server's port and how many rounds to run."""

    port: int
    quick: bool

    def rounds(self, full: int) -> int:
        """Return ``full`` rounds, or 3 in quick mode."""
        return 3 if self.quick else full


def interleave(sides: list[Callable[[], float]], rounds: int, warmup: int = 1) -> list[list[float]]:
    """Run each side once per round (order alternating); return each side's samples."""
    for _ in range(warmup):
        for side in sides:
            side()
    samples: list[list[float]] = [[] for _ in sides]
    for index in range(rounds):
        order = list(range(len(sides)))
        if index % 2:
            order.reverse()
        for position in order:
            samples[position].append(sides[position]())
    return samples


def _timed(run: Callable[[], object]) -> Callable[[], float]:
    def measure() -> float:
        _raw.stamps.clear()
        started = time.perf_counter()
        run()
        return time.perf_counter() - started

    return measure


def _context_switches() -> int:
    """The process's context switches so far (voluntary + involuntary, all threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def _ratios(agentkit: list[float], baseline: list[float]) -> list[float]:
    return [a / b for a, b in zip(agentkit, baseline, strict=True)]


def _ms(values: list[float]) -> list[float]:
    return [value * 1e3 for value in values]


def react(
    settings: Settings,
    name: str,
    *,
    steps: int,
    latency_ms: float = 0,
    stream: bool = False,
    budget: float | None,
    rounds: int,
    invoke: bool = False,
    invoke_budget: float | None = None,
) -> list[Row]:
    """``react-k<steps>-l<latency>``: a ReAct run of ``steps`` tool rounds, wall time.

    The agentkit side reads the run's events live (``Runner.query``: the run goes on in a
    worker thread that hands each event over). With ``invoke`` two more sides, interleaved in
    the same rounds, run the agent in the calling thread like the raw loop: ``Runner.invoke``
    (the result only; row ``<name> invoke``), and ``Runner.invoke(on_event=...)`` reading every
    event live as the query side does (row ``<name> on_event``). ``budget`` applies to the rows
    that read events live, ``invoke_budget`` (default: ``budget``) to the ``invoke`` row.
    """
    from benchmarks._agentkit_side import AgentkitLoop

    url = base_url(settings.port, Policy(steps, latency_ms))
    raw = _raw.RawLoop(url, ("add",), stream=stream)
    agent = AgentkitLoop(url, ("add",), steps=steps, stream=stream)
    labels = ("agentkit", "invoke", "on_event")
    steps_seen: dict[str, list[list[float]]] = {label: [] for label in ("raw", *labels)}
    cpu: dict[str, list[float]] = {label: [] for label in ("raw", *labels)}
    switches: dict[str, list[int]] = {label: [] for label in ("raw", *labels)}

    def side(label: str, run: Callable[[str], object]) -> Callable[[], float]:
        timed = _timed(lambda: run("go"))

        def measure() -> float:
            cpu_started = time.process_time()
            switches_before = _context_switches()
            elapsed = timed()
            cpu[label].append(time.process_time() - cpu_started)
            switches[label].append(_context_switches() - switches_before)
            stamps = _raw.stamps
            steps_seen[label].append([b - a for a, b in itertools.pairwise(stamps)])
            return elapsed

        return measure

    sides = [side("raw", raw.run), side("agentkit", agent.run)]
    if invoke:
        sides += [side("invoke", agent.invoke), side("on_event", agent.on_event)]
    try:
        baseline, *samples = interleave(sides, settings.rounds(rounds))
    finally:
        raw.close()
        agent.close()
    rows = []
    how_read = {
        "agentkit": "events read live (query, worker thread)",
        "invoke": "Runner.invoke",
        "on_event": "events read live (invoke on_event, calling thread)",
    }
    for label, ours in zip(labels, samples, strict=False):
        limit = invoke_budget if label == "invoke" and invoke_budget is not None else budget
        row = Row(
            name if label == "agentkit" else f"{name} {label}",
            "ms",
            _ms(ours),
            _ms(baseline),
            _ratios(ours, baseline),
            None if limit is None else Budget("ratio", limit),
        )
        per_step_extra = (statistics.median(ours) - statistics.median(baseline)) / steps * 1e6
        cpu_extra = (statistics.median(cpu[label]) - statistics.median(cpu["raw"])) / steps
        row.extra.update(
            extra_us_per_step=per_step_extra,
            cpu_ms={key: _ms(cpu[key]) for key in ("raw", label)},
            extra_cpu_us_per_step=cpu_extra * 1e6,
        )
        switches_extra = (
            statistics.median(switches[label]) - statistics.median(switches["raw"])
        ) / steps
        row.extra["extra_context_switches_per_step"] = switches_extra
        row.note = (
            f"{how_read[label]}; wall +{per_step_extra:.0f} us/step; client CPU "
            f"+{cpu_extra * 1e6:.0f} us/step; context switches +{switches_extra:.1f}/step"
        )
        if steps >= 30 and limit is not None:
            _flatness(row, {"raw": steps_seen["raw"], "agentkit": steps_seen[label]}, limit)
        rows.append(row)
    return rows


def _flatness(row: Row, steps_seen: dict[str, list[list[float]]], budget: float) -> None:
    def window(label: str, part: slice) -> float:
        return statistics.median(x for run in steps_seen[label] for x in run[part])

    early = window("agentkit", slice(0, 10)) / window("raw", slice(0, 10))
    late = window("agentkit", slice(-10, None)) / window("raw", slice(-10, None))
    extra_early = (window("agentkit", slice(0, 10)) - window("raw", slice(0, 10))) * 1e6
    extra_late = (window("agentkit", slice(-10, None)) - window("raw", slice(-10, None))) * 1e6
    row.extra.update(
        step_ratio_first10=early,
        step_ratio_last10=late,
        extra_us_first10=extra_early,
        extra_us_last10=extra_late,
    )
    row.checks["flat: last-10-step ratio <= budget"] = late <= budget
    row.checks["flat: ratio grows <= 0.05 first->last 10 steps"] = late - early <= 0.05
    row.note += (
        f"; per step first 10 {early:.2f}x (+{extra_early:.0f} us), "
        f"last 10 {late:.2f}x (+{extra_late:.0f} us)"
    )


def fanout(settings: Settings) -> list[Row]:
    """``fanout-8-l200``: one reply asks for 8 tool calls, each taking 200 ms."""
    from benchmarks._agentkit_side import AgentkitLoop

    url = base_url(settings.port, Policy(1, 0, fanout=8, tools=("slow_add",)))
    raw = _raw.RawLoop(url, ("slow_add",))
    agent = AgentkitLoop(url, ("slow_add",), steps=1)
    try:
        baseline, ours = interleave(
            [_timed(lambda: raw.run("go")), _timed(lambda: agent.run("go"))],
            settings.rounds(9),
        )
    finally:
        raw.close()
        agent.close()
    return [
        Row(
            "fanout-8-l200",
            "ms",
            _ms(ours),
            _ms(baseline),
            _ratios(ours, baseline),
            Budget("ratio", 1.02),
        )
    ]


EXTENSION_FILES = (
    "agentkit/middleware.py",
    "agentkit/callbacks.py",
    "agentkit/_observe.py",
    "agentkit/_runlocals.py",
    "agentkit/compaction.py",
    "agentkit/integrations/otel.py",
)
"""The modules that implement middleware, callbacks, run-local values and tracing."""

USAGE_ACCOUNTING = ("_observe.py:add", "_observe.py:_plus")
"""Calls that count a model call's tokens for ``current_usage()`` and ``RunResult.usage``: a
feature every run has, not an extension point, so ``extensions-unused`` does not count them."""


def _extension_calls(run: Callable[[], object], runs: int) -> Counter[str]:
    """Count the Python calls into :data:`EXTENSION_FILES` made by ``runs`` calls of ``run``.

    Returns the count per function (``file:function``).

    Profiles every thread the runs start (the run worker, tool threads), like ``--profile``.
    """
    import cProfile
    import pstats
    import threading

    profilers: list[cProfile.Profile] = []
    lock = threading.Lock()

    def per_thread(frame: object, event: str, arg: object) -> None:
        thread_profiler = cProfile.Profile()
        with lock:
            profilers.append(thread_profiler)
        thread_profiler.enable()

    main = cProfile.Profile()
    threading.setprofile(per_thread)
    main.enable()
    try:
        for _ in range(runs):
            run()
    finally:
        main.disable()
        threading.setprofile(None)
    for thread_profiler in profilers:
        thread_profiler.disable()
    calls: Counter[str] = Counter()
    for profiler in [main, *profilers]:
        profiler.create_stats()
        for (filename, _line, name), entry in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
            path = filename.replace(os.sep, "/")
            key = f"{path.rsplit('/', 1)[-1]}:{name}"
            if path.endswith(EXTENSION_FILES) and key not in USAGE_ACCOUNTING:
                calls[key] += entry[1]  # all calls
    return calls


def extensions_unused(settings: Settings) -> list[Row]:
    """``extensions-unused`` and ``extensions-noop``: what the extension points cost.

    ``extensions-unused`` counts the calls a plain run (no middleware, no callbacks, no
    tracing) makes into the extension modules per ReAct step: unused extension points must
    cost nothing as a run grows, so the budget is zero (the few calls that set a run up are
    in the note). ``extensions-noop`` times an agent with a no-op
    middleware and a no-op callback handler against the plain agent.
    """
    from benchmarks._agentkit_side import AgentkitLoop

    url = base_url(settings.port, Policy(10))
    plain = AgentkitLoop(url, ("add",), steps=10)
    short = AgentkitLoop(base_url(settings.port, Policy(1)), ("add",), steps=1)
    extended = AgentkitLoop(url, ("add",), steps=10, extensions=True)
    try:
        plain.run("go")  # warm up: first-call caches stay out of the count
        short.run("go")
        runs = 3 if settings.quick else 20
        calls_10 = _extension_calls(lambda: plain.run("go"), runs)
        calls_1 = _extension_calls(lambda: short.run("go"), runs)
        per_run_1 = sum(calls_1.values()) / runs
        per_step = (sum(calls_10.values()) / runs - per_run_1) / 9
        growing = sorted(name for name in calls_10 if calls_10[name] > calls_1[name])
        baseline, ours = interleave(
            [_timed(lambda: plain.run("go")), _timed(lambda: extended.run("go"))],
            settings.rounds(41),
        )
    finally:
        plain.close()
        short.close()
        extended.close()
    return [
        Row(
            "extensions-unused (k10-l0)",
            "calls/step",
            [per_step],
            budget=Budget("absolute", 0, "calls/step"),
            note="Python calls into middleware/callbacks/tracing code per ReAct step of a "
            "plain run: (calls in a 10-step run - calls in a 1-step run) / 9 (cProfile, all "
            f"threads; usage accounting not counted); per run, a fixed {per_run_1:.0f} calls "
            "set the run up"
            + (f"; per step: {', '.join(growing)}" if growing else ""),
        ),
        Row(
            "extensions-noop (k10-l0)",
            "ms",
            _ms(ours),
            _ms(baseline),
            _ratios(ours, baseline),
            Budget("ratio", 1.05),
            note="a no-op middleware and a no-op callback handler vs the plain agent; "
            "see with_unused_extensions",
        ),
    ]


def nesting(settings: Settings) -> list[Row]:
    """``nesting``: one answer through 1, 3 and 6 levels of each wrapper kind (in-process model).

    The per-level cost is ``(t(depth) - t(bare)) / depth / events``, where ``events`` is what
    the consumer of the nested run receives and ``t`` the mean over a batch of runs. The
    budgeted figure uses the process's CPU time (the work is CPU-bound: the model answers
    in-process), which other load on the machine does not inflate; the wall-clock figure is
    in the note.
    """
    from benchmarks._agentkit_side import NESTING_KINDS, build_nested, drain

    depths = (1, 3, 6)
    configs = [("bare", 0)] + [(kind, depth) for kind in NESTING_KINDS for depth in depths]
    runners = [build_nested(kind, depth) for kind, depth in configs]
    events = [len(drain(runner.query("go"))) for runner in runners]
    batch = 5 if settings.quick else 20
    cpu: list[list[float]] = [[] for _ in runners]

    def side(index: int) -> Callable[[], float]:
        runner = runners[index]

        def measure() -> float:
            cpu_started = time.process_time()
            started = time.perf_counter()
            for _ in range(batch):
                drain(runner.query("go"))
            elapsed = (time.perf_counter() - started) / batch
            cpu[index].append((time.process_time() - cpu_started) / batch)
            return elapsed

        return measure

    walls = interleave([side(index) for index in range(len(runners))], settings.rounds(21))
    rows = []
    for index, (kind, depth) in enumerate(configs):
        if index == 0:
            continue
        count = events[index]

        def per_level(times: list[float], bare: list[float]) -> list[float]:
            return [(t - b) / depth / count * 1e6 for t, b in zip(times, bare, strict=True)]  # noqa: B023

        cpu_levels = per_level(cpu[index], cpu[0])
        wall_levels = per_level(walls[index], walls[0])
        best = (min(cpu[index]) - min(cpu[0])) / depth / count * 1e6
        rows.append(
            Row(
                f"nesting-{kind}-d{depth}",
                "CPU us/event/level",
                cpu_levels,
                budget=Budget("absolute", 20, "us"),
                extra={
                    "best_of_us": best,
                    "wall_us_per_event_level": statistics.median(wall_levels),
                    "events": count,
                    "run_cpu_us": statistics.median(cpu[index]) * 1e6,
                    "bare_run_cpu_us": statistics.median(cpu[0]) * 1e6,
                },
                note=f"wall {statistics.median(wall_levels):.1f} us; best-of {best:.1f} us; "
                f"{count} events; run {statistics.median(cpu[index]) * 1e6:.0f} us CPU vs "
                f"bare {statistics.median(cpu[0]) * 1e6:.0f} us",
            )
        )
    return rows


def resume(settings: Settings) -> list[Row]:
    """``resume``: a run interrupts at a tool, is saved to files, and is resumed to its end."""
    from agentkit import with_checkpoint_id
    from agentkit.checkpoint import FileCheckPointStore
    from benchmarks._agentkit_side import AgentkitLoop, drain

    directory = tempfile.mkdtemp(prefix="agentkit-bench-")
    url = base_url(settings.port, Policy(1, tools=("approve",)))
    store = FileCheckPointStore(os.path.join(directory, "store"))
    raw = _raw.RawLoop(url, ("approve",))
    agent = AgentkitLoop(url, ("approve",), steps=1, checkpoint_store=store)
    counter = iter(range(10**9))

    def raw_side() -> float:
        started = time.perf_counter()
        try:
            raw.run("go", pause_at="approve", state_dir=directory)
        except _raw.Paused as paused:
            raw.resume(paused.path, approved=True)
        return time.perf_counter() - started

    def agentkit_side() -> float:
        checkpoint_id = f"run-{next(counter)}"
        started = time.perf_counter()
        events = agent.run("go", with_checkpoint_id(checkpoint_id))
        interrupted = events[-1].action.interrupted if events[-1].action else None
        if interrupted is None:
            raise RuntimeError("the resume scenario's run did not interrupt")
        targets = {context.id: True for context in interrupted.contexts}
        drain(agent.runner.resume(checkpoint_id, targets=targets))
        elapsed = time.perf_counter() - started
        store.delete(checkpoint_id)
        return elapsed

    try:
        baseline, ours = interleave([raw_side, agentkit_side], settings.rounds(21))
    finally:
        raw.close()
        agent.close()
        shutil.rmtree(directory, ignore_errors=True)
    return [
        Row(
            "resume (file store)",
            "ms",
            _ms(ours),
            _ms(baseline),
            _ratios(ours, baseline),
            note="no budget; raw saves its history as JSON, atomically, with fsync",
        )
    ]


def checkpoint(settings: Settings) -> list[Row]:
    """``checkpoint-50``: save + load of a real 50-message interrupted run, file store."""
    from agentkit import (
        ChatModelAgent,
        Message,
        Role,
        Runner,
        assistant_message,
        with_checkpoint_id,
    )
    from agentkit.checkpoint import FileCheckPointStore, InMemoryCheckPointStore
    from agentkit.schema import FunctionCall, ToolCall
    from benchmarks._agentkit_side import AK_TOOLS, InstantModel, drain

    history: list[Message] = []

    def policy(messages: list[Message]) -> Message:
        done = sum(1 for message in messages if message.role == Role.ASSISTANT)
        name = "add" if done < 24 else "approve"
        call = ToolCall(f"call_{done}", FunctionCall(name, json.dumps({"a": done, "b": 1})))
        reply = assistant_message("", [call])
        history[:] = [*messages, reply]
        return reply

    agent = ChatModelAgent(
        "ck",
        "d",
        InstantModel(policy),
        tools=[AK_TOOLS["add"], AK_TOOLS["approve"]],
        max_iterations=30,
    )
    memory = InMemoryCheckPointStore()
    runner = Runner(agent, checkpoint_store=memory)
    drain(runner.query("go", with_checkpoint_id("ck50")))
    serializer = runner.serializer
    data = memory.get("ck50")
    assert data is not None
    state = serializer.loads(data, checkpoint_id="ck50")
    messages = [message.to_dict() for message in history]
    directory = tempfile.mkdtemp(prefix="agentkit-bench-")
    files = FileCheckPointStore(os.path.join(directory, "store"))
    serialize_only: list[float] = []

    def agentkit_side() -> float:
        started = time.perf_counter()
        payload = serializer.dumps(state, checkpoint_id="ck50")
        middle = time.perf_counter()
        serializer.loads(payload, checkpoint_id="ck50")
        serialize_only.append(time.perf_counter() - middle + (middle - started))
        started_io = time.perf_counter()
        files.set("ck50", payload)
        loaded = files.get("ck50")
        assert loaded is not None
        io_time = time.perf_counter() - started_io
        return serialize_only[-1] + io_time

    def raw_side() -> float:
        started = time.perf_counter()
        path = _raw.save_state(directory, messages)
        with open(path, "rb") as file:
            json.loads(file.read())
        return time.perf_counter() - started

    try:
        baseline, ours = interleave([raw_side, agentkit_side], settings.rounds(51))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return [
        Row(
            "checkpoint-50 save+load",
            "ms",
            _ms(ours),
            _ms(baseline),
            _ratios(ours, baseline),
            Budget("absolute", 2, "ms"),
            extra={
                "messages": len(messages),
                "payload_bytes": len(data),
                "serializer_only_ms": statistics.median(serialize_only) * 1e3,
            },
            note=f"{len(messages)} messages, {len(data)} bytes; serializer alone "
            f"{statistics.median(serialize_only) * 1e3:.2f} ms; raw = JSON + same atomic "
            "fsync write",
        )
    ]


SCENARIOS: dict[str, Callable[[Settings], list[Row]]] = {
    "react-k10-l0": lambda s: react(
        s, "react-k10-l0", steps=10, budget=1.15, rounds=41, invoke=True, invoke_budget=1.05
    ),
    "react-k10-l0-stream": lambda s: react(
        s, "react-k10-l0-stream", steps=10, stream=True, budget=1.10, rounds=41, invoke=True,
        invoke_budget=1.05,
    ),
    "react-k50-l0": lambda s: react(
        s, "react-k50-l0", steps=50, budget=1.15, rounds=11, invoke=True
    ),
    "react-k10-l50": lambda s: react(
        s, "react-k10-l50", steps=10, latency_ms=50, budget=None, rounds=9
    ),
    "fanout-8-l200": fanout,
    "extensions-unused": extensions_unused,
    "nesting": nesting,
    "resume": resume,
    "checkpoint-50": checkpoint,
}
