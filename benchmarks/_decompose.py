"""``decompose``: where agentkit's extra time per ReAct step goes, layer by layer (info rows).

Five loops over the same server policy (10 tool rounds, no latency) run interleaved in rounds:

- ``A`` the raw loop (the baseline of every row);
- ``B`` the raw loop in a worker thread that hands 2 events per step to the calling thread
  through a ``queue.SimpleQueue`` (what a thread-per-run design costs by itself);
- ``F`` a hand-written loop on ``OpenAIChatModel`` and the ``@tool`` tool, in the calling
  thread (agentkit's model client and tool layer, without Runner or agent);
- ``G`` ``F`` in a worker thread handing 2 events per step to the caller (``F`` + ``B``'s cost);
- ``E`` agentkit: ``Runner`` + ``ChatModelAgent`` (the ``react-k10-l0`` row).

So ``F - A`` is the model client and tool layer, ``G - F`` the thread handoff, ``E - G`` the
agent, runner and event bookkeeping. Each row gives wall and client-process CPU time per step
over ``A``; CPU time is the steadier figure on a loaded machine.
"""

from __future__ import annotations

import queue
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from benchmarks import _raw
from benchmarks._inproc import Settings, interleave
from benchmarks._report import Row
from benchmarks._server import Policy, base_url

__all__ = ["decompose"]

STEPS = 10


def _in_thread(loop: Callable[[Callable[[Any], None]], object]) -> Callable[[], object]:
    """Run ``loop(emit)`` in a worker thread; the caller receives what it emits."""

    def run() -> None:
        events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        end = object()

        def work() -> None:
            try:
                loop(events.put)
            finally:
                events.put(end)

        worker = threading.Thread(target=work, name="bench-worker")
        worker.start()
        while events.get() is not end:
            pass
        worker.join()

    return run


def _variants(url: str, stream: bool) -> tuple[dict[str, Callable[[], object]], Callable[[], None]]:
    from agentkit import Message, concat_message_stream, tool_message, user_message
    from agentkit.models import OpenAIChatModel
    from benchmarks._agentkit_side import AK_TOOLS, AgentkitLoop

    raw = _raw.RawLoop(url, ("add",), stream=stream)
    emitting = _raw.RawLoop(url, ("add",), stream=stream)
    agent = AgentkitLoop(url, ("add",), steps=STEPS, stream=stream)
    add = AK_TOOLS["add"]
    client = OpenAIChatModel("bench", api_key="sk-bench", base_url=url)
    model = client.with_tools([add.info()])

    def hand_loop(emit: Callable[[Any], None] | None = None) -> str:
        messages: list[Message] = [user_message("go")]
        while True:
            if stream:
                reply = concat_message_stream(model.stream(messages))
            else:
                reply = model.generate(messages)
            messages.append(reply)
            if emit is not None:
                emit(reply)
            if not reply.tool_calls:
                return reply.content
            for call in reply.tool_calls:
                result = add.invoke(call.function.arguments)  # type: ignore[attr-defined]
                message = tool_message(result, call.id, call.function.name)
                messages.append(message)
                if emit is not None:
                    emit(message)

    def raw_emitting(emit: Callable[[Any], None]) -> None:
        def twice(message: dict[str, Any]) -> None:
            emit(message)  # the assistant message event ...
            emit(message)  # ... and one for the tool result, as agentkit sends

        emitting.on_message = twice
        try:
            emitting.run("go")
        finally:
            emitting.on_message = None

    def close() -> None:
        raw.close()
        emitting.close()
        agent.close()
        client.close()

    variants: dict[str, Callable[[], object]] = {
        "A raw loop": lambda: raw.run("go"),
        "B raw loop in a worker thread, 2 events/step to the caller": _in_thread(raw_emitting),
        "F hand loop on OpenAIChatModel + @tool, no Runner": hand_loop,
        "G = F in a worker thread, 2 events/step to the caller": _in_thread(hand_loop),
        "E agentkit Runner + ChatModelAgent": lambda: agent.run("go"),
    }
    return variants, close


def decompose(settings: Settings) -> list[Row]:
    """Measure the five variants, streamed and not; one info row per variant and mode."""
    rows = []
    for stream in (False, True):
        url = base_url(settings.port, Policy(STEPS))
        variants, close = _variants(url, stream)
        cpu: dict[str, list[float]] = {name: [] for name in variants}

        def timed(
            name: str, run: Callable[[], object], cpu: dict[str, list[float]] = cpu
        ) -> Callable[[], float]:
            def measure() -> float:
                cpu_started = time.process_time()
                started = time.perf_counter()
                run()
                elapsed = time.perf_counter() - started
                cpu[name].append(time.process_time() - cpu_started)
                return elapsed

            return measure

        try:
            walls = interleave(
                [timed(name, run) for name, run in variants.items()], settings.rounds(31)
            )
        finally:
            close()
        base_wall = statistics.median(walls[0])
        base_cpu = statistics.median(cpu["A raw loop"])
        mode = "streamed" if stream else "non-streamed"
        for (name, _), wall in zip(variants.items(), walls, strict=True):
            extra_wall = (statistics.median(wall) - base_wall) / STEPS * 1e6
            extra_cpu = (statistics.median(cpu[name]) - base_cpu) / STEPS * 1e6
            rows.append(
                Row(
                    f"decompose {mode}: {name}",
                    "ms",
                    [x * 1e3 for x in wall],
                    extra={
                        "extra_wall_us_per_step": extra_wall,
                        "extra_cpu_us_per_step": extra_cpu,
                    },
                    note=f"over A per step: wall +{extra_wall:.0f} us, CPU +{extra_cpu:.0f} us",
                )
            )
    return rows
