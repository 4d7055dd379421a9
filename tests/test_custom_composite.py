"""A composite agent written with the public API only: ``AgentRun.run_child`` and ``save_state``.

``samples/custom_composite.py`` is the composite (``ReleasePipeline``): killed with SIGKILL in
the middle of a stage and resumed by another process, it goes on from its last finished step;
in-process, its children are named below it and see the history, and a pause or a cancel
(``durability="stop"``) resumes at the stage it declared.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentRun,
    BaseAgent,
    CancelHandle,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    event_from_message,
    interrupt,
    new_transfer_to_agent_action,
    set_sub_agents,
    tool,
    with_cancel,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.schema import FunctionCall, ToolCall, assistant_message
from agentkit.testing import no_thread_leak

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "custom_composite.py"
GUARD = 60.0


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def effect_lines(path: Path) -> list[tuple[str, str, str]]:
    if not path.exists():
        return []
    return [tuple(line.split()) for line in path.read_text().splitlines() if line]  # type: ignore[misc]


def test_killed_with_sigkill_mid_run_it_resumes_from_its_last_step(tmp_path: Path) -> None:
    effects, gate = tmp_path / "effects.txt", tmp_path / "gate"
    command = [sys.executable, str(SAMPLE), "--store", str(tmp_path / "runs"), "--id", "rel-1",
               "--effects", str(effects), "--gate", str(gate)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=child_env(), cwd=ROOT)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + GUARD
        # The test stage started (it waits for the gate): the build stage is behind it.
        while ("start", "test") not in [line[:2] for line in effect_lines(effects)]:
            assert child.poll() is None, child.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the test stage never started"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=GUARD)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    before = effect_lines(effects)
    assert [line[:2] for line in before] == [("start", "build"), ("done", "build"),
                                            ("start", "test")]

    gate.touch()
    resumed = subprocess.run(command, capture_output=True, text=True, env=child_env(), cwd=ROOT,
                             timeout=GUARD, check=False)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.split("\n")[:2] == ["ready", "resumed"]
    assert "publish finished: publish: ok" in resumed.stdout
    after = effect_lines(effects)
    # The build stage did not run again; the test stage's call went on under the same key
    # (its tool is idempotent by key); the publish stage ran once.
    assert [line[:2] for line in after].count(("start", "build")) == 1
    test_keys = {line[2] for line in after if line[1] == "test"}
    assert len(test_keys) == 1
    assert [line[:2] for line in after].count(("done", "test")) == 1
    assert [line[:2] for line in after][-2:] == [("start", "publish"), ("done", "publish")]


@pytest.fixture
def composite(sample: Callable[[str], ModuleType]) -> ModuleType:
    return sample("custom_composite")


def test_its_children_are_named_below_it_and_see_the_history(
    composite: ModuleType, tmp_path: Path
) -> None:
    effects = composite.Effects(tmp_path / "effects.txt")
    stages = [composite.stage_agent(stage, effects) for stage in composite.STAGES]
    seen: list[list[str]] = []

    class Recording(BaseAgent):
        name = "recorder"
        description = "records what it is given"

        def execute(self, run: AgentRun) -> None:
            seen.append([str(message.content) for message in run.input.messages])

    pipeline = composite.ReleasePipeline("release", [*stages, Recording()])
    with no_thread_leak():
        result = Runner(pipeline).invoke("Release 1.0")
    assert result.error is None
    paths = {tuple(step.agent_name for step in event.run_path) for event in result.events}
    assert paths == {("release", "build"), ("release", "test"), ("release", "publish")}
    # The last child was given the conversation: the input, then every stage's messages.
    assert seen[0][0] == "Release 1.0"
    assert any("build finished" in text for text in seen[0])
    assert any("publish finished" in text for text in seen[0])


class _Ask(BaseAgent):
    """A stage that pauses the run once, through a tool that interrupts."""

    name = "approve"
    description = "asks before publishing"

    def __init__(self) -> None:
        @tool
        def ask() -> str:
            """Ask for approval."""
            return f"approved: {interrupt('publish?')}"

        def reply(messages: list[Message]) -> Message:
            if messages[-1].role is Role.TOOL:
                return assistant_message(str(messages[-1].content))
            return assistant_message("", tool_calls=[ToolCall(id="a1", function=FunctionCall(
                "ask", "{}"))])

        self.agent = ChatModelAgent("approve", "asks", ScriptedChatModel(reply), tools=[ask])

    def execute(self, run: AgentRun) -> None:
        run.run_child(self.agent)


def test_a_pause_resumes_at_the_stage_it_declared(composite: ModuleType, tmp_path: Path) -> None:
    effects = composite.Effects(tmp_path / "effects.txt")
    build = composite.stage_agent("build", effects)
    publish = composite.stage_agent("publish", effects)
    pipeline = composite.ReleasePipeline("release", [build, _Ask(), publish])
    runner = Runner(pipeline, checkpoint_store=InMemoryCheckPointStore(), durability="stop")
    with no_thread_leak():
        first = runner.invoke("Release 1.0", with_checkpoint_id("p-1"))
        assert first.interrupt is not None
        [context] = first.interrupt.contexts
        # The interrupt's parents are the components that declared their state on the way.
        parents: list[tuple[str, ...]] = []
        parent = context.parent
        while parent is not None:
            parents.append(tuple(parent.address))
            parent = parent.parent
        assert ("agent:release",) in parents
        second = runner.resume("p-1", targets={context.id: "yes"}).result()
    assert second.error is None, second.error
    assert second.text == "publish finished: publish: ok"
    lines = [line[:2] for line in effect_lines(tmp_path / "effects.txt")]
    assert lines == [("start", "build"), ("done", "build"), ("start", "publish"),
                     ("done", "publish")]


class _Slow(BaseAgent):
    """A stage that cancels the run, then checks: the run stops inside it."""

    name = "slow"
    description = "is cancelled"

    def __init__(self, handle: CancelHandle) -> None:
        self.handle = handle
        self.turns = 0

    def execute(self, run: AgentRun) -> None:
        self.turns += 1
        if self.turns == 1:
            self.handle.cancel()
            run.check_cancelled()


def test_a_cancel_resumes_at_the_stage_it_declared(
    composite: ModuleType, tmp_path: Path
) -> None:
    effects = composite.Effects(tmp_path / "effects.txt")
    handle = CancelHandle()
    slow = _Slow(handle)
    stages: list[Any] = [composite.stage_agent("build", effects), slow,
                         composite.stage_agent("publish", effects)]
    pipeline = composite.ReleasePipeline("release", stages)
    runner = Runner(pipeline, checkpoint_store=InMemoryCheckPointStore(), durability="stop")
    with no_thread_leak():
        with pytest.raises(AgentCancelledError):
            runner.invoke("Release 1.0", with_checkpoint_id("c-1"), with_cancel(handle))
        second = runner.resume("c-1").result()
    assert second.error is None, second.error
    assert slow.turns == 2
    lines = [line[:2] for line in effect_lines(tmp_path / "effects.txt")]
    assert lines.count(("start", "build")) == 1
    assert lines[-1] == ("done", "publish")


# --- AgentRun.run_child and save_state, one by one ---------------------------------------------


class _Say(BaseAgent):
    """Says one thing per turn; counts its turns."""

    def __init__(self, name: str, text: str) -> None:
        self.name, self.description, self.text = name, f"says {text}", text
        self.turns = 0

    def execute(self, run: AgentRun) -> None:
        self.turns += 1
        run.emit(event_from_message(assistant_message(self.text), None, Role.ASSISTANT))


def test_run_child_sink_forward_and_after() -> None:
    held: list[AgentEvent] = []
    child = _Say("child", "hi")

    class Holder(BaseAgent):
        name, description = "holder", "holds its child's events, then passes them on"

        def execute(self, run: AgentRun) -> None:
            last = run.run_child(child, sink=held.append, after=["before"])
            assert last is not None and held == [last]
            for event in held:
                run.forward(event)

    result = Runner(Holder()).invoke("go")
    assert [[step.agent_name for step in event.run_path] for event in result.events] == [
        ["holder", "before", "child"]
    ]
    assert result.text == "hi"


def test_a_declared_agent_that_transferred_is_not_resumed_again() -> None:
    """A custom agent that declared its state and then transferred is done: when the agent it
    transferred to pauses, the resumed run goes on there, not in the first agent."""

    class Declarer(BaseAgent):
        name, description = "declarer", "declares, then transfers"
        turns = 0

        def execute(self, run: AgentRun) -> None:
            type(self).turns += 1
            run.save_state({"step": 1})
            run.emit(AgentEvent(action=new_transfer_to_agent_action("asker")))

    asker = _Ask()
    asker.name = "asker"
    flow = set_sub_agents(Declarer(), [asker])
    runner = Runner(flow, checkpoint_store=InMemoryCheckPointStore(), durability="stop")
    with no_thread_leak():
        first = runner.invoke("go", with_checkpoint_id("t-1"))
        assert first.interrupt is not None
        [context] = first.interrupt.contexts
        second = runner.resume("t-1", targets={context.id: "yes"}).result()
    assert second.error is None, second.error
    assert second.text == "approved: yes"
    assert Declarer.turns == 1


def test_resume_false_runs_the_child_afresh(tmp_path: Path) -> None:
    handle = CancelHandle()
    slow = _Slow(handle)

    class Fresh(BaseAgent):
        name, description = "fresh", "runs its child afresh when resumed"

        def execute(self, run: AgentRun) -> None:
            run.save_state({"resumed": run.resume_info is not None})
            run.run_child(slow, resume=False if run.resume_info is not None else None)

    runner = Runner(Fresh(), checkpoint_store=InMemoryCheckPointStore(), durability="stop")
    with no_thread_leak():
        with pytest.raises(AgentCancelledError):
            runner.invoke("go", with_checkpoint_id("f-1"), with_cancel(handle))
        assert runner.resume("f-1").result().error is None
    assert slow.turns == 2
