"""The quickstart sample end to end: offline, and live against the loopback OpenAI server."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from agentkit.testing import FakeOpenAIServer, Reply, call
from tests.samples_support import run_sample


def run_quickstart(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_sample("quickstart.py", *args, env=env)


def test_quickstart_runs_offline() -> None:
    result = run_quickstart()
    assert result.returncode == 0, result.stderr
    assert "offline" in result.stdout
    assert "get_weather returned: sunny, 21°C" in result.stdout
    assert "calculate returned: 391" in result.stdout
    assert "17 * 23 = 391" in result.stdout


def assistant(request: dict[str, Any]) -> Reply:
    """A fake LLM: asks for both tools, then answers from their results."""
    messages = request["messages"]
    if messages[-1]["role"] == "user":
        return Reply(
            content="Checking.",
            tool_calls=[
                call("get_weather", json.dumps({"city": "Oslo"}), id="w1"),
                call("calculate", json.dumps({"expression": "6 * 7"}), id="c1"),
            ],
        )
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    return Reply(f"Oslo: {results['w1']}; 6 * 7 = {results['c1']}.")


@pytest.mark.parametrize("streaming", [True, False])
def test_quickstart_live_against_an_openai_compatible_server(streaming: bool) -> None:
    with FakeOpenAIServer(assistant) as server:
        args = ["Weather in Oslo and 6 * 7?"] + ([] if streaming else ["--no-stream"])
        result = run_quickstart(
            *args,
            env={
                "OPENAI_API_KEY": "sk-test",
                "OPENAI_BASE_URL": server.base_url,
                "AGENTKIT_MODEL": "test-model",
            },
        )
        requests = server.requests
    assert result.returncode == 0, result.stderr
    assert "live" in result.stdout
    assert "Oslo: snow showers, -2°C; 6 * 7 = 42." in result.stdout
    assert len(requests) == 2
    first, second = requests
    assert first["model"] == "test-model"
    assert first.get("stream", False) is streaming
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather", "calculate"]
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][1] == {"role": "user", "content": "Weather in Oslo and 6 * 7?"}
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("w1", "snow showers, -2°C"),
        ("c1", "42"),
    ]
    calls = second["messages"][2]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["get_weather", "calculate"]
