"""An interrupt's point enters a durable run the way every resume point does: through the writer.

``interrupt()``, ``interrupt_event()`` and ``CompositeInterrupt`` declare their points through
the one door ``AgentRun.save_state`` uses (``agentkit._progress.save_point``): kept in the
run's journal and handed to the durable writer, which writes them with the run's next commit.
They are not written on their own: the interrupt event is delivered only after the stop's
save, which holds them. What must hold when the process dies between the interrupt and the
stop's save:

* the pause is neither lost nor doubled: the resumed run pauses once, at the same tool, and
  is resumed by that interrupt's id;
* when a step was written in between (a call of the same round finished meanwhile), the state
  the interrupting tool saved comes back with :func:`~agentkit.get_interrupt_state` (before,
  the image had no point there); with no step in between, the tool starts afresh;
* the call that finished is not run again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentkit import (
    AgentRun,
    BaseAgent,
    ParallelAgent,
    Runner,
    interrupt_event,
    with_checkpoint_id,
)
from agentkit._checkpoints import load_checkpoint
from agentkit.checkpoint import FileCheckPointStore, InMemoryCheckPointStore, PickleSerializer
from agentkit.testing import ManualClock, no_thread_leak
from tests.durable_support import copy_of
from tests.interrupt_crash_child import KEY, RUN, Effects, build

ROOT = Path(__file__).resolve().parent.parent
ASK = ("agent:A", "tool:ask:c-ask")
CHILD = (*ASK, "tool:approve:approve")
GUARD = 30.0


class LastSaveSeen(InMemoryCheckPointStore):
    """Keeps what the store held just before each ``set``: before the last one (the stop's
    save), what a process killed at that instant leaves behind."""

    def __init__(self) -> None:
        super().__init__()
        self.before_set: list[InMemoryCheckPointStore] = []

    def set(self, checkpoint_id: str, data: bytes) -> None:
        self.before_set.append(copy_of(self, checkpoint_id))
        super().set(checkpoint_id, data)


def finish(runner: Runner, effects: Effects, how: str) -> None:
    """Resume the run killed before its stop's save: it pauses once more, at the same tool
    (with the state saved before the crash, if a step held it); resumed by that id, it
    completes."""
    with no_thread_leak():
        paused = runner.resume(RUN).result()
    assert paused.interrupt is not None
    roots = [context for context in paused.interrupt.contexts if context.is_root_cause]
    assert [context.address for context in roots] == [CHILD if how == "composite" else ASK]
    if how == "composite":
        parent = roots[0].parent
        assert parent is not None and parent.address == ASK and parent.info == "the approvals"
    starts = [line for line in effects.read() if line[:2] == ["ask", "start"]]
    # Alone, no step was written after the pause: the tool starts afresh, and asks again.
    assert [line[2] for line in starts] == [None, None if how == "alone" else {"asked": 1}]
    with no_thread_leak():
        done = runner.resume(RUN, targets={roots[0].id: "yes"}).result()
    assert done.interrupt is None and done.text == "all done"
    lines = effects.read()
    assert [line for line in lines if line[0] == "slow"] == (
        [] if how == "alone" else [["slow", "start", None], ["slow", "end", None]]
    )
    assert ["ask", "end", "yes"] in lines


@pytest.mark.parametrize("how", ["interrupt", "composite"])
def test_a_durable_runs_image_holds_the_interrupt_point_after_a_later_step(
    how: str, tmp_path: Path
) -> None:
    effects = Effects(tmp_path / "effects")
    store = LastSaveSeen()
    runner = Runner(build(effects, how), checkpoint_store=store,
                    serializer=PickleSerializer(KEY), durability="step")
    with no_thread_leak():
        first = runner.invoke("go", with_checkpoint_id(RUN))
    assert first.interrupt is not None
    left = store.before_set[-1]  # the image as the stop's save found it
    image = load_checkpoint(left, PickleSerializer(KEY), RUN)
    assert image.reason == "running"
    states = {point.address: point.state for point in image.points}
    assert states[ASK] == {"asked": 1}
    if how == "composite":
        assert states[CHILD] == {"child": 1}
    finish(Runner(build(effects, how), checkpoint_store=left,
                  serializer=PickleSerializer(KEY), durability="step"), effects, how)


@pytest.mark.parametrize("how", ["interrupt", "composite", "alone"])
def test_a_process_killed_before_the_stops_save_pauses_once_when_resumed(
    how: str, tmp_path: Path
) -> None:
    effects = Effects(tmp_path / "effects")
    where = tmp_path / "store"
    child = subprocess.run(
        [sys.executable, "-m", "tests.interrupt_crash_child", str(where), str(effects.path), how],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert child.stdout.split() == ["ready"]
    clock = ManualClock()
    clock.advance(120)  # the dead run's lease (30 s) ran out
    finish(Runner(build(effects, how), checkpoint_store=FileCheckPointStore(where, clock=clock),
                  serializer=PickleSerializer(KEY), durability="step"), effects, how)


class Pauses(BaseAgent):
    """A custom agent that pauses the run with a state of its own."""

    name = "P"
    description = "pauses"

    def __init__(self, paused: threading.Event) -> None:
        self.paused = paused

    def execute(self, run: AgentRun) -> None:
        event = interrupt_event("approve?", {"step": 2})
        self.paused.set()
        run.emit(event)


class SavesAfter(BaseAgent):
    """A custom agent that declares a step once its sibling has paused."""

    name = "S"
    description = "saves a step"

    def __init__(self, paused: threading.Event) -> None:
        self.paused = paused

    def execute(self, run: AgentRun) -> None:
        if not self.paused.wait(GUARD):
            raise AssertionError("the sibling never paused")
        run.save_state({"saved": 1})


def test_an_interrupt_events_point_is_written_by_the_next_commit() -> None:
    paused = threading.Event()
    store = LastSaveSeen()
    agent = ParallelAgent("par", "both at once", [Pauses(paused), SavesAfter(paused)])
    runner = Runner(agent, checkpoint_store=store, serializer=PickleSerializer(KEY),
                    durability="step")
    with no_thread_leak():
        result = runner.invoke("go", with_checkpoint_id(RUN))
    assert result.interrupt is not None
    [context] = result.interrupt.contexts
    assert context.address == ("agent:par", "agent:P") and context.info == "approve?"
    image = load_checkpoint(store.before_set[-1], PickleSerializer(KEY), RUN)
    states = {point.address: point.state for point in image.points}
    assert states[("agent:par", "agent:P")] == {"step": 2}
