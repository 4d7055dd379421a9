"""A composite agent of your own, durable across ``kill -9``: a release pipeline.

``ReleasePipeline`` is written here, with agentkit's public API only: a ``BaseAgent`` whose
turn runs its child agents one after another with ``run.run_child(...)`` (each child named,
recorded in the run's history, cancellable, resumable at its own place) and declares where it
is with ``run.save_state(...)`` before each child. Run with a checkpoint id on a durable
Runner (``durability="step"``, the default with a store), every finished model reply and tool
call of the children and every step of the pipeline is in the store before the run goes on:
kill the process anywhere and ``runner.resume(id)`` in another process goes on from the last
finished step. No step's tool runs twice to completion: the tools write each effect once per
``tool_call_key()``, the key a call keeps across a crash.

Offline (scripted models play the LLMs: each answers from the conversation it is sent, so a
resumed run gets the same answers).

    python samples/custom_composite.py --store runs/ --id release-1 --effects effects.txt
    # kill it (kill -9) while it runs, then the same command again resumes it
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentkit import (
    AgentRun,
    BaseAgent,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    agent_with_options,
    tool,
    tool_call_key,
    with_checkpoint_id,
)
from agentkit.checkpoint import FileCheckPointStore
from agentkit.errors import CheckpointBusyError, CheckpointNotFoundError, ResumeError
from agentkit.models import ScriptedChatModel
from agentkit.schema import FunctionCall, ToolCall, assistant_message

STAGES = ("build", "test", "publish")


class ReleasePipeline(BaseAgent):
    """Runs its stages in order; a stage that stops (pauses, fails, is cancelled) stops it.

    Its resumable state is the index of the stage it is at, a plain ``dict``: what a resumed
    turn gets back as ``run.resume_info.interrupt_state``.
    """

    def __init__(self, name: str, stages: Sequence[Any]) -> None:
        self.name = name
        self.description = "builds, tests and publishes a release, one stage after another"
        # As flow nodes, the stages build their input from the run's history: each sees what
        # the stages before it said.
        self.stages = tuple(agent_with_options(stage) for stage in stages)

    def execute(self, run: AgentRun) -> None:
        start = 0
        if run.resume_info is not None:
            state = run.resume_info.interrupt_state
            if not isinstance(state, dict) or "stage" not in state:
                raise ResumeError(f"{self.name}: no saved stage to resume from ({state!r})")
            start = state["stage"]
        for index in range(start, len(self.stages)):
            run.save_state({"stage": index})  # durable before the stage starts
            last = run.run_child(self.stages[index])
            if last is not None and (last.err is not None or last.interrupted):
                return  # the run stops here; resumed, it goes on at this stage


# --- the stages: one tool each, whose effect is written once per call key ---------------------


class Effects:
    """The effects file: ``start <stage> <key>`` and ``done <stage> <key>`` lines.

    A call whose ``done`` line is there already (a crash cut it short after its effect, and
    the resumed run calls it again) does nothing twice: the key is the same.
    """

    def __init__(self, path: Path, gate: Path | None = None) -> None:
        self.path = path
        self.gate = gate
        self.lock = threading.Lock()

    def lines(self) -> list[list[str]]:
        if not self.path.exists():
            return []
        return [line.split() for line in self.path.read_text().splitlines() if line]

    def write(self, what: str, stage: str, key: str) -> None:
        with self.lock, self.path.open("a") as out:
            out.write(f"{what} {stage} {key}\n")
            out.flush()
            os.fsync(out.fileno())

    def do(self, stage: str) -> str:
        key = tool_call_key()
        if ["done", stage, key] in self.lines():
            return f"{stage}: done already"
        self.write("start", stage, key)
        if stage == "test" and self.gate is not None:
            # Held here until the gate file exists (bounded): a test kills the process now.
            deadline = time.monotonic() + 60.0
            while not self.gate.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        self.write("done", stage, key)
        return f"{stage}: ok"


def stage_agent(stage: str, effects: Effects) -> ChatModelAgent:
    """A stage: a model that calls its stage's tool once, then reports."""

    @tool(name=f"run_{stage}", idempotent=True)
    def run_stage() -> str:
        """Run this stage of the release."""
        return effects.do(stage)

    def reply(messages: list[Message]) -> Message:
        last = messages[-1]
        if last.role is Role.TOOL:
            return assistant_message(f"{stage} finished: {last.content}")
        call = ToolCall(id=f"call-{stage}", function=FunctionCall(f"run_{stage}", "{}"))
        return assistant_message("", tool_calls=[call])

    return ChatModelAgent(
        stage,
        f"the {stage} stage",
        ScriptedChatModel(reply),
        instruction=f"You run the {stage} stage of a release.",
        tools=[run_stage],
    )


def make_runner(store_dir: Path, effects: Effects) -> Runner:
    pipeline = ReleasePipeline("release", [stage_agent(stage, effects) for stage in STAGES])
    return Runner(pipeline, checkpoint_store=FileCheckPointStore(store_dir), lease_ttl=2.0)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", type=Path, default=Path("runs"), help="checkpoint folder")
    parser.add_argument("--id", default="release-1", help="the run's checkpoint id")
    parser.add_argument("--effects", type=Path, default=Path("effects.txt"))
    parser.add_argument("--gate", type=Path, default=None,
                        help="the test stage waits for this file (for a test to kill it)")
    args = parser.parse_args(argv)
    effects = Effects(args.effects, args.gate)
    runner = make_runner(args.store, effects)
    print("ready", flush=True)
    deadline = time.monotonic() + 30.0
    while True:
        try:
            result = runner.resume(args.id).result()
            print("resumed", flush=True)
            break
        except CheckpointNotFoundError:
            result = runner.invoke("Release version 1.2.0", with_checkpoint_id(args.id))
            break
        except CheckpointBusyError:
            # A killed run's lease is held until it expires (lease_ttl): then it is ours.
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    if result.error is not None:
        raise SystemExit(f"the release failed: {result.error}")
    print(result.text, flush=True)


if __name__ == "__main__":
    main()
