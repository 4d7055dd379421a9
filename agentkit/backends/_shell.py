"""LocalShell: shell commands in a subprocess, bounded in time and output, ended with the run.

The command runs with ``/bin/sh -c`` in its own session (so in its own process group), with a
minimal environment (no secret of this process reaches it unless passed in ``env``). Its
output (standard output and standard error through one pipe) is read in the calling thread,
with a deadline; nothing else is started. The process group is killed (``SIGKILL``) when the
command outlives its time limit, when the run is cancelled (through
:func:`~agentkit.abort_on_cancel`), and when the command's shell exits while processes it
left behind are still running. A process that leaves the group (``setsid``) is out of reach:
only :class:`~agentkit.backends.SandboxShell` contains those.
"""

from __future__ import annotations

import codecs
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Generator, Iterator, Mapping

import attrs

from agentkit._runctx import abort_on_cancel, check_cancelled
from agentkit.backends._base import ExecuteResult
from agentkit.errors import AgentKitValueError

__all__ = [
    "LocalShell",
    "collect",
    "minimal_environment",
    "output_pieces",
    "read_chunks",
    "read_output",
]

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

    The command's environment is minimal: ``PATH``, ``HOME`` (``root``) and ``LANG``, plus
    what ``env`` adds. Nothing else of this process's environment reaches it, so a secret
    (the checkpoint signing key ``AGENTKIT_CHECKPOINT_KEY``, a model's API key) is in a
    command's environment only when it is passed in ``env``.

    POSIX only (``/bin/sh``, process groups). This is not a sandbox: the command runs as the
    current user and can read and write anything the user can; ``root`` is only its working
    directory. A process that leaves the command's process group (``setsid``, a daemon's
    double fork) is not killed and outlives the call, the run and a cancel; only
    :class:`~agentkit.backends.SandboxShell` contains it (its PID namespace ends with the
    command). Give agents that read untrusted text a :class:`~agentkit.backends.SandboxShell`
    (or a container: any object with ``execute``).

    Args:
        root: the working directory of the commands (it must exist).
        timeout: the most seconds a command may run.
        max_output_bytes: the most output kept per command.
        env: variables added to the minimal environment (``PATH``, ``HOME``, ``LANG``; a key
            given here replaces the default one). Pass a secret here only if the commands
            need it.

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
        self._env = {**minimal_environment(real), **(dict(env) if env is not None else {})}

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
        return collect(self.execute_streaming(command))

    def execute_streaming(self, command: str) -> Generator[ExecuteResult, None, None]:
        """Run ``command``, giving its output as it comes (Eino's ``StreamingShell``).

        Yields :class:`~agentkit.backends.ExecuteResult` pieces: each new piece of output
        (``exit_code`` ``None``), then one last result with no output and the exit status,
        ``truncated`` and ``timed_out`` (see :class:`~agentkit.backends.StreamingShell`). The
        command starts at the first ``next()``; closing the iterator before its end kills it.

        Raises:
            ValueError: ``command`` is not a non-empty string.
            AgentCancelledError: the run was cancelled (the command was killed).
        """
        if not isinstance(command, str) or not command.strip():
            raise AgentKitValueError(f"the command must be a non-empty string (got {command!r})")
        return self._stream(command)

    def _stream(self, command: str) -> Generator[ExecuteResult, None, None]:
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
                dropped, timed_out = yield from output_pieces(
                    process, deadline, self._max, lambda: _kill_group(process)
                )
        finally:
            _kill_group(process)  # what the command left running ends with it
            _close(process)
        check_cancelled()  # killed by a cancel: that is the outcome
        exit_code = None if timed_out else process.returncode
        yield ExecuteResult("", exit_code, truncated=dropped, timed_out=timed_out)


def collect(pieces: Iterator[ExecuteResult]) -> ExecuteResult:
    """The whole result of a streamed command: its pieces' output joined, the last one's
    status."""
    output: list[str] = []
    last = ExecuteResult("", None)
    for last in pieces:
        output.append(last.output)
    return attrs.evolve(last, output="".join(output))


def output_pieces(
    process: subprocess.Popen[bytes], deadline: float, limit: int, kill: Callable[[], None]
) -> Generator[ExecuteResult, None, tuple[bool, bool]]:
    """Yield a command's output as it comes (decoded; the first ``limit`` bytes), until it ends
    or the deadline (``kill()`` it then); return whether output was dropped and whether the
    deadline passed."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    reading = read_chunks(process, deadline, limit, kill)
    while True:
        try:
            chunk = next(reading)
        except StopIteration as stop:
            tail = decoder.decode(b"", final=True)
            if tail:
                yield ExecuteResult(tail, None)
            done: tuple[bool, bool] = stop.value
            return done
        text = decoder.decode(chunk)
        if text:
            yield ExecuteResult(text, None)


def read_output(
    process: subprocess.Popen[bytes], deadline: float, limit: int, kill: Callable[[], None]
) -> tuple[bytes, bool, bool]:
    """Read a command's output until it ends or the deadline; ``kill()`` it at the deadline.

    Returns the first ``limit`` bytes, whether more were read and dropped, and whether the
    deadline passed (see :func:`read_chunks`).
    """
    kept = bytearray()
    reading = read_chunks(process, deadline, limit, kill)
    while True:
        try:
            kept += next(reading)
        except StopIteration as stop:
            dropped, timed_out = stop.value
            return bytes(kept), dropped, timed_out


def read_chunks(
    process: subprocess.Popen[bytes], deadline: float, limit: int, kill: Callable[[], None]
) -> Generator[bytes, None, tuple[bool, bool]]:
    """Yield a command's output as it is read, until it ends or the deadline; ``kill()`` it at
    the deadline.

    Yields the first ``limit`` bytes; returns whether more were read and dropped, and whether
    the deadline passed. Output past ``limit`` is drained so the command is never blocked on a
    full pipe (the deadline bounds how long that goes on).
    """
    assert process.stdout is not None
    fd = process.stdout.fileno()
    os.set_blocking(fd, False)
    kept = 0
    dropped = False
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                kill()
                return dropped, True
            # Wake now and then to notice a command that exited while a background process
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
            room = limit - kept
            if len(chunk) > room:
                dropped = True
                chunk = chunk[: max(room, 0)]
            if chunk:
                kept += len(chunk)
                yield chunk
    try:
        process.wait(max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        kill()
        return dropped, True
    return dropped, False


def minimal_environment(home: str) -> dict[str, str]:
    """The environment a command gets by default: ``PATH``, ``HOME`` (``home``) and ``LANG``.

    Nothing else of this process's environment is passed on: not the checkpoint signing key
    (``AGENTKIT_CHECKPOINT_KEY``), not a model's API key, not a cloud credential.
    """
    return {
        "PATH": os.environ.get("PATH") or os.defpath,
        "HOME": home,
        "LANG": os.environ.get("LANG") or "C.UTF-8",
    }


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
