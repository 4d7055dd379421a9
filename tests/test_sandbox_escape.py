"""The sandbox escape suite: every attempt escapes under LocalShell and fails in SandboxShell.

Each attempt runs under both shells (so the suite can fail: an attempt that is contained
everywhere proves nothing); the table in ``docs/guides/deep-agents.md`` is this suite's result.
Then the bad inputs (a flood of output, a command that never ends, 10,000 forks, a 50 GB file, a
changed process group, a cancel): each bounded, reported, and nothing left running on the host
(the processes carrying the test's token are counted before and after).

Without bubblewrap the sandbox tests skip with a loud reason, unless
``AGENTKIT_REQUIRE_SANDBOX`` is set (CI sets it): then they fail.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from agentkit import AgentCancelledError, CancelHandle, ChatModelAgent, Runner, tool, with_cancel
from agentkit.backends import (
    ExecuteResult,
    LocalShell,
    PathOutsideRootError,
    SandboxBackend,
    SandboxShell,
    SandboxUnavailableError,
    Shell,
)
from agentkit.errors import AgentKitError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, run_events

GUARD = 60.0  # a failure guard only
REQUIRE_ENV = "AGENTKIT_REQUIRE_SANDBOX"
MiB = 1024 * 1024


def _required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def sandbox(root: Path, **options: object) -> SandboxShell:
    """A SandboxShell over ``root``, or a loud skip (a failure under AGENTKIT_REQUIRE_SANDBOX)."""
    try:
        return SandboxShell(root, **options)  # type: ignore[arg-type]
    except SandboxUnavailableError as error:
        if _required():
            pytest.fail(f"the sandbox is required ({REQUIRE_ENV} is set) but cannot run: {error}")
        pytest.skip(
            f"SANDBOX ESCAPE TESTS SKIPPED: {error} (set {REQUIRE_ENV}=1 to make this a failure)"
        )


def _processes_with(token: str) -> list[int]:
    """The host processes whose command line holds ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                if token.encode() in file.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def daemon(token: str) -> str:
    """Shell code that starts a daemon (its own session, a double fork) carrying ``token`` in
    its command line, and waits until it runs (so no outcome depends on how fast a shell kills
    the command's group)."""
    return (
        "(setsid python3 -c 'import time; open(\"daemon.up\", \"w\").close(); "
        f"time.sleep(300)' {token} > /dev/null 2>&1 &); "
        "until [ -e daemon.up ]; do sleep 0.01; done"
    )


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def token() -> Iterator[str]:
    """A unique mark for the processes and files of one test; whatever carries it is killed."""
    mark = f"akesc{secrets.token_hex(5)}"
    yield mark
    _kill_all(_processes_with(mark))


@pytest.fixture
def worker() -> Iterator[subprocess.Popen[bytes]]:
    """A host process standing for the worker: its environment holds the signing key."""
    process = subprocess.Popen(
        ["sleep", "300"],
        env={**os.environ, "AGENTKIT_CHECKPOINT_KEY": "worker-signing-key-7f3a"},
        stdin=subprocess.DEVNULL,
    )
    yield process
    process.kill()
    process.wait(GUARD)


# --- the attempts --------------------------------------------------------------------------------


@attrs.frozen
class Attempt:
    """One way out: the command, and how to tell from the host whether it got out."""

    name: str
    command: Callable[[Context], str]
    escaped: Callable[[Context, ExecuteResult], bool]
    local_needs: Callable[[], str | None] = lambda: None  # why the host cannot show it


@attrs.define
class Context:
    root: Path
    other: Path
    token: str
    worker: subprocess.Popen[bytes]
    decoy: subprocess.Popen[bytes]
    port: int
    cleanup: list[Path] = attrs.Factory(list)


def _outside(context: Context, directory: str | Path) -> Path:
    path = Path(directory) / f".{context.token}-written"
    context.cleanup.append(path)
    return path


def _no_route() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return "the host itself has no route to the network"
    return None


def _unreadable(path: str) -> Callable[[], str | None]:
    return lambda: None if os.access(path, os.R_OK) else f"{path} is not readable by this user"


def _unwritable(path: str) -> Callable[[], str | None]:
    return lambda: None if os.access(path, os.W_OK) else f"{path} is not writable by this user"


_CONNECT = "python3 -c \"import socket; socket.create_connection(('{host}', {port}), 3); print('connected')\""
_ROUTE = (
    "python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
    "s.connect(('192.0.2.1', 9)); print('routed')\""
)
_FORKS = (
    "python3 -c \"\nimport os, time\nn = 0\nfor _ in range(40):\n"
    "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
    "    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    n += 1\nprint('forked', n)\""
)

