"""The Gemini API wire format (``generateContent``): request encoding and response decoding.

Requests: system messages become ``systemInstruction``; user messages ``user`` contents with
``text`` parts (a message with parts: ``text``, ``inlineData`` and ``fileData`` parts, see
:func:`content_parts`); assistant messages ``model`` contents with a ``text`` part and one
``functionCall`` part per tool call; tool messages ``functionResponse`` parts in a ``user``
content, a result's images, files and sounds as parts after it (:func:`attachment_parts`)
(consecutive messages of one side make one content). Thought signatures a reply
carried go back on their parts: a function call's in ``ToolCall.extra`` (the shape
Gemini's OpenAI-compatible endpoint uses,
``{"extra_content": {"google": {"thought_signature": ...}}}``, so either client can send it
back), a text part's in ``Message.extra["thought_signature"]``. Tools are
``functionDeclarations`` with their JSON Schema as ``parametersJsonSchema``;
``ModelOptions.tool_choice`` is ``toolConfig.functionCallingConfig`` (``AUTO``, ``ANY``,
``NONE``, or ``ANY`` with ``allowedFunctionNames``); a ``response_format`` of type
``json_schema`` (structured output) is ``responseMimeType: application/json`` with
``responseJsonSchema``; the thinking budget is ``thinkingConfig``.

Replies: ``text`` parts join into ``content``, ``thought`` parts into
``extra["reasoning_content"]``, ``functionCall`` parts become tool calls. ``finishReason``
``STOP`` is ``"stop"`` (``"tool_calls"`` with calls), ``MAX_TOKENS`` ``"length"``; a blocked
prompt (``promptFeedback.blockReason``), a reply without candidates and a candidate stopped
by a safety filter raise :class:`~agentkit.errors.ContentBlockedError`. Usage:
``promptTokenCount`` (it includes ``cachedContentTokenCount``, the cached tokens),
``candidatesTokenCount`` plus ``thoughtsTokenCount``.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from typing import Any

from agentkit.errors import AgentKitValueError, ContentBlockedError, ModelError
from agentkit.models._base import ModelOptions
from agentkit.models._http._json import count, encode_json
from agentkit.models._http._json import decode_json as _decode_json
from agentkit.models._http._retry import server_message
from agentkit.schema import (
    ContentPart,
    FunctionCall,
    Message,
    ResponseMeta,
    Role,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolInfo,
)

__all__: list[str] = []

THOUGHT_SIGNATURE = "thought_signature"
"""The ``Message.extra`` key of the signature of a reply's text part."""

BLOCKED_FINISHES = frozenset(
    {"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "RECITATION", "IMAGE_SAFETY"}
)
_FINISHES = {"STOP": "stop", "MAX_TOKENS": "length"}
_CHOICES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
_decode = json.JSONDecoder().decode


# --- request encoding ---------------------------------------------------------------------


def content_parts(message: Message) -> list[dict[str, Any]]:
    """Return the parts a message's content becomes.

    A plain-text message is one ``text`` part. A message with parts has one Gemini part per
    part: ``text``; ``inlineData {mimeType, data}`` for an image, a sound or a file given by
    its bytes; ``fileData {mimeType, fileUri}`` for one given by URL.
    """
    if not message.parts:
        return [{"text": message.content}] if message.content else []
    return [part for item in message.parts if (part := _gemini_part(item)) is not None]


def _gemini_part(part: ContentPart) -> dict[str, Any] | None:
    if type(part) is TextPart:
        return {"text": part.text} if part.text else None
    assert not isinstance(part, TextPart)
    url = getattr(part, "url", None)
    if part.data is None:
        data: dict[str, Any] = {"fileUri": url}
        if part.media_type:
            data = {"mimeType": part.media_type, **data}
        return {"fileData": data}
    encoded = base64.b64encode(part.data).decode("ascii")
    return {"inlineData": {"mimeType": part.media_type, "data": encoded}}


FUNCTION_RESPONSE_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/webp", "application/pdf", "text/plain"}
)
"""The media types a Gemini 3 ``functionResponse`` holds in its own ``parts``."""


