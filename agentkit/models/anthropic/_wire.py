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
* deferred tools (``ToolInfo.deferred``) carry ``"defer_loading": true``, and the tool search
  server tool (``tool_search_tool_regex_20251119`` or ``tool_search_tool_bm25_20251119``)
  comes last in ``tools``;
* ``ModelOptions.tool_choice`` maps to ``auto`` / ``any`` / ``none`` / ``tool``, ``stop`` to
  ``stop_sequences``, and a ``response_format`` of type ``json_schema`` in
  ``ModelOptions.extra`` (what structured output sends) to ``output_config.format``.

Replies: ``text`` blocks join into ``content``; ``tool_use`` blocks become tool calls (their
``input`` as JSON text); ``thinking`` and ``redacted_thinking`` blocks are kept, signature and
all, in ``Message.extra["thinking_blocks"]`` (their text also in
``extra["reasoning_content"]``) and sent back first in the assistant turn, as Anthropic
requires on the next tool-use turn; so are the blocks of the tools Anthropic runs itself
(``server_tool_use`` and ``tool_search_tool_result``, in
``Message.extra["server_tool_blocks"]``), which are no tool calls for the agent to run. A
reply whose blocks come in another order (a text before a tool search and another after it)
keeps it in ``Message.extra["block_order"]``, and the turn goes back in that order.
``stop_reason`` maps to the OpenAI-style finish reasons
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

SERVER_TOOL_BLOCKS = "server_tool_blocks"
"""The ``Message.extra`` key of the blocks of the tools Anthropic ran itself (its tool search's
``server_tool_use`` and ``tool_search_tool_result``), sent back as they are."""

BLOCK_ORDER = "block_order"
"""The ``Message.extra`` key of the order of a reply's blocks, kept when it is not the order
:func:`message_blocks` sends otherwise (thinking, server tool blocks, text, tool calls), as
when a text comes before a tool search and another after it: a list whose items are
``"thinking"``, ``"server"`` and ``"tool_use"`` (the next block of ``thinking_blocks``,
``server_tool_blocks``, the tool calls) and ints (a text block of that many characters of the
content). The API wants the turn back as it came."""

_RANKS = {"thinking": 0, "server": 1, "tool_use": 3}

TOOL_SEARCH_TOOLS = {
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
}
"""The server tool sent with deferred tools, by the ``tool_search`` variant that names it."""

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
        blocks = assistant_blocks(message)
    else:
        blocks = content_blocks(message)
    if not blocks:
        blocks = [{"type": "text", "text": message.content}]
    return encode_json(blocks)[1:-1]


def assistant_blocks(message: Message) -> list[dict[str, Any]]:
    """The blocks of an assistant turn, in the order the reply had them (:data:`BLOCK_ORDER`)
    when the message still matches it, else thinking, server tool blocks, text, tool calls.

    An assistant turn is text (an audio reply from another provider: its transcript).
    """
    kinds: dict[str, list[dict[str, Any]]] = {
        "thinking": kept_blocks(message, THINKING_BLOCKS),
        "server": kept_blocks(message, SERVER_TOOL_BLOCKS),
        "tool_use": [
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.function.name,
                "input": tool_input(call.function.arguments),
            }
            for call in message.tool_calls
        ],
    }
    order = order_of(message)
    blocks: list[dict[str, Any]] = []
    taken = {kind: 0 for kind in kinds}
    text = message.content
    start = 0
    for item in order:
        if isinstance(item, int):
            blocks.append({"type": "text", "text": text[start : start + item]})
            start += item
        else:
            blocks.append(kinds[item][taken[item]])
            taken[item] += 1
    return blocks


def kept_blocks(message: Message, key: str) -> list[dict[str, Any]]:
    """The blocks kept in ``message.extra[key]`` (thinking or server tool blocks)."""
    kept = message.extra.get(key) if message.extra else None
    if not isinstance(kept, list):
        return []
    return [block for block in kept if isinstance(block, dict)]


