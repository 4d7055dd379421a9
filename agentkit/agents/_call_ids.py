"""One id per tool call of a model reply, made so when a model repeats one.

A call's id is its name: the history pairs it with its result, and the interrupt address
``tool:<name>:<call id>`` is where an approval or an interrupt of that call is decided. A model
that gives two calls of one reply the same id (or none) would make them one point: one approval
request, and approving it would run both. Later calls that repeat an id get a derived one,
``<id>#2``, ``<id>#3``..., in the reply itself, so the history, the events, the tool results and
the addresses all carry it.
"""

from __future__ import annotations

import attrs

from agentkit._stream_base import StreamReader
from agentkit.schema import Message, ToolCall

__all__ = ["UniqueCallIds", "unique_call_ids"]


def _derived(call_id: str, used: set[str]) -> str:
    number = 2
    while f"{call_id}#{number}" in used:
        number += 1
    derived = f"{call_id}#{number}"
    used.add(derived)
    return derived


def unique_call_ids(message: Message) -> Message:
    """``message`` with every tool call id unique: a repeated id becomes ``<id>#<n>``.

    The first call with an id keeps it. Returns ``message`` itself when its ids are unique.
    """
    calls = message.tool_calls
    if len(calls) < 2:
        return message
    ids = [call.id for call in calls]
    if len(set(ids)) == len(ids):
        return message
    used = set(ids)
    seen: set[str] = set()
    fixed: list[ToolCall] = []
    for call in calls:
        if call.id in seen:
            call = attrs.evolve(call, id=_derived(call.id, used))
        seen.add(call.id)
        fixed.append(call)
    return attrs.evolve(message, tool_calls=fixed)


class UniqueCallIds(StreamReader[Message]):
    """A model's reply stream with every tool call id unique (see :func:`unique_call_ids`).

    A streamed call comes in fragments sharing an ``index``; its id is in the first fragment
    (some servers repeat it in every one). A fragment whose index already has an id carries that
    id; a new index whose id an earlier call has gets a derived id. Fragments without an index
    are calls of their own. Chunks without tool calls pass as they are.
    """

    __slots__ = ("_by_index", "_seen", "_source")

    def __init__(self, source: StreamReader[Message]) -> None:
        super().__init__()
        self._source = source
        self._by_index: dict[int, str] = {}
        self._seen: set[str] = set()

    def _recv(self) -> Message:
        chunk = self._source._recv()
        return self._fix(chunk) if chunk.tool_calls else chunk

    def _recv_batch(self) -> list[Message]:
        batch = self._source._recv_batch()
        return [self._fix(chunk) if chunk.tool_calls else chunk for chunk in batch]

    def close(self) -> None:
        self._source.close()

    def _fix(self, chunk: Message) -> Message:
        fixed: list[ToolCall] | None = None
        for position, call in enumerate(chunk.tool_calls):
            wanted = self._id_of(call)
            if wanted == call.id:
                continue
            if fixed is None:
                fixed = list(chunk.tool_calls)
            fixed[position] = attrs.evolve(call, id=wanted)
        return chunk if fixed is None else attrs.evolve(chunk, tool_calls=fixed)

    def _id_of(self, call: ToolCall) -> str:
        index = call.index
        if index is not None:
            known = self._by_index.get(index)
            if known is not None:
                return known if call.id else call.id
            if not call.id:
                return call.id  # the id comes in a later fragment
        call_id = call.id
        if call_id in self._seen:
            call_id = _derived(call_id, self._seen)
        self._seen.add(call_id)
        if index is not None:
            self._by_index[index] = call_id
        return call_id