ATTEMPTS = [
    Attempt(
        "read /etc/shadow",
        lambda c: "cat /etc/shadow",
        lambda c, r: r.exit_code == 0 and "root:" in r.output,
        _unreadable("/etc/shadow"),
    ),
    Attempt(
        "write the host's /tmp",
        lambda c: f"echo x > {_outside(c, tempfile.gettempdir())}",
        lambda c, r: _outside(c, tempfile.gettempdir()).exists(),
    ),
    Attempt(
        "write $HOME",
        lambda c: f"echo x > {_outside(c, Path.home())}",
        lambda c, r: _outside(c, Path.home()).exists(),
        _unwritable(str(Path.home())),
    ),
    Attempt(
        "write /usr",
        lambda c: f"echo x > {_outside(c, '/usr/local')}",
        lambda c, r: _outside(c, "/usr/local").exists(),
        _unwritable("/usr/local"),
    ),
    Attempt(
        "reach 127.0.0.1",
        lambda c: _CONNECT.format(host="127.0.0.1", port=c.port),
        lambda c, r: "connected" in r.output,
    ),
    Attempt(
        "reach the network",
        lambda c: _ROUTE,
        lambda c, r: "routed" in r.output,
        _no_route,
    ),
    Attempt(
        "fork past the process cap (16)",
        lambda c: _FORKS,
        lambda c, r: "forked 40" in r.output,
    ),
    Attempt(
        "fill the disk (16 MiB past a 4 MiB file cap, in the work dir and /tmp)",
        lambda c: (
            f"head -c 16M /dev/zero > big 2>/dev/null; "
            f"head -c 16M /dev/zero > {_outside(c, '/tmp')} 2>/dev/null; "
            f"stat -c %s big {_outside(c, '/tmp')}"
        ),
        lambda c, r: str(16 * MiB) in r.output,
    ),
    Attempt(
        "leave a daemon behind (setsid, double fork)",
        lambda c: daemon(c.token) + "; echo left",
        lambda c, r: bool(_processes_with(c.token)),
    ),
    Attempt(
        "read another run's files",
        lambda c: f"cat ../{c.other.name}/secret.txt; cat {c.other}/secret.txt",
        lambda c, r: "the other run's secret" in r.output,
    ),
    Attempt(
        "signal a host process",
        lambda c: f"kill -9 {c.decoy.pid} && echo signalled",
        lambda c, r: "signalled" in r.output and c.decoy.wait(GUARD) == -signal.SIGKILL,
    ),
    Attempt(
        "read the host's secrets (environment, the worker's /proc/PID/environ)",
        lambda c: f"env; tr '\\0' '\\n' < /proc/{c.worker.pid}/environ",
        lambda c, r: "test-signing-key" in r.output or "worker-signing-key-7f3a" in r.output,
    ),
]


@pytest.fixture
def context(
    tmp_path: Path,
    token: str,
    worker: subprocess.Popen[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Context]:
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "test-signing-key-9c1e")
    root = tmp_path / f"run-{token}"
    other = tmp_path / "run-other"
    root.mkdir()
    other.mkdir()
    (other / "secret.txt").write_text("the other run's secret\n")
    decoy = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # the kernel completes a connect without an accept
        made = Context(root, other, token, worker, decoy, listener.getsockname()[1])
        try:
            yield made
        finally:
            decoy.kill()
            decoy.wait(GUARD)
            for path in made.cleanup:
                path.unlink(missing_ok=True)


def _shells() -> dict[str, Callable[[Path], Shell]]:
    return {
        "LocalShell": lambda root: LocalShell(root, timeout=GUARD),
        "SandboxShell": lambda root: sandbox(
            root, timeout=GUARD, max_processes=16, max_file_mb=4, tmp_mb=4
        ),
    }


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[attempt.name for attempt in ATTEMPTS])
def test_each_attempt_escapes_a_local_shell(attempt: Attempt, context: Context) -> None:
    reason = attempt.local_needs()
    if reason is not None:
        pytest.skip(f"cannot show this attempt escaping here: {reason}")
    shell = _shells()["LocalShell"](context.root)
    result = shell.execute(attempt.command(context))
    assert attempt.escaped(context, result), result


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[attempt.name for attempt in ATTEMPTS])
def test_each_attempt_fails_in_the_sandbox(attempt: Attempt, context: Context) -> None:
    shell = _shells()["SandboxShell"](context.root)
    result = shell.execute(attempt.command(context))
    assert not attempt.escaped(context, result), result
    assert context.decoy.poll() is None and context.worker.poll() is None
    assert _processes_with(context.token) == []


# --- what the sandbox gives ----------------------------------------------------------------------


