"""What :class:`FakeOpenAIServer` answers: the scripted :class:`Reply` and its wire format.

The bodies follow the OpenAI Chat Completions API: a ``chat.completion`` object for a plain
reply; for a streamed one, ``chat.completion.chunk`` events (a first delta with the role, then
the content and each tool call's arguments in several deltas, keep-alive comments, a usage
chunk with empty ``choices`` when the request asks for it, ``[DONE]``); and error bodies of
the same shape as OpenAI's.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from typing import Any

import attrs

from agentkit.schema import TokenUsage, ToolCall


def _tool_call_list(calls: Iterable[ToolCall]) -> list[ToolCall]:
    """Copy the tool calls given to a :class:`Reply` into a list (a typed ``list`` converter)."""
    return list(calls)


@attrs.define
class Reply:
    """What :class:`FakeOpenAIServer` answers to one request.

    Build tool calls with :func:`call`: ``Reply(tool_calls=[call("add", {"a": 1})])``.

    Attributes:
        content: the assistant's text.
        tool_calls: tool calls the assistant requests.
        finish_reason: defaults to ``"tool_calls"`` when there are tool calls, else ``"stop"``.
        usage: token usage; by default counted in words of the request and the reply.
        reasoning_content: DeepSeek-style reasoning text, sent before the content.
        status: the HTTP status; 400 and above answer with an OpenAI-shaped error body.
        error: the error message of an error status.
        retry_after: the ``Retry-After`` header value (seconds, or an HTTP date string).
        headers: more response headers.
        delay: seconds to wait before answering (interrupted when the server stops).
        chunk_delay: seconds to wait between streamed events.
        chunks: how many deltas the content and each tool call's arguments are split into.
        cut_after: for a stream, drop the connection after this many ``data`` events; for a
            plain response, send half the body and drop the connection.
        disconnect: drop the connection without answering at all.
        malformed: send a body, or a first stream event, that is not valid JSON.
        stream_error: send an error event with this message after the first stream chunk.
        raw_body: send these bytes as the body of a 200 JSON response, verbatim.
        gate: pause a stream after its first data event until this event is set.
        done: end a stream with ``data: [DONE]``.
        keepalive: send ``: keep-alive`` comment lines in streams.
    """

    content: str = ""
    tool_calls: list[ToolCall] = attrs.field(factory=list, converter=_tool_call_list)
    finish_reason: str | None = None
    usage: TokenUsage | None = None
    reasoning_content: str = ""
    status: int = 200
    error: str = ""
    retry_after: float | str | None = None
    headers: dict[str, str] = attrs.Factory(dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunks: int = 3
    cut_after: int | None = None
    disconnect: bool = False
    malformed: bool = False
    stream_error: str = ""
    raw_body: bytes | None = None
    gate: threading.Event | None = None
    done: bool = True
    keepalive: bool = True



def completion_body(request: dict[str, Any], reply: Reply, number: int) -> dict[str, Any]:
    """Return the JSON body of a non-streamed reply, as the real API sends it."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in reply.tool_calls
        ]
    else:
        message["content"] = reply.content
    if reply.reasoning_content:
        message["reasoning_content"] = reply.reasoning_content
    payload: dict[str, Any] = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason_of(reply)}],
        "usage": usage_body(request, reply),
    }
    return payload


def status_error_type(status: int) -> str:
    """Return the OpenAI error ``type`` that goes with an HTTP ``status``."""
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(status, "server_error")


def error_body(message: str, error_type: str) -> dict[str, Any]:
    """Return an error body shaped like OpenAI's."""
    return {"error": {"message": message, "type": error_type, "param": None, "code": None}}


def finish_reason_of(reply: Reply) -> str:
    """Return the reply's finish reason: as given, else from whether it calls tools."""
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_calls" if reply.tool_calls else "stop"


def _words(text: Any) -> int:
    return len(text.split()) if isinstance(text, str) else 0


def usage_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """Return the ``usage`` object: as scripted, else counted in words. Scripted
    ``cached_tokens`` go where OpenAI puts them (``prompt_tokens_details``)."""
    usage = reply.usage
    if usage is None:
        prompt = sum(_words(message.get("content")) for message in request.get("messages", ()))
        completion = _words(reply.content) + len(reply.tool_calls)
        usage = TokenUsage(prompt, completion, prompt + completion)
    body: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cached_tokens:
        body["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return body


def _pieces(text: str, count: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, count)))
    return [text[start : start + size] for start in range(0, len(text), size)]


def stream_events(request: dict[str, Any], reply: Reply, number: int) -> Iterable[bytes]:
    """Return the SSE events of a streamed reply, comments included, as the real API sends them."""
    include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
    base = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model", ""),
        "system_fingerprint": "fp_fake",
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        payload = {
            **base,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if include_usage:
            payload["usage"] = None
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    events: list[bytes] = []
    if reply.keepalive:
        events.append(b": keep-alive\n\n")
    events.append(chunk({"role": "assistant", "content": "", "refusal": None}))
    for piece in _pieces(reply.reasoning_content, reply.chunks):
        events.append(chunk({"reasoning_content": piece}))
    for position, piece in enumerate(_pieces(reply.content, reply.chunks)):
        events.append(chunk({"content": piece}))
        if position == 0 and reply.keepalive:
            events.append(b": keep-alive\n\n")
    for index, call in enumerate(reply.tool_calls):
        first = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.function.name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [first]}))
        for piece in _pieces(call.function.arguments, reply.chunks):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    events.append(chunk({}, finish_reason_of(reply)))
    if include_usage:
        events.append(
            b"data: "
            + json.dumps({**base, "choices": [], "usage": usage_body(request, reply)}).encode()
            + b"\n\n"
        )
    first_data = 1 if reply.keepalive else 0
    if reply.stream_error:
        error = json.dumps(error_body(reply.stream_error, "server_error")).encode()
        events.insert(first_data + 1, b"data: " + error + b"\n\n")
    if reply.malformed:
        events.insert(first_data, b'data: {"choices": [{"delta": \n\n')
    if reply.done:
        events.append(b"data: [DONE]\n\n")
    return events
