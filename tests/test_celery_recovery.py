"""A Celery run's task delivered again after its worker died at the very end of the run.

In-process (the task body is called as a worker would, twice, with the same sealed message;
real redis-server): the first worker ran the run to completion, its durable checkpoint says
so (a tombstone), and it died before it recorded the run's end. The next delivery must not
run anything again, and must record the end, so that no run stays "running".
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

celery = pytest.importorskip("celery")
redis = pytest.importorskip("redis")

from agentkit import ChatModelAgent, Message, Role, tool  # noqa: E402
from agentkit.integrations import _redislog  # noqa: E402
from agentkit.integrations.celery import AgentQueue  # noqa: E402
from agentkit.models import ScriptedChatModel  # noqa: E402
from agentkit.testing import call, calls_message  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402, F401

OWNER = "owner"


class Killed(BaseException):
    """The worker process dies here."""


def _scripted(messages: list[Message]) -> Message | str:
    if messages[-1].role is Role.USER:
        return calls_message(call("echo", {"text": messages[-1].content}))
    return f"echoed {messages[-1].content}"


def test_a_run_that_completed_before_its_worker_died_gets_its_end_recorded(
    redis_url: str, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "recovery-tests-checkpoint-key-0123456789ab")
    calls: list[str] = []

    @tool
    def echo(text: str) -> str:
        """Echo the text."""
        calls.append(text)
        return text

    app = celery.Celery("recovery", broker="memory://")
    prefix = f"recovery-{uuid.uuid4().hex[:6]}:"
    queue = AgentQueue(app, redis_url=redis_url, prefix=prefix, task_name=f"{prefix}run")
    queue.register(
        "echo",
        lambda: ChatModelAgent("echo", "echoes", ScriptedChatModel(_scripted), tools=[echo]),
        enable_streaming=False,
    )
    sent: list[Any] = []
    monkeypatch.setattr(queue.task, "apply_async", lambda args, **_: sent.append(args))
    run_id = queue.submit("echo", "hello", owner=OWNER)
    (message,) = sent

    real_finish = _redislog.RedisRunLog.finish

    def die(*args: Any, **kwargs: Any) -> Any:
        raise Killed("the worker died before it recorded the run's end")

    monkeypatch.setattr(_redislog.RedisRunLog, "finish", die)
    with pytest.raises(Killed):
        queue._execute("first@host", None, tuple(message), {})
    assert calls == ["hello"]
    assert queue.status(run_id, owner=OWNER)["status"] == "running"
    # The dead worker's lease expires (lease_ttl): gone, as after that time.
    queue.store.client.delete(queue.store.lease_key(run_id))

    monkeypatch.setattr(_redislog.RedisRunLog, "finish", real_finish)
    summary = queue._execute("second@host", None, tuple(message), {})
    assert calls == ["hello"]  # nothing ran again
    assert summary["status"] == "completed"
    assert queue.status(run_id, owner=OWNER)["status"] == "completed"
    with queue.events(run_id, owner=OWNER) as stream:
        entries = list(stream)
    assert entries[-1].kind == "end" and entries[-1].data["status"] == "completed"
    assert entries[-1].data["answer"] == "echoed hello"
