"""One thread refreshes every run's lease in a process (``LeaseKeeper``).

A durable run (a checkpoint id and ``durability="step"``) holds a lease on its id while it
lives. The leases are refreshed by a single ``agentkit-lease`` thread, however many runs are
alive, which is joined when the last of them ends. The behaviour tests run real durable runs
on real threads, held in a tool until each lease has been refreshed; the unit tests drive
:class:`LeaseKeeper` with leases whose refresh the test controls. Waits are on events, with
generous timeouts as failure guards only. The schedule is read on a clock: the tests on a
:class:`~agentkit.testing.ManualClock` move it past a refresh, or a whole ttl, at once; the
others run on the system clock, so its path stays covered end to end.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import Counter

import pytest

from agentkit import ChatModelAgent, Runner, tool, with_checkpoint_id
from agentkit._checkpoints import LeaseKeeper
from agentkit._clock import SYSTEM_CLOCK
from agentkit._refresher import REFRESHER, Refreshed, Refresher
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import (
    Clock,
    ManualClock,
    call,
    calls_message,
    no_thread_leak,
)
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

GUARD = 30.0  # a failure guard for waits, never a pace


def lease_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "agentkit-lease"]


class CountingStore(InMemoryCheckPointStore):
    """Counts each id's lease takes and refreshes (a refresh is a take by the same owner)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(clock=clock)
        self.takes: Counter[str] = Counter()
        self.changed = threading.Condition()

    def acquire_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool:
        taken = super().acquire_lease(checkpoint_id, owner, ttl)
        with self.changed:
            self.takes[checkpoint_id] += 1
            self.changed.notify_all()
        return taken

    def wait_for_refreshes(self, checkpoint_id: str, count: int) -> None:
        with self.changed:
            # the first take is the lease itself; every later one is a refresh
            if not self.changed.wait_for(lambda: self.takes[checkpoint_id] > count, GUARD):
                raise AssertionError(f"the lease on {checkpoint_id!r} was not refreshed")


def test_many_live_durable_runs_share_one_refreshing_thread_that_ends_with_the_last() -> None:
    store = CountingStore()
    runs = 12
    all_held = threading.Barrier(runs + 1, timeout=GUARD)

    @tool
    def hold(name: str) -> str:
        """Waits until its run's lease was refreshed twice, then until every run did."""
        store.wait_for_refreshes(name, 2)
        all_held.wait()  # every run alive here at once
        all_held.wait()  # the test has counted the threads
        return "held"

    def runner() -> Runner:
        model = ScriptedChatModel(
            lambda messages: "done"
            if messages[-1].role.value == "tool"
            else calls_message(call("hold", {"name": messages[0].content}))
        )
        agent = ChatModelAgent("A", "d", model, tools=[hold])
        return Runner(agent, checkpoint_store=store, durability="step", lease_ttl=0.3)

    with no_thread_leak():
        iterators = [
            runner().query(f"run-{index}", with_checkpoint_id(f"run-{index}"))
            for index in range(runs)
        ]
        all_held.wait()
        assert len(lease_threads()) == 1  # not one per run
        assert all(store.takes[f"run-{index}"] >= 3 for index in range(runs))
        all_held.wait()
        texts = [list(events)[-1].get_message().content for events in iterators]  # type: ignore[union-attr]
    assert texts == ["done"] * runs
    assert lease_threads() == []  # joined when the last run ended


class ScriptedLease:
    """A lease whose refreshes answer from a script: True, False, or an exception to raise.

    Past the script, refreshes succeed. ``gate``, when given, holds each refresh until set.
    """

    def __init__(
        self,
        ttl: float,
        script: tuple[bool | Exception, ...] = (),
        gate: threading.Event | None = None,
        name: str = "c",
    ) -> None:
        self.ttl = ttl
        self.checkpoint_id = name
        self.script = list(script)
        self.gate = gate
        self.refreshes = 0
        self.times = [time.monotonic()]  # taken, then each refresh
        self.released = False
        self.refreshing = threading.Event()
        self.refreshed = threading.Condition()

    def refresh(self, ttl: float | None = None) -> bool:
        self.refreshing.set()
        if self.gate is not None:
            assert self.gate.wait(GUARD)
        answer = self.script.pop(0) if self.script else True
        with self.refreshed:
            self.refreshes += 1
            self.times.append(time.monotonic())
            self.refreshed.notify_all()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def release(self) -> None:
        self.released = True

    def wait_for_refreshes(self, count: int) -> None:
        with self.refreshed:
            assert self.refreshed.wait_for(lambda: self.refreshes >= count, GUARD)


