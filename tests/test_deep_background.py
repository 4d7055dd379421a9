"""Background tasks of the deep agent (``deep.new(..., background_tasks=True)``): sub-agents and
shell commands that run while the agent goes on, ``task_output`` / ``task_stop``, the notices,
the version fence, cancellation, bounds, and no thread or process left behind.

Real threads and real subprocesses throughout; the crash case is in
``test_deep_background_crash.py``.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentkit import (
    AgentCancelledError,
    CancelHandle,
    CancelMode,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    ToolCall,
    cancellable_sleep,
    get_session_value,
    interrupt,
    tool,
    with_cancel,
    with_checkpoint_id,
)
from agentkit.backends import LocalShell
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import deep
from agentkit.testing import call, calls_message, no_thread_leak

KEY = deep.SESSION_KEY_BACKGROUND_TASKS
GUARD = 20.0  # seconds: a guard against hangs, never a pace


def processes_with(marker: str) -> list[int]:
    """The pids of the live processes whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as file:
                cmdline = file.read()
            with open(f"/proc/{name}/stat", "rb") as file:
                state = file.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != b"Z":
            found.append(int(name))
    return found


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def after(condition: Callable[[], bool], reply: ToolCall | Exception) -> Callable[..., Message]:
    """A script reply made once ``condition`` holds: a call of ``reply``, or raising it."""

    def reply_when_ready(messages: list[Message]) -> Message:
        wait_until(condition, "the background work to start")
        if isinstance(reply, Exception):
            raise reply
        return calls_message(reply)

    return reply_when_ready


def record(task_id: str) -> deep.BackgroundTask:
    task: deep.BackgroundTask = get_session_value(KEY)[task_id]
    return task


def tool_texts(messages: list[Message]) -> list[str]:
    return [m.content for m in messages if m.role is Role.TOOL]


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def gated_worker(gate: threading.Event, *, name: str = "worker") -> ChatModelAgent:
    """A sub-agent whose one tool waits for ``gate`` (bounded), then answers ``gate passed``."""

    @tool
    def wait_for_gate() -> str:
        """Wait for the gate."""
        if not gate.wait(GUARD):
            return "gate never opened"
        return "gate passed"

    model = ScriptedChatModel([calls_message(call("wait_for_gate", {})), "worker: gate passed"])
    return ChatModelAgent(name, "does slow work", model, tools=[wait_for_gate])


def test_a_background_sub_agent_runs_while_the_agent_goes_on_and_its_end_is_told_once() -> None:
    gate = threading.Event()

    @tool
    def open_gate() -> str:
        """Let the worker finish, and wait until its task ended."""
        gate.set()
        wait_until(lambda: not record("bg_1").running, "the task's end")
        return "opened"

    parent = ScriptedChatModel(
        [
            calls_message(
                call("task", {"subagent_type": "worker", "description": "slow work",
                              "run_in_background": True})
            ),
            calls_message(call("open_gate", {})),
            "all done",
        ]
    )
    agent = deep.new(parent, sub_agents=[gated_worker(gate)], tools=[open_gate],
                     without_general_sub_agent=True, background_tasks=True)
    with no_thread_leak():
        result = Runner(agent).invoke("go")
    assert result.text == "all done"
    # The task call answered at once, while the worker still waited for the gate.
    started, opened = tool_texts(parent.calls[2].messages)
    assert started.startswith("Started background task bg_1.")
    assert opened == "opened"
    # The notice joined the conversation after the whole tool round, before the next call.
    last = parent.calls[2].messages
    assert [m.role for m in last[-3:]] == [Role.ASSISTANT, Role.TOOL, Role.USER]
    assert last[-2].tool_call_id == last[-3].tool_calls[0].id
    notice = last[-1].content
    assert "Background task bg_1 (sub-agent 'worker': slow work) completed." in notice
    assert "worker: gate passed" in notice
    task = result.session_values[KEY]["bg_1"]
    assert (task.status, task.version, task.reported) == ("completed", 1, True)
    # Told once: no later call got the notice again.
    assert sum("<background-task-notices>" in m.content for m in last) == 1


