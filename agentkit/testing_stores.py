"""A conformance suite for checkpoint stores, for the stores you write yourself.

Every check takes a zero-argument factory that returns a store, runs one behaviour of the
:class:`~agentkit.checkpoint.CheckPointStore` contract against it, and raises
:class:`AssertionError` with a message saying what the store did wrong. Checks use fresh random
ids and delete what they wrote, so they can run against a shared, non-empty backend.

Run them all with :func:`check_checkpoint_store`, or one test per check with pytest::

    import pytest
    from agentkit.testing_stores import STORE_CHECKS

    @pytest.mark.parametrize("check", STORE_CHECKS, ids=lambda check: check.__name__)
    def test_my_store(check):
        check(lambda: MyStore("..."))

The lease checks (:data:`LEASE_CHECKS`) pass trivially for stores without lease methods unless
``require_leases=True`` is given to :func:`check_checkpoint_store`; they sleep for fractions of a
second to let leases expire.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from agentkit.checkpoint.base import CheckPointStore, LeasingCheckPointStore, namespace_of

__all__ = [
    "ALL_CHECKS",
    "LEASE_CHECKS",
    "STORE_CHECKS",
    "StoreCheck",
    "StoreFactory",
    "UNUSUAL_IDS",
    "check_checkpoint_store",
    "check_concurrent_writers_never_tear_values",
    "check_delete",
    "check_ids_are_distinct",
    "check_ids_with_nul_and_surrogates",
    "check_large_payload",
    "check_lease_acquire_and_release",
    "check_lease_expires_and_can_be_taken_over",
    "check_lease_is_independent_of_data",
    "check_lease_race_has_one_winner",
    "check_lease_reacquire_refreshes",
    "check_namespace_is_the_same_for_one_backend",
    "check_overwrite",
    "check_payload_bytes_round_trip",
    "check_round_trip",
    "check_threads_write_distinct_ids",
    "check_unknown_id_returns_none",
    "check_unusual_ids",
]

StoreFactory = Callable[[], CheckPointStore]
"""A zero-argument callable returning the store under test."""

StoreCheck = Callable[[StoreFactory], None]
"""One conformance check."""

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
    "CON",
    "nul.txt",
    "lease:plain",
    "plain.lease",
    "x" * 1000,
)
"""Ids every store must keep apart and round-trip (used by :func:`check_unusual_ids`)."""


def _unique(label: str) -> str:
    return f"agentkit-conformance:{label}:{uuid.uuid4().hex}"


@contextmanager
def _cleanup(store: CheckPointStore, *ids: str) -> Iterator[None]:
    try:
        yield
    finally:
        for checkpoint_id in ids:
            store.delete(checkpoint_id)


def _expect_value(
    store: CheckPointStore, checkpoint_id: str, expected: bytes | None, why: str
) -> None:
    got = store.get(checkpoint_id)
    if expected is None:
        assert got is None, f"{why}: get({checkpoint_id!r}) returned {_short(got)}, expected None"
        return
    assert isinstance(got, bytes), (
        f"{why}: get({checkpoint_id!r}) returned {type(got).__name__}, expected bytes"
    )
    assert got == expected, (
        f"{why}: get({checkpoint_id!r}) returned {_short(got)}, expected {_short(expected)}"
    )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} chars)"


# -- data ----------------------------------------------------------------------------------


def check_round_trip(make_store: StoreFactory) -> None:
    """``set`` then ``get`` returns the same bytes (as ``bytes``)."""
    store = make_store()
    checkpoint_id = _unique("round-trip")
    with _cleanup(store, checkpoint_id):
        store.set(checkpoint_id, b"checkpoint bytes")
        _expect_value(store, checkpoint_id, b"checkpoint bytes", "after set")


def check_overwrite(make_store: StoreFactory) -> None:
    """A second ``set`` replaces the value, also with a shorter one."""
    store = make_store()
    checkpoint_id = _unique("overwrite")
    with _cleanup(store, checkpoint_id):
        store.set(checkpoint_id, b"first version, rather long")
        store.set(checkpoint_id, b"second")
        _expect_value(store, checkpoint_id, b"second", "after overwriting")


def check_unknown_id_returns_none(make_store: StoreFactory) -> None:
    """``get`` of an id that was never set returns ``None`` (not an error, not ``b""``)."""
    store = make_store()
    _expect_value(store, _unique("unknown"), None, "for an unknown id")


def check_delete(make_store: StoreFactory) -> None:
    """``delete`` removes only its id, and deleting an unknown id (twice) is a no-op."""
    store = make_store()
    doomed, kept = _unique("delete"), _unique("kept")
    with _cleanup(store, doomed, kept):
        store.set(doomed, b"doomed")
        store.set(kept, b"kept")
        store.delete(doomed)
        _expect_value(store, doomed, None, "after delete")
        _expect_value(store, kept, b"kept", "after deleting another id")
        store.delete(doomed)
        store.delete(_unique("never-set"))
        store.set(doomed, b"again")
        _expect_value(store, doomed, b"again", "after set following a delete")


def check_payload_bytes_round_trip(make_store: StoreFactory) -> None:
    """Every byte value, and the empty payload, round-trip unchanged."""
    store = make_store()
    every_byte, empty = _unique("bytes"), _unique("empty")
    payload = bytes(range(256)) * 4 + b"\x00\r\n\x1a\xff"
    with _cleanup(store, every_byte, empty):
        store.set(every_byte, payload)
        store.set(empty, b"")
        _expect_value(store, every_byte, payload, "for a payload with every byte value")
        _expect_value(store, empty, b"", "for an empty payload")


def check_large_payload(make_store: StoreFactory) -> None:
    """A 4 MiB payload round-trips."""
    store = make_store()
    checkpoint_id = _unique("large")
    payload = (uuid.uuid4().bytes * (4 * 1024 * 1024 // 16))[: 4 * 1024 * 1024 - 3]
    with _cleanup(store, checkpoint_id):
        store.set(checkpoint_id, payload)
        _expect_value(store, checkpoint_id, payload, "for a 4 MiB payload")


def check_unusual_ids(make_store: StoreFactory) -> None:
    """Paths, SQL, quotes, unicode, case variants and long ids are plain, distinct ids."""
    store = make_store()
    base = _unique("ids")
    # Each id is tried alone and behind a unique part, so shared backends stay clean.
    ids = [*UNUSUAL_IDS, *(base + unusual for unusual in UNUSUAL_IDS)]
    originals = {checkpoint_id: store.get(checkpoint_id) for checkpoint_id in UNUSUAL_IDS}
    try:
        for index, checkpoint_id in enumerate(ids):
            store.set(checkpoint_id, f"value {index}".encode())
        for index, checkpoint_id in enumerate(ids):
            _expect_value(store, checkpoint_id, f"value {index}".encode(), "for an unusual id")
        store.delete("..")
        _expect_value(store, "..", None, "after deleting '..'")
        _expect_value(store, ".", f"value {ids.index('.')}".encode(), "after deleting '..'")
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
    base = _unique("code-points")
    ids = [base + "\x00", base + "\x00x", base + "\ud800", base + "\udfff", base]
    with _cleanup(store, *ids):
        for index, checkpoint_id in enumerate(ids):
            store.set(checkpoint_id, bytes([index]))
        for index, checkpoint_id in enumerate(ids):
            _expect_value(store, checkpoint_id, bytes([index]), "for an id with NUL/surrogates")


def check_ids_are_distinct(make_store: StoreFactory) -> None:
    """Ids that differ only in case, trailing characters or separators do not share a value."""
    store = make_store()
    base = _unique("distinct")
    ids = [base + "a", base + "A", base + "a ", base + "a/", base + "a.", base + "a\\", base + "b"]
    with _cleanup(store, *ids):
        for index, checkpoint_id in enumerate(ids):
            store.set(checkpoint_id, str(index).encode())
        for index, checkpoint_id in enumerate(ids):
            _expect_value(store, checkpoint_id, str(index).encode(), "for ids that look alike")


def check_concurrent_writers_never_tear_values(make_store: StoreFactory) -> None:
    """Threads overwriting one id while others read it: every read is one whole written value."""
    store = make_store()
    checkpoint_id = _unique("concurrent")
    writers, rounds = 4, 8
    values = [bytes([65 + writer]) * (256 * 1024 + writer) for writer in range(writers)]
    start = threading.Barrier(writers + 2)
    done = threading.Event()
    problems: list[str] = []

    def write(value: bytes) -> None:
        start.wait()
        for _ in range(rounds):
            store.set(checkpoint_id, value)

    def read() -> None:
        start.wait()
        while not done.is_set():
            got = store.get(checkpoint_id)
            if got is not None and got not in values:
                problems.append(f"read a torn value of {len(got)} bytes")
                return

    with _cleanup(store, checkpoint_id):
        threads = [threading.Thread(target=write, args=(value,)) for value in values]
        threads += [threading.Thread(target=read) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads[:writers]:
            thread.join()
        done.set()
        for thread in threads[writers:]:
            thread.join()
        assert not problems, f"concurrent set/get: {problems[0]}"
        final = store.get(checkpoint_id)
        assert final in values, "after concurrent writers the value is not one that was written"


def check_threads_write_distinct_ids(make_store: StoreFactory) -> None:
    """Threads writing different ids at once lose none of them."""
    store = make_store()
    ids = [_unique(f"thread-{index}") for index in range(16)]
    start = threading.Barrier(len(ids))

    def write(checkpoint_id: str) -> None:
        start.wait()
        store.set(checkpoint_id, checkpoint_id.encode())

    with _cleanup(store, *ids):
        threads = [threading.Thread(target=write, args=(cid,)) for cid in ids]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for checkpoint_id in ids:
            _expect_value(store, checkpoint_id, checkpoint_id.encode(), "after parallel writes")


# -- leases --------------------------------------------------------------------------------


def _leasing(make_store: StoreFactory) -> LeasingCheckPointStore | None:
    store = make_store()
    return store if isinstance(store, LeasingCheckPointStore) else None


def check_lease_acquire_and_release(make_store: StoreFactory) -> None:
    """A held lease refuses other owners; only its owner's release frees it."""
    store = _leasing(make_store)
    if store is None:
        return
    checkpoint_id = _unique("lease")
    try:
        assert store.acquire_lease(checkpoint_id, "alice", 30.0) is True, (
            "acquire_lease on a free id must return True"
        )
        assert store.acquire_lease(checkpoint_id, "bob", 30.0) is False, (
            "acquire_lease must return False while another owner holds the lease"
        )
        store.release_lease(checkpoint_id, "bob")
        assert store.acquire_lease(checkpoint_id, "carol", 30.0) is False, (
            "release_lease by a non-owner must not release the lease"
        )
        store.release_lease(checkpoint_id, "alice")
        assert store.acquire_lease(checkpoint_id, "bob", 30.0) is True, (
            "after the owner released the lease, another owner must get it"
        )
        store.release_lease(checkpoint_id, "bob")
        store.release_lease(checkpoint_id, "bob")  # releasing a free lease is a no-op
        store.release_lease(_unique("never-leased"), "bob")
    finally:
        for owner in ("alice", "bob", "carol"):
            store.release_lease(checkpoint_id, owner)


