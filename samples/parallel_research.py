"""Parallel research: three researchers work at once, then a lead writes the recommendation.

A ``SequentialAgent`` runs a ``ParallelAgent`` of three researchers and then a summarizer.
The researchers run at the same time, each on its own thread; none sees the others' work.
Each stores its findings in the run's session with ``output_key``, and the summarizer's
instruction picks them up through ``{placeholders}`` (instructions are formatted with the
session values). The summarizer also sees the researchers' messages as context.

Offline by default (scripted models play the LLMs). With ``OPENAI_API_KEY`` set it talks to
a real OpenAI-compatible endpoint (``OPENAI_BASE_URL``, ``AGENTKIT_MODEL``).

    python samples/parallel_research.py
    python samples/parallel_research.py "Should Northwind open a support hub in Lisbon?"
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Literal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import ask, banner, make_model, sample_args

from agentkit import (
    AgentEvent,
    ChatModelAgent,
    Message,
    ParallelAgent,
    Role,
    Runner,
    SequentialAgent,
    tool,
)
from agentkit.testing import call, calls_message

Area = Literal["talent", "costs", "risks"]

# Northwind's internal notes (fictional), the researchers' only source.
NOTES: dict[str, str] = {
    "talent": (
        "Recruiter notes: 40 candidates fluent in Portuguese and English applied to our last "
        "Lisbon posting; median asking salary EUR 28k; typical notice period 60 days."
    ),
    "costs": (
        "Finance notes: a 30-desk serviced office in Lisbon costs about EUR 9k a month; "
        "one-off setup estimated at EUR 120k; break-even after 14 months at 25 agents."
    ),
    "risks": (
        "Operations notes: a third time zone needs two extra team leads; the Dublin team "
        "worries about losing evening shifts; local labour law requires Portuguese contracts."
    ),
}


@tool
def search_notes(area: Area) -> str:
    """Search Northwind's internal notes on one area of the decision.

    Args:
        area: which notes to read: "talent", "costs" or "risks".
    """
    return NOTES[area]


RESEARCHERS: list[tuple[str, Area, str, str]] = [
    (
        "talent_scout",
        "talent",
        "talent_findings",
        "Hiring looks feasible: 40 bilingual candidates applied last time, at a median ask "
        "of EUR 28k, but expect 60-day notice periods.",
    ),
    (
        "cost_analyst",
        "costs",
        "cost_findings",
        "About EUR 9k a month for 30 desks plus EUR 120k setup; it breaks even after 14 "
        "months with 25 agents.",
    ),
    (
        "risk_officer",
        "risks",
        "risk_findings",
        "Two extra team leads are needed, Dublin fears losing evening shifts, and contracts "
        "must follow Portuguese law.",
    ),
]


def scripted_researcher(area: Area, findings: str) -> Callable[[list[Message]], Message | str]:
    """Plays one researcher: reads the notes on its area, then reports its findings."""

    def reply(messages: list[Message]) -> Message | str:
        if messages[-1].role is Role.TOOL:
            return findings
        return calls_message(
            call("search_notes", {"area": area}), content=f"Reading the {area} notes."
        )

    return reply


def scripted_summarizer(messages: list[Message]) -> str:
    """Plays the research lead: weighs the findings its instruction was given."""
    system = messages[0].content if messages and messages[0].role is Role.SYSTEM else ""
    lines = [line[2:] for line in system.splitlines() if line.startswith("- ")]
    return (
        "Recommendation: open the Lisbon hub as a 12-month pilot with 25 agents.\n"
        + "\n".join(lines)
        + "\nMain risk: staffing the third time zone without hurting the Dublin team."
    )


SUMMARIZER_INSTRUCTION = (
    "You lead a research team. Answer the user's question with a recommendation of at most "
    "100 words, based on your team's findings:\n"
    "- Talent: {talent_findings}\n"
    "- Costs: {cost_findings}\n"
    "- Risks: {risk_findings}\n"
    "Start with 'Recommendation:' and end with the main risk."
)


def build_agent() -> SequentialAgent:
    """Three researchers in parallel, then the summarizer."""
    researchers = [
        ChatModelAgent(
            name=name,
            description=f"researches the {area} side of the decision",
            model=make_model(scripted_researcher(area, findings)),
            instruction=(
                f"You research the {area} side of the user's question. Call search_notes "
                f"with area={area!r} once, then report your findings in one or two sentences "
                "with the key numbers."
            ),
            tools=[search_notes],
            output_key=output_key,
        )
        for name, area, output_key, findings in RESEARCHERS
    ]
    summarizer = ChatModelAgent(
        name="summarizer",
        description="turns the research into a recommendation",
        model=make_model(scripted_summarizer),
        instruction=SUMMARIZER_INSTRUCTION,
    )
    team = ParallelAgent("researchers", "research every side at once", researchers)
    return SequentialAgent("research", "research, then recommend", [team, summarizer])


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Run the research team on a question and print the run live."""
    args = sample_args(__doc__, "Should Northwind open a customer support hub in Lisbon?", argv)
    banner("parallel research")
    runner = Runner(build_agent(), enable_streaming=not args.no_stream)
    return ask(runner, args.questions[0])


if __name__ == "__main__":
    main()
