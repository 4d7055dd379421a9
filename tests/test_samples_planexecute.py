"""The plan-execute travel sample: offline as a script and in-process, live against a fake server."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentkit.testing import FakeOpenAIServer, Reply, call, summarize
from tests.samples_support import run_sample

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "plan_execute.py"


def run_plan_execute(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_sample("plan_execute.py", *args, env=env)


def load_sample() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_execute_sample", SAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("args", [(), ("--no-stream",)])
def test_sample_runs_offline_from_the_repo_root(args: tuple[str, ...]) -> None:
    result = run_plan_execute(*args)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "offline" in out
    assert "== planner ==" in out and "== executor ==" in out and "== replanner ==" in out
    assert "search_flights returned:" in out
    assert "search_hotels returned:" in out
    assert "get_weather returned:" in out
    assert "-> break loop (from replanner)" in out
    assert "== Final answer ==\nYour Lisbon weekend (16-18 May 2025):" in out
    assert "of the 900 EUR budget" in out


def test_sample_main_returns_the_events_of_a_complete_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    sample = load_sample()
    events = sample.main(["--no-stream"])
    summaries = [summarize(e) for e in events]
    assert [s[0] for s in summaries if s[2] == "assistant"] == [
        "planner",
        "executor", "executor", "replanner",  # flights: tool calls, answer; replan
        "executor", "executor", "replanner",  # hotel
        "executor", "executor", "replanner",  # weather; then the replanner responds
    ]
    assert [s[2] for s in summaries].count("tool/get_weather") == 3
    assert summaries[-1][4] == "break_loop"
    answer = sample.final_response(events)
    assert answer is not None and answer.startswith("Your Lisbon weekend")
    assert "Baixa Suites" in answer
    assert answer in capsys.readouterr().out
    # The tools are deterministic.
    assert sample.search_flights.invoke('{"origin": "A", "destination": "B", "date": "D"}') == (
        sample.search_flights.invoke('{"origin": "A", "destination": "B", "date": "D"}')
    )


def travel_llm(request: dict[str, Any]) -> Reply:
    """A fake LLM for all three roles, told apart by the tools they offer."""
    tools = [t["function"]["name"] for t in request.get("tools", [])]
    messages = request["messages"]
    if tools == ["plan"]:
        steps = ["Get the weather in Lisbon on 2025-05-16."]
        return Reply(tool_calls=[call("plan", json.dumps({"steps": steps}), id="p1")])
    if tools == ["plan", "respond"]:
        answer = {"response": "Lisbon will be sunny: pack sunglasses."}
        return Reply(tool_calls=[call("respond", json.dumps(answer), id="r1")])
    if messages[-1]["role"] == "user":
        arguments = json.dumps({"city": "Lisbon", "date": "2025-05-16"})
        return Reply(tool_calls=[call("get_weather", arguments, id="w1")])
    return Reply("Lisbon on 2025-05-16: " + messages[-1]["content"])


@pytest.mark.parametrize("streaming", [True, False])
def test_sample_live_against_an_openai_compatible_server(streaming: bool) -> None:
    with FakeOpenAIServer(travel_llm) as server:
        args = ["Weekend in Lisbon?"] + ([] if streaming else ["--no-stream"])
        result = run_plan_execute(
            *args,
            env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url,
                 "AGENTKIT_MODEL": "test-model"},
        )
        requests = server.requests
    assert result.returncode == 0, result.stderr
    assert "live" in result.stdout
    assert "== Final answer ==\nLisbon will be sunny: pack sunglasses." in result.stdout
    planner, executor_1, executor_2, replanner = requests
    assert planner["tool_choice"] == "required" and replanner["tool_choice"] == "required"
    assert "tool_choice" not in executor_1
    assert planner["messages"][-1] == {"role": "user", "content": "Weekend in Lisbon?"}
    assert executor_1["messages"][-1]["content"].endswith("\nGet the weather in Lisbon on 2025-05-16.")
    assert executor_2["messages"][-1]["role"] == "tool"
    assert "Result: Lisbon on 2025-05-16: " in replanner["messages"][-1]["content"]
    assert all(r.get("stream", False) is streaming for r in requests)
