"""The approval inbox: pending approvals across runs, decided exactly once, with an audit log."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    Approve,
    ChatModelAgent,
    Reject,
    Role,
    Runner,
    tool,
    with_checkpoint_id,
    with_session_values,
)
from agentkit.approvals import (
    AUDIT_PREFIX,
    ApprovalDecidedError,
    ApprovalExpiredError,
    ApprovalInbox,
    ApprovalNotFoundError,
    ApprovalOwnerError,
    Decided,
)
from agentkit.checkpoint import (
    FileCheckPointStore,
    InMemoryCheckPointStore,
    RedisCheckPointStore,
    SQLiteCheckPointStore,
)
from agentkit.errors import CheckpointError, ResumeError, ToolError
from agentkit.integrations.runs import LocalRuns, RunOwnerError
from agentkit.models import ScriptedChatModel
from agentkit.schema import Message
from agentkit.testing import ManualClock, call, calls_message
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

ROOT = Path(__file__).resolve().parent.parent
STORE_KINDS = ["memory", "file", "sqlite", "redis"]


def reply(messages: list[Message]) -> Message | str:
    """Ask to pay whoever the user names; then say what the tool answered."""
    last = messages[-1]
    if last.role == Role.USER:
        payee = last.content.removeprefix("pay ")
        return calls_message(call("pay", {"payee": payee, "amount": 120}, id="p1"))
    return f"model saw: {last.content}"


class Payments:
    """A pay tool needing approval, and what it paid (thread-safe)."""

    def __init__(self) -> None:
        self.paid: list[dict[str, Any]] = []
        self._lock = threading.Lock()

        @tool(needs_approval=True)
        def pay(payee: str, amount: int) -> str:
            """Pay someone."""
            with self._lock:
                self.paid.append({"payee": payee, "amount": amount})
            return f"paid {amount} to {payee}"

        self.tool = pay


@pytest.fixture(params=STORE_KINDS)
def make_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[ManualClock], Any]]:
    """Stores of one kind on one backend (a new store object per call, as another process)."""
    created: list[Any] = []
    shared: dict[str, Any] = {}

    def make(clock: ManualClock) -> Any:
        kind = request.param
        if kind == "memory":
            return shared.setdefault("memory", InMemoryCheckPointStore(clock=clock))
        if kind == "file":
            return FileCheckPointStore(tmp_path / "checkpoints", clock=clock)
        if kind == "sqlite":
            store: Any = SQLiteCheckPointStore(tmp_path / "checkpoints.db", clock=clock)
        else:
            url = request.getfixturevalue("redis_url")
            store = RedisCheckPointStore(url, prefix=f"inbox:{request.node.name}:", clock=clock)
        created.append(store)
        return store

    yield make
    for store in created:
        store.close()


def start(runner: Runner, run_id: str, payee: str, owner: str | None) -> None:
    values = {} if owner is None else {"owner": owner}
    result = runner.invoke(f"pay {payee}", with_checkpoint_id(run_id), with_session_values(values))
    assert result.interrupt is not None


def setup(
    make_store: Callable[[ManualClock], Any], **inbox: Any
) -> tuple[Runner, ApprovalInbox, Payments, ManualClock]:
    clock = ManualClock()
    payments = Payments()
    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[payments.tool])
    runner = Runner(agent, checkpoint_store=make_store(clock))
    return runner, ApprovalInbox(runner, owner_key="owner", **inbox), payments, clock


def test_pending_lists_every_waiting_call_oldest_first_by_owner(
    make_store: Callable[[ManualClock], Any],
) -> None:
    runner, inbox, payments, _ = setup(make_store)
    start(runner, "run-a1", "ACME", "alice")
    start(runner, "run-b1", "Globex", "bob")
    start(runner, "run-a2", "Initech", "alice")
    start(runner, "run-n", "Nobody Inc", None)

    alice = inbox.pending(owner="alice")
    assert [(p.run_id, p.owner) for p in alice] == [
        ("run-a1", "alice"),
        ("run-a2", "alice"),
        ("run-n", None),
    ]
    first = alice[0]
    assert (first.tool_name, first.call_id) == ("pay", "p1")
    assert first.arguments == {"payee": "ACME", "amount": 120}
    assert first.request.arguments == first.arguments
    assert first.asked_at is not None and first.expires_at is None
    assert first.age(inbox.now()) is not None
    assert [p.run_id for p in inbox.pending(owner="bob")] == ["run-b1", "run-n"]
    everyone = inbox.pending(all_owners=True)
    assert [p.run_id for p in everyone] == ["run-a1", "run-b1", "run-a2", "run-n"]
    # A second inbox on another store object of the same backend (another process) sees them.
    other = ApprovalInbox(
        Runner(runner.agent, checkpoint_store=make_store(ManualClock())), owner_key="owner"
    )
    assert [p.run_id for p in other.pending(all_owners=True)] == [p.run_id for p in everyone]
    assert payments.paid == []


def test_approve_resumes_the_run_once_and_records_who_decided(
    make_store: Callable[[ManualClock], Any],
) -> None:
    runner, inbox, payments, _ = setup(make_store)
    start(runner, "run-1", "ACME", "alice")
    [waiting] = inbox.pending(owner="alice")

    decided = inbox.decide(waiting.run_id, waiting.interrupt_id, Approve(), by="bob", owner="alice")
    assert decided.run is not None
    assert decided.run.result().text == "model saw: paid 120 to ACME"
    assert payments.paid == [{"payee": "ACME", "amount": 120}]
    assert inbox.pending(owner="alice") == []

    [record] = inbox.records()
    assert record == decided.record
    assert (record.run_id, record.interrupt_id, record.action) == (
        "run-1",
        waiting.interrupt_id,
        "approved",
    )
    assert (record.decided_by, record.owner, record.tool_name) == ("bob", "alice", "pay")
    assert record.arguments == record.new_arguments == {"payee": "ACME", "amount": 120}
    assert inbox.records("run-1") == [record] and inbox.records("run-2") == []

    with pytest.raises(ApprovalDecidedError, match="approved by 'bob'") as second:
        inbox.decide(waiting.run_id, waiting.interrupt_id, Reject("no"), by="carol", owner="alice")
    assert second.value.record == record
    assert payments.paid == [{"payee": "ACME", "amount": 120}]


def test_edit_runs_the_call_with_the_new_arguments_and_logs_both(
    make_store: Callable[[ManualClock], Any],
) -> None:
    runner, inbox, payments, _ = setup(make_store)
    start(runner, "run-1", "ACME", None)
    [waiting] = inbox.pending()
    decided = inbox.decide(
        "run-1", waiting.interrupt_id, Approve(arguments={"payee": "ACME", "amount": 100}), by="ops"
    )
    assert decided.run is not None and decided.run.result().text == "model saw: paid 100 to ACME"
    assert payments.paid == [{"payee": "ACME", "amount": 100}]
    assert decided.record.action == "edited"
    assert decided.record.arguments == {"payee": "ACME", "amount": 120}
    assert decided.record.new_arguments == {"payee": "ACME", "amount": 100}


def test_reject_tells_the_model_why_and_runs_nothing(
    make_store: Callable[[ManualClock], Any],
) -> None:
    runner, inbox, payments, _ = setup(make_store)
    start(runner, "run-1", "ACME", None)
    [waiting] = inbox.pending()
    decided = inbox.decide("run-1", waiting.interrupt_id, Reject("over budget"), by="ops")
    assert decided.run is not None
    assert "Reason: over budget" in decided.run.result().text
    assert payments.paid == []
    assert (decided.record.action, decided.record.reason) == ("rejected", "over budget")
    assert decided.record.new_arguments is None


def test_another_owner_cannot_decide_and_is_told_not_found(
    make_store: Callable[[ManualClock], Any],
) -> None:
    runner, inbox, payments, _ = setup(make_store)
    start(runner, "run-1", "ACME", "alice")
    [waiting] = inbox.pending(owner="alice")
    for owner in ("mallory", None):
        with pytest.raises(ApprovalOwnerError) as refused:
            inbox.decide("run-1", waiting.interrupt_id, Approve(), by="mallory", owner=owner)
        assert isinstance(refused.value, ApprovalNotFoundError)
    with pytest.raises(ApprovalNotFoundError):
        inbox.decide("run-1", "no-such-interrupt", Approve(), by="alice", owner="alice")
    with pytest.raises(ApprovalNotFoundError):
        inbox.decide("no-such-run", waiting.interrupt_id, Approve(), by="alice", owner="alice")
    assert inbox.records() == [] and payments.paid == []
    decided = inbox.decide("run-1", waiting.interrupt_id, True, by="alice", owner="alice")
    assert decided.run is not None and decided.run.result().text.startswith("model saw: paid")


def race(
    inboxes: list[ApprovalInbox], run_id: str, interrupt_id: str
) -> list[Decided | ApprovalDecidedError]:
    """Each inbox decides the request in its own thread, all released at once."""
    barrier = threading.Barrier(len(inboxes))
    outcomes: dict[int, Decided | ApprovalDecidedError] = {}

    def decide(index: int) -> None:
        barrier.wait(timeout=30)
        try:
            outcomes[index] = inboxes[index].decide(
                run_id, interrupt_id, Approve(), by=f"operator-{index}"
            )
        except ApprovalDecidedError as error:
            outcomes[index] = error

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(len(inboxes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert len(outcomes) == len(inboxes)
    return list(outcomes.values())


@pytest.mark.parametrize("kind", ["sqlite", "redis", "memory"])
def test_operators_racing_to_decide_get_one_winner_and_the_rest_are_told_who(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """N operators, each with its own store connection, decide one request at once; repeated."""
    operators, rounds = 6, 4
    url = request.getfixturevalue("redis_url") if kind == "redis" else ""
    shared = InMemoryCheckPointStore()
    stores: list[Any] = []

    def store() -> Any:
        if kind == "memory":
            return shared
        made: Any = (
            SQLiteCheckPointStore(tmp_path / "race.db")
            if kind == "sqlite"
            else RedisCheckPointStore(url, prefix=f"race:{kind}:")
        )
        stores.append(made)
        return made

    payments = Payments()
    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[payments.tool])
    inboxes = [ApprovalInbox(Runner(agent, checkpoint_store=store())) for _ in range(operators)]
    runner = Runner(agent, checkpoint_store=store())
    try:
        for round_ in range(rounds):
            run_id = f"race-{round_}"
            start(runner, run_id, f"payee-{round_}", None)
            [waiting] = [p for p in inboxes[0].pending() if p.run_id == run_id]
            outcomes = race(inboxes, run_id, waiting.interrupt_id)
            winners = [o for o in outcomes if isinstance(o, Decided)]
            losers = [o for o in outcomes if isinstance(o, ApprovalDecidedError)]
            assert len(winners) == 1 and len(losers) == operators - 1, outcomes
            [winner] = winners
            assert winner.run is not None
            assert winner.run.result().text == f"model saw: paid 120 to payee-{round_}"
            for loser in losers:
                assert loser.record == winner.record  # told who won
                assert winner.record.decided_by in str(loser)
            assert [r.decided_by for r in inboxes[0].records(run_id)] == [winner.record.decided_by]
        assert [p["payee"] for p in payments.paid] == [f"payee-{i}" for i in range(rounds)]
    finally:
        for made in stores:
            made.close()


def test_a_decision_after_expiry_is_refused_and_the_run_is_told(
    make_store: Callable[[ManualClock], Any],
) -> None:
    runner, inbox, payments, clock = setup(make_store, expires_after=600)
    start(runner, "run-1", "ACME", "alice")
    [waiting] = inbox.pending(owner="alice")
    assert waiting.asked_at is not None and waiting.expires_at == waiting.asked_at + 600
    clock.advance(601)
    with pytest.raises(ApprovalExpiredError, match="expired") as expired:
        inbox.decide("run-1", waiting.interrupt_id, Approve(), by="bob", owner="alice")
    decided = expired.value.decided
    assert decided.run is not None
    assert "the approval expired (no decision within 600 s)" in decided.run.result().text
    assert payments.paid == []
    assert (decided.record.action, decided.record.decided_by) == ("expired", "bob")
    assert inbox.records() == [decided.record]
    with pytest.raises(ApprovalDecidedError, match="expired by 'bob'"):
        inbox.decide("run-1", waiting.interrupt_id, Approve(), by="bob", owner="alice")


def test_expire_rejects_every_request_past_its_time(
    make_store: Callable[[ManualClock], Any],
) -> None:
    runner, inbox, payments, clock = setup(make_store, expires_after=600)
    start(runner, "old", "ACME", "alice")
    start(runner, "older", "Globex", "bob")
    clock.advance(400)
    assert inbox.expire() == []
    assert len(inbox.pending(all_owners=True)) == 2
    clock.advance(250)
    done = inbox.expire()
    assert sorted(d.record.run_id for d in done) == ["old", "older"]
    for decided in done:
        assert decided.record.decided_by == "expiry" and decided.record.action == "expired"
        assert decided.run is not None and "expired" in decided.run.result().text
    assert inbox.pending(all_owners=True) == [] and inbox.expire() == []
    assert payments.paid == []


def test_local_runs_resume_the_decided_run_in_their_own_thread(tmp_path: Path) -> None:
    payments = Payments()
    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[payments.tool])
    store = SQLiteCheckPointStore(tmp_path / "runs.db")
    runner = Runner(agent, checkpoint_store=store)
    with LocalRuns({"payer": runner}) as runs:
        run_id = runs.submit("payer", "pay ACME", owner="alice", session_values={"owner": "alice"})
        entries = list(runs.events(run_id, owner="alice"))
        assert entries[-1].data["status"] == "interrupted"
        inbox = ApprovalInbox(runner, owner_key="owner", runs=runs)
        [waiting] = inbox.pending(owner="alice")
        decided = inbox.decide(run_id, waiting.interrupt_id, True, by="bob", owner="alice")
        assert decided.run is None and decided.after == entries[-1].id
        [end] = [e for e in runs.events(run_id, decided.after, owner="alice") if e.kind == "end"]
        assert end.data["status"] == "completed"
        assert end.data["answer"] == "model saw: paid 120 to ACME"
    assert payments.paid == [{"payee": "ACME", "amount": 120}]
    store.close()


def test_with_local_runs_the_backend_checks_its_own_owner_too(tmp_path: Path) -> None:
    """Without an owner session value the inbox sees a run of nobody; LocalRuns still refuses
    a decision by another owner, and nothing is recorded for it."""
    payments = Payments()
    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[payments.tool])
    store = SQLiteCheckPointStore(tmp_path / "runs.db")
    runner = Runner(agent, checkpoint_store=store)
    with LocalRuns({"payer": runner}) as runs:
        run_id = runs.submit("payer", "pay ACME", owner="alice")
        assert list(runs.events(run_id, owner="alice"))[-1].data["status"] == "interrupted"
        inbox = ApprovalInbox(runner, runs=runs)
        [waiting] = inbox.pending()
        with pytest.raises(RunOwnerError):
            inbox.decide(run_id, waiting.interrupt_id, True, by="mallory", owner="mallory")
        assert inbox.records() == [] and inbox.pending() == [waiting]
        decided = inbox.decide(run_id, waiting.interrupt_id, True, by="alice", owner="alice")
        [end] = [e for e in runs.events(run_id, decided.after, owner="alice") if e.kind == "end"]
        assert end.data["status"] == "completed"
    assert payments.paid == [{"payee": "ACME", "amount": 120}]
    store.close()


def test_a_run_that_asks_again_gets_a_new_request_and_the_old_one_stays_decided(
    make_store: Callable[[ManualClock], Any],
) -> None:
    clock = ManualClock()
    payments = Payments()

    def twice(messages: list[Message]) -> Message | str:
        paid = [m for m in messages if m.role == Role.TOOL]
        if len(paid) < 2:
            payee = ["ACME", "Globex"][len(paid)]
            return calls_message(call("pay", {"payee": payee, "amount": 5}, id=f"p{len(paid)}"))
        return "both paid"

    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(twice), tools=[payments.tool])
    runner = Runner(agent, checkpoint_store=make_store(clock))
    inbox = ApprovalInbox(runner)
    start(runner, "run-1", "two payees", None)
    [first] = inbox.pending()
    decided = inbox.decide("run-1", first.interrupt_id, True, by="ops")
    assert decided.run is not None
    assert decided.run.result().interrupt is not None  # the second call asks in turn
    [second] = inbox.pending()
    assert second.run_id == "run-1" and second.interrupt_id != first.interrupt_id
    assert second.arguments == {"payee": "Globex", "amount": 5}
    with pytest.raises(ApprovalDecidedError):
        inbox.decide("run-1", first.interrupt_id, True, by="late")
    clock.advance(1)  # the log is in the order of decision times
    again = inbox.decide("run-1", second.interrupt_id, True, by="ops")
    assert again.run is not None and again.run.result().text == "both paid"
    assert [p["payee"] for p in payments.paid] == ["ACME", "Globex"]
    assert [r.interrupt_id for r in inbox.records("run-1")] == [
        first.interrupt_id,
        second.interrupt_id,
    ]


def test_audit_records_are_signed_and_a_forged_one_is_refused(tmp_path: Path) -> None:
    store = FileCheckPointStore(tmp_path / "checkpoints")
    payments = Payments()
    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[payments.tool])
    runner = Runner(agent, checkpoint_store=store)
    inbox = ApprovalInbox(runner)
    start(runner, "run-1", "ACME", None)
    [waiting] = inbox.pending()
    decided = inbox.decide("run-1", waiting.interrupt_id, Reject("no"), by="ops")
    assert decided.run is not None
    decided.run.result()
    record_id = f"{AUDIT_PREFIX}run-1/{waiting.interrupt_id}"
    data = store.get(record_id)
    assert data is not None
    store.set(record_id, data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(CheckpointError):
        inbox.records()


def test_an_audit_log_in_its_own_store(make_store: Callable[[ManualClock], Any]) -> None:
    audit = InMemoryCheckPointStore()
    runner, inbox, _, _ = setup(make_store, audit_store=audit)
    start(runner, "run-1", "ACME", None)
    [waiting] = inbox.pending()
    decided = inbox.decide("run-1", waiting.interrupt_id, False, by="ops")
    assert decided.run is not None
    decided.run.result()
    assert audit.checkpoint_ids() == [f"{AUDIT_PREFIX}run-1/{waiting.interrupt_id}"]
    assert inbox.records() == [decided.record]


CRASHING_DECIDER = """
import os, sys
from agentkit import ChatModelAgent, Runner
from agentkit.approvals import ApprovalInbox
from agentkit.checkpoint import SQLiteCheckPointStore
from agentkit.models import ScriptedChatModel
from tests.test_approvals_inbox import Payments, reply


