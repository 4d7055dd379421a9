"""Cost of conversation memory per turn: lock, load the history, append the turn.

Run: ``python benchmarks/bench_conversation.py [--turns N]``

A ``ChatModelAgent`` (scripted model, no tools) answers N turns of one conversation, with each
store, and the same N turns without a conversation (the whole history passed by hand, as an
application would without stores). The difference per turn is what the store costs; it is
shown for the first and the last tenth of the turns, so growth with the history shows. The
file store ``fsync``s every append, so its numbers are the disk's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentkit import ChatModelAgent, Message, Runner, user_message, with_conversation_id  # noqa: E402
from agentkit.conversation import (  # noqa: E402
    FileConversationStore,
    InMemoryConversationStore,
    SQLiteConversationStore,
)
from agentkit.models import ScriptedChatModel  # noqa: E402


def reply(messages: list[Message]) -> str:
    return f"answer number {len(messages)} with a few words of text"


def timed_turns(turns: int, one_turn: Callable[[int], None]) -> list[float]:
    times = []
    for index in range(turns):
        start = time.perf_counter()
        one_turn(index)
        times.append(time.perf_counter() - start)
    return times


def report(name: str, times: list[float], base: list[float]) -> None:
    tenth = max(1, len(times) // 10)

    def per_turn(values: list[float], part: slice) -> float:
        return statistics.median(values[part]) * 1e6

    early, late = slice(0, tenth), slice(-tenth, None)
    print(
        f"{name:<10} first turns {per_turn(times, early):8.0f} us "
        f"(+{per_turn(times, early) - per_turn(base, early):6.0f})   "
        f"last turns {per_turn(times, late):8.0f} us "
        f"(+{per_turn(times, late) - per_turn(base, late):6.0f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    agent = ChatModelAgent("bot", "d", ScriptedChatModel(reply))

    history: list[Message] = []
    runner = Runner(agent)

    def by_hand(index: int) -> None:
        history.append(user_message(f"question {index}"))
        result = runner.invoke(list(history))
        assert result.final_message is not None
        history.append(result.final_message)

    base = timed_turns(args.turns, by_hand)
    report("by hand", base, base)
    with tempfile.TemporaryDirectory() as directory:
        stores: dict[str, Any] = {
            "memory": InMemoryConversationStore(),
            "file": FileConversationStore(Path(directory) / "files"),
            "sqlite": SQLiteConversationStore(Path(directory) / "c.sqlite3"),
        }
        for name, store in stores.items():
            stored = Runner(agent, conversation_store=store)

            def turn(index: int, stored: Runner = stored) -> None:
                stored.invoke(f"question {index}", with_conversation_id("bench"))

            report(name, timed_turns(args.turns, turn), base)


if __name__ == "__main__":
    main()
