"""The OpenAI client keeps each message's request JSON itself, never on the message.

Specifications: sending a message writes nothing onto it; a message is encoded once and sent
again from the model's cache; assigning its ``content`` makes the next request carry the new
text, and a message built anew from a sent one (the documented way to change anything else)
is sent as built; entries go with their messages and the cache stays within its byte
budget; many threads sharing one model and one history get the right bytes. Requests go to a real loopback server (``FakeOpenAIServer``).
"""

from __future__ import annotations

import gc
import json
import pickle
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

import agentkit.models.openai._wire as wire
from agentkit.models import OpenAIChatModel
from agentkit.models.openai._encoded import EncodedMessages
from agentkit.schema import (
    FunctionCall,
    ImagePart,
    Message,
    Role,
    TextPart,
    ToolCall,
    assistant_message,
    system_message,
    tool_message,
    user_message,
)
from agentkit.testing import FakeOpenAIServer


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(handler=lambda request: "ok") as fake:
        yield fake


@pytest.fixture
def model(server: FakeOpenAIServer) -> Iterator[OpenAIChatModel]:
    with OpenAIChatModel("m", base_url=server.base_url, api_key="k", timeout=10) as m:
        yield m


@pytest.fixture
def encodings(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every message dict the client encodes, in order."""
    seen: list[Any] = []
    real = wire._encode_json

    def counting(value: Any) -> str:
        if isinstance(value, dict) and "role" in value:
            seen.append(value)
        return real(value)

    monkeypatch.setattr(wire, "_encode_json", counting)
    return seen


def _state(message: Message) -> tuple[Any, ...]:
    return tuple(getattr(message, name) for name in Message.__dict__["__slots__"] if name != "__weakref__")


def test_message_has_no_private_fields() -> None:
    names = [field.name for field in attrs.fields(Message)]
    assert names == [
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "tool_name",
        "name",
        "response_meta",
        "extra",
        "parts",
    ]
    assert [name for name in Message.__dict__["__slots__"] if name.startswith("_")] == ["__weakref__"]


def test_sending_a_message_writes_nothing_onto_it(model: OpenAIChatModel) -> None:
    history = [
        system_message("Be brief."),
        user_message("hi"),
        assistant_message("", [ToolCall("c1", FunctionCall("f", "{}"))]),
        tool_message("done", "c1"),
    ]
    before = [(_state(message), pickle.dumps(message)) for message in history]
    model.generate(history)
    list(model.stream(history))
    assert [(_state(message), pickle.dumps(message)) for message in history] == before


def test_each_message_is_encoded_once_over_a_growing_conversation(
    model: OpenAIChatModel, encodings: list[Any]
) -> None:
    history: list[Message] = [system_message("Be brief."), user_message("q")]
    for step in range(20):
        model.generate(history)
        history.append(assistant_message(f"a{step}"))
        history.append(user_message(f"q{step}"))
    assert len(encodings) == len(history) - 2  # the last two were never sent


def test_a_changed_copy_of_a_sent_message_is_sent_anew(
    server: FakeOpenAIServer, model: OpenAIChatModel, encodings: list[Any]
) -> None:
    message = user_message("old words")
    history = [system_message("Be brief."), message]
    model.generate(history)
    history[1] = attrs.evolve(message, content="new words")  # messages are values
    model.generate(history)
    model.generate(history)
    assert [request["messages"][1]["content"] for request in server.requests] == [
        "old words",
        "new words",
        "new words",
    ]
    assert len(encodings) == 3  # the system message once, the user message twice


def test_a_sent_messages_parts_cannot_change_and_a_copy_with_new_parts_is_sent_anew(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    # The text of the parts stays the very same string, so only the parts tell the change.
    caption = TextPart("see this")
    message = user_message([caption, ImagePart(url="https://example.com/one.png")])
    model.generate([message])
    with pytest.raises(attrs.exceptions.FrozenInstanceError, match="attrs.evolve"):
        message.parts = (caption, ImagePart(url="https://example.com/two.png"))  # type: ignore[misc]
    changed = attrs.evolve(message, parts=(caption, ImagePart(url="https://example.com/two.png")))
    assert changed.content == message.content
    model.generate([changed])
    urls = [request["messages"][0]["content"][1]["image_url"]["url"] for request in server.requests]
    assert urls == ["https://example.com/one.png", "https://example.com/two.png"]


def test_a_new_message_built_from_a_sent_one_is_sent_as_built(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    # The rule for every other change: build a new message (the framework's own way).
    sent = attrs.evolve(
        assistant_message("", [ToolCall("c1", FunctionCall("f", "{}"))]),
        extra={"provider_fields": {"signature": "s1"}},
    )
    model.generate([user_message("hi"), sent])
    changes: list[dict[str, Any]] = [
        {"role": Role.USER, "tool_calls": []},
        {"tool_calls": [ToolCall("c2", FunctionCall("g", '{"x": 1}'))]},
        {"name": "bob"},
        {"extra": {"provider_fields": {"signature": "s2"}}},
        {"role": Role.TOOL, "tool_call_id": "c9", "tool_calls": []},
    ]
    for change in changes:
        rebuilt = attrs.evolve(sent, **change)
        model.generate([user_message("hi"), rebuilt])
        assert server.requests[-1]["messages"][1] == json.loads(wire.message_bytes(rebuilt))
    assert server.requests[0]["messages"][1] == json.loads(wire.message_bytes(sent))


def test_entries_go_with_their_messages() -> None:
    cache = EncodedMessages()
    history = [user_message(f"message {n}") for n in range(100)]
    cache.encode(history)
    assert len(cache) == 100
    del history[50:]
    gc.collect()
    assert len(cache) == 50
    history.clear()
    assert len(cache) == 0


def test_the_cache_stays_within_its_byte_budget() -> None:
    cache = EncodedMessages(max_bytes=10_000)
    live = [user_message("x" * 1000) for _ in range(100)]  # ~100 KB of encodings, all alive
    for start in range(0, 100, 5):
        assert cache.encode(live[start : start + 5]) == [
            wire.message_bytes(message) for message in live[start : start + 5]
        ]
        assert cache.size <= 10_000
        assert len(cache) <= 10


def test_a_new_message_at_a_freed_messages_address_gets_its_own_encoding() -> None:
    cache = EncodedMessages()
    ids = set()
    for n in range(200):
        message = user_message(f"message {n}")
        ids.add(id(message))
        assert cache.encode([message]) == [wire.message_bytes(message)]
        del message
    assert len(ids) < 200  # freed messages' addresses were reused


def test_threads_sharing_a_model_and_a_history_send_the_right_messages(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    shared = [system_message("Be brief."), user_message("shared question")]
    barrier = threading.Barrier(8)
    failures: list[BaseException] = []

    def work(number: int) -> None:
        try:
            barrier.wait(10)
            own = [*shared, user_message(f"thread {number}")]
            for round_ in range(10):
                model.generate(own)
                own.append(assistant_message(f"t{number} r{round_}"))
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == [] and not any(thread.is_alive() for thread in threads)
    for request in server.requests:
        messages = request["messages"]
        number = int(messages[2]["content"].split()[1])
        assert messages[:2] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "shared question"},
        ]
        assert [m["content"] for m in messages[3:]] == [
            f"t{number} r{r}" for r in range(len(messages) - 3)
        ]
    assert len(server.requests) == 80


def test_close_drops_the_encodings(model: OpenAIChatModel) -> None:
    history = [user_message("hi")]
    model.generate(history)
    assert len(model._http.cache) == 1  # the model's own cache
    model.close()
    assert len(model._http.cache) == 0
