"""The request JSON of the messages a model has sent, kept by the model to send them again.

An agent sends its whole conversation on every model call, so encoding each message once
keeps the cost of a call flat as the conversation grows. The cache belongs to the client: it
writes nothing onto a :class:`~agentkit.schema.Message` (messages are the core's objects).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

from agentkit.models.openai._wire import (
    attachment_items,
    attachments_bytes,
    message_bytes,
)
from agentkit.schema import Message, Role

__all__: list[str] = []

MAX_BYTES = 64 * 1024 * 1024
"""How many bytes of encodings a cache takes in before it starts afresh."""


class _Entry:
    """The encoding of one message, and the content it was made from."""

    __slots__ = ("attachments", "content", "data", "ref")

    def __init__(self, message: Message) -> None:
        # The content first, the encoding after: should another thread assign it in
        # between, the entry records the older text and is not used again (never stale).
        self.content: str = message.content
        self.data = message_bytes(message)
        # A tool message's media, for the user message after its turn (b"" for most).
        self.attachments = (
            attachment_items(message) if message.parts and message.role is Role.TOOL else b""
        )
        self.ref: weakref.ref[Message] | None = None


class EncodedMessages:
    """The request JSON of the messages a model has sent, reused for the same messages.

    Entries are keyed by message identity. The framework never changes a message once it
    was sent (messages are values, as events are facts), and neither should its users:
    build a new message instead (``attrs.evolve(message, name="bob")``). Only ``content`` is
    checked, because editing the text of a sent message in place (a chat app's "edit",
    trimming a long tool result) is the one change people make: an entry is used only
    while its message still holds the very ``content`` string it was encoded from. Checking
    every field would double the cost of a call's encoding (0.07 to 0.2 us per message;
    ``benchmarks/bench_openai_client.py``); anything else changed after sending (another
    field assigned, a change inside ``tool_calls`` or ``extra``) is not seen.

    An entry goes when its message is garbage-collected (a weak reference's callback), and
    all entries go at once when more than ``max_bytes`` of encodings were taken in since the
    last time, so the cache holds at most about ``max_bytes``. Lookups take no lock; adding
    an entry does. Safe to share between threads.
    """

    __slots__ = ("_attaching", "_entries", "_lock", "_max_bytes", "_size")

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self._entries: dict[int, _Entry] = {}
        self._lock = threading.Lock()
        self._max_bytes = max_bytes
        self._size = 0  # bytes taken in since the cache last started afresh
        # Set once a tool message with media was seen: only then is a list searched for
        # the tool messages whose media need a user message after them.
        self._attaching = False

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """Bytes of encodings taken in since the cache last started afresh."""
        return self._size

    def encode(self, messages: Sequence[Message]) -> list[bytes]:
        """Return the request JSON of each message, encoding only those not seen before.

        A Chat Completions tool message carries text only: after the tool messages of a
        turn, a user message carries the images, files and sounds their results hold (each
        tool message says so; see ``_wire.tool_content``).
        """
        get = self._entries.get
        encoded = [
            entry.data
            if (entry := get(id(message))) is not None and entry.content is message.content
            else self._add(message)
            for message in messages
        ]
        if self._attaching:
            return self._with_attachments(messages, encoded)
        return encoded

    def _with_attachments(self, messages: Sequence[Message], encoded: list[bytes]) -> list[bytes]:
        result: list[bytes] = []
        turn: list[Message] = []  # the tool messages in a row, with media or not
        for message, data in zip(messages, encoded, strict=True):
            if turn and message.role is not Role.TOOL:
                self._attach(turn, result)
            result.append(data)
            if message.role is Role.TOOL:
                turn.append(message)
        self._attach(turn, result)
        return result

    def _attach(self, turn: list[Message], result: list[bytes]) -> None:
        # The entries were made (or found) by encode() just before: each message's media
        # are encoded once, however many calls send the conversation again.
        get = self._entries.get
        items = [
            entry.attachments
            if (entry := get(id(message))) is not None
            else attachment_items(message)
            for message in turn
        ]
        if any(items):
            result.append(attachments_bytes(items))
        turn.clear()

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._size = 0

    def _add(self, message: Message) -> bytes:
        entry = _Entry(message)
        if entry.attachments:
            self._attaching = True
        key = id(message)
        entries = self._entries
        # The callback runs while the message is being freed, before its id can be reused.
        entry.ref = weakref.ref(message, lambda _, key=key: entries.pop(key, None))  # type: ignore[misc]
        with self._lock:
            self._size += len(entry.data)
            if self._size > self._max_bytes:
                entries.clear()
                self._size = len(entry.data)
            entries[key] = entry
        return entry.data