def test_the_command_works_in_its_directory_with_a_minimal_environment(tmp_path: Path) -> None:
    (tmp_path / "input.txt").write_text("from the host\n")
    shell = sandbox(tmp_path, env={"GREETING": "hello"})
    assert isinstance(shell, Shell)
    result = shell.execute(
        "pwd; cat input.txt; echo made > output.txt; echo $GREETING; echo $HOME; id -un; "
        "python3 -c 'print(6 * 7)'; echo oops >&2; exit 3"
    )
    assert result == ExecuteResult(
        "/workspace\nfrom the host\nhello\n/workspace\nsandbox\n42\noops\n", 3
    )
    assert (tmp_path / "output.txt").read_text() == "made\n"
    environment = shell.execute("env | sort").output.split()
    assert [line.split("=")[0] for line in environment] == ["GREETING", "HOME", "LANG", "PATH", "PWD"]


def test_the_system_and_the_sandbox_root_are_read_only(tmp_path: Path) -> None:
    result = sandbox(tmp_path).execute("touch /usr/x /etc/x /x; touch /tmp/x && echo tmp-ok")
    assert result.output.count("Read-only file system") == 3
    assert result.output.endswith("tmp-ok\n")


def test_with_network_the_loopback_listener_is_reachable(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        command = _CONNECT.format(host="127.0.0.1", port=port)
        assert "connected" in sandbox(tmp_path, network=True).execute(command).output
        assert "Connection refused" in sandbox(tmp_path).execute(command).output


def test_memory_is_capped(tmp_path: Path) -> None:
    shell = sandbox(tmp_path, memory_mb=256)
    result = shell.execute("python3 -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'")
    assert result.exit_code == 1 and "MemoryError" in result.output


# --- bad inputs ----------------------------------------------------------------------------------


def _bounded(shell: SandboxShell, command: str, token: str, *, within: float) -> ExecuteResult:
    """Run ``command`` (beside a sleep carrying ``token``); it must end within ``within`` s and
    leave no process of it on the host."""
    assert _processes_with(token) == []
    started = time.monotonic()
    result = shell.execute(f"python3 -c 'import time; time.sleep(300)' {token} & {command}")
    assert time.monotonic() - started < within
    assert _processes_with(token) == [], "a process of the command outlived it"
    return result


def test_a_command_printing_a_gigabyte_is_capped(tmp_path: Path, token: str) -> None:
    shell = sandbox(tmp_path, timeout=30, max_output_bytes=1000)
    result = _bounded(shell, "head -c 1000000000 /dev/zero | tr '\\0' a", token, within=GUARD)
    assert result.truncated and result.output == "a" * 1000


def test_a_command_that_never_ends_is_killed_at_the_timeout(tmp_path: Path, token: str) -> None:
    shell = sandbox(tmp_path, timeout=1.0)
    result = _bounded(shell, "echo waiting; sleep 300", token, within=1.0 + 10)
    assert result == ExecuteResult("waiting\n", None, timed_out=True)


def test_ten_thousand_forks_stop_at_the_process_cap(tmp_path: Path, token: str) -> None:
    shell = sandbox(tmp_path, timeout=30, max_processes=64)
    forks = (
        "python3 -c \"\nimport os, time\nn = 0\nfor _ in range(10000):\n"
        "    try:\n        pid = os.fork()\n    except OSError as error:\n"
        "        print('refused after', n, error.strerror)\n        break\n"
        "    if pid == 0:\n        time.sleep(300)\n        os._exit(0)\n    n += 1\"; echo done"
    )
    result = _bounded(shell, forks, token, within=GUARD)
    assert "Resource temporarily unavailable" in result.output and result.output.endswith("done\n")
    refused_after = int(result.output.split("refused after ")[1].split()[0])
    assert refused_after < 64


def test_a_fork_bomb_is_contained_and_killed(tmp_path: Path, token: str) -> None:
    shell = sandbox(tmp_path, timeout=3.0, max_processes=32)
    result = _bounded(shell, "bomb() { bomb | bomb & }; bomb; sleep 300", token, within=3.0 + 20)
    assert result.timed_out
    assert "Cannot fork" in result.output or "Resource temporarily unavailable" in result.output


def test_a_fifty_gigabyte_file_stops_at_the_file_cap(tmp_path: Path, token: str) -> None:
    shell = sandbox(tmp_path, timeout=30, max_file_mb=8)
    result = _bounded(
        shell, "head -c 50G /dev/zero > big; truncate -s 50G sparse; echo exit=$?", token,
        within=GUARD,
    )
    assert "File size limit exceeded" in result.output and "exit=1" in result.output
    assert (tmp_path / "big").stat().st_size == 8 * MiB
    assert not (tmp_path / "sparse").exists() or (tmp_path / "sparse").stat().st_size == 0


def test_a_command_that_changes_its_process_group_is_still_killed(
    tmp_path: Path, token: str
) -> None:
    shell = sandbox(tmp_path, timeout=1.0)
    escape = (
        "python3 -c \"\nimport os, time\nif os.fork() == 0:\n    os.setsid()\n"
        "    time.sleep(300)\nos.setpgid(0, 0)\ntime.sleep(300)\" " + token
    )
    result = _bounded(shell, escape, token, within=1.0 + 10)
    assert result.timed_out


def test_cancelling_the_run_kills_the_sandboxed_command_and_its_daemons(
    tmp_path: Path, token: str
) -> None:
    shell = sandbox(tmp_path, timeout=300.0)
    handle = CancelHandle()
    ran: list[ExecuteResult] = []

    @tool
    def run_command() -> str:
        """Runs a long command."""
        ran.append(
            shell.execute(f"{daemon(token)}; echo started > started.txt; sleep 300")
        )
        return "finished"

    model = ScriptedChatModel([calls_message(call("run_command")), "never"])
    agent = ChatModelAgent("runner", "runs commands", model, tools=[run_command])

    def cancel_when_running() -> None:
        deadline = time.monotonic() + GUARD
        while not (tmp_path / "started.txt").exists() and time.monotonic() < deadline:
            threading.Event().wait(0.02)
        handle.cancel()

    canceller = threading.Thread(target=cancel_when_running)
    canceller.start()
    started = time.monotonic()
    events = run_events(lambda: Runner(agent).query("go", with_cancel(handle)), timeout=GUARD)
    canceller.join(GUARD)
    assert time.monotonic() - started < GUARD
    assert isinstance(events[-1].err, AgentCancelledError)
    assert ran == []
    assert _processes_with(token) == []


def _eventually(condition: Callable[[], bool]) -> bool:
    """Whether ``condition()`` holds within GUARD seconds (a bound, not a wait for luck)."""
    deadline = time.monotonic() + GUARD
    while not condition():
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.05)
    return True


