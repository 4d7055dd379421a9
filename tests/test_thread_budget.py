"""The thread budget of a run: it does not grow with nesting depth, and nothing outlives it.

Thread counts are sampled from inside the model and the tool (the places where a run is
busiest), so the measurements are deterministic: no sleeps, no polling.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

import pytest

from agentkit import (
    Agent,
    AgentEvent,
    AgentInput,
    AgentRunOption,
    AsyncGenerator,
    ChatModelAgent,
    LoopAgent,
    Message,
    ParallelAgent,
    Role,
    Runner,
    SequentialAgent,
    assistant_message,
    event_from_message,
    run_in_worker,
    tool,
)
from agentkit.iterators import AsyncIterator
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, summarize


class ThreadSampler:
    """Records ``threading.active_count()`` (and the new threads' names) each time it is asked."""

    def __init__(self) -> None:
        self.before = set(threading.enumerate())
        self.counts: list[int] = []
        self.extra_names: list[list[str]] = []
        self.lock = threading.Lock()

    def sample(self) -> None:
        # One snapshot gives both numbers (active_count() is len(enumerate())), so a thread
        # of an earlier test ending meanwhile cannot skew the difference.
        threads = threading.enumerate()
        with self.lock:
            self.counts.append(len(threads))
            self.extra_names.append(sorted(t.name for t in threads if t not in self.before))

    @property
    def peak_extra(self) -> int:
        """The most threads alive at once beyond those alive before the run."""
        return max(len(names) for names in self.extra_names)


def sampled_agent(sampler: ThreadSampler) -> ChatModelAgent:
    """A ChatModelAgent with one tool; the model and the tool both sample the thread count."""

    @tool
    def probe() -> str:
        """Sample the thread count."""
        sampler.sample()
        return "sampled"

    def reply(messages: list[Message]) -> Message:
        sampler.sample()
        if messages and messages[-1].role is Role.TOOL:
            return assistant_message("done")
        return calls_message(call("probe"))

    return ChatModelAgent("worker", "samples threads", ScriptedChatModel(reply), tools=[probe])


def wrap(agent: Agent, levels: int) -> Agent:
    """``agent`` inside ``levels`` workflow wrappers (a Loop innermost, Sequentials outside)."""
    wrapped: Agent = agent
    if levels >= 1:
        wrapped = LoopAgent("loop", "one round", [wrapped], max_iterations=1)
    for level in range(levels - 1):
        wrapped = SequentialAgent(f"seq{level}", "one step", [wrapped])
    return wrapped


def measure(levels: int, *, streaming: bool = False) -> tuple[ThreadSampler, list[AgentEvent]]:
    sampler = ThreadSampler()
    agent = wrap(sampled_agent(sampler), levels)
    with no_thread_leak():
        events = list(Runner(agent, enable_streaming=streaming).query("go"))
    return sampler, events


@pytest.mark.parametrize("streaming", [False, True])
def test_thread_count_does_not_grow_with_nesting_depth(streaming: bool) -> None:
    bare, bare_events = measure(0, streaming=streaming)
    one, _ = measure(1, streaming=streaming)
    four, four_events = measure(4, streaming=streaming)
    assert len(bare.counts) == len(one.counts) == len(four.counts) == 3  # model, tool, model
    # One thread beyond the caller's: the run's worker (the single tool call runs inline).
    assert bare.peak_extra == one.peak_extra == four.peak_extra == 1, four.extra_names
    assert bare.extra_names[0] == four.extra_names[0] == ["agentkit-run"]
    assert [s[2:] for s in map(summarize, bare_events)] == [
        s[2:] for s in map(summarize, four_events)
    ]
    assert [str(step) for step in four_events[-1].run_path] == [
        "seq2",
        "seq1",
        "seq0",
        "loop",
        "worker",
    ]


def test_nesting_inside_a_parallel_branch_adds_no_thread_either() -> None:
    def peak_extra(levels: int) -> int:
        sampler = ThreadSampler()
        branches = [wrap(sampled_agent(sampler), levels)]
        with no_thread_leak():
            list(Runner(ParallelAgent("par", "d", branches)).query("go"))
        return sampler.peak_extra

    # A single branch runs in the run's worker itself, however deep its agent sits.
    assert peak_extra(0) == peak_extra(4) == 1


class Exploding:
    """A custom agent whose worker raises."""

    name = "exploding"
    description = "raises inside its worker"

    def run(self, input: AgentInput, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
        def work(generator: AsyncGenerator[AgentEvent]) -> None:
            generator.send(
                event_from_message(assistant_message("about to fail"), None, Role.ASSISTANT)
            )
            raise ZeroDivisionError("custom agent failed")

        return run_in_worker(work)


def test_exception_in_a_custom_agent_worker_becomes_an_error_event_with_traceback() -> None:
    with no_thread_leak():
        events = list(Runner(SequentialAgent("seq", "d", [Exploding()])).query("go"))
    assert [summarize(e) for e in events] == [
        ("exploding", ["seq", "exploding"], "assistant", "about to fail", None),
        ("exploding", ["seq", "exploding"], "error", "custom agent failed", None),
    ]
    err = events[-1].err
    assert isinstance(err, ZeroDivisionError)
    assert err.__traceback__ is not None
    frames = []
    tb: TracebackType | None = err.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    assert frames[-1] == "work"


def test_exception_in_a_bare_custom_agent_run_leaves_no_thread() -> None:
    with no_thread_leak():
        events = list(Exploding().run(AgentInput()))
    assert isinstance(events[-1].err, ZeroDivisionError)
    assert events[-1].err.__traceback__ is not None


def _endless(sampler: Callable[[], None] | None = None) -> tuple[Agent, ScriptedChatModel]:
    def reply(messages: list[Message]) -> str:
        if sampler is not None:
            sampler()
        return f"round {len(messages)}"

    model = ScriptedChatModel(reply)
    return LoopAgent("forever", "never ends", [ChatModelAgent("talker", "d", model)]), model


def test_closing_the_iterator_early_stops_an_endless_loop() -> None:
    agent, model = _endless()
    with no_thread_leak():
        events = Runner(agent).query("go")
        first = [events.next()[0] for _ in range(3)]
        events.close()  # returns once the run's thread has ended
        calls_after_close = len(model.calls)
    assert [summarize(e)[3] for e in first if e is not None] == ["round 1", "round 2", "round 3"]
    assert len(model.calls) == calls_after_close
    assert events.next() == (None, False)


def test_leaving_the_with_block_stops_endless_parallel_branches() -> None:
    models = []
    branches = []
    for i in range(3):
        agent, model = _endless()
        models.append(model)
        branches.append(SequentialAgent(f"branch{i}", "d", [agent]))
    with no_thread_leak():
        with Runner(ParallelAgent("par", "d", branches)).query("go") as events:
            for seen, _ in enumerate(events, start=1):
                if seen == 12:
                    break
        counts = [len(m.calls) for m in models]
    assert sum(counts) >= 12
    assert [len(m.calls) for m in models] == counts
