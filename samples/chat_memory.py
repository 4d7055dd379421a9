"""A console chat that remembers: every turn is kept in a conversation store on disk.

Type a line, get an answer; quit with an empty line, ``/quit`` or end of input. Run it again
with the same ``--store`` and ``--user`` and it remembers what you said before (the
conversation is a JSON-lines file, or an SQLite database with ``--sqlite``). Only the last
``--turns`` turns are sent to the model; the store keeps them all.

    python samples/chat_memory.py
    python samples/chat_memory.py --user ann --store /tmp/chats
    echo "My name is Ann" | python samples/chat_memory.py
    echo "Who am I?" | python samples/chat_memory.py      # a new process: it remembers

Offline by default (a scripted model that answers from the conversation it is sent); live
with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, live, make_model

from agentkit import ChatModelAgent, Message, Role, Runner, with_conversation_id
from agentkit.conversation import (
    ConversationStore,
    FileConversationStore,
    SQLiteConversationStore,
    keep_last_turns,
)

DEFAULT_STORE = os.path.join(os.getcwd(), ".agentkit-chats")


def scripted_reply(messages: list[Message]) -> str:
    """Plays the LLM offline: it knows only what is in the messages it is sent."""
    said = [m.content for m in messages if m.role is Role.USER]
    last = said[-1]
    names = [match.group(1) for text in said if (match := re.search(r"[Mm]y name is (\w+)", text))]
    if re.search(r"[Mm]y name is", last):
        return f"Nice to meet you, {names[-1]}!"
    if "who am i" in last.lower() or "my name" in last.lower():
        return f"You are {names[-1]}." if names else "You have not told me your name yet."
    return f"You said {len(said)} thing(s) so far; the first was {said[0]!r}."


def build_runner(store: ConversationStore) -> Runner:
    """The chat agent, with its conversations in ``store``."""
    agent = ChatModelAgent(
        "assistant",
        "a friendly assistant",
        make_model(scripted_reply),
        instruction="You are a friendly assistant. Answer in one or two sentences.",
    )
    return Runner(agent, conversation_store=store)


def main(argv: Sequence[str] | None = None) -> None:
    """Chat on stdin, one line a turn."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", default=DEFAULT_STORE, help="where conversations are kept")
    parser.add_argument("--sqlite", action="store_true", help="keep them in an SQLite database")
    parser.add_argument("--user", default="me", help="the conversation id")
    parser.add_argument("--turns", type=int, default=20, help="turns of history sent along")
    args = parser.parse_args(argv)
    if args.sqlite:
        os.makedirs(args.store, mode=0o700, exist_ok=True)
        path = os.path.join(args.store, "chats.sqlite3")
        store: ConversationStore = SQLiteConversationStore(path)
    else:
        store = FileConversationStore(args.store)
    runner = build_runner(store)
    banner("chat with memory")
    known = len(store.load(args.user))
    print(f"(conversation {args.user!r}: {known} message(s) remembered; empty line to quit)")
    interactive = sys.stdin.isatty() and not live()
    while True:
        if interactive:
            print("you> ", end="", flush=True)
        line = sys.stdin.readline()
        text = line.strip()
        if not text or text == "/quit":
            break
        turn = with_conversation_id(args.user, trim=keep_last_turns(args.turns))
        result = runner.invoke(text, turn)
        print(f"assistant> {result.text}")


if __name__ == "__main__":
    main()
