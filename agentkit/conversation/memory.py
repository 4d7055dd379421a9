"""A conversation store in memory (one process; for tests, notebooks and single-process apps)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from agentkit.conversation._records import ThreadLocks, check_id, decode, encode
from agentkit.conversation.base import ConversationLock, busy
from agentkit.schema import Message

__all__ = ["InMemoryConversationStore"]


class InMemoryConversationStore:
    """Conversations in a dict, kept as JSON lines (so loads return fresh copies)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, list[str]] = {}
        self._locks = ThreadLocks()

    def load(self, conversation_id: str) -> list[Message]:
        """Return the conversation's messages, oldest first."""
        with self._lock:
            lines = list(self._logs.get(check_id(conversation_id), ()))
        return [decode(line) for line in lines]

    def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the conversation."""
        lines = [encode(message) for message in messages]
        with self._lock:
            self._logs.setdefault(check_id(conversation_id), []).extend(lines)

    def delete(self, conversation_id: str) -> None:
        """Forget the conversation."""
        with self._lock:
            self._logs.pop(check_id(conversation_id), None)

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
