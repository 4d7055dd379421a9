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
from agentkit.integrations.flask import (
    StreamLimit,
    check_same_origin,
    last_event_id,
    run_events_response,
    sse_events,
    sse_response,
)
from agentkit.integrations.runs import LocalRuns
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message


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


# --- run_events_response, last_event_id, check_same_origin, StreamLimit ----------------------


def owned_app(runs: LocalRuns, limit: StreamLimit | None = None) -> Flask:
    """An app whose user is the ``X-User`` header (a stand-in for a real login)."""
    app = Flask(__name__)

    @app.get("/events/<run_id>")
    def events(run_id: str) -> Any:
        return run_events_response(runs, run_id, owner=request.headers.get("X-User"), limit=limit)

    return app


def test_run_events_response_answers_404_alike_for_unknown_and_foreign_runs() -> None:
    with LocalRuns({"w": weather_runner()}) as runs:
        web = owned_app(runs).test_client()
        run_id = runs.submit("w", "weather?", owner="alice")
        mine = web.get(f"/events/{run_id}", headers={"X-User": "alice"})
        assert mine.status_code == 200 and mine.headers["X-Run-Id"] == run_id
        assert frames(mine.get_data(as_text=True))[-1][1] == "end"
        foreign = web.get(f"/events/{run_id}", headers={"X-User": "mallory"})
        unknown = web.get("/events/0123456789abcdef", headers={"X-User": "mallory"})
        invalid = web.get("/events/X:cancel", headers={"X-User": "mallory"})
        assert foreign.status_code == unknown.status_code == invalid.status_code == 404
        assert "no run with id" in foreign.get_data(as_text=True) and run_id in foreign.get_data(as_text=True)
        assert "belongs" not in foreign.get_data(as_text=True)  # nothing tells it exists


@pytest.mark.parametrize(
    "bad", ["\u0661", "\u00b2", "18446744073709551616", "1-2-3", "abc", "1" * 50, "0-1"]
)
def test_a_last_event_id_that_is_no_entry_id_is_a_400_never_a_500(bad: str) -> None:
    with LocalRuns({"w": weather_runner()}) as runs:
        web = owned_app(runs).test_client()
        run_id = runs.submit("w", "weather?", owner="alice")
        response = web.get(f"/events/{run_id}", headers={"X-User": "alice", "Last-Event-ID": bad})
        assert response.status_code == 400
        assert "is not an event id" in response.get_data(as_text=True)
        # The plain helper refuses it too, in any Flask view.
        app = Flask(__name__)
        with app.test_request_context(headers={"Last-Event-ID": bad}):
            from werkzeug.exceptions import BadRequest

            if bad != "0-1":  # a valid Redis-style id; the in-memory log refuses it later
                with pytest.raises(BadRequest):
                    last_event_id(request)


def test_stream_limit_answers_429_past_the_limit_and_frees_a_slot_when_a_stream_closes() -> None:
    release = threading.Event()

    @tool
    def wait_here() -> str:
        """Blocks until the test releases it."""
        release.wait(60)
        return "released"

    model = ScriptedChatModel([calls_message(call("wait_here")), "done"])
    runner = Runner(ChatModelAgent("gated", "d", model, tools=[wait_here]))
    limit = StreamLimit(per_client=2)
    with LocalRuns({"gated": runner}) as runs:
        run_id = runs.submit("gated", "go", owner="alice")
        app = owned_app(runs, limit)
        with serving(app) as url, httpx.Client(timeout=30) as http:
            headers = {"X-User": "alice"}
            first = http.send(http.build_request("GET", f"{url}/events/{run_id}", headers=headers), stream=True)
            second = http.send(http.build_request("GET", f"{url}/events/{run_id}", headers=headers), stream=True)
            assert first.status_code == second.status_code == 200
            third = http.get(f"{url}/events/{run_id}", headers=headers)
            assert third.status_code == 429
            assert "2 event streams open already" in third.text
            other = http.send(http.build_request("GET", f"{url}/events/{run_id}", headers={"X-User": "bob"}))
            assert other.status_code == 404  # another client: its own slots, and not its run
            release.set()
            first.read()  # the run ends: the stream ends and gives its slot back
            first.close()
            second.read()
            second.close()
            deadline = time.monotonic() + 20
            while limit.open_streams("alice") and time.monotonic() < deadline:
                time.sleep(0.02)
            assert limit.open_streams("alice") == 0
            again = http.get(f"{url}/events/{run_id}", headers=headers)
            assert again.status_code == 200 and frames(again.text)[-1][1] == "end"
    with pytest.raises(ValueError, match="per_client"):
        StreamLimit(per_client=0)


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({}, True),  # no browser: curl, a server-side client
        ({"Sec-Fetch-Site": "same-origin"}, True),
        ({"Sec-Fetch-Site": "none"}, True),
        ({"Sec-Fetch-Site": "same-site"}, False),  # another port or subdomain
        ({"Sec-Fetch-Site": "cross-site"}, False),
        ({"Sec-Fetch-Site": "cross-site", "Origin": "https://partner.example"}, True),  # trusted
        ({"Origin": "http://localhost"}, True),  # an older browser, same origin
        ({"Origin": "http://evil.example"}, False),
        ({"Origin": "http://localhost:8080"}, False),
        ({"Origin": "null"}, False),
    ],
)
def test_check_same_origin_refuses_posts_from_other_origins(
    headers: dict[str, str], allowed: bool
) -> None:
    from werkzeug.exceptions import Forbidden

    app = Flask(__name__)
    with app.test_request_context("/api/x", method="POST", headers=headers, base_url="http://localhost"):
        if allowed:
            check_same_origin(request, trusted_origins=["https://partner.example"])
        else:
            with pytest.raises(Forbidden, match="cross-origin request refused"):
                check_same_origin(request, trusted_origins=["https://partner.example"])
    with app.test_request_context("/api/x", method="GET", headers={"Sec-Fetch-Site": "cross-site"}):
        check_same_origin(request)  # reading is not refused (the owner check guards it)
