"""File backends and the local shell: the Backend protocol on both backends, LocalBackend's
confinement under its root (real symbolic links, ``..``, absolute paths, links made between the
check and the open), huge, binary and special files, and LocalShell's limits (time, output,
cancel, processes left behind).

The protocol tests follow Eino's ``adk/filesystem/backend_inmemory_test.go`` (read with offset
and limit, grep with glob and type filters, glob relative to a path, edit once or all).
"""

from __future__ import annotations

import os
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentkit import AgentCancelledError, CancelHandle, ChatModelAgent, Runner, tool, with_cancel
from agentkit.backends import (
    Backend,
    BackendError,
    BinaryFileError,
    DeletingBackend,
    EditError,
    ExecuteResult,
    FileTooLargeError,
    GrepMatch,
    InMemoryBackend,
    LocalBackend,
    LocalShell,
    PathOutsideRootError,
    Shell,
)
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, run_events

GUARD = 30.0  # a failure guard for waits, never a pace

FILES = {
    "file1.txt": "line1\nline2\nline3\nline4\nline5",
    "file2.go": 'package main\n\nfunc main() {\n\tprintln("hello")\n}',
    "dir1/file3.txt": "hello world\nfoo bar\nhello again",
    "dir1/file4.py": "print('hello')\nprint('world')",
    "dir2/file5.go": "package test\n\nfunc test() {}",
}


def _local(tmp_path: Path) -> LocalBackend:
    root = tmp_path / "root"
    root.mkdir()
    return LocalBackend(root)


