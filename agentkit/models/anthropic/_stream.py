"""Reading a streamed Anthropic Messages reply (Server-Sent Events) into message chunks.

The events: ``message_start`` (the input usage), then per content block
``content_block_start``, ``content_block_delta`` (``text_delta``, ``input_json_delta``,
``thinking_delta``, ``signature_delta``) and ``content_block_stop``; ``message_delta`` (the
stop reason and the output usage), ``message_stop``; ``ping`` at any time, and ``error``
(an ``event: error``) when the API fails mid-stream, such as ``overloaded_error``.

Text and tool-call fragments are chunks as they come (a tool call's ``index`` is its block's
index). A thinking block is sent once finished: the chunk carries every finished thinking
block so far in ``extra["thinking_blocks"]`` (so the merged message holds them all), its text
having streamed in ``extra["reasoning_content"]``. So is a block of a tool Anthropic runs
itself (``server_tool_use``, whose input streams as ``input_json_delta`` pieces, and
``tool_search_tool_result``), in ``extra["server_tool_blocks"]``: no tool-call fragments come
of them. A stream that ends before ``message_delta`` (inside a thinking block, say) raises
:class:`~agentkit.errors.IncompleteStreamError`.
"""

from __future__ import annotations

import json
from typing import Any

from agentkit.errors import ModelError
from agentkit.models._http._sse import SSEError
from agentkit.models._http._stream import EventStream
from agentkit.models.anthropic._wire import (
    BLOCK_ORDER,
    SERVER_TOOL_BLOCKS,
    THINKING_BLOCKS,
    decode_json,
    error_in,
    finish,
    is_server_tool_block,
    unusual_order,
    usage,
)
from agentkit.schema import FunctionCall, Message, ResponseMeta, Role, TokenUsage, ToolCall

__all__ = ["AnthropicStream"]

_decode = json.JSONDecoder().decode