class DiesOnResume:
    def resume(self, run_id, targets=None, *, owner):
        os._exit(17)  # killed between recording the decision and resuming the run


agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[Payments().tool])
runner = Runner(agent, checkpoint_store=SQLiteCheckPointStore(sys.argv[1]))
inbox = ApprovalInbox(runner, runs=DiesOnResume())
[waiting] = inbox.pending()
inbox.decide(waiting.run_id, waiting.interrupt_id, True, by="crashed-operator")
"""


def test_recover_resumes_a_run_whose_decider_died_after_recording(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    payments = Payments()
    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[payments.tool])
    clock = ManualClock()
    store = SQLiteCheckPointStore(path, clock=clock)
    runner = Runner(agent, checkpoint_store=store)
    inbox = ApprovalInbox(runner)
    start(runner, "run-1", "ACME", None)
    assert inbox.recover() == []  # nothing recorded yet
    child = subprocess.run(
        [sys.executable, "-c", CRASHING_DECIDER, str(path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=120,
    )
    assert child.returncode == 17, child.stderr.decode()
    [record] = inbox.records()
    assert record.decided_by == "crashed-operator"
    assert inbox.pending() == []  # decided, though the run still waits
    assert inbox.recover() == []  # the dead decider's lease on the record holds a while
    clock.advance(600)  # past the lease the child took (60 s from its own, later, start)
    [done] = inbox.recover()
    assert done.record == record and done.run is not None
    assert done.run.result().text == "model saw: paid 120 to ACME"
    assert payments.paid == [{"payee": "ACME", "amount": 120}]
    assert inbox.recover() == []  # applied once
    store.close()


def test_an_agent_queue_resumes_the_decided_run_on_its_worker(
    redis_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Celery runs (eager: the task runs at once, in this process) with the real Redis side."""
    celery = pytest.importorskip("celery")
    from agentkit.integrations.celery import AgentQueue

    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "approval-inbox-tests-key-0123456789abcdef")
    app = celery.Celery("inbox", broker="memory://")
    app.conf.task_always_eager = True
    tag = uuid.uuid4().hex[:6]
    prefix = f"inbox-{tag}:"
    queue = AgentQueue(
        app,
        redis_url=redis_url,
        prefix=prefix,
        checkpoint_prefix=f"inbox-checkpoints-{tag}:",  # this test's runs only
        task_name=f"{prefix}run",
    )
    payments = Payments()
    queue.register(
        "payer",
        lambda: ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[payments.tool]),
        enable_streaming=False,
    )
    run_ids = [
        queue.submit("payer", f"pay {payee}", owner=owner, session_values={"owner": owner})
        for payee, owner in [("ACME", "alice"), ("Globex", "bob")]
    ]
    for run_id, owner in zip(run_ids, ["alice", "bob"], strict=True):
        with queue.events(run_id, owner=owner) as stream:
            assert list(stream)[-1].data["status"] == "interrupted"
    inbox = ApprovalInbox(queue.runner("payer"), owner_key="owner", runs=queue)
    [waiting] = inbox.pending(owner="alice")
    assert waiting.run_id == run_ids[0]
    with pytest.raises(ApprovalOwnerError):
        inbox.decide(run_ids[0], waiting.interrupt_id, True, by="bob", owner="bob")
    decided = inbox.decide(run_ids[0], waiting.interrupt_id, True, by="alice", owner="alice")
    assert decided.run is None and decided.after is not None
    with queue.events(run_ids[0], decided.after, owner="alice") as stream:
        [end] = [entry for entry in stream if entry.kind == "end"]
    assert end.data["status"] == "completed"
    assert end.data["answer"] == "model saw: paid 120 to ACME"
    assert payments.paid == [{"payee": "ACME", "amount": 120}]
    assert [p.run_id for p in inbox.pending(all_owners=True)] == [run_ids[1]]
    with pytest.raises(ApprovalDecidedError, match="approved by 'alice'"):
        inbox.decide(run_ids[0], waiting.interrupt_id, False, by="alice", owner="alice")


