"""A TurnLoop killed with SIGKILL (security finding A13): its id is free once the Runner's lease
ran out (30 s, not the store's 600 s), and every item ``push`` accepted is handled by the loop
that takes over (the item of the turn that was running included: at least once).

The child process (``tests/turnloop_kill_child.py``) blocks in its first turn, accepts more
items and is killed; the parent's store reads a :class:`~agentkit.testing.ManualClock`, so the
lease runs out without waiting for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentkit import ChatModelAgent, Message, TurnLoop
from agentkit.checkpoint import FileCheckPointStore, InMemoryCheckPointStore, PickleSerializer
from agentkit.checkpoint._binding import loads_for_store
from agentkit.errors import CheckpointBusyError, CheckpointError
from agentkit.models import ScriptedChatModel
from agentkit.testing import ManualClock
from agentkit.turnloop import TurnInput, default_input

ROOT = Path(__file__).resolve().parents[1]
GUARD = 60.0  # failure guard only
KEY = b"turnloop kill tests' key 32 byte"
ITEMS = 8


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def killed_loop(checkpoints: Path, state: Path) -> list[str]:
    """Run the child until it accepted every item and blocks in its first turn, SIGKILL it;
    return the items its pushes accepted."""
    state.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.turnloop_kill_child", str(checkpoints), str(state),
         str(ITEMS)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=child_env(),
    )
    try:
        deadline = time.monotonic() + GUARD
        while not (state / "ready").exists():
            if process.poll() is not None:
                pytest.fail(f"the child ended before it was killed:\n{process.communicate()[1]}")
            assert time.monotonic() < deadline, "the child never got ready"
            time.sleep(0.01)  # polling the child's file, not pacing the test
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == -signal.SIGKILL
    return (state / "accepted").read_text().split()


def next_loop(checkpoints: Path, clock: ManualClock, handled: list[str]) -> TurnLoop[str]:
    def capture(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
        handled.extend(items)
        return default_input(loop, items)

    agent = ChatModelAgent("A", "d", ScriptedChatModel(lambda messages: "ok"))
    return TurnLoop(
        agent,
        gen_input=capture,
        checkpoint_store=FileCheckPointStore(checkpoints, clock=clock),
        checkpoint_id="loop",
        serializer=PickleSerializer(KEY),
    )


def test_a_killed_turnloop_frees_its_id_once_the_runners_lease_ran_out(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    killed_loop(checkpoints, tmp_path / "state")
    clock = ManualClock()
    handled: list[str] = []
    clock.advance(29)  # within the Runner's 30 s lease: still the dead loop's
    with pytest.raises(CheckpointBusyError):
        raise_reason(next_loop(checkpoints, clock, handled))
    clock.advance(2)  # past it (the store's own default would hold it 600 s)
    assert raise_reason(next_loop(checkpoints, clock, handled)) is None


def test_every_item_a_killed_turnloop_accepted_is_handled_by_the_next_loop(
    tmp_path: Path,
) -> None:
    checkpoints = tmp_path / "checkpoints"
    accepted = killed_loop(checkpoints, tmp_path / "state")
    assert accepted == [f"item-{index}" for index in range(ITEMS)]
    clock = ManualClock()
    clock.advance(601)  # past any lease: this test is about the items
    handled: list[str] = []
    assert raise_reason(next_loop(checkpoints, clock, handled)) is None
    assert sorted(handled) == sorted(accepted)  # none lost, none twice
    assert not FileCheckPointStore(checkpoints).get("loop")  # all done: nothing is kept


def raise_reason(loop: TurnLoop[Any]) -> BaseException | None:
    """Run ``loop`` until every item is handled; raise what ended it, if anything did."""
    with loop:
        pass
    reason = loop.wait(GUARD).reason
    if reason is not None:
        raise reason
    return reason


class FailingStore(InMemoryCheckPointStore):
    """Refuses writes once ``failing`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    def set(self, checkpoint_id: str, data: bytes) -> None:
        if self.failing:
            raise OSError("disk full")
        super().set(checkpoint_id, data)


def test_a_pushed_item_is_in_the_store_when_push_returns_and_a_failed_save_refuses_it() -> None:
    store = FailingStore()
    serializer = PickleSerializer(KEY)
    started, release = threading.Event(), threading.Event()

    def reply(messages: list[Message]) -> str:
        started.set()
        assert release.wait(GUARD)
        return "ok"

    agent = ChatModelAgent("A", "d", ScriptedChatModel(reply))
    loop: TurnLoop[str] = TurnLoop(
        agent, checkpoint_store=store, checkpoint_id="loop", serializer=serializer
    )
    with loop:
        assert loop.push("first")
        assert started.wait(GUARD)  # the first turn runs (and blocks)
        assert loop.push("second")
        data = store.get("loop")
        assert data is not None
        kept = loads_for_store(serializer, store, "loop", data)
        assert kept.unhandled_items == ["first", "second"]  # the running turn's item too
        store.failing = True
        with pytest.raises(CheckpointError, match="disk full"):
            loop.push("third")
        store.failing = False
        release.set()
    exit_state = loop.wait(GUARD)
    assert exit_state.reason is None and exit_state.unhandled_items == []
    assert store.get("loop") is None  # every item handled: nothing is kept
