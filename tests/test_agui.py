"""agentkit.integrations.agui: AG-UI events over SSE, validated with ``ag_ui``'s own models."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("ag_ui")
pytest.importorskip("flask")

from ag_ui.core import Event
from flask import Flask, request
from pydantic import TypeAdapter

from agentkit import Runner
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.integrations.agui import agui_response
from tests.interop_agents import make_agent

EVENT = TypeAdapter(Event)


def make_app(runner: Runner) -> Any:
    app = Flask(__name__)

    @app.post("/agui")
    def agui() -> Any:
        return agui_response(runner, request.get_data(), owner=request.headers.get("X-User"))

    return app


@pytest.fixture
def client() -> Iterator[Any]:
    for streaming in (False,):
        runner = Runner(make_agent(), checkpoint_store=InMemoryCheckPointStore(), enable_streaming=streaming)
        yield make_app(runner).test_client()


def post(client: Any, body: Any, *, user: str | None = None, status: int = 200) -> list[dict[str, Any]]:
    headers = {"X-User": user} if user else {}
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    response = client.post("/agui", data=data, headers=headers, content_type="application/json")
    assert response.status_code == status
    assert response.mimetype == "text/event-stream"
    events = []
    for frame in response.get_data(as_text=True).split("\n\n"):
        if not frame.strip():
            continue
        assert frame.startswith("data: ")
        payload = json.loads(frame[len("data: "):])
        EVENT.validate_python(payload)  # every event is a valid AG-UI event
        events.append(payload)
    return events


def user_input(text: str, *, thread: str = "t1", run: str = "r1", **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread, "runId": run, "state": {}, "tools": [], "context": [],
        "forwardedProps": {}, "messages": [{"id": "m1", "role": "user", "content": text}], **extra,
    }


def types_of(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


@pytest.mark.parametrize("streaming", [False, True])
def test_a_run_is_run_started_text_message_and_run_finished(streaming: bool) -> None:
    runner = Runner(make_agent(), enable_streaming=streaming)
    events = post(make_app(runner).test_client(), user_input("hello"))
    kinds = types_of(events)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert kinds[1] == "TEXT_MESSAGE_START" and kinds[-2] == "TEXT_MESSAGE_END"
    assert set(kinds[2:-2]) == {"TEXT_MESSAGE_CONTENT"}
    text = "".join(event["delta"] for event in events if event["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "echo: hello"
    assert events[0]["threadId"] == "t1" and events[0]["runId"] == "r1"
    assert events[-1]["outcome"] == {"type": "success"}
    if streaming:
        assert kinds.count("TEXT_MESSAGE_CONTENT") > 1


def test_an_approval_is_an_interrupt_outcome_and_a_resume_entry_answers_it(client: Any) -> None:
    events = post(client, user_input("pay ACME 120"))
    kinds = types_of(events)
    assert kinds[:5] == ["RUN_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "RUN_FINISHED"]
    assert events[1]["toolCallName"] == "pay" and events[1]["toolCallId"] == "p1"
    assert json.loads(events[2]["delta"]) == {"payee": "ACME", "amount": 120}
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    [point] = outcome["interrupts"]
    assert point["reason"] == "tool_approval" and point["toolCallId"] == "p1"
    assert point["responseSchema"]["properties"]["decision"]["enum"] == ["approve", "reject", "edit"]
    resumed = post(client, user_input("", run="r2", messages=[], resume=[
        {"interruptId": point["id"], "status": "resolved", "payload": {"decision": "edit", "arguments": {"payee": "ACME", "amount": 5}}},
    ]))
    kinds = types_of(resumed)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    [result] = [event for event in resumed if event["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "p1" and result["content"] == "paid 5 to ACME"
    assert resumed[-1]["result"] == "done: paid 5 to ACME"
    # The same interrupt cannot be answered twice.
    again = post(client, user_input("", run="r3", messages=[], resume=[
        {"interruptId": point["id"], "status": "resolved", "payload": {"decision": "approve"}},
    ]))
    assert types_of(again) == ["RUN_ERROR"]


def test_a_question_is_an_input_required_interrupt_answered_by_its_payload(client: Any) -> None:
    tool = {"name": "ask", "description": "shadowed by the agent's own", "parameters": {"type": "object"}}
    confirm = {"name": "confirm", "description": "Ask the user in the page.", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}
    # The agent's model calls its own tools only; give it a page tool and check it is offered.
    events = post(client, user_input("ask", tools=[tool, confirm]))
    outcome = events[-1]["outcome"]
    [point] = outcome["interrupts"]
    assert point["reason"] == "input_required"
    assert point["message"] == "What is your favourite colour?"
    resumed = post(client, user_input("", run="r2", messages=[], tools=[tool, confirm], resume=[
        {"interruptId": point["id"], "status": "resolved", "payload": "blue"},
    ]))
    assert resumed[-1]["result"] == "done: colour is blue"


def test_a_page_tool_call_is_a_tool_call_interrupt() -> None:
    from agentkit import ChatModelAgent
    from agentkit.models import ScriptedChatModel
    from agentkit.testing import call, calls_message

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role == "tool":
            return f"the page said {messages[-1].content}"
        return calls_message(call("confirm", {"text": "sure?"}, id="c1"))

    agent = ChatModelAgent("pager", "asks the page", ScriptedChatModel(reply))
    client = make_app(Runner(agent, checkpoint_store=InMemoryCheckPointStore())).test_client()
    confirm = {"name": "confirm", "description": "Ask the user in the page.", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}
    events = post(client, user_input("go", tools=[confirm]))
    assert [e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"] == ["confirm"]
    [point] = events[-1]["outcome"]["interrupts"]
    assert point["reason"] == "tool_call" and point["toolCallId"] == "c1"
    assert point["metadata"]["arguments"] == {"text": "sure?"}
    resumed = post(client, user_input("", run="r2", messages=[], tools=[confirm], resume=[
        {"interruptId": point["id"], "status": "resolved", "payload": "yes"},
    ]))
    assert resumed[-1]["result"] == "the page said yes"


def test_state_is_the_session_values_and_comes_back_as_a_snapshot(client: Any) -> None:
    events = post(client, user_input("hello", state={"city": "Lisbon"}))
    [snapshot] = [event for event in events if event["type"] == "STATE_SNAPSHOT"]
    assert snapshot["snapshot"] == {"city": "Lisbon"}


def test_another_owner_cannot_resume_a_thread(client: Any) -> None:
    events = post(client, user_input("pay ACME 3"), user="alice")
    [point] = events[-1]["outcome"]["interrupts"]
    answer = [{"interruptId": point["id"], "status": "resolved", "payload": {"decision": "approve"}}]
    stolen = post(client, user_input("", run="r2", messages=[], resume=answer), user="mallory")
    assert types_of(stolen) == ["RUN_ERROR"]
    other_thread = post(client, user_input("", thread="t2", run="r2", messages=[], resume=answer), user="alice")
    assert types_of(other_thread) == ["RUN_ERROR"]
    done = post(client, user_input("", run="r2", messages=[], resume=answer), user="alice")
    assert done[-1]["result"] == "done: paid 3 to ACME"


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[1, 2]",
        {"threadId": "t"},
        user_input("x" * 1_000_001),
        user_input("hi", messages=[{"id": str(i), "role": "user", "content": "x"} for i in range(501)]),
    ],
)
def test_bad_input_is_a_400_with_one_run_error_and_runs_nothing(client: Any, body: Any) -> None:
    events = post(client, body, status=400)
    assert types_of(events) == ["RUN_ERROR"]
    assert events[0]["code"] == "invalid_input"


def test_a_forged_interrupt_id_is_a_run_error(client: Any) -> None:
    forged = post(client, user_input("", messages=[], resume=[
        {"interruptId": "../../etc/passwd/x", "status": "resolved", "payload": True},
    ]))
    assert types_of(forged) == ["RUN_ERROR"]


def test_a_page_tool_answered_with_a_tool_message_goes_on_from_the_history() -> None:
    # The AG-UI way without resume entries: the page sends the thread's messages with the
    # tool's result; the run continues from that history.
    from agentkit import ChatModelAgent
    from agentkit.models import ScriptedChatModel
    from agentkit.testing import call, calls_message

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role == "tool":
            return f"the page said {messages[-1].content}"
        return calls_message(call("confirm", {"text": "sure?"}, id="c1"))

    agent = ChatModelAgent("pager", "asks the page", ScriptedChatModel(reply))
    client = make_app(Runner(agent, checkpoint_store=InMemoryCheckPointStore())).test_client()
    confirm = {"name": "confirm", "description": "Ask the user in the page.", "parameters": {"type": "object"}}
    history = [
        {"id": "m1", "role": "user", "content": "go"},
        {"id": "m2", "role": "assistant", "toolCalls": [
            {"id": "c1", "type": "function", "function": {"name": "confirm", "arguments": '{"text": "sure?"}'}}]},
        {"id": "m3", "role": "tool", "toolCallId": "c1", "content": "yes"},
    ]
    events = post(client, user_input("", run="r2", messages=history, tools=[confirm]))
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["result"] == "the page said yes"


def _cart_runner() -> Runner:
    from agentkit import ChatModelAgent, add_session_value, get_session_value, tool
    from agentkit.models import ScriptedChatModel
    from agentkit.testing import call, calls_message

    @tool
    def buy(item: str) -> str:
        """Put an item in the cart."""
        cart = get_session_value("cart") or {"items": [], "count": 0}
        add_session_value("cart", {"items": [*cart["items"], item], "count": cart["count"] + 1})
        add_session_value("paid/~now", True)  # a key that needs escaping in a JSON Pointer
        return f"{item} in the cart"

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role == "tool":
            return f"done: {messages[-1].content}"
        return calls_message(call("buy", {"item": messages[-1].content}, id="b1"))

    agent = ChatModelAgent("shop", "buys things", ScriptedChatModel(reply), tools=[buy])
    return Runner(agent, checkpoint_store=InMemoryCheckPointStore())


def test_state_changes_after_the_snapshot_are_json_patch_deltas() -> None:
    client = make_app(_cart_runner()).test_client()
    state = {"cart": {"items": [], "count": 0}, "city": "Lisbon"}
    events = post(client, user_input("apple", state=state))
    kinds = types_of(events)
    assert kinds == [
        "RUN_STARTED", "STATE_SNAPSHOT", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
        "TOOL_CALL_RESULT", "STATE_DELTA",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED",
    ]
    assert events[1]["snapshot"] == state
    [delta] = [event["delta"] for event in events if event["type"] == "STATE_DELTA"]
    assert delta == [
        {"op": "replace", "path": "/cart/items", "value": ["apple"]},
        {"op": "replace", "path": "/cart/count", "value": 1},
        {"op": "add", "path": "/paid~1~0now", "value": True},
    ]


def test_a_resumed_run_starts_from_a_snapshot_of_its_saved_values(client: Any) -> None:
    events = post(client, user_input("pay ACME 3", state={"city": "Lisbon"}))
    [point] = events[-1]["outcome"]["interrupts"]
    resumed = post(client, user_input("", run="r2", messages=[], resume=[
        {"interruptId": point["id"], "status": "resolved", "payload": {"decision": "approve"}},
    ]))
    assert types_of(resumed)[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert resumed[1]["snapshot"] == {"city": "Lisbon"}
    assert "STATE_DELTA" not in types_of(resumed)  # nothing changed them


def test_a_json_patch_removes_adds_replaces_and_descends_into_objects() -> None:
    from ag_ui.core import StateDeltaEvent

    from agentkit.integrations.agui import _json_patch

    old = {"gone": 1, "same": [1, 2], "flag": 1, "deep": {"a": {"b": 1, "c": 2}}}
    new = {"same": [1, 2], "flag": True, "deep": {"a": {"b": 1, "d": 3}}, "a/b": None}
    patch = _json_patch(old, new)
    assert patch == [
        {"op": "remove", "path": "/gone"},
        {"op": "replace", "path": "/flag", "value": True},  # 1 == True in Python, not in JSON
        {"op": "remove", "path": "/deep/a/c"},
        {"op": "add", "path": "/deep/a/d", "value": 3},
        {"op": "add", "path": "/a~1b", "value": None},
    ]
    StateDeltaEvent.model_validate({"type": "STATE_DELTA", "delta": patch})  # AG-UI's (RFC 6902) ops
    assert _json_patch(new, new) == []


def test_values_changed_outside_a_tool_come_as_a_delta_before_run_finished() -> None:
    from agentkit import AgentMiddleware, ChatModelAgent, Message, ModelState, add_session_value
    from agentkit.models import ScriptedChatModel

    class Visits(AgentMiddleware):
        def after_model(self, state: ModelState, message: Message) -> Message:
            add_session_value("visits", 1)
            return message

    agent = ChatModelAgent("greeter", "greets", ScriptedChatModel(lambda messages: "hi"),
                           middlewares=[Visits()])
    events = post(make_app(Runner(agent)).test_client(), user_input("hello", state={"city": "Lisbon"}))
    assert types_of(events) == [
        "RUN_STARTED", "STATE_SNAPSHOT", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END", "STATE_DELTA", "RUN_FINISHED",
    ]
    assert events[-2]["delta"] == [{"op": "add", "path": "/visits", "value": 1}]
