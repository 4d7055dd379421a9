"""Conversation stores survive a process killed with SIGKILL in the middle of an append.

An append is all or nothing in every store: what a killed process half wrote is not part of
the conversation, and the next turn (in another process) loses none of its own messages.
The Redis store appends with one ``RPUSH``, which Redis applies whole; the SQLite store in one
transaction; the file store notes the append it starts (``<name>.pending``) and the next
append cuts an unfinished one off the file.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentkit.conversation import FileConversationStore, SQLiteConversationStore

ROOT = Path(__file__).resolve().parents[1]
GUARD = 60.0  # failure guard only

TURN_ONE = [["user", "turn one: hello"], ["assistant", "hi there"]]


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def command(kind: str, location: Path, state: Path, action: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tests.conversation_crash_child", kind, str(location),
            str(state), action, *extra]


def run_child(kind: str, location: Path, state: Path, action: str) -> str:
    result = subprocess.run(
        command(kind, location, state, action),
        capture_output=True, text=True, cwd=ROOT, env=child_env(), timeout=GUARD, check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def kill_when_ready(process: subprocess.Popen[str], state: Path) -> None:
    deadline = time.monotonic() + GUARD
    while not (state / "ready").exists():
        if process.poll() is not None:
            pytest.fail(f"the child ended before it was killed:\n{process.communicate()[1]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the child never got ready")
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=GUARD)
    (state / "ready").unlink()


def killed_mid_append(kind: str, location: Path, state: Path, cut: str = "") -> None:
    process = subprocess.Popen(
        command(kind, location, state, "tear", cut),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=child_env(),
    )
    kill_when_ready(process, state)


def store_of(kind: str, location: Path) -> Any:
    if kind == "file":
        return FileConversationStore(location)
    return SQLiteConversationStore(location)


def contents(kind: str, location: Path) -> list[list[str]]:
    return [[m.role.value, m.content] for m in store_of(kind, location).load("chat")]


NEXT_TURN = [
    *TURN_ONE,
    ["user", "turn three: the next question"],
    ["assistant", "I have read 3 messages"],
]


# Where the file store's write of turn two stops: inside its first record, just after the
# first record's newline (the turn's first message whole, the rest missing), inside its last.
@pytest.mark.parametrize("cut", ["inside-first", "after-first", "inside-last"])
def test_file_store_killed_mid_append_loses_that_append_and_nothing_of_the_next_turn(
    tmp_path: Path, cut: str
) -> None:
    directory, state = tmp_path / "chats", tmp_path / "state"
    state.mkdir()
    run_child("file", directory, state, "first")
    killed_mid_append("file", directory, state, cut)
    [path] = directory.glob("*.jsonl")
    assert b"turn two" in path.read_bytes()  # the half append is on disk
    assert list(directory.glob("*.pending"))  # and noted as unfinished
    assert contents("file", directory) == TURN_ONE  # a load reads none of it

    assert json.loads(run_child("file", directory, state, "next")) == NEXT_TURN
    assert not list(directory.glob("*.pending"))
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])


def test_file_store_written_by_an_earlier_release_has_its_torn_line_cut(tmp_path: Path) -> None:
    # A torn last line and no note (an append of a release without notes, cut by a crash).
    directory, state = tmp_path / "chats", tmp_path / "state"
    state.mkdir()
    run_child("file", directory, state, "first")
    [path] = directory.glob("*.jsonl")
    with path.open("ab") as file:
        file.write(b'{"role":"user","content":"turn two: what is the pl')
    assert json.loads(run_child("file", directory, state, "next")) == NEXT_TURN


def test_sqlite_store_killed_mid_append_keeps_nothing_of_it(tmp_path: Path) -> None:
    database, state = tmp_path / "chats.sqlite3", tmp_path / "state"
    state.mkdir()
    run_child("sqlite", database, state, "first")
    killed_mid_append("sqlite", database, state)  # one row of the turn inserted, not committed
    assert contents("sqlite", database) == TURN_ONE
    assert json.loads(run_child("sqlite", database, state, "next")) == NEXT_TURN


@pytest.mark.stress
# 60 child processes: about 1 s each on a quiet 2-core machine, several times that on a busy
# one; each wait has its own guard, so this one only stops a run that went wrong as a whole.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_stores_survive_kills_at_random_moments_of_big_appends(tmp_path: Path, kind: str) -> None:
    location = tmp_path / ("chats" if kind == "file" else "chats.sqlite3")
    state = tmp_path / "state"
    state.mkdir()
    chance = random.Random(27)
    for _ in range(30):
        process = subprocess.Popen(
            command(kind, location, state, "churn"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env=child_env(),
        )
        deadline = time.monotonic() + GUARD
        while not (state / "ready").exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(chance.uniform(0.0, 0.05))  # somewhere in an append, or between two
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=GUARD)
        (state / "ready").unlink()
        messages = contents(kind, location)
        # Whole turns only: every user message is followed by its answer.
        assert len(messages) % 2 == 0
        for question, answer in zip(messages[::2], messages[1::2], strict=True):
            if question[1].startswith("churn"):
                assert answer[1].split()[:2] == question[1].split()[:2]
            else:
                assert question[1] == "turn three: the next question"
                assert answer[1].startswith("I have read")
        before = len(messages)
        after = json.loads(run_child(kind, location, state, "next"))
        assert len(after) == before + 2 and after[before][1] == "turn three: the next question"
