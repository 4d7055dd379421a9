"""samples/chat_memory.py and samples/structured_output.py, run as scripts offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.samples_support import run_sample


@pytest.mark.parametrize("flags", [[], ["--sqlite"]])
def test_chat_memory_remembers_across_restarts(flags: list[str], tmp_path: Path) -> None:
    store = ["--store", str(tmp_path / "chats"), "--user", "ann", *flags]
    first = run_sample("chat_memory.py", *store, stdin="My name is Ann\nWho am I?\n")
    assert first.returncode == 0, first.stderr
    assert "0 message(s) remembered" in first.stdout
    assert "assistant> Nice to meet you, Ann!" in first.stdout
    assert "assistant> You are Ann." in first.stdout
    # a new process, the same store: it remembers
    second = run_sample("chat_memory.py", *store, stdin="Who am I?\n")
    assert second.returncode == 0, second.stderr
    assert "4 message(s) remembered" in second.stdout
    assert "assistant> You are Ann." in second.stdout
    # another user starts afresh
    other = run_sample(
        "chat_memory.py", "--store", str(tmp_path / "chats"), "--user", "bob", *flags,
        stdin="Who am I?\n",
    )
    assert "assistant> You have not told me your name yet." in other.stdout


def test_chat_memory_sends_only_the_last_turns(tmp_path: Path) -> None:
    store = ["--store", str(tmp_path), "--turns", "1"]
    done = run_sample("chat_memory.py", *store, stdin="My name is Ann\nfine\nWho am I?\n")
    assert done.returncode == 0, done.stderr
    # with one turn of history, the name is out of sight by the third line
    assert "assistant> You have not told me your name yet." in done.stdout


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ([], ["city:    Lisbon", "verdict: go", "pack:    sunglasses, sunscreen"]),
        (["Should I go to Oslo?"], ["city:    Oslo", "verdict: wait", "pack:    umbrella, boots"]),
    ],
)
def test_structured_output_sample(question: list[str], expected: list[str]) -> None:
    done = run_sample("structured_output.py", *question)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "calls get_weather" in out
    assert "rejected answer:" in out  # the scripted model's first answer is corrected
    for line in expected:
        assert line in out
    assert "session['advice'] is the same object: True" in out
