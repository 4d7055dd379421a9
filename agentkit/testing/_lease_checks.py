"""The lease checks of the checkpoint store conformance suite (no-ops for stores without leases).

Leases make a resume exclusive across processes. The expiry checks move the store's clock on
when it is a :class:`~agentkit.testing.ManualClock` (``store.clock``; the built-in stores take
one as ``clock=``), and otherwise wait for fractions of a second to let short leases run out.
"""

from __future__ import annotations

import threading

from agentkit._runctx import cancellable_sleep
from agentkit.checkpoint._base import LeasingCheckPointStore, _clock_of
from agentkit.testing._clock import ManualClock
from agentkit.testing._store_support import (
    THREAD_GUARD,
    StoreCheck,
    StoreFactory,
    cleanup,
    expect,
    expect_value,
    run_threads,
    unique,
)


def _leasing(make_store: StoreFactory) -> LeasingCheckPointStore | None:
    store = make_store()
    return store if isinstance(store, LeasingCheckPointStore) else None


def _time_scale(store: LeasingCheckPointStore) -> float:
    """How much longer than the sleeping checks' leases are those of a store on a manual
    clock: long enough that real time passing does not matter (a store may also expire a
    lease on its own clock, as Redis deletes a key)."""
    return 100.0 if isinstance(_clock_of(store), ManualClock) else 1.0


def _pass(store: LeasingCheckPointStore, seconds: float) -> None:
    """Let ``seconds`` go by for the store's leases: move its manual clock on, or sleep."""
    clock = _clock_of(store)
    if isinstance(clock, ManualClock):
        clock.advance(seconds)
    else:
        cancellable_sleep(seconds)  # an Event wait never returns early


def check_lease_acquire_and_release(make_store: StoreFactory) -> None:
    """A held lease refuses other owners; only its owner's release frees it."""
    store = _leasing(make_store)
    if store is None:
        return
    checkpoint_id = unique("lease")
    try:
        expect(
            store.acquire_lease(checkpoint_id, "alice", 30.0) is True,
            "acquire_lease on a free id must return True",
        )
        expect(
            store.acquire_lease(checkpoint_id, "bob", 30.0) is False,
            "acquire_lease must return False while another owner holds the lease",
        )
        store.release_lease(checkpoint_id, "bob")
        expect(
            store.acquire_lease(checkpoint_id, "carol", 30.0) is False,
            "release_lease by a non-owner must not release the lease",
        )
        store.release_lease(checkpoint_id, "alice")
        expect(
            store.acquire_lease(checkpoint_id, "bob", 30.0) is True,
            "after the owner released the lease, another owner must get it",
        )
        store.release_lease(checkpoint_id, "bob")
        store.release_lease(checkpoint_id, "bob")  # releasing a free lease is a no-op
        store.release_lease(unique("never-leased"), "bob")
    finally:
        for owner in ("alice", "bob", "carol"):
            store.release_lease(checkpoint_id, owner)


def check_lease_reacquire_refreshes(make_store: StoreFactory) -> None:
    """Re-acquiring by the same owner succeeds and pushes the expiry out."""
    store = _leasing(make_store)
    if store is None:
        return
    checkpoint_id = unique("refresh")
    scale = _time_scale(store)
    try:
        expect(
            store.acquire_lease(checkpoint_id, "alice", 0.2 * scale) is True,
            "acquire_lease on a free id must return True",
        )
        _pass(store, 0.1 * scale)
        expect(
            store.acquire_lease(checkpoint_id, "alice", 5.0 * scale) is True,
            "re-acquiring a lease by its owner must return True",
        )
        _pass(store, 0.2 * scale)  # past the first expiry, well before the refreshed one
        expect(
            store.acquire_lease(checkpoint_id, "bob", 5.0) is False,
            "a refreshed lease must not expire at its original time",
        )
    finally:
        store.release_lease(checkpoint_id, "alice")


def check_lease_expires_and_can_be_taken_over(make_store: StoreFactory) -> None:
    """An expired lease is taken over; its former owner can then neither release nor retake it."""
    store = _leasing(make_store)
    if store is None:
        return
    checkpoint_id = unique("expiry")
    scale = _time_scale(store)
    try:
        expect(
            store.acquire_lease(checkpoint_id, "alice", 0.1 * scale) is True,
            "acquire_lease on a free id must return True",
        )
        _pass(store, 0.2 * scale)  # the lease has expired
        expect(
            store.acquire_lease(checkpoint_id, "bob", 30.0) is True,
            "an expired lease must be taken over by another owner",
        )
        store.release_lease(checkpoint_id, "alice")
        expect(
            store.acquire_lease(checkpoint_id, "alice", 30.0) is False,
            "the former owner's release must not free a lease taken over by another owner",
        )
    finally:
        store.release_lease(checkpoint_id, "bob")
        store.release_lease(checkpoint_id, "alice")


def check_lease_is_independent_of_data(make_store: StoreFactory) -> None:
    """Leases are per id and separate from the data: reads, writes and deletes still work."""
    store = _leasing(make_store)
    if store is None:
        return
    first, second = unique("lease-a"), unique("lease-b")
    with cleanup(store, first, second):
        try:
            expect(
                store.acquire_lease(first, "alice", 30.0) is True,
                "acquire_lease on a free id must return True",
            )
            expect(
                store.acquire_lease(second, "bob", 30.0) is True,
                "a lease on one id must not block another id",
            )
            store.set(first, b"data")
            expect_value(store, first, b"data", "while the id is leased")
            store.delete(first)
            expect(
                store.acquire_lease(first, "carol", 30.0) is False,
                "deleting a checkpoint must not release its lease",
            )
            expect_value(store, second, None, "for a leased id without data")
        finally:
            store.release_lease(first, "alice")
            store.release_lease(second, "bob")


def check_lease_race_has_one_winner(make_store: StoreFactory) -> None:
    """Many threads acquiring one lease at the same moment: exactly one gets it."""
    store = _leasing(make_store)
    if store is None:
        return
    checkpoint_id = unique("race")
    contenders = 12
    start = threading.Barrier(contenders, timeout=THREAD_GUARD)
    results: dict[str, bool] = {}
    problems: list[str] = []
    lock = threading.Lock()

    def contend(owner: str) -> None:
        try:
            start.wait()
            won = store.acquire_lease(checkpoint_id, owner, 30.0)
        except Exception as error:
            problems.append(f"acquire_lease raised {error!r}")
            return
        with lock:
            results[owner] = won

    try:
        run_threads(
            (
                threading.Thread(target=contend, args=(f"owner-{index}",))
                for index in range(contenders)
            ),
            "racing acquire_lease",
        )
        expect(not problems, f"racing acquire_lease: {problems[0] if problems else ''}")
        winners = sorted(owner for owner, won in results.items() if won)
        expect(len(winners) == 1, f"{len(winners)} of {contenders} racing owners got the lease")
    finally:
        for owner in results:
            store.release_lease(checkpoint_id, owner)


LEASE_CHECKS: tuple[StoreCheck, ...] = (
    check_lease_acquire_and_release,
    check_lease_reacquire_refreshes,
    check_lease_expires_and_can_be_taken_over,
    check_lease_is_independent_of_data,
    check_lease_race_has_one_winner,
)
"""The checks of the lease methods (no-ops for stores without them)."""
