"""A turn Anthropic paused (``stop_reason: "pause_turn"``), continued until it ends.

Anthropic runs its server tools (the tool search) in a loop of its own and may pause a long
turn: the reply ends with ``pause_turn``, sometimes with a ``server_tool_use`` block whose tool
has not run yet, and never with a client ``tool_use``. Its documentation says to continue it by
sending the paused content back as it is, as the last assistant message, with the same tools;
a continued turn may pause again. :class:`~agentkit.models.AnthropicChatModel` does this itself,
a bounded number of times, so the caller gets one finished reply: the replies' blocks joined in
order (text, tool calls, thinking and server tool blocks, ``block_order``), their usage added up.
A stream streams each reply's chunks in turn, as chunks of that one reply.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from agentkit.errors import ModelError
from agentkit.models._http._stream import Call, EventStream
from agentkit.models.anthropic._stream import AnthropicStream
from agentkit.models.anthropic._wire import (
    BLOCK_ORDER,
    SERVER_TOOL_BLOCKS,
    THINKING_BLOCKS,
    order_of,
    unusual_order,
)
from agentkit.schema import Message, ResponseMeta, Role, TokenUsage, concat_messages

__all__: list[str] = []

PAUSED = "pause_turn"
"""The finish reason of a paused reply (Anthropic's ``stop_reason``, passed through)."""

_BLOCK_LISTS = (THINKING_BLOCKS, SERVER_TOOL_BLOCKS)


def is_paused(reply: Message) -> bool:
    """Whether Anthropic paused the turn of ``reply`` (it is to be continued)."""
    meta = reply.response_meta
    return meta is not None and meta.finish_reason == PAUSED


def too_often(times: int) -> ModelError:
    """The error of a turn still paused after ``times`` continuations."""
    return ModelError(
        f"the Anthropic API paused the turn (stop_reason 'pause_turn') again after "
        f"{times} continuation{'s' if times != 1 else ''}, the most AnthropicChatModel sends; "
        "its server tools are still working: pass a larger "
        "AnthropicChatModel(..., max_continuations=...) to let it go on longer"
    )


def joined(first: Message, then: Message) -> Message:
    """``first``, a paused reply, and ``then``, its continuation, as one reply."""
    extra: dict[str, Any] = dict(first.extra)
    for key, value in then.extra.items():
        before = extra.get(key)
        if key in _BLOCK_LISTS and isinstance(before, list) and isinstance(value, list):
            extra[key] = [*before, *value]
        elif isinstance(before, str) and isinstance(value, str):
            extra[key] = before + value
        else:
            extra[key] = value
    extra.pop(BLOCK_ORDER, None)
    order = unusual_order([*order_of(first), *order_of(then)])
    if order is not None:
        extra[BLOCK_ORDER] = order
    return Message(
        Role.ASSISTANT,
        first.content + then.content,
        [*first.tool_calls, *then.tool_calls],
        response_meta=_added(first.response_meta, then.response_meta),
        extra=extra,
    )


def _added(first: ResponseMeta | None, then: ResponseMeta | None) -> ResponseMeta | None:
    """The meta of a joined reply: the last finish reason, the usages and costs added up."""
    if first is None or then is None:
        return then or first
    return ResponseMeta(
        then.finish_reason,
        _plus(first.usage, then.usage),
        None if first.cost is None and then.cost is None else (first.cost or 0) + (then.cost or 0),
    )


def _plus(first: TokenUsage | None, then: TokenUsage | None) -> TokenUsage | None:
    if first is None or then is None:
        return then or first
    return TokenUsage(
        first.prompt_tokens + then.prompt_tokens,
        first.completion_tokens + then.completion_tokens,
        first.total_tokens + then.total_tokens,
        first.cached_tokens + then.cached_tokens,
        first.cache_write_tokens + then.cache_write_tokens,
    )


class ContinuedStream:
    """The streamed requests of one turn: the first, then one per pause, read as one stream.

    ``open_next(paused)`` makes the call that continues the turn so far (``paused``), not sent.
    Closing (``close``) or aborting (``abort``, from another thread) reaches whichever request
    is in flight, and a continuation is not sent once either happened.
    """

    def __init__(
        self,
        open_stream: Callable[[Call], EventStream],
        next_call: Callable[[Message], Call],
        max_continuations: int,
    ) -> None:
        self._open_stream = open_stream
        self._next_call = next_call
        self._max = max_continuations
        self._lock = threading.Lock()
        self._call: Call | None = None
        self._opened: EventStream | None = None
        self._ended = False

    def open(self, call: Call) -> EventStream:
        """Send ``call``; its stream becomes the one a close or an abort reaches."""
        with self._lock:
            if self._ended:
                raise call.cancelled()
            self._call = call
        opened = self._open_stream(call)
        if not self._keep(opened):  # closed while it was being sent
            opened.close()
            raise call.cancelled()
        return opened

    def _keep(self, opened: EventStream) -> bool:
        with self._lock:
            self._opened = opened
            return not self._ended

    def abort(self) -> None:
        """Make a blocked read of the request in flight return (it must not block)."""
        with self._lock:
            self._ended = True
            call = self._call
        if call is not None:
            call.guard.abort()

    def close(self) -> None:
        """Release the request in flight; send no continuation."""
        with self._lock:
            self._ended = True
            opened = self._opened
        if opened is not None:
            opened.close()

    def batches(self, opened: EventStream) -> Iterator[list[Message]]:
        """The chunks of each reply of the turn, as chunks of one reply."""
        before: Message | None = None  # the paused replies so far, joined
        next_index = 0  # where the tool-call indices of the next reply start
        continuations = 0
        while True:
            chunks: list[Message] = []
            highest = -1
            for batch in opened.chunks():
                out: list[Message] = []
                for chunk in batch:
                    chunks.append(chunk)
                    highest = max([highest, *(c.index or 0 for c in chunk.tool_calls)])
                    out.append(_as_part_of(chunk, before, next_index, chunks))
                yield out
            opened.close()
            reply = concat_messages(chunks)
            if not is_paused(reply):
                return
            blocks = len(opened.order) if isinstance(opened, AnthropicStream) else 0
            next_index += max(blocks, highest + 1)
            before = reply if before is None else joined(before, reply)
            if continuations == self._max:
                raise too_often(continuations)
            continuations += 1
            opened = self.open(self._next_call(before))


def _as_part_of(
    chunk: Message, before: Message | None, next_index: int, chunks: list[Message]
) -> Message:
    """``chunk`` of a reply that follows the paused replies ``before``, as a chunk of the
    whole turn; ``chunks`` are this reply's so far (``chunk`` last)."""
    meta = chunk.response_meta
    if meta is not None and meta.finish_reason == PAUSED:
        # Not the turn's end: the last reply's chunk carries the turn's usage.
        return attrs.evolve(chunk, response_meta=None)
    if before is None:
        return chunk
    changes: dict[str, Any] = {}
    if chunk.tool_calls and next_index:
        changes["tool_calls"] = [
            call if call.index is None else attrs.evolve(call, index=call.index + next_index)
            for call in chunk.tool_calls
        ]
    extra = dict(chunk.extra)
    for key in _BLOCK_LISTS:
        kept = before.extra.get(key)
        if isinstance(extra.get(key), list) and isinstance(kept, list):
            extra[key] = [*kept, *extra[key]]
    if meta is not None:  # the end of the turn
        whole = joined(before, concat_messages(chunks))
        changes["response_meta"] = whole.response_meta
        extra.pop(BLOCK_ORDER, None)
        if BLOCK_ORDER in whole.extra:
            extra[BLOCK_ORDER] = whole.extra[BLOCK_ORDER]
    if extra != dict(chunk.extra):
        changes["extra"] = extra
    return attrs.evolve(chunk, **changes) if changes else chunk
