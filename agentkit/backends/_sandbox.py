"""SandboxShell and SandboxBackend: shell commands confined by bubblewrap (``bwrap``).

How a command runs (one ``bwrap`` per :meth:`SandboxShell.execute`)::

    [pids cgroup]  bwrap --unshare-all --unshare-user --disable-userns --die-with-parent ...
                     └─ pid 1 (bwrap's reaper, in a new PID namespace)
                          └─ prlimit --as --cpu --fsize [--nproc] -- /bin/sh -c COMMAND

- Namespaces: new user (the command is uid 1000 without capabilities; nested user namespaces
  are refused), PID, IPC, UTS, cgroup and network namespaces (the network one has only a
  loopback device that is down, unless ``network=True``).
- File system: a fresh root with ``/usr`` (and the ``/bin``, ``/lib``... links to it)
  read-only, a minimal ``/etc`` (generated ``passwd``, ``group``, ``hosts``,
  ``nsswitch.conf``; the host's dynamic-linker cache, ``alternatives``, CA certificates,
  time zone, and with the network its resolver configuration; no ``shadow``, no host
  accounts), fresh ``/proc`` and ``/dev``, a size-capped tmpfs on ``/tmp``, and the work
  directory bound read-write on ``/workspace``. Nothing else of the host is there.
- Environment: ``PATH``, ``HOME=/workspace``, ``LANG`` and what ``env`` adds; never this
  process's.
- Limits: ``RLIMIT_AS`` (``memory_mb``), ``RLIMIT_CPU`` (the timeout), ``RLIMIT_FSIZE``
  (``max_file_mb``), no core files; processes: a ``pids`` cgroup when one can be made (as root,
  where ``RLIMIT_NPROC`` does not count), else ``RLIMIT_NPROC`` (which counts for any other
  user, per user namespace).
- Ending: the command's end ends its PID namespace, so every process it left (``setsid``, a
  double fork, a changed process group) is killed by the kernel. On timeout or cancel the
  ``bwrap`` session is killed (its reaper dies with it, and the namespace with the reaper) and,
  with a cgroup, every process still in the cgroup.
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Generator, Iterator, Mapping
from contextlib import ExitStack, contextmanager

from agentkit._runctx import abort_on_cancel, check_cancelled
from agentkit.backends._base import ExecuteResult
from agentkit.backends._errors import SandboxUnavailableError
from agentkit.backends._local import LocalBackend
from agentkit.backends._match import SEARCH_TIMEOUT, MiB
from agentkit.backends._shell import collect, output_pieces
from agentkit.errors import AgentKitValueError

__all__ = ["SANDBOX_WORKDIR", "SandboxBackend", "SandboxShell"]

SANDBOX_WORKDIR = "/workspace"
"""Where the work directory is inside the sandbox (its working directory and ``HOME``)."""

_UID = 1000
_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Host files a program needs and that hold no secret (bound read-only when present).
_ETC_SHARED = (
    "alternatives",  # /usr/bin/awk and friends are links through it
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "ssl/certs",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
)
_ETC_NETWORK = ("resolv.conf", "gai.conf", "host.conf")
_ETC_GENERATED = {
    "passwd": (
        f"sandbox:x:{_UID}:{_UID}:sandbox:{SANDBOX_WORKDIR}:/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    ),
    "group": f"sandbox:x:{_UID}:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "hostname": "sandbox\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
}
_PRLIMIT = ("/usr/bin/prlimit", "/bin/prlimit")
_KILL_WAIT = 5.0  # how long the cleanup waits for killed processes to leave the cgroup


class SandboxShell:
    """A :class:`~agentkit.backends.Shell` that runs each command in a bubblewrap sandbox.

    The command (``/bin/sh -c command``) sees ``root`` as ``/workspace``, its working directory
    and the only place it can write that outlives it; the system (``/usr``) is read-only; it
    has a minimal ``/etc`` (no ``/etc/shadow``, no host accounts), a fresh ``/tmp`` of
    ``tmp_mb`` MiB, no view of the host's other files, processes or environment, and no
    network unless ``network=True``. Its memory (address space), CPU time, process count and
    file sizes are capped; it is killed with every process it started (daemons included) when
    it ends, after ``timeout`` seconds, or when the run is cancelled. See the module for how.

    What it does not protect against: a kernel exploit (the sandbox shares the host's kernel;
    no seccomp filter is installed beyond refusing new user namespaces), side channels
    (timing, cache, ``/proc/cpuinfo``), reading what ``/usr`` holds (a secret installed under
    ``/usr`` is readable), the host's resources beyond the caps (``max_processes`` processes
    may each use ``memory_mb`` and spin a CPU for ``timeout`` seconds; disk use in ``root``
    is capped per file, not in total), and anything reachable over the network when
    ``network=True``. Output past ``max_output_bytes`` is read and dropped, so a flood costs
    the host's CPU until the command ends or times out.

    Needs Linux with bubblewrap (the ``bwrap`` binary, Debian package ``bubblewrap``, 0.8 or
    newer), user namespaces, and ``prlimit`` (util-linux); run as root it also needs a
    writable ``pids`` cgroup to cap processes (else pass ``max_processes=None``). It never
    falls back to an unconfined shell: when it cannot run it raises
    :class:`~agentkit.backends.SandboxUnavailableError` when made.

    Example::

        shell = SandboxShell("workspace", timeout=30)
        shell.execute("echo hello > note.txt && cat /etc/shadow")
        # ExecuteResult(output='cat: /etc/shadow: No such file or directory\\n', exit_code=1)

    Args:
        root: the work directory (it must exist); ``/workspace`` inside.
        timeout: the most seconds a command may run (wall clock; its CPU time is capped to
            the same).
        network: give the command the host's network (the sandbox has none by default).
        memory_mb: the most address space of each process, in MiB (``None``: no cap). It is
            address space, not resident memory: the JVM, which reserves much of it up front,
            needs more than the default.
        max_processes: the most processes (and threads) the command may run at once
            (``None``: no cap).
        max_output_bytes: the most output kept per command.
        max_file_mb: the largest file the command may write, in MiB (``None``: no cap).
        tmp_mb: the size of the command's ``/tmp`` (a tmpfs, so it is host memory), in MiB.
        env: variables added to the sandbox's environment (``PATH``, ``HOME=/workspace``,
            ``LANG``); pass a secret here only if the commands need it.

    Raises:
        ValueError: ``root`` is not a directory, or a limit is not positive.
        SandboxUnavailableError: bubblewrap, user namespaces, ``prlimit`` or (as root with
            ``max_processes``) a pids cgroup is missing.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        timeout: float = 60.0,
        network: bool = False,
        memory_mb: int | None = 1024,
        max_processes: int | None = 256,
        max_output_bytes: int = 1_000_000,
        max_file_mb: int | None = 1024,
        tmp_mb: int = 64,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise AgentKitValueError(
                f"timeout must be a positive number of seconds (got {timeout!r})"
            )
        _check_count("max_output_bytes", max_output_bytes)
        _check_count("tmp_mb", tmp_mb)
        for name, value in (
            ("memory_mb", memory_mb),
            ("max_processes", max_processes),
            ("max_file_mb", max_file_mb),
        ):
            if value is not None:
                _check_count(name, value)
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise AgentKitValueError(f"SandboxShell root {os.fspath(root)!r} is not a directory")
        self._root = real
        self._timeout = float(timeout)
        self._network = bool(network)
        self._memory_mb = memory_mb
        self._max_processes = max_processes
        self._max_output = max_output_bytes
        self._max_file_mb = max_file_mb
        self._tmp_mb = tmp_mb
        given: list[tuple[object, object]] = list((env or {}).items())
        for variable, text in given:
            if (
                not isinstance(variable, str) or not variable or "=" in variable
                or "\x00" in variable or not isinstance(text, str) or "\x00" in text
            ):
                raise AgentKitValueError(
                    f"env must map variable names to text (got {variable!r}: {text!r}); a "
                    "name is non-empty, without '=' or NUL"
                )
        self._env = {
            "PATH": _PATH,
            "HOME": SANDBOX_WORKDIR,
            "LANG": "C.UTF-8",
            **(dict(env) if env is not None else {}),
        }
        self._bwrap, self._prlimit = _tools()
        self._cgroups = _pids_cgroups() if max_processes is not None else None
        if max_processes is not None and self._cgroups is None and os.geteuid() == 0:
            raise SandboxUnavailableError(
                "SandboxShell: running as root, the process cap (max_processes) needs a "
                "writable pids cgroup (RLIMIT_NPROC does not count root's processes), and none "
                "could be made under /sys/fs/cgroup; run the worker as an unprivileged user, "
                "give it a delegated pids cgroup, or pass max_processes=None"
            )

    @property
    def root(self) -> str:
        """The work directory on the host (``/workspace`` in the sandbox)."""
        return self._root

    @property
    def workdir(self) -> str:
        """The work directory as the command sees it: ``/workspace``."""
        return SANDBOX_WORKDIR

    @property
    def timeout(self) -> float:
        """The most seconds a command may run."""
        return self._timeout

    @property
    def network(self) -> bool:
        """Whether commands have the host's network."""
        return self._network

    def __repr__(self) -> str:
        return (
            f"SandboxShell({self._root!r}, timeout={self._timeout:g}, network={self._network}, "
            f"memory_mb={self._memory_mb}, max_processes={self._max_processes})"
        )

    def execute(self, command: str) -> ExecuteResult:
        """Run ``command`` in the sandbox; return its output and exit status.

        A command killed by a limit reports the shell's status for it (``137`` for
        ``SIGKILL``, ``153`` for a file too large...) and what it printed about it; one killed
        at the time limit has ``timed_out`` and no exit code.

        Raises:
            ValueError: ``command`` is not a non-empty string.
            AgentCancelledError: the run was cancelled (the command and everything it started
                were killed).
        """
        return collect(self.execute_streaming(command))

    def execute_streaming(self, command: str) -> Generator[ExecuteResult, None, None]:
        """Run ``command`` in the sandbox, giving its output as it comes (Eino's
        ``StreamingShell``).

        Yields :class:`~agentkit.backends.ExecuteResult` pieces: each new piece of output
        (``exit_code`` ``None``), then one last result with no output and the exit status,
        ``truncated`` and ``timed_out``, as :meth:`execute` reports them. The command starts
        at the first ``next()``; closing the iterator before its end kills the sandbox.

        Raises:
            ValueError: ``command`` is not a non-empty string.
            AgentCancelledError: the run was cancelled (the command and everything it started
                were killed).
        """
        if not isinstance(command, str) or not command.strip():
            raise AgentKitValueError(f"the command must be a non-empty string (got {command!r})")
        if "\x00" in command:
            raise AgentKitValueError("the command holds a NUL character")
        return self._stream(command)

    def _stream(self, command: str) -> Generator[ExecuteResult, None, None]:
        check_cancelled()
        deadline = time.monotonic() + self._timeout
        with ExitStack() as stack:
            cgroup = (
                stack.enter_context(self._cgroups.make(self._max_processes))
                if self._cgroups is not None and self._max_processes is not None
                else None
            )
            fds = stack.enter_context(_etc_pipes())
            info_read, info_write = os.pipe()  # bwrap writes its reaper's PID there
            stack.callback(os.close, info_read)
            argv = self._argv(command, fds, info_write)
            if cgroup is not None:  # join the cgroup before bwrap starts: nothing escapes it
                argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', cgroup.procs, *argv]
            try:
                process = subprocess.Popen(
                    argv,
                    env={"PATH": _PATH},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=[*fds.values(), info_write],
                )
            finally:  # bwrap has its copies
                _close_fds(fds)
                os.close(info_write)

            def kill() -> None:
                _kill_session(process)
                if cgroup is not None:
                    cgroup.kill_once()

            try:
                with abort_on_cancel(kill):
                    dropped, timed_out = yield from output_pieces(
                        process, deadline, self._max_output, kill
                    )
            finally:
                kill()  # what the command left running ends with it (the namespace did too)
                _reap(process)
                # The reaper dies with bwrap, and its PID namespace with it, a moment later:
                # wait for that, so nothing of the command runs once execute returns.
                _wait_gone(_reaper_pid(info_read), _KILL_WAIT)
                if cgroup is not None:
                    cgroup.kill_all(_KILL_WAIT)
        check_cancelled()
        exit_code = None if timed_out else process.returncode
        yield ExecuteResult("", exit_code, truncated=dropped, timed_out=timed_out)

    def _argv(self, command: str, fds: Mapping[str, int], info: int) -> list[str]:
        argv = [
            self._bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--uid", str(_UID),
            "--gid", str(_UID),
            "--die-with-parent",
            "--new-session",
            "--hostname", "sandbox",
            "--clearenv",
        ]
        if self._network:
            argv.append("--share-net")
        for name, value in self._env.items():
            argv += ["--setenv", name, value]
        argv += _system_binds()
        for name in (*_ETC_SHARED, *(_ETC_NETWORK if self._network else ())):
            argv += ["--ro-bind-try", "/etc/" + name, "/etc/" + name]
        for name, fd in fds.items():
            argv += ["--ro-bind-data", str(fd), "/etc/" + name]
        argv += ["--info-fd", str(info)]
        argv += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", str(self._tmp_mb * MiB),
            "--tmpfs", "/tmp",
            "--bind", self._root, SANDBOX_WORKDIR,
            "--remount-ro", "/",  # bwrap's root is a tmpfs: no writing there either
            "--chdir", SANDBOX_WORKDIR,
            "--",
            self._prlimit,
            "--core=0",
            f"--cpu={math.ceil(self._timeout) + 1}",
        ]
        if self._memory_mb is not None:
            argv.append(f"--as={self._memory_mb * MiB}")
        if self._max_file_mb is not None:
            argv.append(f"--fsize={self._max_file_mb * MiB}")
        if self._max_processes is not None and self._cgroups is None:
            argv.append(f"--nproc={self._max_processes}")
        argv += ["--", "/bin/sh", "-c", command]
        return argv


