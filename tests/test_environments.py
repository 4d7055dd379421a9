"""agentkit runs unchanged where asyncio code struggles: inside a running event loop (as in
Jupyter) and inside WSGI request threads (Flask)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

from agentkit import ChatModelAgent, Runner, tool
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak


@tool
def get_weather(city: str) -> str:
    """Weather."""
    return f"sunny in {city}"


def make_runner() -> Runner:
    def script(messages):  # type: ignore[no-untyped-def]
        if messages[-1].role.value == "user":
            return calls_message(call("get_weather", {"city": messages[-1].content}))
        return f"report: {messages[-1].content}"

    return Runner(ChatModelAgent("bot", "d", ScriptedChatModel(script), tools=[get_weather]),
                  enable_streaming=True)


def test_runs_inside_a_running_event_loop_like_jupyter() -> None:
    runner = make_runner()

    async def cell() -> str:
        asyncio.get_running_loop()  # a loop is running, as in a notebook cell
        events = list(runner.query("Oslo"))
        return events[-1].get_message().content  # type: ignore[union-attr]

    with no_thread_leak():
        assert asyncio.run(cell()) == "report: sunny in Oslo"


def test_streams_server_sent_events_from_a_flask_request() -> None:
    from flask import Flask, Response, request

    runner = make_runner()
    app = Flask(__name__)

    @app.post("/chat")
    def chat() -> Response:
        events = runner.query(request.get_json()["question"])

        def sse() -> Iterator[str]:
            with events:  # a client that disconnects closes the generator: the run is cancelled
                for event in events:
                    yield f"data: {json.dumps(event.to_dict())}\n\n"

        return Response(sse(), mimetype="text/event-stream")

    with no_thread_leak():
        client = app.test_client()
        response = client.post("/chat", json={"question": "Rome"})
        body = response.get_data(as_text=True)
    frames = [json.loads(line[len("data: "):]) for line in body.splitlines() if line.startswith("data: ")]
    assert [f["output"]["role"] for f in frames] == ["assistant", "tool", "assistant"]
    assert frames[-1]["output"]["message"]["content"] == "report: sunny in Rome"
    assert frames[-1]["run_path"] == ["bot"]
