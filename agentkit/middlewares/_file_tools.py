"""The file tools and ``execute``: Eino's tool names, arguments and result texts.

:func:`file_tools` makes them over a backend and a shell; the middleware that gives them to
an agent is :class:`agentkit.middlewares.FilesystemMiddleware`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs

from agentkit.backends import (
    Backend,
    BackendError,
    ExecuteResult,
    GrepMatch,
    MultiModalReader,
    Shell,
    StreamingShell,
)
from agentkit.errors import AgentKitError
from agentkit.middlewares._tool import SchemaTool, checked_arguments, object_schema
from agentkit.schema import ContentPart, ImagePart, TextPart, ToolInfo
from agentkit.streams import StreamReader, stream_from_iterator
from agentkit.tools._base import BaseTool
from agentkit.tools._function_tool import content_text

__all__ = [
    "DEFAULT_READ_LIMIT",
    "EXECUTE",
    "FILE_TOOLS",
    "NO_FILES_FOUND",
    "NO_MATCHES_FOUND",
    "execute_result_text",
    "file_tools",
    "format_content",
    "format_count",
    "format_files",
    "number_lines",
    "paginate",
    "with_context",
]

FILE_TOOLS = ("ls", "read_file", "write_file", "edit_file", "glob", "grep")
"""The names of the file tools, in the order they are added."""

EXECUTE = "execute"
"""The name of the shell tool."""

NO_FILES_FOUND = "No files found"
NO_MATCHES_FOUND = "No matches found"
DEFAULT_READ_LIMIT = 2000

_PATH_NOTE = (
    "Paths are relative to the workspace root (for example 'notes/plan.md'); '.' is the root."
)


def file_tools(backend: Backend | None, shell: Shell | None = None) -> list[BaseTool]:
    """The file tools over ``backend`` (none without one), then ``execute`` over ``shell``."""
    tools: list[BaseTool] = []
    if backend is not None:
        tools.extend(_FileTools(backend).tools())
    if shell is not None:
        tools.append(_execute_tool(shell))
    return tools


_FAILURES = (OSError, ValueError, BackendError)
"""What a backend raises for a file problem: the model reads it and goes on."""


def _failure_text(error: Exception) -> str:
    return f"Error: {error}"


class _FileTools:
    """The six file tools of one backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def tools(self) -> list[BaseTool]:
        specs: list[tuple[str, str, dict[str, Any], Callable[[dict[str, Any]], str]]] = [
            ("ls", _LS_DESCRIPTION, _LS_SCHEMA, self.ls),
            ("read_file", _READ_DESCRIPTION, _READ_SCHEMA, self.read_file),
            ("write_file", _WRITE_DESCRIPTION, _WRITE_SCHEMA, self.write_file),
            ("edit_file", _EDIT_DESCRIPTION, _EDIT_SCHEMA, self.edit_file),
            ("glob", _GLOB_DESCRIPTION, _GLOB_SCHEMA, self.glob),
            ("grep", _GREP_DESCRIPTION, _GREP_SCHEMA, self.grep),
        ]
        made = [
            SchemaTool(name, text, schema, _reporting(handler))
            for name, text, schema, handler in specs
        ]
        tools: list[BaseTool] = list(made)
        backend = self.backend
        if isinstance(backend, MultiModalReader):
            tools[1] = MediaReadFile(made[1], backend)  # images and PDFs as content parts
        return tools

    def ls(self, arguments: dict[str, Any]) -> str:
        names = self.backend.ls(arguments.get("path") or ".")
        return "\n".join(names) if names else NO_FILES_FOUND

    def read_file(self, arguments: dict[str, Any]) -> str:
        path = arguments["file_path"]
        offset = max(arguments.get("offset", 1), 1)
        limit = arguments.get("limit", 0)
        limit = limit if limit > 0 else DEFAULT_READ_LIMIT
        content = self.backend.read(path, offset=offset, limit=limit)
        if not content:
            if offset > 1:
                return f"File {path} has fewer than {offset} lines: nothing to read there."
            return f"File {path} is empty."
        return number_lines(content, offset)

    def write_file(self, arguments: dict[str, Any]) -> str:
        path = arguments["file_path"]
        self.backend.write(path, arguments["content"])
        return f"Updated file {path}"

    def edit_file(self, arguments: dict[str, Any]) -> str:
        path = arguments["file_path"]
        self.backend.edit(
            path,
            arguments["old_string"],
            arguments["new_string"],
            replace_all=arguments.get("replace_all", False),
        )
        return f"Successfully replaced the string in '{path}'"

    def glob(self, arguments: dict[str, Any]) -> str:
        paths = self.backend.glob(arguments["pattern"], arguments.get("path") or ".")
        return "\n".join(paths) if paths else NO_FILES_FOUND

    def grep(self, arguments: dict[str, Any]) -> str:
        context = arguments.get("-C")
        before = context if context is not None else arguments.get("-B", 0)
        after = context if context is not None else arguments.get("-A", 0)
        offset = max(arguments.get("offset", 0), 0)
        head_limit = arguments.get("head_limit", 0)
        mode = arguments.get("output_mode") or "files_with_matches"
        matches = self.backend.grep(
            arguments["pattern"],
            arguments.get("path") or ".",
            glob=arguments.get("glob") or None,
            file_type=arguments.get("type") or None,
            ignore_case=arguments.get("-i", False),
            multiline=arguments.get("multiline", False),
            max_count=_per_file_limit(mode, offset, head_limit),
        )
        # Stable by file name, as Eino sorts them.
        matches = sorted(matches, key=lambda match: posixpath.basename(match.path))
        if mode == "content":
            if before > 0 or after > 0:
                matches = with_context(self.backend, matches, before, after)
            shown = paginate(matches, offset, head_limit)
            return format_content(shown, arguments.get("-n", True))
        if mode == "count":
            return format_count(matches, offset, head_limit)
        return format_files(matches, offset, head_limit)