def test_an_answer_while_a_task_runs_waits_for_the_task_then_asks_the_model_again() -> None:
    gate = threading.Event()

    def answers_early(messages: list[Message]) -> str:
        gate.set()  # the worker finishes only once the agent has answered
        return "I will answer once the worker is done"

    parent = ScriptedChatModel(
        [
            calls_message(
                call("task", {"subagent_type": "worker", "description": "slow work",
                              "run_in_background": True})
            ),
            answers_early,
            lambda messages: "final: " + tool_texts(messages)[-1].splitlines()[-1],
        ]
    )
    agent = deep.new(parent, sub_agents=[gated_worker(gate)], without_general_sub_agent=True,
                     background_tasks=True)
    with no_thread_leak():
        result = Runner(agent).invoke("go")
    assert result.text == "final: worker: gate passed"
    waited = parent.calls[2].messages
    assert waited[-2].role is Role.ASSISTANT
    assert [c.function.name for c in waited[-2].tool_calls] == ["task_output"]
    assert json.loads(waited[-2].tool_calls[0].function.arguments)["block"] is True
    # The model read the result through the wait: no notice repeats it.
    assert not any("<background-task-notices>" in m.content for m in waited)


def test_a_background_command_runs_and_its_output_is_read_with_task_output(
    workdir: Path,
) -> None:
    parent = ScriptedChatModel(
        [
            calls_message(call("execute", {"command": "echo hi; sleep 0.1; echo bye",
                                           "run_in_background": True})),
            calls_message(call("task_output", {"task_id": "bg_1", "block": True})),
            "done",
        ]
    )
    agent = deep.new(parent, shell=LocalShell(workdir), background_tasks=True)
    with no_thread_leak():
        result = Runner(agent).invoke("go")
    assert result.text == "done"
    output = tool_texts(parent.calls[2].messages)[-1]
    assert output.startswith("Background task bg_1 (command: echo hi; sleep 0.1; echo bye) "
                             "completed.")
    assert output.endswith("hi\nbye\n")
    assert result.session_values[KEY]["bg_1"].kind == "shell"


def test_the_foreground_execute_and_task_still_work_with_background_tasks_on(
    workdir: Path,
) -> None:
    parent = ScriptedChatModel(
        [
            calls_message(call("execute", {"command": "echo now"})),
            "done",
        ]
    )
    agent = deep.new(parent, shell=LocalShell(workdir), background_tasks=True)
    result = Runner(agent).invoke("go")
    assert tool_texts(parent.calls[1].messages) == ["now\n"]
    assert KEY not in result.session_values
    offered = {t.name: t for t in parent.calls[0].tools}
    assert {"execute", "task_output", "task_stop"} <= set(offered)
    assert "run_in_background" in offered["execute"].parameters["properties"]


def test_task_stop_kills_a_command_that_never_exits_and_leaves_no_process(
    workdir: Path,
) -> None:
    marker = f"bgtask-{uuid.uuid4().hex}"
    command = f"sleep 1000 # {marker}"
    parent = ScriptedChatModel(
        [
            calls_message(call("execute", {"command": f"exec sh -c '{command}'",
                                           "run_in_background": True})),
            after(lambda: bool(processes_with(marker)), call("task_stop", {"task_id": "bg_1"})),
            "stopped it",
        ]
    )
    agent = deep.new(parent, shell=LocalShell(workdir, timeout=600), background_tasks=True)
    with no_thread_leak():
        result = Runner(agent).invoke("go")
    assert result.text == "stopped it"
    assert tool_texts(parent.calls[2].messages)[-1].startswith("Stopped background task bg_1")
    assert processes_with(marker) == []
    assert result.session_values[KEY]["bg_1"].status == "stopped"


