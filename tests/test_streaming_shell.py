"""StreamingShell (Eino's): LocalShell, SandboxShell and SandboxBackend give a command's output
as it comes, and a deep agent's ``execute`` streams it to the caller while the command runs.

Each test holds the command at a gate (a file it waits for) after its first line, and reads that
line before opening the gate: the output arrived while the command ran, not after it ended.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agentkit import Role, Runner
from agentkit.backends import (
    ExecuteResult,
    LocalShell,
    SandboxBackend,
    SandboxShell,
    SandboxUnavailableError,
    StreamingShell,
)
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import deep
from agentkit.testing import call, calls_message, no_thread_leak

GUARD = 20.0  # seconds: a guard against hangs, never a pace
GATED = "echo first; while [ ! -e gate ]; do sleep 0.01; done; echo second; exit 3"


def processes_with(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as file:
                    if marker.encode() in file.read():
                        found.append(int(name))
            except OSError:
                continue
    return found


def local(root: Path) -> StreamingShell:
    return LocalShell(root, timeout=GUARD)


def sandboxed(root: Path) -> StreamingShell:
    try:
        return SandboxShell(root, timeout=GUARD)
    except SandboxUnavailableError as error:
        if os.environ.get("AGENTKIT_REQUIRE_SANDBOX"):
            raise
        pytest.skip(f"bubblewrap cannot run here: {error}")


def sandbox_backend(root: Path) -> StreamingShell:
    sandboxed(root)  # skips where bubblewrap cannot run
    return SandboxBackend(root, timeout=GUARD)


SHELLS: dict[str, Callable[[Path], StreamingShell]] = {
    "local": local, "sandbox": sandboxed, "sandbox-backend": sandbox_backend,
}


@pytest.mark.parametrize("kind", SHELLS)
def test_a_streaming_shell_gives_the_output_while_the_command_runs(
    kind: str, tmp_path: Path
) -> None:
    shell = SHELLS[kind](tmp_path)
    assert isinstance(shell, StreamingShell)
    pieces = shell.execute_streaming(GATED)
    first = next(pieces)
    assert first == ExecuteResult("first\n", None)
    (tmp_path / "gate").touch()  # the command was waiting for it
    rest = list(pieces)
    assert "".join(p.output for p in rest) == "second\n"
    assert rest[-1] == ExecuteResult("", 3)
    assert all(p.exit_code is None for p in rest[:-1])


@pytest.mark.parametrize("kind", SHELLS)
def test_the_pieces_joined_are_what_execute_returns(kind: str, tmp_path: Path) -> None:
    shell = SHELLS[kind](tmp_path)
    (tmp_path / "gate").touch()
    whole = shell.execute(GATED)
    assert whole == ExecuteResult("first\nsecond\n", 3)
    pieces = list(shell.execute_streaming("printf 'caf\\303'; printf '\\251 ok'"))
    assert "".join(p.output for p in pieces) == "café ok"  # a character split across reads


@pytest.mark.parametrize("kind", SHELLS)
def test_closing_the_stream_kills_the_command(kind: str, tmp_path: Path) -> None:
    shell = SHELLS[kind](tmp_path)
    marker = f"stream-{uuid.uuid4().hex}"
    pieces = shell.execute_streaming(f"echo started; exec sh -c 'sleep 1000 # {marker}'")
    assert next(pieces).output == "started\n"
    deadline = time.monotonic() + GUARD
    while not processes_with(marker):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pieces.close()
    # SIGKILL was sent to the command's group; a loaded machine may take a moment to run
    # the kernel's exit of a process that is not the reaped shell itself.
    deadline = time.monotonic() + GUARD
    while processes_with(marker):
        assert time.monotonic() < deadline, "the command outlived the closed stream"
        time.sleep(0.01)


def test_a_streamed_output_is_bounded_and_says_it_was_cut(tmp_path: Path) -> None:
    shell = LocalShell(tmp_path, timeout=GUARD, max_output_bytes=1000)
    pieces = list(shell.execute_streaming("head -c 100000000 /dev/zero | tr '\\0' x"))
    assert sum(len(p.output) for p in pieces) == 1000
    assert pieces[-1].truncated and pieces[-1].exit_code == 0


def test_a_bad_command_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="non-empty string"):
        LocalShell(tmp_path).execute_streaming("  ")


@pytest.mark.parametrize("kind", ["local", "sandbox"])
def test_execute_streams_the_output_to_the_caller_while_the_command_runs(
    kind: str, tmp_path: Path
) -> None:
    shell = SHELLS[kind](tmp_path)
    model = ScriptedChatModel([calls_message(call("execute", {"command": GATED})), "done"])
    agent = deep.new(model, shell=shell, background_tasks=True)
    with no_thread_leak():
        events = Runner(agent, enable_streaming=True).query("go")
        for event in events:
            output = event.output
            if output is None or output.message_output is None:
                continue
            variant = output.message_output
            if variant.role is not Role.TOOL:
                continue
            assert variant.is_streaming and variant.message_stream is not None
            first = variant.message_stream.recv()
            assert first.content == "first\n"
            (tmp_path / "gate").touch()
            rest = "".join(chunk.content for chunk in variant.message_stream)
            assert first.content + rest == "first\nsecond\n\n[Command failed with exit code 3]"
        result = events.result()
    assert result.text == "done"
    assert [m.content for m in model.calls[1].messages if m.role is Role.TOOL] == [
        "first\nsecond\n\n[Command failed with exit code 3]"
    ]
