"""The run log's JSON Schema holds for a Celery worker's entries, read from another process.

One real worker (``celery -A celery_app worker``) on its own queue, a real redis-server; the
entries are read back by a "web process" (``celery_client.py``), as JSON, and validated.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("celery")
pytest.importorskip("redis")
jsonschema = pytest.importorskip("jsonschema")

from agentkit.integrations.runs import run_log_schema  # noqa: E402
from tests import celery_support as support  # noqa: E402
from tests.celery_support import GUARD, OWNER, TESTS, read_until, web  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402, F401

env, app_module, client = support.env, support.app_module, support.client
VALIDATOR = jsonschema.Draft202012Validator(run_log_schema())
LANE = "schema"


@pytest.fixture(scope="module")
def schema_worker(
    env: dict[str, str], client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[support.Worker]:
    with support.worker(env, client, "schema", LANE, tmp_path_factory.mktemp("celery")) as one:
        yield one


def checked(entries: list[dict[str, Any]]) -> list[str]:
    for entry in entries:
        errors = list(VALIDATOR.iter_errors(entry))
        assert not errors, f"{entry}: {[e.message for e in errors[:3]]}"
    return [entry["kind"] for entry in entries]


def test_entries_of_real_celery_runs_match_the_schema(
    app_module: Any, schema_worker: support.Worker, env: dict[str, str], client: Any
) -> None:
    queue = app_module.queue
    # completed, with streamed tokens
    weather = queue.submit("weather", "Oslo", owner=OWNER, queue=LANE)
    kinds = checked(web(env, "events", weather))
    assert kinds[0] == "run" and kinds[1] == "status" and "token" in kinds and kinds[-1] == "end"

    # interrupted, then resumed (another process approves)
    payer = queue.submit("payer", f"ACME-{uuid.uuid4().hex[:6]}", owner=OWNER, queue=LANE)
    first = web(env, "events", payer)
    checked(first)
    assert first[-1]["data"]["status"] == "interrupted"
    done = subprocess.run(
        [sys.executable, str(TESTS / "celery_client.py"), "resume", payer, "approve", LANE],
        cwd=TESTS, env=env, capture_output=True, text=True, timeout=GUARD, check=False,
    )
    assert done.returncode == 0, done.stderr
    second = web(env, "events", payer, first[-1]["id"])  # a reader stops at the first end
    kinds = checked(second)
    assert kinds[0] == "status" and second[-1]["data"]["status"] == "completed"

    # cancelled: the worker's "cancelling" status entry, then the end
    tag = uuid.uuid4().hex
    slow = queue.submit("slow", tag, owner=OWNER, queue=LANE)
    assert client.blpop([f"test:started:{tag}"], timeout=GUARD) is not None
    assert web(env, "cancel", slow) == [{"cancelled": True}]
    read_until(queue, slow, "cancelling")
    client.rpush(f"test:gate:{tag}", "open")
    cancelled = web(env, "events", slow)
    checked(cancelled)
    statuses = [e["data"]["status"] for e in cancelled if e["kind"] == "status"]
    assert "cancelling" in statuses and cancelled[-1]["data"]["status"] == "cancelled"

    # trimmed: a gap entry first
    small = app_module.small
    chatty = small.submit("chatty", "talk", owner=OWNER, queue=LANE)
    with small.events(chatty, owner=OWNER, idle_timeout=GUARD) as stream:
        list(stream)  # to its end, keeping up; read again below once trimmed
    with small.events(chatty, owner=OWNER) as stream:
        trimmed = [{"id": e.id, "kind": e.kind, "data": e.data} for e in stream]
    kinds = checked(trimmed)
    assert kinds[0] == "gap" and kinds[-1] == "end"
