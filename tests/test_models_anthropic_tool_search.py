"""Anthropic's server-side tool search: deferred tools, and ToolSearchMiddleware's model mode.

Eino's ``toolsearch.Config{UseModelToolSearch: true}`` hands the dynamic tools to the model as
``DeferredToolInfos``; eino-ext's Claude model sends them with ``defer_loading`` and the
search server tool. The fixtures and the loopback server below follow the wire Anthropic
documents for its tool search tool (``server_tool_use``, ``tool_search_tool_result`` with
``tool_reference`` entries, then the ``tool_use`` of a tool it found).
"""

from __future__ import annotations

import json
import pickle
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkit import ChatModelAgent, Role, Runner, tool
from agentkit.errors import ModelError
from agentkit.middlewares import ToolSearchMiddleware
from agentkit.models import (
    AnthropicChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    ToolSearchUnsupportedError,
)
from agentkit.schema import (
    Message,
    TokenUsage,
    ToolInfo,
    concat_messages,
    tool_message,
    user_message,
)
from agentkit.testing import FakeAnthropicServer, FakeOpenAIServer, Reply, call
from agentkit.testing._fake_http import RequestHandler

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic"
WEATHER = ToolInfo(
    "get_weather",
    "Get the weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
EMAIL = ToolInfo("send_email", "Send an email.", {"type": "object", "properties": {}})
SEARCH = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
CACHED = {"cache_control": {"type": "ephemeral"}}

calls: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the weather of a city."""
    calls.append(city)
    return f"sunny in {city}"


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return "sent"


def fixture_model(name: str, content_type: str = "application/json") -> AnthropicChatModel:
    data = (FIXTURES / name).read_bytes()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=data, headers={"content-type": content_type})

    client = httpx.Client(transport=httpx.MockTransport(answer))
    return AnthropicChatModel("claude-sonnet-4-5", api_key="k", http_client=client)


def search_blocks(query: str, found: str, search_id: str) -> list[dict[str, Any]]:
    """The blocks Anthropic's tool search adds to a reply: its call and its result."""
    return [
        {
            "type": "server_tool_use",
            "id": search_id,
            "name": "tool_search_tool_regex",
            "input": {"query": query},
        },
        {
            "type": "tool_search_tool_result",
            "tool_use_id": search_id,
            "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": found}],
            },
        },
    ]


