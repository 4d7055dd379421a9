"""Framework cost per ReAct step, and how it changes as the conversation grows.

A step is one model call that asks for one tool, the tool call, and the events they make.
The model here answers instantly in-process (no HTTP), so the time measured is agentkit's own
cost: building the call, running the tool, naming/recording/delivering events. It is printed
per step for a run of N steps, early steps vs late steps (flat means the cost does not grow
with the history), streaming and not. Run: ``python benchmarks/bench_react_step.py``.

For the HTTP client's own cost per call see ``bench_openai_client.py``.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import sys
import time
import tracemalloc
from collections.abc import Sequence

from agentkit import ChatModelAgent, Message, Role, Runner, StreamReader, ToolInfo, tool
from agentkit.models import ModelOptions
from agentkit.testing import call, calls_message


@tool
def step(n: int) -> str:
    """One step of work."""
    return f"done {n}"


class InstantModel:
    """A tool-calling model that answers at once: N tool-call steps, then a final answer."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.stamps: list[float] = []

    def with_tools(self, tools: Sequence[ToolInfo]) -> InstantModel:
        return self

    def _reply(self, messages: Sequence[Message]) -> Message:
        self.stamps.append(time.perf_counter())
        done = len(self.stamps) - 1  # O(1): the model's own cost must not grow with history
        if done < self.steps:
            return calls_message(call("step", {"n": done}, id=f"c{done}"))
        return Message(Role.ASSISTANT, "finished")

    def generate(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> Message:
        return self._reply(messages)

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        from agentkit.models.scripted import split_message
        from agentkit.streams import stream_from_list

        return stream_from_list(split_message(self._reply(messages)))


def run_once(steps: int, streaming: bool) -> list[float]:
    model = InstantModel(steps)
    agent = ChatModelAgent("bench", "benchmark", model, tools=[step], max_iterations=steps + 1)
    runner = Runner(agent, enable_streaming=streaming)
    for event in runner.query("go"):
        if streaming and event.output is not None:
            event.get_message()
        if event.err is not None:
            raise event.err
    stamps = model.stamps
    return [b - a for a, b in itertools.pairwise(stamps)]


def report(steps: int, streaming: bool, repeats: int = 5) -> None:
    per_step: list[list[float]] = []
    for _ in range(repeats):
        per_step.append(run_once(steps, streaming))
    early = statistics.median(x for run in per_step for x in run[:10])
    late = statistics.median(x for run in per_step for x in run[-10:])
    mode = "streaming" if streaming else "non-streaming"
    print(
        f"{mode:14} {steps:4} steps: per step {early * 1e3:6.3f} ms (first 10) "
        f"{late * 1e3:6.3f} ms (last 10)"
    )


def idle_run_memory() -> None:
    """Memory held by a run that is started but not consumed (its events wait in the queue)."""
    agent = ChatModelAgent("idle", "d", InstantModel(0), tools=[step])
    runner = Runner(agent)
    list(runner.query("warm up"))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    runs = [runner.query("hi") for _ in range(50)]
    for events in runs:
        list(events)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    print(f"memory per finished-but-held run: {grown / 50 / 1024:.1f} KiB")


def main() -> None:
    print(f"python {sys.version.split()[0]}")
    for streaming in (False, True):
        for steps in (20, 100):
            report(steps, streaming)
    idle_run_memory()


if __name__ == "__main__":
    main()
