"""The filesystem middleware: Eino's file tools and ``execute`` (names, arguments, result texts),
what goes wrong reaching the model while the run goes on, and the offloading of large tool
results.

Tests named after Eino's follow ``adk/middlewares/filesystem/filesystem_test.go`` and
``large_tool_result_test.go``. One difference is deliberate: where Eino's tool returns an error
(a missing file, an empty ``old_string``), the run's error, agentkit's tool answers
``Error: <what was wrong>`` and the model goes on.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentkit import AgentContext, ChatModelAgent, Runner, ToolCallInfo, tool
from agentkit.backends import (
    ExecuteResult,
    GrepMatch,
    InMemoryBackend,
    LocalBackend,
    LocalShell,
)
from agentkit.errors import AgentConfigError
from agentkit.middlewares import FilesystemMiddleware, OffloadLargeResults
from agentkit.middlewares.filesystem import EXECUTE, FILE_TOOLS, default_offload_path, file_tools
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, run_events, summarize

FILES = {
    "file1.txt": "line1\nline2\nline3\nline4\nline5",
    "file2.go": 'package main\n\nfunc main() {\n\tprintln("hello")\n}',
    "dir1/file3.txt": "hello world\nfoo bar\nhello again",
    "dir1/file4.py": "print('hello')\nprint('world')",
    "dir2/file5.go": "package test\n\nfunc test() {}",
}


def setup_backend() -> InMemoryBackend:
    return InMemoryBackend(FILES)


def tools_of(backend: Any = None, shell: Any = None) -> dict[str, Any]:
    return {item.info().name: item for item in file_tools(backend, shell)}


def invoke(tool_: Any, arguments: dict[str, Any] | str) -> str:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    result = tool_.invoke(text)
    assert isinstance(result, str)
    return result


# --- the tools, one by one (Eino's tests) -------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "/"}, "dir1/\ndir2/\nfile1.txt\nfile2.go"),
        ({"path": ""}, "dir1/\ndir2/\nfile1.txt\nfile2.go"),
        ({"path": "/dir1"}, "file3.txt\nfile4.py"),
    ],
    ids=["list root", "list empty path (defaults to root)", "list dir1"],
)
def test_ls_tool(arguments: dict[str, Any], expected: str) -> None:
    """Eino's TestLsTool."""
    assert invoke(tools_of(setup_backend())["ls"], arguments) == expected


def test_ls_tool_of_an_empty_directory_says_no_files_found() -> None:
    assert invoke(tools_of(InMemoryBackend())["ls"], {"path": "."}) == "No files found"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"file_path": "/file1.txt", "offset": 0, "limit": 100},
            "     1\tline1\n     2\tline2\n     3\tline3\n     4\tline4\n     5\tline5",
        ),
        ({"file_path": "/file1.txt", "offset": 2, "limit": 2}, "     2\tline2\n     3\tline3"),
        (
            {"file_path": "/file1.txt", "offset": 0, "limit": 0},
            "     1\tline1\n     2\tline2\n     3\tline3\n     4\tline4\n     5\tline5",
        ),
        ({"file_path": "/file1.txt", "offset": -1, "limit": 2}, "     1\tline1\n     2\tline2"),
        (
            {"file_path": "/nonexistent.txt", "offset": 0, "limit": 10},
            "Error: there is no file '/nonexistent.txt' in the backend",
        ),
    ],
    ids=[
        "read full file",
        "read with offset",
        "read with default limit",
        "read with negative offset (treated as 0)",
        "read non-existent file",
    ],
)
def test_read_file_tool(arguments: dict[str, Any], expected: str) -> None:
    """Eino's TestReadFileTool."""
    assert invoke(tools_of(setup_backend())["read_file"], arguments) == expected


def test_read_file_tool_default_limit() -> None:
    """Eino's TestReadFileTool_DefaultLimit: 2000 lines unless the model asks otherwise."""
    backend = InMemoryBackend({"big.txt": "\n".join(f"line{n}" for n in range(1, 2501))})
    read = tools_of(backend)["read_file"]
    assert len(invoke(read, {"file_path": "big.txt", "offset": 0, "limit": 0}).split("\n")) == 2000
    assert len(invoke(read, {"file_path": "big.txt", "limit": 10}).split("\n")) == 10
    assert len(backend.read("big.txt").split("\n")) == 2500
    assert invoke(read, {"file_path": "big.txt", "offset": 2500}) == "  2500\tline2500"


