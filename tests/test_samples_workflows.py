"""The workflow samples: offline as scripts, in-process through main(), and live over HTTP."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from agentkit import AgentEvent, Message
from agentkit.testing import FakeOpenAIServer, Reply, call, no_thread_leak, summarize
from tests.samples_support import run_sample


def texts(events: list[AgentEvent]) -> list[tuple[str, list[str], str, str, str | None]]:
    return [summarize(event) for event in events]


# --- loop_reflection -------------------------------------------------------------------------


def test_loop_reflection_runs_offline_as_a_script() -> None:
    result = run_sample("loop_reflection.py")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "offline" in out
    assert "== writer ==" in out and "== critic ==" in out
    assert "2. End with a call to action." in out
    assert "approve returned: Approved: concrete 24-hour claim" in out
    assert "-> break loop (from critic)" in out
    assert "Approved after 2 round(s)." in out
    assert "Final draft: Meet the TrailFlask: a 500 ml steel bottle" in out


def test_loop_reflection_events(sample: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]) -> None:
    module = sample("loop_reflection")
    with no_thread_leak():
        events = module.main(["--no-stream", "Describe the TrailFlask."])
    capsys.readouterr()
    r1 = ["reflection", "writer", "critic"]
    assert texts(events) == [
        ("writer", ["reflection", "writer"], "assistant", module.FIRST_DRAFT, None),
        ("critic", r1, "assistant", module.FEEDBACK, None),
        ("writer", [*r1, "writer"], "assistant", module.REVISED_DRAFT, None),
        ("critic", [*r1, "writer", "critic"], "assistant", "All points are addressed now.", None),
        (
            "critic",
            [*r1, "writer", "critic"],
            "tool/approve",
            "Approved: concrete 24-hour claim, under 60 words, clear call to action",
            "break_loop",
        ),
    ]
    brk = events[-1].action.break_loop
    assert (brk.from_agent, brk.done, brk.current_iterations) == ("critic", True, 1)


# --- parallel_research -----------------------------------------------------------------------


def test_parallel_research_runs_offline_as_a_script() -> None:
    result = run_sample("parallel_research.py")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "offline" in out
    for name in ("talent_scout", "cost_analyst", "risk_officer", "summarizer"):
        assert f"== {name} ==" in out
    assert "search_notes returned: Finance notes:" in out
    assert "Recommendation: open the Lisbon hub as a 12-month pilot with 25 agents." in out
    assert "Talent: Hiring looks feasible" in out
    assert "Costs: About EUR 9k a month" in out
    assert "Risks: Two extra team leads are needed" in out


def test_parallel_research_events(sample: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]) -> None:
    module = sample("parallel_research")
    with no_thread_leak():
        events = module.main(["--no-stream"])
    capsys.readouterr()
    summary = texts(events)
    *research, last = summary
    for name, area, _, findings in module.RESEARCHERS:
        path = ["research", "researchers", name]
        assert [s for s in research if s[0] == name] == [
            (name, path, "assistant", f"Reading the {area} notes.", None),
            (name, path, "tool/search_notes", module.NOTES[area], None),
            (name, path, "assistant", findings, None),
        ]
    assert len(research) == 9
    # The summarizer follows the Parallel: its path names the Parallel, not the branches.
    assert last[:3] == ("summarizer", ["research", "researchers", "summarizer"], "assistant")
    # Its instruction was templated with every researcher's output_key value.
    for _, _, _, findings in module.RESEARCHERS:
        assert findings in last[3]


# --- live, against a loopback OpenAI-compatible server ----------------------------------------


def as_reply(answer: Message | str) -> Reply:
    if isinstance(answer, str):
        return Reply(answer)
    calls = [call(c.function.name, c.function.arguments, id=f"call_{i}")
             for i, c in enumerate(answer.tool_calls)]
    return Reply(content=answer.content, tool_calls=calls)


def messages_of(request: dict[str, Any]) -> list[Message]:
    return [Message.from_dict(m) for m in request["messages"]]


def run_live(name: str, handler: Callable[[dict[str, Any]], Reply]) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    with FakeOpenAIServer(handler) as server:
        result = run_sample(
            name,
            env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url,
                 "AGENTKIT_MODEL": "test-model"},
        )
        return result, server.requests


def test_loop_reflection_live(sample: Callable[[str], ModuleType]) -> None:
    module = sample("loop_reflection")

    def handler(request: dict[str, Any]) -> Reply:
        messages = messages_of(request)
        if messages[0].content == module.WRITER_INSTRUCTION:
            return as_reply(module.scripted_writer(messages))
        return as_reply(module.scripted_critic(messages))

    result, requests = run_live("loop_reflection.py", handler)
    assert result.returncode == 0, result.stderr
    assert "live" in result.stdout
    assert "Approved after 2 round(s)." in result.stdout
    assert len(requests) == 4  # writer, critic, writer, critic (approval ends the loop)
    critic_tools = [t["function"]["name"] for t in requests[1]["tools"]]
    assert critic_tools == ["approve"]
    assert "tools" not in requests[0] or not requests[0]["tools"]
    # The second writer call carries its own first draft verbatim and the feedback as context.
    second_writer = requests[2]["messages"]
    assert second_writer[2] == {"role": "assistant", "content": module.FIRST_DRAFT}
    assert second_writer[3]["role"] == "user"
    assert second_writer[3]["content"].startswith("For context: [critic] said: 1. Name")


def test_parallel_research_live(sample: Callable[[str], ModuleType]) -> None:
    module = sample("parallel_research")
    by_area = {area: module.scripted_researcher(area, findings)
               for _, area, _, findings in module.RESEARCHERS}

    def handler(request: dict[str, Any]) -> Reply:
        messages = messages_of(request)
        system = messages[0].content
        for area, reply in by_area.items():
            if f"You research the {area} side" in system:
                return as_reply(reply(messages))
        return as_reply(module.scripted_summarizer(messages))

    result, requests = run_live("parallel_research.py", handler)
    assert result.returncode == 0, result.stderr
    assert "live" in result.stdout
    assert "Recommendation: open the Lisbon hub" in result.stdout
    assert len(requests) == 7  # 3 researchers x 2 calls, then the summarizer
    summary_request = requests[-1]["messages"]
    for _, _, _, findings in module.RESEARCHERS:
        assert findings in summary_request[0]["content"]
    assert all(m["role"] in ("system", "user") for m in summary_request)
