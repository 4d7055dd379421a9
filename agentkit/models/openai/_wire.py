"""The Chat Completions wire format: request encoding and response decoding.

Servers that call themselves OpenAI-compatible differ in the details; the decoding accepts
all the shapes in ``tests/fixtures/wire/`` (see its ``SOURCES.md``):

* ``content`` as a string, ``null``, or a list of typed parts (Mistral's reasoning models send
  ``thinking`` parts before ``text`` parts): text parts are joined into ``content``, thinking
  goes to ``extra["reasoning_content"]``.
* ``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (Ollama, OpenRouter, newer vLLM):
  ``extra["reasoning_content"]``.
* ``refusal`` (OpenAI, Azure): ``extra["refusal"]``; it is also the message's ``content``
  when the content is empty, so a refusal never reads as an empty success.
* the legacy ``function_call`` field: a tool call.
* arguments sent as a JSON object instead of JSON text: encoded to text.
* fields this module does not interpret, on the message (OpenRouter's ``reasoning_details``)
  and on a tool call (Gemini's ``extra_content`` with its ``thought_signature``): kept in
  ``extra["provider_fields"]`` and ``ToolCall.extra`` and sent back unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentkit.errors import AgentKitValueError, ModelError
from agentkit.models.base import ModelOptions
from agentkit.schema import (
    FunctionCall,
    Message,
    ResponseMeta,
    Role,
    TokenUsage,
    ToolCall,
    ToolInfo,
)

__all__: list[str] = []

PROVIDER_FIELDS = "provider_fields"
"""The ``Message.extra`` key of the server's message fields sent back unchanged."""

_TOOL_CHOICE_KEYWORDS = frozenset({"auto", "none", "required"})
# Message fields read here; everything else is a provider field. Output-only fields of
# OpenAI's own API, which its requests do not accept back, are dropped.
_KNOWN_MESSAGE_FIELDS = frozenset(
    {"role", "content", "tool_calls", "function_call", "refusal", "reasoning_content", "reasoning"}
)
_EXTRA_FIELDS = frozenset({"function_call", "refusal", "reasoning_content", "reasoning"})
_DROPPED_FIELDS = frozenset({"annotations", "audio", "name"})
_KNOWN_CALL_FIELDS = frozenset({"id", "type", "function", "index"})

_NOT_API = (
    " (is base_url the root of an OpenAI-compatible API, such as http://localhost:11434/v1?)"
)
_encode_json = json.JSONEncoder(separators=(",", ":")).encode
_decode = json.JSONDecoder().decode


# --- request encoding ---------------------------------------------------------------------


def message_bytes(message: Message) -> bytes:
    """Return the request JSON of ``message`` (the model keeps these: ``_encoded``)."""
    data: dict[str, Any] = {"role": message.role.value}
    extra = message.extra
    if message.tool_calls:
        # OpenAI wants null, not "", as the content of a tool-calling assistant message.
        data["content"] = message.content or None
        data["tool_calls"] = [_call_dict(call) for call in message.tool_calls]
        # DeepSeek's thinking mode answers 400 unless the reasoning of a tool-calling turn
        # comes back; servers without reasoning never set it.
        reasoning = extra.get("reasoning_content") if extra else None
        if reasoning:
            data["reasoning_content"] = reasoning
    else:
        data["content"] = message.content
    if message.role is Role.TOOL:
        data["tool_call_id"] = message.tool_call_id
    if message.name:
        data["name"] = message.name
    if extra and message.role is Role.ASSISTANT:
        fields = extra.get(PROVIDER_FIELDS)
        if isinstance(fields, dict):
            for key, value in fields.items():
                data.setdefault(key, value)
    return _encode_json(data).encode()


def _call_dict(call: ToolCall) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": call.id,
        "type": call.type or "function",
        "function": {"name": call.function.name, "arguments": call.function.arguments},
    }
    if call.extra:
        for key, value in call.extra.items():
            data.setdefault(key, value)
    return data