def test_a_command_printing_a_gigabyte_is_bounded(workdir: Path) -> None:
    parent = ScriptedChatModel(
        [
            calls_message(call("execute", {"command": "head -c 1000000000 /dev/zero",
                                           "run_in_background": True})),
            calls_message(call("task_output", {"task_id": "bg_1", "block": True,
                                               "timeout": 120})),
            "done",
        ]
    )
    shell = LocalShell(workdir, timeout=120, max_output_bytes=10_000)
    agent = deep.new(parent, shell=shell, background_tasks=True)
    result = Runner(agent).invoke("go")
    output = tool_texts(parent.calls[2].messages)[-1]
    assert "[Output was truncated due to size limits]" in output
    assert len(output) < 11_000
    assert len(result.session_values[KEY]["bg_1"].output) < 11_000


@pytest.mark.parametrize("tool_name", ["task_output", "task_stop"])
def test_an_unknown_or_foreign_task_id_is_told_to_the_model(workdir: Path, tool_name: str) -> None:
    # bg_1 exists in another run only: in this one, it is unknown.
    first = ScriptedChatModel([
        calls_message(call("execute", {"command": "true", "run_in_background": True})),
        "ok",
        "ok",  # when the command still ran at the first answer (the agent waited for it)
    ])
    Runner(deep.new(first, shell=LocalShell(workdir), background_tasks=True)).invoke("go")
    parent = ScriptedChatModel(
        [calls_message(call(tool_name, {"task_id": "bg_1"})), "ok"]
    )
    agent = deep.new(parent, shell=LocalShell(workdir), background_tasks=True)
    result = Runner(agent).invoke("go")
    assert result.text == "ok"
    text = tool_texts(parent.calls[1].messages)[-1]
    assert "there is no background task 'bg_1' in this run; its tasks are: none" in text


def test_a_stale_worker_cannot_complete_a_task_that_was_stopped() -> None:
    gate = threading.Event()
    finished = threading.Event()

    @tool
    def ignores_cancel() -> str:
        """Work that does not stop when asked."""
        gate.wait(GUARD)
        finished.set()
        return "late result"

    worker_model = ScriptedChatModel([calls_message(call("ignores_cancel", {})), "late answer"])
    worker = ChatModelAgent("worker", "ignores stops", worker_model, tools=[ignores_cancel])

    @tool
    def release() -> str:
        """Let the stale worker finish."""
        gate.set()
        assert finished.wait(GUARD)
        return "released"

    parent = ScriptedChatModel(
        [
            calls_message(call("task", {"subagent_type": "worker", "description": "x",
                                        "run_in_background": True})),
            after(lambda: bool(worker_model.calls), call("task_stop", {"task_id": "bg_1"})),
            calls_message(call("release", {})),
            calls_message(call("task_output", {"task_id": "bg_1"})),
            "done",
        ]
    )
    agent = deep.new(
        parent, sub_agents=[worker], tools=[release], without_general_sub_agent=True,
        background_tasks=True,
    )
    with no_thread_leak():
        result = Runner(agent).invoke("go")
    assert result.text == "done"
    task = result.session_values[KEY]["bg_1"]
    assert task.status == "stopped"
    assert task.version == 2  # the stop fenced the worker off
    assert "late answer" not in task.output
    assert "stopped" in tool_texts(parent.calls[4].messages)[-1]


def test_cancelling_the_run_stops_its_tasks_and_leaves_no_process(workdir: Path) -> None:
    marker = f"bgtask-{uuid.uuid4().hex}"
    handle = CancelHandle()
    started = threading.Event()

    @tool
    def sleeper() -> str:
        """Sleep long, cancellably."""
        started.set()
        cancellable_sleep(1000)
        return "woke"

    worker = ChatModelAgent(
        "worker", "sleeps", ScriptedChatModel([calls_message(call("sleeper", {})), "x"]),
        tools=[sleeper],
    )

    def cancel_now(messages: list[Message]) -> Message:
        wait_until(lambda: bool(processes_with(marker)) and started.is_set(), "the tasks")
        handle.cancel(CancelMode.IMMEDIATE)
        return calls_message(call("task_output", {"task_id": "bg_1", "block": True}))

    parent = ScriptedChatModel(
        [
            calls_message(
                call("execute", {"command": f"exec sh -c 'sleep 1000 # {marker}'",
                                 "run_in_background": True}),
                call("task", {"subagent_type": "worker", "description": "x",
                              "run_in_background": True}),
            ),
            cancel_now,
            "never",
        ]
    )
    agent = deep.new(parent, sub_agents=[worker], shell=LocalShell(workdir, timeout=600),
                     without_general_sub_agent=True, background_tasks=True)
    began = time.monotonic()
    with no_thread_leak(), pytest.raises(AgentCancelledError):
        Runner(agent).invoke("go", with_cancel(handle))
    assert time.monotonic() - began < GUARD
    assert processes_with(marker) == []