def check_lease_reacquire_refreshes(make_store: StoreFactory) -> None:
    """Re-acquiring by the same owner succeeds and pushes the expiry out."""
    store = _leasing(make_store)
    if store is None:
        return
    checkpoint_id = _unique("refresh")
    try:
        assert store.acquire_lease(checkpoint_id, "alice", 0.2)
        time.sleep(0.1)
        assert store.acquire_lease(checkpoint_id, "alice", 5.0) is True, (
            "re-acquiring a lease by its owner must return True"
        )
        time.sleep(0.2)  # past the first expiry, well before the refreshed one
        assert store.acquire_lease(checkpoint_id, "bob", 5.0) is False, (
            "a refreshed lease must not expire at its original time"
        )
    finally:
        store.release_lease(checkpoint_id, "alice")


def check_lease_expires_and_can_be_taken_over(make_store: StoreFactory) -> None:
    """An expired lease is taken over; its former owner can then neither release nor retake it."""
    store = _leasing(make_store)
    if store is None:
        return
    checkpoint_id = _unique("expiry")
    try:
        assert store.acquire_lease(checkpoint_id, "alice", 0.1)
        time.sleep(0.2)  # sleep() never returns early, so the lease has expired by now
        assert store.acquire_lease(checkpoint_id, "bob", 30.0) is True, (
            "an expired lease must be taken over by another owner"
        )
        store.release_lease(checkpoint_id, "alice")
        assert store.acquire_lease(checkpoint_id, "alice", 30.0) is False, (
            "the former owner's release must not free a lease taken over by another owner"
        )
    finally:
        store.release_lease(checkpoint_id, "bob")
        store.release_lease(checkpoint_id, "alice")


