"""A run whose process died resumes from its last finished step: every agent kind, every step.

The crash is simulated in-process, exactly at a chosen point: the store is copied there (what
a process killed at that instant leaves behind) and the run is abandoned; a new Runner resumes
from the copy. The crash matrix (``test_crash_matrix.py``) does the same with real processes
killed with SIGKILL.

What must hold after the resume, for every kind and every crash point:

* the run completes with the answer an uncrashed run gives;
* a tool call whose result was durable when the process died never runs again;
* a call of ``pay`` (not idempotent) that had started but not finished comes back as an
  :class:`~agentkit.UnfinishedToolCall` with the call's key; a call of ``work`` (idempotent)
  in that state runs again, with the same :func:`~agentkit.tool_call_key`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import pytest

from agentkit import Approve, Message, Reject, Role, Runner, UnfinishedToolCall, with_checkpoint_id
from agentkit._checkpoints import load_checkpoint
from agentkit.checkpoint import InMemoryCheckPointStore, PickleSerializer
from agentkit.models import ScriptedChatModel
from agentkit.testing import no_thread_leak
from tests.durable_support import (
    KINDS,
    Crash,
    CrashAt,
    Effects,
    Tools,
    UntilCrash,
    WatchedStore,
    answers,
    build,
    seen_messages,
)

KEY = b"durable recovery tests key 32 b!"
RUN = "crashed-run"


def models(kind: str, crash: CrashAt | None) -> Any:
    table = answers(kind)

    def factory(name: str) -> Any:
        answer = table[name]

        def reply(messages: list[Message]) -> Message:
            if crash is not None:
                crash.tick("model")
            return answer(seen_messages(messages))

        return ScriptedChatModel(reply)

    return factory


def tools_of(effects: Effects, crash: CrashAt | None) -> Tools:
    def hook(moment: str, tool_name: str, call_id: str) -> None:
        if crash is not None:
            crash.tick(moment)

    if crash is not None:
        effects = UntilCrash(effects.path, crash)
    return Tools(effects, hook)


def runner(kind: str, store: InMemoryCheckPointStore, effects: Effects,
           crash: CrashAt | None = None, *, streaming: bool = False) -> Runner:
    agent = build(kind, models(kind, crash), tools_of(effects, crash))
    return Runner(agent, checkpoint_store=store, serializer=PickleSerializer(KEY),
                  enable_streaming=streaming)


def image_messages(store: InMemoryCheckPointStore) -> list[Message]:
    """Every message the durable image of the run holds (history and points)."""
    found: list[Message] = []
    checkpoint = load_checkpoint(store, PickleSerializer(KEY), RUN)

    def visit(value: Any, depth: int = 0) -> None:
        if depth > 50:
            return
        if isinstance(value, Message):
            found.append(value)
            return
        if isinstance(value, dict):
            for item in value.values():
                visit(item, depth + 1)
        elif isinstance(value, (list, tuple, set)):
            for item in value:
                visit(item, depth + 1)
        elif attrs.has(type(value)):
            for field in attrs.fields(type(value)):
                visit(getattr(value, field.name, None), depth + 1)

    visit([record.message() for record in checkpoint.history])
    visit([point.state for point in checkpoint.points])
    return found


def finished_calls(store: InMemoryCheckPointStore) -> set[str]:
    """The ids of the tool calls whose results the store holds (the durable image)."""
    return {message.tool_call_id for message in image_messages(store)
            if message.role is Role.TOOL and message.tool_call_id}


def complete(kind: str, store: InMemoryCheckPointStore, effects: Effects) -> tuple[str, list[Any]]:
    """Resume the run in ``store`` until it completes, answering unfinished calls (yes, then
    no, alternately); return its answer and the unfinished calls it asked about."""
    asked: list[UnfinishedToolCall] = []
    targets: dict[str, Any] | None = None
    for _ in range(10):
        with no_thread_leak():
            result = runner(kind, store, effects).resume(RUN, targets=targets).result()
        if result.interrupt is None:
            return result.text, asked
        targets = {}
        for context in result.interrupt.contexts:
            assert isinstance(context.info, UnfinishedToolCall), context.info
            asked.append(context.info)
            decision = [True, Reject("not again"), Approve(), False][len(asked) % 4]
            targets[context.id] = decision
    raise AssertionError("the run did not complete in 10 resumes")


def uncrashed(kind: str, tmp_path: Path) -> tuple[set[str], set[str]]:
    """The answers an uncrashed run may end with (a Parallel's last branch varies), and the
    calls it makes."""
    effects = Effects(tmp_path / "reference")
    result = runner(kind, InMemoryCheckPointStore(), effects).invoke("go", with_checkpoint_id(RUN))
    answers = {result.text}
    if kind == "parallel":  # the branches finish in any order: any of them can be last
        said = [event.get_message() for event in result.events]
        answers = {m.content for m in said if m is not None and m.content.endswith(" done 1")}
        answers |= {m.content for m in said if m is not None and m.content.endswith(" done 2")}
    return answers, {effect.call_id for effect in effects.read()}


def crash_points(kind: str, tmp_path: Path) -> list[tuple[str, int]]:
    """Every model call, tool start and tool end of an uncrashed run of ``kind``."""
    effects = Effects(tmp_path / "count")
    counted: Counter[str] = Counter()

    class Counting(CrashAt):
        def tick(self, kind: str) -> None:
            counted[kind] += 1

    store = WatchedStore()
    store.crash = counter = Counting("none", 0, store)
    runner(kind, store, effects, counter).invoke("go", with_checkpoint_id(RUN))
    return [(what, number) for what in ("model", "start", "end", "save", "saved")
            for number in range(1, counted[what] + 1)]


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_killed_at_any_step_resumes_and_runs_no_finished_tool_again(
    kind: str, tmp_path: Path
) -> None:
    expected, calls = uncrashed(kind, tmp_path)
    points = crash_points(kind, tmp_path)
    assert points, "the run has steps to crash at"
    for what, number in points:
        effects = Effects(tmp_path / f"effects-{what}-{number}")
        store = WatchedStore()
        store.crash = crash = CrashAt(what, number, store)
        with pytest.raises(Crash):
            runner(kind, store, effects, crash).invoke("go", with_checkpoint_id(RUN))
        left = crash.left
        assert left is not None
        before = effects.read()
        durable = finished_calls(left)
        if "outer-0-0" in durable:  # the agent tool's call finished: so did every call in it
            durable |= {e.call_id for e in before if e.call_id.startswith("inner-")}
        assert left.get(RUN) is not None  # a durable run saves its input when it starts
        said = {message.content for message in image_messages(left)}
        answer, asked = complete(kind, left, effects)
        where = f"{kind}, crashed at {what} {number}"
        if answer:
            assert answer in expected, where
        else:  # it had answered when it died: the resumed run had nothing left to do
            assert said & expected, where
        # Every call the run makes ran, but an unfinished payment the human said not to run.
        ran = {effect.call_id for effect in effects.read()}
        assert ran | {unfinished.call_id for unfinished in asked} == calls, where
        starts = Counter((e.tool, e.call_id, e.key) for e in effects.read() if e.what == "start")
        started_before = {(e.tool, e.call_id, e.key) for e in before if e.what == "start"}
        ended_before = {(e.tool, e.call_id, e.key) for e in before if e.what == "end"}
        for call in started_before:
            tool_name, call_id, key = call
            if call_id in durable:
                assert starts[call] == 1, f"{where}: finished call {call_id} ran again"
            elif tool_name == "pay":
                assert [(u.call_id, u.key) for u in asked if u.call_id == call_id] == [
                    (call_id, key)
                ], f"{where}: the unfinished payment {call_id} was not asked about"
            else:
                assert starts[call] >= 2 or call not in ended_before or call_id in durable, (
                    f"{where}: the unfinished idempotent call {call_id} did not run again"
                )
        for unfinished in asked:
            assert unfinished.tool_name == "pay"
            assert unfinished.call_id not in durable
        assert left.read_steps(RUN) == []  # the completed run left a tombstone only


@pytest.mark.parametrize("kind", ["react", "parallel", "agenttool"])
def test_a_streamed_run_killed_at_a_tool_resumes_too(kind: str, tmp_path: Path) -> None:
    expected, _ = uncrashed(kind, tmp_path)
    effects = Effects(tmp_path / "effects")
    store = InMemoryCheckPointStore()
    crash = CrashAt("end", 2, store)
    agent_runner = runner(kind, store, effects, crash, streaming=True)
    with pytest.raises(Crash):
        agent_runner.invoke("go", with_checkpoint_id(RUN))
    assert crash.left is not None
    assert complete(kind, crash.left, effects)[0] in expected