def takes_function_response_parts(model: str) -> bool:
    """Whether ``model`` reads media inside a ``functionResponse`` (the Gemini 3 models)."""
    return model.removeprefix("models/").startswith("gemini-3")


def _nests(part: ContentPart) -> bool:
    return not isinstance(part, TextPart) and (part.media_type or "") in FUNCTION_RESPONSE_TYPES


def attachment_parts(message: Message, function: str, nested: bool = False) -> list[dict[str, Any]]:
    """The parts after a tool result's ``functionResponse`` that carry its images, files and
    sounds: a line naming the ``function`` whose result they are, then the media (``[]`` for
    a result without media).

    They go in the same ``user`` content as the ``functionResponse``, where every Gemini
    model reads them. With ``nested`` (a Gemini 3 model), the media that a
    ``functionResponse`` holds itself (:data:`FUNCTION_RESPONSE_TYPES`) are left out here:
    :func:`function_response_parts` puts them inside it.
    """
    media = [
        part
        for part in message.parts
        if type(part) is not TextPart and not (nested and _nests(part))
    ]
    if not media:
        return []
    header = {"text": f"Attachments of the {function} result:"}
    return [header, *(part for item in media if (part := _gemini_part(item)) is not None)]


def function_response_parts(message: Message) -> list[dict[str, Any]]:
    """The ``parts`` of a Gemini 3 ``functionResponse``: the result's images, PDFs and text
    files, as ``inlineData`` or ``fileData`` (``[]`` when it has none)."""
    return [part for item in message.parts if _nests(item) and (part := _gemini_part(item))]


def call_signature(call: ToolCall) -> str | None:
    """The thought signature kept on a tool call, if any."""
    google = (call.extra.get("extra_content") or {}).get("google") if call.extra else None
    signature = google.get("thought_signature") if isinstance(google, dict) else None
    return signature if isinstance(signature, str) else None


def _arguments(text: str) -> Any:
    try:
        value = _decode(text) if text else {}
    except ValueError:
        return {}  # invalid JSON (healed by the tool layer): the API takes only an object
    return value if isinstance(value, dict) else {}


def _response(content: str) -> dict[str, Any]:
    """A tool result as a ``functionResponse.response`` object (JSON objects stay themselves)."""
    try:
        value = _decode(content)
    except ValueError:
        return {"result": content}
    return value if isinstance(value, dict) else {"result": value}


def message_parts(message: Message, name: str = "", nested: bool = False) -> list[dict[str, Any]]:
    """Return the parts of one non-system message.

    A tool result names its function: ``message.tool_name``, else ``name``. With ``nested``
    (a Gemini 3 model), a tool result's images, PDFs and text files go inside its
    ``functionResponse`` (its ``parts``); its other media, and all of them without
    ``nested``, follow it (:func:`attachment_parts`).
    """
    role = message.role
    if role is Role.ASSISTANT:
        # A model turn is text (an audio reply from another provider: its transcript).
        parts: list[dict[str, Any]] = [{"text": message.content}] if message.content else []
        signature = message.extra.get(THOUGHT_SIGNATURE) if message.extra else None
        if parts and isinstance(signature, str):
            parts[0]["thoughtSignature"] = signature
        for call in message.tool_calls:
            part: dict[str, Any] = {
                "functionCall": {
                    "name": call.function.name,
                    "args": _arguments(call.function.arguments),
                }
            }
            signature = call_signature(call)
            if signature is not None:
                part["thoughtSignature"] = signature
            parts.append(part)
    elif role is Role.TOOL:
        function = message.tool_name or name
        response: dict[str, Any] = {"name": function, "response": _response(message.content)}
        parts = [{"functionResponse": response}]
        if message.parts:
            inside = function_response_parts(message) if nested else []
            if inside:
                response["parts"] = inside
            parts.extend(attachment_parts(message, function, nested))
    else:
        parts = content_parts(message)
    return parts or [{"text": message.content}]


