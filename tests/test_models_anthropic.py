"""AnthropicChatModel: the Messages API wire, against documented shapes and FakeAnthropicServer."""

from __future__ import annotations

import json
import pickle
import threading
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest

from agentkit import (
    CancelHandle,
    ChatModelAgent,
    ModelPricing,
    Runner,
    tool,
    with_cancel,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import (
    AgentCancelledError,
    APIStatusError,
    APITimeoutError,
    IncompleteStreamError,
    ModelError,
    RateLimitError,
    ResponseTooLargeError,
)
from agentkit.models import AnthropicChatModel, FailoverChatModel, ModelOptions, OpenAIChatModel
from agentkit.schema import (
    Message,
    Role,
    TokenUsage,
    ToolInfo,
    assistant_message,
    concat_messages,
    system_message,
    tool_message,
    user_message,
)
from agentkit.testing import FakeAnthropicServer, FakeOpenAIServer, Reply, call, no_thread_leak

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic"
WEATHER = ToolInfo(
    "get_weather",
    "Get the weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
GUARD = 30.0


@tool
def get_weather(city: str) -> str:
    """Get the current weather of a city."""
    return f"sunny and 21 degrees in {city}"


@pytest.fixture
def server() -> Any:
    with FakeAnthropicServer() as fake:
        yield fake


def model_for(server: FakeAnthropicServer, **kwargs: Any) -> AnthropicChatModel:
    return AnthropicChatModel("claude-test", base_url=server.base_url, api_key="sk-ant", **kwargs)


def fixture_model(name: str, content_type: str = "application/json") -> AnthropicChatModel:
    """A model whose every request is answered with the bytes of a fixture file."""
    data = (FIXTURES / name).read_bytes()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=data, headers={"content-type": content_type})

    client = httpx.Client(transport=httpx.MockTransport(answer))
    return AnthropicChatModel("claude-sonnet-4-5", api_key="k", http_client=client)


# -- the request -------------------------------------------------------------------------------


def test_the_request_follows_the_messages_api(server: FakeAnthropicServer) -> None:
    server.queue(Reply("ok"))
    model = model_for(server, temperature=0.2).with_tools([WEATHER])
    history = [
        system_message("Be brief."),
        user_message("Weather in Paris?"),
        assistant_message("", [call("get_weather", {"city": "Paris"}, id="toolu_1")]),
        tool_message("sunny", "toolu_1"),
        user_message("And tomorrow?"),
    ]
    model.generate(history, ModelOptions(tool_choice="required", stop=["END"], max_tokens=99))
    body = server.requests[0]
    headers = server.request_headers[0]
    assert server.request_paths == ["/v1/messages"]
    assert headers["x-api-key"] == "sk-ant" and headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert body["model"] == "claude-test" and body["max_tokens"] == 99
    assert body["temperature"] == 0.2 and body["stop_sequences"] == ["END"]
    assert body["tool_choice"] == {"type": "any"}
    assert body["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Get the weather of a city.",
            "input_schema": WEATHER.parameters,
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "user",  # the tool result and the next user message make one turn
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "sunny"}],
                },
                {"type": "text", "text": "And tomorrow?", "cache_control": {"type": "ephemeral"}},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("get_weather", {"type": "tool", "name": "get_weather"}),
    ],
)
def test_tool_choice_maps_to_anthropic_choices(
    server: FakeAnthropicServer, choice: str, sent: dict[str, str]
) -> None:
    server.queue(Reply("ok"))
    model_for(server).with_tools([WEATHER]).generate(
        [user_message("hi")], ModelOptions(tool_choice=choice)
    )
    assert server.requests[0]["tool_choice"] == sent


def test_prompt_caching_off_sends_no_breakpoints(server: FakeAnthropicServer) -> None:
    server.queue(Reply("ok"))
    model = model_for(server, prompt_caching=False).with_tools([WEATHER])
    model.generate([system_message("s"), user_message("hi")])
    assert "cache_control" not in json.dumps(server.requests[0])


