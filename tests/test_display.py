"""print_events: live printing of a run."""

from __future__ import annotations

import io

import pytest

from agentkit import (
    AuthenticationError,
    ChatModelAgent,
    Runner,
    ToolError,
    ToolNotFoundError,
    interrupt,
    print_events,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message


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


def test_print_events_prints_the_error_then_raises_it() -> None:
    @tool
    def broken(city: str) -> str:
        """Fails."""
        raise KeyError(city)

    out = io.StringIO()
    model = ScriptedChatModel([calls_message(call("broken", {"city": "Oslo"}, id="c1")), "never"])
    with pytest.raises(ToolError) as caught:
        print_events(Runner(ChatModelAgent("bot", "d", model, tools=[broken])).query("x"), file=out)
    assert str(caught.value) == (
        "tool 'broken' (call c1) raised KeyError: 'Oslo'; give the agent a "
        "tool_exception_handler to send tool errors to the model instead of ending the run"
    )
    assert isinstance(caught.value.__cause__, KeyError)
    assert out.getvalue() == (
        "\n== bot ==\n"
        '-> calls broken({"city": "Oslo"})\n'
        "!! error: ToolError: tool 'broken' (call c1) raised KeyError: 'Oslo'; give the agent a "
        "tool_exception_handler to send tool errors to the model instead of ending the run\n"
    )


def test_print_events_returns_the_failed_run_with_raise_errors_false() -> None:
    out = io.StringIO()
    model = ScriptedChatModel([calls_message(call("nope"))])
    agent = ChatModelAgent("bot", "d", model, tools=[get_weather], recover_tool_errors=False)
    events = print_events(Runner(agent).query("x"), file=out, raise_errors=False)
    assert "!! error: ToolNotFoundError: the model called tool 'nope'" in out.getvalue()
    assert isinstance(events[-1].err, ToolNotFoundError)


def test_print_events_does_not_raise_for_an_interrupted_run() -> None:
    @tool
    def ask(question: str) -> str:
        """Ask a human."""
        interrupt(question)
        return "unreachable"

    out = io.StringIO()
    model = ScriptedChatModel([calls_message(call("ask", {"question": "ok?"}))])
    runner = Runner(ChatModelAgent("bot", "d", model, tools=[ask]), checkpoint_store=InMemoryCheckPointStore())
    events = print_events(runner.query("x", with_checkpoint_id("c")), file=out)
    assert events[-1].action is not None and events[-1].action.interrupted is not None
    assert "-> interrupted, waiting for input:" in out.getvalue()


def test_print_events_shows_a_recovered_mistake_and_the_answer() -> None:
    out = io.StringIO()
    model = ScriptedChatModel([calls_message(call("nope", id="c1")), "Sorry, sunny."])
    print_events(Runner(ChatModelAgent("bot", "d", model, tools=[get_weather])).query("x"), file=out)
    assert out.getvalue() == (
        "\n== bot ==\n"
        "-> calls nope()\n"
        "   nope returned: Error: there is no tool named 'nope'. The tools you can call are: "
        "'get_weather'.\n"
        "Sorry, sunny.\n"
    )


@pytest.mark.parametrize("streaming", [False, True])
def test_the_readme_first_example_raises_the_model_error_not_an_attribute_error(
    streaming: bool,
) -> None:
    # The README's first example, with a model server that refuses the key.
    model = ScriptedChatModel([AuthenticationError("401: invalid API key", status_code=401)])
    runner = Runner(
        ChatModelAgent("assistant", "d", model, tools=[get_weather]), enable_streaming=streaming
    )
    out = io.StringIO()
    with pytest.raises(AuthenticationError, match="invalid API key"):
        events = print_events(runner.query("What's the weather in Paris?"), file=out)
        print(events[-1].get_message().content)  # type: ignore[union-attr]
    assert out.getvalue().endswith("!! error: AuthenticationError: 401: invalid API key\n")
