"""OpenAIResponsesModel: the Responses API wire, against documented shapes and FakeResponsesServer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkit import ChatModelAgent, Runner, tool, with_checkpoint_id
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import IncompleteStreamError, ModelError
from agentkit.models import ModelOptions, OpenAIResponsesModel
from agentkit.schema import TokenUsage, ToolInfo, concat_messages, user_message
from agentkit.testing import FakeResponsesServer, Reply, call

FIXTURES = Path(__file__).parent / "fixtures" / "responses"
WEATHER = ToolInfo(
    "get_weather", "Weather.", {"type": "object", "properties": {"city": {"type": "string"}}}
)


@tool
def get_weather(city: str) -> str:
    """Get the current weather of a city."""
    return f"sunny in {city}"


@pytest.fixture
def server() -> Any:
    with FakeResponsesServer() as fake:
        yield fake


def model_for(server: FakeResponsesServer, **kwargs: Any) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-test", base_url=server.base_url, api_key="sk", **kwargs)


def fixture_model(name: str, content_type: str = "application/json") -> OpenAIResponsesModel:
    data = (FIXTURES / name).read_bytes()
    client = httpx.Client(
        transport=httpx.MockTransport(
            lambda request: httpx.Response(
                200, content=data, headers={"content-type": content_type}
            )
        )
    )
    return OpenAIResponsesModel("gpt-5-mini", api_key="k", http_client=client)


def test_the_request_is_stateless_by_default(server: FakeResponsesServer) -> None:
    server.queue(Reply("ok"))
    model = model_for(server, reasoning_effort="low").with_tools([WEATHER])
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    options = ModelOptions(
        tool_choice="get_weather",
        max_tokens=64,
        extra={
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "A", "schema": schema},
            }
        },
    )
    model.generate([user_message("hi")], options)
    body = server.requests[0]
    assert server.request_paths == ["/v1/responses"]
    assert server.request_headers[0]["authorization"] == "Bearer sk"
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"effort": "low"}
    assert body["max_output_tokens"] == 64
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert body["text"] == {"format": {"type": "json_schema", "name": "A", "schema": schema}}
    assert body["input"] == [{"type": "message", "role": "user", "content": "hi"}]
    assert body["tools"][0]["type"] == "function" and body["tools"][0]["name"] == "get_weather"


def test_documented_text_reply_with_cached_usage() -> None:
    reply = fixture_model("text.json").generate([user_message("x")])
    assert reply.content == "In a peaceful grove beneath a silver moon..."
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "stop"
    assert reply.response_meta.usage == TokenUsage(36, 87, 123, cached_tokens=12)
    assert reply.extra["response_id"].startswith("resp_")


def test_documented_function_call_keeps_its_reasoning_item() -> None:
    reply = fixture_model("function_call.json").generate([user_message("x")])
    [tool_call] = reply.tool_calls
    assert tool_call.id == "call_12345xyz" and json.loads(tool_call.function.arguments) == {
        "location": "Paris, France"
    }
    [item] = reply.extra["reasoning_items"]
    assert item["encrypted_content"] == "gAAAAABoqZ-encrypted-blob=="
    assert reply.extra["reasoning_content"] == "Need the weather in Paris."
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "tool_calls"


def test_documented_incomplete_refusal_and_failure() -> None:
    cut = fixture_model("incomplete.json").generate([user_message("x")])
    assert cut.response_meta is not None and cut.response_meta.finish_reason == "length"
    refused = fixture_model("refusal.json").generate([user_message("x")])
    assert refused.content == refused.extra["refusal"] == "I'm sorry, I can't help with that."
    with pytest.raises(ModelError, match="failed to generate"):
        fixture_model("failed.json").generate([user_message("x")])


def test_documented_function_call_stream() -> None:
    model = fixture_model("stream_function_call.sse", "text/event-stream")
    merged = concat_messages(list(model.stream([user_message("x")])))
    [tool_call] = merged.tool_calls
    assert tool_call.id == "call_1" and json.loads(tool_call.function.arguments) == {
        "location": "Paris"
    }
    assert merged.response_meta is not None and merged.response_meta.finish_reason == "tool_calls"
    assert merged.response_meta.usage == TokenUsage(36, 87, 123, cached_tokens=12)


def test_documented_stream_that_fails_mid_item_raises_after_its_chunks() -> None:
    reader = fixture_model("stream_failed.sse", "text/event-stream").stream([user_message("x")])
    seen = []
    with pytest.raises(ModelError, match="failed mid-item"):
        for chunk in reader:
            seen.append(chunk.content)
    assert seen == ["Partial "]


def test_a_stream_ending_before_completed_is_incomplete() -> None:
    data = (
        (FIXTURES / "stream_function_call.sse").read_bytes().split(b"event: response.completed")[0]
    )
    client = httpx.Client(
        transport=httpx.MockTransport(
            lambda request: httpx.Response(
                200, content=data, headers={"content-type": "text/event-stream"}
            )
        )
    )
    with pytest.raises(IncompleteStreamError, match="response.completed"):
        list(OpenAIResponsesModel("m", api_key="k", http_client=client).stream([user_message("x")]))


@pytest.mark.parametrize("streaming", [False, True])
def test_reasoning_items_are_carried_across_turns_statelessly(
    server: FakeResponsesServer, streaming: bool
) -> None:
    # The fake refuses, as OpenAI does, a function call sent back without its reasoning item.
    server.queue(
        Reply(reasoning_content="Look it up.", tool_calls=[call("get_weather", {"city": "Paris"})]),
        Reply("Sunny in Paris."),
    )
    agent = ChatModelAgent("a", "d", model_for(server), tools=[get_weather])
    result = Runner(agent, enable_streaming=streaming).invoke("Paris?")
    assert result.error is None and result.text == "Sunny in Paris."
    kinds = [item.get("type") for item in server.requests[1]["input"]]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output"]
    reasoning = server.requests[1]["input"][1]
    assert reasoning["encrypted_content"] and "previous_response_id" not in server.requests[1]


def test_store_true_chains_by_previous_response_id(server: FakeResponsesServer) -> None:
    server.queue(Reply(tool_calls=[call("get_weather", {"city": "Rome"})]), Reply("Sunny in Rome."))
    agent = ChatModelAgent("a", "d", model_for(server, store=True), tools=[get_weather])
    result = Runner(agent).invoke("Rome?")
    assert result.error is None and result.text == "Sunny in Rome."
    first, second = server.requests
    assert first["store"] is True and "include" not in first
    assert second["previous_response_id"] == "resp_000001"
    assert [item["type"] for item in second["input"]] == ["function_call_output"]


def test_a_failure_mid_stream_over_http(server: FakeResponsesServer) -> None:
    server.queue(Reply("a long answer in pieces", stream_error="the model broke"))
    with pytest.raises(ModelError, match="the model broke"):
        list(model_for(server).stream([user_message("x")]))


def test_a_stream_failing_mid_item_keeps_the_finished_steps_for_a_resume(
    server: FakeResponsesServer,
) -> None:
    ran: list[str] = []

    @tool
    def look_up(city: str) -> str:
        """Look a city's weather up."""
        ran.append(city)
        return "sunny"

    server.queue(
        Reply(reasoning_content="Look.", tool_calls=[call("look_up", {"city": "Oslo"})]),
        Reply("Sunny in", stream_error="the model broke mid-item"),
    )
    store = InMemoryCheckPointStore()
    agent = ChatModelAgent("a", "d", model_for(server, max_retries=0), tools=[look_up])
    runner = Runner(agent, checkpoint_store=store, enable_streaming=True)
    failed = runner.invoke("Oslo?", with_checkpoint_id("broken"), raise_errors=False)
    assert isinstance(failed.error, ModelError) and "broke mid-item" in str(failed.error)
    server.queue(Reply("Sunny in Oslo."))
    resumed = runner.resume("broken").result()
    assert resumed.text == "Sunny in Oslo." and ran == ["Oslo"]
    kinds = [item["type"] for item in server.requests[-1]["input"]]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output"]
