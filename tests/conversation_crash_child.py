"""A child process for the conversation crash tests.

    python -m tests.conversation_crash_child <kind> <location> <state_dir> <action> [<cut>]

``kind`` is ``file`` or ``sqlite``; ``location`` the store's directory or database file.
Actions:

* ``first``: append turn one (two messages).
* ``tear``: append turn two (three messages), stopped halfway: the file store's ``os.write``
  of the turn writes only part of it, up to ``cut`` (``inside-first``: half its first
  record; ``after-first``: its first record and newline; ``inside-last``: all but the last
  20 bytes); the SQLite store inserts the turn's first row inside the open transaction.
  Then the child writes ``ready`` and waits to be killed.
* ``next``: run the next turn through a Runner (``with_conversation_id``) and print the
  conversation as the store holds it afterwards (JSON: role and text of each message).
* ``churn``: append big turns in a loop (for kills at random moments), writing ``ready``
  after the first.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from typing import Any

from agentkit import ChatModelAgent, Runner, assistant_message, user_message, with_conversation_id
from agentkit.conversation import FileConversationStore, SQLiteConversationStore
from agentkit.models import ScriptedChatModel

WAIT = 120.0  # the parent kills the child long before; a failure guard only

kind, location, state_dir, action = sys.argv[1:5]
cut = sys.argv[5] if len(sys.argv) > 5 else ""


def ready() -> None:
    with open(os.path.join(state_dir, "ready"), "w", encoding="utf-8") as file:
        file.write(action)


def killed_here() -> None:
    ready()
    time.sleep(WAIT)
    raise SystemExit("the parent never killed this process")


if action == "tear" and kind == "file":
    real_write = os.write

    def torn_write(fd: int, data: Any) -> int:
        payload = bytes(data)
        if b"turn two" in payload:
            first_line = payload.index(b"\n") + 1
            where = {
                "inside-first": first_line // 2,
                "after-first": first_line,
                "inside-last": len(payload) - 20,
            }[cut]
            real_write(fd, payload[:where])
            killed_here()
        return real_write(fd, data)

    os.write = torn_write

if action == "tear" and kind == "sqlite":

    class HalfwayConnection(sqlite3.Connection):
        def executemany(self, sql: str, rows: Any, /) -> sqlite3.Cursor:
            rows = list(rows)
            if "turn two" in str(rows):
                self.execute(sql, rows[0])  # inside the append's open transaction
                killed_here()
            return super().executemany(sql, rows)

    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return real_connect(*args, **kwargs, factory=HalfwayConnection)

    sqlite3.connect = connect  # type: ignore[assignment]


def make_store() -> FileConversationStore | SQLiteConversationStore:
    if kind == "file":
        return FileConversationStore(location)
    return SQLiteConversationStore(location)


def main() -> None:
    store = make_store()
    if action == "first":
        store.append("chat", [user_message("turn one: hello"), assistant_message("hi there")])
    elif action == "tear":
        store.append(
            "chat",
            [
                user_message("turn two: what is the plan? " + "x" * 200),
                assistant_message("turn two: the plan is " + "y" * 300),
                assistant_message("turn two: and the rest " + "z" * 300),
            ],
        )
        raise SystemExit("the append was not stopped halfway")
    elif action == "next":
        model = ScriptedChatModel(lambda messages: f"I have read {len(messages)} messages")
        runner = Runner(ChatModelAgent("chat", "answers", model), conversation_store=store)
        runner.invoke("turn three: the next question", with_conversation_id("chat"))
        print(json.dumps([[m.role.value, m.content] for m in store.load("chat")]))
    elif action == "churn":
        for number in range(10_000):
            store.append(
                "chat",
                [
                    user_message(f"churn {number} " + "q" * 20_000),
                    assistant_message(f"churn {number} " + "a" * 60_000),
                ],
            )
            if number == 0:
                ready()
    else:
        raise SystemExit(f"unknown action {action}")


if __name__ == "__main__":
    main()