class ToolSearchServer(FakeAnthropicServer):
    """A loopback Messages API answering with scripted content blocks, whole or streamed.

    A stream sends each block as Anthropic does: text in ``text_delta``s, the input of
    ``tool_use`` and ``server_tool_use`` in ``input_json_delta`` pieces, a server tool's
    result whole in its ``content_block_start``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.turns: deque[list[dict[str, Any]]] = deque()

    def script(self, *turns: list[dict[str, Any]]) -> None:
        self.turns.extend(turns)
        self.queue(*(Reply() for _ in turns))

    def _respond(
        self,
        handler: RequestHandler,
        path: str,
        request: dict[str, Any],
        reply: Reply,
        number: int,
    ) -> None:
        blocks = self.turns.popleft()
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        usage = {"input_tokens": 100, "output_tokens": 20}
        message = {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "model": request["model"],
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if request.get("stream"):
            handler.send_events(_events(message), reply)
        else:
            handler.send_body(message, reply)


def _event(kind: str, **payload: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n".encode()


def _events(message: dict[str, Any]) -> Iterable[bytes]:
    start = {**message, "content": [], "stop_reason": None}
    yield _event("message_start", message=start)
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            yield _event("content_block_start", index=index, content_block={**block, "text": ""})
            delta = {"type": "text_delta", "text": block["text"]}
            yield _event("content_block_delta", index=index, delta=delta)
        elif kind in ("tool_use", "server_tool_use"):
            yield _event("content_block_start", index=index, content_block={**block, "input": {}})
            text = json.dumps(block["input"])
            for piece in ("", text[:5], text[5:]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield _event("content_block_delta", index=index, delta=delta)
        else:
            yield _event("content_block_start", index=index, content_block=block)
        yield _event("content_block_stop", index=index)
    yield _event(
        "message_delta",
        delta={"stop_reason": message["stop_reason"], "stop_sequence": None},
        usage={"output_tokens": 20},
    )
    yield _event("message_stop")


@pytest.fixture
def server() -> Any:
    with ToolSearchServer() as fake:
        yield fake


def model_for(server: FakeAnthropicServer, **kwargs: Any) -> AnthropicChatModel:
    return AnthropicChatModel("claude-test", base_url=server.base_url, api_key="k", **kwargs)


# -- the request -------------------------------------------------------------------------------


def test_deferred_tools_go_with_defer_loading_and_the_search_tool(server: ToolSearchServer) -> None:
    """eino-ext Claude: ``WithDeferredTools`` tools carry ``defer_loading``; the search tool
    comes with them, and the cache breakpoint is on it, not on a deferred tool."""
    server.script([{"type": "text", "text": "ok"}])
    deferred = ToolInfo(EMAIL.name, EMAIL.description, EMAIL.parameters, deferred=True)
    bound = model_for(server).with_tools([WEATHER, deferred])
    bound.generate([user_message("hi")])
    assert server.requests[0]["tools"] == [
        {"name": "get_weather", "description": WEATHER.description, "input_schema": WEATHER.parameters},
        {
            "name": "send_email",
            "description": "Send an email.",
            "input_schema": EMAIL.parameters,
            "defer_loading": True,
        },
        {**SEARCH, **CACHED},
    ]
    assert "anthropic-beta" not in server.request_headers[0]


def test_bm25_search_and_no_search_tool_without_deferred_tools(server: ToolSearchServer) -> None:
    server.script([{"type": "text", "text": "a"}], [{"type": "text", "text": "b"}])
    deferred = ToolInfo("send_email", "Send an email.", deferred=True)
    model_for(server, tool_search="bm25", prompt_caching=False).with_tools([deferred]).generate(
        [user_message("x")]
    )
    assert server.requests[0]["tools"][-1] == {
        "type": "tool_search_tool_bm25_20251119",
        "name": "tool_search_tool_bm25",
    }
    model_for(server).with_tools([WEATHER]).generate([user_message("x")])
    assert [t["name"] for t in server.requests[1]["tools"]] == ["get_weather"]
    assert "defer_loading" not in server.requests[1]["tools"][0]


def test_an_unknown_tool_search_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="'regex' or 'bm25'"):
        AnthropicChatModel("claude-test", api_key="k", tool_search="semantic")


# -- the documented reply ---------------------------------------------------------------------


def test_documented_tool_search_reply_keeps_the_search_blocks_and_calls_the_found_tool() -> None:
    reply = fixture_model("tool_search.json").generate([user_message("Weather in SF?")])
    assert reply.content == (
        "I'll search for a tool that knows the weather. Found one; checking San Francisco."
    )
    [found] = reply.tool_calls
    assert found.function.name == "get_weather" and found.id == "toolu_01XYZweatherCall"
    assert json.loads(found.function.arguments) == {"city": "San Francisco"}
    use, result = reply.extra["server_tool_blocks"]
    assert use["type"] == "server_tool_use" and use["input"] == {"query": "weather"}
    assert result["type"] == "tool_search_tool_result"
    assert result["tool_use_id"] == use["id"]
    assert result["content"]["tool_references"] == [
        {"type": "tool_reference", "tool_name": "get_weather"}
    ]
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "tool_calls"


def test_documented_tool_search_stream_makes_no_tool_call_of_the_search() -> None:
    model = fixture_model("stream_tool_search.sse", "text/event-stream")
    chunks = list(model.stream([user_message("Weather in SF?")]))
    called = {call.function.name for chunk in chunks for call in chunk.tool_calls if call.function.name}
    assert called == {"get_weather"}
    merged = concat_messages(chunks)
    [found] = merged.tool_calls
    assert found.id == "toolu_01StreamWeather"
    assert json.loads(found.function.arguments) == {"city": "San Francisco"}
    use, result = merged.extra["server_tool_blocks"]
    assert use == {
        "type": "server_tool_use",
        "id": "srvtoolu_01StreamSearch",
        "name": "tool_search_tool_regex",
        "input": {"query": "weather"},
    }
    assert result["content"]["tool_references"][0]["tool_name"] == "get_weather"


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_the_documented_reply_goes_back_in_its_block_order(
    server: ToolSearchServer, streaming: bool
) -> None:
    """Anthropic's tool search reply interleaves text with the search's blocks, and the docs
    say to pass the assistant's content back unchanged: the turn keeps its order, through a
    checkpoint's JSON too."""
    documented = json.loads((FIXTURES / "tool_search.json").read_text())["content"]
    server.script(documented, [{"type": "text", "text": "Sunny."}], [{"type": "text", "text": "Sunny."}])
    deferred = ToolInfo(WEATHER.name, WEATHER.description, WEATHER.parameters, deferred=True)
    model = model_for(server).with_tools([deferred])
    question = user_message("Weather in SF?")
    if streaming:
        reply = concat_messages(list(model.stream([question])))
    else:
        reply = model.generate([question])
    assert reply.content == documented[0]["text"] + documented[3]["text"]
    from_json = Message.from_dict(json.loads(json.dumps(reply.to_dict())))
    for message in (reply, from_json):
        model.generate([question, message, tool_message("sunny", "toolu_01XYZweatherCall")])
        sent = server.requests[-1]["messages"][1]["content"]
        assert sent == documented


