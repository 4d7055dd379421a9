"""A durable run's stop saves its writer's image: one source for resume.

With ``durability="step"`` the checkpoint a stop saves (interrupt, cancel, failure) is the
writer's image with what was committed but not written yet (the stop's own declarations, the
drops held back, the kept histories' last entries): its points, ids, infos and order are the
image's, and the store holds exactly that afterwards. It is the same checkpoint a
``durability="stop"`` run saves from its journal, in the journal's order, without the points a
resumed run got back to and did not declare again (a resumed child that completed), and
without what a component forgot (``AgentRun.discard_state``, a child that completed before
its parent declared again).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from agentkit import (
    AgentAction,
    AgentEvent,
    AgentRun,
    AgentTool,
    BaseAgent,
    ChatModelAgent,
    InterruptContext,
    InterruptInfo,
    ParallelAgent,
    Runner,
    SequentialAgent,
    interrupt,
    tool,
    with_checkpoint_id,
)
from agentkit._checkpoints import Checkpoint, StepRecord, load_checkpoint, new_point
from agentkit._durable import StepWriter
from agentkit._points import ResumePoint
from agentkit._progress import DropPoints, Progress, PutPoint, apply_ops
from agentkit.checkpoint import InMemoryCheckPointStore, PickleSerializer
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, run_events
from tests.durable_support import copy_of

RUN = "image"


@tool
def pay(amount: int) -> str:
    """Pay an amount after approval."""
    approved = interrupt(f"approve paying {amount}?", state={"amount": amount})
    return f"paid {amount}" if approved else "payment declined"


@tool
def lookup() -> str:
    """Look something up."""
    return "found it"


def payer(name: str, replies: list[Any]) -> ChatModelAgent:
    return ChatModelAgent(name, "pays", ScriptedChatModel(replies), tools=[pay, lookup])


class Stage(BaseAgent):
    """Declares a state, then completes (``pause``: declares, then pauses the run)."""

    def __init__(self, name: str, pause: bool = False) -> None:
        self.name = name
        self.description = "a stage"
        self.pause = pause

    def execute(self, run: AgentRun) -> None:
        if run.resume_info is not None:
            run.emit(AgentEvent(output=None))
            return
        run.save_state({"stage": self.name})
        if self.pause:
            run.save_state({"stage": self.name, "asked": True}, info=f"{self.name} asks",
                           root_cause=True, flush=False)
            run.emit(AgentEvent(action=AgentAction(interrupted=InterruptInfo(data="ask"))))


class Pipeline(BaseAgent):
    """Runs ``first`` (which completes) and ``second`` (which pauses) with no declaration of
    its own in between; before them it declares, handles a failure of its own
    (``discard_state``) and declares again."""

    def __init__(self) -> None:
        self.name = "Pipe"
        self.description = "a pipeline"

    def execute(self, run: AgentRun) -> None:
        if run.resume_info is not None:
            return
        run.save_state({"at": "start"})
        run.discard_state()  # it handled its stop and went on
        run.save_state({"at": "stages"})
        run.run_child(Stage("first"))
        run.run_child(Stage("second", pause=True))


def parallel_flow() -> SequentialAgent:
    branches = [
        payer(f"B{i}", [calls_message(call("pay", {"amount": i}, id=f"p{i}")), f"{i} done"])
        for i in (1, 2)
    ]
    quick = ChatModelAgent("Quick", "answers", ScriptedChatModel(["quick answer"]))
    return SequentialAgent("S", "d", [
        ParallelAgent("P", "fan out", [*branches, quick]),
        ChatModelAgent("After", "sums up", ScriptedChatModel(["summary"])),
    ])


SCENARIOS = {
    "a tool round": lambda: payer("A", [
        calls_message(call("pay", {"amount": 5}, id="p1"), call("lookup", id="l1")), "done",
    ]),
    "parallel branches": parallel_flow,
    "a custom composite": Pipeline,
}


def shape(checkpoint: Checkpoint, ordered: bool) -> list[Any]:
    """What a checkpoint holds, but what is fresh in every run (ids, sequence numbers); the
    points in their order if ``ordered`` (else sorted: branches run in any order)."""
    def text(value: Any) -> str:
        return re.sub(r"seq=\d+", "seq=_", repr(value))

    points = [(p.address, p.info, p.is_root_cause, text(p.state)) for p in checkpoint.points]
    return [
        points if ordered else sorted(points),
        text(checkpoint.history),
        checkpoint.session_values,
        checkpoint.reason,
    ]


class Finals:
    """Keeps the points each durable stop took from its writer's image."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.taken: list[list[ResumePoint]] = []
        original = StepWriter.final_points

        def final_points(writer: StepWriter, *args: Any) -> list[ResumePoint] | None:
            points = original(writer, *args)
            if points is not None:
                self.taken.append(list(points))
            return points

        monkeypatch.setattr(StepWriter, "final_points", final_points)