class AnthropicStream(EventStream):
    """A streamed Messages response whose first chunks have been read."""

    owner = "AnthropicChatModel"
    end_marker = "message_delta and message_stop"

    __slots__ = ("blocks", "input_usage", "order", "served", "texted", "thinking")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.blocks: dict[int, dict[str, Any]] = {}  # open blocks by index
        self.thinking: list[dict[str, Any]] = []  # finished thinking blocks
        self.served: list[dict[str, Any]] = []  # finished server tool blocks
        self.input_usage: dict[str, Any] = {}  # message_start's usage
        self.texted = False  # some text was streamed
        self.order: list[str | int] = []  # the finished blocks, as BLOCK_ORDER has them

    def read_payloads(self, payloads: list[bytes], batch: list[Message]) -> None:
        """Append the chunks of the SSE ``payloads`` to ``batch``."""
        url = self.url
        for payload in payloads:
            if type(payload) is SSEError:
                raise error_in(_loads(payload), url, 200, " in the stream")
            event = decode_json(payload, "a stream event", url, 200)
            if not isinstance(event, dict):
                continue
            chunk = self._read(event)
            if chunk is not None:
                self.count += 1
                batch.append(chunk)

    def _read(self, event: dict[str, Any]) -> Message | None:
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            return self._start(event)
        if kind == "content_block_stop":
            return self._stop(event)
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, dict) and isinstance(message.get("usage"), dict):
                self.input_usage = message["usage"]
            return None
        if kind == "message_delta":
            return self._message_delta(event)
        if kind == "message_stop":
            self.done = True
            return None
        if kind == "error":
            raise error_in(event, self.url, 200, " in the stream")
        return None  # ping, and event types added later

    def _start(self, event: dict[str, Any]) -> Message | None:
        index = event.get("index")
        block = event.get("content_block")
        if not isinstance(index, int) or not isinstance(block, dict):
            return None
        kind = block.get("type")
        self.blocks[index] = {
            "type": kind, "parts": [], "signature": "", "block": block, "chars": 0
        }
        if kind == "tool_use":
            call = ToolCall(
                block.get("id") or "", FunctionCall(block.get("name") or "", ""), index=index
            )
            return Message(Role.ASSISTANT, "", [call])
        if kind == "text" and block.get("text"):
            self.texted = True
            self.blocks[index]["chars"] = len(block["text"])
            return Message(Role.ASSISTANT, block["text"])
        return None

    def _delta(self, event: dict[str, Any]) -> Message | None:
        index = event.get("index")
        delta = event.get("delta")
        if not isinstance(delta, dict):
            return None
        kind = delta.get("type")
        state = self.blocks.get(index) if isinstance(index, int) else None
        if kind == "text_delta":
            text = delta.get("text") or ""
            if not text:
                return None
            self.texted = True
            if state is not None:
                state["chars"] += len(text)
            return Message(Role.ASSISTANT, text)
        if kind == "input_json_delta":
            piece = delta.get("partial_json") or ""
            if state is not None:
                state["parts"].append(piece)
                if state["type"] != "tool_use":
                    return None  # a server tool's input: kept whole in its block
            if not piece:
                return None
            call = ToolCall("", FunctionCall("", piece), index=index)
            return Message(Role.ASSISTANT, "", [call])
        if kind == "thinking_delta":
            text = delta.get("thinking") or ""
            if state is not None:
                state["parts"].append(text)
            return Message(Role.ASSISTANT, extra={"reasoning_content": text}) if text else None
        if kind == "signature_delta" and state is not None:
            state["signature"] += delta.get("signature") or ""
        return None

    def _stop(self, event: dict[str, Any]) -> Message | None:
        index = event.get("index")
        state = self.blocks.pop(index, None) if isinstance(index, int) else None
        if state is None:
            return None
        kind = state["type"]
        if kind == "text":
            self.order.append(state["chars"])
        elif kind == "tool_use":
            self.order.append("tool_use")
        elif kind in ("thinking", "redacted_thinking"):
            self.order.append("thinking")
        elif is_server_tool_block(kind):
            self.order.append("server")
        if kind == "tool_use" and not state["parts"]:
            # A call without arguments streams no input_json_delta: its input is {}.
            call = ToolCall("", FunctionCall("", "{}"), index=index)
            return Message(Role.ASSISTANT, "", [call])
        if kind == "thinking":
            block = {
                "type": "thinking",
                "thinking": (state["block"].get("thinking") or "") + "".join(state["parts"]),
                "signature": state["signature"] or state["block"].get("signature") or "",
            }
        elif kind == "redacted_thinking":
            block = dict(state["block"])
        elif is_server_tool_block(kind):
            return self._served(state)
        else:
            return None
        self.thinking = [*self.thinking, block]
        return Message(Role.ASSISTANT, extra={THINKING_BLOCKS: self.thinking})

    def _served(self, state: dict[str, Any]) -> Message:
        """The chunk of a finished server tool block: every one so far, as sent."""
        block = dict(state["block"])
        if state["parts"]:
            text = "".join(state["parts"])
            try:
                block["input"] = _decode(text) if text else {}
            except ValueError:
                raise ModelError(
                    f"the Anthropic API at {self.url} streamed server tool block "
                    f"{block.get('id')!r} with an input that is not valid JSON ({text[:200]!r})"
                ) from None
        self.served = [*self.served, block]
        return Message(Role.ASSISTANT, extra={SERVER_TOOL_BLOCKS: self.served})

    def _message_delta(self, event: dict[str, Any]) -> Message:
        delta = event.get("delta")
        if not isinstance(delta, dict):
            delta = {}
        counts = {**self.input_usage}
        later = event.get("usage")
        if isinstance(later, dict):  # output_tokens, and the input counts once more
            counts.update({key: value for key, value in later.items() if value is not None})
        totals: TokenUsage | None = usage(counts) if counts else None
        if totals is not None:
            self.tokens = totals.total_tokens
        extra: dict[str, Any] = {}
        order = unusual_order(self.order)
        if order is not None:
            extra[BLOCK_ORDER] = order
        reason, content = finish(delta.get("stop_reason"), "", extra)
        if self.texted:
            # A refusal after streamed text: that text is the content and the refusal.
            content = ""
            extra.pop("refusal", None)
        self.finished = True
        return Message(
            Role.ASSISTANT, content, response_meta=ResponseMeta(reason, totals), extra=extra
        )


def _loads(payload: bytes) -> Any:
    try:
        return _decode(payload.decode())
    except ValueError:
        return payload.decode("utf-8", "replace")
