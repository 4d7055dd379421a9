"""Conversation stores refuse bad data clearly: bad records, bad ids, oversized records.

A bad record (not JSON, not a message, not UTF-8) is reported by every store with the same
:class:`ConversationRecordError` naming the conversation and the record's position, and
``drop_record`` repairs the conversation. Ids that no store can keep (lone surrogates, over
the length bound) are a ``ValueError`` before anything is stored.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    AgentKitError,
    ChatModelAgent,
    ConversationBusyError,
    Message,
    Runner,
    assistant_message,
    user_message,
    with_conversation_id,
)
from agentkit.conversation import (
    DEFAULT_MAX_RECORD_BYTES,
    MAX_CONVERSATION_ID_BYTES,
    FileConversationStore,
    InMemoryConversationStore,
    RedisConversationStore,
    SQLiteConversationStore,
)
from agentkit.conversation.conformance import check_bad_records_are_reported
from agentkit.errors import ConversationError, ConversationRecordError, ConversationStoreError
from agentkit.models import ScriptedChatModel
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

KINDS = ["memory", "file", "sqlite", "redis"]

BAD_RECORDS = {
    "bad JSON": b'{"role": "user", "content": "unfinished',
    "a JSON list": b'["user", "hello"]',
    "an unknown role": b'{"role": "wizard", "content": "abracadabra"}',
    "content of the wrong type": b'{"role": "user", "content": 5}',
    "a tool call of the wrong shape": b'{"role": "assistant", "tool_calls": [{"function": "f"}]}',
    "a lone surrogate (not UTF-8)": b'{"role": "user", "content": "\xed\xa0\x80"}',
    "bytes that are not UTF-8": b'{"role": "user", "content": "\xff\xfe"}',
    "an empty record": b"",
}


def write_raw(store: Any, conversation_id: str, raw: bytes) -> None:
    """Append one raw record, bypassing the store's encoder (what a bug or an attacker does)."""
    if isinstance(store, InMemoryConversationStore):
        store._logs.setdefault(conversation_id, []).append(raw)
    elif isinstance(store, FileConversationStore):
        with store.path_for(conversation_id).open("ab") as file:
            file.write(raw + b"\n")
    elif isinstance(store, SQLiteConversationStore):
        with sqlite3.connect(store.path) as connection:
            (last,) = connection.execute(
                "SELECT COALESCE(MAX(seq), -1) FROM agentkit_conversation_messages "
                "WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
            connection.execute(
                "INSERT INTO agentkit_conversation_messages VALUES (?, ?, CAST(? AS TEXT))",
                (conversation_id, last + 1, raw),
            )
    else:
        store._client.rpush(store.key_for(conversation_id), raw)


@pytest.fixture
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``stores(kind, **options)``: a fresh store of that kind (closed after the test)."""
    made: list[Any] = []

    def make(kind: str, **options: Any) -> Any:
        if kind == "memory":
            store: Any = InMemoryConversationStore(**options)
        elif kind == "file":
            store = FileConversationStore(tmp_path / "files", **options)
        elif kind == "sqlite":
            store = SQLiteConversationStore(tmp_path / "c.sqlite3", **options)
        else:
            url = request.getfixturevalue("redis_url")
            store = RedisConversationStore(url, prefix=f"test:records:{tmp_path.name}:", **options)
        made.append(store)
        return store

    yield make
    for store in made:
        if hasattr(store, "close"):
            store.close()


def test_the_conversation_errors_form_one_tree() -> None:
    assert issubclass(ConversationError, AgentKitError)
    for error in (ConversationBusyError, ConversationStoreError, ConversationRecordError):
        assert issubclass(error, ConversationError)
    assert issubclass(ConversationRecordError, ValueError)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("what", list(BAD_RECORDS))
def test_a_bad_record_names_the_conversation_and_the_record(
    stores: Callable[..., Any], kind: str, what: str
) -> None:
    store = stores(kind)
    store.append("chat-1", [user_message("first")])
    write_raw(store, "chat-1", BAD_RECORDS[what])
    store.append("chat-1", [assistant_message("third")])
    with pytest.raises(ConversationRecordError) as caught:
        store.load("chat-1")
    error = caught.value
    assert (error.conversation_id, error.index) == ("chat-1", 1)
    assert "conversation 'chat-1'" in str(error) and "record 1" in str(error)
    assert "drop_record('chat-1', 1)" in str(error)
    # the repair the message names works, and nothing else is lost
    store.drop_record("chat-1", 1)
    assert [m.content for m in store.load("chat-1")] == ["first", "third"]


@pytest.mark.parametrize("what", list(BAD_RECORDS))
def test_every_store_reports_a_bad_record_in_the_same_words(
    stores: Callable[..., Any], what: str
) -> None:
    messages = {}
    for kind in KINDS:
        store = stores(kind)
        write_raw(store, "c", BAD_RECORDS[what])
        with pytest.raises(ConversationRecordError) as caught:
            store.load("c")
        messages[kind] = str(caught.value)
    assert len(set(messages.values())) == 1, messages


@pytest.mark.parametrize("kind", KINDS)
def test_the_conformance_check_for_bad_records_passes_on_every_store(
    stores: Callable[..., Any], kind: str
) -> None:
    store = stores(kind)
    check_bad_records_are_reported(lambda: store, write_raw)


def test_the_bad_record_check_catches_a_store_that_skips_bad_records() -> None:
    class Skipping(InMemoryConversationStore):
        def load(self, conversation_id: str) -> list[Message]:
            try:
                return super().load(conversation_id)
            except ConversationRecordError:
                return []

    store = Skipping()
    with pytest.raises(AssertionError, match="did not raise ConversationRecordError"):
        check_bad_records_are_reported(lambda: store, write_raw)


def test_a_line_torn_by_a_crash_is_not_a_record(tmp_path: Path) -> None:
    # an append that never finished: no newline at the end; it is not shown, and not an error
    store = FileConversationStore(tmp_path)
    store.append("c", [user_message("whole")])
    with store.path_for("c").open("ab") as file:
        file.write(b'{"role": "assis')
    assert [m.content for m in store.load("c")] == ["whole"]


def test_a_turn_on_a_broken_conversation_fails_at_once_and_leaves_it_unlocked(
    stores: Callable[..., Any],
) -> None:
    store = stores("sqlite")
    store.append("ann", [user_message("hi"), assistant_message("hello")])
    write_raw(store, "ann", b"garbage")
    runner = Runner(
        ChatModelAgent("a", "d", ScriptedChatModel(["fine"])), conversation_store=store
    )
    with pytest.raises(ConversationRecordError, match="conversation 'ann'.*record 2"):
        runner.invoke("still there?", with_conversation_id("ann"))
    store.drop_record("ann", 2)
    assert runner.invoke("still there?", with_conversation_id("ann")).text == "fine"
    assert [m.content for m in store.load("ann")] == ["hi", "hello", "still there?", "fine"]


@pytest.mark.parametrize("kind", KINDS)
def test_drop_record_refuses_a_position_out_of_range_and_a_running_turn(
    stores: Callable[..., Any], kind: str
) -> None:
    store = stores(kind)
    store.append("c", [user_message("only")])
    for index in (1, 5, -1):
        with pytest.raises(IndexError, match=f"record {index}.*'c' has 1"):
            store.drop_record("c", index)
    lock = store.lock("c")
    try:
        with pytest.raises(ConversationBusyError):
            store.drop_record("c", 0)
    finally:
        lock.release()
    store.drop_record("c", 0)
    assert store.load("c") == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("conversation_id", "problem"),
    [
        ("lone \ud800 surrogate", "lone surrogate"),
        ("x" * (MAX_CONVERSATION_ID_BYTES + 1), f"over {MAX_CONVERSATION_ID_BYTES} bytes"),
        ("é" * (MAX_CONVERSATION_ID_BYTES // 2 + 1), f"over {MAX_CONVERSATION_ID_BYTES} bytes"),
        ("", "non-empty"),
        ("\x00nul", "NUL"),
    ],
)
def test_ids_no_store_can_keep_are_a_clear_value_error(
    stores: Callable[..., Any], kind: str, conversation_id: str, problem: str
) -> None:
    store = stores(kind)
    operations: list[Callable[[], object]] = [
        lambda: store.load(conversation_id),
        lambda: store.append(conversation_id, [user_message("x")]),
        lambda: store.delete(conversation_id),
        lambda: store.lock(conversation_id),
        lambda: store.drop_record(conversation_id, 0),
    ]
    for operation in operations:
        with pytest.raises(ValueError, match=problem):
            operation()


@pytest.mark.parametrize("kind", KINDS)
def test_ids_at_the_bound_and_with_colons_are_fine(stores: Callable[..., Any], kind: str) -> None:
    store = stores(kind)
    ids = ["x" * MAX_CONVERSATION_ID_BYTES, "tenant:42:chat:7", "a:", ":b", "tab\there\n"]
    for number, conversation_id in enumerate(ids):
        store.append(conversation_id, [user_message(str(number))])
    for number, conversation_id in enumerate(ids):
        assert [m.content for m in store.load(conversation_id)] == [str(number)]


@pytest.mark.parametrize("kind", KINDS)
def test_a_message_holding_a_lone_surrogate_round_trips(
    stores: Callable[..., Any], kind: str
) -> None:
    # a model's JSON may carry "\ud83d" alone; the record escapes it instead of failing
    store = stores(kind)
    odd = [user_message("half an emoji: \ud83d"), assistant_message("ok \udfff and ✓")]
    store.append("c", odd)
    assert store.load("c") == odd


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_over_the_size_limit_is_refused_and_nothing_is_appended(
    stores: Callable[..., Any], kind: str
) -> None:
    store = stores(kind, max_record_bytes=1000)
    assert store.max_record_bytes == 1000
    store.append("c", [user_message("before")])
    with pytest.raises(ConversationRecordError) as caught:
        store.append("c", [user_message("small"), assistant_message("x" * 2000)])
    error = caught.value
    assert (error.conversation_id, error.index) == ("c", 1)
    assert "the message at position 1 of the 2 to append" in str(error)
    assert "max_record_bytes=1000" in str(error)
    assert [m.content for m in store.load("c")] == ["before"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_stored_record_over_the_limit_is_refused_when_read(
    stores: Callable[..., Any], kind: str
) -> None:
    # written by a store with a larger limit (or another version): planted as it would be
    strict = stores(kind, max_record_bytes=1000)
    strict.append("c", [user_message("short")])
    write_raw(strict, "c", b'{"role":"assistant","content":"' + b"y" * 5000 + b'"}')
    with pytest.raises(ConversationRecordError, match="record 1 .*over max_record_bytes=1000"):
        strict.load("c")


@pytest.mark.parametrize("kind", KINDS)
def test_the_default_record_limit_is_documented_and_holds_big_answers(
    stores: Callable[..., Any], kind: str
) -> None:
    assert DEFAULT_MAX_RECORD_BYTES == 4 * 2**20
    store = stores(kind)
    assert store.max_record_bytes == DEFAULT_MAX_RECORD_BYTES
    big = assistant_message("z" * (DEFAULT_MAX_RECORD_BYTES - 100))
    store.append("c", [big])
    assert store.load("c") == [big]
    with pytest.raises(ConversationRecordError):
        store.append("c", [assistant_message("z" * DEFAULT_MAX_RECORD_BYTES)])


@pytest.mark.parametrize("max_record_bytes", [0, -1, 1.5, True])
def test_a_nonsensical_record_limit_is_refused(max_record_bytes: Any) -> None:
    with pytest.raises(ValueError, match="max_record_bytes must be a positive int"):
        InMemoryConversationStore(max_record_bytes=max_record_bytes)


def test_a_record_error_survives_pickling() -> None:
    import pickle

    error = ConversationRecordError("bad", conversation_id="c", index=3)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.conversation_id, copy.index) == ("bad", "c", 3)


def test_a_turn_with_an_answer_over_the_limit_appends_nothing_and_says_why(
    stores: Callable[..., Any],
) -> None:
    store = stores("file", max_record_bytes=2000)
    store.append("c", [user_message("earlier")])
    runner = Runner(
        ChatModelAgent("a", "d", ScriptedChatModel(["w" * 5000])), conversation_store=store
    )
    with pytest.raises(ConversationStoreError) as caught:
        runner.invoke("write a lot", with_conversation_id("c"))
    error = caught.value
    assert error.conversation_id == "c"
    assert "the message at position 1 of the 2 to append" in str(error)
    assert "max_record_bytes=2000" in str(error)
    assert isinstance(error.__cause__, ConversationRecordError)
    assert error.__cause__.index == 1
    assert [m.content for m in store.load("c")] == ["earlier"]
    store.lock("c").release()  # the turn gave the lock back
