"""The data checks of the checkpoint store conformance suite: get, set, delete and ids."""

from __future__ import annotations

import threading
import uuid

from agentkit.checkpoint._base import (
    JournalingCheckPointStore,
    ListingCheckPointStore,
    namespace_of,
)
from agentkit.testing._store_support import (
    THREAD_GUARD,
    StoreCheck,
    StoreFactory,
    cleanup,
    expect,
    expect_value,
    join_threads,
    run_threads,
    unique,
)

UNUSUAL_IDS: tuple[str, ...] = (
    "",
    " ",
    "plain",
    "Plain",
    "PLAIN",
    "with space",
    "ünïcödé ✓ 中文 🙂",
    "a/b",
    "a\\b",
    "/absolute",
    ".",
    "..",
    "../../etc/passwd",
    "..\\..\\windows",
    "'quoted'",
    '"double"',
    "x'; DROP TABLE checkpoints; --",
    "%s %d {0} ${x}",
    "*?[]<>|:",
    "line\nbreak\ttab\r",
    "nul\x00byte",
    "lone \ud800 surrogate",
    "tenant:42:cancel",
    "CON",
    "nul.txt",
    "lease:plain",
    "plain.lease",
    "x" * 1000,
)
"""Ids every store must keep apart and round-trip (one of the :data:`STORE_CHECKS` stores them)."""


def check_round_trip(make_store: StoreFactory) -> None:
    """``set`` then ``get`` returns the same bytes (as ``bytes``)."""
    store = make_store()
    checkpoint_id = unique("round-trip")
    with cleanup(store, checkpoint_id):
        store.set(checkpoint_id, b"checkpoint bytes")
        expect_value(store, checkpoint_id, b"checkpoint bytes", "after set")


def check_overwrite(make_store: StoreFactory) -> None:
    """A second ``set`` replaces the value, also with a shorter one."""
    store = make_store()
    checkpoint_id = unique("overwrite")
    with cleanup(store, checkpoint_id):
        store.set(checkpoint_id, b"first version, rather long")
        store.set(checkpoint_id, b"second")
        expect_value(store, checkpoint_id, b"second", "after overwriting")


def check_unknown_id_returns_none(make_store: StoreFactory) -> None:
    """``get`` of an id that was never set returns ``None`` (not an error, not ``b""``)."""
    store = make_store()
    expect_value(store, unique("unknown"), None, "for an unknown id")


def check_delete(make_store: StoreFactory) -> None:
    """``delete`` removes only its id, and deleting an unknown id (twice) is a no-op."""
    store = make_store()
    doomed, kept = unique("delete"), unique("kept")
    with cleanup(store, doomed, kept):
        store.set(doomed, b"doomed")
        store.set(kept, b"kept")
        store.delete(doomed)
        expect_value(store, doomed, None, "after delete")
        expect_value(store, kept, b"kept", "after deleting another id")
        store.delete(doomed)
        store.delete(unique("never-set"))
        store.set(doomed, b"again")
        expect_value(store, doomed, b"again", "after set following a delete")


def check_payload_bytes_round_trip(make_store: StoreFactory) -> None:
    """Every byte value, and the empty payload, round-trip unchanged."""
    store = make_store()
    every_byte, empty = unique("bytes"), unique("empty")
    payload = bytes(range(256)) * 4 + b"\x00\r\n\x1a\xff"
    with cleanup(store, every_byte, empty):
        store.set(every_byte, payload)
        store.set(empty, b"")
        expect_value(store, every_byte, payload, "for a payload with every byte value")
        expect_value(store, empty, b"", "for an empty payload")