def test_a_killed_worker_takes_its_sandboxed_command_and_daemons_with_it(
    tmp_path: Path, token: str
) -> None:
    sandbox(tmp_path)  # skips or fails as the others do
    repo = str(Path(__file__).resolve().parent.parent)
    script = (
        "import sys\n"
        "from agentkit.backends import SandboxShell\n"
        "SandboxShell(sys.argv[1], timeout=300).execute(\n"
        f"    {daemon(token) + '; echo > started; sleep 300'!r})\n"
    )
    environment = {**os.environ, "PYTHONPATH": repo}
    worker = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], env=environment, stdin=subprocess.DEVNULL
    )
    try:
        assert _eventually(lambda: (tmp_path / "started").exists())
        daemons = [pid for pid in _processes_with(token) if pid != worker.pid]
        assert any(b"python3" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in daemons)
        left = [
            path for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")
            for path in Path(base).glob(f"agentkit-sandbox-{worker.pid}-*")
        ]
    finally:
        worker.kill()
        worker.wait(GUARD)
    assert _eventually(lambda: _processes_with(token) == [])  # --die-with-parent
    if left:  # its pids cgroup is left empty; the next process to make a sandbox removes it
        subprocess.run(
            [sys.executable, "-c", "from agentkit.backends import SandboxShell\n"
             f"SandboxShell({str(tmp_path)!r})"],
            env=environment, check=True, timeout=GUARD,
        )
        assert not any(path.exists() for path in left)


# --- the backend and the errors ------------------------------------------------------------------


def test_the_sandbox_backend_speaks_the_sandbox_paths(tmp_path: Path) -> None:
    try:
        backend = SandboxBackend(tmp_path, timeout=GUARD)
    except SandboxUnavailableError:
        sandbox(tmp_path)  # skips or fails as the others do
        raise
    backend.write("notes/plan.md", "1. read\n")
    assert backend.execute("cat /workspace/notes/plan.md").output == "1. read\n"
    backend.execute("echo built > /workspace/out.txt")
    assert backend.read("/workspace/out.txt") == "built\n"
    assert backend.read("out.txt") == "built\n"
    with pytest.raises(PathOutsideRootError):
        backend.read(str(tmp_path / "out.txt"))  # a host path is not one the agent knows
    assert backend.shell.root == str(tmp_path.resolve())


def test_no_bwrap_is_a_clear_error_never_a_local_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailableError, match="bubblewrap") as raised:
        SandboxShell(tmp_path)
    assert isinstance(raised.value, AgentKitError) and isinstance(raised.value, RuntimeError)
    assert "apt-get install bubblewrap" in str(raised.value)


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timeout"):
        SandboxShell(tmp_path, timeout=0)
    with pytest.raises(ValueError, match="max_processes"):
        SandboxShell(tmp_path, max_processes=0)
    with pytest.raises(ValueError, match="not a directory"):
        SandboxShell(tmp_path / "missing")
    with pytest.raises(ValueError, match="env must map"):
        SandboxShell(tmp_path, env={"A=B": "x"})
    shell = sandbox(tmp_path)
    with pytest.raises(ValueError, match="non-empty"):
        shell.execute("  ")