@pytest.mark.parametrize(
    ("decision", "paid", "text"),
    [
        ({"decision": "approve"}, [120], "model saw: paid 120 to ACME"),
        ({"decision": "edit", "arguments": {"payee": "ACME", "amount": 7}}, [7], "paid 7 to ACME"),
        ({"decision": "reject"}, [], "The user rejected this call of pay"),
        ({"decision": "reject", "reason": "not today"}, [], "Reason: not today"),
    ],
)
def test_a_decision_as_json_means_the_same_as_approve_and_reject(
    decision: dict[str, Any], paid: list[int], text: str
) -> None:
    """The form a decision takes to cross to a Celery worker (resume data must be JSON)."""
    payments = Payments()
    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[payments.tool])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    result = runner.invoke("pay ACME", with_checkpoint_id("run-1"))
    assert result.interrupt is not None
    [point] = result.interrupt.contexts
    resumed = runner.resume("run-1", targets={point.id: decision}).result()
    assert text in resumed.text
    assert [p["amount"] for p in payments.paid] == paid


@pytest.mark.parametrize(
    "decision",
    [
        {"decision": "yes"},
        {"decision": "approve", "reason": "x"},
        {"decision": "edit"},
        {"decision": "reject", "arguments": {}},
    ],
)
def test_a_json_decision_that_means_nothing_is_refused(decision: dict[str, Any]) -> None:
    payments = Payments()
    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[payments.tool])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    result = runner.invoke("pay ACME", with_checkpoint_id("run-1"))
    assert result.interrupt is not None
    [point] = result.interrupt.contexts
    with pytest.raises(ToolError, match="resume data for an approval") as refused:
        runner.resume("run-1", targets={point.id: decision}).result()
    assert isinstance(refused.value.__cause__, ResumeError)
    assert payments.paid == []


