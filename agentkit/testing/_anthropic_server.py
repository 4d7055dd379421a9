"""A loopback Anthropic Messages API server: :class:`FakeAnthropicServer`.

It speaks the documented wire over real HTTP: ``POST /v1/messages`` answered with a
``message`` object, or with the Server-Sent Events of a stream (``message_start``, ``ping``,
``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` per block,
``message_delta``, ``message_stop``); errors in Anthropic's shape
(``{"type": "error", "error": {"type": "overloaded_error", "message": ...}}``, 529 included),
and an ``event: error`` inside a stream. Replies are the :class:`~agentkit.testing.Reply` of
:class:`~agentkit.testing.FakeOpenAIServer`: ``reasoning_content`` is a thinking block,
``finish_reason`` the ``stop_reason`` as Anthropic spells it (``"refusal"``,
``"max_tokens"``...).

Like Anthropic, it checks what extended thinking requires: a thinking block it sent must
come back unchanged with its signature (a changed one is refused with HTTP 400), and with
thinking on, an assistant turn that calls tools must start with its thinking block.

Tool search is simulated: when a request has deferred tools (``"defer_loading": true``) and a
tool search server tool, a reply that calls a deferred tool no ``tool_reference`` of the
conversation loaded yet first has the search's ``server_tool_use`` block (its query: the
tool's name) and its ``tool_search_tool_result`` with a ``tool_reference`` to the tool.

A long search pauses the turn as Anthropic documents: a ``Reply(finish_reason="pause_turn",
tool_calls=[...])`` answers with the ``server_tool_use`` blocks of the searches for those
tools, not run yet, and ``stop_reason: "pause_turn"`` (no ``tool_use``: the calls are the
continuation's). A request continuing a paused turn must end with the paused content sent
back as it came, as the last assistant message, with the same tools (else HTTP 400); its
reply starts with the results of the pending searches. Script the continuation's reply next.

Prompt caching is simulated: each ``cache_control`` breakpoint of a request writes the
prefix up to it (tools, system, messages, in that order) to the server's cache; a later
request whose prefix up to one of its block boundaries was written reads it
(``cache_read_input_tokens``), and what lies between that point and its last breakpoint is
written (``cache_creation_input_tokens``); ``input_tokens`` is the rest. Tokens are counted
as a quarter of the bytes of each block's JSON; there is no minimum cacheable length and no
expiry.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterable
from typing import Any

from agentkit.testing._fake_http import FakeModelServer, Handler, RequestHandler
from agentkit.testing._openai_replies import Reply, _pieces

__all__ = ["FakeAnthropicServer"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def signature(thinking: str) -> str:
    """The signature the fake gives a thinking block (a digest of its text)."""
    digest = hashlib.sha256(b"agentkit-fake-thinking:" + thinking.encode()).digest()
    return base64.b64encode(digest).decode()


def _tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, sort_keys=True)) // 4)


def _strip(value: Any) -> Any:
    """``value`` without its ``cache_control`` (it marks a breakpoint; it is not content)."""
    if isinstance(value, dict):
        return {key: item for key, item in value.items() if key != "cache_control"}
    return value


def _segments(request: dict[str, Any]) -> list[tuple[Any, bool]]:
    """The request's blocks in cache order, each with whether it is a breakpoint."""
    segments: list[tuple[Any, bool]] = []
    for tool in request.get("tools") or ():
        segments.append((_strip(tool), isinstance(tool, dict) and "cache_control" in tool))
    system = request.get("system")
    if isinstance(system, str):
        segments.append(({"type": "text", "text": system}, False))
    for block in system if isinstance(system, list) else ():
        segments.append((_strip(block), isinstance(block, dict) and "cache_control" in block))
    for message in request.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content or ():
            marked = isinstance(block, dict) and "cache_control" in block
            segments.append(({"role": message.get("role"), **_strip(block)}, marked))
    return segments


