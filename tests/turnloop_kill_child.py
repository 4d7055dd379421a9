"""A child process for the TurnLoop kill tests: it is killed with SIGKILL by the parent.

    python -m tests.turnloop_kill_child <checkpoint_dir> <state_dir> <items>

It runs a :class:`~agentkit.TurnLoop` on a file checkpoint store; the first turn's model call
blocks (until the kill). It pushes ``item-0`` (the turn that blocks), then ``item-1`` ...
while the turn runs, writing each item to ``<state_dir>/accepted`` once ``push`` returned
``True``; then it writes ``<state_dir>/ready`` and waits to be killed.
"""

from __future__ import annotations

import os
import sys
import threading

from agentkit import ChatModelAgent, Message, TurnLoop
from agentkit.checkpoint import FileCheckPointStore, PickleSerializer
from agentkit.models import ScriptedChatModel

KEY = b"turnloop kill tests' key 32 byte"
WAIT = 120.0  # the parent kills the child long before; a failure guard only

checkpoints, state_dir, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
turn_started = threading.Event()


def reply(messages: list[Message]) -> str:
    turn_started.set()
    threading.Event().wait(WAIT)  # until the kill
    raise SystemExit("the parent never killed this process")


def note(name: str, text: str) -> None:
    fd = os.open(os.path.join(state_dir, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


agent = ChatModelAgent("A", "d", ScriptedChatModel(reply))
loop: TurnLoop[str] = TurnLoop(
    agent,
    checkpoint_store=FileCheckPointStore(checkpoints),
    checkpoint_id="loop",
    serializer=PickleSerializer(KEY),
)
loop.start()
for index in range(count):
    item = f"item-{index}"
    if loop.push(item):
        note("accepted", item + "\n")
    if index == 0 and not turn_started.wait(WAIT):
        raise SystemExit("the first turn never started")
note("ready", "")
threading.Event().wait(WAIT)
raise SystemExit("the parent never killed this process")
