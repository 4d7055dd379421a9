"""What both backends share: path rules, glob patterns, grep, line selection, text checks."""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Iterator

import attrs
import regex

from agentkit.backends._base import GrepMatch
from agentkit.backends._errors import (
    BinaryFileError,
    FileTooLargeError,
    PathOutsideRootError,
    SearchTimeoutError,
)
from agentkit.errors import AgentKitValueError

__all__ = [
    "SEARCH_TIMEOUT",
    "MiB",
    "TimedPattern",
    "binary_error",
    "check_line_range",
    "check_max_count",
    "check_search_timeout",
    "compile_pattern",
    "decode_text",
    "file_filter",
    "glob_regex",
    "grep_text",
    "relative_parts",
    "select_lines",
    "shown",
    "too_large",
]

MiB = 1024 * 1024

SEARCH_TIMEOUT = 10.0
"""The seconds one grep or glob call may spend matching, by default."""


# --- patterns under a time limit -----------------------------------------------------------------
#
# Patterns come from the model. With the standard library's ``re`` one pattern with nested
# repetition (``(a|aa)+$``) on one short line runs for minutes in a single C call that holds
# the GIL: nothing else in the process (a cancel, a tool timeout, a lease refresh, an SSE
# stream) runs meanwhile. The ``regex`` package matches with the GIL released
# (``concurrent=True``) and stops at a ``timeout``; every match of one call shares one deadline.


def check_search_timeout(seconds: object) -> float:
    """Validate a backend's ``search_timeout`` (a positive number of seconds).

    Raises:
        ValueError: it is not a positive number.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise AgentKitValueError(
            f"search_timeout must be a positive number of seconds (got {seconds!r})"
        )
    return float(seconds)


@attrs.frozen
class TimedPattern:
    """A compiled pattern, matched until the deadline of the call that uses it.

    Attributes:
        source: the pattern as the caller wrote it (a regular expression or a glob).
        compiled: its compiled form.
        deadline: the :func:`time.monotonic` time at which matching stops.
        timeout: the seconds the call was given (for the error message).
    """

    source: str
    compiled: regex.Pattern[str]
    deadline: float
    timeout: float

    @classmethod
    def start(cls, source: str, compiled: regex.Pattern[str], timeout: float) -> TimedPattern:
        """``compiled``, with ``timeout`` seconds from now to match it."""
        return cls(source, compiled, time.monotonic() + timeout, timeout)

    def sharing(self, source: str, compiled: regex.Pattern[str]) -> TimedPattern:
        """Another pattern of the same call: it shares this one's deadline."""
        return TimedPattern(source, compiled, self.deadline, self.timeout)

    def search(self, text: str) -> regex.Match[str] | None:
        """The first match of the pattern anywhere in ``text``."""
        try:
            return self.compiled.search(text, concurrent=True, timeout=self._left())
        except TimeoutError:
            raise self._expired() from None

    def match(self, text: str) -> regex.Match[str] | None:
        """The match of the pattern at the start of ``text``."""
        try:
            return self.compiled.match(text, concurrent=True, timeout=self._left())
        except TimeoutError:
            raise self._expired() from None

    def finditer(self, text: str) -> Iterator[regex.Match[str]]:
        """The matches of the pattern in ``text``, one after another."""
        try:
            yield from self.compiled.finditer(text, concurrent=True, timeout=self._left())
        except TimeoutError:
            raise self._expired() from None

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._expired()
        return left

    def _expired(self) -> SearchTimeoutError:
        return SearchTimeoutError(
            f"the search was stopped after {self.timeout:g} s: the pattern {self.source!r} "
            "takes too long on this text (nested repetition such as '(a|aa)+' or '(a+)+' can "
            "take exponential time); use a simpler pattern, or narrow the search with path "
            "or glob"
        )


# --- paths ---------------------------------------------------------------------------------------


def relative_parts(path: str, *, absolute_root: str | None = None) -> tuple[str, ...]:
    """The components of ``path`` under a backend's root, with ``.`` and ``..`` resolved.

    ``absolute_root`` is a local backend's real root directory: an absolute path must be under
    it. Without one (an in-memory backend) a leading ``/`` is the root itself.

    Raises:
        PathOutsideRootError: ``..`` climbs above the root, or an absolute path is elsewhere.
        ValueError: ``path`` is not a string or holds a NUL character.
    """
    if not isinstance(path, str):
        raise AgentKitValueError(f"a path must be a string (got {path!r})")
    if "\x00" in path:
        raise AgentKitValueError(f"path {path!r} holds a NUL character")
    rest = path
    if absolute_root is not None and path.startswith("/"):
        root = absolute_root.rstrip("/") or "/"
        if path.rstrip("/") == root or root == "/":
            rest = path[len(root):]
        elif path.startswith(root + "/"):
            rest = path[len(root) + 1:]
        else:
            raise PathOutsideRootError(
                f"path {path!r} is outside the backend's root {root!r}; use a path relative "
                f"to the root (like 'notes/todo.md') or an absolute path under it"
            )
    parts: list[str] = []
    for part in rest.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise PathOutsideRootError(
                    f"path {path!r} climbs above the backend's root with '..'; paths stay "
                    "inside the root"
                )
            parts.pop()
            continue
        parts.append(part)
    return tuple(parts)


