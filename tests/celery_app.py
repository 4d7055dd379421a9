"""The Celery app the Celery tests start workers with (``celery -A celery_app worker``).

Agents are registered here, by name, in every process that imports the module: the workers run
them, the test and its "web" subprocesses only submit, read, resume and cancel. Tools count
their executions in Redis so a test can see that no tool ran twice across workers.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Sequence

import redis
from celery import Celery
from celery.signals import worker_ready
from redis.backoff import ConstantBackoff
from redis.retry import Retry

from agentkit import (
    ChatModelAgent,
    Message,
    Role,
    assistant_message,
    cancellable_sleep,
    interrupt,
    tool,
)
from agentkit.integrations.celery import AgentQueue
from agentkit.models import ModelOptions, ScriptedChatModel
from agentkit.streams import StreamReader, stream_from_list
from agentkit.testing import call, calls_message

REDIS_URL = os.environ["REDIS_URL"]
GATE_TIMEOUT = 60  # a failure guard: the test opens the gate long before this

app = Celery("celery_app", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
if "TEST_VISIBILITY_TIMEOUT" in os.environ:  # the restart load: as the scaling-out guide says
    app.conf.broker_transport_options = {
        "visibility_timeout": float(os.environ["TEST_VISIBILITY_TIMEOUT"]),
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }
# Short: a task delivered again while its run is held comes back this soon. A test whose
# outage must not outlast the lease (a Redis restart) sets TEST_LEASE_TTL.
LEASE_TTL = float(os.environ.get("TEST_LEASE_TTL", "3.0"))
# Run logs, records and checkpoints live in REDIS_URL too, unless RUNS_REDIS_URL names another
# Redis (a test restarts that one alone; the broker stays up).
queue = AgentQueue(
    app,
    shutdown_timeout=GATE_TIMEOUT,
    lease_ttl=LEASE_TTL,
    redis_url=os.environ.get("RUNS_REDIS_URL", REDIS_URL),
)
# A second queue whose streams keep about 20 entries (trimmed streams, gap entries).
small = AgentQueue(
    app, prefix="agentkit:small:", stream_maxlen=20, task_name="agentkit.run.small"
)
CHUNKS = 500  # the chatty agent's answer comes in this many chunks
# A socket timeout longer than the gate's BLPOP (redis-py 8 defaults to 5 s).
_redis = redis.Redis.from_url(REDIS_URL, socket_timeout=GATE_TIMEOUT + 10)
if "TEST_WORKER_NAME" in os.environ:  # a worker: agentkit's log lines go to its log file
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger("agentkit").addHandler(_handler)
    logging.getLogger("agentkit").setLevel(logging.INFO)


@worker_ready.connect  # type: ignore[untyped-decorator]  # celery has no type hints
def _announce(sender: object = None, **_: object) -> None:
    """Tell the test this worker consumes now (a barrier, not a sleep)."""
    _redis.rpush(f"test:ready:{os.environ['TEST_WORKER_NAME']}", os.getpid())


@tool
def get_weather(city: str) -> str:
    """Get the weather of a city."""
    _redis.incr(f"test:ran:weather:{city}")
    return f"sunny in {city}"


def _weather_script(messages: list[Message]) -> Message | str:
    last = messages[-1]
    if last.role is Role.USER:
        return calls_message(call("get_weather", {"city": last.content}), content="Let me look.")
    return f"The weather: {last.content}. Have a nice day!"


@tool
def pay(payee: str) -> str:
    """Pay a payee after a human approved it."""
    approved = interrupt(f"Pay {payee}?")
    _redis.incr(f"test:ran:pay:{payee}")
    return f"paid {payee}" if approved else f"declined {payee}"


def _pay_script(messages: list[Message]) -> Message | str:
    last = messages[-1]
    if last.role is Role.USER:
        return calls_message(call("pay", {"payee": last.content}))
    return f"Done: {last.content}."


@tool
def slow_step(tag: str) -> str:
    """A step that waits until the test opens its gate."""
    # The worker's threads while the run lives (a test checks who keeps the run's lease).
    _redis.rpush(f"test:threads:{tag}", json.dumps([t.name for t in threading.enumerate()]))
    _redis.rpush(f"test:started:{tag}", os.environ["TEST_WORKER_NAME"])
    _redis.blpop([f"test:gate:{tag}"], timeout=GATE_TIMEOUT)
    _redis.incr(f"test:ran:slow:{tag}")
    return f"step done on {os.environ['TEST_WORKER_NAME']}"


def _slow_script(messages: list[Message]) -> Message | str:
    last = messages[-1]
    if last.role is Role.USER:
        return calls_message(call("slow_step", {"tag": last.content}))
    return f"Finished: {last.content}"


def _steered_script(messages: list[Message]) -> Message | str:
    """Runs the slow step on its input, then answers with the messages sent meanwhile."""
    if len(messages) == 1:
        return calls_message(call("slow_step", {"tag": messages[0].content}))
    sent = [m.content for m in messages[1:] if m.role is Role.USER]
    return "Heard: " + " | ".join(sent)


def _pay_twice_script(messages: list[Message]) -> Message | str:
    """Pays the first payee of "A,B", then the second, then answers."""
    first, second = next(m for m in messages if m.role is Role.USER).content.split(",")
    paid = [m for m in messages if m.role is Role.TOOL]
    if not paid:
        return calls_message(call("pay", {"payee": first}, "call_1"))
    if len(paid) == 1:
        return calls_message(call("pay", {"payee": second}, "call_1"))  # the same call id
    return f"Done: {paid[0].content}, {paid[1].content}."


TICKS = 20  # the ticker agent's steps
TICK = 1.0  # seconds each step takes
# The ticker's own client waits out a Redis restart (a test restarts Redis mid-run).
_patient = redis.Redis.from_url(
    REDIS_URL, retry=Retry(ConstantBackoff(0.1), 600), retry_on_error=[redis.ConnectionError]
)


@tool
def tick(tag: str) -> str:
    """One step of a long job."""
    count = _patient.incr(f"test:ticks:{tag}")
    _patient.rpush(f"test:tick:{tag}", count)
    cancellable_sleep(TICK)
    return f"tick {count}"


def _tick_script(messages: list[Message]) -> Message | str:
    tag = next(m for m in messages if m.role is Role.USER).content
    done = sum(1 for m in messages if m.role is Role.TOOL)
    if done < TICKS:
        return calls_message(call("tick", {"tag": tag}, f"tick-{done + 1}"))
    return f"{tag}: ticked {TICKS} times"


BEATS = 8  # the beater agent's steps
BEAT = 0.25  # seconds each step takes


@tool
def beat(tag: str, step: int) -> str:
    """One short step; counts how often each step ran (a step that ran twice shows 2)."""
    _patient.incr(f"test:beat:{tag}:{step}")
    _patient.rpush(f"test:beats:{tag}", step)
    cancellable_sleep(BEAT)
    return f"beat {step}"


def _beat_script(messages: list[Message]) -> Message | str:
    tag = next(m for m in messages if m.role is Role.USER).content
    done = sum(1 for m in messages if m.role is Role.TOOL)
    if done < BEATS:
        return calls_message(call("beat", {"tag": tag, "step": done + 1}, f"beat-{done + 1}"))
    return f"{tag}: {BEATS} beats"


@tool
def count(tag: str) -> str:
    """Count a call (through a client that waits out a Redis restart)."""
    return f"call {_patient.incr(f'test:ran:count:{tag}')} for {tag}"


def _count_script(messages: list[Message]) -> Message | str:
    last = messages[-1]
    if last.role is Role.USER:
        return calls_message(call("count", {"tag": last.content}))
    return f"Counted: {last.content}"


class ChunkyModel:
    """Answers with :data:`CHUNKS` streamed chunks (many entries in a run's stream)."""

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        return assistant_message("x" * CHUNKS)

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        return stream_from_list([assistant_message(f"{i} ") for i in range(CHUNKS)])


queue.register(
    "weather",
    lambda: ChatModelAgent(
        "weather", "weather", ScriptedChatModel(_weather_script), tools=[get_weather]
    ),
)
queue.register(
    "payer", lambda: ChatModelAgent("payer", "pays", ScriptedChatModel(_pay_script), tools=[pay])
)
queue.register(
    "slow",
    lambda: ChatModelAgent("slow", "slow", ScriptedChatModel(_slow_script), tools=[slow_step]),
)
queue.register(
    "steered",
    lambda: ChatModelAgent(
        "steered", "steered", ScriptedChatModel(_steered_script), tools=[slow_step]
    ),
)
queue.register(
    "payer2",
    lambda: ChatModelAgent("payer2", "pays twice", ScriptedChatModel(_pay_twice_script), tools=[pay]),
)
small.register("chatty", lambda: ChatModelAgent("chatty", "talks", ChunkyModel()))
queue.register(
    "ticker",
    lambda: ChatModelAgent("ticker", "ticks", ScriptedChatModel(_tick_script), tools=[tick]),
)
queue.register(
    "beater",
    lambda: ChatModelAgent("beater", "beats", ScriptedChatModel(_beat_script), tools=[beat]),
)
queue.register(
    "counter",
    lambda: ChatModelAgent("counter", "counts", ScriptedChatModel(_count_script), tools=[count]),
)
