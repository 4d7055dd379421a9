"""A Celery worker of :class:`AgentQueue` outlives Redis restarts under load (issue 49, A3).

A real redis-server (append-only, ``appendfsync always``: nothing is lost) is stopped and
started again, three times for about three seconds each, under a real worker
(``--pool=threads``) that has runs in flight (each run takes several short steps whose tool
waits out the restart). kombu's Redis transport used to kill such a worker: the reconnect
restored the channel's unacknowledged messages through a transport already detached from
its connection (``AttributeError: 'NoneType' object has no attribute 'hostname'``, an
"Unrecoverable error" for Celery). The worker must stay up, every run must end
``completed``, and no step may run twice.
"""

from __future__ import annotations

import importlib
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("celery")
redis = pytest.importorskip("redis")

from tests import celery_support as support  # noqa: E402
from tests.celery_support import GUARD, OWNER, environment, read_all, worker  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402,F401

env, restartable = support.env, support.restartable

RESTARTS = 3
LEASE_TTL = 15.0  # seconds: several outages long, as a production lease is
OUTAGE = 3.0  # seconds Redis is away each time (the point of the test, not a wait)
IN_FLIGHT = 3  # runs in flight at each restart (the worker runs 4 at once: it still polls)


def _first_step(broker: Any, tag: str, steady: support.Worker) -> None:
    """Wait until the run ``tag`` runs its first step; fail at once if the worker died."""
    deadline = time.monotonic() + GUARD
    while broker.blpop([f"test:beats:{tag}"], timeout=1) is None:
        log = steady.log.read_text(errors="replace")
        assert steady.process.poll() is None, f"the worker died:\n{log[-4000:]}"
        assert time.monotonic() < deadline, f"run {tag} did not start:\n{log[-4000:]}"


def test_a_worker_outlives_redis_restarts_with_runs_in_flight(
    restartable: support.RestartableRedis,
    env: dict[str, str],
    tmp_path: Path,
) -> None:
    # The restart: 3 s, well inside a lease (the default is 30 s). A lease that
    # expires during the outage is lost for good (issue 49 A8): the run may be another
    # worker's by then.
    values = {
        "REDIS_URL": restartable.url,
        "RUNS_REDIS_URL": restartable.url,
        "TEST_LEASE_TTL": str(LEASE_TTL),
    }
    with environment(values) as process_env:
        module = importlib.reload(importlib.import_module("celery_app"))
        queue = module.queue
        broker = redis.Redis.from_url(restartable.url, socket_timeout=GUARD + 5)
        lane = f"restart-{uuid.uuid4().hex[:6]}"
        runs: dict[str, str] = {}
        with worker(process_env, broker, "steady", lane, tmp_path) as steady:
            for _ in range(RESTARTS):
                tags = [uuid.uuid4().hex for _ in range(IN_FLIGHT)]
                for tag in tags:
                    runs[queue.submit("beater", tag, owner=OWNER, queue=lane)] = tag
                for tag in tags:  # every run is in its first step
                    _first_step(broker, tag, steady)
                restartable.stop()
                time.sleep(OUTAGE)
                restartable.start()
                broker = redis.Redis.from_url(restartable.url, socket_timeout=GUARD + 5)
            ends = {run_id: read_all(queue, run_id)[-1] for run_id in runs}
            alive = steady.process.poll() is None
            log = steady.log.read_text(errors="replace")
            steps = {
                (tag, step): int(broker.get(f"test:beat:{tag}:{step}") or 0)
                for tag in runs.values()
                for step in range(1, module.BEATS + 1)
            }
    importlib.reload(module)  # back to the module's own Redis for later tests
    assert alive, f"the worker died:\n{log[-4000:]}"
    assert "Unrecoverable error" not in log
    assert {end.data["status"] for end in ends.values()} == {"completed"}, ends
    assert set(steps.values()) == {1}, {key: n for key, n in steps.items() if n != 1}