def test_read_file_tool_of_an_empty_file_and_past_the_end() -> None:
    read = tools_of(InMemoryBackend({"empty.txt": "", "a.txt": "one"}))["read_file"]
    assert invoke(read, {"file_path": "empty.txt"}) == "File empty.txt is empty."
    assert invoke(read, {"file_path": "a.txt", "offset": 5}) == (
        "File a.txt has fewer than 5 lines: nothing to read there."
    )


def test_write_file_tool() -> None:
    """Eino's TestWriteFileTool."""
    backend = setup_backend()
    write = tools_of(backend)["write_file"]
    assert invoke(write, {"file_path": "/newfile.txt", "content": "new content"}) == (
        "Updated file /newfile.txt"
    )
    assert invoke(write, {"file_path": "/file1.txt", "content": "overwritten"}) == (
        "Updated file /file1.txt"
    )
    assert backend.read("newfile.txt") == "new content"
    assert backend.read("file1.txt") == "overwritten"


@pytest.mark.parametrize(
    ("setup", "arguments", "expected", "content"),
    [
        (
            "hello world\nhello again\nhello world",
            {"old_string": "hello again", "new_string": "hi", "replace_all": False},
            "Successfully replaced the string in '/edit.txt'",
            "hello world\nhi\nhello world",
        ),
        (
            "hello world\nhello again\nhello world",
            {"old_string": "hello", "new_string": "hi", "replace_all": True},
            "Successfully replaced the string in '/edit.txt'",
            "hi world\nhi again\nhi world",
        ),
        (
            "content",
            {"old_string": "", "new_string": "new", "replace_all": False},
            "Error: cannot edit '/edit.txt': the text to replace is empty",
            "content",
        ),
        (
            "hello hello",
            {"old_string": "hello", "new_string": "bye"},
            "Error: cannot edit '/edit.txt': the text to replace occurs 2 times; include more "
            "surrounding text to make it unique, or replace every occurrence with replace_all",
            "hello hello",
        ),
    ],
    ids=["replace first occurrence", "replace all occurrences", "empty old_string", "not unique"],
)
def test_edit_file_tool(
    setup: str, arguments: dict[str, Any], expected: str, content: str
) -> None:
    """Eino's TestEditFileTool."""
    backend = setup_backend()
    backend.write("edit.txt", setup)
    assert invoke(tools_of(backend)["edit_file"], {"file_path": "/edit.txt", **arguments}) == expected
    assert backend.read("edit.txt") == content


