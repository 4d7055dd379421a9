"""The step-record checks of the checkpoint store conformance suite.

They check :class:`~agentkit.checkpoint.JournalingCheckPointStore`, the optional extension a
store implements to keep a run's step records (``Runner(durability="step")``); for a store
without it they pass at once (the Runner then saves whole checkpoints at each step).
"""

from __future__ import annotations

import threading

from agentkit.checkpoint.base import JournalingCheckPointStore
from agentkit.testing._checkpoint_checks import UNUSUAL_IDS
from agentkit.testing._store_support import (
    StoreCheck,
    StoreFactory,
    cleanup,
    expect,
    expect_value,
    run_threads,
    short,
    unique,
)


def _journaling(make_store: StoreFactory) -> JournalingCheckPointStore | None:
    store = make_store()
    return store if isinstance(store, JournalingCheckPointStore) else None


def _expect_steps(
    store: JournalingCheckPointStore, checkpoint_id: str, expected: list[bytes], why: str
) -> None:
    got = store.read_steps(checkpoint_id)
    expect(
        isinstance(got, list) and all(type(item) is bytes for item in got),
        f"{why}: read_steps({checkpoint_id!r}) must return a list of bytes, got {short(got)}",
    )
    expect(
        got == expected,
        f"{why}: read_steps({checkpoint_id!r}) returned {short(got)}, expected {short(expected)}",
    )


def check_steps_round_trip_in_order(make_store: StoreFactory) -> None:
    """Appended records come back whole, as bytes, in the order they were appended."""
    store = _journaling(make_store)
    if store is None:
        return
    checkpoint_id = unique("steps")
    records = [b"first", b"", b"\x00\xff binary \n\r\n", bytes(range(256)) * 40, b"last"]
    with cleanup(store, checkpoint_id):
        _expect_steps(store, checkpoint_id, [], "before any append")
        for number, record in enumerate(records):
            store.append_step(checkpoint_id, record, sync=number == 2)
        _expect_steps(store, checkpoint_id, records, "after five appends")
        _expect_steps(store, checkpoint_id, records, "read twice")


def check_steps_are_apart_from_the_checkpoint(make_store: StoreFactory) -> None:
    """``set`` keeps the records, ``delete_steps`` keeps the checkpoint, ``delete`` removes both."""
    store = _journaling(make_store)
    if store is None:
        return
    checkpoint_id = unique("steps-apart")
    with cleanup(store, checkpoint_id):
        store.append_step(checkpoint_id, b"before the checkpoint")
        expect_value(store, checkpoint_id, None, "a step record is not the checkpoint")
        store.set(checkpoint_id, b"base")
        store.append_step(checkpoint_id, b"after")
        _expect_steps(store, checkpoint_id, [b"before the checkpoint", b"after"], "after set")
        expect_value(store, checkpoint_id, b"base", "appending a step leaves the checkpoint")
        store.delete_steps(checkpoint_id)
        _expect_steps(store, checkpoint_id, [], "after delete_steps")
        expect_value(store, checkpoint_id, b"base", "delete_steps must keep the checkpoint")
        store.delete_steps(checkpoint_id)  # no records left: not an error
        store.append_step(checkpoint_id, b"again")
        store.delete(checkpoint_id)
        _expect_steps(store, checkpoint_id, [], "delete must remove the step records too")
        expect_value(store, checkpoint_id, None, "after delete")
        store.delete_steps(unique("never-written"))


def check_steps_of_unusual_ids_are_distinct(make_store: StoreFactory) -> None:
    """Every id keeps its own records, however odd the id (see ``UNUSUAL_IDS``)."""
    store = _journaling(make_store)
    if store is None:
        return
    token = unique("steps-ids")
    ids = [token + suffix for suffix in UNUSUAL_IDS]
    with cleanup(store, *ids):
        for number, checkpoint_id in enumerate(ids):
            store.append_step(checkpoint_id, f"record {number}".encode())
        for number, checkpoint_id in enumerate(ids):
            _expect_steps(store, checkpoint_id, [f"record {number}".encode()], "unusual id")


def check_concurrent_appends_keep_every_record_whole(make_store: StoreFactory) -> None:
    """Threads appending to one id lose no record and tear none (each comes back whole)."""
    store = _journaling(make_store)
    if store is None:
        return
    checkpoint_id = unique("steps-threads")
    writers, each = 4, 25
    with cleanup(store, checkpoint_id):
        start = threading.Barrier(writers)

        def write(writer: int) -> None:
            start.wait()
            for number in range(each):
                store.append_step(checkpoint_id, f"{writer}:{number}:".encode() * 50)

        run_threads(
            (threading.Thread(target=write, args=(writer,)) for writer in range(writers)),
            "append_step",
        )
        got = store.read_steps(checkpoint_id)
        expected = {f"{w}:{n}:".encode() * 50 for w in range(writers) for n in range(each)}
        expect(
            len(got) == writers * each and set(got) == expected,
            f"{writers} threads appended {writers * each} records; read_steps returned "
            f"{len(got)}, {len(set(got) - expected)} of them not as written",
        )
        for writer in range(writers):
            mine = [item for item in got if item.startswith(f"{writer}:".encode())]
            numbers = [int(item.split(b":")[1]) for item in mine]
            expect(
                numbers == sorted(numbers),
                f"the records of one thread came back out of order: {numbers}",
            )


STEP_CHECKS: tuple[StoreCheck, ...] = (
    check_steps_round_trip_in_order,
    check_steps_are_apart_from_the_checkpoint,
    check_steps_of_unusual_ids_are_distinct,
    check_concurrent_appends_keep_every_record_whole,
)
"""The checks of :class:`~agentkit.checkpoint.JournalingCheckPointStore` (no-ops for stores
without step records)."""
