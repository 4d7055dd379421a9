"""ScriptedChatModel and ModelOptions: the models that need no network."""

from __future__ import annotations

import threading

import attrs
import pytest
from hypothesis import given, settings

from agentkit.errors import ModelError
from agentkit.models import (
    ChatModel,
    ModelCall,
    ModelOptions,
    ScriptedChatModel,
    ToolCallingChatModel,
)
from agentkit.models.scripted import split_message
from agentkit.schema import (
    FunctionCall,
    Message,
    ResponseMeta,
    Role,
    TokenUsage,
    ToolCall,
    ToolInfo,
    assistant_message,
    concat_messages,
    user_message,
)
from agentkit.streams import StreamReader
from tests.strategies import messages

ADD = ToolInfo("add", "Add two numbers.", {"type": "object", "properties": {}})


# --- ModelOptions ---------------------------------------------------------------------------


def test_merge_later_values_win_and_none_keeps_the_earlier_value() -> None:
    base = ModelOptions(model="a", temperature=0.1, max_tokens=10, extra={"seed": 1, "user": "u"})
    merged = base.merge(
        ModelOptions(temperature=0.7, extra={"seed": 2}), None, ModelOptions(top_p=0.5)
    )

    assert merged == ModelOptions(
        model="a", temperature=0.7, max_tokens=10, top_p=0.5, extra={"seed": 2, "user": "u"}
    )
    assert base.temperature == 0.1 and base.extra == {"seed": 1, "user": "u"}  # unchanged


def test_merge_with_nothing_returns_the_same_options() -> None:
    options = ModelOptions(temperature=0.3)
    assert options.merge() is options
    assert options.merge(None, ModelOptions()) is options


def test_options_are_frozen_and_hashable() -> None:
    options = ModelOptions(stop=["a", "b"], extra={"x": 1})
    assert options.stop == ("a", "b")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        options.temperature = 1.0  # type: ignore[misc]
    assert hash(options) == hash(ModelOptions(stop=("a", "b"), extra={"x": 2}))


def test_from_kwargs_names_the_unknown_option_and_the_known_ones() -> None:
    assert ModelOptions.from_kwargs(temperature=0.5) == ModelOptions(temperature=0.5)
    with pytest.raises(ValueError, match=r"'temp'.*fields are: model, temperature"):
        ModelOptions.from_kwargs(temp=0.5)


# --- replies --------------------------------------------------------------------------------


def test_replies_come_in_script_order_in_every_form() -> None:
    scripted = assistant_message("from a message")
    model = ScriptedChatModel(
        [
            scripted,
            "from a string",
            lambda history: f"from a function of {len(history)} messages",
            lambda history: assistant_message("a message from a function"),
        ]
    )
    history = [user_message("hi")]

    assert model.generate(history) is scripted
    assert model.generate(history) == assistant_message("from a string")
    assert model.generate(history).content == "from a function of 1 messages"
    assert model.generate(history).content == "a message from a function"
    assert model.replies_left == 0


def test_exception_classes_and_instances_are_raised() -> None:
    model = ScriptedChatModel([TimeoutError, ModelError("server on fire"), "recovered"])

    with pytest.raises(TimeoutError):
        model.generate([user_message("hi")])
    with pytest.raises(ModelError, match="server on fire"):
        model.stream([user_message("hi")])  # raised by stream() itself, not by the reader
    assert model.generate([user_message("hi")]).content == "recovered"
    assert len(model.calls) == 3


def test_a_function_script_answers_every_call() -> None:
    model = ScriptedChatModel(lambda history: f"echo {history[-1].content}")
    assert model.generate([user_message("one")]).content == "echo one"
    chunks = list(model.stream([user_message("two")]))
    assert len(chunks) > 1
    assert concat_messages(chunks) == model.generate([user_message("two")])
    assert model.replies_left is None


def test_running_out_of_script_says_how_to_fix_it() -> None:
    model = ScriptedChatModel(["only reply"])
    model.generate([user_message("hi")])
    with pytest.raises(ModelError, match=r"ran out after 1 replies \(call 2 has no reply\).*add"):
        model.generate([user_message("again")])
    assert len(model.calls) == 2


def test_bad_script_and_bad_replies_are_type_errors() -> None:
    with pytest.raises(TypeError, match="list of replies"):
        ScriptedChatModel("not a list")
    # Deliberately wrong replies: the model must refuse them at run time.
    model = ScriptedChatModel([42, lambda history: 42])  # type: ignore[list-item, return-value]
    with pytest.raises(TypeError, match="got int"):
        model.generate([])
    with pytest.raises(TypeError, match="must return a Message or a str"):
        model.generate([])


