"""samples/flask_app.py and agentkit.integrations.flask: SSE from Flask, test client and a real
WSGI server; a client that disconnects cancels its run."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from werkzeug.serving import make_server

from agentkit import ChatModelAgent, Runner, tool
from agentkit.testing import ScriptedChatModel, call, calls_message

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "samples"))

from flask_app import create_app


def frames(body: str) -> list[tuple[str, Any]]:
    result = []
    for block in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        result.append((lines["event"], json.loads(lines["data"])))
    return result


def test_chat_streams_tokens_tool_results_and_the_answer() -> None:
    client = create_app().test_client()
    response = client.get("/chat", query_string={"q": "weather and math?"})
    assert response.status_code == 200
    assert response.mimetype == "text/event-stream"
    parsed = frames(response.get_data(as_text=True))
    kinds = [kind for kind, _ in parsed]
    assert kinds[-1] == "done"
    agent_events = [data for kind, data in parsed if kind == "agent"]
    assert [e["output"]["role"] for e in agent_events] == ["assistant", "tool", "tool", "assistant"]
    assert agent_events[-1]["output"]["message"]["content"] == "In Paris it is sunny, 21°C, and 17 * 23 = 391."
    tokens = "".join(data["content"] for kind, data in parsed if kind == "token")
    assert tokens.endswith("17 * 23 = 391.")


def test_chat_without_question_is_a_clear_400() -> None:
    response = create_app().test_client().get("/chat")
    assert response.status_code == 400
    assert "?q=" in response.get_data(as_text=True)


def test_index_page_escapes_the_question() -> None:
    page = create_app().test_client().get("/", query_string={"q": "<b>hi</b>"}).get_data(as_text=True)
    assert "&lt;b&gt;hi&lt;/b&gt;" in page


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


def test_real_wsgi_server_serves_concurrent_runs() -> None:
    results: dict[int, str] = {}
    with serving(create_app()) as url:

        def one(i: int) -> None:
            with httpx.Client(timeout=30) as client:
                body = client.get(f"{url}/chat", params={"q": f"question {i}"}).text
            answers = [d for k, d in frames(body) if k == "agent"]
            results[i] = answers[-1]["output"]["message"]["content"]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert results == {i: "In Paris it is sunny, 21°C, and 17 * 23 = 391." for i in range(6)}


def test_client_disconnect_cancels_the_run() -> None:
    calls: list[int] = []

    @tool
    def work() -> str:
        """A step of endless work."""
        calls.append(1)
        time.sleep(0.01)
        return "more"

    model = ScriptedChatModel(lambda messages: calls_message(call("work"), content="working"))
    runner = Runner(ChatModelAgent("busy", "d", model, tools=[work], max_iterations=1000), enable_streaming=True)
    with serving(create_app(runner)) as url:
        with httpx.Client(timeout=30) as client, client.stream("GET", f"{url}/chat", params={"q": "go"}) as response:
            for line in response.iter_lines():
                if line.startswith("event: agent"):
                    break  # read one event, then hang up
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
    from agentkit.integrations.flask import sse_events

    model = ScriptedChatModel([ValueError("model down")])
    events = Runner(ChatModelAgent("a", "d", model), enable_streaming=True).query("x")
    parsed = frames("".join(sse_events(events, stream_tokens=stream_tokens)))
    assert parsed[-1] == ("done", {})
    assert parsed[-2][1]["error"] == {"type": "ValueError", "message": "model down"}
