"""A rollback of Redis does not replay a consumed resume (issue 49, A1).

The repro, with a real redis-server and the task body run as a worker runs it: a human
approves one payment; someone with write access to Redis copies every key of the run (its
record, its checkpoint, its stream) and the sealed resume message; the worker pays; the
copies are restored and the message is pushed again. Everything verifies (every copy is
genuine), so only a memory outside Redis can tell: with ``AgentQueue(replay_ledger=...)``
the worker refuses the message and nothing is paid twice. Without a ledger the rollback
replays the payment (the documented limit this test also pins).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

celery = pytest.importorskip("celery")
redis = pytest.importorskip("redis")

from agentkit import ChatModelAgent, Message, Role, interrupt, tool  # noqa: E402
from agentkit.integrations.celery import AgentQueue, SQLiteReplayLedger  # noqa: E402
from agentkit.models import ScriptedChatModel  # noqa: E402
from agentkit.testing import call, calls_message  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402,F401

OWNER = "owner"


def _script(messages: list[Message]) -> Message | str:
    last = messages[-1]
    if last.role is Role.USER:
        return calls_message(call("pay", {"payee": last.content}))
    return f"Done: {last.content}."


def _queue(url: str, ledger: SQLiteReplayLedger | None, paid: list[str]) -> AgentQueue:
    @tool
    def pay(payee: str) -> str:
        """Pay a payee after a human approved it."""
        if not interrupt(f"Pay {payee}?"):
            return f"declined {payee}"
        paid.append(payee)
        return f"paid {payee}"

    app = celery.Celery("rollback", broker="memory://")
    prefix = f"rollback-{uuid.uuid4().hex[:6]}:"
    queue = AgentQueue(app, redis_url=url, prefix=f"{prefix}run:",
                       checkpoint_prefix=f"{prefix}checkpoint:", task_name=f"{prefix}run",
                       replay_ledger=ledger)
    queue.register(
        "payer",
        lambda: ChatModelAgent("payer", "pays", ScriptedChatModel(_script), tools=[pay]),
        enable_streaming=False,
    )
    return queue


def _snapshot(client: Any, pattern: str) -> dict[bytes, bytes]:
    return {key: client.dump(key) for key in client.scan_iter(match=pattern)}


def _restore(client: Any, keys: dict[bytes, bytes]) -> None:
    for key, value in keys.items():
        client.restore(key, 0, value, replace=True)


def _pay_then_roll_back_and_replay(queue: AgentQueue, paid: list[str]) -> dict[str, Any]:
    sent: list[Any] = []
    queue.task.apply_async = lambda args, **_: sent.append(args)
    run_id = queue.submit("payer", "ACME", owner=OWNER)
    first = queue._execute("worker@host", None, tuple(sent.pop()), {})
    assert first["status"] == "interrupted" and paid == []
    (interrupt_id,) = first["interrupts"]
    queue.resume(run_id, {interrupt_id: True}, owner=OWNER)
    message = sent.pop()
    client = queue.store.client
    prefix = queue._log().prefix.rsplit("run:", 1)[0]
    copies = _snapshot(client, f"{prefix}*")  # the attacker's copy, before the worker pays
    assert queue._execute("worker@host", None, tuple(message), {})["status"] == "completed"
    assert paid == ["ACME"]
    _restore(client, copies)  # Redis rolled back ...
    return dict(queue._execute("worker@host", None, tuple(message), {}))  # ... and replayed


def test_a_rollback_replay_with_a_ledger_pays_nothing_twice(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "rollback-tests-checkpoint-key-0123456789")
    paid: list[str] = []
    ledger = SQLiteReplayLedger(tmp_path / "ledger.sqlite3")
    replayed = _pay_then_roll_back_and_replay(_queue(redis_url, ledger, paid), paid)
    assert paid == ["ACME"]
    assert replayed["status"] == "refused" and "replay ledger" in replayed["error"]
    ledger.close()


def test_without_a_ledger_a_rollback_replay_runs_again_as_documented(
    redis_url: str, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "rollback-tests-checkpoint-key-0123456789")
    paid: list[str] = []
    _pay_then_roll_back_and_replay(_queue(redis_url, None, paid), paid)
    assert paid == ["ACME", "ACME"]  # the limit the security guide states


def test_the_ledger_remembers_across_processes_and_forgets_after_keep(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    writer, reader = SQLiteReplayLedger(path), SQLiteReplayLedger(path)
    assert not reader.ended("n1")
    writer.end("n1")
    assert reader.ended("n1") and not reader.ended("n2")
    short = SQLiteReplayLedger(path, keep=-1.0)  # everything is older than keep
    for number in range(SQLiteReplayLedger._PRUNE_EVERY):
        short.end(f"filler-{number}")
    assert not reader.ended("n1")
    for ledger in (writer, reader, short):
        ledger.close()
