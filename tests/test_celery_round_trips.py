"""The Redis round trips of a Celery run's bookkeeping (real redis-server).

A worker starting a run marks its record "running", appends its first entry and reads the
cancel request stored for it: one script, so one round trip, and no reader sees the entry
before the record says the run is running. Round trips are counted where redis-py sends a
command (or a pipeline) to the server.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

redis = pytest.importorskip("redis")

from agentkit import ChatModelAgent, Message, Role, tool  # noqa: E402
from agentkit.integrations._redislog import RedisRunLog, RunRecord  # noqa: E402
from agentkit.integrations._signing import Sealer  # noqa: E402
from agentkit.integrations.runs import RunNotFoundError  # noqa: E402
from agentkit.models import ScriptedChatModel  # noqa: E402
from agentkit.testing import call, calls_message  # noqa: E402
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
    record, text, requested, _ = log.start(
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
    record, _, requested, _ = log.start("run-2", _running, [("status", {"n": 1})], stale)
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


def test_a_fresh_runs_first_look_reads_its_record_and_takes_its_lease_in_one_round_trip(
    log: RedisRunLog, sent: list[object]
) -> None:
    from agentkit.checkpoint import RedisCheckPointStore

    store = RedisCheckPointStore(client=log.client, prefix="round-trips-cp:")
    known = _new_run(log, "run-8")
    log.record_and_lease("run-8", store.lease_key("warm-up"), "warm-up", 30)  # the script
    sent.clear()
    record, sealed, took = log.record_and_lease("run-8", store.lease_key("run-8"), "w1", 30)
    assert len(sent) == 1
    assert (record, sealed) == known and took
    assert not store.acquire_lease("run-8", "another-worker", 30)  # held by w1
    # Held already: the record is read all the same; the lease is not taken.
    assert log.record_and_lease("run-8", store.lease_key("run-8"), "w2", 30) == (*known, False)
    store.release_lease("run-8", "w1")
    # A run without a record: nothing is taken.
    with pytest.raises(RunNotFoundError):
        log.record_and_lease("run-9", store.lease_key("run-9"), "w1", 30)
    assert store.acquire_lease("run-9", "another-worker", 30)


def _scripted(messages: list[Message]) -> Message | str:
    if messages[-1].role is Role.USER:
        return calls_message(call("echo", {"text": messages[-1].content}))
    return f"echoed {messages[-1].content}"


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def _eager_queue(
    url: str, monkeypatch: pytest.MonkeyPatch, **settings: Any
) -> tuple[Any, str]:
    """An ``AgentQueue`` whose tasks run in this process at submit, with the ``echo`` agent
    registered and one run done (Redis has the scripts); and its key prefix."""
    celery = pytest.importorskip("celery")
    from agentkit.integrations.celery import AgentQueue

    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "round-trip-tests-checkpoint-key-0123456789")
    app = celery.Celery("round-trips", broker="memory://")
    app.conf.task_always_eager = True  # the task runs in this process, at submit
    prefix = f"round-trips-{uuid.uuid4().hex[:6]}:"
    queue = AgentQueue(app, redis_url=url, prefix=prefix, task_name=f"{prefix}run", **settings)
    queue.register(
        "echo",
        lambda: ChatModelAgent("echo", "echoes", ScriptedChatModel(_scripted), tools=[echo]),
        enable_streaming=False,  # no token entries
    )
    with queue.events(queue.submit("echo", "warm-up", owner="owner"), owner="owner") as first:
        assert list(first)[-1].kind == "end"  # Redis has the scripts now
    return queue, prefix


def test_a_celery_runs_lease_costs_no_round_trip_of_its_own(
    redis_url: str, sent: list[object], monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    # The lease is taken with the worker's read of the run's record, refreshed by the
    # worker's watch hub (not by the run too), and freed by the script that records the end.
    queue, prefix = _eager_queue(redis_url, monkeypatch)
    sent.clear()
    run_id = queue.submit("echo", "hello", owner="owner")
    with queue.events(run_id, owner="owner") as stream:
        entries = list(stream)
    assert entries[-1].kind == "end" and entries[-1].data["answer"] == "echoed hello"
    lease_key = queue.store.lease_key(run_id)
    record_key = f"{prefix}{run_id}".encode()
    named = [b"".join(_chunks(command)) for command in sent]
    leased = [command for command in named if lease_key in command]
    # The run's checkpoint writes name the lease key too: each checks, in its own script,
    # that the run still holds the lease (fenced writes), at no round trip of their own.
    writes = [command for command in leased if record_key not in command]
    assert writes and all(b"\xffsteps:" in command or queue.store.key_for(run_id) in command
                          for command in writes)
    with_record = [command for command in leased if record_key in command]
    assert len(with_record) == 2  # taken with the first look, freed with the end
    assert queue.store.acquire_lease(run_id, "next-worker", 30)  # free
    queue.store.release_lease(run_id, "next-worker")
    # A reader's owner check and its first batch: one round trip (the run has ended).
    sent.clear()
    with queue.events(run_id, owner="owner") as stream:
        assert [entry.id for entry in stream] == [entry.id for entry in entries]
    assert len(sent) == 1


def test_a_fresh_run_goes_on_in_the_tasks_own_thread(
    redis_url: str, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    # A worker runs a fresh run in the task's thread (Runner.invoke with on_event), not in a
    # thread of its own that hands each event over; its entries are the same.
    queue, _ = _eager_queue(redis_url, monkeypatch)
    seen: list[tuple[threading.Thread, list[str]]] = []

    @tool
    def where(text: str) -> str:
        """Say which thread runs the tool."""
        names = [thread.name for thread in threading.enumerate()]
        seen.append((threading.current_thread(), names))
        return text

    def scripted(messages: list[Message]) -> Message | str:
        if messages[-1].role is Role.USER:
            return calls_message(call("where", {"text": messages[-1].content}))
        return f"ran {messages[-1].content}"

    queue.register(
        "where",
        lambda: ChatModelAgent("where", "says where", ScriptedChatModel(scripted), tools=[where]),
        enable_streaming=False,
    )
    run_id = queue.submit("where", "here", owner="owner")  # runs it, eagerly, in this thread
    with queue.events(run_id, owner="owner") as stream:
        entries = list(stream)
    assert [entry.kind for entry in entries] == ["run", "status", "agent", "agent", "agent", "end"]
    assert entries[-1].data["status"] == "completed" and entries[-1].data["answer"] == "ran here"
    [(thread, names)] = seen
    assert thread is threading.current_thread()
    assert "agentkit-run" not in names


@pytest.mark.parametrize(
    ("durability", "expected"),
    [
        # the record and the lease; the start; the first step's image (the task message holds
        # the input: nothing is saved before it); two step records; three entries; the
        # tombstone; the end with the lease
        ("step", ["record+lease", "start", "image", "step", "step", "entry", "entry", "entry",
                  "tombstone", "end"]),
        # nothing saved while the run lives, nothing left when it completes
        ("stop", ["record+lease", "start", "entry", "entry", "entry", "end"]),
    ],
)
def test_the_round_trips_of_a_whole_celery_run_in_its_worker(
    redis_url: str,  # noqa: F811
    sent: list[object],
    monkeypatch: pytest.MonkeyPatch,
    durability: str,
    expected: list[str],
) -> None:
    from agentkit.integrations.celery import AgentQueue

    # a long lease: no refresh of the hub falls into the count
    queue, _ = _eager_queue(redis_url, monkeypatch, lease_ttl=600, durability=durability)
    run_id = uuid.uuid4().hex
    sent.clear()
    queue.submit("echo", "hello", owner="owner", checkpoint_id=run_id)  # runs it, eagerly
    named = [b"".join(_chunks(command)) for command in sent]
    ours = [command for command in named if run_id.encode() in command]
    assert len(ours) == 1 + len(expected), expected  # the submission, then the worker's
    with queue.events(run_id, owner="owner") as stream:
        entries = list(stream)
    assert entries[-1].data["status"] == "completed"
    assert entries[-1].data["answer"] == "echoed hello"
    assert queue.runner("echo").durability == durability
    with pytest.raises(ValueError, match="durability must be 'step'"):
        AgentQueue(queue.app, redis_url=redis_url, durability="always")


def test_a_readers_first_look_checks_the_record_and_reads_what_is_there(
    log: RedisRunLog, sent: list[object]
) -> None:
    known = _new_run(log, "run-10")
    for n in range(4):
        log.append("run-10", "status", {"n": n})
    log.client.xdel(log.key("run-10", ":events"), "0-3")  # trimmed, as by a capped stream
    sent.clear()
    record, sealed, entries = log.record_and_read("run-10", "0-1")
    assert len(sent) == 1
    assert (record, sealed) == known
    assert [(entry.id, entry.kind) for entry in entries] == [
        ("0-2", "status"), ("0-3", "gap"), ("0-4", "status"), ("0-5", "status")
    ]
    assert entries == [e for e in log.read("run-10", "0-1", 0)]  # as a read returns them
    assert log.record_and_read("run-10", None)[2][0].kind == "run"
    with pytest.raises(RunNotFoundError):
        log.record_and_read("run-11", None)


def _chunks(command: object) -> list[bytes]:
    if isinstance(command, bytes | bytearray | memoryview):
        return [bytes(command)]
    return [bytes(chunk) for chunk in command]  # type: ignore[attr-defined]


def test_taking_and_refreshing_a_checkpoint_lease_are_one_round_trip_each(
    redis_url: str, sent: list[object]  # noqa: F811
) -> None:
    from agentkit.checkpoint import RedisCheckPointStore, lease_for

    store = RedisCheckPointStore(url=redis_url, prefix=f"lease-trips-{uuid.uuid4().hex}:")
    try:
        warm = lease_for(store, "warm-up", 30.0)  # connected, the scripts loaded
        assert warm.refresh()
        warm.release()
        sent.clear()
        lease = lease_for(store, "run-1", 30.0)
        taken = len(sent)
        assert lease.refresh()
        refreshed = len(sent) - taken
        other = store.acquire_lease("run-1", "someone-else", 30.0)
        assert not other  # held: refused
        assert taken == 1 and refreshed == 1  # one EVALSHA each
        lease.release()
        assert store.acquire_lease("run-1", "someone-else", 30.0)
    finally:
        store.close()