class SandboxBackend(LocalBackend):
    """A :class:`~agentkit.backends.LocalBackend` over ``root`` that is also the
    :class:`SandboxShell` over it: one object for a deep agent's ``backend=`` and ``shell=``.

    What it adds to a ``LocalBackend`` and a ``SandboxShell`` made apart: they cannot disagree
    on the directory, and the file tools speak the sandbox's paths. An absolute path is read
    as the commands see it (``/workspace/report.md`` is ``report.md``); a host path is refused
    like any path outside the root. File operations run in this process (not in the sandbox),
    confined under ``root`` as :class:`~agentkit.backends.LocalBackend` confines them.

    Example::

        sandbox = SandboxBackend("workspace", timeout=30)
        agent = deep.new(model, backend=sandbox, shell=sandbox)

    Args:
        root: the work directory (it must exist).
        max_file_bytes: as for :class:`~agentkit.backends.LocalBackend`.
        search_timeout: as for :class:`~agentkit.backends.LocalBackend`.
        timeout: as for :class:`SandboxShell`.
        network: as for :class:`SandboxShell`.
        memory_mb: as for :class:`SandboxShell`.
        max_processes: as for :class:`SandboxShell`.
        max_output_bytes: as for :class:`SandboxShell`.
        max_file_mb: as for :class:`SandboxShell`.
        tmp_mb: as for :class:`SandboxShell`.
        env: as for :class:`SandboxShell`.

    Raises:
        ValueError: a setting is invalid.
        SandboxUnavailableError: the sandbox cannot run here (see :class:`SandboxShell`).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_file_bytes: int = 10 * MiB,
        search_timeout: float = SEARCH_TIMEOUT,
        timeout: float = 60.0,
        network: bool = False,
        memory_mb: int | None = 1024,
        max_processes: int | None = 256,
        max_output_bytes: int = 1_000_000,
        max_file_mb: int | None = 1024,
        tmp_mb: int = 64,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(root, max_file_bytes=max_file_bytes, search_timeout=search_timeout)
        self._absolute_root = SANDBOX_WORKDIR
        self._shell = SandboxShell(
            self.root,
            timeout=timeout,
            network=network,
            memory_mb=memory_mb,
            max_processes=max_processes,
            max_output_bytes=max_output_bytes,
            max_file_mb=max_file_mb,
            tmp_mb=tmp_mb,
            env=env,
        )

    @property
    def shell(self) -> SandboxShell:
        """The sandbox the commands run in."""
        return self._shell

    def __repr__(self) -> str:
        return f"SandboxBackend({self.root!r})"

    def execute(self, command: str) -> ExecuteResult:
        """Run ``command`` in the sandbox (see :meth:`SandboxShell.execute`)."""
        return self._shell.execute(command)

    def execute_streaming(self, command: str) -> Generator[ExecuteResult, None, None]:
        """Run ``command`` in the sandbox, giving its output as it comes (see
        :meth:`SandboxShell.execute_streaming`)."""
        return self._shell.execute_streaming(command)


# --- what the sandbox needs ----------------------------------------------------------------------

_probe_lock = threading.Lock()
_probed: dict[str, str | None] = {}  # bwrap path -> None (works) or why not


def _tools() -> tuple[str, str]:
    """The paths of ``bwrap`` and ``prlimit``, once ``bwrap`` was seen to make a sandbox."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailableError(
            "SandboxShell needs bubblewrap, and there is no 'bwrap' on PATH; install it (Debian "
            "and Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
        )
    # prlimit runs inside the sandbox, which sees the host's /usr and /bin only.
    prlimit = next((path for path in _PRLIMIT if os.access(path, os.X_OK)), None)
    if prlimit is None:
        raise SandboxUnavailableError(
            "SandboxShell needs prlimit (util-linux, at /usr/bin/prlimit) to cap the command's "
            "resources; install util-linux"
        )
    with _probe_lock:
        if bwrap not in _probed:
            _probed[bwrap] = _probe(bwrap)
        problem = _probed[bwrap]
    if problem is not None:
        raise SandboxUnavailableError(problem)
    return bwrap, prlimit


