"""What the conversation stores share: id checks, the JSON line format, per-id thread locks.

Framework-internal; custom stores may use these, but only the protocols in
:mod:`agentkit.conversation.base` are API.
"""

from __future__ import annotations

import json
import threading

from agentkit.schema import Message


def check_id(conversation_id: object) -> str:
    """Refuse ids that are not non-empty strings."""
    if not isinstance(conversation_id, str) or not conversation_id:
        raise ValueError(f"a conversation id must be a non-empty string (got {conversation_id!r})")
    return conversation_id


def encode(message: Message) -> str:
    """One message as one line of JSON."""
    if not isinstance(message, Message):
        raise TypeError(f"conversations hold Message objects, not {type(message).__name__}")
    return json.dumps(message.to_dict(), ensure_ascii=False, separators=(",", ":"))


def decode(line: str | bytes) -> Message:
    """The message of one line of JSON."""
    return Message.from_dict(json.loads(line))


class ThreadLocks:
    """Per-id locks inside one process (what every store adds to its cross-process lock)."""

    __slots__ = ("_held", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()

    def take(self, conversation_id: str) -> bool:
        with self._lock:
            if conversation_id in self._held:
                return False
            self._held.add(conversation_id)
            return True

    def give_back(self, conversation_id: str) -> None:
        with self._lock:
            self._held.discard(conversation_id)