def _per_file_limit(mode: str, offset: int, head_limit: int) -> int | None:
    """The most matching lines grep needs of each file to answer in ``mode``.

    Files are shown in order, so the first ``offset + head_limit`` lines shown are among the
    first that many matches of each file; a file is listed once whatever it holds. Only
    ``count`` needs every match. The rest of a file is not searched nor kept.
    """
    if mode == "files_with_matches":
        return 1
    if mode == "content" and head_limit > 0:
        return offset + head_limit
    return None


def _reporting(handler: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], str]:
    """``handler``, with what the backend refuses given to the model as ``Error: ...``."""

    def run(arguments: dict[str, Any]) -> str:
        try:
            return handler(arguments)
        except _FAILURES as error:
            if isinstance(error, AgentKitError) and not isinstance(error, BackendError):
                raise  # not the backend's: a mistake in agentkit or its caller
            return _failure_text(error)

    return run


def number_lines(content: str, first: int) -> str:
    """``content`` with each line prefixed by its number (``cat -n`` style), from ``first``."""
    return "\n".join(
        f"{number:6d}\t{line}" for number, line in enumerate(content.split("\n"), first)
    )


def paginate(items: Sequence[Any], offset: int, head_limit: int) -> list[Any]:
    """``items`` without the first ``offset``, at most ``head_limit`` of them (0: all)."""
    rest = list(items[max(offset, 0):])
    return rest[:head_limit] if head_limit > 0 else rest


def format_files(matches: Iterable[GrepMatch], offset: int, head_limit: int) -> str:
    """Grep's ``files_with_matches`` output: ``Found <n> files`` and the paths."""
    paths = list(dict.fromkeys(match.path for match in matches))
    if not paths:
        return NO_FILES_FOUND
    word = "file" if len(paths) == 1 else "files"
    return f"Found {len(paths)} {word}\n" + "\n".join(paginate(paths, offset, head_limit))


def format_content(matches: Iterable[GrepMatch], line_numbers: bool) -> str:
    """Grep's ``content`` output: ``path:line:text`` (or ``path:text``) per line."""
    lines = [
        f"{match.path}:{match.line}:{match.content}" if line_numbers
        else f"{match.path}:{match.content}"
        for match in matches
    ]
    return "\n".join(lines) if lines else NO_MATCHES_FOUND


