"""Conversations: multi-turn memory for a Runner, in append-only message logs.

::

    from agentkit import Runner, with_conversation_id
    from agentkit.conversation import SQLiteConversationStore, keep_last_turns

    runner = Runner(agent, conversation_store=SQLiteConversationStore("chat.sqlite3"))
    runner.invoke("My name is Ann.", with_conversation_id("user-42"))
    runner.invoke("What is my name?", with_conversation_id("user-42"))   # remembers
    runner.invoke("And now?", with_conversation_id("user-42", trim=keep_last_turns(10)))

Each turn's input is the stored history (trimmed, if asked) plus the new messages; when the
turn completes, its new messages and everything the agents said are appended. One turn runs
at a time per conversation (:class:`~agentkit.ConversationBusyError`), across processes for
the file, SQLite and Redis stores. Stores hold JSON, never pickles.

A completed turn records which agent said each of its messages: :func:`load_events` reads the
conversation as events (Eino's ``SessionEventStore``), and :func:`rollback` takes it back to
an earlier turn (Eino's ``RollbackSession``)::

    rollback(store, "user-42", keep_turns=1)     # the second turn and after are gone

A record that cannot be read (damaged by hand or by a bug, or over ``max_record_bytes``)
makes ``load`` raise :class:`~agentkit.errors.ConversationRecordError` naming the conversation and
the record's position; every store reports it in the same words, and
``store.drop_record(conversation_id, index)`` removes it::

    try:
        runner.invoke("Hi", with_conversation_id("user-42"))
    except ConversationRecordError as error:
        store.drop_record(error.conversation_id, error.index)   # after looking at it
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.conversation._base import (
    DEFAULT_MAX_RECORD_BYTES,
    MAX_CONVERSATION_ID_BYTES,
    ConversationLock,
    ConversationStore,
)
from agentkit.conversation._events import ConversationEvent, load_events, rollback
from agentkit.conversation._trim import (
    HistoryTrimmer,
    TokenCounter,
    approximate_tokens,
    keep_last_turns,
    keep_within_tokens,
)

__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "MAX_CONVERSATION_ID_BYTES",
    "ConversationEvent",
    "ConversationLock",
    "ConversationStore",
    "FileConversationStore",
    "HistoryTrimmer",
    "InMemoryConversationStore",
    "RedisConversationStore",
    "SQLiteConversationStore",
    "TokenCounter",
    "approximate_tokens",
    "keep_last_turns",
    "keep_within_tokens",
    "load_events",
    "rollback",
]

if TYPE_CHECKING:
    from agentkit.conversation._file import FileConversationStore
    from agentkit.conversation._memory import InMemoryConversationStore
    from agentkit.conversation._redis import RedisConversationStore
    from agentkit.conversation._sqlite import SQLiteConversationStore
else:
    # The stores load on first use: sqlite3 and redis-py only with their store, and none of
    # them for a Runner without conversations (``import agentkit`` stays light).
    __getattr__, __dir__ = attach(
        __name__,
        {
            "FileConversationStore": "agentkit.conversation._file",
            "InMemoryConversationStore": "agentkit.conversation._memory",
            "RedisConversationStore": "agentkit.conversation._redis",
            "SQLiteConversationStore": "agentkit.conversation._sqlite",
        },
        submodules=("conformance",),
    )
