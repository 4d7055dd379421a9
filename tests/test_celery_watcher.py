"""A Celery run's watcher stops at once when its run ends (real redis-server).

The worker writes a run's ``end`` entry, and frees its thread for the next task, only after the
run's watcher stopped. The watcher waits for cancel messages on a pub/sub channel with a poll
of ``POLL_INTERVAL / 2``; before the fix, stopping it waited for that poll to time out, which
held every run's end back by up to 0.25 s and capped a worker at about 15 runs/s on 4 threads
(benchmarks: ``celery-throughput``). Here the poll is made a minute long: a watcher that is not
woken cannot stop within the guard.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

redis = pytest.importorskip("redis")

from agentkit.cancel import CancelHandle, CancelMode  # noqa: E402
from agentkit.integrations import _celery_worker  # noqa: E402
from agentkit.integrations._celery_worker import Watcher  # noqa: E402
from agentkit.integrations._redislog import RedisRunLog  # noqa: E402
from agentkit.integrations._signing import Sealer  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402, F401

GUARD = 10.0  # seconds: a failure guard; the stop itself takes milliseconds


@pytest.fixture
def log(redis_url: str) -> Iterator[RedisRunLog]:  # noqa: F811
    client = redis.Redis.from_url(redis_url)
    sealer = Sealer(lambda: [b"watcher-tests-key-0123456789abcdef"], "watcher-tests")
    yield RedisRunLog(client, prefix="watcher-test:", maxlen=100, ttl=60, sealer=sealer)
    client.close()


def _subscribers(log: RedisRunLog, channel: str) -> int:
    counts = dict(log.client.pubsub_numsub(channel))
    return int(counts.get(channel.encode(), 0))


def _started_watcher(log: RedisRunLog, run_id: str, handle: CancelHandle) -> Watcher:
    watcher = Watcher(
        log,
        run_id,
        handle,
        stops=0,
        shutdown_mode=CancelMode.IMMEDIATE,
        shutdown_timeout=1,
        lease_ttl=30,
    )
    watcher.start()
    deadline = time.monotonic() + GUARD
    while _subscribers(log, log.key(run_id, ":cancel")) < 1:  # a barrier: it listens now
        assert time.monotonic() < deadline, "the watcher never subscribed"
        time.sleep(0.01)
    return watcher


def test_stop_wakes_a_watcher_in_the_middle_of_its_poll(
    log: RedisRunLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_celery_worker, "POLL_INTERVAL", 120.0)  # each wait: a minute
    watcher = _started_watcher(log, "run-stop", CancelHandle())
    stopped = threading.Event()

    def stop() -> None:
        watcher.stop()
        stopped.set()

    threading.Thread(target=stop, daemon=True).start()
    assert stopped.wait(GUARD), "Watcher.stop() waited for the end of the watcher's poll"
    assert _subscribers(log, log.key("run-stop", ":cancel")) == 0  # its connection is closed
    assert watcher.reason is None  # waking it is not a cancel


def test_cancel_requests_still_reach_the_run(
    log: RedisRunLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_celery_worker, "POLL_INTERVAL", 120.0)
    handle = CancelHandle()
    watcher = _started_watcher(log, "run-cancel", handle)
    sealed = log.sealer.seal("cancel", {"run_id": "run-cancel", "stops": 0, "mode": "immediate"})
    log.request_cancel("run-cancel", sealed)
    deadline = time.monotonic() + GUARD
    while watcher.reason is None:
        assert time.monotonic() < deadline, "the cancel request never reached the watcher"
        time.sleep(0.01)
    assert watcher.reason == "user"
    watcher.stop()


def _connections_made(log: RedisRunLog) -> int:
    return int(log.client.info("stats")["total_connections_received"])


def test_the_next_watcher_reuses_the_unsubscribed_connection_and_hears_only_its_run(
    log: RedisRunLog,
) -> None:
    connections = _connections_made(log)
    for number in range(6):
        ended = _started_watcher(log, f"run-{number}", CancelHandle())
        ended.stop()
        assert _subscribers(log, log.key(f"run-{number}", ":cancel")) == 0  # unsubscribed
    # Closing each watcher's connection would make the next run connect again (a connection
    # and its greeting per run); it is kept, unsubscribed, for the next watcher. At most the
    # pool grows by the connections used at the same time (this thread and a watcher's).
    assert _connections_made(log) - connections <= 2
    first = _started_watcher(log, "run-a", CancelHandle())
    first.stop()
    second = _started_watcher(log, "run-b", CancelHandle())
    # A cancel for the ended run reaches nobody; one for the new run still stops it.
    sealed_a = log.sealer.seal("cancel", {"run_id": "run-a", "mode": "immediate", "stops": 0})
    log.request_cancel("run-a", sealed_a)
    sealed_b = log.sealer.seal("cancel", {"run_id": "run-b", "mode": "immediate", "stops": 0})
    log.request_cancel("run-b", sealed_b)
    deadline = time.monotonic() + GUARD
    while second.reason is None:
        assert time.monotonic() < deadline, "the second watcher missed its run's cancel"
        time.sleep(0.01)
    second.stop()
    assert second.reason == "user" and first.reason is None