def test_leases_of_different_ttls_are_each_refreshed_every_third_of_theirs() -> None:
    short, long = ScriptedLease(0.15, name="short"), ScriptedLease(1.5, name="long")
    with no_thread_leak():
        keepers = [LeaseKeeper(short), LeaseKeeper(long)]
        long.wait_for_refreshes(2)
        assert len(lease_threads()) == 1
        for keeper in keepers:
            keeper.stop()
        assert lease_threads() == []
    assert short.released and long.released
    # never sooner than a third of its own ttl (a loaded machine only makes them later)
    for lease in (short, long):
        gaps = [later - earlier for earlier, later in itertools.pairwise(lease.times)]
        assert min(gaps) >= lease.ttl / 3 - 0.01, (lease.checkpoint_id, gaps)
    assert short.refreshes >= 6  # refreshed at its own pace meanwhile, not at the long one's


def test_a_lost_lease_calls_on_lost_once_and_the_others_are_still_kept() -> None:
    lost, kept = ScriptedLease(0.15, (True, False), name="lost"), ScriptedLease(0.15, name="kept")
    reasons: list[str] = []
    told = threading.Event()

    def on_lost(reason: str) -> None:
        reasons.append(reason)
        told.set()

    with no_thread_leak():
        losing, keeping = LeaseKeeper(lost, on_lost=on_lost), LeaseKeeper(kept)
        assert told.wait(GUARD)
        refreshes = kept.refreshes
        kept.wait_for_refreshes(refreshes + 3)
        assert lost.refreshes == 2  # not refreshed again once lost
        assert losing.lost is not None and "another process took it" in losing.lost
        assert keeping.lost is None
        losing.stop()
        keeping.stop()
    assert reasons == [losing.lost]


def test_a_lease_whose_refreshes_fail_for_a_whole_ttl_is_lost() -> None:
    failing = ScriptedLease(0.3, tuple(ConnectionError("store down") for _ in range(100)))
    told = threading.Event()
    with no_thread_leak():
        keeper = LeaseKeeper(failing, on_lost=lambda reason: told.set())
        assert told.wait(GUARD)
        assert keeper.lost is not None and "could not be refreshed for 0.3 seconds" in keeper.lost
        assert failing.refreshes >= 3  # it kept trying until the ttl was over
        keeper.stop()


def test_stop_waits_for_a_refresh_under_way_before_it_releases() -> None:
    gate = threading.Event()
    lease = ScriptedLease(0.15, gate=gate)
    with no_thread_leak():
        keeper = LeaseKeeper(lease)
        assert lease.refreshing.wait(GUARD)
        stopper = threading.Thread(target=keeper.stop)
        stopper.start()
        stopper.join(0.3)  # a window for a wrong release to show, not a pace
        released_early = lease.released
        assert stopper.is_alive() and not released_early
        gate.set()
        stopper.join(GUARD)
        assert not stopper.is_alive()
    assert lease.released
    assert lease.refreshes == 1


def test_on_lost_may_stop_its_own_keeper_from_the_refreshing_thread() -> None:
    lease = ScriptedLease(0.15, (False,))
    holder: list[LeaseKeeper] = []
    stopped = threading.Event()

    def on_lost(reason: str) -> None:
        holder[0].stop()
        stopped.set()

    with no_thread_leak():
        holder.append(LeaseKeeper(lease, on_lost=on_lost))
        assert stopped.wait(GUARD)
    assert lease.released


def test_a_keeper_added_after_the_last_one_stopped_gets_a_thread_again() -> None:
    with no_thread_leak():
        for round_ in range(3):
            lease = ScriptedLease(0.15, name=f"round-{round_}")
            keeper = LeaseKeeper(lease, release=False)
            lease.wait_for_refreshes(2)
            keeper.stop()
            assert lease_threads() == []
            assert not lease.released  # release=False: the caller gives it back


@pytest.mark.parametrize("count", [1, 50])
def test_stopping_keepers_from_many_threads_at_once_leaves_no_thread(count: int) -> None:
    leases = [ScriptedLease(0.15, name=f"l{index}") for index in range(count)]
    with no_thread_leak():
        keepers = [LeaseKeeper(lease) for lease in leases]
        for lease in leases:
            lease.wait_for_refreshes(1)
        stoppers = [threading.Thread(target=keeper.stop) for keeper in keepers]
        for stopper in stoppers:
            stopper.start()
        for stopper in stoppers:
            stopper.join(GUARD)
    assert all(lease.released for lease in leases)
    assert lease_threads() == []