def parts_bytes(message: Message, nested: bool = False) -> bytes:
    """The parts of one non-system message as JSON, comma-separated, without brackets
    (``nested`` as for :func:`message_parts`).

    The model keeps these bytes (``_http._encoded``) and joins them into turns.
    """
    return encode_json(message_parts(message, nested=nested))[1:-1]


def function_names(messages: Sequence[Message]) -> dict[str, str]:
    """Tool call id -> function name, for tool results that do not name their function."""
    return {
        call.id: call.function.name
        for message in messages
        if message.role is Role.ASSISTANT
        for call in message.tool_calls
    }


def tools_field(tools: Sequence[ToolInfo]) -> list[dict[str, Any]]:
    """Return the ``tools`` field of a request."""
    return [
        {
            "functionDeclarations": [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "parametersJsonSchema": tool.parameters or {"type": "object"},
                }
                for tool in tools
            ]
        }
    ]


def request_fields(options: ModelOptions, thinking_budget: int | None) -> dict[str, Any]:
    """Return the request fields other than ``contents``, ``systemInstruction`` and ``tools``."""
    fields: dict[str, Any] = {}
    config: dict[str, Any] = {}
    if options.temperature is not None:
        config["temperature"] = options.temperature
    if options.top_p is not None:
        config["topP"] = options.top_p
    if options.max_tokens is not None:
        config["maxOutputTokens"] = options.max_tokens
    if options.stop is not None:
        config["stopSequences"] = (
            [options.stop] if isinstance(options.stop, str) else list(options.stop)
        )
    if thinking_budget is not None:
        config["thinkingConfig"] = {"thinkingBudget": thinking_budget, "includeThoughts": True}
    choice = options.tool_choice
    if choice is not None:
        mode = _CHOICES.get(choice)
        calling: dict[str, Any] = {"mode": mode or "ANY"}
        if mode is None:
            calling["allowedFunctionNames"] = [choice]
        fields["toolConfig"] = {"functionCallingConfig": calling}
    if options.extra:
        extra = dict(options.extra)
        for key in ("contents", "systemInstruction"):
            if key in extra:
                raise AgentKitValueError(
                    f"ModelOptions.extra may not set {key!r}; pass the messages to the call"
                )
        response_format = extra.pop("response_format", None)
        if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
            schema = (response_format.get("json_schema") or {}).get("schema")
            config["responseMimeType"] = "application/json"
            if isinstance(schema, dict):
                config["responseJsonSchema"] = schema
        config.update(extra.pop("generationConfig", None) or {})
        fields.update(extra)
    if config:
        fields["generationConfig"] = config
    return fields


# --- response decoding --------------------------------------------------------------------


def usage(data: Any) -> TokenUsage | None:
    """Return the token usage of a ``usageMetadata`` object (``None`` if there is none)."""
    if not isinstance(data, dict):
        return None
    prompt = count(data, "promptTokenCount")
    completion = count(data, "candidatesTokenCount") + count(data, "thoughtsTokenCount")
    total = count(data, "totalTokenCount") or prompt + completion
    return TokenUsage(prompt, completion, total, count(data, "cachedContentTokenCount"))


def decode_json(content: bytes, what: str, url: str, status: int) -> Any:
    """Decode JSON bytes, raising a :class:`ModelError` that shows them when they are not."""
    return _decode_json(
        content, what, url, status, "the Gemini API", "https://generativelanguage.googleapis.com"
    )


def new_call_id() -> str:
    """An id for a function call that came without one."""
    return "call_" + uuid.uuid4().hex[:24]


class Reading:
    """What one response (or one stream chunk) says: parts read, finish, usage."""

    __slots__ = ("calls", "finish", "reasoning", "signature", "text", "usage")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCall] = []
        self.signature: str | None = None
        self.finish = ""
        self.usage: TokenUsage | None = None

    def message(self, finish: str) -> Message:
        """The message (or chunk) of what was read, with ``finish`` as its finish reason."""
        extra: dict[str, Any] = {}
        if self.reasoning:
            extra["reasoning_content"] = "".join(self.reasoning)
        if self.signature is not None:
            extra[THOUGHT_SIGNATURE] = self.signature
        meta = ResponseMeta(finish, self.usage) if finish or self.usage else None
        return Message(
            Role.ASSISTANT, "".join(self.text), self.calls, response_meta=meta, extra=extra
        )


