"""The multi-agent samples (router, supervisor report): as scripts, and in-process through main()."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from agentkit import AgentEvent, Runner
from agentkit.testing import no_thread_leak, summarize
from tests.samples_support import run_sample


def texts(events: list[AgentEvent]) -> list[tuple[str, list[str], str, str, str | None]]:
    return [summarize(event) for event in events]


# --- router -------------------------------------------------------------------------------------


def test_router_runs_offline_as_a_script() -> None:
    result = run_sample("router.py")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "offline" in out
    assert "> What's the weather in Beijing?" in out
    assert "-> transfer to WeatherAgent" in out
    assert "== RouterAgent > WeatherAgent ==" in out
    assert '-> calls get_weather({"city": "Beijing"})' in out
    assert "Right now, the weather in Beijing is 25°C, sunny" in out
    assert "-> transfer to ChatAgent" in out
    assert "Octopuses have three hearts" in out


def test_router_events(sample: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]) -> None:
    module = sample("router")
    with no_thread_leak():
        events = module.main(["--no-stream", "What's the weather in Oslo?", "Hi there!"])
    out = capsys.readouterr().out
    assert "> Hi there!" in out
    weather = ["RouterAgent", "WeatherAgent"]
    assert texts(events) == [
        ("RouterAgent", ["RouterAgent"], "assistant", "", None),
        (
            "RouterAgent",
            ["RouterAgent"],
            "tool/transfer_to_agent",
            "successfully transferred to agent [WeatherAgent]",
            "transfer:WeatherAgent",
        ),
        ("WeatherAgent", weather, "assistant", "", None),
        ("WeatherAgent", weather, "tool/get_weather", "the weather in Oslo is 4°C, drizzle, wind 20 km/h", None),
        ("WeatherAgent", weather, "assistant", "Right now, the weather in Oslo is 4°C, drizzle, wind 20 km/h.", None),
        ("RouterAgent", ["RouterAgent"], "assistant", "", None),
        (
            "RouterAgent",
            ["RouterAgent"],
            "tool/transfer_to_agent",
            "successfully transferred to agent [ChatAgent]",
            "transfer:ChatAgent",
        ),
        ("ChatAgent", ["RouterAgent", "ChatAgent"], "assistant", "Happy to chat! Ask me anything.", None),
    ]


def test_router_prompt_lists_both_agents(sample: Callable[[str], ModuleType]) -> None:
    module = sample("router")
    agent = module.build_agent()
    with no_thread_leak():
        list(Runner(agent).query("What's the weather in Lisbon?"))
    router_model = agent.agent.model
    system = router_model.calls[0].messages[0].content
    assert "- Agent name: WeatherAgent\n  Agent description: This agent can get the current weather" in system
    assert "- Agent name: ChatAgent\n  Agent description: A general-purpose agent" in system
    assert [t.name for t in router_model.calls[0].tools] == ["transfer_to_agent", "exit"]


# --- supervisor report --------------------------------------------------------------------------


def test_supervisor_report_runs_offline_as_a_script() -> None:
    result = run_sample("supervisor_report.py")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "offline" in out
    assert "-> transfer to ResearchAgent" in out
    assert "== ReportSupervisor > ResearchAgent ==" in out
    assert "search_archive returned: 2017: 'Attention Is All You Need'" in out
    assert "== ReportSupervisor > ResearchAgent > ReportSupervisor > WriterAgent ==" in out
    assert "# A Short History of Large Language Models" in out
    assert out.count("-> transfer to ReportSupervisor") == 2
    assert "The report is ready" in out


def test_supervisor_report_events(
    sample: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    module = sample("supervisor_report")
    with no_thread_leak():
        events = module.main(["--no-stream"])
    capsys.readouterr()
    sup = "ReportSupervisor"
    research = [sup, "ResearchAgent"]
    writer = [sup, "ResearchAgent", sup, "WriterAgent"]

    def back(agent: str, path: list[str]) -> list[tuple[str, list[str], str, str, str | None]]:
        return [
            (agent, path, "assistant", "", None),
            (agent, path, "tool/transfer_to_agent", f"successfully transferred to agent [{sup}]", f"transfer:{sup}"),
        ]

    summaries = texts(events)
    assert summaries[:3] == [
        (sup, [sup], "assistant", "", None),
        (sup, [sup], "tool/transfer_to_agent", "successfully transferred to agent [ResearchAgent]", "transfer:ResearchAgent"),
        ("ResearchAgent", research, "assistant", "Searching the archive for milestones.", None),
    ]
    assert summaries[3][:3] == ("ResearchAgent", research, "tool/search_archive")
    assert summaries[4:] == [
        ("ResearchAgent", research, "assistant", module.RESEARCH_NOTES, None),
        *back("ResearchAgent", research),
        (sup, [*research, sup], "assistant", "", None),
        (
            sup,
            [*research, sup],
            "tool/transfer_to_agent",
            "successfully transferred to agent [WriterAgent]",
            "transfer:WriterAgent",
        ),
        ("WriterAgent", writer, "assistant", module.REPORT, None),
        *back("WriterAgent", writer),
        (sup, [*writer, sup], "assistant", summaries[-1][3], None),
    ]
    assert summaries[-1][3].startswith("The report is ready")
