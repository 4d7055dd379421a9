"""LocalShell: shell commands in a subprocess, bounded in time and output, ended with the run.

The command runs with ``/bin/sh -c`` in its own session (so in its own process group). Its
output (standard output and standard error through one pipe) is read in the calling thread,
with a deadline; nothing else is started. The process group is killed (``SIGKILL``) when the
command outlives its time limit, when the run is cancelled (through
:func:`~agentkit.abort_on_cancel`), and when the command's shell exits while processes it
left behind are still running, so no command outlives its call.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping

from agentkit._runctx import abort_on_cancel, check_cancelled
from agentkit.backends._base import ExecuteResult
from agentkit.errors import AgentKitValueError

__all__ = ["LocalShell"]

_CHUNK = 65536
_REAP_WAIT = 5.0  # how long to wait for a killed process to be reaped


class LocalShell:
    """A :class:`~agentkit.backends.Shell` that runs commands in a subprocess in ``root``.

    Each :meth:`execute` runs ``/bin/sh -c command`` with ``root`` as its working directory and
    no standard input. It returns once the command ends, or after ``timeout`` seconds at the
    latest: the command's whole process group is killed then (the result says
    ``timed_out``). An immediate cancel of the run kills it at once. Output beyond
    ``max_output_bytes`` is read and dropped (``truncated``), so a command that floods its
    output still runs to its end. Processes the command leaves running in the background
    are killed when its shell exits.

    POSIX only (``/bin/sh``, process groups). This is not a sandbox: the command runs as the
    current user, with the current environment, and can reach anything the user can; ``root``
    is only its working directory.
    Give untrusted agents a container or a remote sandbox (any object with ``execute``).

    Args:
        root: the working directory of the commands (it must exist).
        timeout: the most seconds a command may run.
        max_output_bytes: the most output kept per command.
        env: the environment of the commands (default: this process's).

    Raises:
        ValueError: ``root`` is not a directory, or a limit is not positive.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        timeout: float = 60.0,
        max_output_bytes: int = 100_000,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise AgentKitValueError(
                f"timeout must be a positive number of seconds (got {timeout!r})"
            )
        if (
            isinstance(max_output_bytes, bool)
            or not isinstance(max_output_bytes, int)
            or max_output_bytes < 1
        ):
            raise AgentKitValueError(
                f"max_output_bytes must be a positive int (got {max_output_bytes!r})"
            )
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise AgentKitValueError(f"LocalShell root {os.fspath(root)!r} is not a directory")
        self._root = real
        self._timeout = float(timeout)
        self._max = max_output_bytes
        self._env = dict(env) if env is not None else None

    @property
    def root(self) -> str:
        """The working directory of the commands."""
        return self._root

    @property
    def timeout(self) -> float:
        """The most seconds a command may run."""
        return self._timeout

    def __repr__(self) -> str:
        return f"LocalShell({self._root!r}, timeout={self._timeout:g})"

    def execute(self, command: str) -> ExecuteResult:
        """Run ``command``; return its output and exit status within the time limit.

        Raises:
            ValueError: ``command`` is not a non-empty string.
            AgentCancelledError: the run was cancelled (the command was killed).
        """
        if not isinstance(command, str) or not command.strip():
            raise AgentKitValueError(f"the command must be a non-empty string (got {command!r})")
        check_cancelled()
        deadline = time.monotonic() + self._timeout
        process = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=self._root,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
        try:
            with abort_on_cancel(lambda: _kill_group(process)):
                output, dropped, timed_out = self._collect(process, deadline)
        finally:
            _kill_group(process)  # what the command left running ends with it
            _close(process)
        check_cancelled()  # killed by a cancel: that is the outcome
        text = output.decode("utf-8", errors="replace")
        exit_code = None if timed_out else process.returncode
        return ExecuteResult(text, exit_code, truncated=dropped, timed_out=timed_out)

    def _collect(
        self, process: subprocess.Popen[bytes], deadline: float
    ) -> tuple[bytes, bool, bool]:
        """Read the output until the command ends or the deadline; kill it at the deadline."""
        assert process.stdout is not None
        fd = process.stdout.fileno()
        os.set_blocking(fd, False)
        kept = bytearray()
        dropped = False
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    _kill_group(process)
                    return bytes(kept), dropped, True
                # Wake now and then to notice a shell that exited while a background process
                # it started still holds the pipe open.
                if not selector.select(min(remaining, 0.2)):
                    if process.poll() is not None:
                        break
                    continue
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                room = self._max - len(kept)
                if len(chunk) > room:
                    dropped = True
                kept += chunk[: max(room, 0)]
        try:
            process.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            _kill_group(process)
            return bytes(kept), dropped, True
        return bytes(kept), dropped, False


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the command's process group (it leads its own session); never blocks."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def _close(process: subprocess.Popen[bytes]) -> None:
    """Close the pipe and reap the (killed) shell, waiting a bounded time."""
    if process.stdout is not None:
        process.stdout.close()
    try:
        process.wait(_REAP_WAIT)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignored
        pass
