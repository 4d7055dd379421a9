"""The Anthropic Messages API wire format: request encoding and response decoding.

Requests (``POST {base_url}/v1/messages``):

* system messages become the top-level ``system`` blocks (wherever they stand in the
  history), user messages ``text`` blocks (a message with parts: ``text``, ``image`` and
  ``document`` blocks, see :func:`content_blocks`), tool messages ``tool_result`` blocks
  (whose content holds a result's images and documents) in a user
  turn (consecutive user-side messages make one turn, as the API requires alternation),
  assistant messages their kept ``thinking`` blocks, a ``text`` block and ``tool_use`` blocks;
* prompt caching puts ``cache_control`` breakpoints on the last system block, the last tool
  and the last block of the history, so each call reads the prefix the previous one wrote;
* ``ModelOptions.tool_choice`` maps to ``auto`` / ``any`` / ``none`` / ``tool``, ``stop`` to
  ``stop_sequences``, and a ``response_format`` of type ``json_schema`` in
  ``ModelOptions.extra`` (what structured output sends) to ``output_config.format``.

Replies: ``text`` blocks join into ``content``; ``tool_use`` blocks become tool calls (their
``input`` as JSON text); ``thinking`` and ``redacted_thinking`` blocks are kept, signature and
all, in ``Message.extra["thinking_blocks"]`` (their text also in
``extra["reasoning_content"]``) and sent back first in the assistant turn, as Anthropic
requires on the next tool-use turn. ``stop_reason`` maps to the OpenAI-style finish reasons
(``end_turn``/``stop_sequence`` to ``stop``, ``max_tokens`` to ``length``, ``tool_use`` to
``tool_calls``, ``refusal`` to ``content_filter`` with ``extra["refusal"]``, which is also the
content when the reply has none); others pass through. Usage: ``prompt_tokens`` is
``input_tokens`` plus the cache reads and writes (``cached_tokens``, ``cache_write_tokens``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from agentkit.errors import AgentKitValueError, ContentPartError, ModelError
from agentkit.models._base import ModelOptions
from agentkit.models._http._json import count, encode_json
from agentkit.models._http._json import decode_json as _decode_json
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

THINKING_BLOCKS = "thinking_blocks"
"""The ``Message.extra`` key of an assistant message's thinking blocks, sent back as they are."""

STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
"""Anthropic's ``stop_reason`` values and the finish reasons they become."""

