"""A durable run that pauses in a tool while another call of the round finishes, for the tests
of a crash between the interrupt and the stop's save (``tests/test_durable_interrupts.py``).

The agent asks for two calls at once: ``ask`` pauses the run (:func:`~agentkit.interrupt`, or a
child of a :class:`~agentkit.tools.CompositeInterrupt`), ``slow`` finishes after it, so its result is
written (a step record) after the pause was declared. Each tool appends what it did to an
effects file outside the process.

``python -m tests.interrupt_crash_child <store dir> <effects file> <interrupt|composite|alone>`` runs
it with a file store whose stop's save (``set``) kills the process with SIGKILL before it
writes: the process dies after the interrupt was declared and before the stop was saved.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from agentkit import (
    ChatModelAgent,
    Message,
    Role,
    Runner,
    get_interrupt_state,
    interrupt,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import FileCheckPointStore, PickleSerializer
from agentkit.models import ScriptedChatModel
from agentkit.schema import FunctionCall, ToolCall, assistant_message
from agentkit.tools import CompositeInterrupt

RUN = "paused-run"
KEY = b"durable interrupts tests key 32b"


class Effects:
    """Appends ``[tool, what, detail]`` lines to a file (one ``O_APPEND`` write per line)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, *line: Any) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(list(line)) + "\n").encode())
        finally:
            os.close(fd)

    def read(self) -> list[list[Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]


def build(effects: Effects, how: str) -> ChatModelAgent:
    """The agent: one round of ``ask`` and ``slow``, then its answer.

    ``how``: ``"interrupt"`` (``ask`` calls ``interrupt``), ``"composite"`` (a child of
    ``ask`` does, through a ``CompositeInterrupt``), ``"alone"`` (as ``"interrupt"``, with
    no ``slow`` call: no step is written between the pause and the stop's save).
    """
    asked = threading.Event()

    def pause(state: dict[str, int]) -> str:
        try:
            if how == "composite":
                group = CompositeInterrupt("the approvals")
                result = group.call(approve, call_id="approve")
                group.raise_if_interrupted(state=state)
                assert isinstance(result, str)
                return result
            return str(interrupt("approve?", state=state))
        finally:
            asked.set()

    @tool
    def approve() -> str:
        """Ask a human."""
        return str(interrupt("approve the child?", state={"child": 1}))

    @tool
    def ask() -> str:
        """Ask before going on."""
        saved = get_interrupt_state()
        effects.write("ask", "start", saved)
        answer = pause({"asked": 1 if saved is None else saved["asked"] + 1})
        effects.write("ask", "end", answer)
        return f"asked: {answer}"

    @tool
    def slow() -> str:
        """Finish after ``ask`` paused."""
        effects.write("slow", "start", None)
        if not asked.wait(30):
            raise AssertionError("ask never paused")
        effects.write("slow", "end", None)
        return "slow done"

    def reply(messages: list[Message]) -> Message:
        if any(message.role is Role.TOOL for message in messages):
            return assistant_message("all done")
        calls = [ToolCall(id="c-ask", function=FunctionCall("ask", "{}"))]
        if how != "alone":
            calls.append(ToolCall(id="c-slow", function=FunctionCall("slow", "{}")))
        return assistant_message("", calls)

    return ChatModelAgent("A", "asks, then goes on", ScriptedChatModel(reply), tools=[ask, slow])


class DyingAtStopSave(FileCheckPointStore):
    """A file store whose ``set`` (only the stop's save: the durable writer rebases with
    ``set_base``) kills the process before it writes."""

    def set(self, checkpoint_id: str, data: bytes) -> None:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    where, effects_path, how = sys.argv[1:4]
    runner = Runner(
        build(Effects(Path(effects_path)), how),
        checkpoint_store=DyingAtStopSave(where),
        serializer=PickleSerializer(KEY),
        durability="step",
    )
    print("ready", flush=True)
    runner.invoke("go", with_checkpoint_id(RUN))
    print("not killed", flush=True)


if __name__ == "__main__":
    main()
