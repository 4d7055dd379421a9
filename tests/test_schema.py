"""Messages: constructors, to_dict/from_dict round trips and concat_messages."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkit import (
    FunctionCall,
    Message,
    ResponseMeta,
    Role,
    TokenUsage,
    ToolCall,
    assistant_message,
    concat_messages,
    system_message,
    tool_message,
    user_message,
)
from agentkit.errors import FrozenError
from tests.strategies import messages, names, texts


def test_constructors_set_role_and_fields() -> None:
    assert user_message("hi") == Message(Role.USER, "hi")
    assert system_message("be brief").role is Role.SYSTEM
    call = ToolCall("c1", FunctionCall("f", "{}"))
    assert assistant_message("", [call]).tool_calls == (call,)
    tool = tool_message("ok", "c1", "f")
    assert (tool.role, tool.tool_call_id, tool.tool_name) == (Role.TOOL, "c1", "f")


def test_a_message_is_a_value_its_calls_and_extra_too() -> None:
    message = Message(
        Role.ASSISTANT, "hi", [ToolCall("c1", FunctionCall("f", "{}"))], extra={"k": 1}
    )
    assert message.tool_calls == (ToolCall("c1", FunctionCall("f", "{}")),)  # a tuple
    writes: list[Callable[[], object]] = [
        lambda: setattr(message, "content", "bye"),
        lambda: delattr(message, "content"),
        lambda: setattr(message.tool_calls[0], "id", "c2"),
        lambda: setattr(message.tool_calls[0].function, "arguments", '{"to": "MALLORY"}'),
        lambda: message.extra.__setitem__("k", 2),
        lambda: message.extra.update(k=2),
        lambda: message.tool_calls[0].extra.__setitem__("k", 2),
    ]
    for write in writes:
        with pytest.raises(FrozenError, match="cannot|changed copy") as caught:
            write()
        assert isinstance(caught.value, AttributeError)  # as attrs' FrozenInstanceError
    assert message == Message(
        Role.ASSISTANT, "hi", [ToolCall("c1", FunctionCall("f", "{}"))], extra={"k": 1}
    )
    with pytest.raises(FrozenError, match=r"attrs\.evolve\(message, content=\.\.\.\)"):
        message.content = "bye"  # type: ignore[misc]
    changed = attrs.evolve(message, content="bye", extra={**message.extra, "k": 2})
    assert (changed.content, changed.extra, message.content) == ("bye", {"k": 2}, "hi")


def test_a_message_pickles_with_plain_containers_and_loads_as_a_value() -> None:
    message = Message(Role.ASSISTANT, "", [ToolCall("c1", extra={"sig": "s"})], extra={"k": 1})
    state = message.__getstate__()
    assert type(state["extra"]) is dict and type(state["tool_calls"]) is tuple
    loaded = pickle.loads(pickle.dumps(message))
    assert loaded == message
    with pytest.raises(FrozenError):
        loaded.extra["k"] = 2
    with pytest.raises(FrozenError):
        loaded.tool_calls[0].extra["sig"] = "forged"
    # an older pickle's list and plain dict become a tuple and a read-only dict
    old = Message.__new__(Message)
    old.__setstate__({**state, "tool_calls": [ToolCall("c1")], "extra": {"k": 1}})
    assert type(old.tool_calls) is tuple
    with pytest.raises(FrozenError):
        old.extra["k"] = 2


def test_role_accepts_its_string_value() -> None:
    assert Message("assistant").role is Role.ASSISTANT
    assert str(Role.TOOL) == "tool"


@given(messages)
def test_to_dict_round_trips_through_json(message: Message) -> None:
    data = json.loads(json.dumps(message.to_dict()))
    assert Message.from_dict(data) == message


def test_to_dict_keeps_cache_reads_and_cache_writes_apart() -> None:
    usage = TokenUsage(1200, 30, 1230, cached_tokens=1000, cache_write_tokens=150)
    message = attrs.evolve(assistant_message("hi"), response_meta=ResponseMeta("stop", usage))
    data = json.loads(json.dumps(message.to_dict()))
    assert data["response_meta"]["usage"]["cache_write_tokens"] == 150
    assert data["response_meta"]["usage"]["cached_tokens"] == 1000
    assert Message.from_dict(data).response_meta == ResponseMeta("stop", usage)


def test_from_dict_without_role_says_what_is_missing() -> None:
    with pytest.raises(ValueError, match="'role'"):
        Message.from_dict({"content": "x"})


@given(st.lists(texts, min_size=1, max_size=8))
def test_concat_joins_contents_in_order(parts: list[str]) -> None:
    chunks = [Message(Role.ASSISTANT, part) for part in parts]
    assert concat_messages(chunks).content == "".join(parts)


@given(st.lists(st.tuples(st.integers(0, 3), names, st.text(max_size=6)), min_size=1, max_size=12))
def test_concat_merges_tool_call_fragments_by_index(fragments: list[tuple[int, str, str]]) -> None:
    chunks = []
    first: dict[int, str] = {}
    args: dict[int, str] = {}
    for index, name, arg in fragments:
        is_first = index not in first
        if is_first:
            first[index] = name
        args[index] = args.get(index, "") + arg
        call = ToolCall(
            id=f"id{index}" if is_first else "",
            function=FunctionCall(name if is_first else "", arg),
            index=index,
        )
        chunks.append(Message(Role.ASSISTANT, tool_calls=[call]))
    merged = concat_messages(chunks)
    assert [c.index for c in merged.tool_calls] == sorted(first)
    for call in merged.tool_calls:
        assert call.index is not None
        assert call.id == f"id{call.index}"
        assert call.function.name == first[call.index]
        assert call.function.arguments == args[call.index]


def test_concat_keeps_last_finish_reason_and_usage() -> None:
    usage = TokenUsage(1, 2, 3)
    merged = concat_messages(
        [
            Message(Role.ASSISTANT, "a", response_meta=ResponseMeta("", TokenUsage(9, 9, 9))),
            Message(Role.ASSISTANT, "b", response_meta=ResponseMeta("stop")),
            Message(Role.ASSISTANT, "", response_meta=ResponseMeta("", usage)),
        ]
    )
    assert merged.response_meta == ResponseMeta("stop", usage)


def test_concat_rejects_mixed_roles_and_empty_input() -> None:
    with pytest.raises(ValueError, match="role"):
        concat_messages([user_message("a"), assistant_message("b")])
    with pytest.raises(ValueError):
        concat_messages([])


def test_agent_event_to_dict_is_json_safe_and_materializes_streams() -> None:
    from agentkit import (
        AgentAction,
        AgentEvent,
        InterruptContext,
        InterruptInfo,
        event_from_message,
        stream_from_list,
    )

    streamed = attrs.evolve(
        event_from_message(
            None,
            stream_from_list([assistant_message("Hel"), assistant_message("lo")]),
            Role.ASSISTANT,
        ),
        agent_name="a",
    )
    data = json.loads(json.dumps(streamed.to_dict()))
    assert data["output"]["message"]["content"] == "Hello"
    assert data["output"]["is_streaming"] is True
    # the event stays readable after to_dict()
    assert streamed.get_message().content == "Hello"  # type: ignore[union-attr]

    context = InterruptContext(
        id="i1", info={"q": "ok?"}, address=("agent:a", "tool:t:c"), is_root_cause=True
    )
    interrupted = AgentEvent(
        agent_name="a",
        run_path=["a"],
        action=AgentAction(interrupted=InterruptInfo(contexts=[context])),
    )
    data = json.loads(json.dumps(interrupted.to_dict()))
    assert data["run_path"] == ["a"]
    assert data["action"]["interrupted"]["contexts"][0] == {
        "id": "i1",
        "info": {"q": "ok?"},
        "address": ["agent:a", "tool:t:c"],
        "is_root_cause": True,
    }
    failed = AgentEvent(err=KeyError("k"))
    assert failed.to_dict()["error"] == {"type": "KeyError", "message": "'k'"}
