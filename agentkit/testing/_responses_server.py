"""A loopback OpenAI Responses API server: :class:`FakeResponsesServer`.

``POST /v1/responses`` answers a ``response`` object, or its stream of Server-Sent Events
(``response.created``, ``response.output_item.added``, ``response.output_text.delta``,
``response.function_call_arguments.delta``, ``response.output_item.done``,
``response.completed``); errors have OpenAI's shape, and ``stream_error`` sends a
``response.failed`` event mid-item. Replies are :class:`~agentkit.testing.Reply`:
``reasoning_content`` is a reasoning item (its summary, and with ``include:
["reasoning.encrypted_content"]`` an ``encrypted_content``), ``finish_reason="length"`` an
``incomplete`` response (``max_output_tokens``).

Hosted tool search is simulated: when a request has deferred function tools
(``"defer_loading": true``) and a ``{"type": "tool_search"}`` tool, a reply that calls a
deferred tool no ``tool_search_output`` of the input loaded yet first has a
``tool_search_call`` item and a ``tool_search_output`` item holding that tool's definition.

Like OpenAI, it refuses (HTTP 400) a stateless request that sends back a function call of a
reasoning reply without that reply's reasoning item, and a ``previous_response_id`` it did not
store (it stores responses of requests with ``"store": true``).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any

from agentkit.testing._fake_http import FakeModelServer, Handler, RequestHandler
from agentkit.testing._openai_replies import Reply, _pieces, error_body, status_error_type

__all__ = ["FakeResponsesServer"]


class FakeResponsesServer(FakeModelServer):
    """An OpenAI Responses API server on ``127.0.0.1`` (a free port), in a background thread.

    Scripted like :class:`~agentkit.testing.FakeOpenAIServer`; see the module docstring.

    Attributes:
        base_url: ``"http://127.0.0.1:PORT/v1"``.
    """

    _root = "/v1"

    def __init__(self, handler: Handler | None = None) -> None:
        super().__init__(handler)
        self._state_lock = threading.Lock()
        self._stored: set[str] = set()  # ids of stored responses
        self._reasoned: dict[str, str] = {}  # call_id -> the id of its reasoning item

    def _serves(self, path: str) -> bool:
        return path == "/v1/responses"

    def _error_payload(self, reply: Reply) -> Any:
        return error_body(reply.error, status_error_type(reply.status))

    def _respond(
        self,
        handler: RequestHandler,
        path: str,
        request: dict[str, Any],
        reply: Reply,
        number: int,
    ) -> None:
        problem = self._problem(request)
        if problem:
            handler.send_json(400, self._error_payload(Reply(status=400, error=problem)))
            return
        response = self._response(request, reply, number)
        if not request.get("stream"):
            handler.send_body(response, reply)
            return
        handler.send_events(_events(response, reply), reply)

    def _problem(self, request: dict[str, Any]) -> str:
        previous = request.get("previous_response_id")
        with self._state_lock:
            if previous is not None and previous not in self._stored:
                return f"Previous response with id '{previous}' not found."
            reasoned = dict(self._reasoned)
        seen: set[str] = set()
        for item in request.get("input") or ():
            if item.get("type") == "reasoning":
                seen.add(item.get("id"))
            elif item.get("type") == "function_call" and previous is None:
                needed = reasoned.get(item.get("call_id"))
                if needed is not None and needed not in seen:
                    return (
                        f"Item '{item.get('call_id')}' of type 'function_call' was provided "
                        f"without its required 'reasoning' item: '{needed}'."
                    )
        return ""

    def _response(self, request: dict[str, Any], reply: Reply, number: int) -> dict[str, Any]:
        output: list[dict[str, Any]] = []
        encrypted = "reasoning.encrypted_content" in (request.get("include") or ())
        reasoning_id = f"rs_{number:04d}"
        if reply.reasoning_content:
            item: dict[str, Any] = {
                "type": "reasoning",
                "id": reasoning_id,
                "summary": [{"type": "summary_text", "text": reply.reasoning_content}],
            }
            if encrypted:
                item["encrypted_content"] = base64.b64encode(
                    reply.reasoning_content.encode()
                ).decode()
            output.append(item)
        if reply.content:
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{number:04d}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": reply.content, "annotations": []}],
                }
            )
        output.extend(_searched(request, reply, number))
        for position, call in enumerate(reply.tool_calls):
            call_id = call.id or f"call_{number:04d}{position:02d}"
            output.append(
                {
                    "type": "function_call",
                    "id": f"fc_{number:04d}{position:02d}",
                    "call_id": call_id,
                    "name": call.function.name,
                    "arguments": call.function.arguments,
                    "status": "completed",
                }
            )
            if reply.reasoning_content:
                with self._state_lock:
                    self._reasoned[call_id] = reasoning_id
        response_id = f"resp_{number:06d}"
        if request.get("store"):
            with self._state_lock:
                self._stored.add(response_id)
        length = reply.finish_reason == "length"
        return {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": "incomplete" if length else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if length else None,
            "error": None,
            "model": request.get("model", ""),
            "output": output,
            "store": bool(request.get("store")),
            "usage": _usage(request, reply),
        }


def _searched(request: dict[str, Any], reply: Reply, number: int) -> list[dict[str, Any]]:
    """The hosted tool search's items that load the deferred tools ``reply`` calls."""
    tools = [t for t in request.get("tools") or () if isinstance(t, dict)]
    if not any(t.get("type") == "tool_search" for t in tools):
        return []
    deferred = {t.get("name"): t for t in tools if t.get("defer_loading")}
    loaded: set[str] = set()
    for item in request.get("input") or ():
        if isinstance(item, dict) and item.get("type") == "tool_search_output":
            loaded.update(str(t.get("name")) for t in item.get("tools") or ())
    wanted = [c.function.name for c in reply.tool_calls if c.function.name in deferred]
    items: list[dict[str, Any]] = []
    for position, name in enumerate(dict.fromkeys(wanted)):
        if name in loaded:
            continue
        common = {"execution": "server", "call_id": None, "status": "completed"}
        items.append(
            {
                "type": "tool_search_call",
                "id": f"tsc_{number:04d}{position:02d}",
                "arguments": {"paths": [name]},
                **common,
            }
        )
        items.append(
            {
                "type": "tool_search_output",
                "id": f"tso_{number:04d}{position:02d}",
                "tools": [deferred[name]],
                **common,
            }
        )
    return items


