"""Lease keys against someone with write access to Redis (security finding A8).

The threat model lets such a person deny service, never steer a run. Two repros:

* a lease key set *without* an expiry blocked every resume of the checkpoint for ever: such a
  key is no lease (agentkit never writes one) and is taken over, with a warning;
* a lease key *deleted* while a durable run was live let a second resumer run the checkpoint
  too, and both ran the remaining tool calls until the first one's next lease refresh (a third
  of the lease later): every write of a durable run now checks, in the script that makes it,
  that the run still holds the lease, so the first run stops at its next step.

Real redis-server; the runs are in-process, each with its own store and client, as two
workers would be.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator

import pytest

from agentkit import ChatModelAgent, Message, Runner, tool, with_checkpoint_id
from agentkit.checkpoint import PickleSerializer, RedisCheckPointStore, lease_for
from agentkit.errors import CheckpointBusyError, CheckpointError
from agentkit.models import ScriptedChatModel
from agentkit.testing import ManualClock, call, calls_message, no_thread_leak
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

SERIALIZER = PickleSerializer(b"lease key tests' key of 32 bytes")
GUARD = 30.0  # failure guard only


@pytest.fixture
def prefix() -> str:
    return f"test-lease-keys:{uuid.uuid4().hex}:"


@pytest.fixture
def stores(redis_url: str, prefix: str) -> Iterator[list[RedisCheckPointStore]]:  # noqa: F811
    made: list[RedisCheckPointStore] = []
    yield made
    for store in made:
        store.close()


def store_for(url: str, prefix: str, made: list[RedisCheckPointStore]) -> RedisCheckPointStore:
    store = RedisCheckPointStore(url, prefix=prefix)
    made.append(store)
    return store


def test_a_lease_key_without_expiry_is_no_lease_and_does_not_block_a_resume(
    redis_url: str,  # noqa: F811
    prefix: str,
    stores: list[RedisCheckPointStore],
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = store_for(redis_url, prefix, stores)
    agent = ChatModelAgent("A", "d", ScriptedChatModel(["done"]))
    runner = Runner(agent, checkpoint_store=store, serializer=SERIALIZER)
    # The attacker's key: SET without PX/EX (what a crashed agentkit never leaves behind).
    store.client.set(store.lease_key("run"), b"mallory")
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        result = runner.invoke("go", with_checkpoint_id("run"))
    assert result.text == "done"
    assert "had no expiry, so it was no lease" in caplog.text
    store.client.set(store.lease_key("other"), b"mallory")
    with lease_for(store, "other") as lease:  # taken over, and now a real, expiring lease
        assert store.client.get(store.lease_key("other")) == lease.owner.encode()
        assert 0 < store.client.pttl(store.lease_key("other")) <= store.lease_ttl * 1000


def test_an_unexpired_lease_of_another_owner_still_refuses_the_id(
    redis_url: str,  # noqa: F811
    prefix: str,
    stores: list[RedisCheckPointStore],
) -> None:
    store = store_for(redis_url, prefix, stores)
    store.client.set(store.lease_key("run"), b"alice", px=60_000)
    with pytest.raises(CheckpointBusyError):
        lease_for(store, "run")


def test_a_second_resumer_after_a_deleted_lease_key_stops_the_first_run_at_its_next_step(
    redis_url: str,  # noqa: F811
    prefix: str,
    stores: list[RedisCheckPointStore],
) -> None:
    ran: list[str] = []
    lock = threading.Lock()
    first_started, let_first_go = threading.Event(), threading.Event()

    def agent_for(worker: str) -> ChatModelAgent:
        @tool(name="look")
        def look() -> str:
            """Look around (the first worker's call blocks until the test lets it go)."""
            with lock:
                ran.append(f"{worker}:look")
            if worker == "first":
                first_started.set()
                assert let_first_go.wait(GUARD)
            return "seen"

        @tool(name="pay")
        def pay() -> str:
            """Pay (must run once)."""
            with lock:
                ran.append(f"{worker}:pay")
            return "paid"

        script: list[Message | str] = [
            calls_message(call("look", id="l")),
            calls_message(call("pay", id="p")),
            "done",
        ]
        return ChatModelAgent("A", "d", ScriptedChatModel(script), tools=[look, pay])

    first_store = store_for(redis_url, prefix, stores)
    second_store = store_for(redis_url, prefix, stores)
    # A long lease: its refresh (every 10 s) comes far too late to stop the first run.
    first = Runner(agent_for("first"), checkpoint_store=first_store, serializer=SERIALIZER,
                   lease_ttl=30)
    second = Runner(agent_for("second"), checkpoint_store=second_store, serializer=SERIALIZER,
                    lease_ttl=30)
    with no_thread_leak():
        events = first.query("go", with_checkpoint_id("run"))
        assert first_started.wait(GUARD)
        # The attacker deletes the live run's lease key; a second worker resumes the run.
        assert first_store.client.delete(first_store.lease_key("run")) == 1
        resumed = second.resume("run").result()
        assert resumed.text == "done", resumed.error
        let_first_go.set()
        result = events.result(raise_errors=False)
    assert isinstance(result.error, CheckpointError)
    assert "no longer holds its lease" in str(result.error)
    # The first run stopped at the write after its blocked call: it never paid.
    assert ran.count("first:pay") == 0
    assert ran.count("second:pay") == 1


def test_a_fenced_write_is_refused_once_the_lease_holds_another_owner(
    redis_url: str,  # noqa: F811
    prefix: str,
    stores: list[RedisCheckPointStore],
) -> None:
    store = store_for(redis_url, prefix, stores)
    lease = lease_for(store, "run")
    fenced = store.fenced("run", lease.owner)
    fenced.set("run", b"base")
    fenced.append_step("run", b"step 1")  # type: ignore[attr-defined]
    fenced.set("elsewhere", b"other ids are not fenced")
    assert store.read_steps("run") == [b"step 1"]
    store.client.set(store.lease_key("run"), b"bob", px=60_000)  # taken (or rewritten)
    for write in (
        lambda: fenced.set("run", b"late"),
        lambda: fenced.append_step("run", b"late"),  # type: ignore[attr-defined]
        lambda: fenced.set_base("run", b"late"),  # type: ignore[attr-defined]
        lambda: fenced.delete("run"),
        lambda: fenced.delete_steps("run"),  # type: ignore[attr-defined]
    ):
        with pytest.raises(CheckpointBusyError, match="no longer holds its lease"):
            write()
    assert store.get("run") == b"base" and store.read_steps("run") == [b"step 1"]
    store.client.delete(store.lease_key("run"))  # deleted: refused as well
    with pytest.raises(CheckpointBusyError):
        fenced.set("run", b"late")
    assert store.get("run") == b"base"


def test_redis_leases_expire_on_a_manual_clock_without_waiting(
    redis_url: str,  # noqa: F811
    prefix: str,
    stores: list[RedisCheckPointStore],
) -> None:
    clock = ManualClock()
    store = RedisCheckPointStore(redis_url, prefix=prefix, clock=clock)
    stores.append(store)
    assert store.acquire_lease("run", "alice", 30)
    clock.advance(29)
    assert not store.acquire_lease("run", "bob", 30)
    assert store.acquire_lease("run", "alice", 30)  # refreshed: 30 s from the clock's now
    clock.advance(29)
    assert not store.acquire_lease("run", "bob", 30)
    clock.advance(2)
    assert store.acquire_lease("run", "bob", 30)  # expired on the clock, though Redis keeps it
    assert store.client.get(store.lease_key("run")) == b"bob"


def test_a_celery_workers_first_look_takes_over_a_lease_key_without_expiry(
    redis_url: str,  # noqa: F811
    prefix: str,
) -> None:
    redis = pytest.importorskip("redis")
    from agentkit.integrations._redislog import RedisRunLog, RunRecord
    from agentkit.integrations._signing import Sealer

    client = redis.Redis.from_url(redis_url)
    try:
        sealer = Sealer(lambda: [b"lease key tests' run log key 0123"], "lease-keys")
        log = RedisRunLog(client, prefix=prefix, maxlen=100, ttl=60, sealer=sealer)
        assert log.create(RunRecord("run", "agent", "owner", "queued"))
        lease_key = f"{prefix}lease:run".encode()
        client.set(lease_key, b"mallory")  # no expiry: a queued run would wait for ever
        _, _, took = log.record_and_lease("run", lease_key, "worker-1", 30)
        assert took and client.get(lease_key) == b"worker-1"
        assert 0 < client.pttl(lease_key) <= 30_000
        client.set(lease_key, b"worker-2", px=30_000)  # a real lease still refuses
        _, _, took = log.record_and_lease("run", lease_key, "worker-3", 30)
        assert not took and client.get(lease_key) == b"worker-2"
    finally:
        client.close()


def test_a_lease_whose_key_was_deleted_is_lost_even_once_it_is_free_again(
    redis_url: str,  # noqa: F811
    prefix: str,
    stores: list[RedisCheckPointStore],
) -> None:
    # A first run's lease key is deleted, a second run takes the id, ends and gives it back:
    # the first run's next refresh must not take the free id again and go on.
    store = store_for(redis_url, prefix, stores)
    first = lease_for(store, "run")
    store.client.delete(store.lease_key("run"))
    with lease_for(store, "run"):  # the second run, from start to end
        pass
    assert first.refresh() is False
    assert store.client.get(store.lease_key("run")) is None  # not taken again
    second = lease_for(store, "run")
    assert second.refresh() is True  # a held lease is extended
    assert 0 < store.client.pttl(store.lease_key("run")) <= store.lease_ttl * 1000
    second.release()