def test_structured_output_is_sent_as_output_config(server: FakeAnthropicServer) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    server.queue(Reply('{"city": "Paris"}'))
    response_format = {"type": "json_schema", "json_schema": {"name": "City", "schema": schema}}
    reply = model_for(server).generate(
        [user_message("hi")], ModelOptions(extra={"response_format": response_format})
    )
    assert server.requests[0]["output_config"] == {
        "format": {"type": "json_schema", "schema": schema}
    }
    assert "response_format" not in server.requests[0]
    assert json.loads(reply.content) == {"city": "Paris"}


def test_structured_output_of_an_agent_is_answered_natively(server: FakeAnthropicServer) -> None:
    @attrs.define
    class City:
        name: str

    server.queue(Reply('{"name": "Paris"}'))
    agent = ChatModelAgent("a", "d", model_for(server), output_type=City)
    result = Runner(agent).invoke("Which city?")
    assert result.output == City("Paris")
    assert server.requests[0]["output_config"]["format"]["type"] == "json_schema"


def test_thinking_budget_must_fit_below_max_tokens() -> None:
    with pytest.raises(ValueError, match="below max_tokens"):
        AnthropicChatModel("claude-test", api_key="k", thinking=8000, max_tokens=4096)
    with pytest.raises(ValueError, match=">= 1024"):
        AnthropicChatModel("claude-test", api_key="k", thinking=10)


# -- documented replies ------------------------------------------------------------------------


def test_documented_text_reply() -> None:
    reply = fixture_model("text.json").generate([user_message("Hello")])
    assert reply.role is Role.ASSISTANT and reply.content == "Hi! My name is Claude."
    assert reply.response_meta is not None
    assert reply.response_meta.finish_reason == "stop"
    assert reply.response_meta.usage == TokenUsage(2095, 503, 2598)


def test_documented_tool_use_reply() -> None:
    reply = fixture_model("tool_use.json").generate([user_message("Weather?")])
    assert reply.content == "I'll check the weather in San Francisco."
    [tool_call] = reply.tool_calls
    assert tool_call.id == "toolu_01A09q90qw90lq917835lq9"
    assert tool_call.function.name == "get_weather"
    assert json.loads(tool_call.function.arguments) == {
        "location": "San Francisco, CA",
        "unit": "celsius",
    }
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "tool_calls"


def test_documented_thinking_blocks_are_kept_signed() -> None:
    reply = fixture_model("thinking_tool_use.json").generate([user_message("Weather?")])
    [block] = reply.extra["thinking_blocks"]
    assert block["type"] == "thinking" and block["signature"].startswith("EqQB")
    assert reply.extra["reasoning_content"] == block["thinking"]
    redacted = fixture_model("redacted_thinking.json").generate([user_message("x")])
    assert [b["type"] for b in redacted.extra["thinking_blocks"]] == [
        "redacted_thinking",
        "thinking",
    ]
    assert redacted.extra["reasoning_content"] == "Checking." and redacted.content == "Done."


def test_documented_caching_usage_counts_cache_reads_and_writes_as_input() -> None:
    reply = fixture_model("caching_usage.json").generate([user_message("x")])
    assert reply.response_meta is not None
    assert reply.response_meta.usage == TokenUsage(
        prompt_tokens=21 + 188086,
        completion_tokens=393,
        total_tokens=21 + 188086 + 393,
        cached_tokens=0,
        cache_write_tokens=188086,
    )


def test_documented_refusal_is_a_content_filter_finish_never_an_empty_answer() -> None:
    reply = fixture_model("refusal.json").generate([user_message("x")])
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "content_filter"
    assert reply.content and reply.extra["refusal"] == reply.content
    assert "refusal" in reply.content


def test_documented_max_tokens_stop_is_a_length_finish() -> None:
    reply = fixture_model("max_tokens.json").generate([user_message("x")])
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "length"
    assert reply.content == "The history of the region begins"


