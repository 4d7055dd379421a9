"""TurnLoop.push, Eino's push options: a strategy deciding the preempt, a preempt delay, an ack."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from agentkit import TurnLoop, TurnLoopExit
from agentkit.testing import no_thread_leak
from agentkit.turnloop import TurnContext
from tests.test_turnloop import GUARD, Recorder, Worker, finished


@pytest.fixture(autouse=True)
def _no_leaks() -> Iterator[None]:
    with no_thread_leak():
        yield


def test_a_strategy_preempts_only_the_turn_it_chooses() -> None:
    worker = Worker()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(worker.agent, on_events=recorder).start()
    seen: list[list[str] | None] = []

    def low_priority_only(turn: TurnContext[str] | None) -> bool:
        seen.append(None if turn is None else list(turn.consumed))
        return turn is not None and turn.consumed == ["low"]

    loop.push("high")
    assert worker.started.wait(GUARD)
    ack = threading.Event()
    assert loop.push("urgent", preempt=low_priority_only, acknowledged=ack)
    assert ack.is_set()  # nothing to preempt: resolved at once
    worker.release.set()
    loop.stop(idle_for=0)
    assert finished(loop) == TurnLoopExit(reason=None, unhandled_items=[], interrupted_items=[])
    assert seen == [["high"]]
    assert [turn.preempted for turn, _ in recorder.turns] == [False, False]


def test_a_strategy_that_says_yes_preempts_the_running_turn() -> None:
    worker = Worker()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(worker.agent, on_events=recorder).start()
    loop.push("low")
    assert worker.started.wait(GUARD)
    assert loop.push("urgent", preempt=lambda turn: turn is not None and turn.consumed == ["low"])
    worker.release.set()
    loop.stop(idle_for=0)
    finished(loop)
    (first, _), (second, _) = recorder.turns
    assert first.preempted and second.consumed == ["urgent"]


def test_a_delayed_preempt_stops_the_turn_it_saw_once_the_delay_passed() -> None:
    worker = Worker()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(worker.agent, on_events=recorder).start()
    loop.push("first")
    assert worker.started.wait(GUARD)
    ack = threading.Event()
    assert loop.push("urgent", preempt=True, preempt_delay=0.05, acknowledged=ack)
    assert not recorder.turns  # the turn goes on meanwhile
    assert ack.wait(GUARD)  # the delay passed: the preempt was requested from the turn
    assert not recorder.turns
    worker.release.set()
    loop.stop(idle_for=0)
    finished(loop)
    (first, _), (second, _) = recorder.turns
    assert first.preempted and not second.preempted
    assert second.consumed == ["urgent"]


def test_a_delayed_preempt_whose_turn_ended_preempts_nothing() -> None:
    worker = Worker()
    recorder = Recorder()
    loop: TurnLoop[str] = TurnLoop(worker.agent, on_events=recorder).start()
    loop.push("first")
    assert worker.started.wait(GUARD)
    ack = threading.Event()
    assert loop.push("later", preempt=True, preempt_delay=GUARD * 10, acknowledged=ack)
    worker.release.set()  # both turns finish long before the delay
    loop.stop(idle_for=0)
    finished(loop)
    assert ack.wait(GUARD)  # the loop's end resolved it
    assert [turn.preempted for turn, _ in recorder.turns] == [False, False]


def test_push_options_are_checked_and_a_refused_push_is_acknowledged() -> None:
    worker = Worker()
    worker.release.set()
    loop: TurnLoop[str] = TurnLoop(worker.agent)
    with pytest.raises(ValueError, match="preempt_delay"):
        loop.push("x", preempt=True, preempt_delay=-1)
    with pytest.raises(TypeError, match="preempt is a bool"):
        loop.push("x", preempt="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="acknowledged is a threading.Event"):
        loop.push("x", acknowledged=object())  # type: ignore[arg-type]
    loop.start()
    loop.stop()
    finished(loop)
    ack = threading.Event()
    assert loop.push("late", preempt=True, acknowledged=ack) is False
    assert ack.is_set()
