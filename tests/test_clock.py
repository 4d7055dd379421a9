"""Leases, TTLs and retention read one clock, so a test moves time instead of sleeping.

:class:`agentkit.testing.ManualClock` stands still until ``advance()``: a lease of 30 s runs
out the moment a test says so, and a checkpoint ages a day at once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from agentkit.checkpoint import FileCheckPointStore, InMemoryCheckPointStore
from agentkit.errors import AgentKitValueError
from agentkit.testing import Clock, ManualClock

GUARD = 30.0  # a failure guard for waits, never a pace


def test_a_manual_clock_stands_still_until_it_is_moved() -> None:
    clock = ManualClock()
    first = (clock.monotonic(), clock.time())
    assert (clock.monotonic(), clock.time()) == first
    clock.advance(2.5)
    assert (clock.monotonic(), clock.time()) == (first[0] + 2.5, first[1] + 2.5)
    with pytest.raises(AgentKitValueError, match="seconds >= 0"):
        clock.advance(-1)
    assert isinstance(clock, Clock)


def test_an_in_memory_lease_runs_out_when_the_clock_says_so() -> None:
    clock = ManualClock()
    store = InMemoryCheckPointStore(clock=clock)
    assert store.acquire_lease("run-1", "alice", 30.0)
    clock.advance(29.0)
    assert not store.acquire_lease("run-1", "bob", 30.0)  # still alice's
    assert store.acquire_lease("run-1", "alice", 30.0)  # refreshed: 30 s from now
    clock.advance(29.0)
    assert not store.acquire_lease("run-1", "bob", 30.0)
    clock.advance(1.5)
    assert store.acquire_lease("run-1", "bob", 30.0)  # taken over, no sleep


def test_a_file_lease_runs_out_when_the_clock_says_so(tmp_path: Path) -> None:
    clock = ManualClock()
    store = FileCheckPointStore(tmp_path, clock=clock)
    assert store.acquire_lease("run-1", "alice", 600.0)
    assert not store.acquire_lease("run-1", "bob", 600.0)
    clock.advance(601.0)
    assert store.acquire_lease("run-1", "bob", 600.0)


def test_prune_ages_checkpoints_on_the_clock(tmp_path: Path) -> None:
    clock = ManualClock()
    store = FileCheckPointStore(tmp_path, clock=clock)
    store.set("old", b"data")
    assert store.prune(older_than=3600) == 0  # written just now
    clock.advance(2 * 3600)
    store.set("new", b"data")  # a real write: its age is the file's time, so it is old too...
    assert store.acquire_lease("new", "alice", 3 * 3600)  # ...but a held lease keeps it
    assert store.prune(older_than=3600) == 1
    assert store.get("old") is None and store.get("new") == b"data"


def test_a_wait_on_a_manual_clock_ends_when_the_clock_passes_its_deadline() -> None:
    clock = ManualClock()
    condition = threading.Condition()
    deadline = clock.monotonic() + 60.0
    waiting, woken = threading.Event(), threading.Event()

    def waiter() -> None:
        with condition:
            waiting.set()
            while clock.monotonic() < deadline:
                clock.wait_until(condition, deadline)
        woken.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        assert waiting.wait(GUARD)
        clock.advance(30.0)  # wakes it: still early, so it waits again
        clock.advance(30.0)
        assert woken.wait(GUARD)  # the minute passed, and no real one
    finally:
        clock.advance(60.0)
        thread.join(GUARD)
    assert not thread.is_alive()


def test_a_wait_until_a_time_already_past_returns_at_once() -> None:
    condition = threading.Condition()
    for clock in (Clock(), ManualClock()):
        with condition:
            started = time.monotonic()
            clock.wait_until(condition, clock.monotonic() - 1.0)
            assert time.monotonic() - started < GUARD / 2