def test_edit_file_tool_of_a_missing_file() -> None:
    result = invoke(
        tools_of(setup_backend())["edit_file"],
        {"file_path": "/nonexistent.txt", "old_string": "old", "new_string": "new"},
    )
    assert result == "Error: there is no file '/nonexistent.txt' in the backend"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"pattern": "*.txt", "path": "/"}, "file1.txt"),
        ({"pattern": "*.go", "path": "/"}, "file2.go"),
        ({"pattern": "*.txt", "path": "/dir1"}, "dir1/file3.txt"),
        ({"pattern": "*.py", "path": "/dir1"}, "dir1/file4.py"),
        ({"pattern": "*.go", "path": ""}, "file2.go"),
        ({"pattern": "/dir1/*.txt", "path": "/"}, "dir1/file3.txt"),
        ({"pattern": "**/*.go"}, "dir2/file5.go\nfile2.go"),
        ({"pattern": "*.rs"}, "No files found"),
    ],
)
def test_glob_tool(arguments: dict[str, Any], expected: str) -> None:
    """Eino's TestGlobTool (paths are given relative to the root)."""
    assert invoke(tools_of(setup_backend())["glob"], arguments) == expected


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"pattern": "hello", "output_mode": "count"},
            "dir1/file3.txt:2\ndir1/file4.py:1\nfile2.go:1\n\n"
            "Found 4 total occurrences across 3 files.",
        ),
        (
            {"pattern": "hello", "output_mode": "content"},
            # sorted by file name, as Eino does
            "file2.go:4:\tprintln(\"hello\")\ndir1/file3.txt:1:hello world\n"
            "dir1/file3.txt:3:hello again\ndir1/file4.py:1:print('hello')",
        ),
        (
            {"pattern": "hello", "output_mode": "files_with_matches"},
            "Found 3 files\nfile2.go\ndir1/file3.txt\ndir1/file4.py",
        ),
        (
            {"pattern": "hello", "glob": "*.txt", "output_mode": "count"},
            "dir1/file3.txt:2\n\nFound 2 total occurrences across 1 file.",
        ),
        (
            {"pattern": "package", "path": "/dir2", "output_mode": "count"},
            "dir2/file5.go:1\n\nFound 1 total occurrence across 1 file.",
        ),
        ({"pattern": "absent"}, "No files found"),
        ({"pattern": "absent", "output_mode": "content"}, "No matches found"),
        (
            {"pattern": "absent", "output_mode": "count"},
            "No matches found\n\nFound 0 total occurrences across 0 files.",
        ),
        (
            {"pattern": "HELLO", "-i": True, "type": "py", "output_mode": "content", "-n": False},
            "dir1/file4.py:print('hello')",
        ),
    ],
)
def test_grep_tool(arguments: dict[str, Any], expected: str) -> None:
    """Eino's TestGrepTool."""
    assert invoke(tools_of(setup_backend())["grep"], arguments) == expected


def test_grep_tool_with_context_lines() -> None:
    grep = tools_of(setup_backend())["grep"]
    assert invoke(grep, {"pattern": "foo", "output_mode": "content", "-C": 1}) == (
        "dir1/file3.txt:1:hello world\ndir1/file3.txt:2:foo bar\ndir1/file3.txt:3:hello again"
    )
    assert invoke(grep, {"pattern": "line3", "output_mode": "content", "-A": 1, "-B": 0}) == (
        "file1.txt:3:line3\nfile1.txt:4:line4"
    )


def test_grep_tool_with_sorting_and_pagination() -> None:
    """Eino's TestGrepToolWithSortingAndPagination."""
    backend = InMemoryBackend(
        {"zebra.txt": "match1\nmatch2\nmatch3", "apple.txt": "match4\nmatch5",
         "banana.txt": "match6\nmatch7\nmatch8"}
    )
    grep = tools_of(backend)["grep"]

    def lines(**arguments: Any) -> list[str]:
        return invoke(grep, {"pattern": "match", **arguments}).strip().split("\n")

    assert lines(output_mode="files_with_matches") == [
        "Found 3 files", "apple.txt", "banana.txt", "zebra.txt"
    ]
    assert lines(output_mode="files_with_matches", offset=1) == [
        "Found 3 files", "banana.txt", "zebra.txt"
    ]
    assert lines(output_mode="files_with_matches", head_limit=2) == [
        "Found 3 files", "apple.txt", "banana.txt"
    ]
    assert lines(output_mode="files_with_matches", offset=1, head_limit=1) == [
        "Found 3 files", "banana.txt"
    ]
    assert lines(output_mode="content", head_limit=3) == [
        "apple.txt:1:match4", "apple.txt:2:match5", "banana.txt:1:match6"
    ]
    assert len(lines(output_mode="content", offset=2, head_limit=2)) == 2
    assert lines(output_mode="count") == [
        "apple.txt:2", "banana.txt:3", "zebra.txt:3", "",
        "Found 8 total occurrences across 3 files.",
    ]
    assert lines(output_mode="count", offset=1, head_limit=1) == [
        "banana.txt:3", "", "Found 8 total occurrences across 3 files."
    ]
    assert lines(output_mode="files_with_matches", offset=100) == ["Found 3 files"]
    assert len(lines(output_mode="files_with_matches", offset=-5)) == 4


