"""A conversation as events, and rolling it back by turns (Eino v0.10's ``SessionEventStore``
and ``RollbackSession``), on any :class:`~agentkit.conversation.ConversationStore`.

Every turn a Runner completes records, on its first message, how many records it appended and
which agent said each of them at which run path (see :mod:`agentkit.conversation._turn`), so
the log of messages is also a log of events. A rollback appends one marker record, in the same
append-only way: the log keeps what was rolled back, ``load`` leaves it out.
"""

from __future__ import annotations

from typing import Any

import attrs

from agentkit._lazy import present
from agentkit.conversation._base import ConversationStore
from agentkit.conversation._records import (
    ROLLBACK_MARK,
    TURN_MARK,
    check_id,
    fold_rollbacks,
    split_turns,
)
from agentkit.errors import AgentKitTypeError, AgentKitValueError
from agentkit.schema import Message, Role

__all__ = ["ConversationEvent", "load_events", "rollback"]


@attrs.frozen
class ConversationEvent:
    """One event of a conversation: a message, the turn it belongs to and who said it.

    Attributes:
        turn: the turn's position, 0 for the first.
        message: the message (its ``extra`` holds the turn's record on a turn's first one).
        agent_name: the agent that said it; ``""`` for what the turn brought (the user's
            input) and for the turns of a conversation written before turns were recorded.
        run_path: the run path it was said at, as in an event's ``run_path``
            (:class:`agentkit.AgentEvent`; ``()`` where ``agent_name`` is ``""``).
    """

    turn: int
    message: Message
    agent_name: str = ""
    run_path: tuple[str, ...] = ()


def load_events(store: ConversationStore, conversation_id: str) -> list[ConversationEvent]:
    """The events of the conversation, oldest first (``[]`` for an unknown id).

    Rolled-back turns are not among them. A conversation written before turns were recorded
    (an earlier release) has its turns found by its user messages, without agents.

    Raises:
        ConversationRecordError: a stored record cannot be read (see
            :meth:`~agentkit.conversation.ConversationStore.load`).
    """
    messages = fold_rollbacks(store.load(check_id(conversation_id)))
    events: list[ConversationEvent] = []
    for number, turn in enumerate(split_turns(messages)):
        said = _said(turn[0])
        for index, message in enumerate(turn):
            agent, path = said.get(index, ("", ()))
            events.append(ConversationEvent(number, message, agent, path))
    return events


def _said(first: Message) -> dict[int, tuple[str, tuple[str, ...]]]:
    """Who said each record of a recorded turn, by position in the turn."""
    mark = first.extra.get(TURN_MARK)
    if not isinstance(mark, dict):
        return {}
    new, said = mark.get("new"), mark.get("said")
    if not isinstance(new, int) or not isinstance(said, list):
        return {}
    found: dict[int, tuple[str, tuple[str, ...]]] = {}
    for offset, item in enumerate(said):
        if _is_said(item):
            found[new + offset] = (item[0], tuple(item[1]))
    return found


def _is_said(item: Any) -> bool:
    return (
        isinstance(item, list)
        and len(item) == 2
        and isinstance(item[0], str)
        and isinstance(item[1], list)
        and all(isinstance(step, str) for step in item[1])
    )


def rollback(store: ConversationStore, conversation_id: str, *, keep_turns: int) -> None:
    """Roll the conversation back to its first ``keep_turns`` turns (Eino's
    ``RollbackSession``).

    The next turn goes on from there: its model sees the kept turns only, and
    :func:`load_events` and the built-in stores' ``load`` leave the rest out. The rolled-back
    records stay in the store (the log is append-only: one marker record is appended, under
    the conversation's lock), so ``drop_record`` positions do not change; ``delete`` forgets
    them with the conversation. ``keep_turns=0`` empties the conversation.

    Raises:
        ConversationBusyError: a turn of the conversation is running.
        ValueError: ``keep_turns`` is negative or over the number of turns the conversation
            has (the message says how many).
    """
    if isinstance(keep_turns, bool) or not isinstance(keep_turns, int):
        raise AgentKitTypeError(f"keep_turns must be an int (got {keep_turns!r})")
    if keep_turns < 0:
        raise AgentKitValueError(f"keep_turns must be 0 or more (got {keep_turns})")
    lock = store.lock(check_id(conversation_id))
    try:
        turns = len(split_turns(fold_rollbacks(store.load(conversation_id))))
        if keep_turns > turns:
            raise AgentKitValueError(
                f"cannot roll conversation {conversation_id!r} back to {keep_turns} turns: "
                f"it has {turns}; pass keep_turns from 0 to {turns}"
            )
        if keep_turns == turns:
            return
        marker = Message(role=Role.SYSTEM, content="", extra={ROLLBACK_MARK: {"turns": keep_turns}})
        store.append(conversation_id, [marker])
    finally:
        lock.release()


# Defined here; documented and imported as agentkit.conversation.
present((ConversationEvent, load_events, rollback), "agentkit.conversation")