def test_documented_text_stream() -> None:
    chunks = list(fixture_model("stream_text.sse", "text/event-stream").stream([user_message("x")]))
    assert [c.content for c in chunks if c.content] == ["Hello", "!"]
    merged = concat_messages(chunks)
    assert merged.content == "Hello!"
    assert merged.response_meta is not None
    assert merged.response_meta.finish_reason == "stop"
    assert merged.response_meta.usage == TokenUsage(25, 15, 40)


def test_documented_tool_use_stream() -> None:
    model = fixture_model("stream_tool_use.sse", "text/event-stream")
    merged = concat_messages(list(model.stream([user_message("x")])))
    assert merged.content == "Okay, let's check the weather for San Francisco, CA:"
    [tool_call] = merged.tool_calls
    assert tool_call.id == "toolu_01T1x1fJ34qAmk2tNTrN7Up6"
    assert json.loads(tool_call.function.arguments) == {"location": "San Francisco, CA"}
    assert merged.response_meta is not None
    assert merged.response_meta.finish_reason == "tool_calls"
    assert merged.response_meta.usage == TokenUsage(2272, 89, 2361, cached_tokens=1800)


def test_documented_thinking_stream() -> None:
    model = fixture_model("stream_thinking.sse", "text/event-stream")
    merged = concat_messages(list(model.stream([user_message("x")])))
    assert merged.content == "The GCD is 21."
    thinking = "I need to find the GCD of 1071 and 462 using the Euclidean algorithm."
    assert merged.extra["reasoning_content"] == thinking
    assert merged.extra["thinking_blocks"] == [
        {
            "type": "thinking",
            "thinking": thinking,
            "signature": merged.extra["thinking_blocks"][0]["signature"],
        }
    ]
    assert merged.extra["thinking_blocks"][0]["signature"].startswith("EqQB")


def test_documented_overloaded_error_event_ends_the_stream_with_its_message() -> None:
    model = fixture_model("stream_overloaded.sse", "text/event-stream")
    with pytest.raises(ModelError, match="Overloaded") as caught:
        list(model.stream([user_message("x")]))
    assert caught.value.body["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize(
    ("name", "status", "error_type"),
    [
        ("error_overloaded.json", 529, APIStatusError),
        ("error_rate_limit.json", 429, RateLimitError),
    ],
)
def test_documented_error_bodies(name: str, status: int, error_type: type[Exception]) -> None:
    data = (FIXTURES / name).read_bytes()
    seen: list[int] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(1)
        return httpx.Response(status, content=data, headers={"retry-after": "0"})

    client = httpx.Client(transport=httpx.MockTransport(answer))
    model = AnthropicChatModel("claude-test", api_key="k", http_client=client, max_retries=2)
    with pytest.raises(error_type) as caught:
        model.generate([user_message("x")])
    assert len(seen) == 3  # retried twice
    error = caught.value
    assert isinstance(error, APIStatusError) and error.status_code == status
    assert json.loads(data)["error"]["message"] in str(error)
    assert (
        "gave up after 3 attempts" in getattr(error, "__notes__", ["gave up after 3 attempts"])[0]
    )


# -- over HTTP with the fake server ------------------------------------------------------------


def test_a_529_storm_is_retried_until_the_api_answers(server: FakeAnthropicServer) -> None:
    storm = [Reply(status=529, error="Overloaded", retry_after=0) for _ in range(3)]
    server.queue(*storm, Reply("at last"))
    reply = model_for(server, max_retries=3).generate([user_message("hi")])
    assert reply.content == "at last" and len(server.requests) == 4


def test_a_529_storm_longer_than_the_retries_fails_saying_overloaded(
    server: FakeAnthropicServer,
) -> None:
    server.queue(*[Reply(status=529, error="Overloaded", retry_after=0) for _ in range(3)])
    with pytest.raises(APIStatusError, match="HTTP 529.*Overloaded.*overloaded") as caught:
        model_for(server, max_retries=2).stream([user_message("hi")])
    assert caught.value.body["error"]["type"] == "overloaded_error"