def check_lease_is_independent_of_data(make_store: StoreFactory) -> None:
    """Leases are per id and separate from the data: reads, writes and deletes still work."""
    store = _leasing(make_store)
    if store is None:
        return
    first, second = _unique("lease-a"), _unique("lease-b")
    with _cleanup(store, first, second):
        try:
            assert store.acquire_lease(first, "alice", 30.0)
            assert store.acquire_lease(second, "bob", 30.0) is True, (
                "a lease on one id must not block another id"
            )
            store.set(first, b"data")
            _expect_value(store, first, b"data", "while the id is leased")
            store.delete(first)
            assert store.acquire_lease(first, "carol", 30.0) is False, (
                "deleting a checkpoint must not release its lease"
            )
            _expect_value(store, second, None, "for a leased id without data")
        finally:
            store.release_lease(first, "alice")
            store.release_lease(second, "bob")


def check_lease_race_has_one_winner(make_store: StoreFactory) -> None:
    """Many threads acquiring one lease at the same moment: exactly one gets it."""
    store = _leasing(make_store)
    if store is None:
        return
    checkpoint_id = _unique("race")
    contenders = 12
    start = threading.Barrier(contenders)
    results: dict[str, bool] = {}
    lock = threading.Lock()

    def contend(owner: str) -> None:
        start.wait()
        won = store.acquire_lease(checkpoint_id, owner, 30.0)
        with lock:
            results[owner] = won

    try:
        threads = [
            threading.Thread(target=contend, args=(f"owner-{index}",))
            for index in range(contenders)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = sorted(owner for owner, won in results.items() if won)
        assert len(winners) == 1, f"{len(winners)} of {contenders} racing owners got the lease"
    finally:
        for owner in results:
            store.release_lease(checkpoint_id, owner)


def check_namespace_is_the_same_for_one_backend(make_store: StoreFactory) -> None:
    """Two stores on one backend have one namespace (a ``str``; ``""`` when there is none).

    Signed checkpoints are bound to the namespace, so a checkpoint saved through one store
    object loads through another only when both report the same namespace.
    """
    first, second = namespace_of(make_store()), namespace_of(make_store())
    assert isinstance(first, str), f"namespace is a {type(first).__name__}, not a str"
    assert first == second, f"two stores on one backend have namespaces {first!r}, {second!r}"


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
)
"""The checks every :class:`~agentkit.checkpoint.CheckPointStore` must pass."""

