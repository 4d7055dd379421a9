"""Idempotent submissions: a submission repeated with the same key starts nothing.

``LocalRuns`` in this process (threads racing with one key), and ``AgentQueue`` with a real
redis-server and real Celery worker processes, where "web processes" racing with one key are
real subprocesses. Tools count their executions in Redis, so a second run would show.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from typing import Any

import pytest

from agentkit import ChatModelAgent, Runner, tool
from agentkit.integrations.runs import LocalRuns, RunStateError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

GUARD = 60.0


def counting_runner() -> tuple[Runner, list[str]]:
    """A runner whose agent calls a tool that records each run's input."""
    ran: list[str] = []
    lock = threading.Lock()

    @tool
    def note(text: str) -> str:
        """Note a text."""
        with lock:
            ran.append(text)
        return "noted"

    def script(messages: list[Any]) -> Any:
        last = messages[-1]
        if last.role.value == "user":
            return calls_message(call("note", {"text": last.content}))
        return "done"

    model = ScriptedChatModel(script)
    return Runner(ChatModelAgent("noter", "notes", model, tools=[note])), ran


def finish(runs: LocalRuns, run_id: str, owner: str | None) -> dict[str, Any]:
    with runs.events(run_id, owner=owner) as stream:
        entries = list(stream)
    assert entries[-1].kind == "end"
    return entries[-1].data


# --- LocalRuns ------------------------------------------------------------------------------


def test_a_repeated_local_submission_returns_the_first_run_and_starts_nothing() -> None:
    runner, ran = counting_runner()
    with LocalRuns({"noter": runner}) as runs:
        first = runs.submit("noter", "hello", owner="ann", idempotency_key="req-1")
        again = runs.submit("noter", "hello", owner="ann", idempotency_key="req-1")
        assert again == first
        assert finish(runs, first, "ann")["status"] == "completed"
        assert runs.submit("noter", "hello", owner="ann", idempotency_key="req-1") == first
        assert runs.held() == 1
    assert ran == ["hello"]


