"""Human in the loop, follow-up: the agent asks the human questions in the middle of its run.

A trip planner is asked for an itinerary with too little to go on. It hands the gap to a
follow-up agent (an agent used as a tool), whose ``ask_user`` tool stops the run with a
question (``interrupt``); the human's answer is the tool's result when the run resumes. The
follow-up agent asks again until it knows the interests and the daily budget, then the planner
writes the itinerary (eino-examples ``human-in-the-loop/4_follow-up``). The question is asked
from deep inside the run: planner > follow_up agent > ask_user.

    python samples/hitl_follow_up.py                      # answers on stdin
    python samples/hitl_follow_up.py --answers "museums and food" "about 150 USD a day"

Offline by default (scripted models); live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import uuid
from collections.abc import Iterator, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, make_model

from agentkit import (
    AgentEvent,
    AgentTool,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    interrupt,
    print_events,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.testing import call, calls_message

DEFAULT_REQUEST = "Plan a 3-day trip to New York City for me."


@tool
def ask_user(question: str) -> str:
    """Ask the user a question and wait for the answer.

    Args:
        question: what to ask, in one or two short sentences.
    """
    answer = interrupt(question)
    return f"the user answered: {answer}"


def _answers(messages: list[Message]) -> list[str]:
    return [m.content for m in messages if m.role is Role.TOOL and m.tool_name == "ask_user"]


def scripted_follow_up(messages: list[Message]) -> Message | str:
    """Plays the follow-up agent: asks for interests, then (if still missing) the budget."""
    answers = " ".join(_answers(messages))
    if not answers:
        question = (
            "What do you enjoy most on a trip (museums, food, parks, shows...)? "
            "And your daily budget?"
        )
        return calls_message(call("ask_user", {"question": question}, id="ask-1"))
    if not re.search(r"\d", answers):
        return calls_message(
            call("ask_user", {"question": "What is your daily budget, roughly?"}, id="ask-2")
        )
    said = [answer.removeprefix("the user answered: ") for answer in _answers(messages)]
    return f"Collected: {'; '.join(said)}"


def scripted_planner(messages: list[Message]) -> Message | str:
    """Plays the planner: asks the follow-up agent first, then writes the itinerary."""
    last = messages[-1]
    if last.role is Role.USER:
        return calls_message(
            call(
                "follow_up",
                {"request": "Find out the traveller's interests and daily budget."},
                id="fu-1",
            )
        )
    collected = last.content
    interests = "museums" if "museum" in collected else "the city's sights"
    food = " and a food tour" if "food" in collected else ""
    return (
        f"Your 3 days in New York ({collected.removeprefix('Collected: ')}): day 1 {interests} "
        f"in Manhattan, day 2 Brooklyn{food}, day 3 Central Park and a Broadway show."
    )


def build_runner() -> Runner:
    follow_up = ChatModelAgent(
        "follow_up",
        "asks the user for the details a plan still needs and returns them",
        make_model(scripted_follow_up),
        instruction=(
            "Collect what the request leaves open (interests, daily budget) by asking the user "
            "with ask_user, one question at a time, until you have both. Then answer with a "
            "one-line summary of what you collected."
        ),
        tools=[ask_user],
    )
    planner = ChatModelAgent(
        "trip_planner",
        "plans trips",
        make_model(scripted_planner),
        instruction=(
            "You plan trips. If you do not know the traveller's interests and daily budget, "
            "call follow_up to find out first. Then write a short day-by-day itinerary."
        ),
        tools=[AgentTool(follow_up)],
    )
    return Runner(planner, checkpoint_store=InMemoryCheckPointStore())


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Plan, answering the agent's questions until it is done; returns every event."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("request", nargs="?", default=DEFAULT_REQUEST)
    parser.add_argument(
        "--answers", nargs="*", help="the answers, in order (default: ask on stdin)"
    )
    args = parser.parse_args(argv)
    banner("follow-up")
    given: Iterator[str] = iter(args.answers) if args.answers is not None else iter(())
    runner = build_runner()
    checkpoint_id = f"follow-up-{uuid.uuid4().hex[:8]}"
    print(f"> {args.request}")
    events = print_events(runner.query(args.request, with_checkpoint_id(checkpoint_id)))
    everything = list(events)
    while events and events[-1].action is not None and events[-1].action.interrupted is not None:
        (point,) = events[-1].action.interrupted.contexts
        print(f"\nQUESTION ({' > '.join(point.address)}): {point.info}")
        answer = next(given, None)
        if answer is None:
            answer = input("your answer: ")
        print(f"answer: {answer}\n")
        events = print_events(runner.resume(checkpoint_id, targets={point.id: answer}))
        everything += events
    return everything


if __name__ == "__main__":
    main()
