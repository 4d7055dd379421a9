"""Streamed chat completion chunks: decoding one chunk, and merging their provider fields.

Most chunks have one shape: one choice whose delta carries a piece of the content or a
tool-call fragment. :func:`parse_chunk` reads those directly and hands every other shape
to the general decoding of :mod:`agentkit.models.openai._wire`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import MemberDescriptorType
from typing import Any

import attrs

from agentkit._values import NO_EXTRA as _NO_EXTRA
from agentkit.errors import AgentKitValueError, ModelError
from agentkit.models.openai._wire import (
    decode_json,
    read_audio,
    read_message,
    read_tool_call,
    stream_error,
    usage,
)
from agentkit.schema import ContentPart, FunctionCall, Message, ResponseMeta, Role, ToolCall

__all__: list[str] = []

# The C scanner of a default decoder: (value, end) of the JSON value at an index.
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_decode = json.JSONDecoder().decode


def parse_chunk(payload: bytes, url: str) -> Message | None:
    """Turn one ``chat.completion.chunk`` into a message chunk (``None`` if it carries nothing)."""
    try:
        # The scanner alone skips JSONDecoder.decode's two whitespace matches, which cost as
        # much as the scan of a small chunk; anything it does not take whole (whitespace
        # around the value, invalid JSON) fails here and is decoded again below.
        text = payload.decode()
        data, end = _scan(text, 0)
        if end != len(text):
            raise AgentKitValueError("not one JSON value")
    except (ValueError, StopIteration):
        data = decode_json(payload, "a stream chunk", url, 200)  # raises the explanation
    if type(data) is dict:
        chunk = _common_chunk(data)
        if chunk is not _UNCOMMON:
            return chunk
    return parse_chunk_data(data, payload, url)


# A chunk delta of these fields only, with string (or null) content, is the common shape.
_COMMON_DELTA_FIELDS = frozenset({"role", "content", "tool_calls"})
_UNCOMMON: Any = object()


def _common_chunk(data: dict[str, Any]) -> Message | Any:
    """Read a chunk of the common shape, or return ``_UNCOMMON`` for the general path.

    The common shape: one choice of index 0 whose delta has a string content or tool-call
    fragments (plain dicts), no usage, no error. The result equals what
    :func:`parse_chunk_data` makes of it (``tests/test_stream_fast_path.py`` checks this).
    """
    choices = data.get("choices")
    if (
        type(choices) is not list
        or len(choices) != 1
        or data.get("usage")
        or data.get("error") is not None
        or data.get("object") == "error"
    ):
        return _UNCOMMON
    choice = choices[0]
    if type(choice) is not dict or choice.get("index", 0) != 0:
        return _UNCOMMON
    delta = choice.get("delta")
    content: Any = ""
    tool_calls: list[ToolCall] = []
    if delta:
        if type(delta) is not dict or not _COMMON_DELTA_FIELDS.issuperset(delta):
            return _UNCOMMON
        content = delta.get("content")
        if content is None:
            content = ""
        elif type(content) is not str:
            return _UNCOMMON
        calls = delta.get("tool_calls")
        if calls:
            if type(calls) is not list:
                return _UNCOMMON
            for call in calls:
                if type(call) is not dict:
                    return _UNCOMMON
                function = call.get("function") or _NO_FUNCTION
                if type(function) is not dict:
                    return _UNCOMMON
                arguments = function.get("arguments")
                if arguments is None:
                    arguments = ""
                if type(arguments) is not str or not _KNOWN_CALL_FIELDS.issuperset(call):
                    tool_calls.append(read_tool_call(call, True))
                    continue
                # What read_tool_call makes of a fragment of known fields, built directly.
                tool_calls.append(
                    _fragment(
                        call.get("id") or "",
                        _function(function.get("name") or "", arguments),
                        call.get("type") or "function",
                        call.get("index"),
                    )
                )
    finish_reason = choice.get("finish_reason") or ""
    return _chunk_message(
        content, tool_calls, ResponseMeta(finish_reason) if finish_reason else None
    )


_NO_FUNCTION: dict[str, Any] = {}  # never changed
_KNOWN_CALL_FIELDS = frozenset({"id", "type", "function", "index"})  # as read_tool_call's

_MESSAGE_SLOTS = (
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "name",
    "response_meta",
    "extra",
    "parts",
)


def _chunk_builder() -> Callable[[str, list[ToolCall], ResponseMeta | None], Message]:
    """Return a function that builds an assistant message chunk like ``Message(...)``, faster.

    ``Message``'s attrs ``__init__`` sets each field through a bound ``object.__setattr__``
    and calls the role converter; a chunk's values need no conversion, so the function sets
    the slots directly (about half the time). Should ``Message`` no longer have exactly these
    slotted fields, it is the constructor itself. (``Message``'s post-init only acts on a
    message with parts or with content that is not a ``str``, which a text chunk never is.)
    """
    slots = vars(Message)
    if (
        tuple(field.name for field in attrs.fields(Message)) != _MESSAGE_SLOTS
        or not all(type(slots.get(name)) is MemberDescriptorType for name in _MESSAGE_SLOTS)
    ):

        def construct(
            content: str, tool_calls: list[ToolCall], meta: ResponseMeta | None
        ) -> Message:
            return Message(Role.ASSISTANT, content, tool_calls, response_meta=meta)

        return construct
    role, text, calls, call_id, tool_name, name, response_meta, extra, parts = (
        slots[name].__set__ for name in _MESSAGE_SLOTS
    )
    new = object.__new__
    assistant = Role.ASSISTANT
    no_extra = _NO_EXTRA

    def build(content: str, tool_calls: list[ToolCall], meta: ResponseMeta | None) -> Message:
        message: Message = new(Message)
        role(message, assistant)
        text(message, content)
        calls(message, tuple(tool_calls))
        call_id(message, "")
        tool_name(message, "")
        name(message, "")
        response_meta(message, meta)
        extra(message, no_extra)
        parts(message, ())
        return message

    return build


_chunk_message = _chunk_builder()


def _plain_slots(cls: type, names: tuple[str, ...], converted: tuple[str, ...] = ()) -> bool:
    """Whether ``cls``'s attrs fields are exactly ``names``, plain slots with no validator or
    converter (but on the fields ``converted``, which the caller sets converted already), and
    no post-init (so setting the slots is what the constructor does)."""
    slots = vars(cls)
    fields = attrs.fields(cls)
    return (
        tuple(field.name for field in fields) == names
        and all(
            field.validator is None and (field.converter is None or field.name in converted)
            for field in fields
        )
        and "__attrs_post_init__" not in slots
        and all(type(slots.get(name)) is MemberDescriptorType for name in names)
    )


def _call_builders() -> tuple[
    Callable[[str, FunctionCall, Any, Any], ToolCall], Callable[[Any, str], FunctionCall]
]:
    """Return functions that build a tool-call fragment and its function like the constructors.

    As :func:`_chunk_builder` does for a chunk: the slots set directly, and the constructors
    themselves should the classes no longer have exactly these slotted fields.
    """
    call_names = ("id", "function", "type", "index", "extra")
    function_names = ("name", "arguments")
    if not (
        _plain_slots(ToolCall, call_names, converted=("extra",))
        and _plain_slots(FunctionCall, function_names)
    ):

        def construct(call_id: str, function: FunctionCall, kind: Any, index: Any) -> ToolCall:
            return ToolCall(call_id, function, kind, index, {})

        return construct, FunctionCall
    slots = vars(ToolCall)
    set_id, set_function, set_type, set_index, set_extra = (
        slots[name].__set__ for name in call_names
    )
    set_name, set_arguments = (vars(FunctionCall)[name].__set__ for name in function_names)
    new = object.__new__

    def fragment(call_id: str, function: FunctionCall, kind: Any, index: Any) -> ToolCall:
        call: ToolCall = new(ToolCall)
        set_id(call, call_id)
        set_function(call, function)
        set_type(call, kind)
        set_index(call, index)
        set_extra(call, _NO_EXTRA)
        return call

    def function_call(name: Any, arguments: str) -> FunctionCall:
        made: FunctionCall = new(FunctionCall)
        set_name(made, name)
        set_arguments(made, arguments)
        return made

    return fragment, function_call


_fragment, _function = _call_builders()


def parse_chunk_data(data: Any, payload: bytes, url: str) -> Message | None:
    """Turn a decoded chunk of any shape into a message chunk (``None`` if it carries nothing)."""
    try:
        if data.get("error") is not None or data.get("object") == "error":  # is_error_body
            raise stream_error(data, url)
        usage_data = data.get("usage")
        chunk_usage = usage(usage_data) if usage_data else None
        choices = data.get("choices")
        if not choices:
            if chunk_usage is None:
                return None
            return _chunk_message("", [], ResponseMeta("", chunk_usage))  # usage only
        content = ""
        finish_reason = ""
        tool_calls: list[ToolCall] = []
        extra: dict[str, Any] = {}
        parts: tuple[ContentPart, ...] = ()
        for choice in choices:
            if choice.get("index", 0) != 0:
                continue  # only the first choice (n=1) is read
            delta = choice.get("delta")
            if delta:
                content, tool_calls, extra = read_message(delta, streamed=True)
                if "audio" in delta:
                    content, parts = read_audio(delta["audio"], content, extra, streamed=True)
            finish_reason = choice.get("finish_reason") or ""
            break
    except (TypeError, AttributeError) as error:
        raise ModelError(
            f"the model server at {url} sent a stream chunk of an unexpected shape: "
            f"{payload[:200].decode('utf-8', 'replace')!r}",
            status_code=200,
            body=data,
        ) from error
    meta = ResponseMeta(finish_reason, chunk_usage) if finish_reason or chunk_usage else None
    if parts:
        return Message(Role.ASSISTANT, "", tool_calls, response_meta=meta, extra=extra, parts=parts)
    return Message(Role.ASSISTANT, content, tool_calls, response_meta=meta, extra=extra)


def parse_error_event(payload: bytes, url: str) -> ModelError:
    """Return the error for the payload of an SSE error event."""
    try:
        data: Any = _decode(payload.decode())
    except ValueError:
        data = payload.decode("utf-8", "replace")
    return stream_error(data, url)


def merge_fields(merged: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """Merge the provider fields of a stream chunk into those of the chunks before it.

    Strings are concatenated and lists extended (both arrive in pieces); other values are
    replaced. Returns a new dict.
    """
    result = dict(merged)
    for key, value in fields.items():
        previous = result.get(key)
        if isinstance(previous, str) and isinstance(value, str):
            result[key] = previous + value
        elif isinstance(previous, list) and isinstance(value, list):
            result[key] = [*previous, *value]
        else:
            result[key] = value
    return result
