"""agentkit.a2a.to_a2a: an agent served over A2A on a real threaded WSGI server, called by
``a2a-sdk``'s own client (and by raw JSON-RPC for the bad inputs)."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("a2a")
anyio = pytest.importorskip("anyio")


import httpx  # noqa: E402
from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.compat.v0_3 import types as v03  # noqa: E402
from a2a.types import (  # noqa: E402
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from werkzeug.serving import make_server  # noqa: E402

from agentkit.a2a import A2AApplication, to_a2a  # noqa: E402
from agentkit.integrations.runs import LocalRuns  # noqa: E402
from tests.interop_agents import SLOW_STARTED, make_agent  # noqa: E402

GUARD = 60.0


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(GUARD)


@pytest.fixture
def served() -> Iterator[tuple[A2AApplication, str]]:
    app = to_a2a(make_agent(), description="echoes, pays and asks")

    def with_user(environ: dict[str, Any], start_response: Any) -> Any:
        user = environ.get("HTTP_X_USER")
        if user:
            environ["REMOTE_USER"] = user  # what an authenticating middleware would do
        return app(environ, start_response)

    with serving(with_user) as url:
        yield app, url
    app.close()


def message(text: str, *, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        role=Role.ROLE_USER, parts=[Part(text=text)], message_id=uuid.uuid4().hex,
        task_id=task_id, context_id=context_id,
    )


def run(body: Callable[[], Awaitable[None]]) -> None:
    async def guarded() -> None:
        with anyio.fail_after(GUARD):
            await body()

    anyio.run(guarded)


async def collect(client: Any, request: SendMessageRequest) -> list[Any]:
    return [event async for event in client.send_message(request)]


def rpc(url: str, body: Any, *, headers: dict[str, str] | None = None) -> httpx.Response:
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(url + "/", content=data, headers={"Content-Type": "application/json", **(headers or {})}, timeout=GUARD)


def test_the_agent_card_is_served_and_valid(served: tuple[A2AApplication, str]) -> None:
    _, url = served
    card = httpx.get(url + "/.well-known/agent-card.json", timeout=GUARD).json()
    parsed = v03.AgentCard.model_validate(card)
    assert parsed.name == "helper" and parsed.description == "echoes, pays and asks"
    assert parsed.url == url + "/" and parsed.capabilities.streaming


@pytest.mark.parametrize("streaming", [True, False])
def test_the_sdk_client_sends_a_message_and_gets_the_answer(
    served: tuple[A2AApplication, str], streaming: bool
) -> None:
    _, url = served

    async def body() -> None:
        client = await create_client(url, client_config=ClientConfig(streaming=streaming))
        async with client:
            events = await collect(client, SendMessageRequest(message=message("hello")))
            last = events[-1]
            task_id = last.task.id if last.HasField("task") else last.status_update.task_id
            task = await client.get_task(GetTaskRequest(id=task_id))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert task.artifacts[0].parts[0].text == "echo: hello"
            if streaming:
                assert any(e.HasField("artifact_update") for e in events)
                assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

    run(body)


@pytest.mark.parametrize("answer", ["approve", "reject"])
def test_an_approval_is_input_required_and_the_next_message_resumes_the_task(
    served: tuple[A2AApplication, str], answer: str
) -> None:
    _, url = served

    async def body() -> None:
        client = await create_client(url, client_config=ClientConfig(streaming=True))
        async with client:
            events = await collect(client, SendMessageRequest(message=message("pay ACME 9")))
            final = events[-1].status_update
            assert final.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert "Approve pay(" in final.status.message.parts[0].text
            task_id, context_id = final.task_id, final.context_id
            resumed = await collect(client, SendMessageRequest(
                message=message(answer, task_id=task_id, context_id=context_id)))
            assert resumed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
            task = await client.get_task(GetTaskRequest(id=task_id))
            expected = "done: paid 9 to ACME" if answer == "approve" else "done: The user rejected this call of pay; it was not run."
            assert task.artifacts[0].parts[0].text == expected
            assert [m.parts[0].text for m in task.history] == ["pay ACME 9", answer]

    run(body)


def test_cancel_stops_a_running_task(served: tuple[A2AApplication, str]) -> None:
    _, url = served
    SLOW_STARTED.clear()
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"role": "user", "parts": [{"kind": "text", "text": "slow"}], "messageId": "m1", "kind": "message"},
        "configuration": {"blocking": False}}}
    task = rpc(url, body).json()["result"]
    assert SLOW_STARTED.wait(GUARD)

    async def cancel() -> None:
        client = await create_client(url, client_config=ClientConfig(streaming=False))
        async with client:
            cancelled = await client.cancel_task(CancelTaskRequest(id=task["id"]))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED

    run(cancel)
    again = rpc(url, {"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel", "params": {"id": task["id"]}}).json()
    assert again["error"]["code"] == -32002


def test_resubscribe_streams_a_running_task_and_a_stale_id_is_task_not_found(
    served: tuple[A2AApplication, str],
) -> None:
    app, url = served
    SLOW_STARTED.clear()
    start = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"role": "user", "parts": [{"kind": "text", "text": "slow"}], "messageId": "m1", "kind": "message"},
        "configuration": {"blocking": False}}}
    task = rpc(url, start).json()["result"]
    assert SLOW_STARTED.wait(GUARD)
    frames: list[dict[str, Any]] = []
    resubscribe = {"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe", "params": {"id": task["id"]}}
    with httpx.stream("POST", url + "/", json=resubscribe, timeout=GUARD) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            frames.append(json.loads(line[6:]))
            if len(frames) == 1:
                app.runs.cancel(task["id"])
    results = [frame["result"] for frame in frames]
    v03.Task.model_validate(results[0])
    final = v03.TaskStatusUpdateEvent.model_validate(results[-1])
    assert final.final and final.status.state == "canceled"
    stale = rpc(url, resubscribe).json()
    assert stale["error"]["code"] == -32004  # stopped: read it with tasks/get
    unknown = rpc(url, {**resubscribe, "params": {"id": "0" * 32}}).json()
    assert unknown["error"]["code"] == -32001


def test_a_task_of_another_owner_is_not_found(served: tuple[A2AApplication, str]) -> None:
    _, url = served
    send = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"role": "user", "parts": [{"kind": "text", "text": "pay ACME 1"}], "messageId": "m1", "kind": "message"}}}
    task = rpc(url, send, headers={"X-User": "alice"}).json()["result"]
    assert task["status"]["state"] == "input-required"
    for method, params in [
        ("tasks/get", {"id": task["id"]}),
        ("tasks/cancel", {"id": task["id"]}),
        ("message/send", {"message": {"role": "user", "parts": [{"kind": "text", "text": "approve"}], "messageId": "m2", "kind": "message", "taskId": task["id"]}}),
    ]:
        for who in ({"X-User": "mallory"}, {}):
            answer = rpc(url, {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}, headers=who).json()
            assert answer["error"]["code"] == -32001, (method, who)
    mine = rpc(url, {"jsonrpc": "2.0", "id": 8, "method": "tasks/get", "params": {"id": task["id"]}}, headers={"X-User": "alice"}).json()
    assert mine["result"]["status"]["state"] == "input-required"  # nothing changed it


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b"[1, 2]", -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "tasks/frobnicate", "params": {}}, -32601),
        ({"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": "x"}}, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": "hi"}}, -32602),
        ({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "nope"}}, -32001),
    ],
)
def test_bad_requests_are_json_rpc_errors_and_start_nothing(
    served: tuple[A2AApplication, str], body: Any, code: int
) -> None:
    app, url = served
    answer = rpc(url, body)
    assert answer.status_code == 200
    error = v03.JSONRPCErrorResponse.model_validate(answer.json())
    assert error.error.code == code
    assert isinstance(app.runs, LocalRuns) and app.runs.held() == 0


def test_an_oversized_request_is_refused_before_it_is_read(served: tuple[A2AApplication, str]) -> None:
    app, url = served
    big = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
        "message": {"role": "user", "parts": [{"kind": "text", "text": "x" * 1_100_000}], "messageId": "m", "kind": "message"}}}
    answer = rpc(url, big)
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == -32600
    assert isinstance(app.runs, LocalRuns) and app.runs.held() == 0


def test_tasks_can_run_on_a_local_runs_backend_of_ones_own() -> None:
    from agentkit import Runner
    from agentkit.checkpoint import InMemoryCheckPointStore
    with LocalRuns({"helper": Runner(make_agent(), checkpoint_store=InMemoryCheckPointStore())}) as runs:
        app = to_a2a(runs, name="helper", description="on my own LocalRuns")
        with serving(app) as url:
            send = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
                "message": {"role": "user", "parts": [{"kind": "text", "text": "hi"}], "messageId": "m1", "kind": "message"}}}
            task = rpc(url, send).json()["result"]
            assert task["status"]["state"] == "completed"
            assert task["artifacts"][0]["parts"][0]["text"] == "echo: hi"
            assert runs.has_run(task["id"])  # the task is a run of the given backend
        app.close()  # leaves the backend to its owner
        assert runs.status(task["id"])["status"] == "completed"
    with pytest.raises(ValueError, match="needs the name"):
        to_a2a(LocalRuns({}))


def test_many_tasks_in_a_row_each_answer(served: tuple[A2AApplication, str]) -> None:
    # Past the point where forgotten tasks are swept (every 64 new tasks).
    _, url = served
    with httpx.Client(timeout=GUARD) as http:
        for number in range(130):
            body = {"jsonrpc": "2.0", "id": number, "method": "message/send", "params": {
                "message": {"role": "user", "parts": [{"kind": "text", "text": f"n{number}"}],
                            "messageId": f"m{number}", "kind": "message"}}}
            answer = http.post(url + "/", json=body).json()
            assert answer["result"]["artifacts"][0]["parts"][0]["text"] == f"echo: n{number}", answer
