"""The OpenAI Responses API wire format (``POST {base_url}/responses``).

Requests: messages become input items: system, user and assistant text as ``message`` items
(a message with parts: content items, see :func:`content_value`), a tool call as a
``function_call`` item and a tool result as a ``function_call_output`` item (a result with
images or files: an ``output`` list of content items; its sounds, which an output cannot
hold, in a user message after the turn).
The reasoning items of a reply (kept in ``Message.extra["reasoning_items"]``, with their
``encrypted_content``) go back before the assistant's items, so a stateless conversation
(``store: false``, the default, asking for ``include: ["reasoning.encrypted_content"]``)
keeps the model's reasoning across tool-use turns; so do the items of OpenAI's hosted tool
search (``tool_search_call`` and ``tool_search_output``, kept in
``Message.extra["server_tool_items"]``; they are no tool calls for the agent to run). Tools
are flat ``function`` tools (deferred ones with ``"defer_loading": true``, and then the
hosted ``{"type": "tool_search"}`` tool);
``ModelOptions.tool_choice`` is ``auto`` / ``required`` / ``none`` / ``{"type": "function",
"name": ...}``; ``max_tokens`` is ``max_output_tokens``; a ``response_format`` of type
``json_schema`` (structured output) is ``text.format``.

Replies: ``output_text`` parts join into ``content``; ``function_call`` items become tool
calls (``call_id`` is the id); a ``refusal`` part is ``extra["refusal"]`` and the content when
there is none; reasoning summaries are ``extra["reasoning_content"]``; the response's id is
``extra["response_id"]``. ``status`` ``completed`` is ``"stop"`` (``"tool_calls"`` with
calls), ``incomplete`` for ``max_output_tokens`` is ``"length"``, for ``content_filter``
``"content_filter"``; ``failed`` raises :class:`~agentkit.errors.ModelError`. Usage:
``input_tokens`` (``input_tokens_details.cached_tokens`` are the cached part),
``output_tokens``.
"""

from __future__ import annotations

import base64
import mimetypes
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

REASONING_ITEMS = "reasoning_items"
"""The ``Message.extra`` key of a reply's reasoning items, sent back with the next request."""
RESPONSE_ID = "response_id"
"""The ``Message.extra`` key of the id of the response a reply came in."""
SERVER_TOOL_ITEMS = "server_tool_items"
"""The ``Message.extra`` key of the items of a search OpenAI ran itself (``tool_search_call``
and ``tool_search_output``), sent back with the next request."""
SERVER_TOOL_KINDS = frozenset({"tool_search_call", "tool_search_output"})
"""The output item types kept in :data:`SERVER_TOOL_ITEMS`."""

_KEYWORDS = frozenset({"auto", "required", "none"})


# --- request encoding ---------------------------------------------------------------------


def content_value(message: Message) -> Any:
    """The ``content`` of a message item: the text of a plain-text message; for a message
    with parts, a list of ``input_text``, ``input_image`` (``image_url``: a data URL or the
    URL; ``detail``, ``"auto"`` when not given), ``input_file`` (``file_data``: a data URL,
    with a ``filename``; or ``file_url``) and ``input_audio`` (WAV or MP3) items.

    Raises:
        ContentPartError: a sound that is neither WAV nor MP3 (the formats the API takes).
    """
    if not message.parts:
        return message.content
    return [item for part in message.parts if (item := content_item(part)) is not None]


def content_item(part: ContentPart) -> dict[str, Any] | None:
    """The input content item of ``part`` (``None`` for empty text)."""
    if type(part) is TextPart:
        return {"type": "input_text", "text": part.text} if part.text else None
    if type(part) is ImagePart:
        url = part.url if part.data is None else _data_url(part.media_type, part.data)
        return {"type": "input_image", "image_url": url, "detail": part.detail or "auto"}
    if type(part) is FilePart:
        if part.data is None:
            item: dict[str, Any] = {"type": "input_file", "file_url": part.url}
            if part.filename:
                item["filename"] = part.filename
            return item
        # The API refuses file_data without a filename.
        return {
            "type": "input_file",
            "file_data": _data_url(part.media_type, part.data),
            "filename": part.filename or _default_filename(part.media_type),
        }
    assert type(part) is AudioPart
    audio_format = _AUDIO_FORMATS.get(part.media_type)
    if audio_format is None:
        raise ContentPartError(
            f"{describe_part(part)}: OpenAIResponsesModel sends sounds as WAV or MP3 only "
            "(the Responses API's input_audio formats); convert it first"
        )
    encoded = base64.b64encode(part.data).decode("ascii")
    return {"type": "input_audio", "input_audio": {"data": encoded, "format": audio_format}}


_AUDIO_FORMATS = {"audio/wav": "wav", "audio/mpeg": "mp3"}