def format_count(matches: Sequence[GrepMatch], offset: int, head_limit: int) -> str:
    """Grep's ``count`` output: ``path:count`` per file and the totals."""
    counts: dict[str, int] = {}
    for match in matches:
        counts[match.path] = counts.get(match.path, 0) + 1
    total, files = len(matches), len(counts)
    summary = (
        f"Found {total} total {'occurrence' if total == 1 else 'occurrences'} across "
        f"{files} {'file' if files == 1 else 'files'}."
    )
    if total == 0:
        return f"{NO_MATCHES_FOUND}\n\n{summary}"
    rows = [f"{path}:{counts[path]}" for path in paginate(sorted(counts), offset, head_limit)]
    return "\n".join(rows) + "\n\n" + summary


def with_context(
    backend: Backend, matches: list[GrepMatch], before: int, after: int
) -> list[GrepMatch]:
    """``matches`` with ``before`` lines before and ``after`` lines after each, once each."""
    result: list[GrepMatch] = []
    by_file: dict[str, list[GrepMatch]] = {}
    for match in matches:
        by_file.setdefault(match.path, []).append(match)
    for path, found in by_file.items():
        try:
            lines = backend.read(path).split("\n")
        except _FAILURES:
            result.extend(found)
            continue
        done: set[int] = set()
        for match in found:
            first, last = max(match.line - before, 1), min(match.line + after, len(lines))
            for number in range(first, last + 1):
                if number not in done:
                    done.add(number)
                    result.append(GrepMatch(path, number, lines[number - 1].rstrip("\r")))
    return result


MAX_MEDIA_BYTES = 10 * 1024 * 1024
"""The largest image or PDF ``read_file`` gives the model (10 MiB)."""


class MediaReadFile:
    """``read_file`` over a :class:`~agentkit.backends.MultiModalReader`: an image or a PDF is
    given to the model as a content part (a line saying what it is, then the part), any other
    file as numbered text lines, as before."""

    __slots__ = ("_backend", "_tool")

    def __init__(self, tool: SchemaTool, backend: MultiModalReader) -> None:
        self._tool = tool
        self._backend = backend

    def info(self) -> ToolInfo:
        """The ``read_file`` tool's name, description and parameters."""
        return self._tool.info()

    def __repr__(self) -> str:
        return f"MediaReadFile({self._backend!r})"

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """The file as text (an image or a PDF as a placeholder line)."""
        return content_text(self.invoke_content(arguments, **tool_options))

    def invoke_content(self, arguments: str, **tool_options: Any) -> str | tuple[ContentPart, ...]:
        """The file: an image or a PDF as a content part, other files as numbered lines."""
        path = checked_arguments(self._tool.info(), arguments)["file_path"]
        try:
            media = self._backend.read_media(path, max_bytes=MAX_MEDIA_BYTES)
        except (OSError, BackendError) as error:
            return _failure_text(error)
        except ValueError:
            media = None  # not a whole image or PDF: the text read says what it is
        if media is None:
            return self._tool.invoke(arguments, **tool_options)
        assert media.data is not None
        what = "an image" if isinstance(media, ImagePart) else "a document"
        intro = f"File {path} is {what} ({media.media_type}, {len(media.data)} bytes):"
        return (TextPart(intro), media)


def _execute_tool(shell: Shell) -> BaseTool:
    def execute(arguments: dict[str, Any]) -> str:
        try:
            result = shell.execute(arguments["command"])
        except _FAILURES as error:
            return _failure_text(error)
        return execute_result_text(result)

    tool = SchemaTool(EXECUTE, _EXECUTE_DESCRIPTION, _EXECUTE_SCHEMA, execute)
    if isinstance(shell, StreamingShell):
        return StreamingExecute(tool, shell)
    return tool


