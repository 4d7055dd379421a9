"""samples/memory_preferences.py: a preference remembered across conversations and processes."""

from __future__ import annotations

import re
from pathlib import Path

from tests.samples_support import run_sample


def test_a_preference_is_remembered_across_processes_for_its_user_only(tmp_path: Path) -> None:
    store = ["--store", str(tmp_path / "memory")]
    first = run_sample("memory_preferences.py", *store, "--user", "ann",
                       stdin="I prefer invoices in EUR.\n")
    assert first.returncode == 0, first.stderr
    assert "('ann': 0 memory(ies)" in first.stdout
    assert "assistant> Noted: you prefer invoices in EUR." in first.stdout
    assert "('ann' now has 1 memory(ies))" in first.stdout
    # a new process, a new conversation: the memory is there
    second = run_sample("memory_preferences.py", *store, "--user", "ann",
                        stdin="Which currency for my invoices?\n")
    assert second.returncode == 0, second.stderr
    assert re.search(r"assistant> You prefer invoices in EUR \(memory \w{32}\)\.", second.stdout)
    # another user: nothing of Ann's
    other = run_sample("memory_preferences.py", *store, "--user", "ann%",
                       stdin="Which currency for my invoices?\n")
    assert other.returncode == 0, other.stderr
    assert "assistant> I do not know your preferences yet." in other.stdout