def test_the_run_ending_with_an_error_stops_its_tasks(workdir: Path) -> None:
    marker = f"bgtask-{uuid.uuid4().hex}"
    parent = ScriptedChatModel(
        [
            calls_message(call("execute", {"command": f"exec sh -c 'sleep 1000 # {marker}'",
                                           "run_in_background": True})),
            after(lambda: bool(processes_with(marker)), RuntimeError("model broke")),
        ]
    )
    agent = deep.new(parent, shell=LocalShell(workdir, timeout=600), background_tasks=True)
    with no_thread_leak(), pytest.raises(Exception, match="model broke"):
        Runner(agent).invoke("go")
    assert processes_with(marker) == []


def test_at_most_max_running_tasks_run_at_once(workdir: Path) -> None:
    start = {"command": "sleep 0.5", "run_in_background": True}
    parent = ScriptedChatModel(
        [
            calls_message(*[call("execute", start, id=f"c{n}") for n in range(9)]),
            "done",
            "done",  # after waiting for the eight
        ]
    )
    agent = deep.new(parent, shell=LocalShell(workdir), background_tasks=True)
    with no_thread_leak():
        result = Runner(agent).invoke("go")
    texts = tool_texts(parent.calls[1].messages)
    refused = [t for t in texts if "the most this agent runs at once" in t]
    assert len(refused) == 1 and len(texts) == 9
    assert len(result.session_values[KEY]) == 8


def test_a_task_running_when_the_run_pauses_is_stopped_and_restarted_on_resume() -> None:
    gate = threading.Event()
    passes: list[int] = []

    @tool
    def wait_for_gate() -> str:
        """Wait for the gate (a cancel of the task ends the wait)."""
        passes.append(1)
        while not gate.is_set():
            cancellable_sleep(0.01)
        return "gate passed"

    worker = ChatModelAgent(
        "worker", "does slow work",
        ScriptedChatModel(lambda messages: calls_message(call("wait_for_gate", {}))
                          if not any(m.role is Role.TOOL for m in messages) else "worker done"),
        tools=[wait_for_gate],
    )

    @tool
    def ask() -> str:
        """Ask the user."""
        answer: str = interrupt("go on?")
        return answer

    def parent_reply(messages: list[Message]) -> Message | str:
        done = [m.tool_name for m in messages if m.role is Role.TOOL]
        if not done:
            return calls_message(call("task", {"subagent_type": "worker", "description": "x",
                                               "run_in_background": True}, id="t1"))
        if done == ["task"]:
            wait_until(lambda: bool(passes), "the worker")  # it runs when the run pauses
            return calls_message(call("ask", {}, id="a1"))
        if "task_output" not in done:
            return calls_message(call("task_output", {"task_id": "bg_1", "block": True}, id="o1"))
        return "final: " + tool_texts(messages)[-1].splitlines()[-1]

    parent = ScriptedChatModel(parent_reply)
    agent = deep.new(parent, sub_agents=[worker], tools=[ask], without_general_sub_agent=True,
                     background_tasks=True)
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())

    with no_thread_leak():
        paused = runner.invoke("go", with_checkpoint_id("run-1"))
        assert paused.interrupt is not None
        assert passes == [1]  # the worker ran, and was stopped when the run paused
        gate.set()
        [context] = paused.interrupt.contexts
        result = runner.resume("run-1", targets={context.id: "yes"}).result()
    assert result.text == "final: worker done"
    assert passes == [1, 1]  # restarted once
    task = result.session_values[KEY]["bg_1"]
    assert (task.status, task.version, task.restarts) == ("completed", 2, 1)
    told = [m.content for m in parent.calls[-1].messages if m.role is Role.USER]
    assert any("Background task bg_1 (sub-agent 'worker': x) was restarted" in t for t in told)