def _system_binds() -> list[str]:
    """``/usr`` read-only, and ``/bin``, ``/lib``... as on the host (links into it, or bound)."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for name in _ROOT_LINKS:
        path = "/" + name
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    return argv


def _probe(bwrap: str) -> str | None:
    """Why ``bwrap`` cannot make the sandbox's namespaces here, or ``None`` when it can."""
    argv = [
        bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
        *_system_binds(), "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
        "--proc", "/proc", "--", "/bin/sh", "-c", "true",
    ]
    try:
        done = subprocess.run(
            argv, env={"PATH": _PATH}, stdin=subprocess.DEVNULL, capture_output=True,
            timeout=30, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"SandboxShell could not run bubblewrap ({bwrap}): {error}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", errors="replace").strip()[:500]
    return (
        f"SandboxShell: bubblewrap ({bwrap}) cannot make a sandbox here: "
        f"{said or done.returncode}. "
        "It needs user namespaces (sysctl kernel.unprivileged_userns_clone=1 or "
        "user.max_user_namespaces > 0; in a container, a seccomp profile that allows them) "
        "and bubblewrap 0.8 or newer"
    )


@contextmanager
def _etc_pipes() -> Iterator[dict[str, int]]:
    """Pipes holding the generated ``/etc`` files, for ``--ro-bind-data``, by file name."""
    fds: dict[str, int] = {}
    try:
        for name, text in _ETC_GENERATED.items():
            read, write = os.pipe()
            fds[name] = read
            try:
                os.write(write, text.encode())  # far below a pipe's buffer: never blocks
            finally:
                os.close(write)
        yield fds
    finally:
        _close_fds(fds)


