"""The watcher of a Celery worker's runs: one thread and one pub/sub connection per process.

Before, every run had a watcher thread and a pub/sub subscription of its own (subscribe, a
wake-up publish and an unsubscribe per run: three Redis round trips and a thread per run).
Now one :class:`WatchHub` per process watches every run: these tests run several runs on one
hub against a real redis-server (restarted in one test) and check that each guarantee holds
per run: a cancel reaches exactly its run, a lost lease stops exactly its run, a Redis restart
keeps every run's lease and cancel, the shutdown cancels every run, and the thread ends once
no run is left. Waits are bounded by ``GUARD``; none paces the test.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

redis = pytest.importorskip("redis")

from agentkit import CancelHandle, CancelMode  # noqa: E402
from agentkit._checkpoints import LeaseKeeper  # noqa: E402
from agentkit.checkpoint import RedisCheckPointStore, lease_for  # noqa: E402
from agentkit.integrations import _celery_worker  # noqa: E402
from agentkit.integrations._celery_worker import Watcher, WatchHub  # noqa: E402
from agentkit.integrations._redislog import RedisRunLog  # noqa: E402
from agentkit.integrations._signing import Sealer  # noqa: E402
from agentkit.testing import ManualClock  # noqa: E402
from tests.celery_support import RestartableRedis  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402, F401

GUARD = 20.0  # seconds: a failure guard; what is awaited takes milliseconds
PREFIX = "watcher-test:"


def _log_for(url: str) -> RedisRunLog:
    client = redis.Redis.from_url(url)
    sealer = Sealer(lambda: [b"watcher-tests-key-0123456789abcdef"], "watcher-tests")
    return RedisRunLog(client, prefix=PREFIX, maxlen=100, ttl=60, sealer=sealer)


@pytest.fixture
def log(redis_url: str) -> Iterator[RedisRunLog]:  # noqa: F811
    made = _log_for(redis_url)
    yield made
    made.client.close()


@pytest.fixture
def hub(log: RedisRunLog) -> Iterator[WatchHub]:
    made = WatchHub(log)
    yield made
    _until(lambda: not made.runs, "a test left a run registered")


def _until(condition: Callable[[], object], what: str, guard: float = GUARD) -> None:
    deadline = time.monotonic() + guard
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _watcher(hub: WatchHub, run_id: str, lease_ttl: float = 30) -> tuple[Watcher, CancelHandle]:
    handle = CancelHandle()
    watcher = Watcher(
        hub,
        run_id,
        handle,
        stops=0,
        shutdown_mode=CancelMode.AFTER_TOOL_CALLS,
        shutdown_timeout=5,
        lease_ttl=lease_ttl,
    )
    watcher.start()
    return watcher, handle


def _expires_later(log: RedisRunLog, key: bytes | str, floor_ms: int) -> bool:
    """Whether ``key`` has more than ``floor_ms`` left before Redis drops it."""
    return int(log.client.pttl(key)) > floor_ms


def _thread_of(hub: WatchHub) -> threading.Thread | None:
    return hub.thread


def _cancel(log: RedisRunLog, run_id: str) -> None:
    sealed = log.sealer.seal("cancel", {"run_id": run_id, "stops": 0, "mode": "immediate"})
    log.request_cancel(run_id, sealed)


def _pubsub_clients(log: RedisRunLog) -> int:
    return sum(1 for client in log.client.client_list() if client.get("psub") not in ("0", 0))


def test_two_runs_share_one_thread_and_a_cancel_stops_only_its_run(
    log: RedisRunLog, hub: WatchHub
) -> None:
    threads = {thread.ident for thread in threading.enumerate()}
    first, _ = _watcher(hub, "run-a")
    second, _ = _watcher(hub, "run-b")
    _until(lambda: hub.listening, "the hub never subscribed")
    new = [t for t in threading.enumerate() if t.ident not in threads]
    assert [t.name for t in new] == ["agentkit-celery-watch"]  # one thread for both runs
    assert _pubsub_clients(log) == 1  # and one pub/sub connection
    _cancel(log, "run-a")
    _until(lambda: first.reason is not None, "the cancel request never reached run-a")
    assert first.reason == "user" and second.reason is None
    first.stop()  # returns once the hub is done with the run: its note is written
    second.stop()
    entries = [entry.data for entry in log.read("run-a", None, 0) if entry.kind == "status"]
    assert entries == [{"status": "cancelling", "mode": "immediate"}]
    assert log.read("run-b", None, 0) == []  # nothing was noted for the other run


def test_a_cancel_made_before_the_hub_listened_is_read_from_its_key(
    log: RedisRunLog, hub: WatchHub
) -> None:
    _cancel(log, "run-early")  # nobody listens yet: only the stored request can tell
    early, _ = _watcher(hub, "run-early")
    other, _ = _watcher(hub, "run-other")
    _until(lambda: early.reason is not None, "the stored cancel request was never read")
    assert early.reason == "user" and other.reason is None
    late, _ = _watcher(hub, "run-late")  # the hub listens now: the run reads its own key
    assert late.reason is None
    _cancel(log, "run-late")
    _until(lambda: late.reason is not None, "the cancel of a later run was not delivered")
    for watcher in (early, other, late):
        watcher.stop()


def test_a_duplicate_delivery_that_ends_at_once_leaves_the_real_run_watched(
    log: RedisRunLog, hub: WatchHub
) -> None:
    # A task delivered twice to one worker: the second is refused by the run's lease and
    # unregisters at once; the run that goes on must still hear its cancel.
    real, _ = _watcher(hub, "run-twice")
    duplicate, _ = _watcher(hub, "run-twice")
    duplicate.stop()
    assert hub.runs == ["run-twice"]
    _cancel(log, "run-twice")
    _until(lambda: real.reason is not None, "the real run lost its watcher to the duplicate")
    assert duplicate.reason is None
    real.stop()


def test_a_lost_lease_stops_exactly_the_run_that_lost_it(log: RedisRunLog, hub: WatchHub) -> None:
    store = RedisCheckPointStore(client=log.client, prefix="watcher-test-cp:")
    ttl = 0.9  # refreshed every 0.3 s
    kept, _ = _watcher(hub, "run-kept", ttl)
    lost, _ = _watcher(hub, "run-lost", ttl)
    kept_lease = lease_for(store, "run-kept", ttl)
    lost_lease = lease_for(store, "run-lost", ttl)
    kept.hold(kept_lease)
    lost.hold(lost_lease)
    lost_lease.release()  # it expired, and another worker took it
    other = lease_for(store, "run-lost", 60)
    _until(lambda: lost.reason is not None, "the lost lease was never noticed")
    assert lost.reason == "lease lost"
    # The other run's lease is still refreshed by the hub: its expiry moves forward, twice
    # (seen in Redis: the test refreshes nothing itself), and it is still the run's.
    key = store.lease_key("run-kept")
    last = [int(log.client.pttl(key))]

    def refreshed() -> bool:  # the time left went up since the last look: a refresh
        left = int(log.client.pttl(key))
        assert left > 0, "the kept run's lease expired: it was not refreshed"
        went_up, last[0] = left > last[0], left
        return went_up

    for _ in range(2):
        _until(refreshed, "the kept run's lease was not refreshed")
    assert kept_lease.refresh()  # still held by the kept run
    assert kept.reason is None
    assert other.refresh()  # the run that lost its lease did not take it back
    for watcher in (kept, lost):
        watcher.stop()
    kept_lease.release()
    other.release()


def test_a_run_given_the_hubs_lease_starts_no_thread_and_hears_of_its_loss_until_it_ends(
    log: RedisRunLog, hub: WatchHub
) -> None:
    store = RedisCheckPointStore(client=log.client, prefix="watcher-test-cp:")
    ttl = 0.9  # refreshed every 0.3 s
    heard: list[str] = []
    told = threading.Event()

    def on_lost(reason: str) -> None:
        heard.append(reason)
        told.set()

    ended, _ = _watcher(hub, "run-ended", ttl)
    ended_lease = lease_for(store, "run-ended", ttl)
    LeaseKeeper(ended.hold(ended_lease), on_lost=on_lost, release=False).stop()  # it ended
    watcher, _ = _watcher(hub, "run-kept-by-hub", ttl)
    lease = lease_for(store, "run-kept-by-hub", ttl)
    keeper = LeaseKeeper(watcher.hold(lease), on_lost=on_lost, release=False)
    assert "agentkit-lease" not in [thread.name for thread in threading.enumerate()]
    for taken in (lease, ended_lease):  # both expired, and other workers took them
        taken.release()
        lease_for(store, taken.checkpoint_id, 60)
    assert told.wait(GUARD), "the run never heard that its lease was lost"
    assert keeper.lost is not None and heard == [keeper.lost]
    assert "lost" in keeper.lost and watcher.reason == "lease lost"  # and cancelled
    _until(lambda: ended.reason == "lease lost", "the ended run's lease loss was not noticed")
    assert heard == [keeper.lost]  # the run that had ended was told nothing
    keeper.stop()
    for each in (watcher, ended):
        each.stop()
    for run_id in ("run-kept-by-hub", "run-ended"):
        log.client.delete(store.lease_key(run_id))


def test_the_shutdown_cancels_every_run_and_then_the_thread_ends(
    log: RedisRunLog, hub: WatchHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutting_down = threading.Event()
    monkeypatch.setattr(_celery_worker, "shutting_down", shutting_down)
    watchers = [_watcher(hub, f"run-{number}")[0] for number in range(3)]
    _until(lambda: hub.listening, "the hub never subscribed")
    shutting_down.set()
    _until(lambda: all(w.reason == "shutdown" for w in watchers), "a run was not stopped")
    thread = hub.thread
    assert thread is not None
    for watcher in watchers:
        watcher.stop()
    thread.join(GUARD)  # no run left and the worker going down: the thread ends at once
    assert not thread.is_alive() and hub.thread is None


def test_the_thread_ends_when_idle_and_the_next_run_starts_it_again(
    log: RedisRunLog, hub: WatchHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(WatchHub, "IDLE", 0.2)
    watcher, _ = _watcher(hub, "run-1")
    thread = hub.thread
    assert thread is not None
    watcher.stop()
    thread.join(GUARD)
    assert not thread.is_alive() and hub.thread is None
    _until(lambda: _pubsub_clients(log) == 0, "the idle hub kept its pub/sub connection")
    again, _ = _watcher(hub, "run-2")
    restarted = _thread_of(hub)  # not narrowed by the assert above: it changed meanwhile
    assert restarted is not None and restarted is not thread
    _cancel(log, "run-2")
    _until(lambda: again.reason is not None, "the restarted hub missed a cancel")
    again.stop()


def test_stop_returns_at_once_whatever_the_poll(
    log: RedisRunLog, hub: WatchHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hub polls with POLL_INTERVAL / 2; a run's end must not wait for that poll.
    monkeypatch.setattr(_celery_worker, "POLL_INTERVAL", 120.0)
    watcher, _ = _watcher(hub, "run-stop")
    _until(lambda: hub.listening, "the hub never subscribed")
    started = time.monotonic()
    watcher.stop()
    assert time.monotonic() - started < GUARD / 2
    assert watcher.reason is None  # stopping is not a cancel
    _cancel(log, "run-stop")  # a cancel after the run ended reaches nobody
    assert watcher.reason is None


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[RestartableRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = RestartableRedis(Path(tempfile.mkdtemp(dir=tmp_path)))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_after_a_redis_restart_both_runs_keep_their_leases_and_cancels(
    restartable: RestartableRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(WatchHub, "MAX_BACKOFF", 0.2)
    log = _log_for(restartable.url)
    # The leases are timed on a manual clock (the hub's and the store's): the test moves it
    # past their ttl after the restart instead of waiting that long.
    clock = ManualClock()
    hub = WatchHub(log, clock=clock)
    store = RedisCheckPointStore(client=log.client, prefix="watcher-test-cp:", clock=clock)
    ttl = 30.0
    first, _ = _watcher(hub, "run-1", ttl)
    second, _ = _watcher(hub, "run-2", ttl)
    leases = [lease_for(store, "run-1", ttl), lease_for(store, "run-2", ttl)]
    first.hold(leases[0])
    second.hold(leases[1])
    _until(lambda: hub.listening, "the hub never subscribed")
    restartable.stop()
    _until(lambda: not hub.listening, "the hub did not notice that Redis went away")
    restartable.start()  # the append-only file keeps the leases (and their expiry)
    _until(lambda: hub.listening, "the hub did not listen again after the restart")
    _cancel(log, "run-1")
    _until(lambda: first.reason is not None, "a cancel after the restart was not delivered")
    assert first.reason == "user" and second.reason is None
    # Past the lease's ttl after the restart, run 2 still holds it: the hub refreshed it.
    key = store.lease_key("run-2")
    for _ in range(5):  # 50 s on the clock, a third of the ttl at a time
        left = int(log.client.pttl(key))  # ms until Redis drops the key (the server's clock)
        clock.advance(ttl / 3)
        # A refresh sets the expiry 30 s past the clock's new now: ~10 s more than before.
        _until(functools.partial(_expires_later, log, key, left + 5000), "run-2 was not refreshed")
    assert second.reason is None
    assert leases[1].refresh()  # still run 2's by the clock: 50 s after a 30 s lease began
    _cancel(log, "run-2")
    _until(lambda: second.reason is not None, "run-2's cancel was not delivered")
    first.stop()
    second.stop()
    for lease in leases:
        lease.release()
    log.client.close()