class StreamingExecute:
    """``execute`` over a :class:`~agentkit.backends.StreamingShell`: in a streamed run the
    command's output reaches the caller while it runs (the chunks joined are the text
    :meth:`invoke` returns)."""

    __slots__ = ("_shell", "_tool")

    def __init__(self, tool: SchemaTool, shell: StreamingShell) -> None:
        self._tool = tool
        self._shell = shell

    def info(self) -> ToolInfo:
        """The ``execute`` tool's name, description and parameters."""
        return self._tool.info()

    def __repr__(self) -> str:
        return f"StreamingExecute({self._shell!r})"

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the command; return its output and status as one text."""
        return self._tool.invoke(arguments, **tool_options)

    def stream(self, arguments: str, **tool_options: Any) -> StreamReader[str]:
        """Run the command; stream its output as it comes, then its status lines."""
        command = checked_arguments(self._tool.info(), arguments)["command"]
        try:
            pieces = self._shell.execute_streaming(command)
        except _FAILURES as error:
            return stream_from_iterator([_failure_text(error)])
        return stream_from_iterator(_streamed_text(pieces), on_close=pieces.close)


def _streamed_text(pieces: Iterator[ExecuteResult]) -> Iterator[str]:
    """A command's pieces as the text :func:`execute_result_text` makes of the whole result."""
    wrote = False
    last = ExecuteResult("", None)
    try:
        for piece in pieces:
            if piece.output:
                wrote = True
                yield piece.output
            last = piece
    except _FAILURES as error:
        yield ("\n" if wrote else "") + _failure_text(error)
        return
    tail = execute_result_text(attrs.evolve(last, output=""))  # "\n[Command failed ...]"...
    if tail and not (wrote and tail == _NO_OUTPUT):
        yield tail
_NO_OUTPUT = "[Command executed successfully with no output]"


def execute_result_text(result: ExecuteResult) -> str:
    """What the model reads of a command's result (Eino's texts, and one for a timeout)."""
    parts = [result.output]
    if result.exit_code is not None and result.exit_code != 0:
        parts.append(f"[Command failed with exit code {result.exit_code}]")
    if result.truncated:
        parts.append("[Output was truncated due to size limits]")
    if result.timed_out:
        parts.append("[Command timed out and was killed]")
    text = "\n".join(parts)
    if not text and (result.exit_code is None or result.exit_code == 0) and not result.timed_out:
        return _NO_OUTPUT
    return text



# --- schemas and descriptions --------------------------------------------------------------------

_LS_SCHEMA = object_schema(
    {"path": {"type": "string", "description": "The directory to list ('.' for the root)."}},
    ("path",),
)
_READ_SCHEMA = object_schema(
    {
        "file_path": {"type": "string", "description": "The path to the file to read"},
        "offset": {
            "type": "integer",
            "description": "The line number to start reading from (from 1). Only provide if "
            "the file is too large to read at once",
        },
        "limit": {
            "type": "integer",
            "description": "The number of lines to read (default 2000). Only provide if the "
            "file is too large to read at once.",
        },
    },
    ("file_path",),
)
_WRITE_SCHEMA = object_schema(
    {
        "file_path": {"type": "string", "description": "The path to the file to write"},
        "content": {"type": "string", "description": "The content to write to the file"},
    },
    ("file_path", "content"),
)
_EDIT_SCHEMA = object_schema(
    {
        "file_path": {"type": "string", "description": "The path to the file to modify"},
        "old_string": {"type": "string", "description": "The text to replace"},
        "new_string": {
            "type": "string",
            "description": "The text to replace it with (must be different from old_string)",
        },
        "replace_all": {
            "type": "boolean",
            "description": "Replace all occurrences of old_string (default false)",
            "default": False,
        },
    },
    ("file_path", "old_string", "new_string"),
)
_GLOB_SCHEMA = object_schema(
    {
        "pattern": {"type": "string", "description": "The glob pattern to match files against"},
        "path": {
            "type": "string",
            "description": "The directory to search in; omit it to search from the root.",
        },
    },
    ("pattern",),
)
_GREP_SCHEMA = object_schema(
    {
        "pattern": {
            "type": "string",
            "description": "The regular expression pattern to search for in file contents",
        },
        "path": {
            "type": "string",
            "description": "File or directory to search in. Defaults to the root.",
        },
        "glob": {
            "type": "string",
            "description": "Glob pattern to filter files (e.g. '*.js', '*.{ts,tsx}')",
        },
        "output_mode": {
            "type": "string",
            "enum": ["content", "files_with_matches", "count"],
            "description": "'content' shows matching lines (with -A/-B/-C context, -n line "
            "numbers, head_limit), 'files_with_matches' shows file paths, 'count' shows match "
            "counts. Defaults to 'files_with_matches'.",
        },
        "-C": {
            "type": "integer",
            "description": "Lines to show before and after each match (content mode only).",
        },
        "-B": {
            "type": "integer",
            "description": "Lines to show before each match (content mode only).",
        },
        "-A": {
            "type": "integer",
            "description": "Lines to show after each match (content mode only).",
        },
        "-n": {
            "type": "boolean",
            "description": "Show line numbers (content mode only). Defaults to true.",
        },
        "-i": {"type": "boolean", "description": "Case insensitive search"},
        "type": {
            "type": "string",
            "description": "File type to search: js, py, rust, go, java, md, ...",
        },
        "head_limit": {
            "type": "integer",
            "description": "Show only the first N lines or entries (all modes). Defaults to 0 "
            "(no limit).",
        },
        "offset": {
            "type": "integer",
            "description": "Skip the first N lines or entries before head_limit. Defaults to 0.",
        },
        "multiline": {
            "type": "boolean",
            "description": "Let patterns span lines ('.' matches a newline). Default: false.",
        },
    },
    ("pattern",),
)
_EXECUTE_SCHEMA = object_schema(
    {"command": {"type": "string", "description": "The shell command to run"}}, ("command",)
)

