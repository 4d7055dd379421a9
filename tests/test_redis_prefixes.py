"""Redis key prefixes of different deployments may not overlap (issue 49 A16).

With ``agentkit:run:`` and ``agentkit:run:t1-`` in one database, the run ``t1-abc`` of the
first is the run ``abc`` of the second: one deployment could take the other's run ids, or
forget its runs, through the API. Each prefix is recorded in Redis when a queue first uses it
and one that overlaps a recorded prefix is refused. With a real redis-server.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

pytest.importorskip("celery")
redis = pytest.importorskip("redis")

from agentkit import ChatModelAgent  # noqa: E402
from agentkit.integrations._redisprefixes import REGISTRY  # noqa: E402
from agentkit.integrations.runs import RedisPrefixError  # noqa: E402
from agentkit.models import ScriptedChatModel  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402, F401


@pytest.fixture
def space() -> str:
    """A key space of this test's own in the shared database."""
    return f"prefixes-{uuid.uuid4().hex[:8]}:"


def queue_of(url: str, prefix: str, checkpoint_prefix: str) -> Any:
    """An eager ``AgentQueue`` (tasks run at submit) with the ``echo`` agent."""
    import celery

    from agentkit.integrations.celery import AgentQueue

    app = celery.Celery("prefixes", broker="memory://")
    app.conf.task_always_eager = True
    queue = AgentQueue(
        app, redis_url=url, prefix=prefix, checkpoint_prefix=checkpoint_prefix,
        task_name=f"{prefix}run",
    )
    queue.register(
        "echo", lambda: ChatModelAgent("echo", "echoes", ScriptedChatModel(["done"])),
        enable_streaming=False,
    )
    return queue


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "prefix-tests-checkpoint-key-0123456789")


def test_a_deployment_whose_prefix_extends_another_cannot_squat_its_runs(
    redis_url: str, space: str  # noqa: F811
) -> None:
    first = queue_of(redis_url, f"{space}run:", f"{space}a-checkpoint:")
    first.submit("echo", "hello", owner="first", checkpoint_id="t1-abc")
    second = queue_of(redis_url, f"{space}run:t1-", f"{space}b-checkpoint:")
    # Before: the second's run "abc" was the first's run "t1-abc" ("run id is taken").
    with pytest.raises(RedisPrefixError, match=f"'{space}run:t1-' .* overlaps .*'{space}run:'"):
        second.submit("echo", "hello", owner="second", checkpoint_id="abc")
    # The other way round too: the shorter prefix comes second.
    longer = queue_of(redis_url, f"{space}x:t1-", f"{space}c-checkpoint:")
    longer.submit("echo", "hello", owner="longer")
    shorter = queue_of(redis_url, f"{space}x:", f"{space}d-checkpoint:")
    with pytest.raises(RedisPrefixError, match="overlaps"):
        shorter.submit("echo", "hello", owner="shorter")


def test_the_processes_of_one_deployment_share_their_prefixes(
    redis_url: str, space: str  # noqa: F811
) -> None:
    web = queue_of(redis_url, f"{space}run:", f"{space}checkpoint:")
    worker = queue_of(redis_url, f"{space}run:", f"{space}checkpoint:")
    web.submit("echo", "hello", owner="o")
    worker.submit("echo", "hello", owner="o")
    client = redis.Redis.from_url(redis_url)
    assert client.hget(REGISTRY, f"{space}run:") == b"runs"
    assert client.hget(REGISTRY, f"{space}checkpoint:") == b"checkpoints"


def test_a_run_prefix_may_not_be_a_checkpoint_prefix_or_overlap_it(
    redis_url: str, space: str  # noqa: F811
) -> None:
    with pytest.raises(RedisPrefixError, match="for checkpoints"):
        queue_of(redis_url, f"{space}same:", f"{space}same:").submit("echo", "hi", owner="o")
    with pytest.raises(RedisPrefixError, match="overlaps"):
        queue_of(redis_url, f"{space}k:", f"{space}k:checkpoint:").submit("echo", "hi", owner="o")
    with pytest.raises(RedisPrefixError, match="NUL"):
        queue_of(redis_url, f"{space}\x00:", f"{space}c:").submit("echo", "hi", owner="o")
