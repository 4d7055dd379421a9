"""Conversation stores: the conformance suite on every store, files, locks across processes."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkit import ConversationBusyError, assistant_message, user_message
from agentkit.conversation import (
    FileConversationStore,
    InMemoryConversationStore,
    RedisConversationStore,
    SQLiteConversationStore,
    keep_last_turns,
    keep_within_tokens,
)
from agentkit.conversation.conformance import CONVERSATION_CHECKS, check_conversation_store
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["memory", "file", "sqlite", "redis"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """A factory of stores of one kind; the stores it makes share one backend."""
    kind = request.param
    created: list[Any] = []
    if kind == "memory":
        shared = InMemoryConversationStore()

        def make() -> Any:
            return shared

    elif kind == "file":

        def make() -> Any:
            return FileConversationStore(tmp_path / "conversations")

    elif kind == "sqlite":

        def make() -> Any:
            store = SQLiteConversationStore(tmp_path / "conversations.sqlite3")
            created.append(store)
            return store

    else:
        url = request.getfixturevalue("redis_url")

        def make() -> Any:
            store = RedisConversationStore(url, prefix=f"test:{request.node.name}:")
            created.append(store)
            return store

    yield make
    for store in created:
        store.close()


@pytest.mark.parametrize("check", CONVERSATION_CHECKS, ids=lambda check: check.__name__)
def test_store_conformance(make_store: Callable[[], Any], check: Any) -> None:
    check(make_store)


class ForgetfulStore(InMemoryConversationStore):
    """A broken store: it keeps only the last message appended."""

    def append(self, conversation_id: str, messages: Any) -> None:
        self.delete(conversation_id)
        super().append(conversation_id, list(messages)[-1:])


def test_the_conformance_suite_catches_a_broken_store() -> None:
    with pytest.raises(AssertionError, match="conversation store conformance: after one append"):
        check_conversation_store(ForgetfulStore)


def test_file_store_writes_json_lines_with_private_permissions(tmp_path: Path) -> None:
    directory = tmp_path / "chats"
    store = FileConversationStore(directory)
    store.append("ann", [user_message("hi"), assistant_message("hello")])
    [path] = directory.glob("*.jsonl")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    lines = path.read_text("utf-8").splitlines()
    assert [json.loads(line)["content"] for line in lines] == ["hi", "hello"]
    lock = store.lock("ann")
    lock.release()
    assert stat.S_IMODE((directory / "locks").stat().st_mode) == 0o700


def test_file_store_skips_a_line_torn_by_a_crash(tmp_path: Path) -> None:
    store = FileConversationStore(tmp_path)
    store.append("c", [user_message("whole")])
    [path] = tmp_path.glob("*.jsonl")
    with path.open("a") as file:
        file.write('{"role": "assis')
    assert [m.content for m in store.load("c")] == ["whole"]


def test_sqlite_store_file_is_private(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with SQLiteConversationStore(path) as store:
        store.append("c", [user_message("x")])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


HOLDER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from agentkit.conversation import FileConversationStore, SQLiteConversationStore
    store = {kind}({location!r})
    lock = store.lock("shared")
    print("locked", flush=True)
    sys.stdin.readline()
    lock.release()
    print("released", flush=True)
    sys.stdin.readline()
    """
)


@pytest.mark.parametrize("kind", ["FileConversationStore", "SQLiteConversationStore"])
def test_the_lock_keeps_another_process_out_until_released_or_killed(
    kind: str, tmp_path: Path
) -> None:
    location = str(tmp_path / ("dir" if kind.startswith("File") else "db.sqlite3"))
    store = FileConversationStore(location) if kind.startswith("File") else SQLiteConversationStore(location)
    script = HOLDER.format(root=str(ROOT), kind=kind, location=location)
    for ending in ("release", "kill"):
        holder = subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdin is not None
            assert holder.stdout.readline().strip() == "locked"
            with pytest.raises(ConversationBusyError, match="'shared' is busy"):
                store.lock("shared")
            if ending == "release":
                holder.stdin.write("\n")
                holder.stdin.flush()
                assert holder.stdout.readline().strip() == "released"
            else:
                os.kill(holder.pid, signal.SIGKILL)
                holder.wait(60)
            store.lock("shared").release()
        finally:
            holder.kill()
            holder.wait(60)


def test_redis_lock_is_exclusive_across_clients_and_expires_with_its_holder(
    redis_url: str,  # noqa: F811
) -> None:
    first = RedisConversationStore(redis_url, prefix="test:redis-lock:", lock_ttl=30)
    second = RedisConversationStore(redis_url, prefix="test:redis-lock:")
    key = b"test:redis-lock:c\xfflock:"
    try:
        lock = first.lock("c")
        # the key carries a TTL, so a holder that dies frees the conversation in lock_ttl
        assert 0 < first._client.pttl(key) <= 30_000
        with pytest.raises(ConversationBusyError, match="held by another process"):
            second.lock("c")
        lock.release()
        assert first._client.exists(key) == 0
        second.lock("c").release()
    finally:
        first.close()
        second.close()


def test_trimmers_cut_at_turn_boundaries() -> None:
    history = [
        user_message("one"),
        assistant_message("1"),
        user_message("two"),
        assistant_message("2"),
        user_message("three"),
        assistant_message("3"),
    ]
    assert [m.content for m in keep_last_turns(2)(history)] == ["two", "2", "three", "3"]
    assert keep_last_turns(5)(history) == history
    assert keep_last_turns(0)(history) == []
    by_chars = keep_within_tokens(10, counter=lambda m: len(m.content))
    assert [m.content for m in by_chars(history)] == ["two", "2", "three", "3"]
    assert keep_within_tokens(3, counter=lambda m: len(m.content))(history) == []
    with pytest.raises(ValueError, match="turns must be an int >= 0"):
        keep_last_turns(-1)