def _data_url(media_type: str | None, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def _default_filename(media_type: str | None) -> str:
    extension = mimetypes.guess_extension(media_type or "") or ""
    return f"file{extension}"


def _tool_output(message: Message) -> Any:
    """The ``output`` of a ``function_call_output``: the text, or (a result with media) its
    ``input_text``, ``input_image`` and ``input_file`` items; sounds, which an output cannot
    hold, are named in a note and follow in a user message (:func:`attachment_items`)."""
    if not message.parts or all(type(part) is TextPart for part in message.parts):
        return message.content
    items = [
        item
        for part in message.parts
        if type(part) is not AudioPart and (item := content_item(part)) is not None
    ]
    sounds = [part for part in message.parts if type(part) is AudioPart]
    if sounds:
        listed = ", ".join(describe_part(part) for part in sounds)
        note = (
            f"[The result includes {len(sounds)} sound{'s' if len(sounds) > 1 else ''} "
            f"({listed}); see the next user message, 'Attachments of tool call "
            f"{message.tool_call_id}'.]"
        )
        items.append({"type": "input_text", "text": note})
    return items


def attachment_items(message: Message) -> bytes:
    """The content items (JSON, comma-separated, no brackets) of the user message after a
    turn that carry a tool result's sounds: a line naming the call, then the sounds (``b""``
    for a result without sounds)."""
    sounds = [part for part in message.parts if type(part) is AudioPart]
    if not sounds:
        return b""
    name = f" ({message.tool_name})" if message.tool_name else ""
    header = {
        "type": "input_text",
        "text": f"Attachments of tool call {message.tool_call_id}{name}:",
    }
    return encode_json([header, *(content_item(part) for part in sounds)])[1:-1]


def attachments_bytes(items: Sequence[bytes]) -> bytes:
    """The ``message`` item of the user message made of ``attachment_items`` (empty ones
    skipped)."""
    joined = b",".join(item for item in items if item)
    return b'{"type":"message","role":"user","content":[' + joined + b"]}"


def input_items(message: Message) -> list[dict[str, Any]]:
    """Return the input items of one message."""
    role = message.role
    if role is Role.TOOL:
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": _tool_output(message),
            }
        ]
    if role is Role.USER:
        return [{"type": "message", "role": "user", "content": content_value(message)}]
    if role is Role.SYSTEM:  # instructions are text (a system message's media are not sent)
        return [{"type": "message", "role": "system", "content": message.content}]
    items: list[dict[str, Any]] = []
    if message.extra:
        for key in (REASONING_ITEMS, SERVER_TOOL_ITEMS):
            kept = message.extra.get(key)
            if isinstance(kept, list):
                items.extend(item for item in kept if isinstance(item, dict))
    if message.content or not message.tool_calls:
        # An assistant turn is text (an audio reply from another provider: its transcript).
        items.append({"type": "message", "role": "assistant", "content": message.content})
    items.extend(
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.function.name,
            "arguments": call.function.arguments or "{}",
        }
        for call in message.tool_calls
    )
    return items


def items_bytes(message: Message) -> bytes:
    """The input items of one message as JSON, comma-separated, without brackets.

    The model keeps these bytes (``_http._encoded``) and joins them into the ``input`` list.
    """
    return encode_json(input_items(message))[1:-1]


def since_response(messages: Sequence[Message]) -> tuple[str | None, Sequence[Message]]:
    """The id of the last reply that came with one, and the messages after it.

    ``(None, messages)`` when no reply carries a response id.
    """
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role is Role.ASSISTANT and message.extra:
            response_id = message.extra.get(RESPONSE_ID)
            if isinstance(response_id, str) and response_id:
                return response_id, messages[position + 1 :]
    return None, messages


def tools_field(tools: Sequence[ToolInfo]) -> list[dict[str, Any]]:
    """Return the ``tools`` field of a request.

    Deferred tools (:attr:`ToolInfo.deferred`) carry ``"defer_loading": true`` and bring the
    hosted ``{"type": "tool_search"}`` tool (run by OpenAI) at the end of the list.
    """
    listed: list[dict[str, Any]] = []
    for tool in tools:
        entry: dict[str, Any] = {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters or {"type": "object", "properties": {}},
            "strict": False,
        }
        if tool.deferred:
            entry["defer_loading"] = True
        listed.append(entry)
    if any(tool.deferred for tool in tools):
        listed.append({"type": "tool_search"})
    return listed


