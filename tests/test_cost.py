"""Cost: ModelPricing on the scripted and the OpenAI models (over real HTTP, cached prompt tokens
included), ``response_meta.cost`` in replies, streams, callbacks and OpenTelemetry spans, and
``RunResult.cost``; older checkpoints without the new fields still load."""

from __future__ import annotations

import pickle
from typing import Any

import attrs
import pytest

from agentkit import (
    ChatModelAgent,
    Message,
    ModelPricing,
    ResponseMeta,
    Role,
    Runner,
    TokenUsage,
    UsageTracker,
    assistant_message,
    concat_messages,
    tool,
    user_message,
    with_callbacks,
)
from agentkit.models import OpenAIChatModel, ScriptedChatModel
from agentkit.testing import FakeOpenAIServer, Reply, call, calls_message

PRICING = ModelPricing(input_per_million=2.0, output_per_million=8.0, cached_input_per_million=0.5)


def priced_reply(content: str, usage: TokenUsage) -> Message:
    return attrs.evolve(assistant_message(content), response_meta=ResponseMeta("stop", usage))


# --- ModelPricing ----------------------------------------------------------------------------


def test_pricing_prices_prompt_cached_and_completion_tokens() -> None:
    usage = TokenUsage(prompt_tokens=1000, completion_tokens=200, total_tokens=1200, cached_tokens=400)
    # 600 fresh prompt tokens at 2.0, 400 cached at 0.5, 200 completion at 8.0 (per million)
    assert PRICING.cost(usage) == pytest.approx((600 * 2.0 + 400 * 0.5 + 200 * 8.0) / 1e6)
    # Without a cached price, cached tokens cost what other prompt tokens cost.
    plain = ModelPricing(2.0, 8.0)
    assert plain.cost(usage) == pytest.approx((1000 * 2.0 + 200 * 8.0) / 1e6)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((-1.0, 1.0), ValueError, "finite number >= 0"),
        ((1.0, float("inf")), ValueError, "finite number >= 0"),
        (("1", 1.0), TypeError, "takes a number"),
        ((1.0, 1.0, -0.1), ValueError, "finite number >= 0"),
        ((True, 1.0), TypeError, "takes a number"),
    ],
)
def test_bad_prices_are_refused(args: tuple[Any, ...], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ModelPricing(*args)


# --- the scripted model ---------------------------------------------------------------------


def test_a_priced_scripted_model_sets_the_cost_of_replies_with_usage() -> None:
    usage = TokenUsage(100, 50, 150)
    model = ScriptedChatModel(
        [priced_reply("a", usage), "no usage", priced_reply("b", usage)], pricing=PRICING
    )
    first = model.generate([user_message("x")])
    assert first.response_meta is not None and first.response_meta.cost == pytest.approx(0.0006)
    assert model.generate([user_message("x")]).response_meta is None
    # A tool-bound copy keeps the pricing; a stream carries the cost on its last chunk.
    bound = model.with_tools([])
    streamed = concat_messages(list(bound.stream([user_message("x")])))
    assert streamed.response_meta is not None and streamed.response_meta.cost == pytest.approx(0.0006)
    assert model.pricing is PRICING
    with pytest.raises(TypeError, match="pricing must be a ModelPricing"):
        ScriptedChatModel(["x"], pricing={"input": 1})  # type: ignore[arg-type]


def test_run_result_cost_sums_the_runs_calls_and_is_none_without_pricing() -> None:
    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    usage = TokenUsage(1000, 100, 1100)
    script = [
        attrs.evolve(calls_message(call("noop", {})), response_meta=ResponseMeta("tool_calls", usage)),
        priced_reply("done", usage),
    ]
    priced = ChatModelAgent("a", "d", ScriptedChatModel(script, pricing=ModelPricing(1.0, 10.0)), tools=[noop])
    result = Runner(priced).invoke("go")
    assert result.cost == pytest.approx(2 * (1000 * 1.0 + 100 * 10.0) / 1e6)
    assert "cost: 0.004" in str(result)
    plain = ChatModelAgent("a", "d", ScriptedChatModel(list(script)), tools=[noop])
    unpriced = Runner(plain).invoke("go")
    assert unpriced.cost is None and unpriced.usage.total_tokens == 2200
    assert "cost" not in str(unpriced)


def test_callbacks_see_the_cost_and_the_usage_tracker_sums_it() -> None:
    seen: list[float | None] = []

    class Watch:
        def on_model_end(self, info: Any, message: Message | None, error: Any) -> None:
            assert message is not None and message.response_meta is not None
            seen.append(message.response_meta.cost)

    tracker = UsageTracker()
    model = ScriptedChatModel([priced_reply("hi", TokenUsage(1000, 0, 1000))], pricing=ModelPricing(3.0, 0.0))
    Runner(ChatModelAgent("a", "d", model), enable_streaming=True).invoke(
        "go", with_callbacks(Watch(), tracker)
    )
    assert seen == [pytest.approx(0.003)]
    assert tracker.cost == pytest.approx(0.003)
    assert UsageTracker().cost is None


# --- the OpenAI client over real HTTP ---------------------------------------------------------


def test_the_openai_client_prices_replies_and_streams_with_cached_tokens() -> None:
    usage = TokenUsage(prompt_tokens=1000, completion_tokens=200, total_tokens=1200, cached_tokens=400)
    expected = (600 * 2.0 + 400 * 0.5 + 200 * 8.0) / 1e6
    with FakeOpenAIServer() as server:
        server.queue(Reply("one", usage=usage), Reply("two", usage=usage), Reply("three", usage=usage))
        with OpenAIChatModel(
            "gpt-test", base_url=server.base_url, api_key="sk-test", pricing=PRICING
        ) as model:
            whole = model.generate([user_message("hi")])
            assert whole.response_meta is not None
            assert whole.response_meta.usage == usage  # cached tokens read from the wire
            assert whole.response_meta.cost == pytest.approx(expected)
            chunks = list(model.with_tools([]).stream([user_message("hi")]))
            priced = [c for c in chunks if c.response_meta is not None and c.response_meta.cost]
            assert len(priced) == 1  # the usage chunk
            streamed = concat_messages(chunks)
            assert streamed.response_meta is not None
            assert streamed.response_meta.cost == pytest.approx(expected)
        with OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="sk-test") as plain:
            reply = plain.generate([user_message("hi")])
            assert reply.response_meta is not None and reply.response_meta.cost is None
            assert reply.response_meta.usage is not None
            assert reply.response_meta.usage.cached_tokens == 400


