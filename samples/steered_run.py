"""Steer a run while it works: a message sent mid-run reaches the agent's next model call.

The clerk checks February's invoices. While its tool runs, the user adds "Also check March"
with ``run.send(...)``: nothing is cancelled, the February check finishes, and the model's
next call sees the new message after the tool's result, so the clerk goes on to March before
it answers. (A ``TurnLoop`` would instead wait for the next turn, or preempt this one.)

    python samples/steered_run.py
    python samples/steered_run.py "Check April's invoices." "And May."

Offline by default (a scripted model); live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import zlib
from collections.abc import Iterator, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, make_model

from agentkit import AgentEvent, ChatModelAgent, Message, Role, Runner, print_events, tool
from agentkit.results import RunIterator
from agentkit.testing import call, calls_message

# A check takes a while: here, until the user has typed (at most a few seconds), so that the
# demo goes the same way every time.
user_typed = threading.Event()
CHECK_SECONDS = 5.0

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


@tool
def check_invoices(month: str) -> str:
    """Check the supplier invoices of one month for duplicates and missing payments.

    Args:
        month: the month, by name.
    """
    user_typed.wait(CHECK_SECONDS)
    seed = zlib.crc32(month.lower().encode())
    return f"{month}: {3 + seed % 5} invoices, {seed % 2} unpaid"


def scripted_clerk(messages: list[Message]) -> Message | str:
    """Plays the LLM offline: checks every month the user named that it has not checked yet."""
    asked = [month for m in messages if m.role is Role.USER for month in MONTHS
             if re.search(month, m.content, re.IGNORECASE)]
    checked = [m.content.split(":")[0] for m in messages if m.role is Role.TOOL]
    todo = [month for month in dict.fromkeys(asked) if month not in checked]
    if todo:
        return calls_message(call("check_invoices", {"month": todo[0]}, id=f"c{len(messages)}"))
    found = "; ".join(m.content for m in messages if m.role is Role.TOOL)
    return f"Checked {', '.join(checked) or 'nothing'}. {found}."


def steered(run: RunIterator, note: str) -> Iterator[AgentEvent]:
    """The run's events; at its first tool call, the user sends ``note`` (the run goes on)."""
    sent = False
    for event in run:
        yield event
        message = event.output.message_output if event.output is not None else None
        calls = message is not None and message.role is Role.ASSISTANT and bool(
            message.get_message().tool_calls
        )
        if calls and not sent:
            print(f"\nyou> {note}   (sent while the agent works)", flush=True)
            sent = run.send(note)
            user_typed.set()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    question = args[0] if args else "Check February's invoices."
    note = args[1] if len(args) > 1 else "Also check March, please."
    banner("steered_run: a message sent while the agent works")
    agent = ChatModelAgent(
        "clerk",
        "Checks supplier invoices.",
        make_model(scripted_clerk),
        instruction="Check the invoices of every month the user asks about, then summarize.",
        tools=[check_invoices],
    )
    print(f"you> {question}")
    with Runner(agent).query(question) as run:
        print_events(steered(run, note))
        result = run.result()
    if result.unused_messages:  # sent after the agent's last model call
        print(f"(not used: {[m.content for m in result.unused_messages]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