def read_response(data: Any, url: str, status: int, first_index: int | None = None) -> Reading:
    """Read one ``GenerateContentResponse``.

    A stream's chunk gives ``first_index``, the index of its first tool call (calls are then
    indexed, as stream fragments are); a chunk without candidates is then usage alone.

    Raises:
        ContentBlockedError: the prompt was blocked, or the candidate stopped for safety.
        ModelError: an error object, or a response of an unexpected shape.
    """
    if not isinstance(data, dict) or data.get("error") is not None:
        raise ModelError(
            f"the Gemini API at {url} sent an error: {server_message(data) or 'no message'}",
            status_code=status,
            body=data,
        )
    reading = Reading()
    reading.usage = usage(data.get("usageMetadata"))
    feedback = data.get("promptFeedback")
    block = feedback.get("blockReason") if isinstance(feedback, dict) else None
    candidates = data.get("candidates")
    if block:
        raise ContentBlockedError(
            f"Gemini blocked the prompt (promptFeedback.blockReason {block}); rephrase the "
            "request or adjust safetySettings (ModelOptions(extra={'safetySettings': [...]}))",
            reason=str(block),
            status_code=status,
            body=data,
        )
    if not isinstance(candidates, list) or not candidates:
        if first_index is not None:
            return reading  # a stream's chunk with usage alone (or nothing)
        raise ContentBlockedError(
            f"Gemini sent no candidate at {url}: the reply was withheld (no blockReason "
            "given); rephrase the request or adjust safetySettings",
            reason="NO_CANDIDATES",
            status_code=status,
            body=data,
        )
    candidate = candidates[0]
    if not isinstance(candidate, dict):
        raise ModelError(f"the Gemini API at {url} sent a malformed candidate", body=data)
    finish = candidate.get("finishReason") or ""
    if finish in BLOCKED_FINISHES:
        raise ContentBlockedError(
            f"Gemini stopped the reply for {finish} (finishReason); rephrase the request or "
            "adjust safetySettings",
            reason=str(finish),
            status_code=status,
            body=data,
        )
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict):
            continue
        signature = part.get("thoughtSignature")
        if "functionCall" in part:
            function = part["functionCall"] or {}
            extra: dict[str, Any] = {}
            if isinstance(signature, str):
                extra = {"extra_content": {"google": {"thought_signature": signature}}}
            reading.calls.append(
                ToolCall(
                    function.get("id") or new_call_id(),
                    FunctionCall(
                        function.get("name") or "", encode_json(function.get("args") or {}).decode()
                    ),
                    index=None if first_index is None else first_index + len(reading.calls),
                    extra=extra,
                )
            )
        elif isinstance(part.get("text"), str):
            (reading.reasoning if part.get("thought") else reading.text).append(part["text"])
            if isinstance(signature, str) and not part.get("thought"):
                reading.signature = signature
        elif isinstance(signature, str):
            reading.signature = signature  # a signature on an empty part
    reading.finish = finish
    return reading


def finish_reason(finish: str, has_calls: bool) -> str:
    """The finish reason of Gemini's ``finishReason`` (``"tool_calls"`` when it called tools)."""
    if not finish:
        return ""
    if finish == "STOP" and has_calls:
        return "tool_calls"
    return _FINISHES.get(finish, finish.lower())


def parse_response(content: bytes, url: str, status: int) -> Message:
    """Return the reply of a whole ``generateContent`` response."""
    data = decode_json(content, "a response", url, status)
    reading = read_response(data, url, status)
    return reading.message(finish_reason(reading.finish, bool(reading.calls)))


def retry_delay(body: Any) -> float | None:
    """The ``RetryInfo.retryDelay`` of a Gemini error body, in seconds (``None`` if none)."""
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else ():
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return min(max(float(delay[:-1]), 0.0), 60.0)
            except ValueError:
                return None
    return None
