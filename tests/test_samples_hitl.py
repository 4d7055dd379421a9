"""The human-in-the-loop and TurnLoop samples, run offline: as scripts (stdin, a real Ctrl-C)
and in-process through ``main()`` (whole event sequences, no thread left behind)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from agentkit import AgentEvent, Message, cancellable_sleep
from agentkit.testing import no_thread_leak, summarize
from tests.samples_support import ROOT, SAMPLES, clean_env, run_sample

GUARD = 60.0


def kinds(events: list[AgentEvent]) -> list[tuple[str, str, str | None]]:
    return [(summarize(e)[0], summarize(e)[2], summarize(e)[4]) for e in events]


# --- review and edit -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("review", "expected"),
    [
        ('{"date": "2025-06-02"}', "booked Martin Novak: Berlin -> Prague on 2025-06-02"),
        ("ok", "booked Martin Novak: Berlin -> Prague on 2025-06-01"),
        ("no: wrong person", "I did not book the ticket (The user rejected this call of book_ticket"),
    ],
)
def test_review_and_edit_runs_the_call_as_the_human_left_it(review: str, expected: str) -> None:
    done = run_sample("hitl_review_edit.py", stdin=review + "\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "REVIEW: book_ticket is about to be called with" in out
    assert '"date": "2025-06-01"' in out  # what the model proposed
    assert expected in out


def test_review_and_edit_events(sample: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]) -> None:
    module = sample("hitl_review_edit")
    with no_thread_leak():
        events = module.main(["--review", '{"passenger": "Martina Novak"}'])
    assert [summarize(e)[2:5] for e in events] == [
        ("assistant", "", None),
        ("", "", "interrupt"),
        ("tool/book_ticket", "booked Martina Novak: Berlin -> Prague on 2025-06-01, seat 42, ticket TK-1261", None),
        ("assistant", "Your ticket is booked: booked Martina Novak: Berlin -> Prague on 2025-06-01, seat 42, ticket TK-1261.", None),
    ]
    assert "decision: Approve(arguments={'passenger': 'Martina Novak'" in capsys.readouterr().out


# --- follow-up -----------------------------------------------------------------------------


def test_follow_up_asks_until_it_knows_enough() -> None:
    done = run_sample("hitl_follow_up.py", stdin="museums and food\nabout 150 USD a day\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    where = "agent:trip_planner > tool:follow_up:fu-1 > agent:follow_up > tool:ask_user"
    assert f"QUESTION ({where}:ask-1): What do you enjoy most" in out
    assert f"QUESTION ({where}:ask-2): What is your daily budget, roughly?" in out
    assert (
        "Your 3 days in New York (museums and food; about 150 USD a day): day 1 museums in "
        "Manhattan, day 2 Brooklyn and a food tour, day 3 Central Park and a Broadway show."
    ) in out


def test_follow_up_stops_asking_when_the_first_answer_has_it_all(
    sample: Callable[[str], ModuleType],
) -> None:
    module = sample("hitl_follow_up")
    with no_thread_leak():
        events = module.main(["--answers", "parks, 200 USD a day"])
    interrupts = [e for e in events if summarize(e)[4] == "interrupt"]
    assert len(interrupts) == 1
    assert summarize(events[-1])[3].startswith("Your 3 days in New York (parks, 200 USD a day)")


# --- feedback loop -------------------------------------------------------------------------


def test_feedback_loop_revises_until_the_reader_is_happy(
    sample: Callable[[str], ModuleType],
) -> None:
    module = sample("hitl_feedback_loop")
    with no_thread_leak():
        events = module.main(["--feedback", "make it longer", "ok"])
    assert kinds(events) == [
        ("writer", "assistant", None),
        ("critic", "", "interrupt"),
        ("critic", "assistant", None),
        ("writer", "assistant", None),
        ("critic", "", "interrupt"),
        ("critic", "assistant", "break_loop"),
    ]
    drafts = [summarize(e)[3] for e in events if summarize(e)[0] == "writer"]
    assert drafts == list(module.DRAFTS)
    assert summarize(events[2])[3] == "Feedback from the reader: make it longer"


def test_feedback_loop_on_stdin() -> None:
    done = run_sample("hitl_feedback_loop.py", stdin="ok\n")
    assert done.returncode == 0, done.stderr
    assert "Your feedback on this draft? ('ok' if it is good)" in done.stdout
    assert "Brown coats in the cellar dark" in done.stdout
    assert "-> break loop (from critic)" in done.stdout


# --- HITL inside a supervisor and plan-execute -----------------------------------------------


@pytest.mark.parametrize(
    ("answer", "budget"),
    [
        ("yes", "allocated 50000 USD for mobile app launch (budget code B-050)"),
        ("no", "The user rejected this call of allocate_budget; it was not run. Reason: the budget was not approved"),
    ],
)
def test_the_approval_deep_inside_resumes_down_to_the_call(
    sample: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str], answer: str, budget: str
) -> None:
    module = sample("hitl_supervisor_plan_execute")
    with no_thread_leak():
        events = module.main(["--approve", answer])
    out = capsys.readouterr().out
    assert (
        "  where: agent:project_manager > agent:research_agent > agent:project_manager > "
        "agent:plan_execute_replan > agent:execute_replan > agent:executor > "
        "tool:allocate_budget:budget"
    ) in out
    interrupts = [e for e in events if summarize(e)[4] == "interrupt"]
    assert len(interrupts) == 1
    assert summarize(events[-1])[:3] == (
        "project_manager",
        ["project_manager", "research_agent", "project_manager", "plan_execute_replan", "project_manager"],
        "assistant",
    )
    final = summarize(events[-1])[3]
    assert final.startswith("Project status: requirements: instant transfers")
    assert budget in final
    assert final.endswith("team: 2 iOS, 2 Android, 1 backend, 1 QA, lead Dana.")


def test_the_nested_approval_sample_asks_on_stdin() -> None:
    done = run_sample("hitl_supervisor_plan_execute.py", stdin="yes\n")
    assert done.returncode == 0, done.stderr
    assert "APPROVAL REQUIRED" in done.stdout
    assert "allocated 50000 USD" in done.stdout


# --- layered supervisor ----------------------------------------------------------------------


def test_layered_supervisor_answers_through_both_layers(
    sample: Callable[[str], ModuleType],
) -> None:
    module = sample("layered_supervisor")
    with no_thread_leak():
        events = module.main(["--no-stream"])
    speakers = [summarize(e)[0] for e in events]
    assert speakers[0] == "supervisor"
    assert {"research_agent", "math_supervisor", "divide_agent", "multiply_agent"} <= set(speakers)
    assert "subtract_agent" not in speakers
    final = summarize(events[-1])
    assert final[0] == "supervisor"
    assert final[3] == "New York state was 7.87% of US GDP in 2024; times 1.589 that is 12.51."
    deepest = max((summarize(e)[1] for e in events), key=len)
    assert deepest[:4] == ["supervisor", "research_agent", "supervisor", "math_supervisor"]


def test_layered_supervisor_runs_as_a_script() -> None:
    done = run_sample("layered_supervisor.py")
    assert done.returncode == 0, done.stderr
    assert "times 1.589 that is 12.51" in done.stdout


# --- graceful cancel (a real Ctrl-C) -----------------------------------------------------------


def _start_and_interrupt(store: Path) -> str:
    """Start the sample, press Ctrl-C (SIGINT) once its first tool works; return its output."""
    process = subprocess.Popen(
        [sys.executable, "-u", str(SAMPLES / "graceful_cancel.py"), "--store", str(store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=clean_env({"SAMPLE_STEP_SECONDS": "1"}),
    )
    assert process.stdout is not None
    seen = []
    try:
        for line in process.stdout:
            seen.append(line)
            if "[search_web] started" in line:
                process.send_signal(signal.SIGINT)
                break
        out, err = process.communicate(timeout=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    return "".join(seen) + out


def test_ctrl_c_keeps_the_work_done_and_a_new_process_finishes_it(tmp_path: Path) -> None:
    first = _start_and_interrupt(tmp_path)
    assert "Ctrl-C: stopping at the next safe point" in first
    assert "AgentCancelledError" in first
    resume_line = next(line for line in first.splitlines() if line.startswith("resume with: "))
    checkpoint_id = resume_line.rsplit(" ", 1)[-1]
    assert os.listdir(tmp_path)  # saved in the file store

    second = run_sample("graceful_cancel.py", "--store", str(tmp_path), "--resume", checkpoint_id)
    assert second.returncode == 0, second.stderr
    assert "finished." in second.stdout
    assert "Report: Summary of 1 finding(s): the signal is very likely artificial" in second.stdout
    # every tool finished exactly once over both processes: nothing done was done again
    both = first + second.stdout
    for name in ("search_web", "analyze_data", "summarize_findings"):
        assert both.count(f"[{name}] done") == 1, (name, both)

    again = run_sample("graceful_cancel.py", "--store", str(tmp_path), "--resume", checkpoint_id)
    assert again.returncode == 1
    assert "was consumed: a resumed run of it completed" in again.stderr


# --- the TurnLoop chat ---------------------------------------------------------------------


def test_the_chat_takes_a_new_message_while_the_agent_works() -> None:
    process = subprocess.Popen(
        [sys.executable, "-u", str(SAMPLES / "turnloop_chat.py")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT, env=clean_env({"SAMPLE_STEP_SECONDS": "5"}),
    )
    assert process.stdin is not None and process.stdout is not None
    seen = []
    try:
        process.stdin.write("Find me a flight to Lisbon\n")
        process.stdin.flush()
        for line in process.stdout:
            seen.append(line)
            if "searching Lisbon" in line:  # a search takes 5 s: the agent is busy
                process.stdin.write("Actually, make it Porto\n")
                process.stdin.close()
                break
        process.stdin = None  # closed above; communicate() must not flush it
        out, err = process.communicate(timeout=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    transcript = "".join(seen) + out
    assert "(stopped: a new message came in)" in transcript
    assert "searching Porto" in transcript
    assert "Here is what I found: Porto:" in transcript
    assert "Here is what I found: Lisbon" not in transcript  # the Lisbon search was cut short
    assert transcript.rstrip().endswith("bye.")


def test_the_chat_loop_sees_the_preempted_turn_in_its_history(
    sample: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    module = sample("turnloop_chat")
    seen: list[list[tuple[str, str]]] = []
    script = module.scripted_travel_agent
    searching = threading.Event()

    def recording(messages: list[Message]) -> object:
        seen.append([(m.role.value, m.content) for m in messages])
        return script(messages)

    def first_search_waits(seconds: float) -> None:
        if not searching.is_set():
            searching.set()
            cancellable_sleep(GUARD)  # until the new message's preempt stops it

    def lines() -> Iterator[str]:
        yield "fly me to Madrid"
        assert searching.wait(GUARD)
        yield "and then to Seville?"
        yield ""

    monkeypatch.setattr(module, "scripted_travel_agent", recording)
    monkeypatch.setattr(module, "cancellable_sleep", first_search_waits)
    with no_thread_leak():
        exit_state = module.chat(lines())
    assert exit_state.reason is None and exit_state.unhandled_items == []
    assert len(seen) == 3  # Madrid (stopped in its search), Seville, Seville's answer
    assert seen[1] == [
        ("system", seen[1][0][1]),
        ("user", "fly me to Madrid"),
        ("assistant", ""),
        ("tool", "The call to search_flights (id s2) did not complete: a new message came in first."),
        ("user", "and then to Seville?"),
    ]
