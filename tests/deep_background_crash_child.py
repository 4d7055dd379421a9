"""The child process of the background-task crash tests: a deep agent starts a background
task (a sub-agent, or a sandboxed command), waits for it, and is killed with SIGKILL (by the
parent) while the task runs.

``python -m tests.deep_background_crash_child <store dir> <checkpoint id> <work dir> <kind>``
(kind ``agent`` or ``shell``). It prints ``ready`` when the run starts. The task writes
``start`` and ``end`` lines to ``<work dir>/effects``; until ``<work dir>/go`` exists it
touches ``<work dir>/started`` and waits for it, so the parent knows when to kill. The parent
resumes the run with :func:`build` (the models answer from the conversation, so any process
gives the same reply).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from agentkit import ChatModelAgent, Message, Role, Runner, tool, with_checkpoint_id
from agentkit.backends import SandboxShell
from agentkit.checkpoint import FileCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import deep
from agentkit.testing import call, calls_message

LEASE_TTL = 1.0


SHELL_TASK = (
    "echo start >> effects; while [ ! -e go ]; do touch started; sleep 0.02; done; "
    "echo end >> effects; echo worked"
)
"""The background command (run in the work directory, under a SandboxShell)."""


def build(work: Path, kind: str = "agent") -> tuple[ChatModelAgent, ScriptedChatModel]:
    """The deep agent with its background sub-agent ``counter`` (or a sandboxed shell, for
    ``kind="shell"``), and the deep agent's model."""

    @tool
    def work_once() -> str:
        """Do the work (it waits for the go file)."""
        with open(work / "effects", "a") as file:
            file.write("start\n")
        deadline = time.monotonic() + 60
        while not (work / "go").exists():
            (work / "started").touch()
            if time.monotonic() > deadline:
                return "no go"
            time.sleep(0.02)
        with open(work / "effects", "a") as file:
            file.write("end\n")
        return "worked"

    def worker_reply(messages: list[Message]) -> Message | str:
        if not any(m.role is Role.TOOL for m in messages):
            return calls_message(call("work_once", {}, id="w1"))
        return "counter: " + messages[-1].content

    worker = ChatModelAgent("counter", "does the work once", ScriptedChatModel(worker_reply),
                            tools=[work_once])

    def parent_reply(messages: list[Message]) -> Message | str:
        tools = [m for m in messages if m.role is Role.TOOL]
        if not tools and kind == "shell":
            return calls_message(call("execute", {"command": SHELL_TASK,
                                                  "run_in_background": True}, id="t1"))
        if not tools:
            return calls_message(call("task", {"subagent_type": "counter", "description": "work",
                                               "run_in_background": True}, id="t1"))
        if len(tools) == 1:
            return calls_message(call("task_output", {"task_id": "bg_1", "block": True,
                                                      "timeout": 60}, id="o1"))
        return "final: " + tools[-1].content.splitlines()[-1]

    model = ScriptedChatModel(parent_reply)
    shell = SandboxShell(work, timeout=60) if kind == "shell" else None
    agent = deep.new(model, sub_agents=[worker], shell=shell, without_general_sub_agent=True,
                     background_tasks=True)
    return agent, model


def main() -> None:
    store_dir, checkpoint_id, work, kind = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    runner = Runner(build(work, kind)[0], checkpoint_store=FileCheckPointStore(store_dir),
                    lease_ttl=LEASE_TTL)
    print("ready", flush=True)
    result = runner.invoke("go", with_checkpoint_id(checkpoint_id))
    print("done", result.text, flush=True)


if __name__ == "__main__":
    main()
