"""samples/budget.py: a budget that runs out pauses the run; approved, a new process resumes it
from the file store with a larger budget and finishes, every search run once."""

from __future__ import annotations

from pathlib import Path

from tests.samples_support import run_sample


def test_an_approved_budget_pause_finishes_in_a_new_process(tmp_path: Path) -> None:
    done = run_sample("budget.py", "--store", str(tmp_path), "--approve", "yes")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "paused: the run reached its cost limit: 0.00132 used of 0.001" in out
    assert "Summary of 4 searches" in out
    pids = {line.split("]")[0] for line in out.splitlines() if line.startswith("[process")}
    assert len(pids) == 2, out  # the resume ran in another process
    (log,) = tmp_path.glob("*.searches")
    searches = [line.split(" ", 1) for line in log.read_text().splitlines()]
    topics = [topic for _, topic in searches]
    assert topics == ["battery chemistry", "charging networks", "grid storage", "recycling"]
    assert len({pid for pid, _ in searches}) == 2  # three before the pause, one after


def test_a_budget_pause_that_is_not_approved_stays_saved(tmp_path: Path) -> None:
    done = run_sample("budget.py", "--store", str(tmp_path), stdin="no\n")
    assert done.returncode == 0, done.stderr
    assert "Raise the budget to $0.003? (yes/no)" in done.stdout
    assert "not approved; checkpoint" in done.stdout
    assert list(tmp_path.glob("*.ckpt"))  # still there, resumable later
    assert "Summary" not in done.stdout


def test_the_resumed_process_counts_on_from_what_the_first_one_spent(tmp_path: Path) -> None:
    # 0.00132 was spent before the pause: a budget of 0.0012 is used up already.
    done = run_sample(
        "budget.py", "--store", str(tmp_path), "--approve", "yes", "--raise-to", "0.0012"
    )
    assert done.returncode == 0, done.stderr
    assert "paused again: the budget ran out once more" in done.stdout
    assert "spent $0.00000 more" in done.stdout  # no model call was made
    (log,) = tmp_path.glob("*.searches")
    assert len(log.read_text().splitlines()) == 3
