"""GeminiChatModel: the generateContent wire, against documented shapes and FakeGeminiServer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

from agentkit import ChatModelAgent, Runner, tool
from agentkit.errors import ContentBlockedError, IncompleteStreamError, RateLimitError
from agentkit.models import GeminiChatModel, ModelOptions
from agentkit.schema import TokenUsage, ToolInfo, concat_messages, system_message, user_message
from agentkit.testing import FakeGeminiServer, Reply, call

FIXTURES = Path(__file__).parent / "fixtures" / "gemini"
WEATHER = ToolInfo(
    "get_weather",
    "Get the weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@tool
def get_weather(city: str) -> str:
    """Get the current weather of a city."""
    return f"sunny in {city}"


@pytest.fixture
def server() -> Any:
    with FakeGeminiServer() as fake:
        yield fake


def model_for(server: FakeGeminiServer, **kwargs: Any) -> GeminiChatModel:
    return GeminiChatModel("gemini-test", base_url=server.base_url, api_key="g-key", **kwargs)


def fixture_model(
    name: str, status: int = 200, content_type: str = "application/json"
) -> GeminiChatModel:
    data = (FIXTURES / name).read_bytes()
    client = httpx.Client(
        transport=httpx.MockTransport(
            lambda request: httpx.Response(
                status, content=data, headers={"content-type": content_type}
            )
        )
    )
    return GeminiChatModel("gemini-2.5-flash", api_key="k", http_client=client, max_retries=1)


def test_the_request_follows_the_gemini_api(server: FakeGeminiServer) -> None:
    server.queue(Reply("ok"))
    model = model_for(server, thinking_budget=512, temperature=0.1).with_tools([WEATHER])
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    options = ModelOptions(
        tool_choice="get_weather",
        max_tokens=50,
        extra={
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "A", "schema": schema},
            }
        },
    )
    model.generate([system_message("Be brief."), user_message("hi")], options)
    body = server.requests[0]
    assert server.request_paths == ["/v1beta/models/gemini-test:generateContent"]
    assert server.request_headers[0]["x-goog-api-key"] == "g-key"
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Get the weather of a city.",
                    "parametersJsonSchema": WEATHER.parameters,
                }
            ]
        }
    ]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
    }
    assert body["generationConfig"] == {
        "temperature": 0.1,
        "maxOutputTokens": 50,
        "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": True},
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }


def test_documented_text_reply() -> None:
    reply = fixture_model("text.json").generate([user_message("x")])
    assert reply.content == "AI learns patterns from data."
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "stop"
    assert reply.response_meta.usage == TokenUsage(8, 7, 15)


def test_documented_function_call_keeps_its_thought_signature() -> None:
    reply = fixture_model("function_call.json").generate([user_message("x")])
    [tool_call] = reply.tool_calls
    assert tool_call.function.name == "get_current_temperature"
    assert json.loads(tool_call.function.arguments) == {"location": "London"}
    assert tool_call.extra == {
        "extra_content": {
            "google": {"thought_signature": "CiQB0e2Kb7Zx9sQ2yYv3YPi1p0o5v8yMbZ0dXh3mS5eGZ1Y="}
        }
    }
    assert reply.extra["reasoning_content"].startswith("The user asks")
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "tool_calls"
    assert reply.response_meta.usage == TokenUsage(70, 55, 125)


def test_documented_cached_usage() -> None:
    reply = fixture_model("cached_usage.json").generate([user_message("x")])
    assert reply.response_meta is not None
    assert reply.response_meta.usage == TokenUsage(323383, 120, 323503, cached_tokens=323374)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("prompt_blocked.json", "SAFETY"),
        ("no_candidates.json", "NO_CANDIDATES"),
        ("safety_finish.json", "SAFETY"),
    ],
)
def test_documented_blocks_raise_content_blocked(name: str, reason: str) -> None:
    with pytest.raises(ContentBlockedError, match="safetySettings") as caught:
        fixture_model(name).generate([user_message("x")])
    assert caught.value.reason == reason


def test_documented_max_tokens_is_a_length_finish() -> None:
    reply = fixture_model("max_tokens.json").generate([user_message("x")])
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "length"


def test_documented_stream() -> None:
    model = fixture_model("stream.sse", content_type="text/event-stream")
    merged = concat_messages(list(model.stream([user_message("x")])))
    assert merged.content == "The sky is blue."
    assert merged.response_meta is not None and merged.response_meta.usage == TokenUsage(6, 4, 10)


def test_a_stream_without_a_finish_reason_is_incomplete() -> None:
    data = (FIXTURES / "stream.sse").read_bytes().rsplit(b"data:", 1)[0]
    client = httpx.Client(
        transport=httpx.MockTransport(
            lambda request: httpx.Response(
                200, content=data, headers={"content-type": "text/event-stream"}
            )
        )
    )
    model = GeminiChatModel("gemini-2.5-flash", api_key="k", http_client=client)
    with pytest.raises(IncompleteStreamError, match="finishReason"):
        list(model.stream([user_message("x")]))


def test_documented_429_waits_for_the_retry_info_delay() -> None:
    with pytest.raises(RateLimitError, match="exceeded your current quota"):
        fixture_model("error_429.json", status=429).generate([user_message("x")])


@pytest.mark.parametrize("streaming", [False, True])
def test_thought_signatures_go_back_with_their_function_calls(
    server: FakeGeminiServer, streaming: bool
) -> None:
    # The fake refuses, as Gemini does, a signed function call sent back without its signature.
    server.queue(
        Reply(
            reasoning_content="I need the weather.",
            tool_calls=[call("get_weather", {"city": "Paris"})],
        ),
        Reply("Sunny in Paris."),
    )
    agent = ChatModelAgent("a", "d", model_for(server, thinking_budget=1024), tools=[get_weather])
    result = Runner(agent, enable_streaming=streaming).invoke("Paris?")
    assert result.error is None and result.text == "Sunny in Paris."
    model_turn = server.requests[1]["contents"][1]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0]["thoughtSignature"]
    response = server.requests[1]["contents"][2]["parts"][0]["functionResponse"]
    assert response == {"name": "get_weather", "response": {"result": "sunny in Paris"}}
    assert server.request_paths[0].endswith(
        ":streamGenerateContent?alt=sse" if streaming else ":generateContent"
    )


def test_a_function_call_without_its_signature_is_refused_like_gemini_does(
    server: FakeGeminiServer,
) -> None:
    server.queue(
        Reply(reasoning_content="x", tool_calls=[call("get_weather", {"city": "Rome"})]),
        Reply("unused"),
    )
    model = model_for(server)
    answer = model.generate([user_message("Rome?")])
    reply = attrs.evolve(answer, tool_calls=[attrs.evolve(answer.tool_calls[0], extra={})])
    from agentkit.errors import BadRequestError
    from agentkit.schema import tool_message

    with pytest.raises(BadRequestError, match="thought_signature"):
        model.generate(
            [user_message("Rome?"), reply, tool_message("sunny", reply.tool_calls[0].id)]
        )
