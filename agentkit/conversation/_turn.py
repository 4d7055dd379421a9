"""One turn of a conversation inside a Runner run (framework-internal).

The Runner starts a turn before its worker thread starts (taking the conversation's lock,
loading the history), and ends it when the run ends: a completed run appends the turn's
messages, an interrupted one saves the turn in its checkpoint, so the resumed run, once it
completes, appends them.

Every completed turn is recorded in the conversation itself, on its first message:
``extra["agentkit_turn"]`` holds how many records it appended (``records``), how many of them
it brought (``new``), for each message its agents said, the agent and the run path
(``said``), and, for a turn with a key (``with_conversation_id(..., turn_key=...)``), the
key. Written in the same append as the turn's messages, the record is atomic with them
in every store and lives and goes with the conversation. While the turn runs (and in the
checkpoint of an interrupted one) the mark holds only the key.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._persist import persisted
from agentkit.conversation._base import ConversationLock, ConversationStore
from agentkit.conversation._records import TURN_MARK, check_id, fold_rollbacks
from agentkit.conversation._trim import HistoryTrimmer
from agentkit.errors import AgentKitValueError
from agentkit.schema import Message

if TYPE_CHECKING:
    from agentkit._runctx import RecordedEvent

__all__ = [
    "TURN_MARK",
    "ConversationTurn",
    "DoneTurn",
    "OpenTurn",
    "SaidMessage",
    "open_turn",
    "resume_turn",
]

_log = logging.getLogger("agentkit")


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
            (record, message)
            for record in history
            if record.err is None and (message := _message(record)) is not None
        ]
        new = self.turn.new_messages
        messages = [message for _, message in said]
        appended = [*new, *messages]
        if not appended:
            return
        # Every turn's first record says what the turn appended: where it ends (so that a
        # conversation can be rolled back by turns) and who said what (its events); a keyed
        # turn's also says what to give back to a repeat of it.
        mark = new[0].extra.get(TURN_MARK) if new else None
        done: dict[str, Any] = {"key": mark.get("key")} if isinstance(mark, dict) else {}
        done.update({
            "new": len(new),
            "records": len(appended),
            "said": [
                [record.agent_name, [str(step) for step in record.run_path]]
                for record, _ in said
            ],
        })
        appended[0] = _with_mark(appended[0], done)
        self.store.append(self.turn.conversation_id, appended)

    def release(self) -> None:
        """Give the conversation's lock back."""
        self.lock.release()


def _message(record: RecordedEvent) -> Message | None:
    try:
        return record.message()
    except Exception:
        return None  # a stream that broke: nothing of it is kept


@attrs.frozen
class SaidMessage:
    """A message an agent said in a completed turn, as the conversation keeps it."""

    agent_name: str
    run_path: tuple[str, ...]
    message: Message


@attrs.frozen
class DoneTurn:
    """A turn the conversation holds already, found by its key: what its agents said."""

    conversation_id: str
    key: str
    said: tuple[SaidMessage, ...]


def open_turn(
    store: ConversationStore,
    conversation_id: str,
    new_messages: Sequence[Message],
    trim: HistoryTrimmer | None,
    turn_key: str | None = None,
) -> tuple[OpenTurn, list[Message]] | DoneTurn:
    """Lock the conversation and load it; return the turn and the run's input messages.

    With ``turn_key``, a conversation that holds a completed turn of that key returns it
    (a :class:`DoneTurn`) instead, and the lock is given back at once.

    Raises:
        ConversationBusyError: another turn of the conversation is running.
        ValueError: a turn key was given for a turn that brings no message.
    """
    check_id(conversation_id)
    new = [_without_mark(message) for message in new_messages]
    if turn_key is not None:
        if not new:
            raise AgentKitValueError(
                "a turn with a turn_key must bring at least one message (the key is kept "
                "on the turn's first message)"
            )
        new[0] = _with_mark(new[0], {"key": turn_key})
    lock = store.lock(conversation_id)
    try:
        # (a store that reads its records otherwise than the built-in ones may show markers)
        history = fold_rollbacks(store.load(conversation_id))
        if turn_key is not None:
            done = _find(conversation_id, history, turn_key)
            if done is not None:
                lock.release()
                return done
        if trim is not None:
            history = list(trim(list(history)))
    except BaseException:
        lock.release()
        raise
    turn = ConversationTurn(conversation_id, new)
    return OpenTurn(store, lock, turn), [*history, *new]


def _with_mark(message: Message, mark: dict[str, Any]) -> Message:
    return attrs.evolve(message, extra={**message.extra, TURN_MARK: mark})


def _without_mark(message: Message) -> Message:
    """A message sent again (loaded from a conversation) loses its turn's record."""
    if TURN_MARK not in message.extra:
        return message
    extra = {key: value for key, value in message.extra.items() if key != TURN_MARK}
    return attrs.evolve(message, extra=extra)


def _find(conversation_id: str, history: list[Message], key: str) -> DoneTurn | None:
    """The completed turn of ``key`` in ``history`` (the latest one), or ``None``."""
    for index in range(len(history) - 1, -1, -1):
        mark = history[index].extra.get(TURN_MARK)
        if not isinstance(mark, dict) or mark.get("key") != key or "records" not in mark:
            continue
        try:
            return _done(conversation_id, history, index, mark)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            _log.warning(
                "agentkit: the record of turn %r in conversation %r (message %d) is unreadable "
                "(%s); the turn runs again", key, conversation_id, index, error,
            )
            return None
    return None


def _done(
    conversation_id: str, history: list[Message], index: int, mark: dict[str, Any]
) -> DoneTurn:
    new, records, said = int(mark["new"]), int(mark["records"]), list(mark["said"])
    messages = history[index + new : index + records]
    if len(messages) != len(said) or records - new != len(said):
        raise AgentKitValueError(
            f"it names {len(said)} messages said, the conversation holds {len(messages)}"
        )
    return DoneTurn(
        conversation_id,
        str(mark["key"]),
        tuple(
            SaidMessage(str(agent), tuple(str(step) for step in path), message)
            for (agent, path), message in zip(said, messages, strict=True)
        ),
    )


def resume_turn(store: ConversationStore, turn: ConversationTurn) -> OpenTurn:
    """Lock the conversation of an interrupted turn that is being resumed."""
    return OpenTurn(store, store.lock(turn.conversation_id), turn)
