"""The Celery app of ``celery-throughput``: ``celery -A benchmarks._celery_app worker``.

Imported by the workers (which run both sides) and by the benchmark process (which submits
and reads, as a web process does). ``BENCH_REDIS_URL`` names the redis-server (broker, result
backend and event streams), ``BENCH_MODEL_URL`` the loopback model server's base URL.

- agentkit's side: :data:`queue`, an :class:`~agentkit.integrations.celery.AgentQueue` with one
  agent, ``bench``: a ``ChatModelAgent`` over ``OpenAIChatModel`` with the ``add`` tool
  (not streamed, so its entries are ``run``, ``status``, one ``agent`` per event, ``end``);
  :data:`queue_stop`, the same agent on a queue of ``durability="stop"`` (saved only when a
  run stops: what the durable steps cost, by difference);
- the baseline: :func:`raw_run`, a plain Celery task that runs the raw httpx loop and XADDs
  the same entries to a stream of its own (:func:`raw_stream`), each with the same pipeline
  (``XADD`` capped + ``PEXPIRE``) the run log uses.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import redis
from celery import Celery
from celery.signals import worker_ready

from agentkit import ChatModelAgent
from agentkit.integrations.celery import AgentQueue
from agentkit.models import OpenAIChatModel
from benchmarks import _raw
from benchmarks._agentkit_side import AK_TOOLS

__all__ = ["AGENT", "RAW_PREFIX", "app", "queue", "queue_stop", "raw_run", "raw_stream"]

REDIS_URL = os.environ["BENCH_REDIS_URL"]
MODEL_URL = os.environ["BENCH_MODEL_URL"]
AGENT = "bench"
RAW_PREFIX = "bench:raw:"
STREAM_MAXLEN = 10_000
TTL_MS = 7 * 24 * 3600 * 1000

app = Celery("bench_celery", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
queue = AgentQueue(app)
queue_stop = AgentQueue(app, task_name="bench.agentkit_stop", durability="stop")
_redis = redis.Redis.from_url(REDIS_URL)


def _agent() -> ChatModelAgent:
    model = OpenAIChatModel("bench", api_key="sk-bench", base_url=MODEL_URL)
    return ChatModelAgent("bench", "a benchmark agent", model, tools=[AK_TOOLS["add"]])


queue.register(AGENT, _agent, enable_streaming=False)
queue_stop.register(AGENT, _agent, enable_streaming=False)


@worker_ready.connect  # type: ignore[untyped-decorator]  # celery has no type hints
def _announce(sender: object = None, **_: object) -> None:
    """Tell the benchmark this worker consumes now (a barrier, not a sleep)."""
    _redis.rpush(f"bench:ready:{os.environ['BENCH_WORKER_NAME']}", os.getpid())


def raw_stream(run_id: str) -> str:
    """The Redis Stream key of a baseline run."""
    return f"{RAW_PREFIX}{run_id}:events"


_loops: dict[int, _raw.RawLoop] = {}
_loops_lock = threading.Lock()


def _loop() -> _raw.RawLoop:
    """The raw loop of this worker thread (made once per thread, like a runner per agent)."""
    ident = threading.get_ident()
    with _loops_lock:
        loop = _loops.get(ident)
        if loop is None:
            loop = _loops[ident] = _raw.RawLoop(MODEL_URL, ("add",))
        return loop


def _append(run_id: str, kind: str, data: dict[str, Any]) -> None:
    stream = raw_stream(run_id)
    fields = {"kind": kind, "data": json.dumps(data, ensure_ascii=False)}
    with _redis.pipeline() as pipe:
        pipe.xadd(stream, fields, id="0-*", maxlen=STREAM_MAXLEN, approximate=True)  # type: ignore[arg-type]
        pipe.pexpire(stream, TTL_MS)
        pipe.execute()


@app.task(name="bench.raw_run")  # type: ignore[untyped-decorator]
def raw_run(run_id: str, prompt: str) -> dict[str, Any]:
    """Run the raw loop on ``prompt``, appending its entries to :func:`raw_stream`."""
    loop = _loop()
    _append(run_id, "run", {"run_id": run_id, "agent": AGENT})
    _append(run_id, "status", {"status": "started"})

    def on_message(message: dict[str, Any]) -> None:
        _append(run_id, "agent", {"agent_name": AGENT, "output": {"message": message}})

    loop.on_message = loop.on_tool_result = on_message
    answer = loop.run(prompt)
    summary: dict[str, Any] = {
        "status": "completed",
        "answer": answer,
        "interrupts": [],
        "error": None,
    }
    _append(run_id, "end", summary)
    return summary
