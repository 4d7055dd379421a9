"""Human in the loop: a payment agent that asks for approval, then resumes in a new process.

The run stops at the payment tool's ``interrupt()``; the checkpoint is saved in a file store;
the answer is taken on stdin (or from ``--approve yes|no``); a *new process* resumes the run
from the file store with that answer.

    python samples/approval.py
    python samples/approval.py --approve yes
    python samples/approval.py --approve no --store /tmp/checkpoints

Offline by default (scripted model); live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import uuid
import zlib
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import make_model

from agentkit import (
    AgentEvent,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    interrupt,
    print_events,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import FileCheckPointStore
from agentkit.testing import call, calls_message

DEFAULT_STORE = os.path.join(os.getcwd(), ".agentkit-checkpoints")


@tool
def pay(payee: str, amount: float) -> str:
    """Pay an amount of euros to a payee. A human must approve every payment.

    Args:
        payee: who gets the money.
        amount: how many euros.
    """
    approved = interrupt(f"Pay {amount:.2f} EUR to {payee}? (yes/no)")
    if approved:
        reference = zlib.crc32(f"{payee}:{amount:.2f}".encode()) % 10_000
        return f"paid {amount:.2f} EUR to {payee}, reference PAY-{reference:04d}"
    return f"payment of {amount:.2f} EUR to {payee} was declined by the user"


def scripted_payer(messages: list[Message]) -> Message | str:
    """Plays the LLM offline; it only looks at the conversation, so it works in any process."""
    last = messages[-1]
    if last.role is Role.USER:
        return calls_message(call("pay", {"payee": "ACME Corp", "amount": 120.0}, id="pay-1"))
    if "declined" in last.content:
        return "The payment was not made: you declined it."
    return f"Done: {last.content}."


def build_runner(store_dir: str) -> Runner:
    agent = ChatModelAgent(
        "payer",
        "pays invoices after human approval",
        make_model(scripted_payer),
        instruction="You pay invoices with the pay tool. Report the outcome in one sentence.",
        tools=[pay],
    )
    return Runner(agent, checkpoint_store=FileCheckPointStore(store_dir))


def start(store_dir: str, approve: str | None) -> int:
    checkpoint_id = f"approval-{uuid.uuid4().hex[:8]}"
    runner = build_runner(store_dir)
    print(f"[process {os.getpid()}] running, checkpoint id {checkpoint_id}")
    question = "Pay the ACME invoice of 120 EUR."
    events = print_events(runner.query(question, with_checkpoint_id(checkpoint_id)))
    last = events[-1]
    if last.action is None or last.action.interrupted is None:
        return 0 if last.err is None else 1
    (point,) = last.action.interrupted.contexts
    answer = approve
    if answer is None:
        answer = input(f"{point.info} ").strip().lower()
    print(f"[process {os.getpid()}] saved; resuming in a new process with answer {answer!r}")
    return subprocess.call(
        [
            sys.executable, os.path.abspath(__file__), "--store", store_dir,
            "--resume", checkpoint_id, "--interrupt-id", point.id, "--approve", answer,
        ]
    )


def resume(store_dir: str, checkpoint_id: str, interrupt_id: str, approve: str) -> int:
    runner = build_runner(store_dir)
    print(f"[process {os.getpid()}] resuming {checkpoint_id}")
    approved = approve in ("y", "yes", "true", "1")
    resumed = runner.resume(checkpoint_id, targets={interrupt_id: approved})
    events: list[AgentEvent] = print_events(resumed)
    return 1 if any(event.err is not None for event in events) else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--approve", choices=["yes", "no", "y", "n"], help="answer without asking")
    parser.add_argument("--store", default=DEFAULT_STORE, help="checkpoint directory")
    parser.add_argument("--resume", help=argparse.SUPPRESS)
    parser.add_argument("--interrupt-id", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.resume:
        return resume(args.store, args.resume, args.interrupt_id, args.approve or "no")
    return start(args.store, args.approve)


if __name__ == "__main__":
    raise SystemExit(main())
