"""One turn of a conversation inside a Runner run (framework-internal).

The Runner starts a turn before its worker thread starts (taking the conversation's lock,
loading the history), and ends it when the run ends: a completed run appends the turn's
messages, an interrupted one saves the turn in its checkpoint, so the resumed run, once it
completes, appends them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from agentkit._persist import persisted
from agentkit.conversation._records import check_id
from agentkit.conversation.base import ConversationLock, ConversationStore
from agentkit.conversation.trim import HistoryTrimmer
from agentkit.schema import Message

if TYPE_CHECKING:
    from agentkit._runctx import RecordedEvent

__all__ = ["ConversationTurn", "OpenTurn", "open_turn", "resume_turn"]


@persisted("agentkit.ConversationTurn")
@attrs.define
class ConversationTurn:
    """What a checkpoint keeps of an interrupted turn: where it goes and what was new."""

    conversation_id: str
    new_messages: list[Message]


@attrs.define(eq=False)
class OpenTurn:
    """A turn in progress: its store, its lock and what it appends when it completes."""

    store: ConversationStore
    lock: ConversationLock
    turn: ConversationTurn

    def complete(self, history: Sequence[RecordedEvent]) -> None:
        """Append the turn's new messages and what the agents said (the run's ``history``)."""
        said = [
            message
            for record in history
            if record.err is None and (message := _message(record)) is not None
        ]
        self.store.append(self.turn.conversation_id, [*self.turn.new_messages, *said])

    def release(self) -> None:
        """Give the conversation's lock back."""
        self.lock.release()


def _message(record: RecordedEvent) -> Message | None:
    try:
        return record.message()
    except Exception:
        return None  # a stream that broke: nothing of it is kept


def open_turn(
    store: ConversationStore,
    conversation_id: str,
    new_messages: Sequence[Message],
    trim: HistoryTrimmer | None,
) -> tuple[OpenTurn, list[Message]]:
    """Lock the conversation and load it; return the turn and the run's input messages.

    Raises:
        ConversationBusyError: another turn of the conversation is running.
    """
    check_id(conversation_id)
    lock = store.lock(conversation_id)
    try:
        history = store.load(conversation_id)
        if trim is not None:
            history = list(trim(list(history)))
    except BaseException:
        lock.release()
        raise
    turn = ConversationTurn(conversation_id, list(new_messages))
    return OpenTurn(store, lock, turn), [*history, *new_messages]


def resume_turn(store: ConversationStore, turn: ConversationTurn) -> OpenTurn:
    """Lock the conversation of an interrupted turn that is being resumed."""
    return OpenTurn(store, store.lock(turn.conversation_id), turn)