class FakeAnthropicServer(FakeModelServer):
    """An Anthropic Messages API server on ``127.0.0.1`` (a free port), in a background thread.

    Scripted like :class:`~agentkit.testing.FakeOpenAIServer` (:meth:`queue` or ``handler=``,
    with :class:`~agentkit.testing.Reply`); see the module docstring for the wire, the checks
    of thinking blocks and the prompt cache it simulates. :attr:`cache_reads` and
    :attr:`cache_writes` list the tokens each request read from and wrote to the cache.

    Example::

        with FakeAnthropicServer() as server:
            server.queue(Reply("Hello!"), Reply(status=529, error="Overloaded"))
            model = AnthropicChatModel("claude-test", base_url=server.base_url, api_key="k")
            model.generate([user_message("Hi")])

    Attributes:
        base_url: ``"http://127.0.0.1:PORT"``.
    """

    def __init__(self, handler: Handler | None = None) -> None:
        super().__init__(handler)
        self._paused: dict[str, tuple[list[Any], Any]] = {}  # see _continuation_problem
        self._cache: set[str] = set()
        self._cache_lock = threading.Lock()
        self._reads: list[int] = []
        self._writes: list[int] = []

    @property
    def cache_reads(self) -> list[int]:
        """The tokens each successful request read from the prompt cache, in order."""
        with self._cache_lock:
            return list(self._reads)

    @property
    def cache_writes(self) -> list[int]:
        """The tokens each successful request wrote to the prompt cache, in order."""
        with self._cache_lock:
            return list(self._writes)

    def _serves(self, path: str) -> bool:
        return path == "/v1/messages"

    def _error_payload(self, reply: Reply) -> Any:
        kind = _ERROR_TYPES.get(reply.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": reply.error or kind}}

    def _respond(
        self,
        handler: RequestHandler,
        path: str,
        request: dict[str, Any],
        reply: Reply,
        number: int,
    ) -> None:
        problem = _thinking_problem(request) or self._continuation_problem(request)
        if problem:
            handler.send_json(400, self._error_payload(Reply(status=400, error=problem)))
            return
        if _stop_reason(reply) == "pause_turn":
            sent = _content(reply, number, request)
            prefix, continued = _continued(request)
            with self._cache_lock:
                self._paused[prefix] = ([*continued, *sent], _strip_all(request.get("tools")))
        usage = self._usage(request, reply)
        if request.get("stream"):
            handler.send_events(_events(request, reply, number, usage), reply)
        else:
            handler.send_body(_message(request, reply, number, usage), reply)

    def _continuation_problem(self, request: dict[str, Any]) -> str:
        """What Anthropic would refuse about a request continuing a paused turn ("" if
        nothing): its paused content must come back as it was sent, with the same tools."""
        prefix, continued = _continued(request)
        with self._cache_lock:
            paused = self._paused.get(prefix)
        if paused is None or not continued:
            return ""
        content, tools = paused
        if continued != content:
            return (
                "messages: a turn paused with stop_reason 'pause_turn' is continued by "
                "sending its content back unchanged as the last assistant message"
            )
        if _strip_all(request.get("tools")) != tools:
            return (
                "tools: a paused turn is continued with the same tools (a server_tool_use "
                "block of the paused turn names one of them)"
            )
        return ""

    def _usage(self, request: dict[str, Any], reply: Reply) -> dict[str, int]:
        """The usage of a reply: as scripted, else counted with the simulated cache."""
        output = len(reply.content.split()) + len(reply.reasoning_content.split())
        output += 10 * len(reply.tool_calls)
        if reply.usage is not None:
            scripted = reply.usage
            return {
                "input_tokens": scripted.prompt_tokens
                - scripted.cached_tokens
                - scripted.cache_write_tokens,
                "cache_read_input_tokens": scripted.cached_tokens,
                "cache_creation_input_tokens": scripted.cache_write_tokens,
                "output_tokens": scripted.completion_tokens,
            }
        segments = _segments(request)
        digest = hashlib.sha256(str(request.get("model")).encode())
        keys: list[str] = []
        for value, _ in segments:
            digest.update(json.dumps(value, sort_keys=True).encode())
            keys.append(digest.copy().hexdigest())
        tokens = [_tokens(value) for value, _ in segments]
        breakpoints = [index for index, (_, marked) in enumerate(segments) if marked]
        last = breakpoints[-1] if breakpoints else -1
        with self._cache_lock:
            hit = next((i for i in range(last, -1, -1) if keys[i] in self._cache), -1)
            for index in breakpoints:
                self._cache.add(keys[index])
            read = sum(tokens[: hit + 1])
            written = sum(tokens[hit + 1 : last + 1])
            self._reads.append(read)
            self._writes.append(written)
        return {
            "input_tokens": sum(tokens[last + 1 :]),
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": output,
        }


def _thinking_problem(request: dict[str, Any]) -> str:
    """What Anthropic would refuse about the thinking blocks of ``request`` ("" if nothing)."""
    thinking_on = (request.get("thinking") or {}).get("type") == "enabled"
    messages = request.get("messages") or []
    for message in messages:
        if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if block.get("type") == "thinking" and block.get("signature") != signature(
                block.get("thinking") or ""
            ):
                return "messages: invalid `signature` in `thinking` block"
    assistant = [m for m in messages if m.get("role") == "assistant"]
    if thinking_on and assistant:
        content = assistant[-1].get("content")
        blocks = content if isinstance(content, list) else []
        if any(b.get("type") == "tool_use" for b in blocks) and (
            blocks[0].get("type") not in ("thinking", "redacted_thinking")
        ):
            return (
                "messages: Expected `thinking` or `redacted_thinking`, but found `"
                f"{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` "
                "message must start with a thinking block"
            )
    return ""


def _strip_all(value: Any) -> Any:
    """``value`` without any ``cache_control`` (breakpoints are not content)."""
    if isinstance(value, list):
        return [_strip_all(item) for item in value]
    if isinstance(value, dict):
        return {key: _strip_all(item) for key, item in value.items() if key != "cache_control"}
    return value


def _continued(request: dict[str, Any]) -> tuple[str, list[Any]]:
    """The conversation before a trailing assistant message (as a key) and that message's
    blocks (``[]`` when the request does not end with one)."""
    messages = _strip_all(list(request.get("messages") or ()))
    continued: list[Any] = []
    if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "assistant":
        content = messages.pop().get("content")
        continued = content if isinstance(content, list) else [{"type": "text", "text": content}]
    key = json.dumps([request.get("model"), messages], sort_keys=True)
    return key, continued


def _pending_searches(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The results of the searches a paused turn left pending (``server_tool_use`` blocks of
    the trailing assistant message without their result), found as the fake searches."""
    _, continued = _continued(request)
    answered = {b.get("tool_use_id") for b in continued if isinstance(b, dict)}
    results: list[dict[str, Any]] = []
    for block in continued:
        if not isinstance(block, dict) or block.get("type") != "server_tool_use":
            continue
        if block.get("id") in answered:
            continue
        query = str((block.get("input") or {}).get("query", ""))
        found = query if str(block.get("name", "")).endswith("regex") else "_".join(query.split())
        result = {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": found}],
        }
        results.append(
            {"type": "tool_search_tool_result", "tool_use_id": block.get("id"), "content": result}
        )
    return results


def _stop_reason(reply: Reply) -> str:
    if reply.finish_reason is not None:
        return reply.finish_reason
    return "tool_use" if reply.tool_calls else "end_turn"


def _input(arguments: str) -> Any:
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _deferred_to_search(request: dict[str, Any], reply: Reply) -> tuple[str, list[str]]:
    """The search server tool of ``request`` and the deferred tools ``reply`` calls that no
    ``tool_reference`` of the conversation loaded yet (``("", [])`` without deferred tools)."""
    tools = [t for t in request.get("tools") or () if isinstance(t, dict)]
    search = next(
        (t.get("name") or "" for t in tools if str(t.get("type", "")).startswith("tool_search_")),
        "",
    )
    deferred = {t.get("name") for t in tools if t.get("defer_loading")}
    if not search or not deferred:
        return "", []
    loaded: set[str] = set()
    pending = {"role": "assistant", "content": _pending_searches(request)}
    for message in [*(request.get("messages") or ()), pending]:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_search_tool_result":
                found = (block.get("content") or {}).get("tool_references") or ()
                loaded.update(str(r.get("tool_name")) for r in found if isinstance(r, dict))
    wanted = [c.function.name for c in reply.tool_calls if c.function.name in deferred]
    return search, [name for name in dict.fromkeys(wanted) if name not in loaded]


def _content(reply: Reply, number: int, request: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = _pending_searches(request)
    paused = _stop_reason(reply) == "pause_turn"
    if reply.reasoning_content:
        blocks.append(
            {
                "type": "thinking",
                "thinking": reply.reasoning_content,
                "signature": signature(reply.reasoning_content),
            }
        )
    if reply.content:
        blocks.append({"type": "text", "text": reply.content})
    search, unloaded = _deferred_to_search(request, reply)
    for position, name in enumerate(unloaded):
        search_id = f"srvtoolu_{number:04d}{position:02d}"
        query = name if search.endswith("regex") else " ".join(name.split("_"))
        blocks.append(
            {"type": "server_tool_use", "id": search_id, "name": search, "input": {"query": query}}
        )
        if paused:
            continue  # the search has not run: its result starts the continuation
        result = {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": name}],
        }
        blocks.append(
            {"type": "tool_search_tool_result", "tool_use_id": search_id, "content": result}
        )
    for position, call in enumerate(() if paused else reply.tool_calls):
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{number:04d}{position:02d}",
                "name": call.function.name,
                "input": _input(call.function.arguments),
            }
        )
    return blocks


def _message(
    request: dict[str, Any], reply: Reply, number: int, usage: dict[str, int]
) -> dict[str, Any]:
    return {
        "id": f"msg_fake{number:06d}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", ""),
        "content": _content(reply, number, request),
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": usage,
    }


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (
        kind.encode(),
        json.dumps({"type": kind, **payload}).encode(),
    )


def _events(
    request: dict[str, Any], reply: Reply, number: int, usage: dict[str, int]
) -> Iterable[bytes]:
    start = _message(request, reply, number, {**usage, "output_tokens": 1})
    start.update(content=[], stop_reason=None)
    events = [_event("message_start", {"message": start})]
    if reply.stream_error:
        error = {"type": "overloaded_error", "message": reply.stream_error}
        events.append(_event("error", {"error": error}))
        return events
    if reply.malformed:
        events.append(b'event: content_block_start\ndata: {"type": "content_block_st\n\n')
    if reply.keepalive:
        events.append(_event("ping", {}))
    arguments = {
        call.id or f"toolu_{number:04d}{position:02d}": call.function.arguments
        for position, call in enumerate(reply.tool_calls)
    }
    for index, block in enumerate(_content(reply, number, request)):
        kind = block["type"]
        if kind == "thinking":
            events.append(
                _event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "thinking", "thinking": ""}},
                )
            )
            for piece in _pieces(block["thinking"], reply.chunks):
                delta = {"type": "thinking_delta", "thinking": piece}
                events.append(_event("content_block_delta", {"index": index, "delta": delta}))
            delta = {"type": "signature_delta", "signature": block["signature"]}
            events.append(_event("content_block_delta", {"index": index, "delta": delta}))
        elif kind == "text":
            events.append(
                _event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            for piece in _pieces(block["text"], reply.chunks):
                delta = {"type": "text_delta", "text": piece}
                events.append(_event("content_block_delta", {"index": index, "delta": delta}))
        elif kind == "tool_search_tool_result":  # a server tool's result comes whole
            events.append(_event("content_block_start", {"index": index, "content_block": block}))
        else:  # tool_use, server_tool_use: the input in pieces (a call's as scripted)
            started = {**block, "input": {}}
            events.append(_event("content_block_start", {"index": index, "content_block": started}))
            text = arguments[block["id"]] if kind == "tool_use" else json.dumps(block["input"])
            for piece in ["", *_pieces(text, reply.chunks)]:
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append(_event("content_block_delta", {"index": index, "delta": delta}))
        events.append(_event("content_block_stop", {"index": index}))
    stop: dict[str, Any] = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
    events.append(
        _event(
            "message_delta", {"delta": stop, "usage": {"output_tokens": usage["output_tokens"]}}
        )
    )
    if reply.done:
        events.append(_event("message_stop", {}))
    return events