class ScriptedShell:
    """A shell that answers with a prepared result (Eino's mockShellBackend)."""

    def __init__(self, result: ExecuteResult) -> None:
        self.result = result
        self.commands: list[str] = []

    def execute(self, command: str) -> ExecuteResult:
        self.commands.append(command)
        return self.result


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (ExecuteResult("hello world", 0), "hello world"),
        (ExecuteResult("error: file not found", 1), "error: file not found\n[Command failed with exit code 1]"),
        (
            ExecuteResult("partial output...", 0, truncated=True),
            "partial output...\n[Output was truncated due to size limits]",
        ),
        (
            ExecuteResult("error output...", 2, truncated=True),
            "error output...\n[Command failed with exit code 2]\n"
            "[Output was truncated due to size limits]",
        ),
        (ExecuteResult("", 0), "[Command executed successfully with no output]"),
        (ExecuteResult("tick\n", None, timed_out=True), "tick\n\n[Command timed out and was killed]"),
    ],
    ids=["success", "non-zero exit", "truncated", "exit and truncated", "no output", "timeout"],
)
def test_execute_tool(result: ExecuteResult, expected: str) -> None:
    """Eino's TestExecuteTool."""
    shell = ScriptedShell(result)
    assert invoke(tools_of(shell=shell)[EXECUTE], {"command": "echo hello world"}) == expected
    assert shell.commands == ["echo hello world"]


def test_execute_tool_runs_a_real_command(tmp_path: Path) -> None:
    execute = tools_of(shell=LocalShell(tmp_path))[EXECUTE]
    assert invoke(execute, {"command": "echo hi; exit 4"}) == "hi\n\n[Command failed with exit code 4]"


def test_get_filesystem_tools() -> None:
    """Eino's TestGetFilesystemTools: 6 tools for a backend, 7 with a shell."""
    backend = setup_backend()
    assert list(tools_of(backend)) == list(FILE_TOOLS)
    assert list(tools_of(backend, ScriptedShell(ExecuteResult("", 0)))) == [*FILE_TOOLS, EXECUTE]
    assert list(tools_of(shell=ScriptedShell(ExecuteResult("", 0)))) == [EXECUTE]


def test_new() -> None:
    """Eino's TestNew: a backend or a shell is required."""
    with pytest.raises(AgentConfigError, match="needs a backend"):
        FilesystemMiddleware()
    with pytest.raises(AgentConfigError, match="must be a Backend"):
        FilesystemMiddleware("workspace")  # type: ignore[arg-type]
    assert [t.info().name for t in FilesystemMiddleware(setup_backend()).tools] == list(FILE_TOOLS)


def test_filesystem_middleware_before_agent() -> None:
    """Eino's TestFilesystemMiddleware_BeforeAgent: the tools join the run's tools."""
    context = AgentContext("agent", "Original instruction", [], [])
    FilesystemMiddleware(setup_backend(), instruction="Use the files.").before_agent(context)
    assert context.instruction == "Original instruction\nUse the files."
    assert len(context.tools) == 6


def test_a_tool_named_like_a_file_tool_is_refused_when_the_run_starts() -> None:
    @tool
    def ls(path: str) -> str:
        """My own ls."""
        return path

    agent = ChatModelAgent(
        "a", "d", ScriptedChatModel(["x"]), tools=[ls],
        middlewares=[FilesystemMiddleware(setup_backend())],
    )
    events = run_events(lambda: Runner(agent).query("hi"))
    assert isinstance(events[-1].err, AgentConfigError)
    assert "adds a tool named 'ls' to agent 'a', which has one already" in str(events[-1].err)


# --- whole runs -----------------------------------------------------------------------------------


