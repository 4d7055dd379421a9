"""The Celery integration against someone who can write the broker or Redis, with real workers.

The attacks of issue 25 (N2, N10, N11, N12, N13), each as a test: task messages forged,
tampered with, replayed and expired, put on the broker by the test; run records forged,
copied and rolled back in Redis; a forged cancel request; another owner's calls; run ids that
collide with the Redis key scheme; event ids that Redis refuses; a trimmed stream. Messages
are held back by sending them to a queue no worker consumes (see celery_broker.py).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("celery")
pytest.importorskip("redis")

from agentkit.integrations.runs import (
    EventIdError,
    RunIdError,
    RunIntegrityError,
    RunNotFoundError,
    RunOwnerError,
)
from agentkit.testing import Clock
from tests import celery_broker as broker
from tests import celery_support as support
from tests.celery_support import GUARD, OWNER, read_all
from tests.redis_server import redis_url  # noqa: F401

# The shared fixtures, by the names the tests ask for.
env, app_module, client, workers = support.env, support.app_module, support.client, support.workers


def hold() -> str:
    """A queue no worker consumes: messages sent there wait for the test."""
    return f"hold-{uuid.uuid4().hex[:8]}"


def result(app_module: Any, task_id: str) -> dict[str, Any]:
    outcome: dict[str, Any] = app_module.app.AsyncResult(task_id).get(timeout=GUARD)
    return outcome


def interrupted_payment(app_module: Any, payee: str) -> tuple[str, str]:
    """A run of ``payer`` stopped at its approval: (run id, interrupt id)."""
    queue = app_module.queue
    run_id = queue.submit("payer", payee, owner=OWNER, queue="a")
    end = read_all(queue, run_id)[-1]
    assert end.data["status"] == "interrupted"
    return run_id, end.data["interrupts"][0]


def sealed_with(key: bytes, body: dict[str, Any]) -> str:
    """A task message sealed with ``key`` (an attacker's own key)."""
    from agentkit.integrations._signing import Sealer

    return Sealer(lambda: [key], "agentkit:run:\0db=0").seal("task", body)


def test_forged_resume_messages_on_the_broker_pay_nobody(
    app_module: Any, workers: dict[str, Any], client: Any
) -> None:
    queue = app_module.queue
    payee = f"MALLORY-{uuid.uuid4().hex[:6]}"
    run_id, interrupt_id = interrupted_payment(app_module, payee)
    # The message format of earlier releases: plain JSON arguments, trusted as they came.
    old_style = queue.task.apply_async(
        args=[run_id, "payer", "resume", {"targets": {interrupt_id: True}}], queue="a"
    )
    refused = result(app_module, old_style.id)
    assert refused["status"] == "refused"
    assert "not a sealed agentkit message" in refused["error"]
    # A message in the new format, sealed with a key the attacker made up.
    body = {
        "run_id": run_id, "agent": "payer", "kind": "resume", "nonce": "n", "stops": 1,
        "payload": {"targets": {interrupt_id: True}}, "expires": time.time() + 60,
    }
    forged = queue.task.apply_async(args=[sealed_with(b"attacker-key-0123456789", body)], queue="a")
    assert "fails verification" in result(app_module, forged.id)["error"]
    assert workers["a"].log_has("refused a task message: the task fails verification")
    # Nothing ran and nothing changed: the run still waits for its human.
    assert client.get(f"test:ran:pay:{payee}") is None
    assert queue.status(run_id, owner=OWNER)["status"] == "interrupted"
    assert queue.interrupts(run_id, owner=OWNER) == [interrupt_id]


def test_a_tampered_message_runs_nothing_and_the_real_one_still_works(
    app_module: Any, workers: dict[str, Any], client: Any
) -> None:
    queue = app_module.queue
    payee = f"ACME-{uuid.uuid4().hex[:6]}"
    run_id, interrupt_id = interrupted_payment(app_module, payee)
    lane = hold()
    queue.resume(run_id, {interrupt_id: False}, owner=OWNER, queue=lane)  # the human rejects
    message = broker.take(client, lane)
    sealed = json.loads(broker.args_of(message)[0])
    body = json.loads(sealed["body"])
    for change in ({"payload": {"targets": {interrupt_id: True}}}, {"run_id": "another-run"}):
        tampered = {"body": json.dumps({**body, **change}), "mac": sealed["mac"]}
        task_id = broker.put(client, "a", message, args=[json.dumps(tampered)])
        refused = result(app_module, task_id)
        assert refused["status"] == "refused" and "fails verification" in refused["error"]
    assert client.get(f"test:ran:pay:{payee}") is None
    assert queue.status(run_id, owner=OWNER)["status"] == "queued"  # as the human left it
    # The human's own message goes through: the payment is declined.
    task_id = broker.put(client, "a", message)
    assert result(app_module, task_id)["answer"] == f"Done: declined {payee}."
    assert int(client.get(f"test:ran:pay:{payee}")) == 1  # the tool ran once, and declined


def test_a_replayed_approval_does_not_approve_the_next_interrupt(
    app_module: Any, workers: dict[str, Any], client: Any
) -> None:
    queue = app_module.queue
    first, second = f"ACME-{uuid.uuid4().hex[:6]}", f"MALLORY-{uuid.uuid4().hex[:6]}"
    run_id = queue.submit("payer2", f"{first},{second}", owner=OWNER, queue="a")
    stop = read_all(queue, run_id)[-1]
    assert stop.data["prompts"][0]["info"] == f"Pay {first}?"
    lane = hold()
    queue.resume(run_id, {stop.data["interrupts"][0]: True}, owner=OWNER, queue=lane)
    approval = broker.take(client, lane)
    broker.put(client, "a", approval)
    next_stop = read_all(queue, run_id, stop.id)[-1]
    assert next_stop.data["status"] == "interrupted"
    assert next_stop.data["prompts"][0]["info"] == f"Pay {second}?"  # the same call id, call_1
    assert int(client.get(f"test:ran:pay:{first}")) == 1
    # Whoever kept the first approval puts it on the broker again: it was made for the
    # first stop, the run has stopped again since.
    replayed = result(app_module, broker.put(client, "b", approval))
    assert replayed == {"status": "duplicate", "error": "the run is interrupted"}
    assert client.get(f"test:ran:pay:{second}") is None
    assert queue.interrupts(run_id, owner=OWNER) == next_stop.data["interrupts"]
    # The human rejects the second payment; the old approval, replayed before that message
    # arrives, is not the run's latest message any more.
    queue.resume(run_id, {next_stop.data["interrupts"][0]: False}, owner=OWNER, queue=lane)
    rejection = broker.take(client, lane)
    replayed = result(app_module, broker.put(client, "b", approval))
    assert replayed["status"] == "refused"
    assert "not the latest one sent for it" in replayed["error"]
    assert workers["b"].log_has(f"the message for run {run_id!r} is not the latest one")
    assert client.get(f"test:ran:pay:{second}") is None
    done = result(app_module, broker.put(client, "b", rejection))
    assert done["answer"] == f"Done: paid {first}, declined {second}."


class HourAgo(Clock):
    """The system's clock, an hour back: the times a web process wrote an hour ago."""

    __slots__ = ()

    def time(self) -> float:
        return time.time() - 3600.0


def test_an_expired_message_runs_nothing_and_its_run_fails_saying_why(
    app_module: Any, workers: dict[str, Any], client: Any, env: dict[str, str]
) -> None:
    from celery import Celery

    from agentkit.integrations.celery import AgentQueue

    # A message sent an hour ago, valid for a minute: its web process stamped it on a clock
    # an hour back. The workers (other processes) read the system clock, as in production,
    # so the test waits for no expiry: the message is stale when it arrives.
    app = Celery("impatient", broker=env["REDIS_URL"])
    impatient = AgentQueue(app, message_ttl=60.0, clock=HourAgo())
    lane = hold()
    run_id = impatient.submit("weather", "Lima", owner=OWNER, queue=lane)
    message = broker.take(client, lane)
    expires = json.loads(json.loads(broker.args_of(message)[0])["body"])["expires"]
    assert expires < time.time() - 3000  # stamped on the sender's clock
    failed = result(app_module, broker.put(client, "a", message))
    assert failed["status"] == "failed"
    assert "waited in the queue longer than message_ttl" in failed["error"]["message"]
    assert client.get("test:ran:weather:Lima") is None
    assert read_all(app_module.queue, run_id)[-1].data == failed
    # Delivered again later, it changes nothing more.
    again = result(app_module, broker.put(client, "a", message))
    assert again["status"] == "refused" and "expired" in again["error"]


def test_forged_and_copied_run_records_in_redis_are_refused(
    app_module: Any, workers: dict[str, Any], client: Any
) -> None:
    queue = app_module.queue
    payee = f"MALLORY-{uuid.uuid4().hex[:6]}"
    run_id, interrupt_id = interrupted_payment(app_module, payee)
    other_id, _ = interrupted_payment(app_module, f"ACME-{uuid.uuid4().hex[:6]}")
    lane = hold()
    queue.resume(run_id, {interrupt_id: False}, owner=OWNER, queue=lane)  # a real rejection
    message = broker.take(client, lane)
    key = f"agentkit:run:{run_id}"
    sealed = json.loads(client.hget(key, "sealed"))
    record = json.loads(sealed["body"])
    forgeries = {
        # the layout of earlier releases, written by hand
        "without a seal": {"status": "queued", "agent": "payer"},
        # the run's sealed record, altered (another owner, an extra stop)
        "fails verification": {
            "sealed": json.dumps(
                {"body": json.dumps({**record, "owner": "mallory", "stops": 5}), "mac": sealed["mac"]}
            )
        },
        # another run's record, copied whole
        f"the record of run {other_id!r}": {"sealed": client.hget(f"agentkit:run:{other_id}", "sealed")},
    }
    for words, fields in forgeries.items():
        client.delete(key)
        client.hset(key, mapping=fields)
        calls: list[Callable[[], object]] = [
            lambda: queue.status(run_id, owner=OWNER),
            lambda: queue.cancel(run_id, owner=OWNER),
            lambda: queue.resume(run_id, {interrupt_id: True}, owner=OWNER, queue=hold()),
        ]
        for call in calls:
            with pytest.raises(RunIntegrityError, match=words):
                call()
        refused = result(app_module, broker.put(client, "a", message))
        assert refused["status"] == "refused" and words in refused["error"]
    assert client.get(f"test:ran:pay:{payee}") is None


def test_a_rolled_back_record_and_a_replayed_approval_pay_once(
    app_module: Any, workers: dict[str, Any], client: Any
) -> None:
    queue = app_module.queue
    payee = f"ACME-{uuid.uuid4().hex[:6]}"
    run_id, interrupt_id = interrupted_payment(app_module, payee)
    lane = hold()
    queue.resume(run_id, {interrupt_id: True}, owner=OWNER, queue=lane)
    approved_record = client.hget(f"agentkit:run:{run_id}", "sealed")  # a snapshot of Redis
    approval = broker.take(client, lane)
    assert result(app_module, broker.put(client, "a", approval))["status"] == "completed"
    assert int(client.get(f"test:ran:pay:{payee}")) == 1
    # Someone with write access to Redis puts the old (validly sealed) record back and
    # replays the approval: the record matches the message, but the run's checkpoint was
    # consumed when it completed, so nothing runs again.
    client.hset(f"agentkit:run:{run_id}", "sealed", approved_record)
    replayed = result(app_module, broker.put(client, "a", approval))
    assert replayed["status"] == "duplicate"
    assert int(client.get(f"test:ran:pay:{payee}")) == 1


def test_a_forged_cancel_request_is_ignored(
    app_module: Any, workers: dict[str, Any], client: Any
) -> None:
    queue = app_module.queue
    tag = uuid.uuid4().hex
    lane = hold()
    run_id = queue.submit("slow", tag, owner=OWNER, queue=lane)
    # Before the run starts, someone writes a cancel request of the earlier format.
    client.set(f"agentkit:run:{run_id}:cancel", "immediate")
    broker.put(client, "a", broker.take(client, lane))
    assert client.blpop([f"test:started:{tag}"], timeout=GUARD) is not None
    assert workers["a"].log_has(f"ignored a cancel request for run {run_id!r}")
    client.rpush(f"test:gate:{tag}", "open")
    assert read_all(queue, run_id)[-1].data["status"] == "completed"


def test_another_owner_can_neither_read_nor_resume_nor_cancel(app_module: Any) -> None:
    queue = app_module.queue
    run_id = queue.submit("weather", "Quito", owner="alice", queue=hold())
    assert queue.has_run(run_id, owner="alice")
    assert not queue.has_run(run_id, owner="mallory") and not queue.has_run(run_id, owner=None)
    calls: list[Callable[[str | None], object]] = [
        lambda owner: queue.events(run_id, owner=owner),
        lambda owner: queue.status(run_id, owner=owner),
        lambda owner: queue.interrupts(run_id, owner=owner),
        lambda owner: queue.cancel(run_id, owner=owner),
        lambda owner: queue.resume(run_id, {}, owner=owner),
    ]
    for call in calls:
        for stranger in ("mallory", None):
            with pytest.raises(RunOwnerError, match="belongs to another owner"):
                call(stranger)
    assert queue.status(run_id, owner="alice")["status"] == "queued"
    assert queue.cancel(run_id, owner="alice") is True
    with pytest.raises(RunOwnerError, match="belongs to another owner"):
        queue.status(run_id)  # no owner given: an owned run is not for anyone


@pytest.mark.parametrize(
    "bad", ["X:cancel", "X:events", "", "a" * 129, "white space", "\ud800", "{tag}", "-x", "a/b"]
)
def test_run_ids_that_collide_with_the_key_scheme_are_refused(
    app_module: Any, client: Any, bad: str
) -> None:
    queue = app_module.queue
    with pytest.raises(RunIdError, match="is not valid"):
        queue.submit("weather", "Oslo", owner=OWNER, checkpoint_id=bad, queue=hold())
    with pytest.raises(ValueError):  # RunIdError is a ValueError
        queue.events(bad, owner=OWNER)


def test_a_run_named_x_stays_cancellable_whatever_else_is_submitted(app_module: Any) -> None:
    queue = app_module.queue
    run_id = f"order-{uuid.uuid4().hex[:8]}"
    queue.submit("weather", "Oslo", owner=OWNER, checkpoint_id=run_id, queue=hold())
    for suffix in (":cancel", ":events"):
        with pytest.raises(RunIdError):
            queue.submit("weather", "x", owner=OWNER, checkpoint_id=run_id + suffix, queue=hold())
    assert queue.cancel(run_id, owner=OWNER) is True  # no worker took it: cancelled at once
    assert [entry.kind for entry in queue.events(run_id, owner=OWNER, idle_timeout=0.1)] == [
        "run",
        "end",
    ]
    assert queue.status(run_id, owner=OWNER)["status"] == "cancelled"


BAD_EVENT_IDS = [
    "\u0661\u0662-\u0660",  # Arabic-Indic digits
    "\uff11-0",  # a fullwidth digit
    "18446744073709551616-0",  # 2**64
    "0-18446744073709551616",
    "9" * 5000,
    "1-2-3",
    "-1",
    "0x10",
    "1700000000000-0",  # a time-based id: not one this service hands out
]


@pytest.mark.parametrize("bad", BAD_EVENT_IDS)
def test_last_event_ids_redis_would_refuse_are_clear_errors_and_a_400(
    app_module: Any, bad: str
) -> None:
    from flask import Flask

    from agentkit.integrations.flask import run_events_response

    queue = app_module.queue
    run_id = queue.submit("weather", "Oslo", owner=OWNER, queue=hold())
    with pytest.raises(EventIdError, match="is not an event id"):
        queue.events(run_id, bad, owner=OWNER)
    app = Flask(__name__)

    @app.get("/events/<run_id>")
    def events(run_id: str) -> Any:
        return run_events_response(queue, run_id, owner=OWNER)

    web = app.test_client()
    response = web.get(f"/events/{run_id}", headers={"Last-Event-ID": bad})
    assert response.status_code == 400
    assert "is not an event id" in response.get_data(as_text=True)
    assert web.get("/events/nope").status_code == 404


def test_a_trimmed_stream_says_how_many_entries_a_reader_lost(
    app_module: Any, workers: dict[str, Any], client: Any
) -> None:
    small = app_module.small
    lane = hold()
    run_id = small.submit("chatty", "talk", owner=OWNER, queue=lane)
    early = read_early(small, run_id)
    assert result(app_module, broker.put(client, "a", broker.take(client, lane)))["status"] == "completed"
    entries = read_all(small, run_id)  # read after the run ended: the stream was trimmed
    total = int(entries[-1].id.split("-")[1])
    assert total > app_module.CHUNKS  # every chunk is an entry
    assert len(entries) < 200  # the stream kept about 20 (whole nodes of the Redis stream)
    gap = entries[0]
    assert gap.kind == "gap" and gap.data["reason"] == "trimmed"
    assert gap.id == f"0-{gap.data['lost']}"  # the id of the last entry lost
    assert int(entries[1].id.split("-")[1]) == gap.data["lost"] + 1
    assert gap.data["lost"] + len(entries) - 1 == total  # lost + kept = all
    # A reader that reconnects from an early id learns how many it missed in between.
    rest = read_all(small, run_id, early)
    assert rest[0].kind == "gap"
    assert rest[0].data["lost"] == int(rest[1].id.split("-")[1]) - int(early.split("-")[1]) - 1
    assert rest[1:] == entries[1:]


def read_early(small: Any, run_id: str) -> str:
    """The id of the run's first entry, read before the run starts (a reader that left)."""
    with small.events(run_id, owner=OWNER, idle_timeout=0.1) as stream:
        first = next(iter(stream))
    assert first.kind == "run" and first.id == "0-1"
    return str(first.id)


def test_a_run_whose_record_is_gone_is_not_found(app_module: Any, client: Any) -> None:
    queue = app_module.queue
    run_id = queue.submit("weather", "Oslo", owner=OWNER, queue=hold())
    client.delete(f"agentkit:run:{run_id}")
    with pytest.raises(RunNotFoundError):
        queue.status(run_id, owner=OWNER)


def test_signing_keys_rotate_and_a_key_with_its_newline_is_the_same_key(
    app_module: Any, env: dict[str, str]
) -> None:
    from celery import Celery

    from agentkit.integrations.celery import AgentQueue

    old_key, new_key = "old-key-0123456789abcdef", "new-key-0123456789abcdef"

    def web(keys: Any) -> AgentQueue:
        return AgentQueue(Celery(f"web-{uuid.uuid4().hex[:6]}", broker=env["REDIS_URL"]), signing_key=keys)

    before = web(old_key)
    run_id = before.submit("weather", "Oslo", owner=OWNER, queue=hold())
    assert web(old_key + "\n").status(run_id, owner=OWNER)["status"] == "queued"  # pasted
    during = web([new_key, old_key])  # the new key seals, the old one still opens
    assert during.status(run_id, owner=OWNER)["status"] == "queued"
    fresh = during.submit("weather", "Oslo", owner=OWNER, queue=hold())
    assert web([new_key]).status(fresh, owner=OWNER)["status"] == "queued"
    with pytest.raises(RunIntegrityError, match="fails verification"):
        before.status(fresh, owner=OWNER)  # sealed with the new key only
    with pytest.raises(RunIntegrityError, match="fails verification"):
        web([new_key]).status(run_id, owner=OWNER)  # the old key was retired
    for bad in ("short", [], [b"x" * 16, 42]):
        with pytest.raises((ValueError, TypeError), match="key"):
            web(bad)