REFUSED = "the model declined to answer (Anthropic stop_reason 'refusal')"
"""The content of a refusal that came without text."""

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image types the Messages API takes."""

_CACHE = b',"cache_control":{"type":"ephemeral"}}'
_TOOL_CHOICES = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}
_decode = json.JSONDecoder().decode


# --- request encoding ---------------------------------------------------------------------


def content_blocks(message: Message) -> list[dict[str, Any]]:
    """Return the blocks a message's content becomes.

    A plain-text message is one ``text`` block. A message with parts has one block per part:
    ``text``; ``image`` with a ``base64`` or ``url`` source; ``document`` for a PDF (a
    ``base64`` or ``url`` source) or a text file (a ``text`` source), titled with the file's
    name. A tool message's blocks are the ``content`` of its ``tool_result``, which holds
    images and documents as they are.

    Raises:
        ContentPartError: an :class:`~agentkit.AudioPart` (Anthropic takes no audio), an
            image's bytes of a type other than :data:`IMAGE_TYPES`, or a file that is neither
            a PDF nor text.
    """
    if not message.parts:
        return [{"type": "text", "text": message.content}] if message.content else []
    return [block for part in message.parts if (block := _part_block(part)) is not None]


def _part_block(part: ContentPart) -> dict[str, Any] | None:
    if type(part) is TextPart:
        # The API refuses an empty text block.
        return {"type": "text", "text": part.text} if part.text else None
    if type(part) is ImagePart:
        if part.data is not None and part.media_type not in IMAGE_TYPES:
            raise ContentPartError(
                f"{describe_part(part)}: AnthropicChatModel sends JPEG, PNG, GIF and WebP "
                f"images, not {part.media_type}; convert the image first"
            )
        return {"type": "image", "source": _source(part.data, part.url, part.media_type)}
    if type(part) is FilePart:
        return _document(part)
    assert type(part) is AudioPart
    raise ContentPartError(
        f"{describe_part(part)}: AnthropicChatModel cannot send audio (Anthropic's Messages "
        "API takes text, images and PDF or text documents); transcribe the sound first, or "
        "send it to a model that hears (GeminiChatModel, or OpenAIChatModel with an audio "
        "model)"
    )


def _source(data: bytes | None, url: str | None, media_type: str | None) -> dict[str, Any]:
    if data is None:
        return {"type": "url", "url": url}
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "base64", "media_type": media_type, "data": encoded}


def _document(part: FilePart) -> dict[str, Any]:
    media_type = part.media_type or ""
    if part.data is not None and media_type.startswith("text/"):
        try:
            text = part.data.decode("utf-8")
        except UnicodeDecodeError:
            raise ContentPartError(
                f"{describe_part(part)}: a text document for Anthropic must be UTF-8; decode "
                "it and pass the text as a TextPart"
            ) from None
        source: dict[str, Any] = {"type": "text", "media_type": "text/plain", "data": text}
    elif part.url is not None or media_type == "application/pdf":
        source = _source(part.data, part.url, media_type)
    else:
        raise ContentPartError(
            f"{describe_part(part)}: AnthropicChatModel sends PDFs and text files as "
            f"documents, not {media_type or 'files of unknown type'}; convert it to PDF or "
            "text first"
        )
    block: dict[str, Any] = {"type": "document", "source": source}
    if part.filename:
        block["title"] = part.filename
    return block


def tool_input(arguments: str) -> Any:
    """The ``input`` object of a tool call's JSON arguments.

    Arguments that are not a JSON object (a model's invalid JSON, healed by the tool layer,
    which told the model so) are sent back as ``{}``: the API accepts only an object.
    """
    if not arguments:
        return {}
    try:
        value = _decode(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def message_blocks(message: Message) -> bytes:
    """Return the content blocks of a non-system message as JSON, comma-separated, no brackets.

    The model keeps these bytes (``_http._encoded``) and joins them into turns.
    """
    role = message.role
    if role is Role.TOOL:
        blocks: list[dict[str, Any]] = [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": content_blocks(message) or message.content,
            }
        ]
    elif role is Role.ASSISTANT:
        blocks = []
        kept = message.extra.get(THINKING_BLOCKS) if message.extra else None
        if isinstance(kept, list):
            blocks.extend(block for block in kept if isinstance(block, dict))
        # An assistant turn is text (an audio reply from another provider: its transcript).
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        blocks.extend(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.function.name,
                "input": tool_input(call.function.arguments),
            }
            for call in message.tool_calls
        )
    else:
        blocks = content_blocks(message)
    if not blocks:
        blocks = [{"type": "text", "text": message.content}]
    return encode_json(blocks)[1:-1]


def with_cache_control(blocks: bytes) -> bytes:
    """``blocks`` (as :func:`message_blocks` returns them) with a breakpoint on the last one."""
    return blocks[:-1] + _CACHE


def system_json(messages: Sequence[Message], caching: bool) -> bytes:
    """Return the ``system`` blocks of the system messages (``b""`` when there are none)."""
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": m.content} for m in messages if m.role is Role.SYSTEM and m.content
    ]
    if not blocks:
        return b""
    if caching:
        blocks[-1]["cache_control"] = {"type": "ephemeral"}
    return encode_json(blocks)


def tools_json(tools: Sequence[ToolInfo], caching: bool) -> bytes:
    """Return the ``tools`` list, the last tool a cache breakpoint when ``caching``."""
    listed: list[dict[str, Any]] = [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.parameters or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]
    if caching and listed:
        listed[-1]["cache_control"] = {"type": "ephemeral"}
    return encode_json(listed)


def request_fields(
    model: str, options: ModelOptions, max_tokens: int, thinking: int | None, stream: bool
) -> dict[str, Any]:
    """Return the request fields other than ``system``, ``tools`` and ``messages``."""
    fields: dict[str, Any] = {
        "model": options.model or model,
        "max_tokens": options.max_tokens if options.max_tokens is not None else max_tokens,
    }
    if thinking is not None:
        fields["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    if options.temperature is not None:
        fields["temperature"] = options.temperature
    if options.top_p is not None:
        fields["top_p"] = options.top_p
    if options.stop is not None:
        fields["stop_sequences"] = (
            [options.stop] if isinstance(options.stop, str) else list(options.stop)
        )
    choice = options.tool_choice
    if choice is not None:
        fields["tool_choice"] = _TOOL_CHOICES.get(choice) or {"type": "tool", "name": choice}
    if options.extra:
        extra = dict(options.extra)
        for key in ("messages", "system"):
            if key in extra:
                raise AgentKitValueError(
                    f"ModelOptions.extra may not set {key!r}; pass the messages to the call"
                )
        response_format = extra.pop("response_format", None)
        if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
            schema = (response_format.get("json_schema") or {}).get("schema")
            if isinstance(schema, dict):
                config = dict(extra.pop("output_config", None) or {})
                config["format"] = {"type": "json_schema", "schema": schema}
                fields["output_config"] = config
        fields.update(extra)
    if stream:
        fields["stream"] = True
    return fields


# --- response decoding --------------------------------------------------------------------


def usage(data: Any) -> TokenUsage | None:
    """Return the token usage of an Anthropic ``usage`` object (``None`` if there is none)."""
    if not isinstance(data, dict):
        return None
    read = count(data, "cache_read_input_tokens")
    written = count(data, "cache_creation_input_tokens")
    prompt = count(data, "input_tokens") + read + written
    completion = count(data, "output_tokens")
    return TokenUsage(prompt, completion, prompt + completion, read, written)


def finish(stop_reason: Any, content: str, extra: dict[str, Any]) -> tuple[str, str]:
    """Return the finish reason of ``stop_reason`` and the content (a refusal is never empty)."""
    reason = stop_reason if isinstance(stop_reason, str) else ""
    if reason == "refusal":
        extra["refusal"] = content or REFUSED
        content = content or REFUSED
    return STOP_REASONS.get(reason, reason), content


def thinking_text(blocks: list[dict[str, Any]]) -> str:
    """The text of the thinking blocks (redacted ones have none)."""
    return "".join(
        block.get("thinking") or "" for block in blocks if block.get("type") == "thinking"
    )


def decode_json(content: bytes, what: str, url: str, status: int) -> Any:
    """Decode JSON bytes, raising a :class:`ModelError` that shows them when they are not."""
    return _decode_json(
        content, what, url, status, "the Anthropic API", "https://api.anthropic.com"
    )


def error_in(data: Any, url: str, status: int, where: str = "") -> ModelError:
    """Return the error for an Anthropic ``{"type": "error", ...}`` object."""
    return ModelError(
        f"the Anthropic API at {url} sent an error{where}: "
        f"{server_message(data) or 'no error message'}",
        status_code=status,
        body=data,
    )


def parse_message(content: bytes, url: str, status: int) -> Message:
    """Return the reply of a whole (non-streamed) ``message`` response."""
    data = decode_json(content, "a response", url, status)
    if not isinstance(data, dict) or data.get("type") == "error":
        raise error_in(data, url, status)
    blocks = data.get("content")
    if not isinstance(blocks, list):
        raise ModelError(
            f"the Anthropic API at {url} sent a response without a content list "
            f"(got keys {sorted(data)})",
            status_code=status,
            body=data,
        )
    texts: list[str] = []
    calls: list[ToolCall] = []
    thinking: list[dict[str, Any]] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind == "tool_use":
            arguments = encode_json(block.get("input") or {}).decode()
            calls.append(
                ToolCall(block.get("id") or "", FunctionCall(block.get("name") or "", arguments))
            )
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append(block)
    extra: dict[str, Any] = {}
    if thinking:
        extra[THINKING_BLOCKS] = thinking
        text = thinking_text(thinking)
        if text:
            extra["reasoning_content"] = text
    reason, text = finish(data.get("stop_reason"), "".join(texts), extra)
    return Message(
        Role.ASSISTANT,
        text,
        calls,
        response_meta=ResponseMeta(reason, usage(data.get("usage"))),
        extra=extra,
    )
