"""Search latency of the memory stores with a full namespace (10,000 memories by default).

Run: ``python benchmarks/bench_memory.py [--memories N] [--queries Q] [--redis URL]``

Each store gets N memories in one namespace (synthetic sentences over a 3,000-word
vocabulary, Zipf-like, so a few words are in many memories and most in few) and 1,000 in
another, then answers Q queries of 6 words each; the median and the 95th percentile of a
search (limit 5) are shown, the first search apart (SQLite with embeddings reads the
namespace's vectors then, and keeps them for the next searches), with the time to save the
N. SQLite is measured without embeddings (FTS5) and with a 384- and a 1,536-number embedding
(cosine; the embedding function is a cheap hash, so the time is the store's). Redis needs a server:
``--redis redis://127.0.0.1:6379/15`` (the keys are written under ``bench:memory:`` and
deleted).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentkit.memory import InMemoryMemoryStore, SQLiteMemoryStore  # noqa: E402

VOCABULARY = [f"w{index}" for index in range(3000)]
WEIGHTS = [1.0 / (rank + 1) for rank in range(len(VOCABULARY))]


def sentence(rng: random.Random, length: int) -> str:
    return "The user " + " ".join(rng.choices(VOCABULARY, WEIGHTS, k=length)) + "."


def hashed_embedding(dimensions: int) -> Callable[[str], list[float]]:
    def embed(text: str) -> list[float]:
        digest = hashlib.blake2b(text.encode(), digest_size=64).digest()
        repeated = (digest * (dimensions // 64 + 1))[:dimensions]
        return [byte / 255.0 - 0.5 for byte in repeated]

    return embed


def measure(name: str, store: Any, memories: int, queries: int) -> None:
    rng = random.Random(7)
    started = time.perf_counter()
    for _ in range(memories):
        store.save("bench-user", sentence(rng, 12))
    for _ in range(1000):
        store.save("bench-other", sentence(rng, 12))
    saving = time.perf_counter() - started
    asked = [" ".join(rng.choices(VOCABULARY, WEIGHTS, k=6)) for _ in range(queries)]
    start = time.perf_counter()
    store.search("bench-user", asked[0], limit=5)  # the first: nothing read before
    first = time.perf_counter() - start
    times = []
    found = 0
    for query in asked:
        start = time.perf_counter()
        found += len(store.search("bench-user", query, limit=5))
        times.append(time.perf_counter() - start)
    times.sort()
    print(
        f"{name:<22} search median {statistics.median(times) * 1e3:7.2f} ms   "
        f"p95 {times[int(len(times) * 0.95) - 1] * 1e3:7.2f} ms   "
        f"first {first * 1e3:7.2f} ms   ({found / len(asked):.1f} found)   "
        f"save {saving / (memories + 1000) * 1e6:6.0f} us each"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--redis", default=None)
    args = parser.parse_args()
    measure("in memory", InMemoryMemoryStore(), args.memories, args.queries)
    with tempfile.TemporaryDirectory() as folder:
        with SQLiteMemoryStore(Path(folder) / "fts.sqlite3") as store:
            measure("sqlite fts5", store, args.memories, args.queries)
        for dimensions in (384, 1536):
            path = Path(folder) / f"v{dimensions}.sqlite3"
            embed = hashed_embedding(dimensions)
            with SQLiteMemoryStore(path, embed=embed) as store:
                measure(f"sqlite cosine {dimensions}", store, args.memories, args.queries)
    if args.redis:
        from agentkit.integrations.redis import RedisMemoryStore

        with RedisMemoryStore(args.redis, prefix="bench:memory:") as store:
            try:
                measure("redis", store, args.memories, args.queries)
            finally:
                for namespace in ("bench-user", "bench-other"):
                    for memory in store.list(namespace):
                        store.delete(namespace, memory.id)


if __name__ == "__main__":
    main()
