"""What a conversation store is: the :class:`ConversationStore` protocol and its lock.

A conversation is an append-only log of messages under an id. The Runner loads it at the start
of a turn (``with_conversation_id``), takes the conversation's lock for the turn (one writer at
a time: a second turn raises :class:`~agentkit.ConversationBusyError`) and appends the turn's
messages when it completes.

Messages are stored as JSON (``Message.to_dict`` / ``Message.from_dict``), never pickled, so a
store holds nothing that runs code when read. Each message is one *record*: UTF-8 JSON text of
at most ``max_record_bytes`` (:data:`DEFAULT_MAX_RECORD_BYTES` unless the store is told
otherwise). A record that cannot be read (damaged, written by hand, over the limit) makes
``load`` raise :class:`~agentkit.errors.ConversationRecordError` naming the conversation and the
record's position; ``drop_record`` removes it, and the conversation loads again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agentkit._lazy import present
from agentkit.errors import ConversationBusyError
from agentkit.schema import Message

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "MAX_CONVERSATION_ID_BYTES",
    "ConversationLock",
    "ConversationStore",
    "busy",
]

DEFAULT_MAX_RECORD_BYTES = 4 * 2**20
"""The largest record (one message as UTF-8 JSON) a built-in store writes or reads: 4 MiB."""

MAX_CONVERSATION_ID_BYTES = 1024
"""The longest conversation id, in bytes of UTF-8, that the stores accept."""


@runtime_checkable
class ConversationLock(Protocol):
    """A held conversation lock; :meth:`release` gives it up (idempotent)."""

    def release(self) -> None:
        """Give the lock up."""
        ...


@runtime_checkable
class ConversationStore(Protocol):
    """Where conversations live: append-only message logs, one writer per conversation.

    ``load``, ``append``, ``delete`` and ``drop_record`` may be called from any thread.
    ``lock`` is what makes a conversation single-writer: the Runner holds it for the length
    of a turn.

    An id is a non-empty ``str`` of at most :data:`MAX_CONVERSATION_ID_BYTES` bytes of UTF-8,
    without lone surrogates and without NUL; every method raises ``ValueError`` for any other
    id, before touching the store. ``:``, ``/`` and other punctuation are ordinary characters.
    """

    def load(self, conversation_id: str) -> list[Message]:
        """Return the conversation's messages, oldest first (``[]`` for an unknown id).

        Raises:
            ConversationRecordError: a stored record cannot be read; the error names the
                conversation and the record's position (``index``), for :meth:`drop_record`.
        """
        ...

    def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the conversation (all of them, or none on failure).

        Raises:
            ConversationRecordError: a message is over the store's record size limit
                (``index`` is its position in ``messages``); nothing is appended.
        """
        ...

    def drop_record(self, conversation_id: str, index: int) -> None:
        """Remove the record at position ``index`` (0 is the oldest) to repair a conversation.

        The records after it move up by one, as with ``list.pop(index)``. Works whether the
        record is readable or not; takes the conversation's lock for the change.

        Raises:
            IndexError: the conversation has no record at ``index`` (or ``index`` < 0).
            ConversationBusyError: a turn of the conversation is running.
        """
        ...

    def delete(self, conversation_id: str) -> None:
        """Forget the conversation (nothing happens for an unknown id)."""
        ...

    def lock(self, conversation_id: str) -> ConversationLock:
        """Take the conversation's writer lock at once.

        Raises:
            ConversationBusyError: another writer (thread or process) holds it.
        """
        ...


def busy(conversation_id: str, where: str = "") -> ConversationBusyError:
    """The error for a conversation whose lock is taken."""
    place = f" ({where})" if where else ""
    return ConversationBusyError(
        f"conversation {conversation_id!r} is busy: another turn of it is running{place}. "
        "One turn at a time per conversation: wait for that turn to end (or close its "
        "event iterator) and try again",
        conversation_id=conversation_id,
    )


# Defined here; documented and imported as agentkit.conversation.
present((ConversationLock, ConversationStore), "agentkit.conversation")
