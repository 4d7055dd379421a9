"""The Redis round trips of a Celery run's bookkeeping (real redis-server).

A worker starting a run marks its record "running", appends its first entry and reads the
cancel request stored for it: one script, so one round trip, and no reader sees the entry
before the record says the run is running. Round trips are counted where redis-py sends a
command (or a pipeline) to the server.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest

redis = pytest.importorskip("redis")

from agentkit.integrations._redislog import RedisRunLog, RunRecord  # noqa: E402
from agentkit.integrations._signing import Sealer  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402, F401


@pytest.fixture
def log(redis_url: str) -> Iterator[RedisRunLog]:  # noqa: F811
    client = redis.Redis.from_url(redis_url)
    sealer = Sealer(lambda: [b"round-trip-tests-key-0123456789abcdef"], "round-trips")
    yield RedisRunLog(client, prefix="round-trips:", maxlen=100, ttl=60, sealer=sealer)
    client.close()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every command (or pipeline) redis-py sends from now on: one round trip each."""
    calls: list[object] = []
    original = redis.connection.AbstractConnection.send_packed_command

    def counting(self: object, command: object, check_health: bool = True) -> None:
        calls.append(command)
        original(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)
    return calls


def _running(record: RunRecord) -> RunRecord:
    return attrs.evolve(record, status="running", worker="w1")


def _new_run(log: RedisRunLog, run_id: str) -> tuple[RunRecord, str]:
    assert log.create(RunRecord(run_id, "agent", "owner", "queued", pending="nonce"))
    return log.record(run_id)


def test_a_start_is_one_round_trip_with_its_first_entry_and_the_cancel_request(
    log: RedisRunLog, sent: list[object]
) -> None:
    log.start("run-0", _running, [], _new_run(log, "run-0"))  # Redis has the script now
    known = _new_run(log, "run-1")
    sealed = log.sealer.seal("cancel", {"run_id": "run-1", "stops": 0, "mode": "immediate"})
    log.request_cancel("run-1", sealed)
    sent.clear()
    record, text, requested = log.start(
        "run-1", _running, [("status", {"status": "started"})], known
    )
    assert len(sent) == 1
    assert record.status == "running" and log.record("run-1") == (record, text)
    assert requested == sealed
    kinds = [entry.kind for entry in log.read("run-1", None, 0)]
    assert kinds == ["run", "status"]


def test_a_start_without_a_cancel_request_or_with_a_stale_record(log: RedisRunLog) -> None:
    stale = _new_run(log, "run-2")
    log.update("run-2", lambda record: attrs.evolve(record, worker="elsewhere"))
    # The record changed since it was read: the start reads it again, and still applies.
    record, _, requested = log.start("run-2", _running, [("status", {"n": 1})], stale)
    assert requested is None
    assert record.status == "running" and log.record("run-2")[0] == record
    assert [entry.data for entry in log.read("run-2", None, 0)][1:] == [{"n": 1}]


def test_a_submission_records_its_run_with_its_first_entry_in_one_round_trip(
    log: RedisRunLog, sent: list[object]
) -> None:
    _new_run(log, "warm-up")  # Redis has the scripts now
    log.create_once(RunRecord("warm-up-2", "agent", None, "queued"), "key-0", "request")
    log.append("warm-up", "status", {})
    sent.clear()
    assert log.create(RunRecord("run-3", "agent", "owner", "queued"))
    assert len(sent) == 1
    assert not log.create(RunRecord("run-3", "agent", "owner", "queued"))  # the id is taken
    sent.clear()
    assert log.create_once(RunRecord("run-4", "agent", None, "queued"), "key-1", "request") is None
    assert len(sent) == 1
    for run_id in ("run-3", "run-4"):
        [entry] = log.read(run_id, None, 0)  # the taken id appended nothing
        assert (entry.kind, entry.data) == ("run", {"run_id": run_id, "agent": "agent"})
    sent.clear()
    log.append("run-3", "status", {"status": "started"})
    assert len(sent) == 1


def test_a_runs_end_frees_its_lease_in_the_same_round_trip(
    log: RedisRunLog, sent: list[object]
) -> None:
    from agentkit.checkpoint import RedisCheckPointStore, lease_for
    from agentkit.errors import CheckpointBusyError

    store = RedisCheckPointStore(client=log.client, prefix="round-trips-cp:")
    summary = {"status": "completed"}
    log.finish("run-5", _running, summary, (), _new_run(log, "run-5"))  # Redis has the script
    lease = lease_for(store, "run-6", 30)
    known = _new_run(log, "run-6")
    sent.clear()
    log.finish("run-6", _running, summary, (), known, lease=(store.lease_key("run-6"), lease.owner))
    assert len(sent) == 1  # the stop, its end entry and the lease: one script
    assert log.record("run-6")[0].status == "running"
    assert [entry.kind for entry in log.read("run-6", None, 0)] == ["run", "end"]
    lease_for(store, "run-6", 30).release()  # free: another worker may resume the run now
    # A lease another owner took meanwhile (it expired) is left to that owner.
    theirs = lease_for(store, "run-7", 30)
    log.finish("run-7", _running, summary, (), _new_run(log, "run-7"),
               lease=(store.lease_key("run-7"), "an-expired-owner"))
    with pytest.raises(CheckpointBusyError):
        lease_for(store, "run-7", 30)
    theirs.release()