def check_large_payload(make_store: StoreFactory) -> None:
    """A 4 MiB payload round-trips."""
    store = make_store()
    checkpoint_id = unique("large")
    payload = (uuid.uuid4().bytes * (4 * 1024 * 1024 // 16))[: 4 * 1024 * 1024 - 3]
    with cleanup(store, checkpoint_id):
        store.set(checkpoint_id, payload)
        expect_value(store, checkpoint_id, payload, "for a 4 MiB payload")


def check_unusual_ids(make_store: StoreFactory) -> None:
    """Paths, SQL, quotes, unicode, case variants and long ids are plain, distinct ids."""
    store = make_store()
    base = unique("ids")
    # Each id is tried alone and behind a unique part, so shared backends stay clean.
    ids = [*UNUSUAL_IDS, *(base + unusual for unusual in UNUSUAL_IDS)]
    originals = {checkpoint_id: store.get(checkpoint_id) for checkpoint_id in UNUSUAL_IDS}
    try:
        for index, checkpoint_id in enumerate(ids):
            store.set(checkpoint_id, f"value {index}".encode())
        for index, checkpoint_id in enumerate(ids):
            expect_value(store, checkpoint_id, f"value {index}".encode(), "for an unusual id")
        store.delete("..")
        expect_value(store, "..", None, "after deleting '..'")
        expect_value(store, ".", f"value {ids.index('.')}".encode(), "after deleting '..'")
    finally:
        for checkpoint_id in ids:
            original = originals.get(checkpoint_id)
            if original is None:
                store.delete(checkpoint_id)
            else:
                store.set(checkpoint_id, original)


def check_ids_with_nul_and_surrogates(make_store: StoreFactory) -> None:
    """Ids with NUL characters and lone surrogates are valid ids too (any ``str`` is)."""
    store = make_store()
    base = unique("code-points")
    ids = [base + "\x00", base + "\x00x", base + "\ud800", base + "\udfff", base]
    with cleanup(store, *ids):
        for index, checkpoint_id in enumerate(ids):
            store.set(checkpoint_id, bytes([index]))
        for index, checkpoint_id in enumerate(ids):
            expect_value(store, checkpoint_id, bytes([index]), "for an id with NUL/surrogates")


def check_ids_are_distinct(make_store: StoreFactory) -> None:
    """Ids that differ only in case, trailing characters or separators do not share a value."""
    store = make_store()
    base = unique("distinct")
    ids = [base + "a", base + "A", base + "a ", base + "a/", base + "a.", base + "a\\", base + "b"]
    with cleanup(store, *ids):
        for index, checkpoint_id in enumerate(ids):
            store.set(checkpoint_id, str(index).encode())
        for index, checkpoint_id in enumerate(ids):
            expect_value(store, checkpoint_id, str(index).encode(), "for ids that look alike")


def check_concurrent_writers_never_tear_values(make_store: StoreFactory) -> None:
    """Threads overwriting one id while others read it: every read is one whole written value."""
    store = make_store()
    checkpoint_id = unique("concurrent")
    writers, rounds = 4, 8
    values = [bytes([65 + writer]) * (256 * 1024 + writer) for writer in range(writers)]
    start = threading.Barrier(writers + 2, timeout=THREAD_GUARD)
    done = threading.Event()
    problems: list[str] = []

    def write(value: bytes) -> None:
        try:
            start.wait()
            for _ in range(rounds):
                store.set(checkpoint_id, value)
        except Exception as error:
            problems.append(f"set raised {error!r}")

    def read() -> None:
        try:
            start.wait()
            while not done.is_set():
                got = store.get(checkpoint_id)
                if got is not None and got not in values:
                    problems.append(f"read a torn value of {len(got)} bytes")
                    return
        except Exception as error:
            problems.append(f"get raised {error!r}")

    with cleanup(store, checkpoint_id):
        threads = [threading.Thread(target=write, args=(value,)) for value in values]
        readers = [threading.Thread(target=read) for _ in range(2)]
        for thread in threads + readers:
            thread.start()
        try:
            join_threads(threads, "concurrent set/get")
        finally:
            done.set()
            join_threads(readers, "concurrent set/get")
        expect(not problems, f"concurrent set/get: {problems[0] if problems else ''}")
        final = store.get(checkpoint_id)
        expect(final in values, "after concurrent writers the value is not one that was written")


def check_threads_write_distinct_ids(make_store: StoreFactory) -> None:
    """Threads writing different ids at once lose none of them."""
    store = make_store()
    ids = [unique(f"thread-{index}") for index in range(16)]
    start = threading.Barrier(len(ids), timeout=THREAD_GUARD)
    problems: list[str] = []

    def write(checkpoint_id: str) -> None:
        try:
            start.wait()
            store.set(checkpoint_id, checkpoint_id.encode())
        except Exception as error:
            problems.append(f"set raised {error!r}")

    with cleanup(store, *ids):
        run_threads(
            (threading.Thread(target=write, args=(cid,)) for cid in ids), "parallel writes"
        )
        expect(not problems, f"parallel writes: {problems[0] if problems else ''}")
        for checkpoint_id in ids:
            expect_value(store, checkpoint_id, checkpoint_id.encode(), "after parallel writes")


def check_namespace_is_the_same_for_one_backend(make_store: StoreFactory) -> None:
    """Two stores on one backend have one namespace (a ``str``; ``""`` when there is none).

    Signed checkpoints are bound to the namespace, so a checkpoint saved through one store
    object loads through another only when both report the same namespace.
    """
    first, second = namespace_of(make_store()), namespace_of(make_store())
    expect(isinstance(first, str), f"namespace is a {type(first).__name__}, not a str")
    expect(first == second, f"two stores on one backend have namespaces {first!r}, {second!r}")


def check_lists_checkpoint_ids(make_store: StoreFactory) -> None:
    """``checkpoint_ids()`` lists every id set (unusual ones too) and no deleted one, nor an
    id with step records only (passes for a store without ``checkpoint_ids``)."""
    store = make_store()
    if not isinstance(store, ListingCheckPointStore):
        return
    base = unique("listed")
    ids = [base + suffix for suffix in ("", " a/b", "\x00", "\ud800", "ü✓", "x" * 400)]
    steps_only = base + "-steps-only"
    with cleanup(store, *ids, steps_only):
        for checkpoint_id in ids:
            store.set(checkpoint_id, b"listed")
        if isinstance(store, JournalingCheckPointStore):
            store.append_step(steps_only, b"a step")
        listed = [found for found in store.checkpoint_ids() if found.startswith(base)]
        expect(listed == sorted(ids), f"checkpoint_ids() listed {listed!r}, not {sorted(ids)!r}")
        store.delete(ids[0])
        listed = [found for found in store.checkpoint_ids() if found.startswith(base)]
        expect(listed == sorted(ids[1:]), f"after delete, checkpoint_ids() listed {listed!r}")


STORE_CHECKS: tuple[StoreCheck, ...] = (
    check_round_trip,
    check_overwrite,
    check_unknown_id_returns_none,
    check_delete,
    check_payload_bytes_round_trip,
    check_large_payload,
    check_unusual_ids,
    check_ids_with_nul_and_surrogates,
    check_ids_are_distinct,
    check_concurrent_writers_never_tear_values,
    check_threads_write_distinct_ids,
    check_namespace_is_the_same_for_one_backend,
    check_lists_checkpoint_ids,
)
"""The checks every :class:`~agentkit.checkpoint.CheckPointStore` must pass."""
