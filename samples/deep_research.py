"""A deep research agent: plans with a todo list, loads a skill, hands the reading to a
sub-agent, and writes its report into a workspace on disk.

``deep.new(model, backend=LocalBackend(workspace), middlewares=[SkillMiddleware(backend)])``
builds it. The workspace (a temporary directory, or ``--workspace DIR``) holds a few source
notes and one skill, ``skills/research-report/SKILL.md``, which says how a report is made.
The agent:

1. loads the ``research-report`` skill (``skill`` tool: the instructions enter the
   conversation only now);
2. writes its plan (``write_todos``);
3. starts the ``general-purpose`` sub-agent (``task``), which finds and reads the sources with
   ``glob`` and ``read_file`` and returns the facts with where each comes from;
4. writes ``report.md`` (``write_file``) and starts a second sub-agent **in the background**
   (``task`` with ``run_in_background``) to check that every paragraph cites a source; the
   call answers at once with a task id, and the agent goes on;
5. meanwhile checks the report with a shell command (``execute``: the words, and how many
   paragraphs cite a source) and ticks off its plan;
6. reads the background check's result (``task_output``, waiting for it if it still runs)
   and answers.

The reading sub-agent's steps are shown as they happen (``emit_internal_events=True``), under
the run path ``DeepResearcher > general-purpose``; the background one runs on a thread of the
run, out of sight, and is stopped if the run ends first.

Every path the agent uses stays inside the workspace. The files and the shell are a
``SandboxBackend``: the commands run under bubblewrap with no network, a read-only system and
the workspace as the only writable directory. Where bubblewrap cannot run, the agent gets the
files (``LocalBackend``) and no shell, never an unconfined one.

Offline by default (a scripted model plays the LLM). With ``OPENAI_API_KEY`` set it talks to
a real OpenAI-compatible endpoint (``OPENAI_BASE_URL``, ``AGENTKIT_MODEL``).

    python samples/deep_research.py
    python samples/deep_research.py --workspace /tmp/research "How did the transistor start?"
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import ask, banner, make_model

from agentkit import AgentEvent, ChatModelAgent, Message, Role, Runner
from agentkit.backends import Backend, LocalBackend, SandboxBackend, SandboxUnavailableError
from agentkit.middlewares import SkillMiddleware
from agentkit.prebuilt import deep
from agentkit.testing import call, calls_message

DEFAULT_QUESTION = "How did the transistor come about? Write a short research report."

SKILL = """---
name: research-report
description: >
  How to research a question from the source notes in sources/ and write a cited report.
---
1. Plan the work with write_todos: gather the facts, write the report.
2. Hand the reading to the general-purpose sub-agent (task): it finds the notes under
   sources/ and returns the facts, each with the file it comes from.
3. Write report.md: a title, then one paragraph per fact, each ending with its source in
   brackets, like [sources/bell-labs.md].