_LS_DESCRIPTION = f"""Lists the files and directories in a directory (directories end with '/').

Use it to explore the workspace before reading or editing files. {_PATH_NOTE}"""

_READ_DESCRIPTION = f"""Reads a text file and returns its lines numbered like 'cat -n'.

- By default it returns up to 2000 lines from the start of the file.
- For large files read a part at a time: offset (first line, from 1) and limit (number of
  lines), e.g. read_file(path, limit=100), then read_file(path, offset=101, limit=100).
- Read a file before you edit it; you may read several files in one turn.
- Binary files and files larger than the backend reads at once are refused with an error.
{_PATH_NOTE}"""

_WRITE_DESCRIPTION = f"""Writes a text file, replacing it if it exists.

Missing directories are made. Prefer edit_file for changes to an existing file; read a
file before replacing it.
{_PATH_NOTE}"""

_EDIT_DESCRIPTION = f"""Replaces an exact piece of text in a file.

- old_string must match the file exactly (same spaces and line breaks; never include the
  line-number prefix read_file shows) and occur once, unless replace_all is true.
- Read the file first. Use replace_all to rename something throughout the file.
{_PATH_NOTE}"""

_GLOB_DESCRIPTION = f"""Finds files by name pattern; returns their paths, sorted.

Patterns: '*' within a directory, '**' across directories, '?', '[abc]', '{{a,b}}'. Examples:
'**/*.py' (every Python file), '*.txt' (text files at the top), 'docs/**/*.md'.
{_PATH_NOTE}"""

_GREP_DESCRIPTION = f"""Searches the contents of text files with a regular expression.

- output_mode: 'files_with_matches' (default) lists the files, 'content' the matching lines
  (with line numbers and optional context), 'count' the number of matches per file.
- Filter files with glob ('*.py', '**/*.md') or type ('py', 'js', 'md'); search one file or
  one directory with path. Page through many results with offset and head_limit.
- Patterns match within one line unless multiline is true.
- Use this tool to search; do not run grep in a shell.
{_PATH_NOTE}"""

_EXECUTE_DESCRIPTION = """Runs a shell command in the workspace directory and returns its output
(standard output and error) and its exit code.

- The command runs with a time limit; a command that runs too long is killed, and very long
  output is cut.
- Quote paths that contain spaces. Chain dependent commands with '&&'.
- Use the file tools (read_file, grep, glob, ls) to read and search files instead of cat,
  grep or find."""
