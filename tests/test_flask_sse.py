"""agentkit.integrations.flask: SSE frames of a run or of a run's log, over a real WSGI server;
a client that disconnects cancels a request-scoped run; a log reader resumes after an id."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from flask import Flask, request
from werkzeug.serving import make_server

from agentkit import ChatModelAgent, Runner, tool
from agentkit.integrations.flask import last_event_id, sse_events, sse_response
from agentkit.integrations.runs import LocalRuns
from agentkit.testing import ScriptedChatModel, call, calls_message


def frames(body: str) -> list[tuple[str | None, str, Any]]:
    """Parse SSE text into (id, event, data) triples."""
    result = []
    for block in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        result.append((lines.get("id"), lines["event"], json.loads(lines["data"])))
    return result


@contextmanager
def serving(app: Any) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


def weather_runner() -> Runner:
    @tool
    def get_weather(city: str) -> str:
        """Weather of a city."""
        return f"sunny in {city}"

    model = ScriptedChatModel(
        [calls_message(call("get_weather", {"city": "Rome"}), content="Checking."), "Sunny in Rome."]
    )
    return Runner(ChatModelAgent("w", "d", model, tools=[get_weather]), enable_streaming=True)


def test_a_request_scoped_run_streams_tokens_tool_results_and_done() -> None:
    app = Flask(__name__)

    @app.get("/chat")
    def chat() -> Any:
        return sse_response(weather_runner().query("weather?"), stream_tokens=True)

    parsed = frames(app.test_client().get("/chat").get_data(as_text=True))
    assert parsed[-1][1:] == ("done", {})
    roles = [data["output"]["role"] for _, kind, data in parsed if kind == "agent"]
    assert roles == ["assistant", "tool", "assistant"]
    tokens = "".join(data["content"] for _, kind, data in parsed if kind == "token")
    assert tokens == "Checking.Sunny in Rome."
    assert all(event_id is None for event_id, _, _ in parsed)


def test_a_run_log_is_served_with_ids_and_a_reconnect_goes_on_after_last_event_id() -> None:
    with LocalRuns({"w": weather_runner()}) as runs:
        app = Flask(__name__)

        @app.get("/events/<run_id>")
        def events(run_id: str) -> Any:
            return sse_response(runs.events(run_id, last_event_id(request), owner=None), headers={"X-Run-Id": run_id})

        run_id = runs.submit("w", "weather?", owner=None)
        client = app.test_client()
        whole = frames(client.get(f"/events/{run_id}").get_data(as_text=True))
        assert whole[0][1:] == ("run", {"run_id": run_id, "agent": "w"})
        assert whole[-1][1] == "end" and whole[-1][2]["status"] == "completed"
        assert [event_id for event_id, _, _ in whole] == [str(i) for i in range(1, len(whole) + 1)]
        for cut in range(len(whole) - 1):
            rest = client.get(f"/events/{run_id}", headers={"Last-Event-ID": whole[cut][0]})
            assert rest.headers["X-Run-Id"] == run_id
            assert frames(rest.get_data(as_text=True)) == whole[cut + 1 :]
        # After the end of a stopped run there is nothing more: the response ends at once.
        after_end = client.get(f"/events/{run_id}", headers={"Last-Event-ID": whole[-1][0]})
        assert after_end.get_data(as_text=True) == ""
        by_query = client.get(f"/events/{run_id}", query_string={"last_event_id": whole[-2][0]})
        assert frames(by_query.get_data(as_text=True)) == whole[-1:]


def test_client_disconnect_cancels_a_request_scoped_run() -> None:
    calls: list[int] = []
    read_one = threading.Event()

    @tool
    def work() -> str:
        """A step of endless work."""
        calls.append(1)
        time.sleep(0.01)
        return "more"

    model = ScriptedChatModel(lambda messages: calls_message(call("work"), content="working"))
    runner = Runner(ChatModelAgent("busy", "d", model, tools=[work], max_iterations=1000), enable_streaming=True)
    app = Flask(__name__)

    @app.get("/chat")
    def chat() -> Any:
        return sse_response(runner.query("go"))

    with serving(app) as url:
        with httpx.Client(timeout=30) as client, client.stream("GET", f"{url}/chat") as response:
            for line in response.iter_lines():
                if line.startswith("event: agent"):
                    read_one.set()
                    break  # read one event, then hang up
        assert read_one.is_set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            before = len(calls)
            time.sleep(0.3)
            if len(calls) == before:
                break
        stopped_at = len(calls)
    # Without cancellation the run would go on for 1000 model calls (10+ s of tool work).
    assert stopped_at < 500
    assert len(model.calls) < 500


@pytest.mark.parametrize("stream_tokens", [False, True])
def test_sse_events_reports_a_failed_stream_in_its_agent_frame(stream_tokens: bool) -> None:
    model = ScriptedChatModel([ValueError("model down")])
    events = Runner(ChatModelAgent("a", "d", model), enable_streaming=True).query("x")
    parsed = frames("".join(sse_events(events, stream_tokens=stream_tokens)))
    assert parsed[-1][1:] == ("done", {})
    assert parsed[-2][2]["error"] == {"type": "ValueError", "message": "model down"}
