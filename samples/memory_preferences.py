"""A chat that remembers a user's preferences across conversations and processes.

Each line on stdin is a new conversation (no conversation store: nothing of the chat is kept),
yet what the user said they prefer is remembered: after each conversation the memory
middleware saves the preferences it found in a SQLite memory store, and before the next one it
gives the model the memories that match the user's question, in their namespace only.

    echo "I prefer invoices in EUR." | python samples/memory_preferences.py --user ann
    echo "Which currency for my invoices?" | python samples/memory_preferences.py --user ann
    echo "Which currency for my invoices?" | python samples/memory_preferences.py --user bob

Offline by default (a scripted model that answers from what it is sent, and a rule that finds
preferences); live with ``OPENAI_API_KEY`` (the model also decides what to remember, with
``model_extractor``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, live, make_model

from agentkit import ChatModelAgent, Message, Role, Runner, with_session_values
from agentkit.memory import (
    MEMORY_PREAMBLE,
    Extractor,
    MemoryMiddleware,
    SQLiteMemoryStore,
    model_extractor,
)

DEFAULT_STORE = os.path.join(os.getcwd(), ".agentkit-memory")
_PREFERENCE = re.compile(r"\bI prefer (.+?)[.!]?$", re.IGNORECASE)
_REMEMBERED = re.compile(r'<memory id="(\w+)">The user prefers (.+?)\.</memory>')


def scripted_reply(messages: list[Message]) -> str:
    """Plays the LLM offline: it knows only what it is sent (memories included)."""
    said = [m.content for m in messages if m.role is Role.USER]
    question = said[-1]
    preference = _PREFERENCE.search(question)
    if preference:
        return f"Noted: you prefer {preference.group(1)}."
    memories = "\n".join(text for text in said if text.startswith(MEMORY_PREAMBLE))
    known = _REMEMBERED.search(memories)
    if known:
        return f"You prefer {known.group(2)} (memory {known.group(1)})."
    return "I do not know your preferences yet."


def found_preferences(messages: list[Message]) -> list[str]:
    """The offline extractor: each 'I prefer ...' of the user becomes a memory."""
    found = []
    for message in messages:
        match = _PREFERENCE.search(message.content) if message.role is Role.USER else None
        if match:
            found.append(f"The user prefers {match.group(1)}.")
    return found


def build_runner(store: SQLiteMemoryStore) -> Runner:
    """The assistant, remembering each user (the session value ``user_id``) in ``store``."""
    extract: Extractor = model_extractor(make_model([])) if live() else found_preferences
    memory = MemoryMiddleware(store, lambda values: values["user_id"], extract=extract)
    agent = ChatModelAgent(
        "assistant",
        "a billing assistant",
        make_model(scripted_reply),
        instruction="You are a billing assistant. Answer in one sentence.",
        middlewares=[memory],
    )
    return Runner(agent)


def main(argv: Sequence[str] | None = None) -> None:
    """One conversation per line of stdin, for the user ``--user``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", default=DEFAULT_STORE, help="where memories are kept")
    parser.add_argument("--user", default="me", help="whose memories (the namespace)")
    args = parser.parse_args(argv)
    os.makedirs(args.store, mode=0o700, exist_ok=True)
    with SQLiteMemoryStore(os.path.join(args.store, "memories.sqlite3")) as store:
        runner = build_runner(store)
        banner("memory across conversations")
        print(f"({args.user!r}: {len(store.list(args.user))} memory(ies); empty line to quit)")
        for line in sys.stdin:
            text = line.strip()
            if not text or text == "/quit":
                break
            result = runner.invoke(text, with_session_values({"user_id": args.user}))
            print(f"assistant> {result.text}")
        print(f"({args.user!r} now has {len(store.list(args.user))} memory(ies))")


if __name__ == "__main__":
    main()