def test_the_model_works_with_files_and_reads_what_went_wrong(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("SECRET")
    (root / "escape").symlink_to(tmp_path / "secret.txt")
    (root / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF")
    backend = LocalBackend(root)
    model = ScriptedChatModel(
        [
            calls_message(call("write_file", {"file_path": "notes.md", "content": "a\nb\n"}, id="w")),
            calls_message(
                call("read_file", {"file_path": "notes.md"}, id="r1"),
                call("read_file", {"file_path": "../secret.txt"}, id="r2"),
                call("read_file", {"file_path": "escape"}, id="r3"),
                call("read_file", {"file_path": "photo.jpg"}, id="r4"),
                call("read_file", {"file_path": 7}, id="r5"),
            ),
            "done",
        ]
    )
    agent = ChatModelAgent("files", "works with files", model, middlewares=[FilesystemMiddleware(backend)])
    events = run_events(lambda: Runner(agent).query("go"))
    seen = [summarize(event)[2:4] for event in events]
    assert seen[0] == ("assistant", "")
    assert seen[1] == ("tool/write_file", "Updated file notes.md")
    assert seen[2] == ("assistant", "")
    assert sorted(seen[3:8]) == sorted(
        [
            ("tool/read_file", "     1\ta\n     2\tb"),
            ("tool/read_file", "Error: path '../secret.txt' climbs above the backend's root with "
             "'..'; paths stay inside the root"),
            ("tool/read_file", f"Error: path 'escape' leads outside the backend's root "
             f"{backend.root!r} through a symbolic link; only files under the root can be used"),
            ("tool/read_file", "Error: 'photo.jpg' is a binary file (not UTF-8 text); the file "
             "tools read and write text only"),
            ("tool/read_file", "Error: read_file: 'file_path' must be a string (got 7). Correct "
             "the arguments and call read_file again."),
        ]
    )
    assert seen[8] == ("assistant", "done")
    assert len(events) == 9 and all(event.err is None for event in events)
    assert (root / "notes.md").read_text() == "a\nb\n"
    assert "SECRET" not in json.dumps([m.content for m in model.calls[-1].messages])


def test_the_model_is_offered_the_tools_of_the_middleware() -> None:
    model = ScriptedChatModel(["ok"])
    agent = ChatModelAgent(
        "a", "d", model,
        middlewares=[FilesystemMiddleware(setup_backend(), shell=ScriptedShell(ExecuteResult("", 0)))],
    )
    run_events(lambda: Runner(agent).query("hi"))
    assert [info.name for info in model.calls[0].tools] == [*FILE_TOOLS, EXECUTE]
    read = next(info for info in model.calls[0].tools if info.name == "read_file")
    assert read.parameters["required"] == ["file_path"]
    assert set(read.parameters["properties"]) == {"file_path", "offset", "limit"}


# --- offloading large results (Eino's large_tool_result_test.go) ---------------------------------


def _offloaded(result: str, token_limit: int = 10, call_id: str = "call_456") -> tuple[str, InMemoryBackend]:
    backend = InMemoryBackend()
    middleware = OffloadLargeResults(backend, token_limit=token_limit)
    text = middleware.wrap_tool_call(ToolCallInfo("test_tool", call_id, {}), lambda _: result)
    return text, backend


def test_tool_result_offloading_small_result() -> None:
    """Eino's TestToolResultOffloading_SmallResult (and WrapInvokableToolCall's small result)."""
    text, backend = _offloaded("small result", token_limit=10)
    assert text == "small result"
    assert backend.glob("**/*") == []


def test_tool_result_offloading_large_result() -> None:
    """Eino's TestToolResultOffloading_LargeResult: more than token_limit * 4 characters."""
    large = "This is a long line of text that will exceed the token limit.\n" * 10
    text, backend = _offloaded(large)
    assert text.startswith(
        "Tool result too large: the result of tool call call_456 was saved in the filesystem "
        "at large_tool_result/call_456.\n"
    )
    assert text.endswith(
        "The first 10 lines of the result:\n"
        + "".join(f"{n}: This is a long line of text that will exceed the token limit.\n" for n in range(1, 11))
    )
    assert backend.glob("**/*") == ["large_tool_result/call_456"]
    assert backend.read("large_tool_result/call_456") == large


def test_tool_result_offloading_default_token_limit() -> None:
    """Eino's TestToolResultOffloading_DefaultTokenLimit: 20,000 tokens, 80,000 characters."""
    backend = InMemoryBackend()
    middleware = OffloadLargeResults(backend)
    info = ToolCallInfo("t", "c1", {})
    assert middleware.wrap_tool_call(info, lambda _: "x" * 80_000) == "x" * 80_000
    assert middleware.wrap_tool_call(info, lambda _: "x" * 80_001).startswith("Tool result too large")


def test_tool_result_offloading_custom_path_generator() -> None:
    """Eino's TestToolResultOffloading_CustomPathGenerator."""
    backend = InMemoryBackend()
    middleware = OffloadLargeResults(
        backend, token_limit=1, path=lambda call: f"custom/{call.name}-{call.call_id}.txt"
    )
    text = middleware.wrap_tool_call(ToolCallInfo("search", "c9", {}), lambda _: "y" * 10)
    assert "custom/search-c9.txt" in text
    assert backend.read("custom/search-c9.txt") == "y" * 10


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("single line", "1: single line\n"),
        ("line1\nline2\nline3", "1: line1\n2: line2\n3: line3\n"),
        ("\n".join(str(n) for n in range(1, 13)), "".join(f"{n}: {n}\n" for n in range(1, 11))),
        ("a" * 1500, f"1: {'a' * 1000}\n"),
        ("你好世界\n测试", "1: 你好世界\n2: 测试\n"),
        ("你" * 1500, f"1: {'你' * 1000}\n"),
    ],
)
def test_format_tool_message(text: str, expected: str) -> None:
    """Eino's TestFormatToolMessage: the first 10 lines, each cut to 1,000 characters."""
    result, _ = _offloaded(text, token_limit=1)
    assert result.endswith(f"The first 10 lines of the result:\n{expected}")