def request_fields(
    model: str, options: ModelOptions, store: bool, effort: str | None, stream: bool
) -> dict[str, Any]:
    """Return the request fields other than ``input`` and ``tools``."""
    fields: dict[str, Any] = {"model": options.model or model, "store": store}
    if not store:
        fields["include"] = ["reasoning.encrypted_content"]
    if effort is not None:
        fields["reasoning"] = {"effort": effort}
    if options.temperature is not None:
        fields["temperature"] = options.temperature
    if options.top_p is not None:
        fields["top_p"] = options.top_p
    if options.max_tokens is not None:
        fields["max_output_tokens"] = options.max_tokens
    choice = options.tool_choice
    if choice is not None:
        fields["tool_choice"] = (
            choice if choice in _KEYWORDS else {"type": "function", "name": choice}
        )
    if options.extra:
        extra = dict(options.extra)
        if "input" in extra:
            raise AgentKitValueError(
                "ModelOptions.extra may not set 'input'; pass the messages to the call"
            )
        response_format = extra.pop("response_format", None)
        if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
            spec = response_format.get("json_schema") or {}
            text_format = {"type": "json_schema", **spec}
            fields["text"] = {**(extra.pop("text", None) or {}), "format": text_format}
        fields.update(extra)
    if stream:
        fields["stream"] = True
    return fields


# --- response decoding --------------------------------------------------------------------


def usage(data: Any) -> TokenUsage | None:
    """Return the token usage of a Responses ``usage`` object (``None`` if there is none)."""
    if not isinstance(data, dict):
        return None
    prompt = count(data, "input_tokens")
    completion = count(data, "output_tokens")
    total = count(data, "total_tokens") or prompt + completion
    return TokenUsage(
        prompt, completion, total, count(data.get("input_tokens_details"), "cached_tokens")
    )


def decode_json(content: bytes, what: str, url: str, status: int) -> Any:
    """Decode JSON bytes, raising a :class:`ModelError` that shows them when they are not."""
    return _decode_json(
        content, what, url, status, "the Responses API", "https://api.openai.com/v1"
    )


def failure(response: Any, url: str, status: int) -> ModelError:
    """Return the error of a failed response (or of an ``error`` event)."""
    error = response.get("error") if isinstance(response, dict) else None
    detail = server_message({"error": error}) if error else server_message(response)
    return ModelError(
        f"the Responses API at {url} failed the response: {detail or 'no error message'}",
        status_code=status,
        body=response,
    )


def finish_reason(response: dict[str, Any], has_calls: bool) -> str:
    """The finish reason of a finished response's ``status``."""
    status = response.get("status")
    if status == "incomplete":
        details = response.get("incomplete_details") or {}
        reason = details.get("reason") if isinstance(details, dict) else None
        if reason == "max_output_tokens":
            return "length"
        return str(reason or "incomplete")
    return "tool_calls" if has_calls else "stop"


def summary_text(item: dict[str, Any]) -> str:
    """The text of a reasoning item's summary parts."""
    summary = item.get("summary")
    return (
        "".join(part.get("text") or "" for part in summary if isinstance(part, dict))
        if isinstance(summary, list)
        else ""
    )


def parse_response(content: bytes, url: str, status: int) -> Message:
    """Return the reply of a whole ``response`` object."""
    data = decode_json(content, "a response", url, status)
    if (
        not isinstance(data, dict)
        or data.get("status") == "failed"
        or (data.get("error") and not data.get("output"))
    ):
        raise failure(data, url, status)
    return read_output(data, url, status)


def read_output(data: dict[str, Any], url: str, status: int) -> Message:
    """The message of a response object's ``output`` items."""
    output = data.get("output")
    if not isinstance(output, list):
        raise ModelError(
            f"the Responses API at {url} sent a response without an output list "
            f"(got keys {sorted(data)})",
            status_code=status,
            body=data,
        )
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[dict[str, Any]] = []
    served: list[dict[str, Any]] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
                elif isinstance(part, dict) and part.get("type") == "refusal":
                    refusals.append(part.get("refusal") or "")
        elif kind == "function_call":
            calls.append(
                ToolCall(
                    item.get("call_id") or item.get("id") or "",
                    FunctionCall(item.get("name") or "", item.get("arguments") or ""),
                )
            )
        elif kind == "reasoning":
            reasoning.append(item)
        elif kind in SERVER_TOOL_KINDS:
            served.append(item)
    return make_message("".join(texts), "".join(refusals), calls, reasoning, data, served)


def make_message(
    text: str,
    refusal: str,
    calls: list[ToolCall],
    reasoning: list[dict[str, Any]],
    response: dict[str, Any],
    served: list[dict[str, Any]] | None = None,
) -> Message:
    """The assistant message of a finished response."""
    extra: dict[str, Any] = {}
    if served:
        extra[SERVER_TOOL_ITEMS] = served
    if reasoning:
        extra[REASONING_ITEMS] = reasoning
        summary = "".join(summary_text(item) for item in reasoning)
        if summary:
            extra["reasoning_content"] = summary
    if refusal:
        extra["refusal"] = refusal
        text = text or refusal
    if isinstance(response.get("id"), str):
        extra[RESPONSE_ID] = response["id"]
    meta = ResponseMeta(finish_reason(response, bool(calls)), usage(response.get("usage")))
    return Message(Role.ASSISTANT, text, calls, response_meta=meta, extra=extra)