def test_a_background_command_that_never_exits_is_killed_at_the_shell_s_timeout(
    workdir: Path,
) -> None:
    marker = f"bgtask-{uuid.uuid4().hex}"
    parent = ScriptedChatModel(
        [
            calls_message(call("execute", {"command": f"exec sh -c 'sleep 1000 # {marker}'",
                                           "run_in_background": True})),
            calls_message(call("task_output", {"task_id": "bg_1", "block": True})),
            "done",
        ]
    )
    agent = deep.new(parent, shell=LocalShell(workdir, timeout=0.5), background_tasks=True)
    with no_thread_leak():
        result = Runner(agent).invoke("go")
    assert tool_texts(parent.calls[2].messages)[-1].endswith(
        "completed.\nOutput:\n\n[Command timed out and was killed]")
    assert result.session_values[KEY]["bg_1"].status == "completed"
    assert processes_with(marker) == []


def test_task_output_shows_a_running_command_s_latest_output(workdir: Path) -> None:
    command = "echo compiling; while [ ! -e gate ]; do sleep 0.01; done; echo linked"
    peek = {"task_id": "bg_1"}

    def reply(messages: list[Message]) -> Message | str:
        results = tool_texts(messages)
        if not results:
            return calls_message(call("execute", {"command": command,
                                                  "run_in_background": True}))
        if "completed." in results[-1]:
            return "done"
        if "Its latest output:" not in results[-1] and len(results) < 2 + 200:
            if len(results) > 1:
                time.sleep(0.01)  # the worker reads the command's output as it comes
            return calls_message(call("task_output", peek, id=f"peek{len(results)}"))
        (workdir / "gate").touch()
        return calls_message(call("task_output", {**peek, "block": True}, id="wait"))

    parent = ScriptedChatModel(reply)
    agent = deep.new(parent, shell=LocalShell(workdir, timeout=GUARD), background_tasks=True,
                     max_iterations=300)
    with no_thread_leak():
        Runner(agent).invoke("go")
    peeked, waited = tool_texts(parent.calls[-1].messages)[-2:]
    assert peeked.startswith("Background task bg_1 (command: echo compiling;")
    assert peeked.endswith(" is still running. Call task_output with block=true to wait for "
                           "it, or task_stop to stop it.\nIts latest output:\ncompiling\n")
    assert waited.endswith("completed.\nOutput:\ncompiling\nlinked\n")


def test_a_background_sub_agent_that_asks_to_pause_fails_and_says_so() -> None:
    @tool
    def needs_approval() -> str:
        """Ask a human first."""
        answer: str = interrupt("may I?")
        return answer

    worker = ChatModelAgent(
        "asker", "asks first",
        ScriptedChatModel([calls_message(call("needs_approval", {})), "never"]),
        tools=[needs_approval],
    )
    parent = ScriptedChatModel(
        [
            calls_message(call("task", {"subagent_type": "asker", "description": "x",
                                        "run_in_background": True})),
            calls_message(call("task_output", {"task_id": "bg_1", "block": True})),
            "done",
        ]
    )
    agent = deep.new(parent, sub_agents=[worker], without_general_sub_agent=True,
                     background_tasks=True)
    with no_thread_leak():
        result = Runner(agent).invoke("go")
    assert result.interrupt is None and result.text == "done"  # the run itself never paused
    text = tool_texts(parent.calls[2].messages)[-1]
    assert text.startswith("Background task bg_1 (sub-agent 'asker': x) failed.")
    assert "a background task cannot do; run it in the foreground instead" in text
