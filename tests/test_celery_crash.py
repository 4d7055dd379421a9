"""Celery runs that survive crashes: real workers killed with SIGKILL, a real Redis restarted.

* A worker killed with ``kill -9`` mid-run: Kombu hands its unacknowledged tasks to the other
  worker after the app's ``visibility_timeout``; the run's lease (``lease_ttl``) has expired
  by then (or the task is sent again until it has), and the other worker finishes the run.
  No run is left "running".
* Redis restarted while a run goes on: the run's watcher connects again, so a cancel made
  after the restart still stops the run.
"""

from __future__ import annotations

import importlib
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("celery")
redis = pytest.importorskip("redis")

from tests import celery_support as support  # noqa: E402
from tests.celery_support import (  # noqa: E402
    GUARD,
    OWNER,
    RestartableRedis,
    environment,
    read_all,
    worker,
    workers_of,
)
from tests.redis_server import redis_url  # noqa: E402,F401

env, client, restartable = support.env, support.client, support.restartable
RUNS = 20


@pytest.fixture(scope="module")
def crash_app(env: dict[str, str]) -> Any:
    """``celery_crash_app`` imported here (this process submits and reads only)."""
    module = importlib.import_module("celery_crash_app")
    if env["REDIS_URL"] != module.REDIS_URL:
        module = importlib.reload(module)
    return module


def hold_on(client: Any, worker_name: str, seen: dict[str, str], lane: str) -> str:
    """Wait until a run of ``lane`` is held in step 2 on ``worker_name``; returns its tag.

    Each test's runs report to a list of their own (the tags start with the lane): a report
    left by another test's runs must not time this test's kill.
    """
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        popped = client.blpop([f"test:crash:held:{lane}"], timeout=GUARD)
        assert popped is not None, "no run reached step 2"
        tag, name = popped[1].decode().split()
        seen[tag] = name
        if name.startswith(worker_name):
            return str(tag)
    pytest.fail(f"no run was held on worker {worker_name}")


# Two real workers, a kill, redelivery and a lease to expire: under a loaded machine this
# takes longer than the suite's 120 s guard (about 20 s alone).
@pytest.mark.timeout(360)
def test_a_worker_killed_mid_run_leaves_no_run_running_and_the_other_finishes_them(
    crash_app: Any, env: dict[str, str], client: Any, tmp_path: Path
) -> None:
    queue = crash_app.queue
    lane = f"crash-{uuid.uuid4().hex[:6]}"
    tags = [f"{lane}.{uuid.uuid4().hex}" for _ in range(RUNS)]
    held: dict[str, str] = {}
    with (
        worker(env, client, "doomed", lane, tmp_path, app="celery_crash_app") as doomed,
        worker(env, client, "survivor", lane, tmp_path, app="celery_crash_app") as survivor,
    ):
        run_ids = {tag: queue.submit("stepper", tag, owner=OWNER, queue=lane) for tag in tags}
        victim = hold_on(client, "doomed", held, lane)
        doomed.process.send_signal(signal.SIGKILL)  # mid-tool: in step 2 of at least one run
        doomed.process.wait(timeout=GUARD)
        for tag in tags:  # the held runs of the survivor go on
            client.rpush(f"test:gate:{tag}", "open")
        ends = {tag: read_all(queue, run_id) for tag, run_id in run_ids.items()}
        log = survivor.log.read_text(errors="replace")
    for tag, entries in ends.items():
        assert entries[-1].kind == "end", f"run {tag} has no end"
        assert entries[-1].data["status"] == "completed", entries[-1].data
        assert entries[-1].data["answer"] == f"{tag}: all 3 steps done"
        assert queue.status(run_ids[tag], owner=OWNER)["status"] == "completed"
    killed = [tag for tag, entries in ends.items() if workers_of(entries)[:1] == ["doomed"]]
    assert victim in killed
    for tag in killed:  # begun on the doomed worker, finished on the survivor
        assert workers_of(ends[tag])[-1] == "survivor"
    assert "agentkit" in log


def hold_all(client: Any, count: int, seen: dict[str, str], lane: str) -> None:
    """Wait until ``count`` runs of ``lane`` are held in step 2 (``seen``: tag -> worker)."""
    while len(seen) < count:
        popped = client.blpop([f"test:crash:held:{lane}"], timeout=GUARD)
        assert popped is not None, f"{len(seen)} of {count} runs reached step 2"
        tag, name = popped[1].decode().split()
        seen[tag] = name


# Each worker reserves at most 4 tasks (concurrency 4, prefetch multiplier 1, late acks), so 8
# runs are 4 on each, all running at once.
EVERY_SLOT = 8