def test_redis_conversation_locks_are_refreshed_by_the_same_thread(redis_url: str) -> None:  # noqa: F811
    import redis

    from agentkit.conversation import RedisConversationStore

    client = redis.Redis.from_url(redis_url)
    store = RedisConversationStore(redis_url, prefix="test:refresher:", lock_ttl=0.6)
    lease = ScriptedLease(30.0, name="durable")
    with no_thread_leak():
        before = threading.active_count()
        keeper = LeaseKeeper(lease)
        locks = [store.lock(f"chat-{index}") for index in range(3)]
        assert len(lease_threads()) == 1  # the leases' thread keeps the locks too
        assert threading.active_count() == before + 1  # and no thread of their own
        keys = [key for key in client.keys("test:refresher:*") if b"lock:" in key]
        assert len(keys) == 3
        for key in keys:  # refreshed: the time left goes up again, twice, before it ran out
            for _ in range(2):
                low = client.pttl(key)
                deadline = time.monotonic() + GUARD
                while client.pttl(key) <= low:
                    assert low > 0 and time.monotonic() < deadline, "the lock was not refreshed"
                    low = min(low, client.pttl(key))
                    time.sleep(0.01)  # polling Redis, not pacing the test
        for lock in locks:
            lock.release()
        assert client.keys("test:refresher:*") == []
        assert len(lease_threads()) == 1  # still the durable lease's
        keeper.stop()
    store.close()


def test_a_forked_child_refreshes_its_own_leases_with_a_thread_of_its_own() -> None:
    # The parent keeps a lease (its refreshing thread is alive) when it forks, as a Celery
    # prefork pool or a preloading WSGI server does; the child has no such thread, and must
    # start one for the leases it takes, not count on the parent's.
    parent_lease = ScriptedLease(30.0, name="parent")
    with no_thread_leak():
        keeper = LeaseKeeper(parent_lease)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, and leave without running the test's teardown
            status = 1
            try:
                lease = ScriptedLease(0.15, name="child")
                child_keeper = LeaseKeeper(lease)
                lease.wait_for_refreshes(2)
                child_keeper.stop()
                status = 0 if lease.released and lease_threads() == [] else 2
            finally:
                os.write(write, bytes([status]))
                os._exit(status)
        os.close(write)
        try:
            with os.fdopen(read, "rb") as pipe:
                assert pipe.read() == bytes([0])
        finally:
            _, code = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(code) == 0
        keeper.stop()


def test_a_holder_whose_refresh_raises_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(Refreshed):
        __slots__ = ("calls",)

        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        @property
        def refresh_interval(self) -> float:
            return 0.05

        def refresh_once(self) -> bool:
            self.calls += 1
            raise RuntimeError("a bug in a holder")

    broken, lease = Broken(), ScriptedLease(0.15)
    with no_thread_leak():
        REFRESHER.add(broken)
        keeper = LeaseKeeper(lease)
        lease.wait_for_refreshes(3)
        assert broken.calls >= 2  # tried again when due, and the lease kept meanwhile
        keeper.stop()
        REFRESHER.remove(broken)
    assert "refreshing" in caplog.text and "a bug in a holder" in caplog.text


def test_a_ctrl_c_while_stop_waits_for_a_refresh_still_retires_the_thread() -> None:
    # A Ctrl-C that lands in the wait for a refresh under way (the refreshing thread is in
    # the store) must not leave the holder counted: the thread would then never end.
    class Interrupted(threading.Condition):
        interrupt = False

        def wait(self, timeout: float | None = None) -> bool:
            if self.interrupt:
                raise KeyboardInterrupt
            return super().wait(timeout)

    class Gated(Refreshed):
        __slots__ = ("entered", "gate")

        def __init__(self) -> None:
            super().__init__()
            self.gate, self.entered = threading.Event(), threading.Event()

        @property
        def refresh_interval(self) -> float:
            return 0.05

        def refresh_once(self) -> bool:
            self.entered.set()
            assert self.gate.wait(GUARD)
            return True

    refresher = Refresher()
    wake = refresher._wake = Interrupted(threading.Lock())
    item = Gated()
    with no_thread_leak():
        refresher.add(item)
        assert item.entered.wait(GUARD)  # the thread is in the refresh now
        wake.interrupt = True
        with pytest.raises(KeyboardInterrupt):
            refresher.remove(item)
        wake.interrupt = False
        assert refresher.live == 0
        [thread] = lease_threads()
        item.gate.set()  # the refresh returns; the retired thread ends by itself
        thread.join(GUARD)
        assert not thread.is_alive()


