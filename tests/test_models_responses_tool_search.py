"""OpenAI's hosted tool search on the Responses API: deferred tools and the search's items.

The Responses API takes function tools with ``"defer_loading": true`` and a hosted
``{"type": "tool_search"}`` tool; a reply may hold a ``tool_search_call`` and a
``tool_search_output`` (the loaded tools) before the ``function_call`` of a tool it found.
Eino's ``UseModelToolSearch`` mode of ``ToolSearchMiddleware`` works over it as over
Anthropic's search (``test_models_anthropic_tool_search.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkit import ChatModelAgent, Runner, tool
from agentkit.middlewares import ToolSearchMiddleware
from agentkit.models import OpenAIResponsesModel
from agentkit.schema import ToolInfo, concat_messages, user_message
from agentkit.testing import FakeResponsesServer, Reply, call

FIXTURES = Path(__file__).parent / "fixtures" / "responses"
WEATHER = ToolInfo(
    "get_weather",
    "Get the weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

cities: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the weather of a city."""
    cities.append(city)
    return f"sunny in {city}"


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return "sent"


def fixture_model(name: str, content_type: str = "application/json") -> OpenAIResponsesModel:
    data = (FIXTURES / name).read_bytes()
    client = httpx.Client(
        transport=httpx.MockTransport(
            lambda request: httpx.Response(200, content=data, headers={"content-type": content_type})
        )
    )
    return OpenAIResponsesModel("gpt-5.4", api_key="k", http_client=client)


@pytest.fixture
def server() -> Any:
    with FakeResponsesServer() as fake:
        yield fake


def test_deferred_tools_go_with_defer_loading_and_the_hosted_search(
    server: FakeResponsesServer,
) -> None:
    server.queue(Reply("ok"), Reply("ok"))
    model = OpenAIResponsesModel("gpt-5.4", base_url=server.base_url, api_key="k")
    deferred = ToolInfo("send_email", "Send an email.", deferred=True)
    model.with_tools([WEATHER, deferred]).generate([user_message("hi")])
    tools = server.requests[0]["tools"]
    assert [(t["type"], t.get("name"), t.get("defer_loading")) for t in tools] == [
        ("function", "get_weather", None),
        ("function", "send_email", True),
        ("tool_search", None, None),
    ]
    model.with_tools([WEATHER]).generate([user_message("hi")])
    assert [t["type"] for t in server.requests[1]["tools"]] == ["function"]


def test_documented_tool_search_reply_keeps_its_items_and_calls_the_found_tool() -> None:
    reply = fixture_model("tool_search.json").generate([user_message("Weather in Paris?")])
    [found] = reply.tool_calls
    assert found.id == "call_68b3" and found.function.name == "get_weather"
    searched, loaded = reply.extra["server_tool_items"]
    assert searched["type"] == "tool_search_call" and searched["execution"] == "server"
    assert loaded["type"] == "tool_search_output"
    assert [t["name"] for t in loaded["tools"]] == ["get_weather"]
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "tool_calls"


def test_documented_tool_search_stream_makes_no_tool_call_of_the_search() -> None:
    model = fixture_model("stream_tool_search.sse", "text/event-stream")
    chunks = list(model.stream([user_message("Weather in Paris?")]))
    names = {c.function.name for chunk in chunks for c in chunk.tool_calls if c.function.name}
    assert names == {"get_weather"}
    merged = concat_messages(chunks)
    [found] = merged.tool_calls
    assert json.loads(found.function.arguments) == {"city": "Paris"}
    assert [item["type"] for item in merged.extra["server_tool_items"]] == [
        "tool_search_call",
        "tool_search_output",
    ]


def test_use_model_tool_search_runs_the_tool_openai_found(server: FakeResponsesServer) -> None:
    """Eino's Mode2 over the Responses API: the found tool runs, and the search's items go
    back before the function call (the conversation is stateless: ``store: false``)."""
    cities.clear()
    server.queue(Reply(raw_body=(FIXTURES / "tool_search.json").read_bytes()), Reply("Sunny."))
    model = OpenAIResponsesModel("gpt-5.4", base_url=server.base_url, api_key="k")
    middleware = ToolSearchMiddleware([get_weather, send_email], use_model_tool_search=True)
    agent = ChatModelAgent("assistant", "Helps.", model, middlewares=[middleware])
    result = Runner(agent).invoke("Weather in Paris?")
    assert result.error is None and result.text == "Sunny."
    assert cities == ["Paris"]
    first, second = server.requests
    assert [t.get("name", t["type"]) for t in first["tools"]] == [
        "get_weather",
        "send_email",
        "tool_search",
    ]
    assert second["tools"] == first["tools"]
    kinds = [item.get("type") for item in second["input"]]
    assert kinds[-4:] == [
        "tool_search_call",
        "tool_search_output",
        "function_call",
        "function_call_output",
    ]
    sent_back = second["input"][-4:-2]
    documented = json.loads((FIXTURES / "tool_search.json").read_bytes())["output"][:2]
    assert sent_back == documented


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_the_fake_server_searches_before_calling_a_deferred_tool_once_a_conversation(
    server: FakeResponsesServer, streaming: bool
) -> None:
    cities.clear()
    server.queue(
        Reply(tool_calls=[call("get_weather", {"city": "Paris"})]),
        Reply(tool_calls=[call("get_weather", {"city": "Rome"})]),
        Reply("Sunny in both."),
    )
    model = OpenAIResponsesModel("gpt-5.4", base_url=server.base_url, api_key="k")
    middleware = ToolSearchMiddleware([get_weather, send_email], use_model_tool_search=True)
    agent = ChatModelAgent("assistant", "Helps.", model, middlewares=[middleware])
    result = Runner(agent, enable_streaming=streaming).invoke("Paris and Rome?")
    assert result.error is None and result.text == "Sunny in both."
    assert cities == ["Paris", "Rome"]
    kinds = [item.get("type") for item in server.requests[2]["input"]]
    assert kinds[-6:] == [
        "tool_search_call",
        "tool_search_output",
        "function_call",
        "function_call_output",
        "function_call",  # loaded once: no second search
        "function_call_output",
    ]
    assert kinds.count("tool_search_call") == 1 and kinds.count("tool_search_output") == 1
    searched = next(i for i in server.requests[2]["input"] if i["type"] == "tool_search_output")
    assert [t["name"] for t in searched["tools"]] == ["get_weather"]
