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
* an ``audio`` reply (a model asked for ``modalities: ["text", "audio"]``): its transcript is
  a :class:`~agentkit.TextPart` and its sound an :class:`~agentkit.AudioPart` of the
  message's parts (streamed: pieces of ``audio/pcm``, joined by ``concat_messages``), its id
  in ``extra["audio_id"]``, sent back as ``"audio": {"id": ...}`` on the next request.
* fields this module does not interpret, on the message (OpenRouter's ``reasoning_details``)
  and on a tool call (Gemini's ``extra_content`` with its ``thought_signature``): kept in
  ``extra["provider_fields"]`` and ``ToolCall.extra`` and sent back unchanged.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from agentkit._media import sniff
from agentkit.errors import AgentKitValueError, ContentPartError, ModelError
from agentkit.models._base import ModelOptions
from agentkit.models._http._retry import server_message
from agentkit.schema import (
    AudioPart,
    ContentPart,
    FilePart,
    FunctionCall,
    ImagePart,
    Message,
    ResponseMeta,
    Role,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolInfo,
    describe_part,
)

__all__: list[str] = []

PROVIDER_FIELDS = "provider_fields"
"""The ``Message.extra`` key of the server's message fields sent back unchanged."""

AUDIO_ID = "audio_id"
"""The ``Message.extra`` key of the id of an audio reply (sent back to refer to it)."""

_TOOL_CHOICE_KEYWORDS = frozenset({"auto", "none", "required"})
# Message fields read here; everything else is a provider field. Output-only fields of
# OpenAI's own API, which its requests do not accept back, are dropped.
_KNOWN_MESSAGE_FIELDS = frozenset(
    {"role", "content", "tool_calls", "function_call", "refusal", "reasoning_content", "reasoning"}
)
_EXTRA_FIELDS = frozenset({"function_call", "refusal", "reasoning_content", "reasoning"})
_DROPPED_FIELDS = frozenset({"annotations", "audio", "name"})
_KNOWN_CALL_FIELDS = frozenset({"id", "type", "function", "index"})

_NOT_API = " (is base_url the root of an OpenAI-compatible API, such as http://localhost:11434/v1?)"
_encode_json = json.JSONEncoder(separators=(",", ":")).encode
_decode = json.JSONDecoder().decode


# --- request encoding ---------------------------------------------------------------------


def message_bytes(message: Message) -> bytes:
    """Return the request JSON of ``message`` (the model keeps these: ``_encoded``)."""
    data: dict[str, Any] = {"role": message.role.value}
    extra = message.extra
    if message.parts and message.role is Role.USER:
        data["content"] = [content_part(part) for part in message.parts]
    elif message.parts and message.role is Role.TOOL:
        data["content"] = tool_content(message)
    elif message.tool_calls:
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
        audio_id = extra.get(AUDIO_ID)
        if isinstance(audio_id, str) and audio_id:
            data["audio"] = {"id": audio_id}
            data["content"] = data["content"] or None
        fields = extra.get(PROVIDER_FIELDS)
        if isinstance(fields, dict):
            for key, value in fields.items():
                data.setdefault(key, value)
    return _encode_json(data).encode()


def _data_url(media_type: str | None, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def content_part(part: ContentPart) -> dict[str, Any]:
    """The Chat Completions content part of ``part`` (``text``, ``image_url``,
    ``input_audio`` or ``file``).

    Raises:
        ContentPartError: a :class:`~agentkit.FilePart` given by URL (Chat Completions takes
            a file's bytes or an uploaded file's id, not a URL).
    """
    if type(part) is TextPart:
        return {"type": "text", "text": part.text}
    if type(part) is ImagePart:
        url = part.url if part.data is None else _data_url(part.media_type, part.data)
        image: dict[str, Any] = {"url": url}
        if part.detail is not None:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    if type(part) is AudioPart:
        subtype = part.media_type.split("/", 1)[-1]
        audio_format = {"mpeg": "mp3", "x-wav": "wav", "wave": "wav"}.get(subtype, subtype)
        data = base64.b64encode(part.data).decode("ascii")
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    assert type(part) is FilePart
    if part.data is None:
        raise ContentPartError(
            f"FilePart(url={part.url!r}): the Chat Completions API takes a file's bytes, not "
            "a URL; pass FilePart(data) with the file's bytes"
        )
    file: dict[str, Any] = {"file_data": _data_url(part.media_type, part.data)}
    if part.filename is not None:
        file["filename"] = part.filename
    return {"type": "file", "file": file}


def media_parts(message: Message) -> list[ContentPart]:
    """The parts of a tool message that a Chat Completions tool message cannot carry."""
    return [part for part in message.parts if type(part) is not TextPart]


def tool_content(message: Message) -> str:
    """The text of a tool message whose result has media: its text, then where the media is.

    A Chat Completions tool message carries text only; the media follow in a user message
    after the tool messages of the turn (:func:`attachments_bytes`), as the note says.
    """
    media = media_parts(message)
    if not media:
        return message.content
    listed = ", ".join(describe_part(part) for part in media)
    note = (
        f"[The result includes {len(media)} attachment{'s' if len(media) > 1 else ''} "
        f"({listed}); see the next user message, 'Attachments of tool call "
        f"{message.tool_call_id}'.]"
    )
    return f"{message.content}\n{note}" if message.content else note


def attachment_items(message: Message) -> bytes:
    """The content items (JSON, comma-separated, no brackets) that carry a tool message's
    media in the user message after its turn: a line naming the call, then the media
    (``b""`` for a tool message without media)."""
    media = media_parts(message)
    if not media:
        return b""
    name = f" ({message.tool_name})" if message.tool_name else ""
    header = {"type": "text", "text": f"Attachments of tool call {message.tool_call_id}{name}:"}
    return _encode_json([header, *(content_part(part) for part in media)]).encode()[1:-1]


def attachments_bytes(items: Sequence[bytes]) -> bytes:
    """The request JSON of the user message made of ``attachment_items`` (empty ones
    skipped)."""
    return b'{"role":"user","content":[' + b",".join(item for item in items if item) + b"]}"


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


def read_audio(
    audio: Any, content: str, extra: dict[str, Any], streamed: bool
) -> tuple[str, tuple[ContentPart, ...]]:
    """The content and parts of a message with an ``audio`` reply (or a piece of one).

    The transcript is the text (after any ``content``), the sound an
    :class:`~agentkit.AudioPart`: its format read from its bytes (a streamed piece is raw
    ``audio/pcm``, the format OpenAI streams); the reply's id goes to ``extra["audio_id"]``.
    """
    if not isinstance(audio, dict):
        return content, ()
    audio_id = audio.get("id")
    if isinstance(audio_id, str) and audio_id:
        extra[AUDIO_ID] = audio_id
    text = content + (audio.get("transcript") or "") if not content or streamed else content
    parts: list[ContentPart] = [TextPart(text)] if text else []
    encoded = audio.get("data")
    if isinstance(encoded, str) and encoded:
        try:
            sound = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as error:
            raise ModelError(f"the model server sent audio that is not base64 ({error})") from None
        media_type = "audio/pcm" if streamed else (sniff(sound) or "audio/pcm")
        parts.append(AudioPart(sound, media_type=media_type))
    return text, tuple(parts)


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
        reply = choice["message"]
        text, tool_calls, extra = read_message(reply, streamed=False)
        parts: tuple[ContentPart, ...] = ()
        if reply.get("audio"):
            text, parts = read_audio(reply["audio"], text, extra, streamed=False)
        return Message(
            Role.ASSISTANT,
            "" if parts else text,
            tool_calls,
            response_meta=ResponseMeta(choice.get("finish_reason") or "", usage(data.get("usage"))),
            extra=extra,
            parts=parts,
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