# Two real workers, a kill, redelivery and a lease to expire: under a loaded machine this
# takes longer than the suite's 120 s guard (about 20 s alone).
@pytest.mark.timeout(360)
def test_a_worker_killed_mid_run_runs_no_finished_tool_again(
    crash_app: Any, env: dict[str, str], client: Any, tmp_path: Path
) -> None:
    """The kill lands once every run is held inside step 2: a step that finished is recorded
    by then, so none runs again; the step the kill cut short runs again on the survivor.

    (A kill between a tool's end and the record of its result would run that tool again: the
    record is the only proof that it ended. ``tool_call_key()`` is the answer for tools that
    must not run twice even then; this test does not aim its kill there.)
    """
    queue = crash_app.queue
    lane = f"crash-{uuid.uuid4().hex[:6]}"
    tags = [f"{lane}.{uuid.uuid4().hex}" for _ in range(EVERY_SLOT)]
    held: dict[str, str] = {}
    with (
        worker(env, client, "doomed", lane, tmp_path, app="celery_crash_app") as doomed,
        worker(env, client, "survivor", lane, tmp_path, app="celery_crash_app"),
    ):
        run_ids = {tag: queue.submit("stepper", tag, owner=OWNER, queue=lane) for tag in tags}
        hold_all(client, len(tags), held, lane)
        victims = [tag for tag, name in held.items() if name.startswith("doomed")]
        assert victims, held
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait(timeout=GUARD)
        for tag in tags:
            client.rpush(f"test:gate:{tag}", "open")
        for run_id in run_ids.values():
            assert read_all(queue, run_id)[-1].data["status"] == "completed"
    for tag in tags:
        assert int(client.get(f"test:calls:{tag}:1")) == 1, tag  # finished before the kill
        for number in (1, 2, 3):
            assert int(client.get(f"test:done:{tag}:{number}")) == 1, (tag, number)
    for tag in victims:  # cut short in step 2 by the kill: step 2 ran again, on the survivor
        assert int(client.get(f"test:calls:{tag}:2")) == 2, tag


# --- a Redis restart ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outage", "restarted"),
    [
        (1.0, "the only Redis"),  # broker, run logs and checkpoints in one Redis
        # Longer than redis-py's own retries and than the run's lease: the watcher connects
        # again by itself, and the lost lease stops the run (it is enqueued again).
        (6.0, "the runs' Redis"),
    ],
)
def test_a_cancel_after_a_redis_restart_still_stops_the_run(
    restartable: RestartableRedis,
    env: dict[str, str],
    tmp_path: Path,
    outage: float,
    restarted: str,
) -> None:
    values = {"REDIS_URL": restartable.url, "RUNS_REDIS_URL": restartable.url}
    if restarted == "the runs' Redis":
        values["REDIS_URL"] = env["REDIS_URL"]  # the broker stays up
    with environment(values) as process_env:
        module = importlib.reload(importlib.import_module("celery_app"))
        queue = module.queue
        broker = redis.Redis.from_url(values["REDIS_URL"], socket_timeout=GUARD + 5)
        lane = f"restart-{uuid.uuid4().hex[:6]}"
        with worker(process_env, broker, "steady", lane, tmp_path) as steady:
            tag = uuid.uuid4().hex
            run_id = queue.submit("ticker", tag, owner=OWNER, queue=lane)
            assert broker.blpop([f"test:tick:{tag}"], timeout=GUARD) is not None  # step 1 runs
            restartable.stop()
            time.sleep(outage)  # Redis is away this long (the point of the test, not a wait)
            restartable.start()
            assert queue.cancel(run_id, owner=OWNER) is True
            entries = read_all(queue, run_id)
            ticks = int(broker.get(f"test:ticks:{tag}") or 0)
            lost = restarted == "the runs' Redis" and steady.log_has(
                f"lost the lease on run {run_id!r}"
            )
    importlib.reload(module)  # back to the module's own Redis for later tests
    end = entries[-1]
    assert end.kind == "end" and end.data["status"] == "cancelled", end.data
    assert ticks < module.TICKS, f"the run ran all {ticks} steps after the cancel"
    if restarted == "the runs' Redis":
        assert lost  # the watcher stopped the run when it could not refresh its lease
        statuses = [e.data["status"] for e in entries if e.kind == "status"]
        assert "requeued" in statuses  # nobody else had taken it: enqueued again, resumed


def test_the_sample_hands_a_dead_workers_runs_over_once_their_lease_expired() -> None:
    # The sample app's settings keep the order the tests above rely on: a task of a dead
    # worker comes back (visibility timeout) well after the run's lease expired, and the
    # task sent again for a run still held (countdown lease_ttl) comes due before it could
    # be handed out a second time.
    import tests.sample_celery  # noqa: F401  (puts samples/ on the path)

    tasks = importlib.import_module("flask_app.tasks")
    options = tasks.app.conf.broker_transport_options
    assert options["visibility_timeout"] == tasks.VISIBILITY_TIMEOUT
    assert options["unacked_restore_throttle"] == 1
    assert tasks.VISIBILITY_TIMEOUT >= 3 * tasks.LEASE_TTL
    assert tasks.queue.runner(tasks.AGENT_NAME).lease_ttl == tasks.LEASE_TTL