# --- recorded calls ---------------------------------------------------------------------------


def test_calls_record_messages_tools_and_options() -> None:
    model = ScriptedChatModel(["a", "b"])
    history = [user_message("hi")]
    options = ModelOptions(temperature=0)
    model.generate(history, options)
    history.append(user_message("more"))  # the recorded list is a copy
    list(model.with_tools([ADD]).stream(history))

    first, second = model.calls
    assert first == ModelCall([user_message("hi")], [], options, streaming=False)
    assert first.messages is not history
    assert second.messages == history and second.tools == [ADD] and second.options is None
    assert second.streaming is True


def test_with_tools_shares_the_script_and_the_call_log() -> None:
    model = ScriptedChatModel(["first", "second"])
    bound = model.with_tools([ADD])

    assert isinstance(bound, ScriptedChatModel)
    assert bound.generate([]).content == "first"
    assert model.generate([]).content == "second"
    assert bound.calls is model.calls and [c.tools for c in model.calls] == [[ADD], []]
    assert model.tools == [] and bound.tools == [ADD]
    assert "0 replies left" in repr(model)


def test_scripted_model_satisfies_the_model_protocols() -> None:
    model = ScriptedChatModel([])
    assert isinstance(model, ChatModel)
    assert isinstance(model, ToolCallingChatModel)
    assert isinstance(model.with_tools([]), ToolCallingChatModel)


def test_threads_consume_each_reply_exactly_once() -> None:
    model = ScriptedChatModel([f"reply {n}" for n in range(400)])
    bound = model.with_tools([ADD])
    seen: list[str] = []
    lock = threading.Lock()

    def worker(number: int) -> None:
        for call in range(25):
            target = bound if call % 2 else model
            if number % 2:
                reply = target.generate([user_message("hi")])
            else:
                reply = concat_messages(list(target.stream([user_message("hi")])))
            with lock:
                seen.append(reply.content)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seen) == sorted(f"reply {n}" for n in range(400))
    assert len(model.calls) == 400 and model.replies_left == 0


# --- streaming ----------------------------------------------------------------------------------


def test_stream_sends_the_reply_in_several_chunks_like_a_server() -> None:
    reply = Message(
        Role.ASSISTANT,
        "The sum of one and two is three.",
        [
            ToolCall("c1", FunctionCall("add", '{"a": 1, "b": 2}')),
            ToolCall("c2", FunctionCall("add", '{"a": 3, "b": 4}')),
        ],
        response_meta=ResponseMeta("tool_calls", TokenUsage(10, 5, 15)),
    )
    reader = ScriptedChatModel([reply]).stream([user_message("add")])
    assert isinstance(reader, StreamReader)
    chunks = list(reader)

    content_chunks = [chunk for chunk in chunks if chunk.content]
    assert len(content_chunks) == 3
    fragments = [call for chunk in chunks for call in chunk.tool_calls]
    assert [f.index for f in fragments] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [f.id for f in fragments if f.id] == ["c1", "c2"]
    assert all(chunk.response_meta is None for chunk in chunks[:-1])
    assert chunks[-1].response_meta == ResponseMeta("tool_calls", TokenUsage(10, 5, 15))

    rebuilt = concat_messages(chunks)
    assert rebuilt.content == reply.content
    assert [(c.id, c.function, c.index) for c in rebuilt.tool_calls] == [
        ("c1", FunctionCall("add", '{"a": 1, "b": 2}'), 0),
        ("c2", FunctionCall("add", '{"a": 3, "b": 4}'), 1),
    ]
    assert rebuilt.response_meta == reply.response_meta


def _without_indexes(message: Message) -> Message:
    calls = [attrs.evolve(call, index=None) for call in message.tool_calls]
    return attrs.evolve(message, tool_calls=calls)


@settings(deadline=None)
@given(message=messages)
def test_split_message_chunks_concatenate_back_to_the_message(message: Message) -> None:
    chunks = split_message(message)
    assert all(chunk.role == message.role for chunk in chunks)
    rebuilt = concat_messages(chunks)
    expected = message
    if any(call.index is None for call in message.tool_calls):
        rebuilt, expected = _without_indexes(rebuilt), _without_indexes(message)
    assert rebuilt == expected