def test_a_rate_limit_waits_for_retry_after(server: FakeAnthropicServer) -> None:
    server.queue(Reply(status=429, error="rate limited", retry_after=0), Reply("ok"))
    assert model_for(server).generate([user_message("hi")]).content == "ok"


def test_thinking_blocks_go_back_signed_on_the_tool_use_turn(server: FakeAnthropicServer) -> None:
    # The fake refuses, as Anthropic does, a tool-use turn without its signed thinking block.
    server.queue(
        Reply(
            reasoning_content="I should look it up.",
            tool_calls=[call("get_weather", {"city": "Paris"})],
        ),
        Reply("It is sunny in Paris."),
    )
    agent = ChatModelAgent("a", "d", model_for(server, thinking=2048), tools=[get_weather])
    result = Runner(agent, enable_streaming=True).invoke("Weather in Paris?")
    assert result.error is None and result.text == "It is sunny in Paris."
    assistant = server.requests[1]["messages"][1]
    assert assistant["role"] == "assistant"
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use"]
    assert server.requests[1]["thinking"] == {"type": "enabled", "budget_tokens": 2048}


def test_a_changed_thinking_block_is_refused_like_anthropic_does(
    server: FakeAnthropicServer,
) -> None:
    server.queue(Reply("unused"))
    forged = attrs.evolve(
        assistant_message("", [call("get_weather", {"city": "Paris"})]),
        extra={"thinking_blocks": [{"type": "thinking", "thinking": "x", "signature": "forged"}]},
    )
    with pytest.raises(APIStatusError, match="signature"):
        model_for(server, thinking=2048).generate(
            [user_message("hi"), forged, tool_message("sunny", forged.tool_calls[0].id)]
        )


def test_thinking_blocks_survive_a_checkpoint_and_the_json_round_trip(
    server: FakeAnthropicServer,
) -> None:
    from agentkit.checkpoint import PickleSerializer

    server.queue(
        Reply(reasoning_content="Think.", tool_calls=[call("get_weather", {"city": "Rome"})])
    )
    reply = model_for(server, thinking=2048).generate([user_message("Rome?")])
    serializer = PickleSerializer()
    restored = serializer.loads(serializer.dumps([reply], checkpoint_id="c"), checkpoint_id="c")[0]
    from_json = Message.from_dict(json.loads(json.dumps(reply.to_dict())))
    for message in (restored, from_json):
        server.queue(Reply("Sunny."))
        answer = model_for(server, thinking=2048).generate(
            [user_message("Rome?"), message, tool_message("sunny", message.tool_calls[0].id)]
        )
        assert answer.content == "Sunny."


def test_cache_hit_rate_over_a_ten_step_agent_run(server: FakeAnthropicServer) -> None:
    steps = [Reply(tool_calls=[call("get_weather", {"city": f"City {n}"})]) for n in range(9)]
    server.queue(*steps, Reply("Done: all sunny."))
    agent = ChatModelAgent(
        "a",
        "You are a weather assistant. " * 40,
        model_for(server),
        tools=[get_weather],
        max_iterations=20,
    )
    result = Runner(agent).invoke("Check the weather in ten cities, one by one.")
    assert result.error is None and len(server.requests) == 10
    reads, writes = server.cache_reads, server.cache_writes
    assert reads[0] == 0 and all(read > 0 for read in reads[1:])
    prompt = result.usage.prompt_tokens
    assert result.usage.cached_tokens == sum(reads)
    assert result.usage.cache_write_tokens == sum(writes)
    hit_rate = result.usage.cached_tokens / prompt
    print(
        f"cache hit rate over 10 steps: {hit_rate:.0%} ({result.usage.cached_tokens}/{prompt} input tokens)"
    )
    assert hit_rate > 0.7
    # Without caching, nothing is read from the cache.
    server.queue(*steps, Reply("Done."))
    uncached = ChatModelAgent(
        "a",
        "x " * 40,
        model_for(server, prompt_caching=False),
        tools=[get_weather],
        max_iterations=20,
    )
    assert Runner(uncached).invoke("again").usage.cached_tokens == 0


