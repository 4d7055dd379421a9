"""A deep agent's process killed with SIGKILL while a background task runs: resumed, the task
is restarted (the model is told), completes once, and nothing is left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentkit import CheckpointBusyError, Role, Runner
from agentkit.backends import SandboxShell, SandboxUnavailableError
from agentkit.checkpoint import FileCheckPointStore
from agentkit.prebuilt import deep
from agentkit.testing import no_thread_leak
from tests.deep_background_crash_child import LEASE_TTL, SHELL_TASK, build

ROOT = Path(__file__).resolve().parent.parent
GUARD = 60.0  # seconds: a guard against hangs, never a pace


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as file:
                    fields = file.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != b"Z":
                found.append(int(name))
    return found


def sandbox_runs(where: Path) -> bool:
    try:
        SandboxShell(where)
    except SandboxUnavailableError as error:
        if os.environ.get("AGENTKIT_REQUIRE_SANDBOX"):
            raise
        pytest.skip(f"bubblewrap cannot run here: {error}")
    return True


def sandboxed_processes(work: Path) -> list[int]:
    """The live processes whose command line is the background command's."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as file:
                    if SHELL_TASK.encode() in file.read():
                        found.append(int(name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("kind", ["agent", "shell"])
def test_a_background_task_killed_with_its_process_is_restarted_on_resume_and_completes_once(
    tmp_path: Path, kind: str
) -> None:
    store_dir, work = tmp_path / "store", tmp_path / "work"
    store_dir.mkdir()
    work.mkdir()
    if kind == "shell":
        sandbox_runs(work)
    before = children_of(os.getpid())
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.deep_background_crash_child", str(store_dir), "run-1",
         str(work), kind],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + GUARD
        while not (work / "started").exists():  # the task runs, the agent waits for it
            assert child.poll() is None, child.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the background task never started"
            threading.Event().wait(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(GUARD)
        assert child.returncode == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    assert (work / "effects").read_text() == "start\n"
    if kind == "shell":  # the sandbox died with the process (--die-with-parent)
        deadline = time.monotonic() + GUARD
        while sandboxed_processes(work):
            assert time.monotonic() < deadline, "the sandboxed command outlived its process"
            threading.Event().wait(0.02)
    (work / "go").touch()

    agent, model = build(work, kind)
    runner = Runner(agent, checkpoint_store=FileCheckPointStore(store_dir),
                    lease_ttl=LEASE_TTL)
    deadline = time.monotonic() + GUARD
    with no_thread_leak():
        while True:
            try:
                result = runner.resume("run-1").result()
                break
            except CheckpointBusyError:  # the dead run's lease has not expired yet
                assert time.monotonic() < deadline
                threading.Event().wait(0.1)

    assert result.text == ("final: counter: worked" if kind == "agent" else "final: worked")
    # The killed worker started the work; the restarted one did it, once.
    assert (work / "effects").read_text() == "start\nstart\nend\n"
    task = result.session_values[deep.SESSION_KEY_BACKGROUND_TASKS]["bg_1"]
    assert (task.status, task.version, task.restarts) == ("completed", 2, 1)
    # The model was told of the restart, before its next call, after the whole tool round.
    last = model.calls[-1].messages
    notices = [m for m in last if m.role is Role.USER and "restarted" in m.content]
    assert len(notices) == 1 and last[-1] is notices[0]
    title = "sub-agent 'counter': work" if kind == "agent" else "command: echo start >> effects"
    assert f"Background task bg_1 ({title}" in last[-1].content
    assert "was restarted" in last[-1].content
    assert last[-2].role is Role.TOOL and last[-3].role is Role.ASSISTANT
    assert children_of(os.getpid()) == before
