"""Human in the loop, review and edit: the human corrects a tool call's arguments before it runs.

A ticket agent books train tickets. Booking needs a human's review: the run stops at the
``book_ticket`` call and shows its arguments; the human approves them as they are, edits them
(a JSON object with the fields to change), or rejects the call with a reason. The run then
resumes with that decision (eino-examples ``human-in-the-loop/2_review-and-edit``).

    python samples/hitl_review_edit.py                                  # asks on stdin
    python samples/hitl_review_edit.py --review '{"date": "2025-06-02"}'
    python samples/hitl_review_edit.py --review ok
    python samples/hitl_review_edit.py --review "no: wrong person"

Offline by default (scripted model); live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, make_model

from agentkit import (
    AgentEvent,
    ApprovalRequest,
    Approve,
    ChatModelAgent,
    Message,
    Reject,
    Role,
    Runner,
    print_events,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.testing import call, calls_message

DEFAULT_REQUEST = "Book a train ticket from Berlin to Prague for Martin Novak on 2025-06-01."


@tool(needs_approval=True)
def book_ticket(passenger: str, origin: str, destination: str, date: str) -> str:
    """Book a train ticket. A human reviews every booking before it is made.

    Args:
        passenger: the traveller's full name.
        origin: departure city.
        destination: arrival city.
        date: travel date as YYYY-MM-DD.
    """
    ticket = f"TK-{len(passenger) * 97}"
    return f"booked {passenger}: {origin} -> {destination} on {date}, seat 42, ticket {ticket}"


def scripted_booker(messages: list[Message]) -> Message | str:
    """Plays the LLM offline; it reads only the conversation, so resuming works anywhere."""
    last = messages[-1]
    if last.role is Role.USER:
        arguments = {
            "passenger": "Martin Novak",
            "origin": "Berlin",
            "destination": "Prague",
            "date": "2025-06-01",
        }
        return calls_message(call("book_ticket", arguments, id="book-1"))
    if "rejected" in last.content:
        return f"I did not book the ticket ({last.content})."
    return f"Your ticket is booked: {last.content}."


def build_runner() -> Runner:
    agent = ChatModelAgent(
        "ticket_agent",
        "books train tickets",
        make_model(scripted_booker),
        instruction="You book train tickets with book_ticket. Report the outcome in one sentence.",
        tools=[book_ticket],
    )
    return Runner(agent, checkpoint_store=InMemoryCheckPointStore())


def decide(request: ApprovalRequest, review: str) -> object:
    """Turn the reviewer's answer into resume data: approve, approve edited, or reject.

    ``ok`` (or an empty answer) approves; ``no`` or ``no: reason`` rejects; a JSON object
    gives new values for some arguments (the others stay as the model made them).
    """
    answer = review.strip()
    if answer.lower() in ("", "ok", "y", "yes"):
        return Approve()
    if answer.lower() in ("n", "no") or answer.lower().startswith("no:"):
        _, _, reason = answer.partition(":")
        return Reject(reason=reason.strip() or "the reviewer said no")
    edits = json.loads(answer)
    if not isinstance(edits, dict):
        raise SystemExit(f"an edit must be a JSON object of arguments, got {answer!r}")
    return Approve(arguments={**request.arguments, **edits})


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Run the booking, review the call, resume; returns the events of both runs."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("request", nargs="?", default=DEFAULT_REQUEST)
    parser.add_argument("--review", help="ok | no[: reason] | a JSON object of edited arguments")
    args = parser.parse_args(argv)
    banner("review and edit")
    runner = build_runner()
    checkpoint_id = f"review-{uuid.uuid4().hex[:8]}"
    print(f"> {args.request}")
    events = print_events(runner.query(args.request, with_checkpoint_id(checkpoint_id)))
    interrupted = events[-1].action.interrupted if events[-1].action else None
    if interrupted is None:
        return events
    (point,) = interrupted.contexts
    request = point.info
    assert isinstance(request, ApprovalRequest)
    print(f"\nREVIEW: {request.tool_name} is about to be called with")
    print(json.dumps(request.arguments, indent=2))
    review = args.review
    if review is None:
        review = input("ok / no[: reason] / edited JSON: ")
    decision = decide(request, review)
    print(f"decision: {decision!r}\n")
    resumed = print_events(runner.resume(checkpoint_id, targets={point.id: decision}))
    return events + resumed


if __name__ == "__main__":
    main()