def test_pricing_charges_cache_reads_and_writes_at_their_prices(
    server: FakeAnthropicServer,
) -> None:
    usage = TokenUsage(
        1_000_000 + 2_000_000 + 3_000_000, 1_000_000, 7_000_000, 2_000_000, 3_000_000
    )
    server.queue(Reply("ok", usage=usage))
    pricing = ModelPricing(3.0, 15.0, cached_input_per_million=0.3, cache_write_per_million=3.75)
    reply = model_for(server, pricing=pricing).generate([user_message("hi")])
    assert reply.response_meta is not None
    assert reply.response_meta.usage == usage
    assert reply.response_meta.cost == pytest.approx(3.0 + 2 * 0.3 + 3 * 3.75 + 15.0)


def test_refusal_and_max_tokens_over_a_stream(server: FakeAnthropicServer) -> None:
    server.queue(Reply(finish_reason="refusal"), Reply("Once upon", finish_reason="max_tokens"))
    refused = concat_messages(list(model_for(server).stream([user_message("x")])))
    assert (
        refused.response_meta is not None
        and refused.response_meta.finish_reason == "content_filter"
    )
    assert refused.content == refused.extra["refusal"] != ""
    cut = concat_messages(list(model_for(server).stream([user_message("x")])))
    assert cut.response_meta is not None and cut.response_meta.finish_reason == "length"
    assert cut.content == "Once upon"


def test_a_stream_that_ends_inside_a_thinking_block_is_incomplete(
    server: FakeAnthropicServer,
) -> None:
    server.queue(
        Reply("answer", reasoning_content="a long thought in pieces", chunks=4, cut_after=4)
    )
    reader = model_for(server, thinking=2048).stream([user_message("x")])
    with pytest.raises(IncompleteStreamError):
        list(reader)


def test_a_stream_that_ends_cleanly_before_message_delta_is_incomplete() -> None:
    events = (FIXTURES / "stream_text.sse").read_bytes().split(b"event: message_delta")[0]

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=events, headers={"content-type": "text/event-stream"})

    client = httpx.Client(transport=httpx.MockTransport(answer))
    model = AnthropicChatModel("claude-test", api_key="k", http_client=client)
    with pytest.raises(IncompleteStreamError, match="without message_delta and message_stop"):
        list(model.stream([user_message("x")]))


def test_invalid_tool_use_json_is_healed_like_the_openai_path(server: FakeAnthropicServer) -> None:
    bad = call("get_weather", '{"city": "Par')
    server.queue(Reply(tool_calls=[bad]), Reply("Sorry, Paris it is."))
    agent = ChatModelAgent("a", "d", model_for(server), tools=[get_weather])
    result = Runner(agent, enable_streaming=True).invoke("Weather?")
    assert result.error is None and result.text == "Sorry, Paris it is."
    second = server.requests[1]["messages"]
    assert second[1]["content"][-1]["input"] == {}  # the API takes only an object back
    tool_result = second[2]["content"][0]
    assert tool_result["type"] == "tool_result"
    assert "not valid JSON" in json.dumps(tool_result["content"])


def test_the_deadline_and_the_size_cap_hold(server: FakeAnthropicServer) -> None:
    server.queue(Reply("late", delay=5))
    with pytest.raises(APITimeoutError, match="AnthropicChatModel"):
        model_for(server, timeout=0.3, max_retries=0).generate([user_message("x")])
    server.queue(Reply("x" * 5000))
    with pytest.raises(ResponseTooLargeError, match="AnthropicChatModel"):
        model_for(server, max_response_bytes=1000).generate([user_message("x")])


