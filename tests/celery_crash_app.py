"""The Celery app of the crash tests (``celery -A celery_crash_app worker``).

Short on purpose: a task whose worker died is handed to another worker after
``VISIBILITY_TIMEOUT`` seconds (Kombu's Redis transport looks for such tasks every second here),
and a run's lease lasts ``LEASE_TTL`` seconds unless refreshed. The ``stepper`` agent calls its
``step`` tool ``STEPS`` times; every call is counted in Redis, and the first call of step 2 of
each run reports to its test (a list named after the tag's lane: ``<lane>.<id>``) and waits on
a gate the test may never open (its worker is killed there).
"""

from __future__ import annotations

import logging
import os
import sys

import redis
from celery import Celery
from celery.signals import worker_ready

from agentkit import ChatModelAgent, Message, Role, tool
from agentkit.integrations.celery import AgentQueue
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

REDIS_URL = os.environ["REDIS_URL"]
VISIBILITY_TIMEOUT = 6
LEASE_TTL = 2.0
STEPS = 3
GATE_TIMEOUT = 60  # a failure guard: the test opens the gate (or kills the worker) long before

app = Celery("celery_crash_app", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    broker_transport_options={
        "visibility_timeout": VISIBILITY_TIMEOUT,
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    },
)
queue = AgentQueue(app, prefix="agentkit:crash:", lease_ttl=LEASE_TTL)
_redis = redis.Redis.from_url(REDIS_URL, socket_timeout=GATE_TIMEOUT + 5)
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
def step(tag: str, number: int) -> str:
    """Do one step of a job; the first call of step 2 of each job waits for the test's gate."""
    name = os.environ["TEST_WORKER_NAME"]
    _redis.incr(f"test:calls:{tag}:{number}")
    if number == 2 and _redis.incr(f"test:held:{tag}") == 1:
        lane = tag.partition(".")[0]  # each test's runs report to a list of their own
        _redis.rpush(f"test:crash:held:{lane}", f"{tag} {name}")
        _redis.blpop([f"test:gate:{tag}"], timeout=GATE_TIMEOUT)
    _redis.incr(f"test:done:{tag}:{number}")
    return f"step {number} done on {name}"


def _steps(messages: list[Message]) -> Message | str:
    tag = next(m for m in messages if m.role is Role.USER).content
    done = sum(1 for m in messages if m.role is Role.TOOL)
    if done < STEPS:
        return calls_message(call("step", {"tag": tag, "number": done + 1}, f"step-{done + 1}"))
    return f"{tag}: all {STEPS} steps done"


def _noted_steps(messages: list[Message]) -> Message | str:
    """The steps of ``_steps``, answered with the messages sent to the run (AgentQueue.send)."""
    reply = _steps(messages)
    if isinstance(reply, Message):
        return reply
    notes = [m.content for m in messages if m.role is Role.USER][1:]
    return f"{reply}; noted: {', '.join(notes)}"


queue.register(
    "noted_stepper",
    lambda: ChatModelAgent("noted", "steps", ScriptedChatModel(_noted_steps), tools=[step]),
)
queue.register(
    "stepper", lambda: ChatModelAgent("stepper", "steps", ScriptedChatModel(_steps), tools=[step])
)
