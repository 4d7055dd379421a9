"""Checkpoint keys can be rotated, pasted with a newline, and checkpoints stay in their Redis db.

* ``PickleSerializer(secret_key=[new, old])``: the first key signs, every key verifies, so
  checkpoints pending when the key changed still resume; ``AGENTKIT_CHECKPOINT_PREVIOUS_KEYS``
  does the same for the default serializer.
* ``AGENTKIT_CHECKPOINT_KEY`` and the key file are stripped of surrounding whitespace.
* The Redis store's namespace names its database as well as its prefix: a checkpoint copied to
  another database is refused with an error that says where it may be loaded.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from agentkit import ChatModelAgent, Runner, interrupt, tool, with_checkpoint_id
from agentkit.checkpoint import (
    FileCheckPointStore,
    PickleSerializer,
    RedisCheckPointStore,
    legacy_namespaces_of,
    namespace_of,
)
from agentkit.checkpoint._binding import dumps_for_store, loads_for_store
from agentkit.errors import CheckpointError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

NEW = b"n" * 32
OLD = b"o" * 32
OLDER = b"p" * 32


@pytest.fixture
def no_env_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.delenv("AGENTKIT_CHECKPOINT_KEY", raising=False)
    monkeypatch.delenv("AGENTKIT_CHECKPOINT_PREVIOUS_KEYS", raising=False)
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY_FILE", str(tmp_path / "cfg" / "checkpoint.key"))
    return monkeypatch


# -- a list of keys ----------------------------------------------------------------------------


def test_the_first_key_signs_and_every_key_verifies() -> None:
    by_old = PickleSerializer(OLD).dumps({"pending": 1}, checkpoint_id="run")
    by_older = PickleSerializer(OLDER).dumps({"pending": 2}, checkpoint_id="run")
    rotated = PickleSerializer([NEW, OLD, OLDER])
    assert rotated.loads(by_old, checkpoint_id="run") == {"pending": 1}
    assert rotated.loads(by_older, checkpoint_id="run") == {"pending": 2}
    fresh = rotated.dumps({"pending": 3}, checkpoint_id="run")
    assert PickleSerializer(NEW).loads(fresh, checkpoint_id="run") == {"pending": 3}
    with pytest.raises(CheckpointError, match="signed with another key"):
        PickleSerializer(OLD).loads(fresh, checkpoint_id="run")


def test_an_old_key_still_binds_the_id_and_the_store() -> None:
    data = PickleSerializer(OLD).dumps([1], checkpoint_id="a", namespace="redis:x:")
    rotated = PickleSerializer((NEW, OLD))
    with pytest.raises(CheckpointError, match="saved under another checkpoint id"):
        rotated.loads(data, checkpoint_id="b", namespace="redis:x:")
    with pytest.raises(CheckpointError, match="in another store"):
        rotated.loads(data, checkpoint_id="a", namespace="redis:y:")
    tampered = data[:-1] + bytes([data[-1] ^ 1])
    with pytest.raises(CheckpointError, match="failed its signature check"):
        rotated.loads(tampered, checkpoint_id="a", namespace="redis:x:")


def test_a_key_nobody_listed_is_refused_with_how_to_rotate() -> None:
    data = PickleSerializer(OLDER).dumps([1], checkpoint_id="x")
    with pytest.raises(CheckpointError, match=r"any of this serializer's 2 keys.*secret_key=\[new, old\]"):
        PickleSerializer([NEW, OLD]).loads(data, checkpoint_id="x")


@pytest.mark.parametrize(
    ("keys", "error", "message"),
    [
        ([], ValueError, "no keys"),
        ([NEW, "a str key of 16+ chars"], TypeError, r"secret_key\[1\] must be bytes"),
        ([NEW, b"short"], ValueError, r"secret_key\[1\] is 5 bytes long"),
        ("a str key of 16+ chars", TypeError, "not str"),
    ],
)
def test_a_bad_key_list_is_refused(keys: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        PickleSerializer(keys)


def test_a_pending_run_resumes_after_the_key_was_rotated(tmp_path: Path) -> None:
    @tool
    def pay(amount: int) -> str:
        """Pay after approval."""
        return f"paid {amount}" if interrupt("approve?") else "declined"

    def runner(serializer: PickleSerializer) -> Runner:
        # each process has its own model: the one that resumes goes on from the tool result
        model = ScriptedChatModel([calls_message(call("pay", {"amount": 5}, id="p1")), "done"])
        if serializer is not first:
            model = ScriptedChatModel(["done"])
        agent = ChatModelAgent("Payer", "pays", model, tools=[pay])
        store = FileCheckPointStore(tmp_path / "checkpoints")
        return Runner(agent, checkpoint_store=store, serializer=serializer)

    first = PickleSerializer(OLD)
    before = runner(first).invoke("pay 5", with_checkpoint_id("order-1"))
    assert before.interrupt is not None
    [point] = before.interrupt.contexts
    with pytest.raises(CheckpointError, match="signed with another key"):
        runner(PickleSerializer(NEW)).resume("order-1", targets={point.id: True})
    after = runner(PickleSerializer([NEW, OLD])).resume("order-1", targets={point.id: True})
    result = after.result()
    assert result.text == "done"
    said = [
        event.output.message_output.get_message().content
        for event in result.events
        if event.output is not None and event.output.message_output is not None
    ]
    assert said == ["paid 5", "done"]


# -- keys from the environment -----------------------------------------------------------------


def test_a_key_pasted_with_its_newline_is_the_same_key(no_env_key: pytest.MonkeyPatch) -> None:
    text = "0123456789abcdef0123456789abcdef"
    data = PickleSerializer(text.encode()).dumps([1], checkpoint_id="x")
    for pasted in (text + "\n", f"  {text}\r\n", f"\t{text} "):
        no_env_key.setenv("AGENTKIT_CHECKPOINT_KEY", pasted)
        from_env = PickleSerializer()
        assert from_env.loads(data, checkpoint_id="x") == [1]
        again = from_env.dumps([2], checkpoint_id="x")
        assert PickleSerializer(text.encode()).loads(again, checkpoint_id="x") == [2]


def test_checkpoints_signed_with_the_unstripped_key_still_load(
    no_env_key: pytest.MonkeyPatch,
) -> None:
    # before this release the newline was part of the key: what it signed stays loadable
    text = "0123456789abcdef0123456789abcdef"
    legacy = PickleSerializer((text + "\n").encode()).dumps([1], checkpoint_id="x")
    no_env_key.setenv("AGENTKIT_CHECKPOINT_KEY", text + "\n")
    assert PickleSerializer().loads(legacy, checkpoint_id="x") == [1]


def test_a_blank_environment_key_is_refused(no_env_key: pytest.MonkeyPatch) -> None:
    no_env_key.setenv("AGENTKIT_CHECKPOINT_KEY", " \n")
    with pytest.raises(CheckpointError, match="AGENTKIT_CHECKPOINT_KEY is set but blank"):
        PickleSerializer()


def test_previous_keys_from_the_environment_verify(no_env_key: pytest.MonkeyPatch) -> None:
    by_old = PickleSerializer(OLD).dumps([1], checkpoint_id="x")
    by_older = PickleSerializer(OLDER).dumps([2], checkpoint_id="x")
    no_env_key.setenv("AGENTKIT_CHECKPOINT_KEY", NEW.decode())
    with pytest.raises(CheckpointError, match="AGENTKIT_CHECKPOINT_PREVIOUS_KEYS"):
        PickleSerializer().loads(by_old, checkpoint_id="x")
    no_env_key.setenv("AGENTKIT_CHECKPOINT_PREVIOUS_KEYS", f" {OLD.decode()} ,\n{OLDER.decode()}\n")
    rotated = PickleSerializer()
    assert rotated.loads(by_old, checkpoint_id="x") == [1]
    assert rotated.loads(by_older, checkpoint_id="x") == [2]
    fresh = rotated.dumps([3], checkpoint_id="x")
    assert PickleSerializer(NEW).loads(fresh, checkpoint_id="x") == [3]


def test_a_short_previous_key_is_refused(no_env_key: pytest.MonkeyPatch) -> None:
    no_env_key.setenv("AGENTKIT_CHECKPOINT_KEY", NEW.decode())
    no_env_key.setenv("AGENTKIT_CHECKPOINT_PREVIOUS_KEYS", f"{OLD.decode()},short")
    with pytest.raises(CheckpointError, match="AGENTKIT_CHECKPOINT_PREVIOUS_KEYS.*key 2 is 5 bytes"):
        PickleSerializer()


def test_previous_keys_also_verify_beside_the_key_file(no_env_key: pytest.MonkeyPatch) -> None:
    by_old = PickleSerializer(OLD).dumps([1], checkpoint_id="x")
    no_env_key.setenv("AGENTKIT_CHECKPOINT_PREVIOUS_KEYS", OLD.decode())
    assert PickleSerializer().loads(by_old, checkpoint_id="x") == [1]


def test_the_key_file_is_stripped_like_the_environment(
    no_env_key: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "cfg" / "checkpoint.key"
    path.parent.mkdir(mode=0o700)
    path.write_bytes(b"  0123456789abcdef0123456789abcdef\r\n\n")
    path.chmod(0o600)
    data = PickleSerializer().dumps([1], checkpoint_id="x")
    assert PickleSerializer(b"0123456789abcdef0123456789abcdef").loads(data, checkpoint_id="x") == [1]


# -- the Redis store binds checkpoints to its database -----------------------------------------


def on_db(url: str, db: int) -> str:
    return url.rsplit("/", 1)[0] + f"/{db}"


def test_a_checkpoint_copied_to_another_redis_database_is_refused(
    redis_url: str,  # noqa: F811
) -> None:
    prefix = f"test:{uuid.uuid4().hex}:"
    serializer = PickleSerializer(NEW)
    with (
        RedisCheckPointStore(on_db(redis_url, 8), prefix=prefix) as db8,
        RedisCheckPointStore(on_db(redis_url, 9), prefix=prefix) as db9,
    ):
        try:
            db8.set("pay", dumps_for_store(serializer, db8, "pay", {"approved": True}))
            data = db8.get("pay")
            assert data is not None
            assert loads_for_store(serializer, db8, "pay", data) == {"approved": True}
            db9.set("pay", data)  # what someone with write access to both databases does
            with pytest.raises(CheckpointError) as caught:
                loads_for_store(serializer, db9, "pay", data)
            message = str(caught.value)
            assert "in another store" in message
            assert f"this store's namespace is 'redis/9:{prefix}'" in message
            assert "the same Redis database and key prefix" in message
        finally:
            db8.delete("pay")
            db9.delete("pay")


def test_redis_namespaces_name_the_database_and_the_prefix(
    redis_url: str,  # noqa: F811
) -> None:
    with RedisCheckPointStore(on_db(redis_url, 0), prefix="tenantA:") as db0:
        assert namespace_of(db0) == "redis/0:tenantA:"
        assert legacy_namespaces_of(db0) == ("redis:tenantA:",)
    with RedisCheckPointStore(on_db(redis_url, 9), prefix="tenantA:") as db9:
        assert namespace_of(db9) == "redis/9:tenantA:"
    import redis

    client = redis.Redis.from_url(on_db(redis_url, 12))
    try:
        assert namespace_of(RedisCheckPointStore(client=client, prefix="p:")) == "redis/12:p:"
    finally:
        client.close()


@pytest.mark.parametrize("db", [0, 9])
def test_a_checkpoint_signed_before_the_database_was_bound_still_loads(
    redis_url: str,  # noqa: F811
    db: int,
) -> None:
    # Saved by an earlier release, which signed with "redis:<prefix>" in every database:
    # an upgrade must not strand it, whichever database it waits in.
    prefix = f"test:{uuid.uuid4().hex}:"
    serializer = PickleSerializer(NEW)
    legacy = serializer.dumps([1], checkpoint_id="x", namespace="redis:" + prefix)
    with RedisCheckPointStore(on_db(redis_url, db), prefix=prefix) as store:
        assert loads_for_store(serializer, store, "x", legacy) == [1]
        with pytest.raises(CheckpointError, match="signature check"):
            loads_for_store(serializer, store, "y", legacy)  # still bound to its id


def test_a_checkpoint_saved_in_db_0_does_not_load_in_another_database(
    redis_url: str,  # noqa: F811
) -> None:
    prefix = f"test:{uuid.uuid4().hex}:"
    serializer = PickleSerializer(NEW)
    with (
        RedisCheckPointStore(on_db(redis_url, 0), prefix=prefix) as db0,
        RedisCheckPointStore(on_db(redis_url, 9), prefix=prefix) as db9,
    ):
        data = dumps_for_store(serializer, db0, "pay", {"approved": True})
        assert loads_for_store(serializer, db0, "pay", data) == {"approved": True}
        with pytest.raises(CheckpointError, match="in another store"):
            loads_for_store(serializer, db9, "pay", data)


def test_a_pending_payment_copied_to_another_database_does_not_resume(
    redis_url: str,  # noqa: F811
) -> None:
    paid: list[int] = []

    @tool
    def pay(amount: int) -> str:
        """Pay after approval."""
        if interrupt("approve?"):
            paid.append(amount)
            return f"paid {amount}"
        return "declined"

    def runner(store: RedisCheckPointStore, script: list[Any]) -> Runner:
        agent = ChatModelAgent("Payer", "pays", ScriptedChatModel(script), tools=[pay])
        return Runner(agent, checkpoint_store=store, serializer=PickleSerializer(NEW))

    prefix = f"test:{uuid.uuid4().hex}:"
    with (
        RedisCheckPointStore(on_db(redis_url, 8), prefix=prefix) as db8,
        RedisCheckPointStore(on_db(redis_url, 9), prefix=prefix) as db9,
    ):
        try:
            first = runner(db8, [calls_message(call("pay", {"amount": 9999}, id="p"))])
            stopped = first.invoke("pay", with_checkpoint_id("order"))
            assert stopped.interrupt is not None
            [point] = stopped.interrupt.contexts
            data = db8.get("order")
            assert data is not None
            db9.set("order", data)
            with pytest.raises(CheckpointError, match="'redis/9:"):
                runner(db9, ["done"]).resume("order", targets={point.id: True})
            assert paid == []
            runner(db8, ["done"]).resume("order", targets={point.id: True}).result()
            assert paid == [9999]  # where it was saved, it resumes
        finally:
            db8.delete("order")
            db9.delete("order")