def _close_fds(fds: dict[str, int]) -> None:
    for name in list(fds):
        os.close(fds.pop(name))


def _reaper_pid(info: int) -> int | None:
    """The PID of the sandbox's reaper (PID 1 inside), from what bwrap wrote to ``info``."""
    os.set_blocking(info, False)
    data = b""
    try:
        while len(data) < 65536:
            chunk = os.read(info, 4096)
            if not chunk:
                break
            data += chunk
    except BlockingIOError:
        pass
    try:
        pid = json.loads(data.decode("utf-8", errors="replace"))["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None  # bwrap ended before it made the sandbox
    return pid if isinstance(pid, int) and pid > 1 else None


def _wait_gone(pid: int | None, wait: float) -> None:
    """Wait (at most ``wait`` seconds) until process ``pid`` has exited."""
    if pid is None or not hasattr(os, "pidfd_open"):
        return
    try:
        handle = os.pidfd_open(pid)
    except (ProcessLookupError, OSError):
        return  # gone already
    try:
        select.select([handle], [], [], wait)  # readable once the process has exited
    finally:
        os.close(handle)


def _kill_session(process: subprocess.Popen[bytes]) -> None:
    """Kill bwrap's session (it leads its own); the sandbox's reaper dies with bwrap."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(process: subprocess.Popen[bytes]) -> None:
    if process.stdout is not None:
        process.stdout.close()
    try:
        process.wait(_KILL_WAIT)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignored
        pass


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AgentKitValueError(f"{name} must be a positive int (got {value!r})")


# --- pids cgroups --------------------------------------------------------------------------------


class _Cgroup:
    """One command's pids cgroup: joined before bwrap starts, emptied and removed after."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.procs = os.path.join(path, "cgroup.procs")

    def _pids(self) -> list[int]:
        try:
            with open(self.procs) as file:
                return [int(line) for line in file if line.strip()]
        except FileNotFoundError:
            return []

    def kill_once(self) -> bool:
        """SIGKILL every process in the cgroup; whether there were any. Never blocks."""
        pids = self._pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return bool(pids)

    def kill_all(self, wait: float) -> None:
        """Kill until the cgroup is empty (within ``wait`` seconds)."""
        deadline = time.monotonic() + wait
        while self.kill_once() and time.monotonic() < deadline:
            time.sleep(0.005)


class _PidsHierarchy:
    """Where this process can make pids cgroups (a directory with ``pids.max`` children)."""

    def __init__(self, base: str) -> None:
        self.base = base

    @contextmanager
    def make(self, limit: int) -> Iterator[_Cgroup]:
        path = os.path.join(self.base, f"agentkit-sandbox-{os.getpid()}-{secrets.token_hex(6)}")
        os.mkdir(path)
        cgroup = _Cgroup(path)
        try:
            # bwrap, its reaper and prlimit/sh take three of the slots.
            with open(os.path.join(path, "pids.max"), "w") as file:
                file.write(str(limit + 3))
            yield cgroup
        finally:
            cgroup.kill_all(_KILL_WAIT)
            deadline = time.monotonic() + _KILL_WAIT
            while True:
                try:
                    os.rmdir(path)
                    break
                except OSError as error:  # EBUSY while exiting processes leave it
                    if error.errno != errno.EBUSY or time.monotonic() > deadline:
                        break
                    cgroup.kill_once()
                    time.sleep(0.005)


_hierarchy_lock = threading.Lock()
_hierarchy: list[_PidsHierarchy | None] = []


def _pids_cgroups() -> _PidsHierarchy | None:
    """The pids cgroup hierarchy this process may make cgroups in, or ``None`` (looked up once)."""
    with _hierarchy_lock:
        if not _hierarchy:
            _hierarchy.append(_find_hierarchy())
        return _hierarchy[0]


def _find_hierarchy() -> _PidsHierarchy | None:
    try:
        with open("/proc/self/cgroup") as file:
            own = [line.rstrip("\n").split(":", 2) for line in file]
        with open("/proc/self/mountinfo") as file:
            mounts = [line.split() for line in file]
    except OSError:
        return None
    for fields in mounts:
        try:
            dash = fields.index("-")
        except ValueError:
            continue
        fs_root, mount_point = fields[3], fields[4]
        fs_type, options = fields[dash + 1], fields[dash + 3].split(",")
        if fs_type == "cgroup" and "pids" in options:
            paths = [p for _, names, p in own if "pids" in names.split(",")]
        elif fs_type == "cgroup2":
            paths = [p for number, _, p in own if number == "0"]
        else:
            continue
        for path in paths:
            if not (path + "/").startswith(fs_root.rstrip("/") + "/"):
                continue
            base = os.path.join(mount_point, path[len(fs_root.rstrip("/")):].lstrip("/"))
            if fs_type == "cgroup2" and not _v2_delegates_pids(base):
                continue
            if _can_make(base):
                _remove_stale(base)
                return _PidsHierarchy(base)
    return None


def _remove_stale(base: str) -> None:
    """Remove the empty cgroups a killed process left (``agentkit-sandbox-PID-...`` of a PID
    that is gone). Only empty ones: a cgroup with processes may be another PID namespace's
    (its maker's PID means nothing here), and a sandbox whose maker died dies with it
    (``--die-with-parent``), so an orphan's cgroup is empty."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) != 4 or parts[:2] != ["agentkit", "sandbox"] or not parts[2].isdigit():
            continue
        try:
            os.kill(int(parts[2]), 0)
            continue  # its maker lives (or the PID was reused): leave it
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            os.rmdir(os.path.join(base, name))
        except OSError:
            pass  # not empty (or gone meanwhile)


def _v2_delegates_pids(base: str) -> bool:
    try:
        with open(os.path.join(base, "cgroup.subtree_control")) as file:
            return "pids" in file.read().split()
    except OSError:
        return False


def _can_make(base: str) -> bool:
    path = os.path.join(base, f"agentkit-sandbox-probe-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.mkdir(path)
    except OSError:
        return False
    try:
        return os.path.exists(os.path.join(path, "pids.max"))
    finally:
        try:
            os.rmdir(path)
        except OSError:
            pass
