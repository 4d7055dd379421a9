"""samples/flask_app: the run API (start, stream, reconnect, approve, cancel) in-process, its
validation (clear 4xx JSON, never a 500), a real WSGI server with concurrent clients, and the
same app on a real Celery worker with Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from werkzeug.serving import make_server

from agentkit import ChatModelAgent, Runner, tool
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.integrations.runs import LocalRuns
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
sys.path.insert(0, str(SAMPLES))

from flask_app import create_app, local_runs  # noqa: E402
from flask_app.agents import AGENT_NAME  # noqa: E402

ANSWER = "All set: booked 2 nights in Lisbon, reference HTL-3689. Enjoy Lisbon!"


def frames(body: str) -> list[tuple[str | None, str, Any]]:
    result = []
    for block in body.strip().split("\n\n"):
        if not block:
            continue
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        result.append((lines.get("id"), lines["event"], json.loads(lines["data"])))
    return result


@pytest.fixture
def runs() -> Iterator[LocalRuns]:
    with local_runs() as backend:
        yield backend


@pytest.fixture
def client(runs: LocalRuns) -> Any:
    return create_app(runs).test_client()


def test_a_run_streams_at_once_then_an_approval_finishes_it(client: Any) -> None:
    response = client.post("/api/runs", json={"message": "Plan a weekend in Lisbon"})
    assert response.status_code == 200 and response.mimetype == "text/event-stream"
    run_id = response.headers["X-Run-Id"]
    parsed = frames(response.get_data(as_text=True))
    assert parsed[0][1:] == ("run", {"run_id": run_id, "agent": AGENT_NAME})
    kinds = [kind for _, kind, _ in parsed]
    assert kinds.count("token") >= 6
    agents = [data for _, kind, data in parsed if kind == "agent"]
    assert agents[1]["action"] == {"transfer_to_agent": "travel"}
    calls = [c["function"]["name"] for a in agents for c in a.get("output", {}).get("message", {}).get("tool_calls", [])]
    assert calls == ["transfer_to_agent", "get_weather", "book_hotel"]
    end = parsed[-1][2]
    assert parsed[-1][1] == "end" and end["status"] == "interrupted"
    assert end["prompts"][0]["info"] == "Book a hotel in Lisbon for 2 nights (120 EUR a night)?"

    resumed = client.post(f"/api/runs/{run_id}/resume", json={"approve": True})
    assert resumed.status_code == 200
    rest = frames(resumed.get_data(as_text=True))
    resumed_id, stopped_id = rest[0][0], parsed[-1][0]
    assert resumed_id is not None and stopped_id is not None
    assert int(resumed_id) == int(stopped_id) + 1  # the log goes on where it stopped
    assert rest[-1][2]["status"] == "completed" and rest[-1][2]["answer"] == ANSWER
    tokens = "".join(data["content"] for _, kind, data in rest if kind == "token")
    assert tokens == ANSWER
    # The whole log, read again from the start, is the two streams back to back.
    again = frames(client.get(f"/api/runs/{run_id}/events").get_data(as_text=True))
    assert again == parsed
    after = client.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": parsed[-1][0]})
    assert frames(after.get_data(as_text=True)) == rest


def test_rejecting_declines_the_booking(client: Any) -> None:
    response = client.post("/api/runs", json={"message": "Two nights in Oslo please"})
    run_id = response.headers["X-Run-Id"]
    assert frames(response.get_data(as_text=True))[-1][2]["status"] == "interrupted"
    rest = frames(client.post(f"/api/runs/{run_id}/resume", json={"approve": False}).get_data(as_text=True))
    assert rest[-1][2]["answer"] == "No booking was made, as you declined it. Anything else I can do?"
    again = client.post(f"/api/runs/{run_id}/resume", json={"approve": True})
    assert again.status_code == 409
    assert "not waiting for an approval" in again.get_json()["error"]


def test_reconnect_mid_stream_with_last_event_id_loses_and_repeats_nothing(client: Any) -> None:
    response = client.post("/api/runs", json={"message": "Plan a weekend in Lisbon"})
    run_id = response.headers["X-Run-Id"]
    whole = frames(response.get_data(as_text=True))
    for cut in (0, 3, 7, len(whole) - 2):
        rest = client.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": whole[cut][0]})
        assert frames(rest.get_data(as_text=True)) == whole[cut + 1 :]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "words"),
    [
        ("post", "/api/runs", "{not json", 400, "JSON object"),
        ("post", "/api/runs", {"text": "hi"}, 400, '{"message": "..."}'),
        ("post", "/api/runs", {"message": 42}, 400, "non-empty text"),
        ("post", "/api/runs", {"message": "   "}, 400, "non-empty text"),
        ("post", "/api/runs", {"message": "x" * 5000}, 400, "too long"),
        ("get", "/api/runs/nope/events", None, 404, "no run with id 'nope'"),
        ("post", "/api/runs/nope/resume", {"approve": True}, 404, "no run with id"),
        ("post", "/api/runs/nope/cancel", {}, 404, "no run with id"),
        ("get", "/api/runs", None, 405, "method"),
        ("get", "/api/nothing", None, 404, "not found"),
    ],
)
def test_bad_requests_get_a_clear_json_4xx(
    client: Any, method: str, path: str, body: Any, status: int, words: str
) -> None:
    if isinstance(body, str):
        response = getattr(client, method)(path, data=body, content_type="application/json")
    else:
        response = getattr(client, method)(path, json=body)
    assert response.status_code == status
    assert words.lower() in response.get_json()["error"].lower()


def test_bad_resume_bodies_and_event_ids_of_a_real_run(client: Any) -> None:
    response = client.post("/api/runs", json={"message": "Plan a weekend in Lisbon"})
    run_id = response.headers["X-Run-Id"]
    response.get_data()
    bad = client.post(f"/api/runs/{run_id}/resume", json={"approve": "yes"})
    assert bad.status_code == 400 and "approve" in bad.get_json()["error"]
    bad_id = client.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "abc"})
    assert bad_id.status_code == 400 and "Last-Event-ID 'abc'" in bad_id.get_json()["error"]
    page = client.get("/")
    assert page.status_code == 200 and b"approve" in page.data


def test_an_unexpected_failure_is_a_json_500_without_a_traceback(runs: LocalRuns) -> None:
    class Broken(LocalRuns):
        def submit(self, *args: Any, **kwargs: Any) -> str:
            raise OSError("disk on fire")

    with Broken({}) as broken:
        response = create_app(broken).test_client().post("/api/runs", json={"message": "hi"})
    assert response.status_code == 500
    assert response.get_json() == {"error": "internal error; the server log has the details"}


def test_cancel_stops_a_running_run() -> None:
    entered = threading.Event()
    release = threading.Event()

    @tool
    def wait_here() -> str:
        """Blocks until the test releases it."""
        entered.set()
        release.wait(60)
        return "released"

    model = ScriptedChatModel(lambda messages: calls_message(call("wait_here"), content="working"))
    agent = ChatModelAgent(AGENT_NAME, "d", model, tools=[wait_here], max_iterations=100)
    runner = Runner(agent, enable_streaming=True, checkpoint_store=InMemoryCheckPointStore())
    with LocalRuns({AGENT_NAME: runner}) as runs:
        client = create_app(runs).test_client()
        started = client.post("/api/runs", json={"message": "go"})  # streams lazily
        run_id = started.headers["X-Run-Id"]
        assert entered.wait(60)
        response = client.post(f"/api/runs/{run_id}/cancel", json={})
        assert response.get_json() == {"run_id": run_id, "cancelled": True}
        release.set()
        assert frames(started.get_data(as_text=True))[-1][2]["status"] == "cancelled"
        parsed = frames(client.get(f"/api/runs/{run_id}/events").get_data(as_text=True))
        assert parsed[-1][2]["status"] == "cancelled"
        assert client.post(f"/api/runs/{run_id}/cancel", json={}).get_json()["cancelled"] is False
    assert len(model.calls) == 1


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


def test_real_wsgi_server_serves_concurrent_runs_and_approvals(runs: LocalRuns) -> None:
    results: dict[int, str] = {}

    def one(url: str, i: int) -> None:
        with httpx.Client(timeout=30) as http:
            response = http.post(f"{url}/api/runs", json={"message": f"Trip {i} to Lisbon"})
            run_id = response.headers["x-run-id"]
            assert frames(response.text)[-1][2]["status"] == "interrupted"
            rest = http.post(f"{url}/api/runs/{run_id}/resume", json={"approve": True})
            results[i] = frames(rest.text)[-1][2]["answer"]

    with serving(create_app(runs)) as url:
        threads = [threading.Thread(target=one, args=(url, i)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert results == {i: ANSWER for i in range(6)}


def test_the_app_on_a_celery_worker_with_redis(redis_url: str, tmp_path: Path) -> None:  # noqa: F811
    pytest.importorskip("celery")
    import redis

    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "AGENTKIT_CHECKPOINT_KEY": "flask-app-test-key-0123456789abcdef",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(SAMPLES)]),
    }
    lane = f"app-{uuid.uuid4().hex[:6]}"
    env["CELERY_QUEUE"] = lane  # this test's own queue: no other worker takes its runs
    log_path = tmp_path / "worker.log"
    client = redis.Redis.from_url(redis_url, socket_timeout=70)  # > the BLPOP below
    ready = f"test:ready:{lane}"
    boot = (
        "import sys, redis; from celery.signals import worker_ready\n"
        f"worker_ready.connect(lambda **_: redis.Redis.from_url({redis_url!r}).rpush({ready!r}, 1), weak=False)\n"
        "from celery.__main__ import main; sys.exit(main())"
    )
    command = [sys.executable, "-c", boot, "-A", "flask_app.tasks", "worker", "--pool=threads",
               "-n", f"{lane}@test", "--without-gossip", "--without-mingle"]
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(command, cwd=SAMPLES, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        assert client.blpop([ready], timeout=60) is not None, log_path.read_text()[-3000:]
        # The web side: a second process serving the app from the same Redis.
        script = (
            "import json, sys\n"
            "from flask_app import create_app\n"
            "client = create_app().test_client()\n"
            "first = client.post('/api/runs', json={'message': 'Plan a weekend in Lisbon'})\n"
            "run_id = first.headers['X-Run-Id']\n"
            "print(json.dumps(first.get_data(as_text=True)))\n"
            "second = client.post(f'/api/runs/{run_id}/resume', json={'approve': True})\n"
            "print(json.dumps(second.get_data(as_text=True)))\n"
        )
        done = subprocess.run([sys.executable, "-c", script], cwd=SAMPLES, env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        first, second = (frames(json.loads(line)) for line in done.stdout.splitlines())
        assert first[-1][2]["status"] == "interrupted"
        started = [d for _, k, d in first if k == "status" and d["status"] == "started"]
        assert started[0]["worker"] == f"{lane}@test"
        assert second[-1][2]["status"] == "completed" and second[-1][2]["answer"] == ANSWER
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


from tests.redis_server import redis_url  # noqa: E402,F401


def gated_app() -> tuple[LocalRuns, Any, threading.Event, threading.Event]:
    """The app over a run that waits in a tool until the test releases it."""
    entered, release = threading.Event(), threading.Event()

    @tool
    def wait_here() -> str:
        """Blocks until the test releases it."""
        entered.set()
        release.wait(60)
        return "released"

    model = ScriptedChatModel(lambda m: calls_message(call("wait_here")) if len(m) == 1 else "finished")
    agent = ChatModelAgent(AGENT_NAME, "d", model, tools=[wait_here])
    runner = Runner(agent, enable_streaming=True, checkpoint_store=InMemoryCheckPointStore())
    runs = LocalRuns({AGENT_NAME: runner})
    return runs, create_app(runs), entered, release


def test_another_session_cannot_read_approve_or_cancel_a_run(client: Any, runs: LocalRuns) -> None:
    response = client.post("/api/runs", json={"message": "Plan a weekend in Lisbon"})
    run_id = response.headers["X-Run-Id"]
    assert frames(response.get_data(as_text=True))[-1][2]["status"] == "interrupted"
    stranger = client.application.test_client()  # another browser: its own session cookie
    for method, path, body in [
        ("get", f"/api/runs/{run_id}/events", None),
        ("post", f"/api/runs/{run_id}/resume", {"approve": True}),
        ("post", f"/api/runs/{run_id}/cancel", {}),
    ]:
        answer = getattr(stranger, method)(path, json=body)
        assert answer.status_code == 404, (path, answer.get_json())
        assert "no run with id" in answer.get_json()["error"]
    # The owner's session still approves it: nothing was consumed.
    resumed = client.post(f"/api/runs/{run_id}/resume", json={"approve": True})
    assert frames(resumed.get_data(as_text=True))[-1][2]["answer"] == ANSWER


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "http://evil.example"},
    ],
)
def test_state_changing_requests_from_other_origins_are_refused(headers: dict[str, str]) -> None:
    runs, app, entered, release = gated_app()
    with runs:
        web = app.test_client()
        started = web.post("/api/runs", json={"message": "go"})
        run_id = started.headers["X-Run-Id"]
        assert entered.wait(60)
        for path, body in [
            (f"/api/runs/{run_id}/cancel", {}),
            (f"/api/runs/{run_id}/resume", {"approve": True}),
            ("/api/runs", {"message": "spam"}),
        ]:
            refused = web.post(path, json=body, headers=headers)
            assert refused.status_code == 403
            assert "cross-origin request refused" in refused.get_json()["error"]
        assert runs.held() == 1  # no run was started either
        release.set()
        assert frames(started.get_data(as_text=True))[-1][2]["status"] == "completed"


def test_posts_without_a_json_body_are_refused(client: Any) -> None:
    response = client.post("/api/runs", json={"message": "Plan a weekend in Lisbon"})
    run_id = response.headers["X-Run-Id"]
    response.get_data()
    for body, content_type in [("", None), ("approve=true", "application/x-www-form-urlencoded"),
                               ('{"approve": true}', "text/plain")]:
        refused = client.post(f"/api/runs/{run_id}/resume", data=body, content_type=content_type)
        assert refused.status_code == 415
        assert "JSON body" in refused.get_json()["error"]
