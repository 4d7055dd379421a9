"""A conversation store in memory (one process; for tests, notebooks and single-process apps)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from agentkit._lazy import present
from agentkit.conversation._base import DEFAULT_MAX_RECORD_BYTES, ConversationLock, busy
from agentkit.conversation._records import (
    ThreadLocks,
    check_id,
    check_index,
    check_max_record_bytes,
    decode_records,
    encode_records,
    out_of_range,
)
from agentkit.schema import Message

__all__ = ["InMemoryConversationStore"]


class InMemoryConversationStore:
    """Conversations in a dict, kept as encoded records (so loads return fresh copies).

    Args:
        max_record_bytes: the largest record (one message as UTF-8 JSON) appended or loaded.
    """

    def __init__(self, *, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> None:
        self._max_record_bytes = check_max_record_bytes(max_record_bytes)
        self._lock = threading.Lock()
        self._logs: dict[str, list[bytes]] = {}
        self._locks = ThreadLocks()

    @property
    def max_record_bytes(self) -> int:
        """The largest record this store appends or loads, in bytes."""
        return self._max_record_bytes

    def load(self, conversation_id: str) -> list[Message]:
        """Return the conversation's messages, oldest first."""
        with self._lock:
            records = list(self._logs.get(check_id(conversation_id), ()))
        return decode_records(conversation_id, records, self._max_record_bytes)

    def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the conversation."""
        records = encode_records(check_id(conversation_id), messages, self._max_record_bytes)
        with self._lock:
            self._logs.setdefault(conversation_id, []).extend(records)

    def delete(self, conversation_id: str) -> None:
        """Forget the conversation."""
        with self._lock:
            self._logs.pop(check_id(conversation_id), None)

    def drop_record(self, conversation_id: str, index: int) -> None:
        """Remove the record at position ``index`` (0 is the oldest; the later ones move up).

        Raises:
            IndexError: there is no record at ``index``.
            ConversationBusyError: a turn of the conversation is running.
        """
        check_id(conversation_id)
        check_index(index)
        lock = self.lock(conversation_id)
        try:
            with self._lock:
                records = self._logs.get(conversation_id, [])
                if not 0 <= index < len(records):
                    raise out_of_range(conversation_id, index, len(records))
                del records[index]
        finally:
            lock.release()

    def lock(self, conversation_id: str) -> ConversationLock:
        """Take the conversation's writer lock (raises ConversationBusyError if taken)."""
        check_id(conversation_id)
        if not self._locks.take(conversation_id):
            raise busy(conversation_id)
        return _Held(self._locks, conversation_id)

    def __repr__(self) -> str:
        return "InMemoryConversationStore()"


class _Held:
    __slots__ = ("_id", "_locks", "_released")

    def __init__(self, locks: ThreadLocks, conversation_id: str) -> None:
        self._locks = locks
        self._id = conversation_id
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._locks.give_back(self._id)


# Defined here; documented and imported as agentkit.conversation.
present((InMemoryConversationStore,), "agentkit.conversation")