def test_local_submissions_racing_with_one_key_start_one_run() -> None:
    runner, ran = counting_runner()
    barrier = threading.Barrier(12)
    ids: list[str] = []
    with LocalRuns({"noter": runner}) as runs:

        def submit() -> None:
            barrier.wait(GUARD)
            ids.append(runs.submit("noter", "race", owner="ann", idempotency_key="click"))

        threads = [threading.Thread(target=submit) for _ in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(GUARD)
        assert len(set(ids)) == 1 and len(ids) == 12
        finish(runs, ids[0], "ann")
    assert ran == ["race"]


def test_a_key_belongs_to_its_owner_and_names_one_request() -> None:
    runner, ran = counting_runner()
    with LocalRuns({"noter": runner}) as runs:
        anns = runs.submit("noter", "hi", owner="ann", idempotency_key="k")
        bobs = runs.submit("noter", "hi", owner="bob", idempotency_key="k")
        assert anns != bobs  # another owner's key is another key
        with pytest.raises(RunStateError, match="idempotency key 'k' was used before for another"):
            runs.submit("noter", "something else", owner="ann", idempotency_key="k")
        with pytest.raises(RunStateError, match="another request"):
            runs.submit("noter", "hi", owner="ann", idempotency_key="k", session_values={"a": 1})
        finish(runs, anns, "ann")
        finish(runs, bobs, "bob")
    assert sorted(ran) == ["hi", "hi"]


def test_a_key_is_forgotten_with_its_run() -> None:
    runner, ran = counting_runner()
    with LocalRuns({"noter": runner}) as runs:
        first = runs.submit("noter", "once", idempotency_key="k")
        finish(runs, first, None)
        runs.forget(first)
        second = runs.submit("noter", "once", idempotency_key="k")
        assert second != first
        finish(runs, second, None)
    assert ran == ["once", "once"]


@pytest.mark.parametrize(
    ("key", "error"), [("", ValueError), ("x" * 257, ValueError), (42, TypeError)]
)
def test_a_bad_idempotency_key_is_refused(key: Any, error: type[Exception]) -> None:
    runner, ran = counting_runner()
    with LocalRuns({"noter": runner}) as runs:
        with pytest.raises(error, match="idempotency_key"):
            runs.submit("noter", "hi", idempotency_key=key)
        assert runs.held() == 0
    assert ran == []


# --- AgentQueue: real workers, real web processes -------------------------------------------

pytest.importorskip("celery")
pytest.importorskip("redis")

from tests import celery_support as support  # noqa: E402
from tests.celery_support import OWNER, TESTS, read_all  # noqa: E402

env, app_module, client, workers = support.env, support.app_module, support.client, support.workers

# A web process that submits the weather agent's run for a city with an idempotency key and
# prints the run id. argv: city, key.
SUBMIT = """
import sys
from celery_app import queue
print(queue.submit("weather", sys.argv[1], owner="tester", queue="a", idempotency_key=sys.argv[2]))
"""


def test_web_processes_racing_with_one_key_start_one_run_on_the_workers(
    app_module: Any, workers: dict[str, Any], env: dict[str, str], client: Any
) -> None:
    city = f"Bergen-{uuid.uuid4().hex[:8]}"
    key = f"submit-{uuid.uuid4().hex}"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", SUBMIT, city, key],
            cwd=TESTS,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    outputs = [process.communicate(timeout=GUARD) for process in processes]
    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err
    ids = {out.strip() for out, _ in outputs}
    assert len(ids) == 1
    (run_id,) = ids
    queue = app_module.queue
    entries = read_all(queue, run_id)
    assert entries[-1].data["status"] == "completed"
    # Once more, after the run ended: still that run, nothing enqueued.
    assert queue.submit("weather", city, owner=OWNER, queue="a", idempotency_key=key) == run_id
    assert [e.kind for e in read_all(queue, run_id)].count("end") == 1
    assert int(client.get(f"test:ran:weather:{city}")) == 1
    with pytest.raises(RunStateError, match="another request"):
        queue.submit("weather", "Oslo", owner=OWNER, queue="a", idempotency_key=key)
    other = queue.submit("weather", city, owner="someone-else", queue="a", idempotency_key=key)
    assert other != run_id  # keys are bound to their owner
    assert read_all_as(queue, other, "someone-else")[-1].data["status"] == "completed"
    assert int(client.get(f"test:ran:weather:{city}")) == 2


def read_all_as(queue: Any, run_id: str, owner: str) -> list[Any]:
    with queue.events(run_id, owner=owner) as stream:
        return list(stream)


def test_the_key_lives_as_long_as_the_run_record(client: Any) -> None:
    from agentkit.integrations._redislog import RedisRunLog, RunRecord
    from agentkit.integrations._signing import Sealer

    sealer = Sealer(lambda: [b"a test key of 16+ bytes"], "test")
    log = RedisRunLog(client, prefix=f"test:{uuid.uuid4().hex[:6]}:", maxlen=100, ttl=3.0,
                      sealer=sealer)
    record = RunRecord("r1", "weather", "ann", "queued", pending="n1")
    assert log.create_once(record, "digest", "request") is None
    key = log.idempotency_key("digest")
    client.pexpire(key, 1000)
    client.pexpire(log.key("r1"), 1000)  # both about to expire ...
    log.update("r1", lambda current: RunRecord("r1", "weather", "ann", "running", pending="n1"))
    assert client.pttl(key) > 2000 and client.pttl(log.key("r1")) > 2000  # ... renewed together
    client.pexpire(key, 1000)
    log.finish("r1", lambda current: RunRecord("r1", "weather", "ann", "completed"), {"s": 1})
    assert client.pttl(key) > 2000
    assert log.create_once(record, "digest", "request") == ("r1", "request", client.get(key).decode())


def test_a_submission_that_cannot_be_enqueued_frees_its_key(
    app_module: Any, workers: dict[str, Any], client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = app_module.queue
    city = f"Narvik-{uuid.uuid4().hex[:8]}"
    lost = f"lost-{uuid.uuid4().hex[:8]}"

    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the broker is down")

    monkeypatch.setattr(queue.task, "apply_async", broker_down)
    with pytest.raises(ConnectionError, match="the broker is down"):
        queue.submit("weather", city, owner=OWNER, checkpoint_id=lost, idempotency_key=city)
    monkeypatch.undo()
    state = queue.status(lost, owner=OWNER)
    assert state["status"] == "failed" and "the broker is down" in state["summary"]["error"]["message"]
    # The client's retry starts the run.
    retry = queue.submit("weather", city, owner=OWNER, queue="a", idempotency_key=city)
    assert retry != lost
    assert read_all(queue, retry)[-1].data["status"] == "completed"
    assert int(client.get(f"test:ran:weather:{city}")) == 1
