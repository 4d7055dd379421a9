"""Memory stores: the conformance suite on every store (in memory, SQLite full-text, SQLite with
embeddings, Redis on a real redis-server), and what is particular to each."""

from __future__ import annotations

import hashlib
import math
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentkit.errors import AgentKitError
from agentkit.memory import (
    InMemoryMemoryStore,
    Memory,
    MemoryStore,
    MemoryStoreError,
    MemoryStoreFullError,
    SQLiteMemoryStore,
)
from agentkit.memory._words import words
from agentkit.memory.conformance import MEMORY_CHECKS, check_memory_store
from agentkit.testing import StoreConformanceError
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

ROOT = Path(__file__).resolve().parent.parent
DIMENSIONS = 64


def bag_of_words(text: str) -> list[float]:
    """A deterministic embedding for tests: each word adds to one of 64 dimensions."""
    vector = [0.0] * DIMENSIONS
    for word in words(text):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMENSIONS] += 1.0
    return vector


def _redis_store(url: str, node: str, **kwargs: Any) -> Any:
    from agentkit.integrations.redis import RedisMemoryStore

    return RedisMemoryStore(url, prefix=f"test:{node}:", **kwargs)


@pytest.fixture(params=["memory", "sqlite", "sqlite-embed", "redis"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """A factory of stores of one kind; the stores it makes share one backend."""
    kind = request.param
    created: list[Any] = []
    if kind == "memory":
        shared = InMemoryMemoryStore()

        def make() -> Any:
            return shared

    elif kind.startswith("sqlite"):
        embed = bag_of_words if kind == "sqlite-embed" else None

        def make() -> Any:
            store = SQLiteMemoryStore(tmp_path / "memories.sqlite3", embed=embed)
            created.append(store)
            return store

    else:
        url = request.getfixturevalue("redis_url")

        def make() -> Any:
            store = _redis_store(url, request.node.name)
            created.append(store)
            return store

    yield make
    for store in created:
        store.close()


@pytest.mark.parametrize("check", MEMORY_CHECKS, ids=lambda check: check.__name__)
def test_every_store_passes_the_conformance_suite(
    make_store: Callable[[], Any], check: Callable[[Callable[[], Any]], None]
) -> None:
    check(make_store)


def test_every_store_is_a_memory_store(make_store: Callable[[], Any]) -> None:
    assert isinstance(make_store(), MemoryStore)


@pytest.mark.parametrize("escape", ["a", "a%", "a*", "a:b", "a:", "a\\", "%", "*", "A"])
def test_one_user_never_sees_anothers_memories(
    make_store: Callable[[], Any], escape: str
) -> None:
    store = make_store()
    secret = store.save("a", "Ann's card ends in 4242 and she prefers EUR invoices")
    try:
        if escape == "a":
            assert [m.id for m in store.search("a", "card invoices EUR")] == [secret]
            return
        assert store.list(escape) == []
        assert store.search(escape, "card invoices EUR 4242 Ann") == []
        assert store.search(escape, "*") == []
        store.delete(escape, secret)
        assert [m.id for m in store.list("a")] == [secret]
    finally:
        store.delete("a", secret)


def test_a_suite_run_fails_a_store_that_leaks_across_namespaces() -> None:
    class Leaky(InMemoryMemoryStore):
        """Lists the suite's base namespace for every name built on it (``base:b``,
        ``{base``, ``BASE``...), as a store matching names loosely would."""

        def list(self, namespace: str) -> list[Memory]:
            base = re.search(r"conformance-[a-z]+-[0-9a-f]{32}", namespace.lower())
            return super().list(base.group(0) if base else namespace)

    shared = Leaky()
    with pytest.raises(StoreConformanceError, match="not only its own memory"):
        check_memory_store(lambda: shared)


@pytest.mark.parametrize("query", ['"', 'invoice"', "AND", "OR NOT", "NEAR(a b)", "*", "col:x",
                                   "^invoice", "invoice -tea", "'; DROP TABLE x; --"])
def test_sqlite_search_treats_any_query_as_words(tmp_path: Path, query: str) -> None:
    with SQLiteMemoryStore(tmp_path / "m.sqlite3") as store:
        store.save("u", "The invoice is due; AND OR NOT NEAR col x")
        found = store.search("u", query)
        assert all(isinstance(m, Memory) for m in found)
        assert store.list("u")[0].text.startswith("The invoice")


def test_a_full_namespace_refuses_saves_until_one_is_deleted(
    make_store: Callable[[], Any], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    kind = request.node.callspec.params["make_store"]
    if kind == "memory":
        store: Any = InMemoryMemoryStore(max_memories=3)
    elif kind.startswith("sqlite"):
        store = SQLiteMemoryStore(tmp_path / "full.sqlite3", max_memories=3)
    else:
        store = _redis_store(request.getfixturevalue("redis_url"), "full", max_memories=3)
    ids = [store.save("u", f"fact {i}") for i in range(3)]
    with pytest.raises(MemoryStoreFullError, match="holds 3 memories"):
        store.save("u", "one too many")
    store.save("other", "another namespace has room")
    store.delete("u", ids[0])
    store.save("u", "room again")
    assert len(store.list("u")) == 3
    for memory in store.list("u") + store.list("other"):
        store.delete("u", memory.id)
        store.delete("other", memory.id)


def test_sqlite_vector_search_ranks_by_cosine_similarity(tmp_path: Path) -> None:
    vectors = {"cats": [1.0, 0.0, 0.0], "dogs": [0.8, 0.6, 0.0], "taxes": [0.0, 0.0, 1.0]}

    def embed(text: str) -> Sequence[float]:
        return vectors.get(text.split(maxsplit=1)[0], [0.6, 0.8, 0.0])

    with SQLiteMemoryStore(tmp_path / "v.sqlite3", embed=embed) as store:
        for text in ("cats purr", "dogs bark", "taxes are due"):
            store.save("u", text)
        found = store.search("u", "cats", limit=3)
        assert [m.text for m in found] == ["cats purr", "dogs bark"]  # taxes: orthogonal
        assert [round(m.score or 0, 6) for m in found] == [1.0, 0.8]
        assert math.isclose(store.search("u", "pets", limit=1)[0].score or 0, 0.96, rel_tol=1e-6)


def test_sqlite_refuses_embeddings_of_another_length(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    with SQLiteMemoryStore(path, embed=lambda text: [1.0, 2.0]) as store:
        store.save("u", "two numbers")
    other = SQLiteMemoryStore(path, embed=lambda text: [1.0, 2.0, 3.0])
    with other, pytest.raises(ValueError, match="have 2: use one embedding model"):
        other.save("u", "three numbers")
    broken = SQLiteMemoryStore(path, embed=lambda text: ["x"])  # type: ignore[list-item]
    with broken, pytest.raises(TypeError, match="sequence of numbers"):
        broken.save("u", "words")


def test_sqlite_memories_outlive_the_process_that_saved_them(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    script = textwrap.dedent(
        f"""
        from agentkit.memory import SQLiteMemoryStore
        store = SQLiteMemoryStore({str(path)!r})
        print(store.save("ann", "Ann prefers invoices in EUR"))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
        cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    with SQLiteMemoryStore(path) as store:
        [found] = store.search("ann", "invoice currency? EUR")
        assert (found.id, found.text) == (done.stdout.strip(), "Ann prefers invoices in EUR")


def test_sqlite_refuses_an_in_memory_database() -> None:
    with pytest.raises(ValueError, match="InMemoryMemoryStore"):
        SQLiteMemoryStore(":memory:")


def test_bad_arguments_are_refused_in_the_users_words() -> None:
    store = InMemoryMemoryStore()
    with pytest.raises(ValueError, match="1 to 512 characters"):
        store.save("", "text")
    with pytest.raises(TypeError, match="namespace is a str"):
        store.search(42, "text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="JSON values"):
        store.save("u", "text", metadata={"when": object()})
    with pytest.raises(ValueError, match="limit is the most memories"):
        store.search("u", "x", limit=True)
    with pytest.raises(ValueError, match="max_memories"):
        InMemoryMemoryStore(max_memories=0)
    for error in (MemoryStoreFullError("x"), MemoryStoreError("y")):
        assert isinstance(error, AgentKitError)


def test_redis_that_cannot_be_reached_is_a_memory_store_error() -> None:
    from agentkit.integrations.redis import RedisMemoryStore

    with RedisMemoryStore("redis://127.0.0.1:1/0") as store:
        with pytest.raises(MemoryStoreError, match="could not reach Redis"):
            store.save("u", "text")
        with pytest.raises(MemoryStoreError, match="could not reach Redis"):
            store.list("u")


def test_redis_keys_hold_the_namespace_hex_encoded(redis_url: str) -> None:  # noqa: F811
    import redis

    from agentkit.integrations.redis import RedisMemoryStore

    client = redis.Redis.from_url(redis_url)

    store = RedisMemoryStore(client=client, prefix="keys-test:")
    memory_id = store.save("a:b*", "pattern characters")
    keys = sorted(key.decode() for key in client.scan_iter("keys-test:*"))
    assert keys and all(key.startswith("keys-test:{613a622a}:") for key in keys)
    store.delete("a:b*", memory_id)
    assert [k for k in client.scan_iter("keys-test:*") if not k.endswith(b":n")] == []
    client.close()


def test_sqlite_full_text_search_finds_other_forms_of_a_word(tmp_path: Path) -> None:
    with SQLiteMemoryStore(tmp_path / "m.sqlite3") as store:
        memory_id = store.save("u", "Ann prefers invoices in EUR.")
        assert [m.id for m in store.search("u", "Which currency for my invoice?")] == [memory_id]
        assert [m.id for m in store.search("u", "préférer")] == [memory_id]  # accents ignored
        assert [m.id for m in store.search("u", "weather")] == []
        assert [m.id for m in store.search("u", "INVOICING éur")] == [memory_id]


@pytest.mark.parametrize("numpy", [True, False], ids=["numpy", "plain-python"])
def test_sqlite_vector_search_gives_the_same_ranking_with_and_without_numpy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, numpy: bool
) -> None:
    from agentkit.memory import _sqlite

    if not numpy:
        monkeypatch.setattr(_sqlite, "_load_numpy", lambda: None)
    else:
        assert _sqlite._load_numpy() is not None
    with SQLiteMemoryStore(tmp_path / "v.sqlite3", embed=bag_of_words) as store:
        texts = [f"fact {i} about {'tea' if i % 3 else 'coffee'} and {'cats' if i % 2 else 'dogs'}"
                 for i in range(30)]
        for text in texts:
            store.save("u", text)
        found = store.search("u", "coffee dogs", limit=5)
        assert len(found) == 5
        assert all("coffee and dogs" in m.text for m in found)
        scores = [m.score for m in found]
        assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


def test_sqlite_vector_search_sees_what_another_store_saved_or_deleted_since(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v.sqlite3"
    with SQLiteMemoryStore(path, embed=bag_of_words) as reader, SQLiteMemoryStore(
        path, embed=bag_of_words
    ) as writer:
        first = writer.save("u", "green tea in the morning")
        assert [m.id for m in reader.search("u", "green tea")] == [first]  # read, then kept
        assert [m.id for m in reader.search("u", "green tea")] == [first]  # from what was kept
        second = writer.save("u", "green tea in the evening too")
        assert {m.id for m in reader.search("u", "green tea")} == {first, second}
        writer.delete("u", first)
        assert [m.id for m in reader.search("u", "green tea")] == [second]
        assert reader.search("nobody", "green tea") == []
