"""Runs whose task message could not be sent never stay "queued" for ever (issue 49, A4).

With a real redis-server (one restarted on its port where the broker fails with it) and real
Celery workers:

* Redis restarts between the run's record and the send: the submission fails, yet the run is
  marked failed and its idempotency key freed once Redis is back (the rescue waits out the
  restart), so the client's retry starts a new run;
* the rescue itself could not run (Redis away longer): the client's retry with the same key
  finds the run queued and sends its task again, and the run completes, once;
* ``cancel()`` of a run no worker started cancels it for real (its record, its ``end``
  entry), and its task message, if it arrives later, runs nothing;
* ``resume()`` while the broker is down raises, and leaves the run interrupted: the resume
  can be asked for again, and the tool runs once.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

celery = pytest.importorskip("celery")
redis = pytest.importorskip("redis")

from kombu.exceptions import OperationalError  # noqa: E402

from agentkit.integrations import _redislog  # noqa: E402
from agentkit.integrations.celery import AgentQueue  # noqa: E402
from tests import celery_support as support  # noqa: E402
from tests.celery_support import GUARD, OWNER, read_all  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402,F401

env, client, app_module, workers = support.env, support.client, support.app_module, support.workers
restartable = support.restartable


def read_to_end(queue: Any, run_id: str) -> list[Any]:
    """The run's entries up to its end (fails after :data:`GUARD` seconds without news)."""
    with queue.events(run_id, owner=OWNER, idle_timeout=GUARD) as stream:
        return list(stream)


def test_a_redis_restart_between_record_and_send_fails_the_run_and_frees_its_key(
    restartable: support.RestartableRedis, env: dict[str, str]
) -> None:
    app = celery.Celery("enqueue-failures", broker=restartable.url)
    app.conf.broker_connection_retry = False
    prefix = f"enqueue-{uuid.uuid4().hex[:6]}:"
    queue = AgentQueue(app, redis_url=restartable.url, prefix=f"{prefix}run:",
                       checkpoint_prefix=f"{prefix}checkpoint:", task_name=f"{prefix}run")
    real_send = queue.task.apply_async
    back = threading.Event()

    def redis_fails(*args: Any, **kwargs: Any) -> Any:
        restartable.stop()  # the record is written; Redis goes away before the send

        def restart() -> None:
            time.sleep(2.0)  # Redis is away this long (the point of the test, not a wait)
            restartable.start()
            back.set()

        threading.Thread(target=restart).start()
        return real_send(*args, **kwargs)

    queue.task.apply_async = redis_fails
    key = f"request-{uuid.uuid4().hex[:6]}"
    try:
        with pytest.raises((OperationalError, redis.ConnectionError)):
            queue.submit("weather", "Oslo", owner=OWNER, idempotency_key=key,
                         checkpoint_id="stuck-run")
    finally:
        assert back.wait(GUARD)
        queue.task.apply_async = real_send
    state = queue.status("stuck-run", owner=OWNER)
    assert state["status"] == "failed", state
    assert read_all(queue, "stuck-run")[-1].kind == "end"
    # The key was freed: the client's retry is a new run.
    assert queue.submit("weather", "Oslo", owner=OWNER, idempotency_key=key) != "stuck-run"


def test_a_retry_sends_a_run_whose_rescue_failed_again(
    app_module: Any,
    workers: dict[str, Any],
    client: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queue = app_module.queue
    city = f"Tromso-{uuid.uuid4().hex[:8]}"

    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the broker is down")

    def redis_away(*args: Any, **kwargs: Any) -> None:
        raise redis.ConnectionError("Redis is away")

    monkeypatch.setattr(queue.task, "apply_async", broker_down)
    monkeypatch.setattr(_redislog.RedisRunLog, "finish", redis_away)
    monkeypatch.setattr(_redislog.RedisRunLog, "forget_key", redis_away)
    monkeypatch.setattr("agentkit.integrations.celery._RESCUE_WAIT", 0.2, raising=False)
    stuck = f"stuck-{city}"

    def submit() -> str:
        return str(queue.submit("weather", city, owner=OWNER, queue="a", idempotency_key=city,
                                checkpoint_id=stuck))

    with pytest.raises(ConnectionError, match="the broker is down"):
        submit()
    monkeypatch.undo()
    assert queue.status(stuck, owner=OWNER)["status"] == "queued"
    assert submit() == stuck  # the client's retry: the same run, its task sent again
    assert read_to_end(queue, stuck)[-1].data["status"] == "completed"
    # A second retry of the completed run sends nothing; the tool ran once.
    assert submit() == stuck
    assert int(client.get(f"test:ran:weather:{city}")) == 1


def test_cancel_of_a_run_no_worker_started_cancels_it(
    app_module: Any, workers: dict[str, Any], client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = app_module.queue
    city = f"Bodo-{uuid.uuid4().hex[:8]}"
    held: list[Any] = []
    real_send = queue.task.apply_async
    monkeypatch.setattr(queue.task, "apply_async", lambda args, **kw: held.append((args, kw)))
    run_id = queue.submit("weather", city, owner=OWNER, queue="a")
    monkeypatch.undo()
    assert queue.cancel(run_id, owner=OWNER) is True
    assert queue.status(run_id, owner=OWNER)["status"] == "cancelled"
    end = read_to_end(queue, run_id)[-1]
    assert end.kind == "end" and end.data["status"] == "cancelled"
    assert queue.cancel(run_id, owner=OWNER) is False
    # The task message arrives late (the broker was slow): it runs nothing.
    (args, kwargs), = held
    result = real_send(args, **kwargs)
    assert result.get(timeout=GUARD)["status"] == "duplicate"
    assert client.get(f"test:ran:weather:{city}") is None


def test_a_resume_while_the_broker_is_down_can_be_asked_for_again(
    app_module: Any, workers: dict[str, Any], client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = app_module.queue
    payee = f"ACME-{uuid.uuid4().hex[:8]}"
    run_id = queue.submit("payer", payee, owner=OWNER, queue="a")
    end = read_to_end(queue, run_id)[-1]
    assert end.data["status"] == "interrupted"
    (interrupt_id,) = end.data["interrupts"]

    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the broker is down")

    monkeypatch.setattr(queue.task, "apply_async", broker_down)
    with pytest.raises(ConnectionError):
        queue.resume(run_id, {interrupt_id: True}, owner=OWNER, queue="a")
    monkeypatch.undo()
    assert queue.status(run_id, owner=OWNER)["status"] == "interrupted"
    assert queue.interrupts(run_id, owner=OWNER) == [interrupt_id]
    after = queue.resume(run_id, {interrupt_id: True}, owner=OWNER, queue="a")
    with queue.events(run_id, after, owner=OWNER, idle_timeout=GUARD) as stream:
        final = list(stream)[-1]
    assert final.data["status"] == "completed", final.data
    assert int(client.get(f"test:ran:pay:{payee}")) == 1
