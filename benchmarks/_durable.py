"""``durable-steps``: what ``Runner(durability="step")`` costs, per step and per run.

Two measurements:

* **Per step, per store** (memory, file, SQLite, Redis when ``redis-server`` is installed): a
  ReAct agent with an in-process model (no HTTP noise) runs 5 and 25 tool rounds, with
  ``durability="step"`` and with ``durability="stop"``, interleaved in rounds. A durable step
  is a finished model reply or tool call (one step record; a ReAct round has two), so the
  marginal cost of one is ``((step25 - step5) - (stop25 - stop5)) / 40``, in CPU time (the
  process's, so other load on the machine does not inflate it; budget 0.3 ms on file and
  SQLite) and in wall time (the note, with the fixed cost of a durable run: its lease, first
  image and tombstone).
* **Wall on vs off** (``react-k10-l50 durable``): the ``react-k10-l50`` run (10 steps over
  loopback HTTP, 50 ms model latency) with a file store and a checkpoint id, durable vs not.
  Budget: at most 2 % slower.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks._inproc import Settings, interleave
from benchmarks._report import Budget, Row
from benchmarks._server import Policy, base_url

__all__ = ["durable_steps"]

SHORT, LONG = 5, 25
"""The two run lengths (ReAct steps) whose difference gives the cost of one step."""


def _policy(steps: int) -> Callable[[list[Any]], Any]:
    from agentkit import Role, assistant_message
    from agentkit.schema import FunctionCall, ToolCall

    def policy(messages: list[Any]) -> Any:
        done = sum(1 for message in messages if message.role == Role.ASSISTANT)
        if done >= steps:
            return assistant_message(f"done after {done} steps")
        call = ToolCall(f"call_{done}", FunctionCall("add", json.dumps({"a": done, "b": 1})))
        return assistant_message("", [call])

    return policy


def _runner(store: Any, steps: int, durability: str) -> Any:
    from agentkit import ChatModelAgent, Runner
    from benchmarks._agentkit_side import AK_TOOLS, InstantModel

    agent = ChatModelAgent(
        "bench", "d", InstantModel(_policy(steps)), tools=[AK_TOOLS["add"]],
        max_iterations=steps + 2,
    )
    return Runner(agent, checkpoint_store=store, durability=durability)


@contextlib.contextmanager
def _redis_url() -> Iterator[str | None]:
    """A throwaway ``redis-server`` on a free loopback port (``None``: not installed)."""
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    directory = tempfile.mkdtemp(prefix="agentkit-bench-redis-")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", directory],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30  # a failure guard: it answers within milliseconds
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(
                ("127.0.0.1", port), timeout=1
            ) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    break
            time.sleep(0.02)
        else:
            raise RuntimeError("redis-server did not answer PING within 30 s")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(directory, ignore_errors=True)


def _stores(directory: str, redis_url: str | None) -> dict[str, Any]:
    from agentkit.checkpoint import (
        FileCheckPointStore,
        InMemoryCheckPointStore,
        RedisCheckPointStore,
        SQLiteCheckPointStore,
    )

    stores: dict[str, Any] = {
        "memory": InMemoryCheckPointStore(),
        "file": FileCheckPointStore(os.path.join(directory, "files")),
        "sqlite": SQLiteCheckPointStore(os.path.join(directory, "checkpoints.db")),
    }
    if redis_url is not None:
        stores["redis"] = RedisCheckPointStore(redis_url, prefix="bench:")
    return stores


def _per_step(settings: Settings, name: str, store: Any) -> Row:
    """The row of one store: CPU per step (budgeted), wall per step and per run in the note."""
    from agentkit import with_checkpoint_id

    counter = iter(range(10**9))
    kinds = ((SHORT, "step"), (LONG, "step"), (SHORT, "stop"), (LONG, "stop"))
    cpu: list[list[float]] = [[] for _ in kinds]
    sides: list[Callable[[], float]] = []
    for index, (steps, durability) in enumerate(kinds):
        runner = _runner(store, steps, durability)

        def side(runner: Any = runner, steps: int = steps, index: int = index) -> float:
            checkpoint_id = f"durable-{next(counter)}"
            cpu_started = time.process_time()
            started = time.perf_counter()
            result = runner.invoke("go", with_checkpoint_id(checkpoint_id))
            elapsed = time.perf_counter() - started
            cpu[index].append(time.process_time() - cpu_started)
            assert result.text == f"done after {steps} steps", result.text
            store.delete(checkpoint_id)  # the tombstone of a completed durable run
            return elapsed

        sides.append(side)
    walls = interleave(sides, settings.rounds(31), warmup=2)
    for samples in cpu:
        del samples[: len(samples) - len(walls[0])]  # the warm-up runs
    records = 2 * (LONG - SHORT)  # a model reply and a tool call per ReAct step

    def per_step(times: list[list[float]]) -> list[float]:
        step5, step25, stop5, stop25 = times
        return [
            ((b - a) - (d - c)) / records * 1e3
            for a, b, c, d in zip(step5, step25, stop5, stop25, strict=True)
        ]

    cpu_steps, wall_steps = per_step(cpu), per_step(walls)
    wall_step = statistics.median(wall_steps)
    fixed = (statistics.median(walls[0]) - statistics.median(walls[2])) * 1e3 - (
        2 * SHORT * wall_step
    )
    budget = Budget("absolute", 0.3, "ms") if name in ("file", "sqlite") else None
    return Row(
        f"durable-steps {name}",
        "CPU ms/step",
        cpu_steps,
        budget=budget,
        extra={"wall_ms_per_step": wall_step, "fixed_wall_ms_per_run": fixed},
        note=f"CPU added by durability='step' per durable step (a finished model reply or "
        f"tool call: one record); wall {wall_step:.3f} ms/step; fixed wall per durable run "
        f"(lease, first image, tombstone) {fixed:.2f} ms",
    )


def _wall(settings: Settings, directory: str) -> Row:
    from agentkit import with_checkpoint_id
    from agentkit.checkpoint import FileCheckPointStore
    from benchmarks._agentkit_side import AgentkitLoop

    url = base_url(settings.port, Policy(10, 50))
    store = FileCheckPointStore(os.path.join(directory, "wall"))
    loops = {
        durability: AgentkitLoop(url, ("add",), steps=10, checkpoint_store=store,
                                 durability=durability)
        for durability in ("stop", "step")
    }
    counter = iter(range(10**9))

    def side(loop: AgentkitLoop) -> Callable[[], float]:
        def measure() -> float:
            checkpoint_id = f"wall-{next(counter)}"
            started = time.perf_counter()
            loop.run("go", with_checkpoint_id(checkpoint_id))
            elapsed = time.perf_counter() - started
            store.delete(checkpoint_id)
            return elapsed

        return measure

    try:
        off, on = interleave([side(loops["stop"]), side(loops["step"])], settings.rounds(9))
    finally:
        for loop in loops.values():
            loop.close()
    extra_ms = statistics.median(on) * 1e3 - statistics.median(off) * 1e3
    return Row(
        "react-k10-l50 durable",
        "ms",
        [value * 1e3 for value in on],
        [value * 1e3 for value in off],
        [a / b for a, b in zip(on, off, strict=True)],
        Budget("ratio", 1.02),
        note=f"file store and a checkpoint id: durability='step' vs 'stop' (the 'raw' column); "
        f"{extra_ms:+.1f} ms per run",
    )


def durable_steps(settings: Settings) -> list[Row]:
    """The ``durable-steps`` rows: cost per step on each store, and wall on vs off."""
    directory = tempfile.mkdtemp(prefix="agentkit-bench-durable-")
    try:
        with _redis_url() as redis_url:
            stores = _stores(directory, redis_url)
            rows = [_per_step(settings, name, store) for name, store in stores.items()]
            for store in stores.values():
                close = getattr(store, "close", None)
                if close is not None:
                    close()
        rows.append(_wall(settings, directory))
        return rows
    finally:
        shutil.rmtree(directory, ignore_errors=True)