4. Mark the todo items completed and answer with a one-sentence summary.
"""

SOURCES = {
    "sources/bell-labs.md": (
        "# Bell Labs, December 1947\n"
        "John Bardeen and Walter Brattain built the first working transistor, a point-contact "
        "device of germanium, at Bell Labs on 16 December 1947.\n"
    ),
    "sources/junction.md": (
        "# The junction transistor\n"
        "William Shockley designed the more robust junction transistor in 1948; it was made "
        "in 1951 and became the basis of practical transistors.\n"
    ),
    "sources/nobel.md": (
        "# Recognition\n"
        "Bardeen, Brattain and Shockley shared the 1956 Nobel Prize in Physics for the "
        "invention of the transistor.\n"
    ),
}

FACTS = (
    "- The first working transistor was a germanium point-contact device built by Bardeen and "
    "Brattain at Bell Labs on 16 December 1947. [sources/bell-labs.md]\n"
    "- Shockley designed the junction transistor in 1948; made in 1951, it became the basis of "
    "practical transistors. [sources/junction.md]\n"
    "- The three shared the 1956 Nobel Prize in Physics for the invention. [sources/nobel.md]"
)

REPORT = (
    "# How the transistor came about\n\n"
    "The first working transistor was a germanium point-contact device that John Bardeen and "
    "Walter Brattain built at Bell Labs on 16 December 1947. [sources/bell-labs.md]\n\n"
    "William Shockley followed in 1948 with the junction transistor; first made in 1951, it "
    "became the basis of practical transistors. [sources/junction.md]\n\n"
    "The three shared the 1956 Nobel Prize in Physics for the invention. [sources/nobel.md]\n"
)

CHECK_REPORT = "wc -w < report.md; grep -c '\\[sources/' report.md"

CHECK_CITATIONS = (
    "Read report.md and check that every paragraph after the title ends with its source in "
    "brackets. Answer with how many paragraphs cite a source."
)

READ_SOURCES = (
    "Find the source notes under sources/ (glob), read them all, and return the facts that "
    "answer: how did the transistor come about? Give each fact with the file it comes from."
)


def prepare_workspace(root: Path) -> None:
    """Write the skill and the source notes into ``root``."""
    (root / "skills" / "research-report").mkdir(parents=True, exist_ok=True)
    (root / "skills" / "research-report" / "SKILL.md").write_text(SKILL, encoding="utf-8")
    for path, text in SOURCES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def _tool_results(messages: list[Message], name: str) -> list[str]:
    return [m.content for m in messages if m.role is Role.TOOL and m.tool_name == name]


def scripted(messages: list[Message], *, shell: bool = True) -> Message | str:
    """Plays the model: the deep agent (which checks its report with ``execute`` when it has a
    ``shell``), and the general-purpose sub-agent it starts."""
    if any(m.role is Role.USER and m.content == READ_SOURCES for m in messages):
        return scripted_reader(messages)
    if any(m.role is Role.USER and m.content == CHECK_CITATIONS for m in messages):
        return scripted_checker(messages)
    todos = [
        {"content": "Gather the facts from the sources", "activeForm": "Gathering the facts",
         "status": "in_progress"},
        {"content": "Write report.md", "activeForm": "Writing report.md", "status": "pending"},
    ]
    if not _tool_results(messages, "skill"):
        return calls_message(call("skill", {"skill": "research-report"}, id="skill-1"))
    if not _tool_results(messages, "write_todos"):
        return calls_message(call("write_todos", {"todos": todos}, id="plan-1"))
    if not _tool_results(messages, "task"):
        arguments: dict[str, object] = {
            "subagent_type": "general-purpose",
            "description": READ_SOURCES,
        }
        return calls_message(call("task", arguments, id="task-1"))
    if not _tool_results(messages, "write_file"):
        arguments = {"file_path": "report.md", "content": REPORT}
        return calls_message(call("write_file", arguments, id="write-1"))
    if len(_tool_results(messages, "task")) < 2:
        arguments = {
            "subagent_type": "general-purpose",
            "description": CHECK_CITATIONS,
            "run_in_background": True,
        }
        return calls_message(call("task", arguments, id="task-2"))
    if shell and not _tool_results(messages, "execute"):
        return calls_message(call("execute", {"command": CHECK_REPORT}, id="check-1"))
    if len(_tool_results(messages, "write_todos")) < 2:
        done = [{**item, "status": "completed"} for item in todos]
        return calls_message(call("write_todos", {"todos": done}, id="plan-2"))
    if not _tool_results(messages, "task_output"):
        # The check may have ended already (its notice is then in the conversation): reading
        # its result is the same either way, and waits for it if it still runs.
        arguments = {"task_id": "bg_1", "block": True, "timeout": 60}
        return calls_message(call("task_output", arguments, id="output-1"))
    return (
        "The report is in report.md: Bell Labs made the first transistor in 1947, and its "
        "inventors won the 1956 Nobel Prize."
    )


def scripted_reader(messages: list[Message]) -> Message | str:
    """Plays the general-purpose sub-agent: find the notes, read them, report the facts."""
    found = _tool_results(messages, "glob")
    if not found:
        return calls_message(call("glob", {"pattern": "sources/*.md"}, id="glob-1"))
    if not _tool_results(messages, "read_file"):
        paths = found[0].splitlines()
        reads = [
            call("read_file", {"file_path": path}, id=f"read-{n}")
            for n, path in enumerate(paths, 1)
        ]
        return calls_message(*reads)
    return FACTS


def scripted_checker(messages: list[Message]) -> Message | str:
    """Plays the background sub-agent: read the report, count the cited paragraphs."""
    report = _tool_results(messages, "read_file")
    if not report:
        return calls_message(call("read_file", {"file_path": "report.md"}, id="check-read-1"))
    cited = report[0].count("[sources/")
    return f"{cited} of {cited} paragraphs cite a source."


def sandbox(workspace: Path) -> SandboxBackend | None:
    """The workspace as a sandbox (files and shell), or ``None`` where bubblewrap cannot run."""
    try:
        return SandboxBackend(workspace, timeout=30)
    except SandboxUnavailableError as error:
        print(f"(no shell for the agent: {error})")
        return None


def build_agent(workspace: Path, shell: SandboxBackend | None = None) -> ChatModelAgent:
    """The deep research agent over ``workspace``; with ``shell`` (a sandbox over it), its
    files and ``execute`` are the sandbox's."""
    backend: Backend = shell if shell is not None else LocalBackend(workspace)
    return deep.new(
        make_model(lambda messages: scripted(messages, shell=shell is not None)),
        name="DeepResearcher",
        description="researches questions from the notes in its workspace and writes reports",
        instruction=(
            "You are a careful researcher. Your workspace holds source notes under sources/ and "
            "skills under skills/. Answer research questions with a cited report in report.md, "
            "using only what the sources say."
        ),
        backend=backend,
        shell=shell,
        middlewares=[SkillMiddleware(backend)],
        max_iterations=30,
        emit_internal_events=True,  # show the sub-agent's steps as they happen
        background_tasks=True,  # task and execute may run in the background
    )


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Research the question in a workspace, print the run and the report; return the events."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("question", nargs="?", default=DEFAULT_QUESTION)
    parser.add_argument("--workspace", help="the workspace directory (default: a temporary one)")
    parser.add_argument("--no-stream", action="store_true", help="do not stream model output")
    args = parser.parse_args(argv)
    banner("deep research")
    with tempfile.TemporaryDirectory(prefix="agentkit-deep-") as temporary:
        workspace = Path(args.workspace or temporary)
        workspace.mkdir(parents=True, exist_ok=True)
        prepare_workspace(workspace)
        shell = sandbox(workspace)
        print(f"shell: {shell.shell if shell is not None else 'none'}")
        runner = Runner(build_agent(workspace, shell), enable_streaming=not args.no_stream)
        events = ask(runner, args.question, show_run_path=True)
        report = workspace / "report.md"
        print(f"\n--- {report.name} ---")
        print(report.read_text(encoding="utf-8") if report.exists() else "(no report was written)")
    return events


if __name__ == "__main__":
    main()