def test_offload_paths_are_safe_file_names() -> None:
    assert default_offload_path(ToolCallInfo("t", "call_1", {})) == "large_tool_result/call_1"
    assert default_offload_path(ToolCallInfo("t", "../../etc/x#2", {})) == (
        "large_tool_result/_.._etc_x_2"
    )
    assert default_offload_path(ToolCallInfo("t", "", {})).startswith("large_tool_result/")


def test_a_large_result_in_a_run_is_offloaded_and_read_back_in_parts() -> None:
    backend = InMemoryBackend()

    @tool
    def dump() -> str:
        """Returns a long report."""
        return "\n".join(f"row {n}" for n in range(20_000))

    model = ScriptedChatModel(
        [
            calls_message(call("dump", id="d1")),
            calls_message(
                call("read_file", {"file_path": "large_tool_result/d1", "offset": 101, "limit": 2})
            ),
            "done",
        ]
    )
    agent = ChatModelAgent(
        "a", "d", model, tools=[dump],
        middlewares=[FilesystemMiddleware(backend), OffloadLargeResults(backend)],
    )
    events = run_events(lambda: Runner(agent).query("go"))
    dumped = summarize(events[1])
    assert dumped[2] == "tool/dump"
    assert dumped[3].startswith(
        "Tool result too large: the result of tool call d1 was saved in the filesystem at "
        "large_tool_result/d1."
    )
    assert model.calls[1].messages[-1].content == dumped[3]  # what the model kept
    assert summarize(events[3])[3] == "   101\trow 100\n   102\trow 101"
    assert len(backend.read("large_tool_result/d1").split("\n")) == 20_000


def test_a_result_the_backend_cannot_keep_is_given_to_the_model_with_the_reason() -> None:
    backend = InMemoryBackend(max_file_bytes=100)
    middleware = OffloadLargeResults(backend, token_limit=10)
    text = middleware.wrap_tool_call(ToolCallInfo("t", "c1", {}), lambda _: "z" * 200)
    assert text.startswith(
        "Tool result too large (200 characters), and it could not be saved in the filesystem at "
        "large_tool_result/c1: 'large_tool_result/c1': the content has 200 bytes, more than the "
        "100 the backend reads or writes at once"
    )
    assert text.endswith("The result as it is:\n" + "z" * 200)


# --- patterns from the model are matched in bounded time, beside the rest of the process ---------


class _Ticker:
    """A thread that counts while a search runs: the span of its ticks inside the search.

    With the GIL held by one long C call (the standard library's ``re``), no tick lands in the
    middle of the search; with the GIL released the ticks span all of it.
    """

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stop = threading.Event()
        self.window: list[float] = []  # [start] while the search runs, [start, end] after
        self.first: float | None = None
        self.last: float | None = None
        self.ticks = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.started.set()
        while not self.stop.is_set():
            now = time.monotonic()
            if len(self.window) == 1 and now >= self.window[0]:
                self.first = now if self.first is None else self.first
                self.last = now
                self.ticks += 1

    def __enter__(self) -> _Ticker:
        self.thread.start()
        assert self.started.wait(10)
        self.window.append(time.monotonic())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.window.append(time.monotonic())
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive()

    def span(self) -> float:
        return 0.0 if self.first is None or self.last is None else self.last - self.first


