"""agentkit.integrations.celery with a real redis-server and real Celery worker processes.

Workers are started by the tests (``celery -A celery_app worker --pool=threads``, each on its
own queue so a test decides which worker runs what); "web processes" are subprocesses running
``celery_client.py``. Barriers are Redis lists the workers and tools push to, and status
entries in the run's own stream; timeouts are failure guards only.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("celery")
redis = pytest.importorskip("redis")

from agentkit.integrations.runs import RunEvent, RunNotFoundError, RunStateError  # noqa: E402
from tests import celery_broker as broker  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402,F401

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
GUARD = 60  # seconds: a failure guard for every wait, never a pacing
TEST_KEY = "celery-tests-checkpoint-key-0123456789abcdef"
OWNER = "tester"  # the owner of every run here (celery_client.py calls as this owner too)


@pytest.fixture(scope="module")
def env(redis_url: str) -> Iterator[dict[str, str]]:  # noqa: F811
    """The environment of every process: the test's Redis, a fixed checkpoint key."""
    values = {
        "REDIS_URL": redis_url,
        "AGENTKIT_CHECKPOINT_KEY": TEST_KEY,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
    }
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield {**os.environ, **values}
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="module")
def app_module(env: dict[str, str]) -> Any:
    """``celery_app`` imported in the test process (it only submits and reads here)."""
    return importlib.import_module("celery_app")


@pytest.fixture(scope="module")
def client(env: dict[str, str]) -> Any:
    return redis.Redis.from_url(env["REDIS_URL"])


@contextlib.contextmanager
def worker(
    env: dict[str, str], client: Any, name: str, queue: str, log_dir: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A Celery worker process consuming ``queue``; started, ready, then stopped."""
    unique = f"{name}-{uuid.uuid4().hex[:6]}"
    log_path = log_dir / f"worker-{unique}.log"
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "celery_app",
        "worker",
        "--pool=threads",
        "--concurrency=4",
        "-Q",
        queue,
        "-n",
        f"{unique}@test",
        "--without-gossip",
        "--without-mingle",
        "--loglevel=INFO",
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=TESTS,
            env={**env, "TEST_WORKER_NAME": unique},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        if client.blpop([f"test:ready:{unique}"], timeout=GUARD) is None:
            pytest.fail(f"worker {unique} did not start:\n{log_path.read_text()[-3000:]}")
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout=GUARD)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def workers(
    env: dict[str, str], client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """Two workers: ``a`` consumes queue ``a``, ``b`` consumes queue ``b``; their hostnames."""
    log_dir = tmp_path_factory.mktemp("celery")
    with (
        worker(env, client, "a", "a", log_dir) as first,
        worker(env, client, "b", "b", log_dir) as second,
    ):
        yield {"a": str(first.pid), "b": str(second.pid)}


def web(env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    """Run ``celery_client.py`` in a new process (another web server); its JSON lines."""
    done = subprocess.run(
        [sys.executable, str(TESTS / "celery_client.py"), *args],
        cwd=TESTS,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def read_all(queue: Any, run_id: str, after: str | None = None) -> list[RunEvent]:
    with queue.events(run_id, after, owner=OWNER) as stream:
        return list(stream)


def read_until(queue: Any, run_id: str, status: str) -> list[RunEvent]:
    """Read the run's stream until a status entry with ``status`` (or its end)."""
    seen: list[RunEvent] = []
    with queue.events(run_id, owner=OWNER, idle_timeout=GUARD) as stream:
        for entry in stream:
            seen.append(entry)
            if entry.kind == "status" and entry.data["status"] == status:
                return seen
    pytest.fail(f"no {status!r} status in {[(e.kind, e.data) for e in seen]}")


def workers_of(entries: list[Any]) -> list[str]:
    return [
        (e.data if isinstance(e, RunEvent) else e["data"])["worker"].split("@")[0].rsplit("-", 1)[0]
        for e in entries
        if (e.kind if isinstance(e, RunEvent) else e["kind"]) == "status"
        and (e.data if isinstance(e, RunEvent) else e["data"])["status"] == "started"
    ]


def test_run_on_a_worker_read_from_a_second_web_process(
    app_module: Any, workers: dict[str, str], env: dict[str, str], client: Any
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
    app_module: Any, workers: dict[str, str], env: dict[str, str], client: Any
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
    app_module: Any, workers: dict[str, str], env: dict[str, str], client: Any
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
    app_module: Any, workers: dict[str, str], env: dict[str, str], client: Any
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
    app_module: Any, workers: dict[str, str], client: Any
) -> None:
    queue = app_module.queue
    tag = uuid.uuid4().hex
    hold = f"hold-{uuid.uuid4().hex[:6]}"  # no worker consumes it: the test holds the message
    run_id = queue.submit("slow", tag, owner=OWNER, queue=hold)
    message = broker.take(client, hold)
    broker.put(client, "a", message)
    assert client.blpop([f"test:started:{tag}"], timeout=GUARD) is not None
    # The broker delivers the task again (at least once) while worker a runs it.
    again = broker.put(client, "b", message)
    assert app_module.app.AsyncResult(again).get(timeout=GUARD)["status"] == "duplicate"
    client.rpush(f"test:gate:{tag}", "open")
    entries = read_all(queue, run_id)
    assert entries[-1].data["status"] == "completed"
    # And once more after it completed.
    late = broker.put(client, "b", message)
    assert app_module.app.AsyncResult(late).get(timeout=GUARD) == {
        "status": "duplicate",
        "error": "the run is completed",
    }
    assert int(client.get(f"test:ran:slow:{tag}")) == 1
    assert workers_of(read_all(queue, run_id)) == ["a"]


def test_unknown_runs_and_bad_event_ids_are_clear_errors(
    app_module: Any, workers: dict[str, str]
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
        old.send_signal(signal.SIGTERM)  # a deploy: warm shutdown
        seen = read_until(queue, run_id, "stopping")
        client.rpush(f"test:gate:{tag}", "open")  # the tool in flight finishes
        seen += read_until_after(queue, run_id, seen[-1].id, "requeued")
        assert old.wait(timeout=GUARD) == 0
        with worker(env, client, "new", lane, tmp_path):
            rest = read_all(queue, run_id, seen[-1].id)
    entries = seen + rest
    assert workers_of(entries) == ["old", "new"]
    assert rest[-1].data["status"] == "completed"
    assert rest[-1].data["answer"].startswith("Finished: step done on old")
    assert int(client.get(f"test:ran:slow:{tag}")) == 1  # the tool ran once
    assert client.llen(f"test:started:{tag}") == 0


def read_until_after(queue: Any, run_id: str, after: str, status: str) -> list[RunEvent]:
    seen: list[RunEvent] = []
    with queue.events(run_id, after, owner=OWNER, idle_timeout=GUARD) as stream:
        for entry in stream:
            seen.append(entry)
            if entry.kind == "status" and entry.data["status"] == status:
                return seen
    pytest.fail(f"no {status!r} status in {[(e.kind, e.data) for e in seen]}")