def stops(make: Any, durability: str) -> list[tuple[Checkpoint, Sequence[InterruptContext]]]:
    """Run ``make()`` until it completes, resuming each pause by one root cause (the first by
    address); each stop's saved checkpoint and the interrupt contexts shown."""
    store = InMemoryCheckPointStore()
    serializer = PickleSerializer()
    runner = Runner(make(), checkpoint_store=store, serializer=serializer,
                    durability=durability)
    events = run_events(runner.query("go", with_checkpoint_id(RUN)))
    saved: list[tuple[Checkpoint, Sequence[InterruptContext]]] = []
    for _ in range(5):
        last = events[-1] if events else None
        if last is None or last.action is None or last.action.interrupted is None:
            return saved
        contexts = last.action.interrupted.contexts
        saved.append((load_checkpoint(store, serializer, RUN), contexts))
        root = min((c for c in contexts if c.is_root_cause), key=lambda c: c.address)
        events = run_events(runner.resume(RUN, targets={root.id: True}))
    raise AssertionError("the run did not complete")


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_durable_stop_saves_the_writers_image(
    scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    finals = Finals(monkeypatch)
    durable = stops(SCENARIOS[scenario], "step")
    assert durable, "the run stops"
    assert len(finals.taken) == len(durable)
    for (checkpoint, contexts), image in zip(durable, finals.taken, strict=True):
        # The store holds the image: the same points, ids, infos, states, in its order
        # (compared as text: some states compare by identity).
        assert list(map(repr, checkpoint.points)) == list(map(repr, image))
        # The contexts shown are the image's points.
        ids = {point.id for point in image}
        assert {context.id for context in contexts} <= ids
    # The same checkpoints as a run saved at its stops from its journal.
    journaled = stops(SCENARIOS[scenario], "stop")
    ordered = scenario != "parallel branches"
    assert [shape(c, ordered) for c, _ in durable] == [shape(c, ordered) for c, _ in journaled]


def test_a_resumed_run_drops_what_it_got_back_to_and_what_was_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    finals = Finals(monkeypatch)
    [(checkpoint, contexts)] = stops(Pipeline, "step")
    # The completed stage and the state forgotten before it are not saved; the pausing
    # stage's point is, with its info, after its parent's (the order they were declared in).
    assert [(p.address, p.state, p.info, p.is_root_cause) for p in checkpoint.points] == [
        (("agent:Pipe",), {"at": "stages"}, None, False),
        (("agent:Pipe", "agent:second"), {"stage": "second", "asked": True}, "second asks",
         True),
    ]
    [root] = contexts
    assert root.id == checkpoint.points[1].id and root.info == "second asks"
    assert [list(map(repr, taken)) for taken in finals.taken] == [
        list(map(repr, checkpoint.points))
    ]

    # The parallel flow's second stop: the branch resumed by its id (B1, the first by
    # address) completed, the other paused again (its points saved again); the image held
    # the completed one's points, loaded when the run resumed.
    [(first, _), (second, _)] = stops(parallel_flow, "step")
    resumed, other = "agent:B1", "agent:B2"
    addresses = [point.address for point in second.points]
    assert not [address for address in addresses if resumed in address]
    assert [address for address in addresses if other in address]
    assert [address for address in (p.address for p in first.points) if resumed in address]


def test_a_handled_failure_below_a_call_leaves_the_image_with_the_next_step() -> None:
    # The agent tool's inner run saved its steps, then failed; the outer agent's handler
    # turned the failure into a message (discard_state). The outer agent's next step drops
    # what the inner run saved from the image: a process killed after it does not keep it.
    store = InMemoryCheckPointStore()
    left: list[InMemoryCheckPointStore] = []

    def answer(messages: list[Any]) -> str:
        left.append(copy_of(store, RUN))  # what a process killed here leaves
        return "done"

    inner = ChatModelAgent("Inner", "works", ScriptedChatModel([
        calls_message(call("lookup", id="i1")), RuntimeError("the inner model is down"),
    ]), tools=[lookup])
    outer = ChatModelAgent(
        "Outer", "delegates",
        ScriptedChatModel([calls_message(call("Inner", {"request": "go"}, id="c1")), answer]),
        tools=[AgentTool(inner)], tool_exception_handler=lambda error, call: f"failed: {error}",
    )
    result = Runner(outer, checkpoint_store=store).invoke("go", with_checkpoint_id(RUN))
    assert result.error is None and result.text == "done"
    [image] = [load_checkpoint(copy, PickleSerializer(), RUN) for copy in left]
    assert [point.address for point in image.points] == [("agent:Outer",)]


def test_an_interrupts_point_is_written_with_its_id_and_info() -> None:
    writes: list[list[Any]] = []
    progress = Progress(lambda ops, sync: writes.append(ops))
    progress.declare(("agent:A",), {"n": 1}, info="shown", root_cause=True)
    [[put]] = writes
    assert isinstance(put, PutPoint)
    assert put.info == "shown" and put.root and put.id
    progress.declare(("agent:A",), {"n": 2})  # a plain declaration after it: put whole, bare
    assert writes[1] == [PutPoint(("agent:A",), {"n": 2})]
    points: dict[tuple[str, ...], Any] = {}
    apply_ops(writes[0], None, points, new_point, own=lambda value: value)
    [point] = points.values()
    assert (point.id, point.info, point.is_root_cause) == (put.id, "shown", True)


def test_a_forgotten_point_is_dropped_with_the_next_declaration_above_it() -> None:
    writes: list[list[Any]] = []
    progress = Progress(lambda ops, sync: writes.append(ops))
    child = ("agent:A", "tool:t:1")
    progress.declare(child, {"asked": 1})
    progress.forget(child)
    progress.declare(("agent:B",), {"b": 1})  # elsewhere: the drop waits
    assert not [op for ops in writes for op in ops if isinstance(op, DropPoints)]
    progress.declare(("agent:A",), {"a": 1})  # the component above: written with it
    assert writes[-1][0] == DropPoints(child)
    progress.forget(("agent:B",))
    ops, order = progress.close()  # the stop's save: the held drop, the order declared
    assert ops == [DropPoints(("agent:B",))]
    assert order == [("agent:A",)]


def test_an_interrupts_put_reads_back_from_a_signed_step_record() -> None:
    serializer = PickleSerializer()
    put = PutPoint(("agent:A", "tool:pay:p"), {"amount": 5}, "id-1", "approve?", True)
    record = StepRecord("g", 1, [put], None)
    loaded = serializer.loads(serializer.dumps(record, checkpoint_id=RUN), checkpoint_id=RUN)
    assert loaded.ops == [put]


def test_a_put_without_id_info_or_root_still_applies() -> None:
    # A PutPoint of an earlier release has none of the three (the stored corpus of
    # tests/test_durable_corpus.py folds such records; the decoder gives them the defaults).
    old = PutPoint(("agent:A",), {"n": 1})
    for name in ("id", "info", "root"):
        object.__delattr__(old, name)
    points: dict[tuple[str, ...], Any] = {}
    apply_ops([old], None, points, new_point, own=lambda value: value)
    [point] = points.values()
    assert point.address == ("agent:A",) and point.state == {"n": 1}
    assert point.id and point.info is None and not point.is_root_cause
