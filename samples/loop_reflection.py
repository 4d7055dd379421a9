"""Reflection loop: a copywriter drafts, an editor reviews, until the editor approves.

A ``LoopAgent`` runs the writer and the critic in turns. The critic either answers with
feedback (the loop goes on, and the writer sees the feedback as context) or calls its
``approve`` tool, which attaches a break-loop action to its result: the loop stops right
after the critic. ``max_iterations`` caps the rounds in case the editor is never satisfied.

Offline by default (scripted models play the LLMs). With ``OPENAI_API_KEY`` set it talks to
a real OpenAI-compatible endpoint (``OPENAI_BASE_URL``, ``AGENTKIT_MODEL``).

    python samples/loop_reflection.py
    python samples/loop_reflection.py "Write a product description for our solar lantern."
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import ask, banner, make_model, sample_args

from agentkit import (
    AgentEvent,
    ChatModelAgent,
    LoopAgent,
    Message,
    Role,
    Runner,
    new_break_loop_action,
    send_tool_gen_action,
    tool,
)
from agentkit.testing import call, calls_message

MAX_ROUNDS = 4

WRITER_INSTRUCTION = (
    "You are a copywriter. Write a product description of at most 60 words for the product "
    "the user asks about. If an editor reviewed your previous draft, rewrite it so that it "
    "follows every point of the feedback. Reply with the description only."
)

CRITIC_INSTRUCTION = (
    "You are a demanding editor. Review the copywriter's latest draft. It must be at most 60 "
    "words, name one concrete benefit with a number, and end with a call to action. If it "
    "meets every point, call the approve tool with a one-line verdict. Otherwise reply with "
    "a short numbered list of changes; never rewrite the draft yourself."
)


@tool
def approve(verdict: str) -> str:
    """Approve the latest draft; this ends the review loop.

    Args:
        verdict: one line saying why the draft is ready to publish.
    """
    send_tool_gen_action(new_break_loop_action("critic"))
    return f"Approved: {verdict}"


# --- the offline stand-ins for the LLMs ------------------------------------------------------

FIRST_DRAFT = (
    "Meet the TrailFlask, a stainless steel bottle for every adventure. Light, tough and "
    "good-looking, it is as happy on your desk as on the trail."
)
REVISED_DRAFT = (
    "Meet the TrailFlask: a 500 ml steel bottle that keeps drinks ice-cold for 24 hours and "
    "hot for 12. Light enough for the trail, tough enough for the commute. Order yours today "
    "and get free engraving."
)
FEEDBACK = (
    "1. Name a concrete benefit with a number: how long does it keep drinks cold or hot?\n"
    "2. End with a call to action."
)


def scripted_writer(messages: list[Message]) -> str:
    """Plays the copywriter: a first draft, then a revision once there is feedback."""
    has_feedback = any("[critic] said:" in m.content for m in messages if m.role is Role.USER)
    return REVISED_DRAFT if has_feedback else FIRST_DRAFT


def scripted_critic(messages: list[Message]) -> Message | str:
    """Plays the editor: approves a draft with a number and a call to action, else objects."""
    drafts = [m.content for m in messages if m.role is Role.USER and "[writer] said:" in m.content]
    latest = drafts[-1] if drafts else ""
    if "hours" in latest and "Order" in latest:
        verdict = "concrete 24-hour claim, under 60 words, clear call to action"
        return calls_message(
            call("approve", {"verdict": verdict}), content="All points are addressed now."
        )
    return FEEDBACK


# --- the agents ------------------------------------------------------------------------------


def build_agent() -> LoopAgent:
    """The loop: the writer drafts, the critic reviews; the critic's approval breaks the loop."""
    writer = ChatModelAgent(
        name="writer",
        description="drafts and revises product descriptions",
        model=make_model(scripted_writer),
        instruction=WRITER_INSTRUCTION,
    )
    critic = ChatModelAgent(
        name="critic",
        description="reviews drafts and approves the good ones",
        model=make_model(scripted_critic),
        instruction=CRITIC_INSTRUCTION,
        tools=[approve],
        # The approval is the critic's last word: no model call after the tool.
        return_directly=["approve"],
    )
    return LoopAgent(
        "reflection",
        "writes, reviews and revises until approved",
        [writer, critic],
        max_iterations=MAX_ROUNDS,
    )


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Run the reflection loop on a brief and print the run live."""
    brief = "Write a product description for the TrailFlask, our insulated steel bottle."
    args = sample_args(__doc__, brief, argv)
    banner("reflection loop")
    runner = Runner(build_agent(), enable_streaming=not args.no_stream)
    events = ask(runner, args.questions[0])
    drafts = [e for e in events if e.agent_name == "writer" and e.get_message() is not None]
    breaks = [e.action.break_loop for e in events if e.action and e.action.break_loop]
    print()
    if breaks:
        print(f"Approved after {breaks[-1].current_iterations + 1} round(s).")
    else:
        print(f"Not approved within {MAX_ROUNDS} rounds; the last draft stands.")
    if drafts:
        final = drafts[-1].get_message()
        print(f"Final draft: {final.content if final is not None else ''}")
    return events


if __name__ == "__main__":
    main()
