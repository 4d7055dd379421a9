"""Peak thread count of agentkit runs: tool rounds, parallel branches and nesting depth.

Run: ``python benchmarks/bench_threads.py``

Threads are counted with ``threading.active_count()`` from inside the models and tools (where
a run is at its widest), and barriers make every concurrent part of a case be alive at the
same moment, so the peaks are exact and repeatable, not timing-dependent. "extra" is the peak
minus the threads alive before the run (the main thread).

Cases:
  (a) one ChatModelAgent whose model asks for 3 tool calls in one round;
  (b) a ParallelAgent of 8 ChatModelAgents, each making 2 tool calls in one round;
  (c) one ChatModelAgent with one tool call, bare and nested in 1 and 4 workflow levels.

Where the threads come from: every run has one worker thread (the Runner's); a round of n
tool calls (n > 1) runs them on n threads of the run's tool pool while the agent's thread
waits; a ParallelAgent runs each branch on a thread of its own pool. A single tool call and
every wrapper level (flow wrapper, Sequential, Loop) run inline, in the thread that pulls.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentkit import (
    Agent,
    ChatModelAgent,
    LoopAgent,
    Message,
    ParallelAgent,
    Role,
    Runner,
    SequentialAgent,
    assistant_message,
    tool,
)
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, summarize


class Peak:
    """The highest ``threading.active_count()`` seen by :meth:`sample`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.value = 0

    def sample(self) -> None:
        count = threading.active_count()
        with self.lock:
            self.value = max(self.value, count)


def agent_with_tool_round(name: str, calls: int, peak: Peak, barrier: threading.Barrier) -> Agent:
    """A ChatModelAgent that makes ``calls`` tool calls in one round, then answers."""

    @tool
    def fetch(item: int) -> str:
        """Fetch one item (waits until every concurrent call is running, then samples)."""
        barrier.wait()
        peak.sample()
        return f"item {item}"

    def reply(messages: list[Message]) -> Message:
        peak.sample()
        if messages and messages[-1].role is Role.TOOL:
            return assistant_message(f"{name} fetched {calls} items")
        return calls_message(*(call("fetch", {"item": i}) for i in range(calls)))

    return ChatModelAgent(name, "fetches items", ScriptedChatModel(reply), tools=[fetch])


def nest(agent: Agent, levels: int) -> Agent:
    """``agent`` in ``levels`` workflow wrappers: a one-round Loop, then Sequentials."""
    if levels >= 1:
        agent = LoopAgent("loop", "one round", [agent], max_iterations=1)
    for level in range(levels - 1):
        agent = SequentialAgent(f"seq{level}", "one step", [agent])
    return agent


def measure(build: Callable[[Peak], Agent]) -> tuple[int, int]:
    """Run the agent ``build`` makes; return (peak threads, peak minus threads before)."""
    before = threading.active_count()
    peak = Peak()
    agent = build(peak)
    with no_thread_leak():
        events = list(Runner(agent).query("go"))
    errors = [summarize(event) for event in events if event.err is not None]
    if errors:
        raise SystemExit(f"the run failed: {errors}")
    return peak.value, peak.value - before


def main() -> None:
    cases: list[tuple[str, Callable[[Peak], Agent]]] = [
        (
            "(a) 1 agent, 3 parallel tool calls",
            lambda peak: agent_with_tool_round("a", 3, peak, threading.Barrier(3, timeout=10)),
        ),
        ("(b) ParallelAgent, 8 agents x 2 tool calls", _parallel_of_eight),
    ]
    for levels in (0, 1, 4):
        cases.append((f"(c) 1 agent, 1 tool call, {levels} level(s) of nesting", _nested(levels)))
    print(f"threads alive before each run: {threading.active_count()} (the main thread)")
    print(f"{'case':<48} {'peak':>5} {'extra':>6}")
    for label, build in cases:
        peak, extra = measure(build)
        print(f"{label:<48} {peak:>5} {extra:>6}")


def _nested(levels: int) -> Callable[[Peak], Agent]:
    def build(peak: Peak) -> Agent:
        return nest(agent_with_tool_round("c", 1, peak, threading.Barrier(1)), levels)

    return build


def _parallel_of_eight(peak: Peak) -> Agent:
    # One barrier for all 16 tool calls: the peak is sampled when all of them run at once.
    barrier = threading.Barrier(16, timeout=10)
    branches = [agent_with_tool_round(f"r{i}", 2, peak, barrier) for i in range(8)]
    return ParallelAgent("par", "eight branches", branches)


if __name__ == "__main__":
    main()