def test_a_changed_reply_goes_back_in_the_usual_order(server: ToolSearchServer) -> None:
    """A middleware that rewrote the text leaves the kept order no longer true of it: the
    blocks go back thinking, server tool blocks, text, tool calls."""
    import attrs

    documented = json.loads((FIXTURES / "tool_search.json").read_text())["content"]
    server.script(documented, [{"type": "text", "text": "Sunny."}])
    model = model_for(server)
    reply = model.generate([user_message("Weather in SF?")])
    shorter = attrs.evolve(reply, content="Checking.")
    model.generate([user_message("Weather in SF?"), shorter, tool_message("sunny", "toolu_01XYZweatherCall")])
    sent = server.requests[-1]["messages"][1]["content"]
    assert [b["type"] for b in sent] == [
        "server_tool_use", "tool_search_tool_result", "text", "tool_use"
    ]
    assert sent[2]["text"] == "Checking."


def test_a_server_tool_input_that_is_not_json_is_a_model_error() -> None:
    broken = (FIXTURES / "stream_tool_search.sse").read_text().replace('"ther\\"}"', '"ther"')
    client = httpx.Client(
        transport=httpx.MockTransport(
            lambda request: httpx.Response(
                200, content=broken.encode(), headers={"content-type": "text/event-stream"}
            )
        )
    )
    model = AnthropicChatModel("claude-sonnet-4-5", api_key="k", http_client=client)
    with pytest.raises(ModelError, match="srvtoolu_01StreamSearch"):
        list(model.stream([user_message("x")]))