def _usage(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    if reply.usage is not None:
        prompt, completion = reply.usage.prompt_tokens, reply.usage.completion_tokens
        cached = reply.usage.cached_tokens
    else:
        prompt = len(json.dumps(request.get("input")).split())
        completion = len(reply.content.split()) + 5 * len(reply.tool_calls)
        cached = 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": len(reply.reasoning_content.split())},
        "total_tokens": prompt + completion,
    }


def _event(kind: str, number: int, **payload: Any) -> bytes:
    data = {"type": kind, "sequence_number": number, **payload}
    return b"event: %s\ndata: %s\n\n" % (kind.encode(), json.dumps(data).encode())


def _events(response: dict[str, Any], reply: Reply) -> list[bytes]:
    events: list[bytes] = []

    def add(kind: str, **payload: Any) -> None:
        events.append(_event(kind, len(events), **payload))

    shell = {**response, "status": "in_progress", "output": [], "usage": None}
    add("response.created", response=shell)
    for index, item in enumerate(response["output"]):
        kind = item["type"]
        if kind == "message":
            add("response.output_item.added", output_index=index, item={**item, "content": []})
            text = item["content"][0]["text"]
            for piece in _pieces(text, reply.chunks):
                add(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                )
                if reply.stream_error:
                    error = {"code": "server_error", "message": reply.stream_error}
                    add("response.failed", response={**shell, "status": "failed", "error": error})
                    return events
        elif kind == "function_call":
            add("response.output_item.added", output_index=index, item={**item, "arguments": ""})
            for piece in _pieces(item["arguments"], reply.chunks):
                add(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
        elif kind in ("tool_search_call", "tool_search_output"):
            add("response.output_item.added", output_index=index, item=item)
        else:
            add("response.output_item.added", output_index=index, item={**item, "summary": []})
            add(
                "response.reasoning_summary_text.delta",
                item_id=item["id"],
                output_index=index,
                summary_index=0,
                delta=item["summary"][0]["text"],
            )
        add("response.output_item.done", output_index=index, item=item)
    if reply.malformed:
        events.insert(1, b'data: {"type": "response.output_text.delta", \n\n')
    if reply.done:
        final = (
            "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        )
        add(final, response=response)
    return events
