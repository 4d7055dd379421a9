"""Checkpoint ids: any string is valid (API.md 10), lone surrogates and NUL included.

Conversation ids are checked (``ValueError``); checkpoint ids are encoded by every store, so
a run interrupted under an id no text column could hold resumes from every built-in store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkit import ChatModelAgent, Runner, interrupt, tool, with_checkpoint_id
from agentkit.checkpoint import (
    FileCheckPointStore,
    InMemoryCheckPointStore,
    PickleSerializer,
    RedisCheckPointStore,
    SQLiteCheckPointStore,
)
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

ODD_IDS = ["lone \ud800 surrogate", "nul\x00byte", "run:42:cancel", "\udfff"]


@pytest.fixture(params=["memory", "file", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield InMemoryCheckPointStore()
    elif request.param == "file":
        yield FileCheckPointStore(tmp_path / "checkpoints")
    elif request.param == "sqlite":
        with SQLiteCheckPointStore(tmp_path / "c.db") as sqlite_store:
            yield sqlite_store
    else:
        url = request.getfixturevalue("redis_url")
        with RedisCheckPointStore(url, prefix=f"test:ids:{tmp_path.name}:") as redis_store:
            yield redis_store


@pytest.mark.parametrize("checkpoint_id", ODD_IDS)
def test_a_run_under_any_string_id_interrupts_and_resumes(store: Any, checkpoint_id: str) -> None:
    @tool
    def pay(amount: int) -> str:
        """Pay after approval."""
        return f"paid {amount}" if interrupt("approve?") else "declined"

    def runner(script: list[Any]) -> Runner:
        agent = ChatModelAgent("Payer", "pays", ScriptedChatModel(script), tools=[pay])
        return Runner(agent, checkpoint_store=store, serializer=PickleSerializer(b"k" * 32))

    first = runner([calls_message(call("pay", {"amount": 3}, id="c1"))])
    stopped = first.invoke("pay", with_checkpoint_id(checkpoint_id))
    assert stopped.interrupt is not None and stopped.checkpoint_id == checkpoint_id
    [point] = stopped.interrupt.contexts
    done = runner(["done"]).resume(checkpoint_id, targets={point.id: True}).result()
    assert done.text == "done"
