"""What every memory store shares: the :class:`Memory` value, the :class:`MemoryStore`
protocol, the limits and the checks of what a store is given, and the store errors."""

from __future__ import annotations

import builtins
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from agentkit._values import read_only
from agentkit.errors import AgentKitError, AgentKitTypeError, AgentKitValueError

__all__ = [
    "DEFAULT_MAX_MEMORIES",
    "EmbedFunction",
    "MAX_MEMORY_CHARS",
    "MAX_METADATA_BYTES",
    "MAX_NAMESPACE_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_SEARCH_LIMIT",
    "Memory",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryStoreFullError",
    "MemoryTooLargeError",
    "check_id",
    "check_limit",
    "check_max_memories",
    "check_namespace",
    "checked_memory",
    "decode_metadata",
    "query_text",
    "unit_vector",
]

MAX_MEMORY_CHARS = 8_000
"""The longest memory text a store keeps, in characters (a memory is a fact, not a document)."""

MAX_METADATA_BYTES = 8_192
"""The largest metadata a memory carries, as UTF-8 JSON."""

MAX_NAMESPACE_CHARS = 512
"""The longest namespace, in characters."""

MAX_QUERY_CHARS = 4_000
"""How much of a search query is used: the first this many characters."""

MAX_SEARCH_LIMIT = 100
"""The most memories one search returns."""

DEFAULT_MAX_MEMORIES = 10_000
"""How many memories a namespace holds unless the store is told otherwise."""

_MAX_ID_CHARS = 128

EmbedFunction = Callable[[str], Sequence[float]]
"""``embed(text) -> vector``: the embedding of one text (every vector of one length)."""


class MemoryStoreError(AgentKitError):
    """A memory store could not save, search, list or delete (its backend failed)."""


class MemoryTooLargeError(MemoryStoreError, ValueError):
    """A memory's text or metadata is over the store's size limit."""


class MemoryStoreFullError(MemoryStoreError):
    """A namespace holds as many memories as the store allows; delete some first."""


