"""The step-record checks of the checkpoint store conformance suite.

They check :class:`~agentkit.checkpoint.JournalingCheckPointStore`, the optional extension a
store implements to keep a run's step records (``Runner(durability="step")``), and
:class:`~agentkit.checkpoint.RebasingCheckPointStore` (``set_base``); for a store without
them they pass at once (the Runner then saves whole checkpoints at each step, or calls ``set``
and ``delete_steps`` instead of ``set_base``).
"""

from __future__ import annotations

import threading

from agentkit.checkpoint._base import JournalingCheckPointStore, RebasingCheckPointStore
from agentkit.testing._checkpoint_checks import UNUSUAL_IDS
from agentkit.testing._store_support import (
    THREAD_GUARD,
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


def _rebasing(make_store: StoreFactory) -> RebasingCheckPointStore | None:
    store = make_store()
    return store if isinstance(store, RebasingCheckPointStore) else None


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


def check_set_base_replaces_the_base_and_drops_its_records(make_store: StoreFactory) -> None:
    """``set_base`` stores the new base and removes the old base's records; later records start
    afresh, in order; ``sync`` is accepted either way; ``set`` and ``delete`` keep their rules."""
    store = _rebasing(make_store)
    if store is None:
        return
    checkpoint_id, fresh = unique("rebase"), unique("rebase-fresh")
    with cleanup(store, checkpoint_id, fresh):
        store.set(checkpoint_id, b"base 1")
        store.append_step(checkpoint_id, b"1:a")
        store.append_step(checkpoint_id, b"1:b")
        store.set_base(checkpoint_id, b"base 2")
        expect_value(store, checkpoint_id, b"base 2", "set_base must store the new base")
        _expect_steps(store, checkpoint_id, [], "set_base must remove the old base's records")
        store.append_step(checkpoint_id, b"2:a")
        store.append_step(checkpoint_id, b"2:b", sync=True)
        _expect_steps(store, checkpoint_id, [b"2:a", b"2:b"], "records appended after set_base")
        store.set_base(checkpoint_id, b"base 3", sync=True)
        expect_value(store, checkpoint_id, b"base 3", "set_base(..., sync=True)")
        _expect_steps(store, checkpoint_id, [], "set_base(..., sync=True) must remove the records")
        store.set_base(checkpoint_id, b"base 3", sync=False)  # the same base again: no error
        store.set_base(checkpoint_id, b"")
        expect_value(store, checkpoint_id, b"", "an empty base is a base")
        store.append_step(checkpoint_id, b"3:a")
        store.set(checkpoint_id, b"set, not set_base")
        _expect_steps(store, checkpoint_id, [b"3:a"], "set (not set_base) must keep the records")
        store.set_base(fresh, b"a first base")  # no checkpoint there yet: not an error
        expect_value(store, fresh, b"a first base", "set_base of a new id")
        store.append_step(fresh, b"f:a")
        store.delete(fresh)
        expect_value(store, fresh, None, "delete after set_base")
        _expect_steps(store, fresh, [], "delete after set_base must remove the records too")


def check_set_base_leaves_other_ids_alone(make_store: StoreFactory) -> None:
    """``set_base`` of one id changes no other id's base or records (see ``UNUSUAL_IDS``)."""
    store = _rebasing(make_store)
    if store is None:
        return
    token = unique("rebase-ids")
    ids = [token + suffix for suffix in UNUSUAL_IDS]
    with cleanup(store, *ids):
        for number, checkpoint_id in enumerate(ids):
            store.set(checkpoint_id, f"base {number}".encode())
            store.append_step(checkpoint_id, f"record {number}".encode())
        for number, checkpoint_id in enumerate(ids):
            store.set_base(checkpoint_id, f"new base {number}".encode())
            for later, other in enumerate(ids[number + 1 :], start=number + 1):
                expect_value(
                    store, other, f"base {later}".encode(),
                    f"set_base({checkpoint_id!r}) must leave {other!r} alone",
                )
                _expect_steps(
                    store, other, [f"record {later}".encode()],
                    f"set_base({checkpoint_id!r}) must leave the records of {other!r} alone",
                )
        for number, checkpoint_id in enumerate(ids):
            expect_value(store, checkpoint_id, f"new base {number}".encode(), "after set_base")


def check_set_base_is_whole_to_concurrent_readers(make_store: StoreFactory) -> None:
    """While one writer replaces bases and appends records, readers see each base whole and
    the records of one base at a time, in order: never a torn base, never two bases' records.

    The writer waits (bounded) for every reader to read once after each base and its records,
    so each state is read at least once however the threads are scheduled.
    """
    store = _rebasing(make_store)
    if store is None:
        return
    checkpoint_id = unique("rebase-threads")
    bases, per_base, readers = 30, 3, 2
    written = [bytes([65 + number % 26]) * 65_536 + b"%d" % number for number in range(bases)]
    problems: list[str] = []
    done = threading.Event()
    reads = threading.Condition()
    read_count = [0]

    def write() -> None:
        try:
            for number, base in enumerate(written):
                store.set_base(checkpoint_id, base, sync=number % 5 == 0)
                for record in range(per_base):
                    store.append_step(checkpoint_id, b"%d:%d" % (number, record))
                if not _wait_for_reads(reads, read_count, readers + 1, problems):
                    return
        except Exception as error:
            problems.append(f"set_base or append_step raised {error!r}")
        finally:
            done.set()

    def read() -> None:
        try:
            while not done.is_set() and not problems:
                _read_one(store, checkpoint_id, written, problems)
                with reads:
                    read_count[0] += 1
                    reads.notify_all()
        except Exception as error:
            problems.append(f"get or read_steps raised {error!r}")
        with reads:
            reads.notify_all()

    with cleanup(store, checkpoint_id):
        store.set_base(checkpoint_id, written[0])
        threads = [threading.Thread(target=read) for _ in range(readers)]
        run_threads([threading.Thread(target=write), *threads], "set_base")
        expect(not problems, problems[0] if problems else "")
        expect_value(store, checkpoint_id, written[-1], "the last base written")
        last = [b"%d:%d" % (bases - 1, record) for record in range(per_base)]
        _expect_steps(store, checkpoint_id, last, "the records of the last base")


def _wait_for_reads(
    reads: threading.Condition, read_count: list[int], more: int, problems: list[str]
) -> bool:
    """Wait until ``more`` reads were made (or a problem was found); ``False``: stop writing."""
    with reads:
        wanted = read_count[0] + more
        if not reads.wait_for(lambda: read_count[0] >= wanted or bool(problems), THREAD_GUARD):
            problems.append("the readers did not read within the time guard")
    return not problems


def _read_one(
    store: RebasingCheckPointStore, checkpoint_id: str, written: list[bytes], problems: list[str]
) -> None:
    base = store.get(checkpoint_id)
    if base is not None and base not in written:
        problems.append(f"get returned a base never written whole: {short(base)}")
    records = store.read_steps(checkpoint_id)
    expected = [records[0].split(b":")[0] + b":%d" % n for n in range(len(records))]
    if records != expected:
        problems.append(
            f"read_steps returned {short(records)}: not the records of one base in order "
            "(set_base must drop the old base's records with it)"
        )


STEP_CHECKS: tuple[StoreCheck, ...] = (
    check_steps_round_trip_in_order,
    check_steps_are_apart_from_the_checkpoint,
    check_steps_of_unusual_ids_are_distinct,
    check_concurrent_appends_keep_every_record_whole,
    check_set_base_replaces_the_base_and_drops_its_records,
    check_set_base_leaves_other_ids_alone,
    check_set_base_is_whole_to_concurrent_readers,
)
"""The checks of :class:`~agentkit.checkpoint.JournalingCheckPointStore` and
:class:`~agentkit.checkpoint.RebasingCheckPointStore` (no-ops for stores without them)."""