LEASE_CHECKS: tuple[StoreCheck, ...] = (
    check_lease_acquire_and_release,
    check_lease_reacquire_refreshes,
    check_lease_expires_and_can_be_taken_over,
    check_lease_is_independent_of_data,
    check_lease_race_has_one_winner,
)
"""The checks of the lease methods (no-ops for stores without them)."""

ALL_CHECKS: tuple[StoreCheck, ...] = STORE_CHECKS + LEASE_CHECKS
"""Every check, in the order :func:`check_checkpoint_store` runs them."""


def check_checkpoint_store(
    make_store: StoreFactory,
    *,
    require_leases: bool = False,
    checks: Sequence[StoreCheck] = ALL_CHECKS,
) -> None:
    """Run the conformance checks against the stores ``make_store`` returns.

    Args:
        make_store: returns the store to check; it is called once per check.
        require_leases: fail when the store does not implement
            :class:`~agentkit.checkpoint.LeasingCheckPointStore` (stores shared by several
            processes should).
        checks: the checks to run (default: all of them).

    Raises:
        AssertionError: naming the failed check and what the store did wrong.
    """
    if require_leases:
        store = make_store()
        assert isinstance(store, LeasingCheckPointStore), (
            f"{type(store).__name__} has no acquire_lease/release_lease methods"
        )
    for check in checks:
        try:
            check(make_store)
        except AssertionError as exc:
            raise AssertionError(f"{check.__name__}: {exc}") from exc