def _metadata(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return read_only({} if value is None else value)


@attrs.frozen
class Memory:
    """One remembered text of a namespace, as a store returns it.

    Attributes:
        id: the memory's id in its namespace (what :meth:`MemoryStore.save` returned).
        text: what is remembered.
        metadata: what was saved with it (a read-only dict of JSON values).
        score: how well it matched the search, higher is better (comparable only within one
            search: each store scores its own way); ``None`` from :meth:`MemoryStore.list`.
    """

    id: str
    text: str
    metadata: dict[str, Any] = attrs.field(factory=dict, converter=_metadata)
    score: float | None = None


@runtime_checkable
class MemoryStore(Protocol):
    """Long-term memory: short texts kept per namespace (a user, a team), found by a query.

    A namespace is any string (up to :data:`MAX_NAMESPACE_CHARS`); every method sees only
    the namespace it is given, whatever characters it holds (``"a"``, ``"a%"``, ``"a*"``
    and ``"a:b"`` are four namespaces that share nothing). Stores are thread-safe.
    """

    def save(
        self, namespace: str, text: str, *, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """Keep ``text`` in ``namespace``; return the new memory's id.

        Raises:
            MemoryTooLargeError: ``text`` or ``metadata`` is over the limits.
            MemoryStoreFullError: the namespace is full.
        """
        ...

    def search(self, namespace: str, query: str, *, limit: int = 5) -> builtins.list[Memory]:
        """The memories of ``namespace`` that best match ``query``, best first (at most
        ``limit``; none when nothing matches)."""
        ...

    def delete(self, namespace: str, memory_id: str) -> None:
        """Forget the memory ``memory_id`` of ``namespace`` (nothing happens if it is not
        there, in that namespace)."""
        ...

    def list(self, namespace: str) -> builtins.list[Memory]:
        """Every memory of ``namespace``, oldest first."""
        ...


# --- the checks every store makes ------------------------------------------------------------


def check_namespace(namespace: object) -> str:
    """``namespace`` if a store can use it (a non-empty ``str`` within the limit)."""
    if not isinstance(namespace, str):
        raise AgentKitTypeError(
            f"a memory namespace is a str, such as a user id (got {type(namespace).__name__})"
        )
    if not namespace or len(namespace) > MAX_NAMESPACE_CHARS:
        raise AgentKitValueError(
            f"a memory namespace has 1 to {MAX_NAMESPACE_CHARS} characters (got "
            f"{len(namespace)}); use a user or team id"
        )
    return namespace


def check_id(memory_id: object) -> str:
    """``memory_id`` if it can be a memory's id."""
    if not isinstance(memory_id, str) or not 0 < len(memory_id) <= _MAX_ID_CHARS:
        raise AgentKitValueError(
            f"a memory id is a non-empty str of at most {_MAX_ID_CHARS} characters, as "
            f"save() returned it (got {memory_id!r:.80})"
        )
    return memory_id


def check_limit(limit: object) -> int:
    """``limit`` if it is a number of memories a search may return."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise AgentKitValueError(
            f"limit is the most memories a search returns, 1 to {MAX_SEARCH_LIMIT} "
            f"(got {limit!r})"
        )
    return limit


def check_max_memories(value: object) -> int:
    """``value`` if it can be a store's ``max_memories``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AgentKitValueError(
            f"max_memories is how many memories a namespace holds, at least 1 (got {value!r})"
        )
    return value


def checked_memory(text: object, metadata: Mapping[str, Any] | None) -> tuple[str, str]:
    """``(text, metadata as JSON)`` once both are within the limits."""
    if not isinstance(text, str):
        raise AgentKitTypeError(f"a memory's text is a str (got {type(text).__name__})")
    if not text.strip():
        raise AgentKitValueError("a memory's text is empty; save what should be remembered")
    if len(text) > MAX_MEMORY_CHARS:
        raise MemoryTooLargeError(
            f"a memory has at most {MAX_MEMORY_CHARS} characters (got {len(text)}): keep a "
            "short fact, not a document"
        )
    if metadata is not None and not isinstance(metadata, Mapping):
        raise AgentKitTypeError(
            f"a memory's metadata is a dict of JSON values (got {type(metadata).__name__})"
        )
    try:
        encoded = json.dumps(dict(metadata or {}), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise AgentKitValueError(
            f"a memory's metadata must be JSON values with str keys ({error})"
        ) from None
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise MemoryTooLargeError(
            f"a memory's metadata is at most {MAX_METADATA_BYTES} bytes of JSON"
        )
    return text, encoded


def decode_metadata(encoded: str | bytes) -> dict[str, Any]:
    """The metadata a store kept as JSON."""
    value = json.loads(encoded)
    return value if isinstance(value, dict) else {}


def query_text(query: object) -> str:
    """The part of ``query`` a search uses (the first :data:`MAX_QUERY_CHARS` characters)."""
    if not isinstance(query, str):
        raise AgentKitTypeError(f"a memory search query is a str (got {type(query).__name__})")
    return query[:MAX_QUERY_CHARS]


def unit_vector(vector: Sequence[float], dimensions: int | None) -> list[float]:
    """``vector`` (an embedding) scaled to length 1, checked against the store's length."""
    try:
        values = [float(x) for x in vector]
    except (TypeError, ValueError):
        raise AgentKitTypeError(
            "embed() must return a sequence of numbers (a list of floats)"
        ) from None
    if not values or (dimensions is not None and len(values) != dimensions):
        raise AgentKitValueError(
            f"embed() returned a vector of {len(values)} numbers; this store's vectors have "
            f"{dimensions}: use one embedding model per store"
        )
    norm = math.sqrt(math.fsum(x * x for x in values))
    if not math.isfinite(norm):
        raise AgentKitValueError("embed() returned a vector with NaN or infinite numbers")
    if norm == 0.0:
        return values
    return [x / norm for x in values]
