"""agentkit.integrations.celery with a real redis-server and real Celery worker processes.

Workers are started by the tests (``celery -A celery_app worker --pool=threads``, each on its
own queue so a test decides which worker runs what); "web processes" are subprocesses running
``celery_client.py``. Barriers are Redis lists the workers and tools push to, and status
entries in the run's own stream; timeouts are failure guards only (see celery_support.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("celery")
pytest.importorskip("redis")

from agentkit.integrations.runs import RunNotFoundError, RunStateError
from tests import celery_broker as broker
from tests import celery_support as support
from tests.celery_support import (
    GUARD,
    OWNER,
    TESTS,
    read_all,
    read_until,
    read_until_after,
    web,
    worker,
    workers_of,
)
from tests.redis_server import redis_url  # noqa: F401

# The shared fixtures, by the names the tests ask for.
env, app_module, client, workers = support.env, support.app_module, support.client, support.workers

def test_run_on_a_worker_read_from_a_second_web_process(
    app_module: Any, workers: dict[str, Any], env: dict[str, str], client: Any
) -> None:
    queue = app_module.queue
    run_id = queue.submit("weather", "Oslo", owner=OWNER, queue="a")
    entries = web(env, "events", run_id)
    kinds = [entry["kind"] for entry in entries]
    assert kinds[0] == "run" and entries[0]["data"] == {"run_id": run_id, "agent": "weather"}
    assert kinds[1] == "status" and workers_of(entries) == ["a"]
    assert kinds[-1] == "end"
    end = entries[-1]["data"]
    assert end["status"] == "completed"
    assert end["answer"] == "The weather: sunny in Oslo. Have a nice day!"
    tokens = "".join(e["data"]["content"] for e in entries if e["kind"] == "token")
    assert tokens == "Let me look." + end["answer"]
    agent = [e["data"] for e in entries if e["kind"] == "agent"]
    assert [a["output"]["role"] for a in agent] == ["assistant", "tool", "assistant"]
    assert int(client.get("test:ran:weather:Oslo")) == 1
    assert queue.status(run_id, owner=OWNER)["summary"] == end
    ids = [entry["id"] for entry in entries]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))


def test_reconnect_with_last_event_id_loses_and_repeats_nothing(
    app_module: Any, workers: dict[str, Any], env: dict[str, str], client: Any
) -> None:
    queue = app_module.queue
    tag = uuid.uuid4().hex
    run_id = queue.submit("slow", tag, owner=OWNER, queue="a")
    assert client.blpop([f"test:started:{tag}"], timeout=GUARD) is not None
    # The first connection reads three entries of the live run, then drops.
    first = web(env, "events", run_id, "-", "3")
    assert [e["kind"] for e in first] == ["run", "status", "agent"]
    client.rpush(f"test:gate:{tag}", "open")
    # The browser reconnects with Last-Event-ID from another web process.
    rest = web(env, "events", run_id, first[-1]["id"])
    assert rest[-1]["kind"] == "end" and rest[-1]["data"]["status"] == "completed"
    whole = [(e.id, e.kind, e.data) for e in read_all(queue, run_id)]
    assert [(e["id"], e["kind"], e["data"]) for e in first + rest] == whole


def test_interrupted_on_one_worker_resumed_on_another_after_approval_elsewhere(
    app_module: Any, workers: dict[str, Any], env: dict[str, str], client: Any
) -> None:
    queue = app_module.queue
    payee = f"ACME-{uuid.uuid4().hex[:8]}"
    run_id = queue.submit("payer", payee, owner=OWNER, queue="a")
    first = read_all(queue, run_id)
    assert first[-1].kind == "end"
    summary = first[-1].data
    assert summary["status"] == "interrupted"
    assert summary["prompts"][0]["info"] == f"Pay {payee}?"
    assert workers_of(first) == ["a"]
    assert queue.interrupts(run_id, owner=OWNER) == summary["interrupts"]
    # A human approves on another web server; worker b (queue b) continues the run.
    done = subprocess.run(
        [sys.executable, str(TESTS / "celery_client.py"), "resume", run_id, "approve", "b"],
        cwd=TESTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    after = json.loads(done.stdout)["after"]
    assert after == first[-1].id
    second = read_all(queue, run_id, after)
    assert workers_of(second) == ["b"]
    assert second[-1].data["status"] == "completed"
    assert second[-1].data["answer"] == f"Done: paid {payee}."
    assert int(client.get(f"test:ran:pay:{payee}")) == 1
    # Approving twice is refused, and the consumed checkpoint could not run it again anyway.
    with pytest.raises(RunStateError, match="completed"):
        queue.resume(run_id, {summary["interrupts"][0]: True}, owner=OWNER)
    assert int(client.get(f"test:ran:pay:{payee}")) == 1


def test_cancel_from_a_web_process_reaches_the_worker(
    app_module: Any, workers: dict[str, Any], env: dict[str, str], client: Any
) -> None:
    queue = app_module.queue
    tag = uuid.uuid4().hex
    run_id = queue.submit("slow", tag, owner=OWNER, queue="a")
    assert client.blpop([f"test:started:{tag}"], timeout=GUARD) is not None
    assert web(env, "cancel", run_id) == [{"cancelled": True}]
    seen = read_until(queue, run_id, "cancelling")
    client.rpush(f"test:gate:{tag}", "open")
    rest = read_all(queue, run_id, seen[-1].id)
    assert rest[-1].kind == "end"
    assert rest[-1].data["status"] == "cancelled"
    assert rest[-1].data["error"]["type"] == "AgentCancelledError"
    assert queue.status(run_id, owner=OWNER)["status"] == "cancelled"
    assert queue.cancel(run_id, owner=OWNER) is False  # stopped already


def test_a_duplicate_delivery_never_runs_a_run_twice(
    app_module: Any, workers: dict[str, Any], client: Any
) -> None:
    queue = app_module.queue
    tag = uuid.uuid4().hex
    hold = f"hold-{uuid.uuid4().hex[:6]}"  # no worker consumes it: the test holds the message
    run_id = queue.submit("slow", tag, owner=OWNER, queue=hold)
    message = broker.take(client, hold)
    broker.put(client, "a", message)
    assert client.blpop([f"test:started:{tag}"], timeout=GUARD) is not None
    # The broker delivers the task again (at least once) while worker a runs it. Worker b
    # cannot tell a live holder from a dead one: it sends the task again, due when a lease
    # that is not refreshed would have expired, instead of dropping it.
    again = broker.put(client, "b", message)
    assert app_module.app.AsyncResult(again).get(timeout=GUARD) == {
        "status": "retrying",
        "countdown": app_module.LEASE_TTL,
    }
    client.rpush(f"test:gate:{tag}", "open")
    entries = read_all(queue, run_id)
    assert entries[-1].data["status"] == "completed"
    # The copy came back to worker b (maybe more than once while a held the run) and was
    # dropped once the run had completed.
    assert workers["b"].log_has(f"agentkit: run {run_id!r} is completed; a duplicate task")
    # And once more after it completed.
    late = broker.put(client, "b", message)
    assert app_module.app.AsyncResult(late).get(timeout=GUARD) == {
        "status": "duplicate",
        "error": "the run is completed",
    }
    assert int(client.get(f"test:ran:slow:{tag}")) == 1
    assert workers_of(read_all(queue, run_id)) == ["a"]


def test_a_runs_lease_is_kept_by_the_workers_hub_alone_and_its_loss_fences_the_run(
    app_module: Any, workers: dict[str, Any], client: Any
) -> None:
    queue = app_module.queue
    tag = uuid.uuid4().hex
    run_id = queue.submit("slow", tag, owner=OWNER, queue="a")
    assert client.blpop([f"test:started:{tag}"], timeout=GUARD) is not None
    threads = json.loads(client.lindex(f"test:threads:{tag}", 0))
    # One refresher for the run's lease: the process's watch hub, no thread of the run's own.
    assert "agentkit-celery-watch" in threads
    assert "agentkit-lease" not in threads
    # The lease expired and another worker took the run (as after a long pause).
    lease_key = queue.store._lease_key(run_id)
    saved = {
        key: client.dump(key)
        for key in client.scan_iter(match=queue.store._prefix + b"*")
        if run_id.encode() in key and key != lease_key
    }
    assert saved  # the run's first image, at least
    client.set(lease_key, b"another-worker", px=GUARD * 1000)
    read_until(queue, run_id, "stopping")  # the hub found it lost at its next refresh
    client.rpush(f"test:gate:{tag}", "open")  # the tool returns: its result is not saved
    assert workers["a"].log_has(f"agentkit: run {run_id!r} goes on on another worker")
    after = {
        key: client.dump(key)
        for key in client.scan_iter(match=queue.store._prefix + b"*")
        if run_id.encode() in key and key != lease_key
    }
    assert after == saved  # the run's writer wrote nothing once its lease was lost
    client.delete(lease_key)


def test_unknown_runs_and_bad_event_ids_are_clear_errors(
    app_module: Any, workers: dict[str, Any]
) -> None:
    queue = app_module.queue
    with pytest.raises(RunNotFoundError, match="no run with id 'nope'"):
        queue.events("nope", owner=OWNER)
    with pytest.raises(RunNotFoundError):
        queue.resume("nope", {}, owner=OWNER)
    run_id = queue.submit("weather", "Rome", owner=OWNER, queue="a")
    with pytest.raises(ValueError, match="Last-Event-ID 'abc'"):
        queue.events(run_id, "abc", owner=OWNER)
    assert read_all(queue, run_id)[-1].data["status"] == "completed"
    with pytest.raises(RunStateError, match="is taken"):
        queue.submit("weather", "Rome", checkpoint_id=run_id, owner=OWNER, queue="a")
    with pytest.raises(TypeError, match="JSON-serializable"):
        queue.submit("weather", "Rome", session_values={"when": object()}, owner=OWNER, queue="a")
    unknown = read_all(queue, queue.submit("nobody", "hi", owner=OWNER, queue="a"))[-1].data
    assert unknown["status"] == "failed"
    assert unknown["error"]["type"] == "RunNotFoundError"
    assert "no agent named 'nobody' is registered in this worker" in unknown["error"]["message"]


def test_sigterm_of_a_worker_mid_run_finishes_on_another_worker(
    app_module: Any, env: dict[str, str], client: Any, tmp_path: Path
) -> None:
    queue = app_module.queue
    lane = f"deploy-{uuid.uuid4().hex[:6]}"
    tag = uuid.uuid4().hex
    with worker(env, client, "old", lane, tmp_path) as old:
        run_id = queue.submit("slow", tag, owner=OWNER, queue=lane)
        assert client.blpop([f"test:started:{tag}"], timeout=GUARD) is not None
        old.process.send_signal(signal.SIGTERM)  # a deploy: warm shutdown
        seen = read_until(queue, run_id, "stopping")
        client.rpush(f"test:gate:{tag}", "open")  # the tool in flight finishes
        seen += read_until_after(queue, run_id, seen[-1].id, "requeued")
        assert old.process.wait(timeout=GUARD) == 0
        with worker(env, client, "new", lane, tmp_path):
            rest = read_all(queue, run_id, seen[-1].id)
    entries = seen + rest
    assert workers_of(entries) == ["old", "new"]
    assert rest[-1].data["status"] == "completed"
    assert rest[-1].data["answer"].startswith("Finished: step done on old")
    assert int(client.get(f"test:ran:slow:{tag}")) == 1  # the tool ran once
    assert client.llen(f"test:started:{tag}") == 0