# -- agent runs (UseModelToolSearch) ----------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_use_model_tool_search_runs_the_tool_the_model_found(
    server: ToolSearchServer, streaming: bool
) -> None:
    """Eino's Mode2 (``UseModelToolSearch``) end to end: the dynamic tools reach Claude as
    deferred, its search finds one, the agent runs the found tool, and the search blocks go
    back with the assistant turn."""
    calls.clear()
    searched = search_blocks("weather", "get_weather", "srvtoolu_1")
    server.script(
        [
            {"type": "text", "text": "Let me find a tool."},
            *searched,
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        [{"type": "text", "text": "It is sunny in Paris."}],
    )
    middleware = ToolSearchMiddleware([get_weather, send_email], use_model_tool_search=True)
    agent = ChatModelAgent("assistant", "Helps.", model_for(server), middlewares=[middleware])
    result = Runner(agent, enable_streaming=streaming).invoke("Weather in Paris?")
    assert result.error is None and result.text == "It is sunny in Paris."
    assert calls == ["Paris"]
    first, second = server.requests
    assert [t.get("name") for t in first["tools"]] == [
        "get_weather",
        "send_email",
        "tool_search_tool_regex",
    ]
    assert all(t["defer_loading"] for t in first["tools"][:2])
    assert second["tools"] == first["tools"]  # one tool list all run long: the cache holds
    assert first["messages"][0]["content"][0]["text"] == middleware.reminder
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    # The turn goes back as it came: the text before the search stays before it.
    assert assistant["content"] == [
        {"type": "text", "text": "Let me find a tool."},
        *searched,
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ]
    [tool_result] = second["messages"][2]["content"]
    assert tool_result["tool_use_id"] == "toolu_1"
    assert tool_result["content"] == [{"type": "text", "text": "sunny in Paris"}]


def test_server_tool_blocks_survive_a_checkpoint_and_the_json_round_trip(
    server: ToolSearchServer,
) -> None:
    from agentkit.checkpoint import PickleSerializer

    searched = search_blocks("weather", "get_weather", "srvtoolu_2")
    use = {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}}
    server.script([*searched, use])
    deferred = ToolInfo(WEATHER.name, WEATHER.description, WEATHER.parameters, deferred=True)
    model = model_for(server).with_tools([deferred])
    reply = model.generate([user_message("Rome?")])
    serializer = PickleSerializer()
    restored = serializer.loads(serializer.dumps([reply], checkpoint_id="c"), checkpoint_id="c")[0]
    from_json = Message.from_dict(json.loads(json.dumps(reply.to_dict())))
    for message in (restored, from_json):
        server.script([{"type": "text", "text": "Sunny."}])
        model.generate([user_message("Rome?"), message, tool_message("sunny", "toolu_2")])
        assert server.requests[-1]["messages"][1]["content"] == [*searched, use]


def test_pickled_tool_info_from_before_deferred_loads() -> None:
    state = WEATHER.__getstate__()
    del state["deferred"]
    restored = ToolInfo.__new__(ToolInfo)
    restored.__setstate__(state)
    assert restored == WEATHER and restored.deferred is False
    deferred = ToolInfo("t", deferred=True)
    assert pickle.loads(pickle.dumps(deferred)).deferred is True


# -- models without a server-side tool search ------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        OpenAIChatModel("gpt-test", api_key="k"),
        GeminiChatModel("gemini-test", api_key="k"),
    ],
    ids=["chat-completions", "gemini"],
)
def test_a_model_without_tool_search_refuses_deferred_tools(model: Any) -> None:
    with pytest.raises(ToolSearchUnsupportedError, match="'send_email'.*ToolSearchMiddleware"):
        model.with_tools([WEATHER, ToolInfo("send_email", deferred=True)])
    assert model.with_tools([WEATHER]).tools == (WEATHER,)


def test_use_model_tool_search_with_a_model_without_one_fails_at_the_first_call() -> None:
    """Eino leaves an unsupported model to ignore the deferred tools; agentkit says so."""
    with FakeOpenAIServer() as fake:
        fake.queue(Reply("never sent"))
        model = OpenAIChatModel("gpt-test", base_url=fake.base_url, api_key="k")
        middleware = ToolSearchMiddleware([get_weather], use_model_tool_search=True)
        agent = ChatModelAgent("assistant", "Helps.", model, middlewares=[middleware])
        with pytest.raises(ToolSearchUnsupportedError, match="use_model_tool_search") as caught:
            Runner(agent).invoke("Weather?")
        assert isinstance(caught.value, ValueError)
        assert fake.requests == []


# -- FakeAnthropicServer's simulated search -------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_the_fake_server_searches_before_calling_a_deferred_tool_once_a_conversation(
    streaming: bool,
) -> None:
    calls.clear()
    with FakeAnthropicServer() as fake:
        fake.queue(
            Reply(tool_calls=[call("get_weather", {"city": "Paris"})]),
            Reply(tool_calls=[call("get_weather", {"city": "Rome"})]),
            Reply("Sunny in both."),
        )
        middleware = ToolSearchMiddleware([get_weather, send_email], use_model_tool_search=True)
        agent = ChatModelAgent("assistant", "Helps.", model_for(fake), middlewares=[middleware])
        result = Runner(agent, enable_streaming=streaming).invoke("Paris and Rome?")
        assert result.error is None and result.text == "Sunny in both."
        assert calls == ["Paris", "Rome"]
        _, second, third = fake.requests
    first_turn = second["messages"][1]["content"]
    assert [b["type"] for b in first_turn] == [
        "server_tool_use",
        "tool_search_tool_result",
        "tool_use",
    ]
    assert first_turn[0]["name"] == "tool_search_tool_regex"
    assert first_turn[1]["content"]["tool_references"] == [
        {"type": "tool_reference", "tool_name": "get_weather"}
    ]
    # Loaded once, the tool is called without a search the next time.
    assert [b["type"] for b in third["messages"][3]["content"]] == ["tool_use"]


