"""A supervisor runs a small report team: a researcher gathers facts, a writer drafts the report.

``supervisor.new(supervisor, [researcher, writer])`` lets the supervisor transfer work to
either agent; each of them, when done, hands the conversation back to the supervisor
automatically (deterministic transfer), so the supervisor sees their output and decides
what comes next. Run paths show the hand-overs: ``ReportSupervisor > ResearchAgent >
ReportSupervisor > WriterAgent > ReportSupervisor``.

Offline by default (scripted models play the LLMs). With ``OPENAI_API_KEY`` set it talks to
a real OpenAI-compatible endpoint (``OPENAI_BASE_URL``, ``AGENTKIT_MODEL``).

    python samples/supervisor_report.py
    python samples/supervisor_report.py "Write a short report on the history of the transistor."
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import ask, banner, make_model, sample_args

from agentkit import Agent, AgentEvent, ChatModelAgent, Message, Role, Runner, tool
from agentkit.prebuilt import supervisor
from agentkit.testing import call, calls_message

DEFAULT_TOPIC = "Write a short report on the history of large language models."

# The researcher's only source: a few archive cards (offline, curated by hand).
ARCHIVE: dict[str, str] = {
    "2017": "2017: 'Attention Is All You Need' introduces the transformer architecture.",
    "2018": "2018: GPT-1 and BERT show that pretraining on unlabeled text transfers to many tasks.",
    "2020": "2020: GPT-3 (175B parameters) performs new tasks from a few examples in the prompt.",
    "2022": "2022: instruction tuning and RLHF make chat assistants such as ChatGPT practical.",
    "2023": "2023: open-weight models (Llama 2, Mistral) let anyone fine-tune and self-host.",
}


@tool
def search_archive(query: str) -> str:
    """Search the research archive; returns the matching milestone cards, oldest first.

    Args:
        query: what to look for, e.g. "language model milestones".
    """
    return "\n".join(ARCHIVE[year] for year in sorted(ARCHIVE))


RESEARCH_NOTES = (
    "Key milestones:\n"
    "1. 2017 - the transformer replaces recurrent networks.\n"
    "2. 2018 - GPT-1 and BERT establish pretraining plus fine-tuning.\n"
    "3. 2020 - GPT-3 shows few-shot learning at scale.\n"
    "4. 2022 - instruction tuning and RLHF lead to ChatGPT.\n"
    "5. 2023 - open-weight models spread."
)

REPORT = (
    "# A Short History of Large Language Models\n"
    "Modern language models begin in 2017, when the transformer made training on huge text "
    "corpora practical. In 2018 GPT-1 and BERT showed that one pretrained model could be "
    "adapted to many tasks. GPT-3 (2020) went further: with 175B parameters it learned new "
    "tasks from a few examples in the prompt. Instruction tuning and RLHF turned these models "
    "into assistants, and ChatGPT (2022) brought them to the public. Since 2023, open-weight "
    "models such as Llama 2 and Mistral let anyone fine-tune and run their own."
)


def said_by(messages: list[Message], agent: str) -> str | None:
    """What ``agent`` said, as the supervisor sees it (``For context: [agent] said: ...``)."""
    marker = f"For context: [{agent}] said: "
    for message in reversed(messages):
        if message.role is Role.USER and message.content.startswith(marker):
            return message.content[len(marker) :]
    return None


def scripted_supervisor(messages: list[Message]) -> Message | str:
    """Plays the supervisor: research first, then writing, then hand the report over."""
    if said_by(messages, "ResearchAgent") is None:
        return calls_message(call("transfer_to_agent", {"agent_name": "ResearchAgent"}))
    if said_by(messages, "WriterAgent") is None:
        return calls_message(call("transfer_to_agent", {"agent_name": "WriterAgent"}))
    return (
        "The report is ready: the research covered five milestones from 2017 to 2023, and the "
        "writer turned them into the short history above."
    )


def scripted_researcher(messages: list[Message]) -> Message | str:
    """Plays the researcher: searches the archive once, then lists the milestones."""
    if messages[-1].role is Role.TOOL:
        return RESEARCH_NOTES
    return calls_message(
        call("search_archive", {"query": "large language model milestones"}),
        content="Searching the archive for milestones.",
    )


def scripted_writer(messages: list[Message]) -> Message | str:
    """Plays the writer: turns the research notes into the report."""
    return REPORT


def build_agent() -> Agent:
    """The supervisor with its two workers."""
    research = ChatModelAgent(
        name="ResearchAgent",
        description="Finds the facts for a report: milestones, dates, numbers.",
        model=make_model(scripted_researcher),
        instruction=(
            "You are a researcher. Use search_archive to find the key milestones of the topic "
            "and list them with their dates. Output only the list."
        ),
        tools=[search_archive],
    )
    writer = ChatModelAgent(
        name="WriterAgent",
        description="Writes a report from research notes.",
        model=make_model(scripted_writer),
        instruction=(
            "You are a writer. Turn the research notes in the conversation into a report of "
            "at most 150 words with a title. Output only the report."
        ),
    )
    boss = ChatModelAgent(
        name="ReportSupervisor",
        description="Coordinates research and writing to produce a report.",
        model=make_model(scripted_supervisor),
        instruction=(
            "You coordinate a report team. First transfer the task to ResearchAgent. When the "
            "research is back, transfer to WriterAgent. When the report is written, tell the "
            "user in one sentence that it is ready. Never write the report yourself."
        ),
    )
    return supervisor.new(boss, [research, writer])


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Run the report team on a topic and print the run live; returns its events."""
    args = sample_args(__doc__, DEFAULT_TOPIC, argv)
    banner("supervisor report")
    runner = Runner(build_agent(), enable_streaming=not args.no_stream)
    return ask(runner, args.questions[0], show_run_path=True)


if __name__ == "__main__":
    main()