def order_of(message: Message) -> list[str | int]:
    """The order of an assistant message's blocks (see :data:`BLOCK_ORDER`): the one kept,
    when the message still has those blocks (a message changed since, by a middleware say,
    does not), else thinking, server tool blocks, text, tool calls."""
    counts = {
        "thinking": len(kept_blocks(message, THINKING_BLOCKS)),
        "server": len(kept_blocks(message, SERVER_TOOL_BLOCKS)),
        "tool_use": len(message.tool_calls),
    }
    kept = message.extra.get(BLOCK_ORDER) if message.extra else None
    if (
        isinstance(kept, list)
        and all((type(item) is int and item > 0) or item in _RANKS for item in kept)
        and sum(item for item in kept if type(item) is int) == len(message.content)
        and all(kept.count(kind) == count for kind, count in counts.items())
    ):
        return list(kept)
    text: list[str | int] = [len(message.content)] if message.content else []
    return [
        *["thinking"] * counts["thinking"],
        *["server"] * counts["server"],
        *text,
        *["tool_use"] * counts["tool_use"],
    ]


def unusual_order(order: list[str | int]) -> list[str | int] | None:
    """``order`` with adjacent texts joined and empty ones left out, or ``None`` when it is
    the order :func:`message_blocks` sends anyway (nothing to keep)."""
    joined: list[str | int] = []
    for item in order:
        last = joined[-1] if joined else None
        if isinstance(item, int) and isinstance(last, int):
            joined[-1] = last + item
        elif item != 0:
            joined.append(item)
    ranks = [2 if isinstance(item, int) else _RANKS[item] for item in joined]
    return None if ranks == sorted(ranks) else joined


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


def tools_json(tools: Sequence[ToolInfo], caching: bool, search: str = "regex") -> bytes:
    """Return the ``tools`` list, the last tool a cache breakpoint when ``caching``.

    Deferred tools (:attr:`ToolInfo.deferred`) carry ``"defer_loading": true`` and bring
    the tool search server tool of the ``search`` variant (a key of :data:`TOOL_SEARCH_TOOLS`)
    at the end of the list, where the breakpoint goes: a deferred tool is not part of the
    prompt until the search loads it, so it is no place for one.
    """
    listed: list[dict[str, Any]] = []
    for tool in tools:
        entry: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.parameters or {"type": "object", "properties": {}},
        }
        if tool.deferred:
            entry["defer_loading"] = True
        listed.append(entry)
    if any(tool.deferred for tool in tools):
        listed.append(dict(TOOL_SEARCH_TOOLS[search]))
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


def is_server_tool_block(kind: Any) -> bool:
    """Whether a block of type ``kind`` records a tool Anthropic ran itself.

    ``server_tool_use`` (the call: its search query) and the ``..._tool_result`` blocks of
    server tools, such as ``tool_search_tool_result`` with its ``tool_reference`` entries.
    They are no tool calls for the agent to run; the API wants them back in the assistant
    turn.
    """
    return kind == "server_tool_use" or (
        isinstance(kind, str) and kind.endswith("_tool_result") and kind != "tool_result"
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
    served: list[dict[str, Any]] = []
    order: list[str | int] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
            order.append(len(texts[-1]))
        elif kind == "tool_use":
            arguments = encode_json(block.get("input") or {}).decode()
            calls.append(
                ToolCall(block.get("id") or "", FunctionCall(block.get("name") or "", arguments))
            )
            order.append("tool_use")
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append(block)
            order.append("thinking")
        elif is_server_tool_block(kind):
            served.append(block)
            order.append("server")
    extra: dict[str, Any] = {}
    kept_order = unusual_order(order)
    if kept_order is not None:
        extra[BLOCK_ORDER] = kept_order
    if thinking:
        extra[THINKING_BLOCKS] = thinking
        text = thinking_text(thinking)
        if text:
            extra["reasoning_content"] = text
    if served:
        extra[SERVER_TOOL_BLOCKS] = served
    reason, text = finish(data.get("stop_reason"), "".join(texts), extra)
    return Message(
        Role.ASSISTANT,
        text,
        calls,
        response_meta=ResponseMeta(reason, usage(data.get("usage"))),
        extra=extra,
    )
