"""A conformance suite for memory stores, for the stores you write yourself.

Each check takes a zero-argument factory returning a store, runs one behaviour of the
:class:`~agentkit.memory.MemoryStore` contract, and raises
:class:`~agentkit.testing.StoreConformanceError` (an :class:`AssertionError`) saying what the
store did wrong (explicit raises: they run under ``python -O`` too). Checks use fresh random
namespaces and delete what they wrote. Run them all with :func:`check_memory_store`, or one
pytest test per check::

    @pytest.mark.parametrize("check", MEMORY_CHECKS, ids=lambda c: c.__name__)
    def test_my_store(check):
        check(lambda: MyMemoryStore(...))

The checks are for text search; a store that ranks by embeddings passes them when its
embedding function gives texts that share words similar vectors (the agentkit tests use a
bag-of-words embedding).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from agentkit.errors import AgentKitValueError
from agentkit.memory._base import (
    MAX_MEMORY_CHARS,
    MAX_METADATA_BYTES,
    MemoryStore,
    MemoryTooLargeError,
)
from agentkit.testing import StoreConformanceError

__all__ = [
    "MEMORY_CHECKS",
    "MemoryStoreFactory",
    "check_any_text_round_trips",
    "check_concurrent_saves_are_all_kept",
    "check_delete_forgets_only_its_memory",
    "check_list_is_oldest_first",
    "check_memory_store",
    "check_namespaces_are_apart",
    "check_oversized_memories_are_refused",
    "check_search_ranks_the_best_match_first",
    "check_search_respects_the_limit",
    "check_unknown_namespace_is_empty",
]

MemoryStoreFactory = Callable[[], MemoryStore]
"""A zero-argument callable returning the store under test."""


def _fail(message: str) -> StoreConformanceError:
    return StoreConformanceError(f"memory store conformance: {message}")


def _namespace(label: str) -> str:
    return f"conformance-{label}-{uuid.uuid4().hex}"


@contextmanager
def _cleanup(store: MemoryStore, *namespaces: str) -> Iterator[None]:
    try:
        yield
    finally:
        for namespace in namespaces:
            for memory in store.list(namespace):
                store.delete(namespace, memory.id)


def check_any_text_round_trips(factory: MemoryStoreFactory) -> None:
    """Text and metadata come back as saved: accents, emoji, quotes, newlines, markup."""
    store = factory()
    namespace = _namespace("text")
    text = 'Prefers "EUR" \u2013 not $; ✓ 🙂 <b>bold</b>\nline two\\ %_* \'quote\''
    metadata = {"source": "chat", "n": 3, "tags": ["a", "b"], "nested": {"ok": True}}
    with _cleanup(store, namespace):
        memory_id = store.save(namespace, text, metadata=metadata)
        if not isinstance(memory_id, str) or not memory_id:
            raise _fail(f"save() returned {memory_id!r}, not a non-empty str id")
        listed = store.list(namespace)
        if [(m.id, m.text, dict(m.metadata), m.score) for m in listed] != [
            (memory_id, text, metadata, None)
        ]:
            raise _fail(f"list() returned {listed!r} after saving {text!r} with {metadata!r}")


def check_unknown_namespace_is_empty(factory: MemoryStoreFactory) -> None:
    """A namespace nothing was saved in lists and finds nothing; deleting in it is a no-op."""
    store = factory()
    namespace = _namespace("empty")
    if store.list(namespace) != []:
        raise _fail("list() of a fresh namespace is not empty")
    if store.search(namespace, "anything at all") != []:
        raise _fail("search() in a fresh namespace found memories")
    store.delete(namespace, uuid.uuid4().hex)


def check_namespaces_are_apart(factory: MemoryStoreFactory) -> None:
    """No namespace sees another's memories, whatever characters the names hold (``a``,
    ``a%``, ``a*``, ``a:b``, ``a_``, ``a\\``...): not by list, search or delete."""
    store = factory()
    base = _namespace("apart")
    names = [base, f"{base}%", f"{base}*", f"{base}:b", f"{base}_", f"{base}\\", f"{base}?",
             f"{base}[x]", f"{base} ", base.upper(), f"{base}:m", f"{base}}}", f"{{{base}"]
    with _cleanup(store, *names):
        ids = {name: store.save(name, f"secret invoice note of {name}") for name in names}
        for name in names:
            listed = store.list(name)
            if [m.id for m in listed] != [ids[name]]:
                raise _fail(f"list({name!r}) returned {listed!r}: not only its own memory")
            found = store.search(name, "secret invoice note", limit=50)
            if [m.id for m in found] != [ids[name]]:
                raise _fail(f"search in {name!r} returned {found!r}: not only its own memory")
        for name in names:
            for other in names:
                if other != name:
                    store.delete(other, ids[name])  # another namespace: must not delete
            if [m.id for m in store.list(name)] != [ids[name]]:
                raise _fail(f"a delete in another namespace removed {name!r}'s memory")


def check_search_ranks_the_best_match_first(factory: MemoryStoreFactory) -> None:
    """A memory that shares the query's words is found, ahead of ones that share fewer; a
    query sharing no word with any memory finds none."""
    store = factory()
    namespace = _namespace("rank")
    with _cleanup(store, namespace):
        store.save(namespace, "The user's cat is called Tom.")
        best = store.save(namespace, "The user prefers invoices in EUR, sent monthly.")
        store.save(namespace, "The user lives in Lyon.")
        store.save(namespace, "Meeting notes: the quarterly report is due in June.")
        found = store.search(namespace, "Which currency do invoices use?", limit=3)
        if not found or found[0].id != best:
            raise _fail(f"search for invoices returned {found!r}: the invoice memory not first")
        if any(m.score is None for m in found):
            raise _fail(f"search() returned memories without a score: {found!r}")
        scores = [m.score for m in found]
        if scores != sorted(scores, reverse=True):  # type: ignore[type-var]
            raise _fail(f"search() did not return the best first (scores {scores})")
        nothing = store.search(namespace, "zyxwv qqqq")
        if nothing:
            raise _fail(f"a query sharing no word found {nothing!r}")


def check_search_respects_the_limit(factory: MemoryStoreFactory) -> None:
    """``limit`` bounds what a search returns; a bad limit is refused."""
    store = factory()
    namespace = _namespace("limit")
    with _cleanup(store, namespace):
        for index in range(7):
            store.save(namespace, f"note number {index} about the garden")
        for limit in (1, 3, 7):
            found = store.search(namespace, "garden note", limit=limit)
            if len(found) != limit:
                raise _fail(f"search(limit={limit}) returned {len(found)} memories of 7")
        for bad in (0, -1, 10_000):
            try:
                store.search(namespace, "garden", limit=bad)
            except (AgentKitValueError, ValueError):
                continue
            raise _fail(f"search(limit={bad}) was not refused with a ValueError")


def check_delete_forgets_only_its_memory(factory: MemoryStoreFactory) -> None:
    """A deleted memory is neither listed nor found; the others stay; deleting twice is fine."""
    store = factory()
    namespace = _namespace("delete")
    with _cleanup(store, namespace):
        gone = store.save(namespace, "The user likes green tea.")
        kept = store.save(namespace, "The user likes black coffee.")
        store.delete(namespace, gone)
        store.delete(namespace, gone)
        if [m.id for m in store.list(namespace)] != [kept]:
            raise _fail("list() after delete() is not the one memory kept")
        found = [m.id for m in store.search(namespace, "user likes tea coffee", limit=10)]
        if found != [kept]:
            raise _fail(f"search() after delete() returned ids {found} (expected only {kept})")


def check_list_is_oldest_first(factory: MemoryStoreFactory) -> None:
    """``list`` returns the memories in the order they were saved."""
    store = factory()
    namespace = _namespace("order")
    with _cleanup(store, namespace):
        ids = [store.save(namespace, f"fact {index}") for index in range(12)]
        listed = [m.id for m in store.list(namespace)]
        if listed != ids:
            raise _fail("list() is not in the order the memories were saved")


def check_oversized_memories_are_refused(factory: MemoryStoreFactory) -> None:
    """A text over :data:`~agentkit.memory.MAX_MEMORY_CHARS` (a 10 MB one too), metadata over
    :data:`~agentkit.memory.MAX_METADATA_BYTES`, and an empty text are refused; nothing is
    kept."""
    store = factory()
    namespace = _namespace("size")
    with _cleanup(store, namespace):
        for text, metadata in (
            ("x" * (MAX_MEMORY_CHARS + 1), None),
            ("y" * 10_000_000, None),
            ("fine", {"blob": "z" * MAX_METADATA_BYTES}),
        ):
            try:
                store.save(namespace, text, metadata=metadata)
            except MemoryTooLargeError:
                continue
            raise _fail("an oversized memory was saved, not refused with MemoryTooLargeError")
        try:
            store.save(namespace, "   ")
        except (AgentKitValueError, ValueError):
            pass
        else:
            raise _fail("an empty memory was saved, not refused with a ValueError")
        store.save(namespace, "x" * MAX_MEMORY_CHARS)  # the limit itself is fine
        if len(store.list(namespace)) != 1:
            raise _fail("a refused memory was kept")


def check_concurrent_saves_are_all_kept(factory: MemoryStoreFactory) -> None:
    """Saves from several threads at once are all kept, each with its own id."""
    store = factory()
    namespace = _namespace("threads")
    threads, per_thread = 4, 10
    barrier = threading.Barrier(threads)
    ids: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(number: int) -> None:
        try:
            barrier.wait(timeout=30)
            for index in range(per_thread):
                memory_id = store.save(namespace, f"thread {number} fact {index}")
                with lock:
                    ids.append(memory_id)
        except BaseException as error:  # reported below, in the checking thread
            with lock:
                errors.append(error)

    with _cleanup(store, namespace):
        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        if errors:
            raise _fail(f"concurrent saves failed: {errors[0]!r}")
        if any(worker.is_alive() for worker in workers):
            raise _fail("concurrent saves did not finish within 60 seconds")
        listed = {m.id for m in store.list(namespace)}
        if len(set(ids)) != threads * per_thread or listed != set(ids):
            raise _fail(
                f"{threads * per_thread} concurrent saves kept {len(listed)} memories "
                f"with {len(set(ids))} distinct ids"
            )


MEMORY_CHECKS: tuple[Callable[[MemoryStoreFactory], None], ...] = (
    check_any_text_round_trips,
    check_unknown_namespace_is_empty,
    check_namespaces_are_apart,
    check_search_ranks_the_best_match_first,
    check_search_respects_the_limit,
    check_delete_forgets_only_its_memory,
    check_list_is_oldest_first,
    check_oversized_memories_are_refused,
    check_concurrent_saves_are_all_kept,
)
"""Every check of the suite, in the order :func:`check_memory_store` runs them."""


def check_memory_store(factory: MemoryStoreFactory) -> None:
    """Run every check of :data:`MEMORY_CHECKS` against stores made by ``factory``."""
    for check in MEMORY_CHECKS:
        check(factory)
