"""What a conversation store is: the :class:`ConversationStore` protocol and its lock.

A conversation is an append-only log of messages under an id. The Runner loads it at the start
of a turn (``with_conversation_id``), takes the conversation's lock for the turn (one writer at
a time: a second turn raises :class:`~agentkit.ConversationBusyError`) and appends the turn's
messages when it completes.

Messages are stored as JSON (``Message.to_dict`` / ``Message.from_dict``), never pickled, so a
store holds nothing that runs code when read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agentkit.errors import ConversationBusyError
from agentkit.schema import Message

__all__ = ["ConversationLock", "ConversationStore", "busy"]


@runtime_checkable
class ConversationLock(Protocol):
    """A held conversation lock; :meth:`release` gives it up (idempotent)."""

    def release(self) -> None:
        """Give the lock up."""
        ...


@runtime_checkable
class ConversationStore(Protocol):
    """Where conversations live: append-only message logs, one writer per conversation.

    ``load``, ``append`` and ``delete`` may be called from any thread. ``lock`` is what makes
    a conversation single-writer: the Runner holds it for the length of a turn.
    """

    def load(self, conversation_id: str) -> list[Message]:
        """Return the conversation's messages, oldest first (``[]`` for an unknown id)."""
        ...

    def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the conversation (all of them, or none on failure)."""
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
        "event iterator) and try again"
    )