def tools_bytes(tools: Sequence[ToolInfo]) -> bytes:
    """Return the request JSON of a tool list."""
    return _encode_json(
        [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in tools
        ]
    ).encode()


def request_fields(model: str, options: ModelOptions, stream: bool) -> dict[str, Any]:
    """Return the request fields other than ``messages`` and ``tools``."""
    fields: dict[str, Any] = {"model": options.model or model}
    if options.temperature is not None:
        fields["temperature"] = options.temperature
    if options.max_tokens is not None:
        fields["max_tokens"] = options.max_tokens
    if options.top_p is not None:
        fields["top_p"] = options.top_p
    if options.stop is not None:
        fields["stop"] = options.stop if isinstance(options.stop, str) else list(options.stop)
    choice = options.tool_choice
    if choice is not None:
        fields["tool_choice"] = (
            choice
            if choice in _TOOL_CHOICE_KEYWORDS
            else {"type": "function", "function": {"name": choice}}
        )
    if options.extra:
        if "messages" in options.extra:
            raise AgentKitValueError(
                "ModelOptions.extra may not set 'messages'; pass them to the call"
            )
        fields.update(options.extra)
    if stream:
        fields["stream"] = True
        fields.setdefault("stream_options", {"include_usage": True})
    # extra={"stream_options": None} drops the field, for servers that reject it.
    if "stream_options" in fields and fields["stream_options"] is None:
        del fields["stream_options"]
    return fields


def encode_json(value: Any) -> bytes:
    """Return compact JSON bytes of ``value``."""
    return _encode_json(value).encode()


# --- response decoding --------------------------------------------------------------------


def usage(data: Any) -> TokenUsage | None:
    """Return the token usage of a ``usage`` object, or ``None``."""
    if not isinstance(data, dict):
        return None
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return TokenUsage(
        prompt_tokens=data.get("prompt_tokens") or 0,
        completion_tokens=data.get("completion_tokens") or 0,
        total_tokens=data.get("total_tokens") or 0,
        cached_tokens=cached if isinstance(cached, int) and not isinstance(cached, bool) else 0,
    )


def _arguments(value: Any) -> str:
    # Some compatible servers send the arguments as an object instead of JSON text.
    if value is None:
        return ""
    return value if isinstance(value, str) else _encode_json(value)


def server_message(body: Any) -> str:
    """Return the error text of an error body in the OpenAI shape or a common variant."""
    if isinstance(body, list) and body:
        body = body[0]  # Gemini wraps its error object in a list
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str) and error:
            return error
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    if isinstance(body, str):
        return body.strip()[:500]
    return ""


def is_error_body(data: Any) -> bool:
    """``True`` for an error object in place of a completion or chunk."""
    return isinstance(data, dict) and (
        data.get("error") is not None or data.get("object") == "error"
    )


def decode_json(content: bytes, what: str, url: str, status: int) -> Any:
    """Decode JSON bytes, raising a :class:`ModelError` that shows them when they are not."""
    try:
        # Decoding the UTF-8 first is faster than json.loads(bytes), which sniffs the encoding.
        return _decode(content.decode())
    except ValueError as error:  # UnicodeDecodeError included
        text = content[:200].decode("utf-8", "replace")
        raise ModelError(
            f"the model server at {url} sent {what} that is not valid JSON: {text!r}{_NOT_API}",
            status_code=status,
            body=content.decode("utf-8", "replace"),
        ) from error


def _text_of(parts: Any, reasoning: list[str]) -> str:
    """Join the text of a content value; thinking parts go to ``reasoning``."""
    if parts is None:
        return ""
    if isinstance(parts, str):
        return parts
    if isinstance(parts, dict):
        parts = [parts]
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("thinking", "reasoning"):
            inner = part.get(kind)
            if inner is None:
                inner = part.get("text")
            reasoning.append(_text_of(inner, reasoning))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "".join(texts)