def test_a_run_on_the_openai_client_reports_its_cost() -> None:
    usage = TokenUsage(prompt_tokens=500, completion_tokens=100, total_tokens=600)
    with FakeOpenAIServer() as server:
        server.queue(Reply("hello", usage=usage))
        model = OpenAIChatModel(
            "gpt-test", base_url=server.base_url, api_key="sk-test", pricing=ModelPricing(1.0, 4.0)
        )
        with model:
            result = Runner(ChatModelAgent("a", "d", model), enable_streaming=True).invoke("hi")
    assert result.cost == pytest.approx((500 * 1.0 + 100 * 4.0) / 1e6)


def test_the_openai_client_refuses_a_pricing_that_is_not_one() -> None:
    with pytest.raises(TypeError, match="pricing must be a ModelPricing"):
        OpenAIChatModel("m", api_key="k", base_url="http://127.0.0.1:9", pricing=0.5)  # type: ignore[arg-type]


# --- tracing -------------------------------------------------------------------------------


def test_chat_spans_carry_the_cost_and_the_cached_tokens() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentkit.integrations.otel import OpenTelemetryHandler

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    usage = TokenUsage(1000, 200, 1200, cached_tokens=400)
    model = ScriptedChatModel([priced_reply("hi", usage)], pricing=PRICING)
    Runner(ChatModelAgent("a", "d", model)).invoke(
        "go", with_callbacks(OpenTelemetryHandler(tracer_provider=provider))
    )
    (chat,) = [span for span in exporter.get_finished_spans() if span.name.startswith("chat ")]
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.usage.cost.amount"] == pytest.approx(PRICING.cost(usage))
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 400
    assert attributes["gen_ai.usage.input_tokens"] == 1000


# --- persisted formats -----------------------------------------------------------------------


def test_messages_with_a_cost_round_trip_through_dicts_and_pickles() -> None:
    meta = ResponseMeta("stop", TokenUsage(1, 2, 3, cached_tokens=1), cost=0.25)
    message = attrs.evolve(assistant_message("hi"), response_meta=meta)
    assert Message.from_dict(message.to_dict()) == message
    assert pickle.loads(pickle.dumps(message)) == message
    assert "cached_tokens" not in str(priced_reply("x", TokenUsage(1, 2, 3)).to_dict())


def test_usage_and_response_meta_saved_before_they_had_cost_fields_still_load() -> None:
    old_usage = TokenUsage.__new__(TokenUsage)
    old_usage.__setstate__({"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})
    assert old_usage == TokenUsage(1, 2, 3, 0)
    old_meta = ResponseMeta.__new__(ResponseMeta)
    old_meta.__setstate__({"finish_reason": "stop", "usage": old_usage})
    assert old_meta == ResponseMeta("stop", TokenUsage(1, 2, 3), None)
    assert Message(Role.ASSISTANT, "x", response_meta=old_meta).response_meta is old_meta
