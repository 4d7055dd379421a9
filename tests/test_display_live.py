"""agentkit.display.live and the notebook HTML of messages, events and interrupts."""

from __future__ import annotations

import io
from typing import Any

import pytest

from agentkit import (
    ChatModelAgent,
    InterruptContext,
    InterruptInfo,
    Message,
    Runner,
    interrupt,
    print_events,
    set_sub_agents,
    tool,
)
from agentkit import _display as display_module
from agentkit.display import live
from agentkit.models import ScriptedChatModel
from agentkit.schema import assistant_message, tool_message
from agentkit.testing import call, calls_message


class Recorder:
    """Stands in for a Jupyter display handle: keeps every update's HTML and text."""

    def __init__(self) -> None:
        self.html: list[str] = []
        self.text: list[str] = []

    def update(self, obj: Any) -> None:
        self.html.append(obj._repr_html_())
        self.text.append(repr(obj))


def team() -> Runner:
    @tool
    def get_weather(city: str) -> str:
        """Weather of a city."""
        return f"sunny in {city} <b>"

    @tool
    def book(city: str) -> str:
        """Book, with approval."""
        return "booked" if interrupt(f"Book {city}?") else "declined"

    router = ChatModelAgent(
        "router", "routes", ScriptedChatModel([calls_message(call("transfer_to_agent", {"agent_name": "travel"}))])
    )
    travel = ChatModelAgent(
        "travel",
        "travels",
        ScriptedChatModel(
            [
                calls_message(call("get_weather", {"city": "Rome"}), content="Checking the weather in Rome."),
                calls_message(call("book", {"city": "Rome"}), content="Booking now."),
            ]
        ),
        tools=[get_weather, book],
    )
    return Runner(set_sub_agents(router, [travel]), enable_streaming=True)


def test_live_updates_one_display_as_tokens_calls_transfers_and_interrupts_arrive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = Recorder()
    monkeypatch.setattr(display_module, "_open_display", lambda: recorder)
    monkeypatch.setattr(display_module, "UPDATE_INTERVAL", 0.0)  # every token is an update
    events = live(team().query("Trip to Rome"))
    assert events[-1].interrupted
    action = events[-1].action
    assert action is not None and action.interrupted is not None
    final = recorder.text[-1]
    assert final.splitlines() == [
        "  router calls transfer_to_agent({\"agent_name\": \"travel\"})",
        "  transfer_to_agent returned: successfully transferred to agent [travel]",
        "  router transfers to travel",
        "travel: Checking the weather in Rome.",
        "  travel calls get_weather({\"city\": \"Rome\"})",
        "  get_weather returned: sunny in Rome <b>",
        "travel: Booking now.",
        "  travel calls book({\"city\": \"Rome\"})",
        f"  waiting for input: Book Rome?  [id {action.interrupted.contexts[0].id}]",
    ]
    # Tokens arrived one by one: some update shows a sentence only partly written.
    partial = [
        text for text in recorder.text
        if "travel: Check" in text and "travel: Checking the weather in Rome." not in text
    ]
    assert partial, recorder.text
    assert recorder.text[0] == "  running..."
    assert "running" not in final
    html = recorder.html[-1]
    assert "sunny in Rome &lt;b&gt;" in html and "<b>" not in html.replace("<b>\"", "")
    assert 'class="agentkit-transfer"' in html and 'class="agentkit-interrupt"' in html


def test_live_outside_a_notebook_prints_like_print_events() -> None:
    shown, printed = io.StringIO(), io.StringIO()
    live(team().query("Trip to Rome"), file=shown)
    print_events(team().query("Trip to Rome"), file=printed)
    def without_ids(text: str) -> str:
        return "\n".join(line.split("] ")[-1] for line in text.splitlines())

    assert without_ids(shown.getvalue()) == without_ids(printed.getvalue())
    assert "-> transfer to travel" in shown.getvalue()


def test_live_raises_the_run_error_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    monkeypatch.setattr(display_module, "_open_display", lambda: recorder)
    def runner() -> Runner:
        return Runner(ChatModelAgent("a", "d", ScriptedChatModel([ValueError("model down")])))

    with pytest.raises(ValueError, match="model down"):
        live(runner().query("x"))
    assert "error: ValueError: model down" in recorder.text[-1]
    events = live(runner().query("x"), raise_errors=False)
    assert isinstance(events[-1].err, ValueError)


def test_messages_events_and_interrupts_render_as_escaped_html() -> None:
    message = assistant_message("1 < 2 & <script>", [call("f", {"x": "<i>"})])
    html = message._repr_html_()
    assert "1 &lt; 2 &amp; &lt;script&gt;" in html and "<script>" not in html
    assert "calls f({&quot;x&quot;: &quot;&lt;i&gt;&quot;})" in html
    result = tool_message("ok", "c1", "f")._repr_html_()
    assert "f returned: ok" in result
    info = InterruptInfo(
        data=None,
        contexts=[InterruptContext(id="i-1", info={"ask": "<ok?>"}, address=("agent:a",), is_root_cause=True)],
    )
    assert "waiting for input: {&quot;ask&quot;: &quot;&lt;ok?&gt;&quot;}  [id i-1]" in info._repr_html_()
    events = Runner(ChatModelAgent("a", "d", ScriptedChatModel(["Hi <there>"])), enable_streaming=True).query("x")
    (event,) = list(events)
    assert "Hi &lt;there&gt;" in event._repr_html_()
    assert event.get_message() == Message("assistant", "Hi <there>")  # still readable afterwards