def test_the_slots_of_a_redis_limit_are_refreshed_by_the_same_thread(redis_url: str) -> None:  # noqa: F811
    from agentkit.integrations.redis import RedisConcurrencyLimit

    lease = ScriptedLease(30.0, name="durable")
    slots = RedisConcurrencyLimit(2, f"refresher-{os.getpid()}", url=redis_url, lease=0.6)
    with no_thread_leak():
        before = threading.active_count()
        keeper = LeaseKeeper(lease)
        held = [slots.acquire(timeout=GUARD) for _ in range(2)]
        assert len(lease_threads()) == 1  # the leases' thread keeps the slots too
        assert threading.active_count() == before + 1  # and no thread of their own
        deadline = time.monotonic() + 3 * 0.6
        while time.monotonic() < deadline:  # three leases long: kept only if refreshed
            assert slots.in_use == 2
            time.sleep(0.05)  # polling Redis, not pacing the test
        for slot in held:
            slot.release()
        assert slots.in_use == 0 and slots.held_here == 0
        keeper.stop()
        slots.close()


# --- the schedule on a manual clock: no real time passes ---------------------------------


class ClockedLease(ScriptedLease):
    """A scripted lease that notes the time of each refresh on ``clock``."""

    def __init__(self, clock: ManualClock, ttl: float, script: tuple[bool | Exception, ...] = ()):
        super().__init__(ttl, script, name="clocked")
        self.clock = clock
        self.times = [clock.monotonic()]

    def refresh(self, ttl: float | None = None) -> bool:
        now = self.clock.monotonic()
        try:
            return super().refresh(ttl)
        finally:
            self.times[-1] = now  # the time on the clock when the refresh was made


def test_on_a_manual_clock_a_lease_is_refreshed_when_the_clock_passes_each_third_of_its_ttl() -> None:
    clock = ManualClock()
    lease = ClockedLease(clock, ttl=600.0)  # ten minutes of a lease, no real second of them
    with no_thread_leak():
        keeper = LeaseKeeper(lease, clock=clock)
        assert lease_threads() != []  # the manual clock's refreshing thread
        for count in (1, 2, 3):
            assert clock.wait_for_waiters(1, GUARD)  # the next refresh is scheduled
            clock.advance(200.0)
            lease.wait_for_refreshes(count)
        keeper.stop()
    start = lease.times[0]
    assert lease.times[1:] == [start + 200.0, start + 400.0, start + 600.0]
    assert keeper.lost is None and lease.released


def test_on_a_manual_clock_a_lease_whose_refreshes_fail_is_lost_when_its_ttl_has_passed() -> None:
    clock = ManualClock()
    lease = ClockedLease(clock, 30.0, tuple(ConnectionError("store down") for _ in range(10)))
    reasons: list[str] = []
    told = threading.Event()

    def on_lost(reason: str) -> None:
        reasons.append(reason)
        told.set()

    with no_thread_leak():
        keeper = LeaseKeeper(lease, on_lost=on_lost, clock=clock)
        for count in (1, 2):  # 10 s and 20 s in: failed, but the lease may still hold
            assert clock.wait_for_waiters(1, GUARD)
            clock.advance(10.0)
            lease.wait_for_refreshes(count)
        assert clock.wait_for_waiters(1, GUARD)
        clock.advance(10.0)  # a whole ttl without a refresh: lost
        assert told.wait(GUARD)
        keeper.stop()
    # Lost at the third failure, not sooner (a refresh of a lost lease is never tried again).
    assert lease.refreshes == 3
    assert reasons == [keeper.lost] and "could not be refreshed for 30 seconds" in reasons[0]


def test_a_durable_run_on_a_store_with_a_manual_clock_keeps_its_lease_as_the_clock_moves() -> None:
    clock = ManualClock()
    store = CountingStore(clock)
    refreshed_past_the_ttl = threading.Event()
    rival = ""

    @tool
    def hold(name: str) -> str:
        """Moves the clock past three ttls of the run's lease, a third at a time."""
        nonlocal rival
        for count in range(1, 10):
            assert clock.wait_for_waiters(1, GUARD)  # the run's next refresh is scheduled
            clock.advance(10.0)
            store.wait_for_refreshes(name, count)
        # 90 s on the store's clock, a 30 s lease: held because it was refreshed.
        rival = "refused" if not store.acquire_lease(name, "rival", 30.0) else "taken"
        refreshed_past_the_ttl.set()
        return "held"

    model = ScriptedChatModel(
        lambda messages: "done"
        if messages[-1].role.value == "tool"
        else calls_message(call("hold", {"name": "run-clocked"}))
    )
    agent = ChatModelAgent("A", "d", model, tools=[hold])
    runner = Runner(agent, checkpoint_store=store, durability="step", lease_ttl=30.0)
    with no_thread_leak():
        events = list(runner.query("hold", with_checkpoint_id("run-clocked")))
    assert events[-1].get_message().content == "done"  # type: ignore[union-attr]
    assert refreshed_past_the_ttl.is_set() and rival == "refused"
    assert store.acquire_lease("run-clocked", "rival", 30.0)  # given back at the run's end