def shown(parts: Iterable[str]) -> str:
    """A path as the backend shows it: relative to the root, ``.`` for the root itself."""
    return "/".join(parts) or "."


# --- glob patterns -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def glob_regex(pattern: str) -> regex.Pattern[str]:
    """The compiled regular expression of a glob ``pattern`` over ``/``-separated paths.

    ``*`` matches within one path segment, ``**`` as a whole segment any number of segments
    (none too), ``?`` one character but ``/``, ``[abc]``/``[!abc]`` one of a set, ``{a,b}``
    either alternative, ``\\x`` the character ``x``.

    Raises:
        ValueError: the pattern is malformed (an unclosed ``[`` or ``{``).
    """
    return regex.compile(_translate(pattern, pattern) + r"\Z", regex.DOTALL)


def _translate(pattern: str, whole: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            i = _star(pattern, i, out)
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[":
            i = _char_class(pattern, i, out, whole)
            continue
        elif char == "{":
            i = _alternatives(pattern, i, out, whole)
            continue
        elif char == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _star(pattern: str, i: int, out: list[str]) -> int:
    n = len(pattern)
    if i + 1 < n and pattern[i + 1] == "*":
        starts_segment = i == 0 or pattern[i - 1] == "/"
        end = i + 2
        if starts_segment and end < n and pattern[end] == "/":
            out.append("(?:[^/]*/)*")  # "**/": zero or more directories
            return end + 1
        if starts_segment and end == n:
            out.append(".*")  # a trailing "**": everything below
            return end
        out.append("[^/]*")  # "**" inside a segment is one "*"
        return end
    out.append("[^/]*")
    return i + 1


def _char_class(pattern: str, i: int, out: list[str], whole: str) -> int:
    end = i + 1
    if end < len(pattern) and pattern[end] in "!^":
        end += 1
    if end < len(pattern) and pattern[end] == "]":
        end += 1
    while end < len(pattern) and pattern[end] != "]":
        end += 1
    if end >= len(pattern):
        raise AgentKitValueError(f"glob pattern {whole!r} has a '[' without its ']'")
    body = pattern[i + 1 : end]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
    out.append(f"[^/{body}]" if negate else f"[{body}]")
    return end + 1


def _alternatives(pattern: str, i: int, out: list[str], whole: str) -> int:
    depth, end, start = 0, i, i + 1
    options: list[str] = []
    while end < len(pattern):
        char = pattern[end]
        if char == "\\":
            end += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                options.append(pattern[start:end])
                break
        elif char == "," and depth == 1:
            options.append(pattern[start:end])
            start = end + 1
        end += 1
    else:
        raise AgentKitValueError(f"glob pattern {whole!r} has a '{{' without its '}}'")
    out.append("(?:" + "|".join(_translate(option, whole) for option in options) + ")")
    return end + 1


# --- file filters (grep's glob and type) ---------------------------------------------------------

# File types by name, as ripgrep's --type knows the common ones: type -> extensions.
_FILE_TYPES: dict[str, frozenset[str]] = {
    key: frozenset(value.split())
    for key, value in {
        "c": "c h",
        "cpp": "C cc cpp cxx c++ h hh hpp hxx h++ inl",
        "cs": "cs",
        "css": "css scss sass less",
        "csv": "csv",
        "go": "go",
        "html": "htm html ejs",
        "java": "java jsp jspx properties",
        "js": "cjs js jsx mjs vue",
        "json": "json sarif",
        "jsonl": "jsonl",
        "kotlin": "kt kts",
        "lua": "lua",
        "make": "mak mk",
        "markdown": "markdown md mdown mdwn mdx mkd mkdn",
        "md": "markdown md mdown mdwn mdx mkd mkdn",
        "php": "php php3 php4 php5 php7 php8 pht phtml",
        "py": "py pyi",
        "python": "py pyi",
        "ruby": "gemspec rb rbw",
        "rust": "rs",
        "scala": "sbt scala",
        "sh": "bash sh zsh",
        "sql": "psql sql",
        "swift": "swift",
        "toml": "toml",
        "ts": "cts mts ts tsx",
        "typescript": "cts mts ts tsx",
        "txt": "txt",
        "xml": "dtd xml xsd xsl xslt",
        "yaml": "yaml yml",
    }.items()
}


def file_filter(
    glob: str | None, file_type: str | None, base: tuple[str, ...], search: TimedPattern
) -> Callable[[tuple[str, ...]], bool]:
    """A predicate on a file's root-relative parts: does grep search it?

    ``glob`` without ``/`` or ``**`` matches the file's name, otherwise its path under ``base``;
    ``file_type`` matches its extension (a known type, or the extension itself). The glob is
    matched before the deadline of ``search``, the grep pattern of the same call.
    """
    by_glob = search.sharing(glob, glob_regex(glob)) if glob else None
    by_path = glob is not None and ("/" in glob or "**" in glob)
    extensions = _FILE_TYPES.get(file_type, frozenset((file_type,))) if file_type else None

    def keep(parts: tuple[str, ...]) -> bool:
        name = parts[-1]
        if by_glob is not None:
            subject = "/".join(parts[len(base):]) if by_path else name
            if by_glob.match(subject) is None:
                return False
        if extensions is not None:
            extension = name.rsplit(".", 1)[1] if "." in name else ""
            if extension not in extensions:
                return False
        return True

    return keep


# --- grep ----------------------------------------------------------------------------------------


def compile_pattern(
    pattern: str, ignore_case: bool, multiline: bool, timeout: float
) -> TimedPattern:
    """Compile a grep pattern, to be matched within ``timeout`` seconds from now.

    Raises:
        ValueError: the pattern is empty or not a valid regular expression.
    """
    if not pattern:
        raise AgentKitValueError("the search pattern is empty; give a regular expression")
    flags = (regex.IGNORECASE if ignore_case else 0) | (
        regex.DOTALL | regex.MULTILINE if multiline else 0
    )
    try:
        compiled = regex.compile(pattern, flags)
    except regex.error as error:
        raise AgentKitValueError(
            f"the search pattern {pattern!r} is not a valid regular expression: {error}"
        ) from None
    return TimedPattern.start(pattern, compiled, timeout)


def check_max_count(max_count: object) -> int | None:
    """Validate grep's ``max_count`` (a positive int, or ``None`` for no limit).

    Raises:
        ValueError: it is neither.
    """
    if max_count is None:
        return None
    if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 1:
        raise AgentKitValueError(f"max_count must be a positive int or None (got {max_count!r})")
    return max_count


def grep_text(
    path: str, text: str, pattern: TimedPattern, multiline: bool, max_count: int | None = None
) -> list[GrepMatch]:
    """The matches of ``pattern`` in ``text`` (the file ``path``), one per matching line.

    With ``max_count`` the search of the file stops at that many matching lines.
    """
    lines = text.split("\n")
    found: list[int] = []
    if not multiline:
        for number, line in enumerate(lines, 1):
            if pattern.search(line) is not None:
                found.append(number)
                if len(found) == max_count:
                    break
        return [GrepMatch(path, number, lines[number - 1].rstrip("\r")) for number in found]
    seen: dict[int, None] = {}
    for match in pattern.finditer(text):
        first = text.count("\n", 0, match.start()) + 1
        last = text.count("\n", 0, match.end()) + 1
        for number in range(first, min(last, len(lines)) + 1):
            seen[number] = None
        if max_count is not None and len(seen) >= max_count:
            break
    chosen = list(seen)[:max_count] if max_count is not None else list(seen)
    return [GrepMatch(path, number, lines[number - 1].rstrip("\r")) for number in chosen]


# --- text ----------------------------------------------------------------------------------------

_SNIFF = 8192


def decode_text(data: bytes, path: str) -> str:
    """``data`` (the file ``path``) as text.

    Raises:
        BinaryFileError: it holds a NUL byte in its first 8 KiB, or is not UTF-8.
    """
    if b"\x00" in data[:_SNIFF]:
        raise binary_error(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise binary_error(path) from None


def binary_error(path: str) -> BinaryFileError:
    """The error for file ``path``, which is not UTF-8 text."""
    return BinaryFileError(
        f"{path!r} is a binary file (not UTF-8 text); the file tools read and write text only"
    )


def check_line_range(offset: object, limit: object) -> tuple[int, int | None]:
    """Validate ``offset`` (from 1; smaller values mean 1) and ``limit`` (``None``: no limit).

    Raises:
        ValueError: either is not an int, or ``limit`` is below 1.
    """
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise AgentKitValueError(f"offset must be a line number (got {offset!r})")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise AgentKitValueError(
            f"limit must be a positive number of lines, or None (got {limit!r})"
        )
    return max(offset, 1), limit


def select_lines(text: str, offset: int, limit: int | None) -> str:
    """Lines ``offset`` .. ``offset + limit - 1`` of ``text`` (from 1), joined with ``\\n``."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # the newline ends the last line; it does not start another
    chosen = lines[offset - 1 :] if limit is None else lines[offset - 1 : offset - 1 + limit]
    return "\n".join(line.rstrip("\r") for line in chosen)


def too_large(path: str, size: int, limit: int, what: str = "the file") -> FileTooLargeError:
    """The error for ``path`` when ``what`` has ``size`` bytes, more than ``limit``."""
    return FileTooLargeError(
        f"{path!r}: {what} has {size:,} bytes, more than the {limit:,} the backend reads or "
        "writes at once; read it a part at a time (offset and limit), or raise the backend's "
        "max_file_bytes"
    )