@pytest.fixture(params=["memory", "local"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    made: Backend = InMemoryBackend() if request.param == "memory" else _local(tmp_path)
    for path, content in FILES.items():
        made.write(path, content)
    return made


# --- the protocol, on both backends ---------------------------------------------------------------


def test_both_backends_are_backends_that_can_delete(backend: Backend) -> None:
    assert isinstance(backend, Backend)
    assert isinstance(backend, DeletingBackend)


def test_ls_lists_names_with_directories_marked(backend: Backend) -> None:
    assert backend.ls() == ["dir1/", "dir2/", "file1.txt", "file2.go"]
    assert backend.ls(".") == backend.ls("") == backend.ls("dir1/..") == backend.ls()
    assert backend.ls("dir1") == ["file3.txt", "file4.py"]
    assert backend.ls("dir1/../dir2") == ["file5.go"]


def test_ls_of_a_file_or_a_missing_directory_says_so(backend: Backend) -> None:
    with pytest.raises(NotADirectoryError, match="file1.txt"):
        backend.ls("file1.txt")
    with pytest.raises(FileNotFoundError, match="nope"):
        backend.ls("nope")


def test_read_whole_and_by_lines(backend: Backend) -> None:
    # Eino's TestReadFileTool: offset from 1 (smaller values mean 1), limit lines.
    assert backend.read("file1.txt") == FILES["file1.txt"]
    assert backend.read("file1.txt", offset=2, limit=2) == "line2\nline3"
    assert backend.read("file1.txt", offset=-1, limit=2) == "line1\nline2"
    assert backend.read("file1.txt", offset=4) == "line4\nline5"
    assert backend.read("file1.txt", offset=9, limit=3) == ""


def test_read_of_a_missing_file_or_a_directory_says_so(backend: Backend) -> None:
    with pytest.raises(FileNotFoundError, match="nonexistent.txt"):
        backend.read("nonexistent.txt")
    with pytest.raises(IsADirectoryError, match="dir1"):
        backend.read("dir1")


def test_read_refuses_a_bad_line_range(backend: Backend) -> None:
    with pytest.raises(ValueError, match="limit must be a positive number"):
        backend.read("file1.txt", limit=0)
    with pytest.raises(ValueError, match="offset must be a line number"):
        backend.read("file1.txt", offset="2")  # type: ignore[arg-type]


def test_write_creates_directories_and_replaces_files(backend: Backend) -> None:
    backend.write("a/b/c.md", "deep\n")
    backend.write("file1.txt", "overwritten")
    assert backend.read("a/b/c.md") == "deep\n"
    assert backend.read("file1.txt") == "overwritten"
    assert backend.ls("a") == ["b/"]


def test_write_refuses_a_directory_and_a_file_used_as_directory(backend: Backend) -> None:
    with pytest.raises(IsADirectoryError):
        backend.write("dir1", "x")
    with pytest.raises(NotADirectoryError):
        backend.write("file1.txt/inner.txt", "x")


def test_edit_once_or_everywhere(backend: Backend) -> None:
    # Eino's TestEditFileTool.
    backend.write("edit.txt", "hello world\nhello again\nhello world")
    assert backend.edit("edit.txt", "hello again", "hi") == 1
    assert backend.read("edit.txt") == "hello world\nhi\nhello world"
    assert backend.edit("edit.txt", "hello", "hey", replace_all=True) == 2
    assert backend.read("edit.txt") == "hey world\nhi\nhey world"


@pytest.mark.parametrize(
    ("old", "problem"),
    [
        ("", "the text to replace is empty"),
        ("absent", "was not found"),
        ("hey", "occurs 2 times"),
    ],
)
def test_edit_that_cannot_be_made_is_an_edit_error(backend: Backend, old: str, problem: str) -> None:
    backend.write("edit.txt", "hey world\nhey again")
    with pytest.raises(EditError, match=problem):
        backend.edit("edit.txt", old, "new")
    assert backend.read("edit.txt") == "hey world\nhey again"


def test_edit_of_a_missing_file(backend: Backend) -> None:
    with pytest.raises(FileNotFoundError):
        backend.edit("nonexistent.txt", "old", "new")


def test_glob_relative_to_a_path(backend: Backend) -> None:
    # Eino's TestGlobTool: '*' stays in one directory, '**' crosses them.
    assert backend.glob("*.txt") == ["file1.txt"]
    assert backend.glob("*.txt", "dir1") == ["dir1/file3.txt"]
    assert backend.glob("**/*.go") == ["dir2/file5.go", "file2.go"]
    assert backend.glob("dir1/*.{py,txt}") == ["dir1/file3.txt", "dir1/file4.py"]
    assert backend.glob("file?.*") == ["file1.txt", "file2.go"]
    assert backend.glob("*.rs") == []


def test_in_memory_glob_takes_a_pattern_from_the_root() -> None:
    # Eino's "match all .txt files in dir1 in root dir": a pattern starting with '/'.
    assert InMemoryBackend(FILES).glob("/dir1/*.txt") == ["dir1/file3.txt"]


def test_grep_finds_lines_sorted_by_path(backend: Backend) -> None:
    assert backend.grep("hello") == [
        GrepMatch("dir1/file3.txt", 1, "hello world"),
        GrepMatch("dir1/file3.txt", 3, "hello again"),
        GrepMatch("dir1/file4.py", 1, "print('hello')"),
        GrepMatch("file2.go", 4, '\tprintln("hello")'),
    ]


def test_grep_filters_by_glob_type_path_and_case(backend: Backend) -> None:
    assert [m.path for m in backend.grep("hello", glob="*.txt")] == ["dir1/file3.txt"] * 2
    assert [m.path for m in backend.grep("package", "dir2")] == ["dir2/file5.go"]
    assert [m.path for m in backend.grep("package", file_type="go")] == ["dir2/file5.go", "file2.go"]
    assert [m.path for m in backend.grep("hello", glob="dir1/**")] == ["dir1/file3.txt"] * 2 + ["dir1/file4.py"]
    assert backend.grep("HELLO") == []
    assert len(backend.grep("HELLO", ignore_case=True)) == 4
    assert backend.grep("line3", "file1.txt") == [GrepMatch("file1.txt", 3, "line3")]


def test_grep_multiline_returns_every_line_a_match_covers(backend: Backend) -> None:
    assert backend.grep(r"world\nfoo", multiline=True) == [
        GrepMatch("dir1/file3.txt", 1, "hello world"),
        GrepMatch("dir1/file3.txt", 2, "foo bar"),
    ]


def test_grep_refuses_a_bad_pattern(backend: Backend) -> None:
    with pytest.raises(ValueError, match="not a valid regular expression"):
        backend.grep("(unclosed")
    with pytest.raises(ValueError, match="empty"):
        backend.grep("")


def test_delete(backend: Backend) -> None:
    assert isinstance(backend, DeletingBackend)
    backend.delete("dir2/file5.go")
    assert backend.glob("**/*.go") == ["file2.go"]
    with pytest.raises(FileNotFoundError):
        backend.delete("dir2/file5.go")


def test_dot_dot_never_climbs_above_the_root(backend: Backend) -> None:
    for path in ("..", "../file1.txt", "dir1/../../x", "./dir1/../.."):
        with pytest.raises(PathOutsideRootError, match="climbs above"):
            backend.read(path)
        with pytest.raises(PermissionError):
            backend.write(path, "x")


def test_in_memory_backend_takes_a_leading_slash_as_its_root() -> None:
    memory = InMemoryBackend({"/notes/a.md": "x"})
    assert memory.read("notes/a.md") == "x"
    assert memory.ls("/") == memory.ls() == ["notes/"]
    assert memory.glob("**/*.md") == ["notes/a.md"]


def test_in_memory_backend_refuses_content_over_its_limit() -> None:
    memory = InMemoryBackend(max_file_bytes=10)
    with pytest.raises(FileTooLargeError, match="11 bytes"):
        memory.write("big.txt", "x" * 11)


# --- LocalBackend: confinement ---------------------------------------------------------------------


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[LocalBackend, Path]]:
    """A root with files, and a secret file and directory outside it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET")
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("inside\n")
    yield LocalBackend(root), outside


def test_absolute_paths_outside_the_root_are_refused(sandbox: tuple[LocalBackend, Path]) -> None:
    backend, outside = sandbox
    for path in (str(outside / "secret.txt"), "/etc/passwd", "/docs/a.md"):
        with pytest.raises(PathOutsideRootError, match="outside the backend's root"):
            backend.read(path)
        with pytest.raises(PathOutsideRootError):
            backend.write(path, "pwned")
    assert (outside / "secret.txt").read_text() == "SECRET"
    assert (Path(backend.root) / "docs" / "a.md").read_text() == "inside\n"


def test_absolute_paths_under_the_root_are_accepted(sandbox: tuple[LocalBackend, Path]) -> None:
    backend, _ = sandbox
    assert backend.read(os.path.join(backend.root, "docs", "a.md")) == "inside\n"
    assert backend.ls(backend.root) == ["docs/"]


def test_dot_dot_through_the_real_root_is_refused(sandbox: tuple[LocalBackend, Path]) -> None:
    backend, _ = sandbox
    with pytest.raises(PathOutsideRootError):
        backend.read("docs/../../outside/secret.txt")
    with pytest.raises(PathOutsideRootError):
        backend.read(os.path.join(backend.root, "..", "outside", "secret.txt"))


def test_symbolic_links_out_of_the_root_are_refused(sandbox: tuple[LocalBackend, Path]) -> None:
    backend, outside = sandbox
    root = Path(backend.root)
    (root / "to_dir").symlink_to(outside, target_is_directory=True)
    (root / "to_file").symlink_to(outside / "secret.txt")
    (root / "to_new").symlink_to(outside / "new.txt")
    refused: list[Callable[[], object]] = [
        lambda: backend.read("to_file"),
        lambda: backend.read("to_dir/secret.txt"),
        lambda: backend.ls("to_dir"),
        lambda: backend.write("to_file", "pwned"),
        lambda: backend.write("to_dir/secret.txt", "pwned"),
        lambda: backend.write("to_dir/planted.txt", "pwned"),
        lambda: backend.write("to_new", "pwned"),
        lambda: backend.edit("to_file", "SECRET", "pwned"),
        lambda: backend.grep("SECRET", "to_dir"),
        lambda: backend.glob("*", "to_dir"),
    ]
    for action in refused:
        with pytest.raises(PathOutsideRootError, match="symbolic link"):
            action()
    assert (outside / "secret.txt").read_text() == "SECRET"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_a_search_of_the_root_does_not_follow_links_out(sandbox: tuple[LocalBackend, Path]) -> None:
    backend, outside = sandbox
    root = Path(backend.root)
    (root / "to_dir").symlink_to(outside, target_is_directory=True)
    (root / "to_file").symlink_to(outside / "secret.txt")
    assert backend.grep("SECRET") == []
    assert "to_dir/secret.txt" not in backend.glob("**/*")


def test_symbolic_links_inside_the_root_are_followed(sandbox: tuple[LocalBackend, Path]) -> None:
    backend, _ = sandbox
    root = Path(backend.root)
    (root / "alias.md").symlink_to(root / "docs" / "a.md")
    (root / "docs_link").symlink_to(root / "docs", target_is_directory=True)
    assert backend.read("alias.md") == "inside\n"
    assert backend.read("docs_link/a.md") == "inside\n"
    backend.write("alias.md", "changed\n")
    assert (root / "docs" / "a.md").read_text() == "changed\n"
    assert (root / "alias.md").is_symlink()


def test_a_link_swapped_in_after_the_check_is_never_followed(
    sandbox: tuple[LocalBackend, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Step 2 (realpath) is fooled, as by a link made right after it: the component-wise
    # O_NOFOLLOW open (step 3) still refuses, and nothing outside is read or written.
    backend, outside = sandbox
    root = Path(backend.root)
    (root / "to_dir").symlink_to(outside, target_is_directory=True)
    (root / "to_file").symlink_to(outside / "secret.txt")
    monkeypatch.setattr(os.path, "realpath", os.path.normpath)
    with pytest.raises(PathOutsideRootError, match="symbolic link"):
        backend.read("to_dir/secret.txt")
    with pytest.raises(PathOutsideRootError, match="symbolic link"):
        backend.read("to_file")
    with pytest.raises(PathOutsideRootError, match="symbolic link"):
        backend.write("to_dir/planted.txt", "pwned")
    with pytest.raises(PathOutsideRootError, match="symbolic link"):
        backend.ls("to_dir")
    # Writing to the link's name replaces the link; the file it pointed to is untouched.
    backend.write("to_file", "mine")
    assert not (root / "to_file").is_symlink()
    assert (root / "to_file").read_text() == "mine"
    assert (outside / "secret.txt").read_text() == "SECRET"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_delete_removes_a_link_never_its_target(sandbox: tuple[LocalBackend, Path]) -> None:
    backend, outside = sandbox
    root = Path(backend.root)
    (root / "alias.md").symlink_to("docs/a.md")
    backend.delete("alias.md")
    assert not os.path.lexists(root / "alias.md")
    (root / "to_secret").symlink_to(outside / "secret.txt")
    backend.delete("to_secret")
    assert (outside / "secret.txt").read_text() == "SECRET"
    (root / "dangling").symlink_to(root / "missing.txt")
    backend.delete("dangling")
    assert not os.path.lexists(root / "dangling")
    assert (root / "docs" / "a.md").exists()


# --- LocalBackend: huge, binary and special files --------------------------------------------------


def test_huge_files_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path, max_file_bytes=1000)
    (tmp_path / "big.txt").write_text("".join(f"line {n}\n" for n in range(1000)))
    (tmp_path / "one_line.txt").write_text("x" * 5000)
    with pytest.raises(FileTooLargeError, match=r"big.txt.*more than the 1,000.*offset and limit"):
        backend.read("big.txt")
    assert backend.read("big.txt", offset=500, limit=2) == "line 499\nline 500"
    with pytest.raises(FileTooLargeError, match="the part asked for"):
        backend.read("one_line.txt", limit=1)
    with pytest.raises(FileTooLargeError, match="the content has 1,001 bytes"):
        backend.write("new.txt", "y" * 1001)
    assert not (tmp_path / "new.txt").exists()
    assert backend.grep("line 5") == []  # too large to search: skipped


def test_binary_files_are_refused_with_a_clear_error(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    (tmp_path / "text.txt").write_text("café")
    for name in ("image.png", "latin1.txt"):
        with pytest.raises(BinaryFileError, match="binary file"):
            backend.read(name)
        with pytest.raises(BinaryFileError):
            backend.read(name, offset=1, limit=1)
    assert backend.grep("caf") == [GrepMatch("text.txt", 1, "café")]


def test_special_files_are_refused_without_blocking(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.txt").write_text("pipe dream")
    with pytest.raises(BackendError, match="not a regular file"):
        backend.read("pipe")  # opening a FIFO for reading would block without O_NONBLOCK
    assert backend.grep("pipe") == [GrepMatch("a.txt", 1, "pipe dream")]


def test_a_write_is_atomic_and_keeps_the_permission_bits(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    target = tmp_path / "private.txt"
    target.write_text("old")
    target.chmod(0o600)
    before = target.stat().st_ino
    backend.write("private.txt", "new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.stat().st_ino != before  # a new file took the old one's place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["private.txt"]  # no temporary left


def test_local_backend_needs_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a directory"):
        LocalBackend(tmp_path / "missing")
    with pytest.raises(ValueError, match="max_file_bytes"):
        LocalBackend(tmp_path, max_file_bytes=0)


def test_edits_from_many_threads_are_not_lost(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    backend.write("count.txt", "".join(f"[{n}]" for n in range(20)))
    start = threading.Barrier(20)

    def edit(n: int) -> None:
        start.wait(GUARD)
        backend.edit("count.txt", f"[{n}]", f"<{n}>")

    threads = [threading.Thread(target=edit, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD)
    assert backend.read("count.txt") == "".join(f"<{n}>" for n in range(20))


# --- LocalShell ------------------------------------------------------------------------------------


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (waits up to GUARD seconds for it to be reaped)."""
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            with open(f"/proc/{pid}/stat") as status:
                if status.read().split(") ", 1)[1].startswith("Z"):
                    return True  # a zombie: dead, waiting for its parent
        except FileNotFoundError:
            return True  # reaped meanwhile
        threading.Event().wait(0.05)
    return False


def _wait_for(path: Path) -> str:
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        threading.Event().wait(0.02)
    raise AssertionError(f"{path} was never written")


def test_shell_runs_in_its_root_and_reports_output_and_exit_code(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("x")
    shell = LocalShell(tmp_path)
    assert isinstance(shell, Shell)
    assert shell.execute("ls; echo oops >&2") == ExecuteResult("marker.txt\noops\n", 0)
    assert shell.execute("exit 3") == ExecuteResult("", 3)


def test_a_command_that_never_ends_is_killed_with_its_group_at_the_timeout(tmp_path: Path) -> None:
    shell = LocalShell(tmp_path, timeout=1.0)
    started = time.monotonic()
    result = shell.execute("sleep 300 & echo $! > child.pid; echo waiting; wait")
    elapsed = time.monotonic() - started
    assert result == ExecuteResult("waiting\n", None, timed_out=True)
    assert elapsed < 1.0 + 10  # never blocks the run past its timeout (plus reaping)
    assert _gone(int((tmp_path / "child.pid").read_text()))


def test_a_command_that_floods_its_output_is_capped(tmp_path: Path) -> None:
    shell = LocalShell(tmp_path, timeout=2.0, max_output_bytes=1000)
    finished = shell.execute("head -c 5000000 /dev/zero | tr '\\0' a; echo done >&2")
    assert finished.truncated and finished.exit_code == 0 and not finished.timed_out
    assert finished.output == "a" * 1000
    endless = shell.execute("yes")
    assert endless.truncated and endless.timed_out and endless.exit_code is None
    assert endless.output == "y\n" * 500


def test_processes_left_in_the_background_end_with_the_command(tmp_path: Path) -> None:
    shell = LocalShell(tmp_path, timeout=60.0)
    started = time.monotonic()
    result = shell.execute("sleep 300 > /dev/null 2>&1 & echo $!")
    assert time.monotonic() - started < 30  # returned when the shell exited, not at the timeout
    assert result.exit_code == 0
    assert _gone(int(result.output))


def test_cancelling_the_run_kills_the_command_at_once(tmp_path: Path) -> None:
    shell = LocalShell(tmp_path, timeout=300.0)
    handle = CancelHandle()
    ran: list[ExecuteResult] = []

    @tool
    def run_command() -> str:
        """Runs a long command."""
        ran.append(shell.execute("echo $$ > shell.pid; sleep 300"))
        return "finished"

    model = ScriptedChatModel([calls_message(call("run_command")), "never"])
    agent = ChatModelAgent("runner", "runs commands", model, tools=[run_command])

    def cancel_when_running() -> None:
        _wait_for(tmp_path / "shell.pid")
        handle.cancel()

    canceller = threading.Thread(target=cancel_when_running)
    canceller.start()
    started = time.monotonic()
    events = run_events(lambda: Runner(agent).query("go", with_cancel(handle)), timeout=GUARD)
    canceller.join(GUARD)
    assert time.monotonic() - started < 60
    assert isinstance(events[-1].err, AgentCancelledError)
    assert ran == []
    assert _gone(int((tmp_path / "shell.pid").read_text()))


def test_local_shell_refuses_bad_settings_and_commands(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="timeout"):
        LocalShell(tmp_path, timeout=0)
    with pytest.raises(ValueError, match="is not a directory"):
        LocalShell(tmp_path / "missing")
    with pytest.raises(ValueError, match="non-empty"):
        LocalShell(tmp_path).execute("  ")


def test_a_loop_of_links_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(PathOutsideRootError, match="symbolic link that does not resolve inside"):
        backend.read("a")
    with pytest.raises(PathOutsideRootError):
        backend.ls("a/x")
    assert backend.ls() == ["a", "b"]
    assert backend.grep("x") == []


def test_a_command_gets_a_minimal_environment_without_the_signing_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTKIT_CHECKPOINT_KEY", "signing-key-must-stay-home")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-stay-home")
    monkeypatch.setenv("LANG", "C.UTF-8")
    result = LocalShell(tmp_path).execute("env")
    names = sorted(line.split("=", 1)[0] for line in result.output.splitlines())
    assert set(names) <= {"HOME", "LANG", "PATH", "PWD", "SHLVL", "_"}
    assert "must-stay-home" not in result.output
    assert f"HOME={tmp_path.resolve()}" in result.output.splitlines()
    passed = LocalShell(tmp_path, env={"OPENAI_API_KEY": "sk-given"}).execute(
        "echo $OPENAI_API_KEY; echo $AGENTKIT_CHECKPOINT_KEY; command -v sh"
    )
    assert passed.output.splitlines()[:2] == ["sk-given", ""]  # only what was passed
    assert passed.output.splitlines()[2].endswith("/sh")  # PATH is still there


def test_a_setsid_daemon_outlives_a_local_shell_as_documented(tmp_path: Path) -> None:
    # Issue 49 A14, a documented choice: LocalShell kills the command's process group only;
    # a process that starts its own session escapes it. SandboxShell contains it
    # (tests/test_sandbox_escape.py).
    shell = LocalShell(tmp_path, timeout=60.0)
    result = shell.execute(
        "(setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' > /dev/null 2>&1 &);"
        " until [ -s daemon.pid ]; do sleep 0.01; done; echo ok"
    )
    assert result == ExecuteResult("ok\n", 0)
    pid = int(_wait_for(tmp_path / "daemon.pid"))
    try:
        os.kill(pid, 0)  # still running after execute returned
    finally:
        os.kill(pid, signal.SIGKILL)
    assert "setsid" in (LocalShell.__doc__ or "")
