"""print_events: live printing of a run."""

from __future__ import annotations

import io

import pytest

from agentkit import ChatModelAgent, Runner, print_events, tool
from agentkit.testing import ScriptedChatModel, call, calls_message


@tool
def get_weather(city: str) -> str:
    """Weather."""
    return f"sunny in {city}"


@pytest.mark.parametrize("streaming", [False, True])
def test_print_events_shows_calls_results_and_answer_and_returns_usable_events(streaming: bool) -> None:
    model = ScriptedChatModel([calls_message(call("get_weather", {"city": "Oslo"})), "It is sunny."])
    out = io.StringIO()
    events = print_events(
        Runner(ChatModelAgent("bot", "d", model, tools=[get_weather]), enable_streaming=streaming).query("x"),
        file=out,
    )
    text = out.getvalue()
    assert text == (
        "\n== bot ==\n"
        '-> calls get_weather({"city": "Oslo"})\n'
        "   get_weather returned: sunny in Oslo\n"
        "It is sunny.\n"
    )
    assert events[-1].get_message().content == "It is sunny."  # type: ignore[union-attr]


def test_print_events_shows_errors_and_transfers() -> None:
    out = io.StringIO()
    model = ScriptedChatModel([calls_message(call("nope"))])
    print_events(Runner(ChatModelAgent("bot", "d", model, tools=[get_weather])).query("x"), file=out)
    assert "!! error: ToolNotFoundError: tool nope not found in toolsNode indexes" in out.getvalue()
