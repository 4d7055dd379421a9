"""Long-term memory: what an agent remembers of a user across conversations.

A :class:`MemoryStore` keeps short texts per namespace (a user id, a team) and finds the ones
that match a query; :class:`MemoryMiddleware` gives a :class:`~agentkit.ChatModelAgent` the
memories that match the user's message before its first model call, and saves what a run
taught after it (an ``extract`` function such as :func:`model_extractor`, or a ``remember``
tool the model calls)::

    from agentkit.memory import MemoryMiddleware, SQLiteMemoryStore

    store = SQLiteMemoryStore("memories.sqlite3")
    memory = MemoryMiddleware(store, lambda values: values["user_id"], remember_tool=True)
    agent = ChatModelAgent("assistant", "helps", model, middlewares=[memory])
    Runner(agent).invoke("Invoices in EUR, please.", with_session_values({"user_id": "ann"}))

Stores: :class:`InMemoryMemoryStore`, :class:`SQLiteMemoryStore` (FTS5 full-text search, or
vector search with an embedding function) and
:class:`~agentkit.integrations.redis.RedisMemoryStore`. Every store passes the checks of
:mod:`agentkit.memory.conformance`; yours can too.
"""

from __future__ import annotations

from agentkit._lazy import attach, present
from agentkit.memory._base import (
    DEFAULT_MAX_MEMORIES,
    MAX_MEMORY_CHARS,
    MAX_METADATA_BYTES,
    MAX_NAMESPACE_CHARS,
    MAX_QUERY_CHARS,
    MAX_SEARCH_LIMIT,
    EmbedFunction,
    Memory,
    MemoryStore,
    MemoryStoreError,
    MemoryStoreFullError,
    MemoryTooLargeError,
)
from agentkit.memory._inmemory import InMemoryMemoryStore
from agentkit.memory._middleware import (
    EXTRACT_INSTRUCTION,
    MAX_EXTRACTED,
    MEMORY_PREAMBLE,
    Extractor,
    MemoryMiddleware,
    NamespaceFunction,
    model_extractor,
)
from agentkit.memory._sqlite import SQLiteMemoryStore

__all__ = [
    "DEFAULT_MAX_MEMORIES",
    "EXTRACT_INSTRUCTION",
    "MAX_EXTRACTED",
    "MAX_MEMORY_CHARS",
    "MAX_METADATA_BYTES",
    "MAX_NAMESPACE_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_SEARCH_LIMIT",
    "MEMORY_PREAMBLE",
    "EmbedFunction",
    "Extractor",
    "InMemoryMemoryStore",
    "Memory",
    "MemoryMiddleware",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryStoreFullError",
    "MemoryTooLargeError",
    "NamespaceFunction",
    "SQLiteMemoryStore",
    "model_extractor",
]

present(
    (
        Memory,
        MemoryStore,
        MemoryStoreError,
        MemoryStoreFullError,
        MemoryTooLargeError,
        InMemoryMemoryStore,
        MemoryMiddleware,
        SQLiteMemoryStore,
        model_extractor,
    ),
    __name__,
)

__getattr__, __dir__ = attach(__name__, submodules=("conformance",))
