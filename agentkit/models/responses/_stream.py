"""Reading a streamed Responses API reply (Server-Sent Events) into message chunks.

Events used: ``response.output_item.added`` (a function call's id and name),
``response.output_text.delta``, ``response.refusal.delta``,
``response.function_call_arguments.delta``, ``response.reasoning_summary_text.delta``,
``response.output_item.done`` (a finished reasoning item, or an item of the hosted tool
search, ``tool_search_call`` or ``tool_search_output``, kept to be sent back),
``response.completed`` / ``response.incomplete`` (the finish reason and the usage: the end),
``response.failed`` and ``error`` (a :class:`~agentkit.errors.ModelError`); the others
(``response.created``, ``...done`` events that repeat what the deltas said) are skipped. A
stream that fails mid-item ends with the error after the chunks it delivered; one that ends
before ``response.completed`` raises :class:`~agentkit.errors.IncompleteStreamError`.
"""

from __future__ import annotations

from typing import Any

from agentkit.models._http._sse import SSEError
from agentkit.models._http._stream import EventStream
from agentkit.models.responses._wire import (
    REASONING_ITEMS,
    RESPONSE_ID,
    SERVER_TOOL_ITEMS,
    SERVER_TOOL_KINDS,
    decode_json,
    failure,
    finish_reason,
    usage,
)
from agentkit.schema import FunctionCall, Message, ResponseMeta, Role, ToolCall

__all__ = ["ResponsesStream"]


class ResponsesStream(EventStream):
    """A streamed Responses API reply whose first chunks have been read."""

    owner = "OpenAIResponsesModel"
    end_marker = "response.completed"

    __slots__ = ("calls", "reasoning", "served")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reasoning: list[dict[str, Any]] = []  # finished reasoning items
        self.served: list[dict[str, Any]] = []  # finished hosted tool search items
        self.calls = 0

    def read_payloads(self, payloads: list[bytes], batch: list[Message]) -> None:
        """Append the chunks of the SSE ``payloads`` to ``batch``."""
        for payload in payloads:
            event = decode_json(payload, "a stream event", self.url, 200)
            if type(payload) is SSEError or not isinstance(event, dict):
                raise failure(event, self.url, 200)
            chunk = self._read(event)
            if chunk is not None:
                self.count += 1
                batch.append(chunk)

    def _read(self, event: dict[str, Any]) -> Message | None:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            text = event.get("delta") or ""
            return Message(Role.ASSISTANT, text) if text else None
        if kind == "response.function_call_arguments.delta":
            piece = event.get("delta") or ""
            if not piece:
                return None
            call = ToolCall("", FunctionCall("", piece), index=event.get("output_index"))
            return Message(Role.ASSISTANT, "", [call])
        if kind == "response.output_item.added":
            item = event.get("item") or {}
            if item.get("type") != "function_call":
                return None
            self.calls += 1
            call = ToolCall(
                item.get("call_id") or item.get("id") or "",
                FunctionCall(item.get("name") or "", item.get("arguments") or ""),
                index=event.get("output_index"),
            )
            return Message(Role.ASSISTANT, "", [call])
        if kind == "response.reasoning_summary_text.delta":
            text = event.get("delta") or ""
            return Message(Role.ASSISTANT, extra={"reasoning_content": text}) if text else None
        if kind == "response.refusal.delta":
            text = event.get("delta") or ""
            return Message(Role.ASSISTANT, text, extra={"refusal": text}) if text else None
        if kind == "response.output_item.done":
            return self._item_done(event.get("item") or {})
        if kind in ("response.completed", "response.incomplete"):
            response = event.get("response") or {}
            self.finished = self.done = True
            totals = usage(response.get("usage"))
            if totals is not None:
                self.tokens = totals.total_tokens
            extra: dict[str, Any] = {}
            if isinstance(response.get("id"), str):
                extra[RESPONSE_ID] = response["id"]
            meta = ResponseMeta(finish_reason(response, self.calls > 0), totals)
            return Message(Role.ASSISTANT, response_meta=meta, extra=extra)
        if kind == "response.failed":
            raise failure(event.get("response") or event, self.url, 200)
        if kind == "error":
            raise failure({"error": event}, self.url, 200)
        return None

    def _item_done(self, item: dict[str, Any]) -> Message | None:
        """The chunk of a finished item kept to be sent back: every one of its kind so far."""
        kind = item.get("type")
        if kind == "reasoning":
            self.reasoning = [*self.reasoning, item]
            return Message(Role.ASSISTANT, extra={REASONING_ITEMS: self.reasoning})
        if kind in SERVER_TOOL_KINDS:
            self.served = [*self.served, item]
            return Message(Role.ASSISTANT, extra={SERVER_TOOL_ITEMS: self.served})
        return None
