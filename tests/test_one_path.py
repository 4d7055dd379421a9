"""One persistence path: components declare with ``AgentRun.save_state``, the writer decides.

The writer (``Progress.declare``) writes what changed since its last write for the address,
whatever the component hands it (a fresh value or one it changes in place); a durable
ChatModelAgent declares through the public run API only; the keywords of ``save_state``
(``info``, ``root_cause``, ``completed``, ``clear``, ``flush``) do what they say.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import attrs
import pytest

from agentkit import (
    AgentEvent,
    AgentRun,
    BaseAgent,
    ChatModelAgent,
    Runner,
    tool,
    with_checkpoint_id,
)
from agentkit._checkpoints import load_checkpoint
from agentkit._points import Journal
from agentkit._progress import (
    DropPoints,
    ExtendField,
    Op,
    Progress,
    PutPoint,
    SetField,
)
from agentkit._runctx import EventLog, RecordedEvent
from agentkit.checkpoint import InMemoryCheckPointStore, PickleSerializer
from agentkit.errors import AgentKitRuntimeError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message
from tests.durable_support import copy_of

AGENTS = Path(__file__).resolve().parent.parent / "agentkit" / "agents"


@attrs.define
class Tally:
    """A custom agent's state: the items counted so far and how many rounds ran."""

    items: list[str]
    rounds: int


class Writes:
    """A writer sink that keeps every commit."""

    def __init__(self) -> None:
        self.commits: list[list[Op]] = []

    def __call__(self, ops: list[Op], sync: bool) -> None:
        self.commits.append(copy.deepcopy(ops))  # as the writer encodes them, at once


def test_the_writer_writes_what_changed_since_its_last_write_for_the_address() -> None:
    writes = Writes()
    progress = Progress(writes)
    address = ("agent:A",)
    state = Tally(items=["a"], rounds=1)
    progress.declare(address, state)
    # the component changes its value in place: the writer kept a copy of what it wrote
    state.items.append("b")
    state.rounds = 2
    progress.declare(address, state)
    progress.declare(address, state)  # nothing changed: nothing written
    assert writes.commits == [
        [PutPoint(address, Tally(items=["a"], rounds=1))],
        [ExtendField(address, "items", ["b"]), SetField(address, "rounds", 2)],
    ]


def test_a_dropped_or_put_point_is_declared_whole_again() -> None:
    writes = Writes()
    progress = Progress(writes)
    child = ("agent:A", "agent:B")
    progress.declare(child, Tally(["x"], 1))
    progress.declare(("agent:A",), {"step": 1}, done=[child])  # a value that is no attrs class
    progress.declare(child, Tally(["x", "y"], 1))  # a new turn of B: its point is new
    assert writes.commits == [
        [PutPoint(child, Tally(["x"], 1))],
        [DropPoints(child), PutPoint(("agent:A",), {"step": 1})],
        [PutPoint(child, Tally(["x", "y"], 1))],
    ]


def test_a_declaration_that_is_not_flushed_rides_with_the_next_write() -> None:
    writes = Writes()
    progress = Progress(writes)
    progress.declare(("agent:A",), Tally(["a"], 1), flush=False)
    assert writes.commits == []
    progress.declare(("agent:B",), Tally([], 0))
    assert writes.commits == [
        [PutPoint(("agent:A",), Tally(["a"], 1)), PutPoint(("agent:B",), Tally([], 0))]
    ]


@attrs.define
class Branches:
    """A composite's state with a history the writer keeps (like a Parallel's lanes)."""

    lanes: list[list[str]]
    unfinished: list[int]


def test_a_kept_history_is_written_by_the_writer_and_left_out_of_deltas() -> None:
    writes = Writes()
    progress = Progress(writes)
    address = ("agent:P",)
    lane = EventLog()
    assert progress.track(lane, address, "lanes", 0)
    assert not progress.track(lane, address, "history")  # one place per history
    state = Branches(lanes=[[]], unfinished=[0])
    progress.declare(address, state, flush=False)
    lane.append(RecordedEvent.of(AgentEvent(agent_name="B", run_path=[]), ()))
    # the lane's entry rides with the next write; the declared lanes (stale now) do not
    progress.declare(address, Branches(lanes=[[]], unfinished=[]), lane)
    [first] = writes.commits
    assert [type(op) for op in first] == [PutPoint, ExtendField, SetField]
    extended = first[1]
    assert isinstance(extended, ExtendField)
    assert (extended.field, extended.index, len(extended.items)) == ("lanes", 0, 1)
    assert first[2] == SetField(address, "unfinished", [])
    progress.untrack(lane)
    progress.declare(address, Branches(lanes=[[]], unfinished=[]))
    # what was written of the field is not what was declared: put whole again
    assert writes.commits[1] == [PutPoint(address, Branches(lanes=[[]], unfinished=[]))]


class _KeepsItsOwnHistory(BaseAgent):
    name = "Keeper"
    description = "keeps the run's own history"

    def execute(self, run: AgentRun) -> None:
        with run.keep_history("history"):
            run.save_state(Tally([], 0))