def test_a_cancel_aborts_the_waiting_call(server: FakeAnthropicServer) -> None:
    gate = threading.Event()
    server.queue(Reply("never", delay=GUARD))
    handle = CancelHandle()
    agent = ChatModelAgent("a", "d", model_for(server))
    outcome: list[BaseException | None] = []

    def run() -> None:
        result = Runner(agent).invoke("hi", with_cancel(handle), raise_errors=False)
        outcome.append(result.error)

    with no_thread_leak(timeout=GUARD):
        worker = threading.Thread(target=run)
        worker.start()
        while not server.requests and not gate.wait(0.01):
            pass
        handle.cancel()
        worker.join(GUARD)
    assert not worker.is_alive()
    assert isinstance(outcome[0], AgentCancelledError)


def test_failover_from_claude_to_gpt_converts_the_history() -> None:
    with FakeAnthropicServer() as claude_server, FakeOpenAIServer() as gpt_server:
        claude_server.queue(
            Reply(
                reasoning_content="Think first.", tool_calls=[call("get_weather", {"city": "Oslo"})]
            ),
            *[Reply(status=529, error="Overloaded", retry_after=0)] * 2,
        )
        gpt_server.queue(Reply("Sunny in Oslo."))
        claude = AnthropicChatModel(
            "claude-test",
            base_url=claude_server.base_url,
            api_key="k",
            thinking=2048,
            max_retries=1,
        )
        gpt = OpenAIChatModel("gpt-test", base_url=gpt_server.base_url, api_key="k")
        agent = ChatModelAgent("a", "d", FailoverChatModel([claude, gpt]), tools=[get_weather])
        result = Runner(agent).invoke("Oslo?")
        assert result.error is None and result.text == "Sunny in Oslo."
        sent = gpt_server.requests[0]["messages"]
        assistant = next(m for m in sent if m["role"] == "assistant")
        assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"
        assert "thinking_blocks" not in json.dumps(
            sent
        )  # Anthropic's signed blocks stay with Claude
        assert sent[-1]["role"] == "tool"


def test_pickled_token_usage_from_before_cache_writes_loads() -> None:
    old = TokenUsage(10, 2, 12, 3)
    state = old.__getstate__()
    del state["cache_write_tokens"]
    restored = TokenUsage.__new__(TokenUsage)
    restored.__setstate__(state)
    assert restored == old and restored.cache_write_tokens == 0
    assert pickle.loads(pickle.dumps(TokenUsage(1, 2, 3, 4, 5))).cache_write_tokens == 5


def test_an_overloaded_storm_mid_run_keeps_the_finished_steps_for_a_resume(
    server: FakeAnthropicServer,
) -> None:
    ran: list[str] = []

    @tool
    def look_up(city: str) -> str:
        """Look a city's weather up."""
        ran.append(city)
        return "sunny"

    server.queue(
        Reply(reasoning_content="Look.", tool_calls=[call("look_up", {"city": "Oslo"})]),
        *[Reply(status=529, error="Overloaded", retry_after=0)] * 2,
    )
    store = InMemoryCheckPointStore()
    agent = ChatModelAgent(
        "a", "d", model_for(server, thinking=2048, max_retries=1), tools=[look_up]
    )
    failed = Runner(agent, checkpoint_store=store).invoke(
        "Oslo?", with_checkpoint_id("storm"), raise_errors=False
    )
    assert isinstance(failed.error, APIStatusError) and failed.error.status_code == 529
    server.queue(Reply("Sunny in Oslo."))
    resumed = Runner(agent, checkpoint_store=store).resume("storm").result()
    assert resumed.text == "Sunny in Oslo." and ran == ["Oslo"]  # the finished step was kept
    last = server.requests[-1]["messages"]
    assert [b["type"] for b in last[1]["content"]] == ["thinking", "tool_use"]  # still signed
