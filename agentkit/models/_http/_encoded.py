"""The request JSON of the messages a model has sent, kept by the model to send them again.

Each wire gives the cache its own encoder (a message in, the bytes of its request JSON out).

An agent sends its whole conversation on every model call, so encoding each message once
keeps the cost of a call flat as the conversation grows. The cache belongs to the client: it
writes nothing onto a :class:`~agentkit.schema.Message` (messages are the core's objects).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence

from agentkit.schema import Message, Role

__all__: list[str] = []

MAX_BYTES = 64 * 1024 * 1024
"""How many bytes of encodings a cache takes in before it starts afresh."""


Attachments = tuple[Callable[[Message], bytes], Callable[[list[bytes]], bytes]]
"""For a wire whose tool messages carry text only: a tool message's media as request items
(``b""`` for none), and the user message that carries the items of one turn's tool messages."""


class _Entry:
    """The encoding of one message, and the content and parts it was made from."""

    __slots__ = ("attachments", "content", "data", "parts", "ref")

    def __init__(
        self,
        message: Message,
        encoder: Callable[[Message], bytes],
        attachments: Callable[[Message], bytes] | None,
    ) -> None:
        # The content first, the encoding after: should another thread assign it in
        # between, the entry records the older text and is not used again (never stale).
        self.content: str = message.content
        self.parts = message.parts
        self.data = encoder(message)
        # A tool message's media, for the user message after its turn (b"" for most).
        self.attachments = (
            attachments(message)
            if attachments is not None and message.parts and message.role is Role.TOOL
            else b""
        )
        self.ref: weakref.ref[Message] | None = None


class EncodedMessages:
    """The request JSON of the messages a model has sent, reused for the same messages.

    Entries are keyed by message identity. The framework never changes a message once it
    was sent (messages are values, as events are facts), and neither should its users:
    build a new message instead (``attrs.evolve(message, name="bob")``). Only ``content`` and
    ``parts`` are checked, because editing the text or the attachments of a sent message in
    place (a chat app's "edit", trimming a long tool result, dropping an old screenshot) is
    the one change people make: an entry is used only while its message still holds the
    very ``content`` string and ``parts`` tuple it was encoded from (an identity check each:
    parts are values, so a new tuple is a change and the same tuple is not). Checking
    every field would double the cost of a call's encoding (0.07 to 0.2 us per message;
    ``benchmarks/bench_openai_client.py``); anything else changed after sending (another
    field assigned, a change inside ``tool_calls`` or ``extra``) is not seen.

    An entry goes when its message is garbage-collected (a weak reference's callback), and
    all entries go at once when more than ``max_bytes`` of encodings were taken in since the
    last time, so the cache holds at most about ``max_bytes``. Lookups take no lock; adding
    an entry does. Safe to share between threads.
    """

    __slots__ = (
        "_attaching", "_attachments", "_encoder", "_entries", "_lock", "_max_bytes", "_size"
    )

    def __init__(
        self,
        encoder: Callable[[Message], bytes],
        max_bytes: int = MAX_BYTES,
        *,
        attachments: Attachments | None = None,
    ) -> None:
        self._encoder = encoder
        self._attachments = attachments
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

        With ``attachments`` (a wire whose tool messages carry text only), a user message
        after the tool messages of a turn carries the images, files and sounds their
        results hold.
        """
        get = self._entries.get
        encoded = [
            entry.data
            if (entry := get(id(message))) is not None
            and entry.content is message.content
            and entry.parts is message.parts
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
        assert self._attachments is not None  # _attaching is set only with attachments
        items_of, join = self._attachments
        get = self._entries.get
        items = [
            entry.attachments if (entry := get(id(message))) is not None else items_of(message)
            for message in turn
        ]
        if any(items):
            result.append(join(items))
        turn.clear()

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._size = 0

    def _add(self, message: Message) -> bytes:
        entry = _Entry(
            message, self._encoder, None if self._attachments is None else self._attachments[0]
        )
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


def join_turns(
    messages: Sequence[Message], pieces: Sequence[bytes], user: bytes, assistant: bytes
) -> bytes:
    """Join the encoded messages of a conversation into turns, for the wires that alternate.

    ``pieces`` are the messages' items without brackets (``_encoded`` keeps them). Consecutive
    messages of one side (the assistant's; the user's and the tool results) make one turn,
    which opens with ``user`` or ``assistant`` (such as ``b'{"role":"user","content":['``)
    and closes with ``]}``; turns are separated by commas.
    """
    out: list[bytes] = []
    append = out.append
    previous: bool | None = None
    for message, piece in zip(messages, pieces, strict=True):
        side = message.role is Role.ASSISTANT
        if side is previous:
            append(b",")
        else:
            if previous is not None:
                append(b"]},")
            append(assistant if side else user)
            previous = side
        append(piece)
    if previous is not None:
        append(b"]}")
    return b"".join(out)