def test_grep_with_a_catastrophic_pattern_ends_with_an_error_while_other_threads_run() -> None:
    """A2: ``(a|aa)+$`` on one 35-character line ran for minutes holding the GIL."""
    backend = InMemoryBackend({"notes.txt": "a" * 35 + "!"}, search_timeout=0.5)
    with _Ticker() as ticker:
        result = invoke(tools_of(backend)["grep"], {"pattern": "(a|aa)+$"})
    assert result.startswith("Error: the search was stopped after 0.5 s: the pattern '(a|aa)+$'")
    duration = ticker.window[1] - ticker.window[0]
    assert duration < 30  # a guard; the search stops at its time limit
    assert ticker.ticks > 0
    assert ticker.span() >= duration / 2  # the other thread ran through the search


def test_glob_with_a_catastrophic_pattern_ends_with_an_error_while_other_threads_run(
    tmp_path: Path,
) -> None:
    (tmp_path / ("a" * 60)).write_text("x")
    backend = LocalBackend(tmp_path, search_timeout=0.5)
    pattern = "{a,aa}" * 30 + "b"
    with _Ticker() as ticker:
        result = invoke(tools_of(backend)["glob"], {"pattern": pattern})
    assert result.startswith(f"Error: the search was stopped after 0.5 s: the pattern {pattern!r}")
    duration = ticker.window[1] - ticker.window[0]
    assert duration < 30
    assert ticker.span() >= duration / 2
    # grep's glob filter shares the grep call's time limit
    grep = invoke(tools_of(backend)["grep"], {"pattern": "x", "glob": pattern})
    assert grep.startswith("Error: the search was stopped after 0.5 s")


def test_glob_stars_over_long_names_do_not_backtrack_for_ever(tmp_path: Path) -> None:
    """A2: ``*a*a*...*b`` over long names was polynomial of a high degree with ``re``."""
    for index in range(20):
        (tmp_path / ("a" * 200 + str(index))).write_text("x")
    backend = LocalBackend(tmp_path, search_timeout=5)
    assert invoke(tools_of(backend)["glob"], {"pattern": "*a" * 12 + "*b"}) == "No files found"


def test_grep_stops_searching_a_file_once_head_limit_lines_are_found() -> None:
    """A2: grep kept every match before ``head_limit``; the rest of a file is not searched."""
    slow_line = "a" * 35 + "!"  # the pattern's second branch times out on it
    backend = InMemoryBackend(
        {"a.txt": "x1\nx2\nx3\n" + slow_line, "b.txt": "x4\nx5\nx6\n" + slow_line}, search_timeout=0.5
    )
    grep = tools_of(backend)["grep"]
    pattern = "^x|(a|aa)+$"
    assert invoke(grep, {"pattern": pattern, "output_mode": "content", "head_limit": 2}) == (
        "a.txt:1:x1\na.txt:2:x2"
    )
    assert invoke(grep, {"pattern": pattern}) == "Found 2 files\na.txt\nb.txt"
    assert invoke(
        grep, {"pattern": pattern, "output_mode": "content", "offset": 1, "head_limit": 2}
    ) == "a.txt:2:x2\na.txt:3:x3"
    # every match is needed to count them: the slow line is searched
    assert invoke(grep, {"pattern": pattern, "output_mode": "count"}).startswith("Error: ")
    assert backend.grep("^x", max_count=1) == [
        GrepMatch("a.txt", 1, "x1"), GrepMatch("b.txt", 1, "x4")
    ]
    with pytest.raises(ValueError, match="max_count must be a positive int"):
        backend.grep("x", max_count=0)


@pytest.mark.parametrize("value", [0, -1, "1", True])
def test_search_timeout_must_be_a_positive_number(value: Any) -> None:
    with pytest.raises(ValueError, match="search_timeout must be a positive number"):
        InMemoryBackend(search_timeout=value)
