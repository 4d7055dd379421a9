"""Ctrl-C: a real SIGINT cancels the run, saves it, and raises KeyboardInterrupt; no thread is
left, and another process resumes the run from its last finished step.

Each test drives ``tests/ctrlc_child.py`` in a child process: the child writes ``ready`` when it
waits at the point under test, the parent sends SIGINT, then resumes the saved run in a second
child and counts how often every step ran.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUARD = 60.0  # seconds; failure guards only, the child is ready in about one second
SAVED_NOTE = (
    "agentkit: Ctrl-C cancelled the run; it was saved: runner.resume('job-1') goes on from the "
    "last model or tool call that finished"
)


class Child:
    def __init__(self, tmp_path: Path, how: str, block_at: str) -> None:
        self.state = tmp_path / "state"
        self.state.mkdir(exist_ok=True)
        self.store = tmp_path / "store"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.ctrlc_child", how, block_at, str(self.store),
             str(self.state), "job-1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=child_env(),
        )

    def wait_for(self, name: str) -> None:
        deadline = time.monotonic() + GUARD
        while not (self.state / name).exists():
            if self.process.poll() is not None:
                out, err = self.process.communicate()
                pytest.fail(f"the child ended before {name!r}:\n{out}\n{err}")
            if time.monotonic() > deadline:
                self.process.kill()
                pytest.fail(f"the child never wrote {name!r}")
            time.sleep(0.01)

    def ctrl_c(self) -> None:
        self.process.send_signal(signal.SIGINT)

    def outcome(self, code: int) -> dict[str, Any]:
        try:
            out, err = self.process.communicate(timeout=GUARD)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            pytest.fail(f"the child did not end after Ctrl-C:\n{out}\n{err}")
        assert self.process.returncode == code, f"exit code {self.process.returncode}:\n{err}"
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def steps(self) -> collections.Counter[str]:
        lines = (self.state / "steps").read_text(encoding="utf-8").splitlines()
        return collections.Counter(lines)


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def resume_in_another_process(tmp_path: Path) -> dict[str, Any]:
    resumer = Child(tmp_path, "resume", "none")
    return resumer.outcome(0)


def stopped_by_ctrl_c(tmp_path: Path, how: str, block_at: str) -> Child:
    child = Child(tmp_path, how, block_at)
    child.wait_for("ready")
    child.ctrl_c()
    outcome = child.outcome(130)
    assert outcome["ended"] == "KeyboardInterrupt"
    assert outcome["notes"] == [SAVED_NOTE]
    assert outcome["threads"] == []  # the run's threads all ended before KeyboardInterrupt
    return child


def ran_once(*numbers: int) -> dict[str, int]:
    return {f"{edge} {number}": 1 for number in numbers for edge in ("start", "end")}


@pytest.mark.parametrize(
    ("how", "block_at"),
    [
        ("invoke", "model:2"),  # between steps: in the model call after step 2
        ("on_event", "event:2"),  # in the on_event callback
        ("loop", "model:2"),  # a for loop over query(), no with
        ("with", "model:2"),
        ("result", "model:2"),
    ],
)
def test_ctrl_c_between_steps_saves_the_run_and_a_resume_runs_no_step_twice(
    tmp_path: Path, how: str, block_at: str
) -> None:
    child = stopped_by_ctrl_c(tmp_path, how, block_at)
    assert child.steps() == ran_once(1, 2)
    assert resume_in_another_process(tmp_path)["text"] == "all 4 steps done"
    assert child.steps() == ran_once(1, 2, 3, 4)


def test_ctrl_c_while_reading_a_message_stream_inside_with_says_the_run_was_saved(
    tmp_path: Path,
) -> None:
    # The KeyboardInterrupt is raised by the read of a reply's message_stream in the body of
    # the with block, not by the iterator: leaving the block cancels and saves the run, and
    # the note says so, as for a Ctrl-C anywhere else.
    child = stopped_by_ctrl_c(tmp_path, "with_stream", "stream:2")
    assert child.steps() == ran_once(1, 2)
    assert resume_in_another_process(tmp_path)["text"] == "all 4 steps done"
    assert child.steps() == ran_once(1, 2, 3, 4)


@pytest.mark.parametrize(("how", "block_at"), [("invoke", "tool:2"), ("loop", "tool:2")])
def test_ctrl_c_inside_a_tool_saves_the_run_before_that_tool(
    tmp_path: Path, how: str, block_at: str
) -> None:
    # Under invoke the tool runs in the main thread, blocked in a plain time.sleep: the
    # Ctrl-C ends it. The tool did not finish: the resumed run calls it again.
    child = stopped_by_ctrl_c(tmp_path, how, block_at)
    assert child.steps() == {**ran_once(1), "start 2": 1}
    assert resume_in_another_process(tmp_path)["text"] == "all 4 steps done"
    assert child.steps() == {**ran_once(1, 2, 3, 4), "start 2": 2}


def test_ctrl_c_while_invoke_waits_for_parallel_tool_calls(tmp_path: Path) -> None:
    # Step 4 waits on a thread of the run; the main thread waits for the round. The Ctrl-C
    # lands in the main thread; the cancel must still wake step 4's wait.
    child = stopped_by_ctrl_c(tmp_path, "invoke", "parallel:4")
    assert child.steps() == {**ran_once(1, 2, 3), "start 4": 1}
    assert resume_in_another_process(tmp_path)["text"] == "all 4 steps done"
    assert child.steps() == {**ran_once(1, 2, 3, 4), "start 4": 2}


@pytest.mark.parametrize("how", ["invoke", "loop"])
def test_a_second_ctrl_c_during_the_save_waits_for_it(tmp_path: Path, how: str) -> None:
    child = Child(tmp_path, how, "save")
    child.wait_for("ready")
    child.ctrl_c()
    child.wait_for("saving")  # the checkpoint of that Ctrl-C is being written now
    child.ctrl_c()
    outcome = child.outcome(130)
    assert outcome["notes"] == [SAVED_NOTE]
    assert outcome["threads"] == []
    assert resume_in_another_process(tmp_path)["text"] == "all 4 steps done"
    assert child.steps()["end 2"] == 1
    assert child.steps()["end 4"] == 1


@pytest.mark.parametrize("how", ["invoke", "loop"])
def test_a_second_ctrl_c_stops_waiting_for_a_tool_that_ignores_the_first(
    tmp_path: Path, how: str
) -> None:
    child = Child(tmp_path, how, "stubborn:2")
    child.wait_for("ready")
    child.ctrl_c()
    child.wait_for("ignored")  # the tool caught the first Ctrl-C and waits again
    child.ctrl_c()
    outcome = child.outcome(130)
    assert outcome["ended"] == "KeyboardInterrupt"
    assert outcome["notes"] == [
        "agentkit: a second Ctrl-C stopped waiting for the run to end; what it did after its "
        "last save is not saved"
    ]
    assert child.steps() == {**ran_once(1), "start 2": 1, "ignored 2": 1}


def test_ctrl_c_in_the_body_of_a_loop_without_with_saves_the_run_at_exit(
    tmp_path: Path,
) -> None:
    # The KeyboardInterrupt is raised in the loop's body: the iterator never sees it, and the
    # run goes on in its (daemon) worker thread, waiting in its model call. The program's
    # exit cancels it and waits for its save.
    child = Child(tmp_path, "body", "model:2")
    child.wait_for("ready")
    child.wait_for("in-body")
    child.ctrl_c()
    outcome = child.outcome(130)
    assert outcome["ended"] == "KeyboardInterrupt"
    # when the program caught it (not at exit): the run's worker and the keeper of its lease
    assert sorted(outcome["threads"]) == ["agentkit-lease", "agentkit-run"]
    assert child.steps() == ran_once(1, 2)
    assert resume_in_another_process(tmp_path)["text"] == "all 4 steps done"
    assert child.steps() == ran_once(1, 2, 3, 4)