def test_keep_history_refuses_the_history_the_run_keeps_already() -> None:
    store = InMemoryCheckPointStore()
    runner = Runner(_KeepsItsOwnHistory(), checkpoint_store=store, durability="step")
    with pytest.raises(AgentKitRuntimeError, match="kept already"):
        runner.invoke("go", with_checkpoint_id("k"))


class Counting(BaseAgent):
    """Counts in rounds, declaring its tally (changed in place) after each round; the third
    round fails the first time (the process dies there: ``die`` copies the store)."""

    def __init__(self, die: list[InMemoryCheckPointStore] | None, store: Any) -> None:
        self.name = "Counter"
        self.description = "counts"
        self.die = die
        self.store = store

    def execute(self, run: AgentRun) -> None:
        info = run.resume_info
        tally = info.interrupt_state if info is not None else Tally(items=[], rounds=0)
        while tally.rounds < 5:
            tally.items.append(f"item {tally.rounds}")
            tally.rounds += 1
            run.save_state(tally)
            if tally.rounds == 3 and self.die is not None and not self.die:
                self.die.append(copy_of(self.store, "c"))
        run.emit(AgentEvent(output=None))
        self.done = list(tally.items)


def test_a_custom_agent_changing_its_state_in_place_resumes_from_its_last_step() -> None:
    store = InMemoryCheckPointStore()
    died: list[InMemoryCheckPointStore] = []
    serializer = PickleSerializer(allowed_types=[Tally])
    agent = Counting(died, store)
    Runner(agent, checkpoint_store=store, serializer=serializer).invoke(
        "go", with_checkpoint_id("c")
    )
    [left] = died
    checkpoint = load_checkpoint(left, serializer, "c")
    [point] = checkpoint.points
    assert point.state == Tally(items=["item 0", "item 1", "item 2"], rounds=3)
    resumed = Counting(None, left)
    result = Runner(resumed, checkpoint_store=left, serializer=serializer).resume("c").result()
    assert result.error is None
    assert resumed.done == [f"item {n}" for n in range(5)]


def test_save_state_keywords_reach_the_journal() -> None:
    journal = Journal()
    journal.record(("agent:A", "tool:t:1"), "asked", "shown", root=True)
    journal.declare(("agent:A", "agent:B"), "b")
    journal.declare(("agent:A",), "a")
    assert [p.address for p in journal.points()] == [
        ("agent:A", "tool:t:1"), ("agent:A", "agent:B"), ("agent:A",)
    ]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_a_durable_chat_model_agent_writes_each_step_as_a_delta() -> None:
    class Sizes(InMemoryCheckPointStore):
        def __init__(self) -> None:
            super().__init__()
            self.steps: list[int] = []

        def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
            self.steps.append(len(data))
            super().append_step(checkpoint_id, data, sync=sync)

    rounds = 30
    replies: list[Any] = [
        calls_message(call("add", {"a": n, "b": 1}, id=f"c{n}")) for n in range(rounds)
    ]
    store = Sizes()
    agent = ChatModelAgent(
        "A", "adds", ScriptedChatModel([*replies, "done"]), tools=[add], max_iterations=rounds + 1
    )
    result = Runner(agent, checkpoint_store=store).invoke("go", with_checkpoint_id("d"))
    assert result.text == "done"
    assert len(store.steps) == 2 * rounds + 1
    # the last round's records are as small as the second's: no step writes the conversation
    assert max(store.steps[-3:-1]) <= max(store.steps[2:4]) + 16


def test_built_in_agents_declare_through_the_public_run_api() -> None:
    # (tests/test_builtin_privates.py scans agents/ and prebuilt/ for it, with the AST)
    for path in sorted(AGENTS.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        assert "agentkit._progress" not in source, path.name
        assert "frame.progress" not in source and "journal." not in source, path.name


def test_a_durable_run_cut_by_a_base_exception_keeps_its_last_step() -> None:
    calls: list[int] = []

    @tool
    def count(n: int) -> int:
        """Count."""
        calls.append(n)
        if len(calls) == 2:
            raise SystemExit("the tool ends the process")
        return n

    replies: list[Any] = [
        calls_message(call("count", {"n": 1}, id="c1")),
        calls_message(call("count", {"n": 2}, id="c2")),
        "done",
    ]
    store = InMemoryCheckPointStore()
    agent = ChatModelAgent("A", "counts", ScriptedChatModel(replies), tools=[count])
    try:
        Runner(agent, checkpoint_store=store).invoke("go", with_checkpoint_id("x"))
    except SystemExit:
        pass
    else:
        raise AssertionError("the SystemExit did not reach the caller")
    # the image was kept (it was deleted before), and the run goes on from the second call
    again = ChatModelAgent("A", "counts", ScriptedChatModel(["done"]), tools=[count])
    result = Runner(again, checkpoint_store=store).resume("x").result()
    assert result.text == "done"
    assert calls == [1, 2, 2]
