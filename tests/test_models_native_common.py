"""What every native model shares with OpenAIChatModel: deadlines, caps, limits, cancel, pricing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentkit import (
    CancelHandle,
    ChatModelAgent,
    ConcurrencyLimit,
    ModelPricing,
    Runner,
    with_cancel,
)
from agentkit.errors import (
    AgentCancelledError,
    APIConnectionError,
    APITimeoutError,
    ResponseTooLargeError,
    SlotTimeoutError,
)
from agentkit.models import AnthropicChatModel, GeminiChatModel, OpenAIResponsesModel
from agentkit.schema import concat_messages, user_message
from agentkit.testing import (
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeResponsesServer,
    Reply,
    no_thread_leak,
)

GUARD = 30.0
Make = Callable[..., Any]

WIRES = {
    "anthropic": (
        FakeAnthropicServer,
        lambda url, **kw: AnthropicChatModel("m", base_url=url, api_key="k", **kw),
    ),
    "gemini": (
        FakeGeminiServer,
        lambda url, **kw: GeminiChatModel("m", base_url=url, api_key="k", **kw),
    ),
    "responses": (
        FakeResponsesServer,
        lambda url, **kw: OpenAIResponsesModel("m", base_url=url, api_key="k", **kw),
    ),
}


@pytest.fixture(params=sorted(WIRES))
def wire(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Make]]:
    server_type, make = WIRES[request.param]
    with server_type() as server:
        yield server, lambda **kw: make(server.base_url, **kw)  # type: ignore[no-untyped-call]


def test_generate_and_stream_agree(wire: tuple[Any, Make]) -> None:
    server, make = wire
    server.queue(Reply("Hello there, friend."), Reply("Hello there, friend."))
    model = make()
    whole: Any = model.generate([user_message("hi")])
    streamed: Any = concat_messages(list(model.stream([user_message("hi")])))
    assert whole.content == streamed.content == "Hello there, friend."
    assert whole.response_meta.finish_reason == streamed.response_meta.finish_reason == "stop"
    first, second = whole.response_meta.usage, streamed.response_meta.usage
    # (Anthropic's second call reads from the cache what the first wrote: same totals.)
    assert (first.prompt_tokens, first.completion_tokens) == (
        second.prompt_tokens,
        second.completion_tokens,
    )


def test_the_timeout_is_a_deadline(wire: tuple[Any, Make]) -> None:
    server, make = wire
    server.queue(Reply("late", delay=GUARD))
    with pytest.raises(APITimeoutError, match="timeout"):
        make(timeout=0.3, max_retries=0).generate([user_message("x")])


def test_the_response_size_is_capped(wire: tuple[Any, Make]) -> None:
    server, make = wire
    server.queue(Reply("word " * 2000), Reply("word " * 2000))
    model = make(max_response_bytes=2000)
    with pytest.raises(ResponseTooLargeError, match="max_response_bytes"):
        model.generate([user_message("x")])
    with pytest.raises(ResponseTooLargeError):
        list(model.stream([user_message("x")]))


def test_a_dropped_connection_is_retried(wire: tuple[Any, Make]) -> None:
    server, make = wire
    server.queue(Reply(disconnect=True), Reply("fine"))
    assert make(max_retries=1).generate([user_message("x")]).content == "fine"
    server.queue(Reply(disconnect=True))
    with pytest.raises(APIConnectionError):
        make(max_retries=0).generate([user_message("x")])


def test_calls_take_a_slot_of_a_concurrency_limit(wire: tuple[Any, Make]) -> None:
    server, make = wire
    slots = ConcurrencyLimit(1)
    model = make(concurrency=slots, timeout=0.5, max_retries=0)
    held = slots.acquire()
    with pytest.raises(SlotTimeoutError):
        model.generate([user_message("x")])
    held.release()
    server.queue(Reply("one"), Reply("two"))
    assert model.generate([user_message("x")]).content == "one"
    reader = model.stream([user_message("x")])
    assert slots.in_use == 1  # the stream holds its slot until it ends
    assert concat_messages(list(reader)).content == "two"
    assert slots.in_use == 0


def test_replies_are_priced(wire: tuple[Any, Make]) -> None:
    server, make = wire
    server.queue(Reply("ok"))
    reply = make(pricing=ModelPricing(1.0, 2.0)).generate([user_message("x")])
    usage = reply.response_meta.usage
    assert reply.response_meta.cost == pytest.approx(
        (usage.prompt_tokens + 2 * usage.completion_tokens) / 1e6
    )


@pytest.mark.parametrize("streaming", [False, True])
def test_a_cancel_aborts_the_waiting_call(wire: tuple[Any, Make], streaming: bool) -> None:
    server, make = wire
    server.queue(Reply("never", delay=GUARD))
    handle = CancelHandle()
    agent = ChatModelAgent("a", "d", make())
    outcome: list[BaseException | None] = []

    def run() -> None:
        result = Runner(agent, enable_streaming=streaming).invoke(
            "hi", with_cancel(handle), raise_errors=False
        )
        outcome.append(result.error)

    arrived = threading.Event()
    with no_thread_leak(timeout=GUARD):
        worker = threading.Thread(target=run)
        worker.start()
        while not server.requests and not arrived.wait(0.01):
            pass
        handle.cancel()
        worker.join(GUARD)
    assert not worker.is_alive()
    assert isinstance(outcome[0], AgentCancelledError)