# -- a paused turn (stop_reason "pause_turn") ----------------------------------------------------

PAUSED_USAGE = TokenUsage(300, 20, 320)
DONE_USAGE = TokenUsage(340, 30, 370, cached_tokens=300)


def paused_then_found(fake: FakeAnthropicServer) -> None:
    """A search long enough that Anthropic pauses the turn, then the continuation's call."""
    fake.queue(
        Reply(
            "Let me look.",
            tool_calls=[call("get_weather", {"city": "Paris"})],
            finish_reason="pause_turn",
            usage=PAUSED_USAGE,
        ),
        Reply(
            " Found it.",
            tool_calls=[call("get_weather", {"city": "Paris"}, id="toolu_9")],
            usage=DONE_USAGE,
        ),
    )


def deferred_model(fake: FakeAnthropicServer, **kwargs: Any) -> Any:
    deferred = ToolInfo(WEATHER.name, WEATHER.description, WEATHER.parameters, deferred=True)
    return model_for(fake, **kwargs).with_tools([EMAIL, deferred])


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_a_paused_turn_is_continued_with_its_content_sent_back(streaming: bool) -> None:
    """Anthropic's server tools: a paused turn goes on when its content is sent back as it
    is, with the same tools; the caller gets one finished reply."""
    with FakeAnthropicServer() as fake:
        paused_then_found(fake)
        model = deferred_model(fake)
        question = user_message("Weather in Paris?")
        if streaming:
            chunks = list(model.stream([question]))
            reasons = [c.response_meta.finish_reason for c in chunks if c.response_meta]
            assert reasons == ["tool_calls"]  # the pause is no end for the reader
            reply = concat_messages(chunks)
        else:
            reply = model.generate([question])
        first, second = fake.requests
    assert reply.content == "Let me look. Found it."
    [found] = reply.tool_calls
    assert (found.id, found.function.name) == ("toolu_9", "get_weather")
    assert json.loads(found.function.arguments) == {"city": "Paris"}
    meta = reply.response_meta
    assert meta is not None and meta.finish_reason == "tool_calls"
    assert meta.usage == TokenUsage(640, 50, 690, cached_tokens=300)
    use, result = reply.extra["server_tool_blocks"]
    assert use["type"] == "server_tool_use" and result["tool_use_id"] == use["id"]
    # The continuation: the same tools, the paused content last, as it came, and the
    # cache breakpoint where the first request had it.
    assert second["tools"] == first["tools"]
    assert second["messages"][:-1] == first["messages"]
    assert second["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Let me look."}, use],
    }
    # The whole turn goes back in its order on the next call.
    with FakeAnthropicServer() as later:
        later.queue(Reply("Sunny."))
        deferred_model(later).generate([question, reply, tool_message("sunny", "toolu_9")])
        [sent] = later.requests
    assert [b["type"] for b in sent["messages"][1]["content"]] == [
        "text", "server_tool_use", "tool_search_tool_result", "text", "tool_use"
    ]


