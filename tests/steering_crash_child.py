"""The child of the steering kill test: a durable run, a message sent to it, then SIGKILL.

``python -m tests.steering_crash_child <store dir> <checkpoint id>``: runs the clerk agent of
:mod:`tests.test_steering` with a file checkpoint store; while its tool waits, the main
thread sends a message, prints ``sent`` once ``send`` returned, and waits to be killed.
"""

from __future__ import annotations

import sys
import threading

from agentkit import Runner, with_checkpoint_id
from agentkit.checkpoint import FileCheckPointStore
from tests.steering_support import LEASE_TTL, clerk


def main() -> None:
    directory, checkpoint_id = sys.argv[1], sys.argv[2]
    started = threading.Event()
    never = threading.Event()
    runner = Runner(clerk(started, never), checkpoint_store=FileCheckPointStore(directory),
                    lease_ttl=LEASE_TTL)
    run = runner.query("check February", with_checkpoint_id(checkpoint_id))
    if not started.wait(60):
        sys.exit("the tool never started")
    if run.send("also check March") is not True:
        sys.exit("send was refused")
    print("sent", flush=True)
    never.wait(120)  # killed here


if __name__ == "__main__":
    main()