def read_tool_call(call: dict[str, Any], streamed: bool) -> ToolCall:
    """Return the tool call of a ``tool_calls`` item (a fragment of one when ``streamed``)."""
    function = call.get("function") or {}
    extra: dict[str, Any] = {}
    if not _KNOWN_CALL_FIELDS.issuperset(call):
        extra = {
            key: value
            for key, value in call.items()
            if key not in _KNOWN_CALL_FIELDS and value is not None
        }
    return ToolCall(
        call.get("id") or "",
        FunctionCall(function.get("name") or "", _arguments(function.get("arguments"))),
        call.get("type") or "function",
        call.get("index") if streamed else None,
        extra,
    )


def read_message(
    data: dict[str, Any], streamed: bool
) -> tuple[str, list[ToolCall], dict[str, Any]]:
    """Return the content, tool calls and extras of a ``message`` or a ``delta``."""
    extra: dict[str, Any] = {}
    content = data.get("content")
    if type(content) is not str:
        reasoning: list[str] = []
        content = _text_of(content, reasoning)
        if reasoning:
            extra["reasoning_content"] = "".join(reasoning)
    calls = data.get("tool_calls")
    tool_calls = [read_tool_call(call, streamed) for call in calls] if calls else []
    if _KNOWN_MESSAGE_FIELDS.issuperset(data):
        if not _EXTRA_FIELDS.isdisjoint(data):
            content = _read_extras(data, content, tool_calls, extra, streamed)
        return content, tool_calls, extra
    content = _read_extras(data, content, tool_calls, extra, streamed)
    fields = {
        key: value
        for key, value in data.items()
        if key not in _KNOWN_MESSAGE_FIELDS and key not in _DROPPED_FIELDS and value is not None
    }
    if fields:
        extra[PROVIDER_FIELDS] = fields
    return content, tool_calls, extra


def _read_extras(
    data: dict[str, Any],
    content: str,
    tool_calls: list[ToolCall],
    extra: dict[str, Any],
    streamed: bool,
) -> str:
    """Read the less common fields into ``tool_calls`` and ``extra``; return the content."""
    reasoning = data.get("reasoning_content") or data.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        extra["reasoning_content"] = extra.get("reasoning_content", "") + reasoning
    refusal = data.get("refusal")
    if isinstance(refusal, str) and refusal:
        extra["refusal"] = refusal
        if not content:
            content = refusal  # a refusal must not read as an empty answer
    function_call = data.get("function_call")
    # Some servers (llama-cpp-python) send the same call in both fields: tool_calls wins.
    if isinstance(function_call, dict) and not tool_calls:
        # The legacy single-function field: a tool call (index 0 merges streamed fragments).
        name = function_call.get("name") or ""
        tool_calls.append(
            ToolCall(
                "call_legacy_function" if name else "",
                FunctionCall(name, _arguments(function_call.get("arguments"))),
                "function",
                0 if streamed else None,
            )
        )
    return content


def parse_completion(content: bytes, url: str, status: int) -> Message:
    """Return the reply of a whole (non-streamed) completion."""
    data = decode_json(content, "a response", url, status)
    if is_error_body(data):
        raise ModelError(
            f"the model server at {url} answered with an error: {server_message(data)}",
            status_code=status,
            body=data,
        )
    try:
        choice = data["choices"][0]
        text, tool_calls, extra = read_message(choice["message"], streamed=False)
        return Message(
            Role.ASSISTANT,
            text,
            tool_calls,
            response_meta=ResponseMeta(choice.get("finish_reason") or "", usage(data.get("usage"))),
            extra=extra,
        )
    except (KeyError, IndexError, TypeError, AttributeError) as error:
        raise ModelError(
            f"the model server at {url} sent a response without choices[0].message "
            f"({type(error).__name__}: {error}){_NOT_API}",
            status_code=status,
            body=data,
        ) from error


def stream_error(data: Any, url: str) -> ModelError:
    """Return the error for an error object or event inside a stream."""
    return ModelError(
        f"the model server at {url} sent an error in the stream: "
        f"{server_message(data) or 'no error message'}",
        status_code=200,
        body=data,
    )