def test_a_stream_closed_before_the_pause_sends_no_continuation() -> None:
    with FakeAnthropicServer() as fake:
        paused_then_found(fake)
        reader = deferred_model(fake).stream([user_message("Weather in Paris?")])
        assert "Let me look.".startswith(next(iter(reader)).content)
        reader.close()
        assert len(fake.requests) == 1


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_an_agent_sees_one_reply_of_a_paused_tool_search(streaming: bool) -> None:
    calls.clear()
    with FakeAnthropicServer() as fake:
        paused_then_found(fake)
        fake.queue(Reply("Sunny in Paris."))
        middleware = ToolSearchMiddleware([get_weather, send_email], use_model_tool_search=True)
        agent = ChatModelAgent("assistant", "Helps.", model_for(fake), middlewares=[middleware])
        events = list(Runner(agent, enable_streaming=streaming).query("Weather in Paris?"))
        *_, last = fake.requests
    assert calls == ["Paris"]
    replies = [
        e.get_message() for e in events
        if e.get_message() is not None and e.get_message().role is Role.ASSISTANT  # type: ignore[union-attr]
    ]
    assert [m.content for m in replies] == ["Let me look. Found it.", "Sunny in Paris."]  # type: ignore[union-attr]
    assert [b["type"] for b in last["messages"][1]["content"]] == [
        "text", "server_tool_use", "tool_search_tool_result", "text", "tool_use"
    ]


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_a_turn_paused_more_often_than_max_continuations_is_an_error(streaming: bool) -> None:
    with FakeAnthropicServer() as fake:
        paused = Reply(
            tool_calls=[call("get_weather", {"city": "Paris"})], finish_reason="pause_turn"
        )
        fake.queue(paused, Reply("Still looking.", finish_reason="pause_turn"))
        model = deferred_model(fake, max_continuations=1)
        expected = r"paused the turn .* after 1 continuation,.*max_continuations"
        with pytest.raises(ModelError, match=expected):
            if streaming:
                list(model.stream([user_message("x")]))
            else:
                model.generate([user_message("x")])
        assert len(fake.requests) == 2
    with pytest.raises(ValueError, match="max_continuations"):
        AnthropicChatModel("claude-test", api_key="k", max_continuations=-1)


def test_the_fake_server_refuses_a_paused_turn_sent_back_changed() -> None:
    with FakeAnthropicServer() as fake:
        paused_then_found(fake)
        model = deferred_model(fake)
        model.generate([user_message("Weather in Paris?")])  # continued as documented
        fake.queue(Reply(finish_reason="pause_turn", tool_calls=[call("get_weather", {})]))
        fake.queue(Reply("never"))
        body = dict(fake.requests[0])
        paused = httpx.post(f"{fake.base_url}/v1/messages", json=body).json()
        assert paused["stop_reason"] == "pause_turn"
        changed = [{"type": "text", "text": "Something else."}]
        body["messages"] = [*body["messages"], {"role": "assistant", "content": changed}]
        refused = httpx.post(f"{fake.base_url}/v1/messages", json=body)
        assert refused.status_code == 400
        assert "sending its content back unchanged" in refused.json()["error"]["message"]


@pytest.mark.parametrize("streaming", [False, True], ids=["whole", "streamed"])
def test_a_paused_turn_with_thinking_keeps_every_thinking_block_in_place(streaming: bool) -> None:
    with FakeAnthropicServer() as fake:
        fake.queue(
            Reply(
                reasoning_content="Search first.",
                tool_calls=[call("get_weather", {"city": "Oslo"})],
                finish_reason="pause_turn",
            ),
            Reply(
                "Found it.",
                reasoning_content="Now call it.",
                tool_calls=[call("get_weather", {"city": "Oslo"}, id="toolu_7")],
            ),
            Reply("Cold."),
        )
        model = deferred_model(fake, thinking=1024)
        question = user_message("Weather in Oslo?")
        if streaming:
            reply = concat_messages(list(model.stream([question])))
        else:
            reply = model.generate([question])
        assert [b["thinking"] for b in reply.extra["thinking_blocks"]] == [
            "Search first.", "Now call it."
        ]
        assert reply.extra["reasoning_content"] == "Search first.Now call it."
        [found] = reply.tool_calls
        assert found.id == "toolu_7"
        # The fake checks each thinking block's signature and that the turn starts with one.
        assert model.generate([question, reply, tool_message("cold", "toolu_7")]).content == "Cold."
        sent = fake.requests[-1]["messages"][1]["content"]
    assert [b["type"] for b in sent] == [
        "thinking", "server_tool_use", "tool_search_tool_result", "thinking", "text", "tool_use"
    ]