class BareStore:
    """A store with the three methods only: it cannot list its ids."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def get(self, checkpoint_id: str) -> bytes | None:
        return self.data.get(checkpoint_id)

    def set(self, checkpoint_id: str, data: bytes) -> None:
        self.data[checkpoint_id] = data

    def delete(self, checkpoint_id: str) -> None:
        self.data.pop(checkpoint_id, None)


def test_bad_settings_and_decisions_are_refused_with_what_to_do() -> None:
    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[Payments().tool])
    with pytest.raises(ValueError, match="checkpoint_store="):
        ApprovalInbox(Runner(agent))
    with pytest.raises(ValueError, match="checkpoint_ids"):
        ApprovalInbox(Runner(agent, checkpoint_store=BareStore()))
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    with pytest.raises(ValueError, match="checkpoint_ids"):
        ApprovalInbox(runner, audit_store=BareStore())
    bad: list[dict[str, Any]] = [{"expires_after": 0}, {"expires_after": -5}, {"wait": -1}]
    for settings in bad:
        with pytest.raises(ValueError, match="seconds"):
            ApprovalInbox(runner, **settings)
    inbox = ApprovalInbox(runner)
    start(runner, "run-1", "ACME", None)
    [waiting] = inbox.pending()
    with pytest.raises(ValueError, match="by="):
        inbox.decide("run-1", waiting.interrupt_id, True, by="")
    with pytest.raises(TypeError, match="Approve"):
        inbox.decide("run-1", waiting.interrupt_id, "yes", by="ops")  # type: ignore[arg-type]
    assert inbox.records() == [] and inbox.pending() == [waiting]


def test_in_a_notebook_the_inbox_shows_its_pending_approvals_escaped() -> None:
    payments = Payments()
    agent = ChatModelAgent("payer", "pays", ScriptedChatModel(reply), tools=[payments.tool])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore(clock=ManualClock()))
    inbox = ApprovalInbox(runner, owner_key="owner", expires_after=600)
    assert "0 pending approval(s)" in inbox._repr_html_()
    start(runner, "run-1", "<script>alert(1)</script>", "alice")
    start(runner, "run-2", "Globex", None)
    shown = inbox._repr_html_()
    assert "2 pending approval(s)" in shown
    assert "<td>run-1</td><td>alice</td><td>pay</td>" in shown
    assert "<script>" not in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown
    assert "<td>run-2</td><td></td><td>pay</td>" in shown
    assert "expired" not in shown
