"""InMemoryBackend: a file backend that keeps its files in a dict (tests, scratch space)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from agentkit.backends._base import GrepMatch
from agentkit.backends._errors import (
    EditError,
    PathIsDirectoryError,
    PathNotDirectoryError,
    PathNotFoundError,
)
from agentkit.backends._match import (
    SEARCH_TIMEOUT,
    MiB,
    TimedPattern,
    check_line_range,
    check_max_count,
    check_search_timeout,
    compile_pattern,
    file_filter,
    glob_regex,
    grep_text,
    relative_parts,
    select_lines,
    shown,
    too_large,
)
from agentkit.errors import AgentKitValueError

__all__ = ["InMemoryBackend"]


class InMemoryBackend:
    """A :class:`~agentkit.backends.Backend` whose files live in memory (thread-safe).

    Directories exist while files are in them. Paths are relative to the root; a leading
    ``/`` means the root too (``"/notes.md"`` is ``"notes.md"``), and ``..`` never climbs above
    it. Nothing touches the disk: use it in tests, or as an agent's scratch space::

        backend = InMemoryBackend({"notes/todo.md": "- read the paper\\n"})
        backend.read("notes/todo.md")     # '- read the paper\\n'

    Args:
        files: files to start with, path -> text.
        max_file_bytes: the largest file (UTF-8 bytes) it stores; a larger write raises
            :class:`~agentkit.backends.FileTooLargeError`.
        search_timeout: the seconds one :meth:`grep` or :meth:`glob` call may spend matching
            its patterns; past it the call raises
            :class:`~agentkit.backends.SearchTimeoutError`.
    """

    def __init__(
        self,
        files: Mapping[str, str] | None = None,
        *,
        max_file_bytes: int = 10 * MiB,
        search_timeout: float = SEARCH_TIMEOUT,
    ) -> None:
        if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int):
            raise AgentKitValueError(
                f"max_file_bytes must be a positive int (got {max_file_bytes!r})"
            )
        if max_file_bytes < 1:
            raise AgentKitValueError(
                f"max_file_bytes must be a positive int (got {max_file_bytes!r})"
            )
        self._lock = threading.Lock()
        self._files: dict[tuple[str, ...], str] = {}
        self._max = max_file_bytes
        self._search_timeout = check_search_timeout(search_timeout)
        for path, content in (files or {}).items():
            self.write(path, content)

    def __repr__(self) -> str:
        return f"InMemoryBackend({len(self._files)} files)"

    # --- reading ---

    def ls(self, path: str = ".") -> list[str]:
        """The names in directory ``path``, sorted; directories end with ``/``."""
        parts = relative_parts(path)
        with self._lock:
            if parts in self._files:
                raise PathNotDirectoryError(_not_a_directory(path))
            names: set[str] = set()
            depth = len(parts)
            for key in self._files:
                if len(key) > depth and key[:depth] == parts:
                    names.add(key[depth] + ("/" if len(key) > depth + 1 else ""))
        if not names and parts:
            raise PathNotFoundError(f"there is no directory {path!r} in the backend")
        return sorted(names)

    def read(self, path: str, *, offset: int = 1, limit: int | None = None) -> str:
        """The text of file ``path``, or ``limit`` lines of it from line ``offset`` (from 1)."""
        first, count = check_line_range(offset, limit)
        content = self._content(path)
        if first == 1 and count is None:
            return content
        return select_lines(content, first, count)

    def _content(self, path: str) -> str:
        parts = relative_parts(path)
        with self._lock:
            content = self._files.get(parts)
            if content is None and any(key[: len(parts)] == parts for key in self._files):
                raise PathIsDirectoryError(f"{path!r} is a directory, not a file; list it with ls")
        if content is None:
            raise PathNotFoundError(f"there is no file {path!r} in the backend")
        return content

    def glob(self, pattern: str, path: str = ".") -> list[str]:
        """The files under ``path`` whose path relative to ``path`` matches ``pattern``."""
        source = pattern.lstrip("/")
        by_glob = TimedPattern.start(source, glob_regex(source), self._search_timeout)
        base = relative_parts(path)
        with self._lock:
            keys = list(self._files)
        found = [
            key for key in keys
            if len(key) > len(base) and key[: len(base)] == base
            and by_glob.match("/".join(key[len(base):])) is not None
        ]
        return sorted(shown(key) for key in found)

    def grep(
        self,
        pattern: str,
        path: str = ".",
        *,
        glob: str | None = None,
        file_type: str | None = None,
        ignore_case: bool = False,
        multiline: bool = False,
        max_count: int | None = None,
    ) -> list[GrepMatch]:
        """The matching lines of the files under ``path`` (see :meth:`Backend.grep`)."""
        limit = check_max_count(max_count)
        search = compile_pattern(pattern, ignore_case, multiline, self._search_timeout)
        base = relative_parts(path)
        with self._lock:
            files = dict(self._files)
        if base and not any(key[: len(base)] == base for key in files):
            raise PathNotFoundError(f"there is no file or directory {path!r} in the backend")
        keep = file_filter(glob, file_type, base[:-1] if base in files else base, search)
        matches: list[GrepMatch] = []
        for key, content in sorted(files.items()):
            if key[: len(base)] == base and keep(key):
                matches.extend(grep_text(shown(key), content, search, multiline, limit))
        return matches

    # --- writing ---

    def write(self, path: str, content: str) -> None:
        """Create or replace file ``path`` with ``content``."""
        if not isinstance(content, str):
            raise AgentKitValueError(f"content must be text (got {type(content).__name__})")
        parts = relative_parts(path)
        if not parts:
            raise PathIsDirectoryError("the root is a directory; give a file path to write")
        size = len(content.encode("utf-8"))
        if size > self._max:
            raise too_large(path, size, self._max, "the content")
        with self._lock:
            for depth in range(1, len(parts)):
                if parts[:depth] in self._files:
                    raise PathNotDirectoryError(
                        f"cannot write {path!r}: {shown(parts[:depth])!r} is a file"
                    )
            if any(len(key) > len(parts) and key[: len(parts)] == parts for key in self._files):
                raise PathIsDirectoryError(f"{path!r} is a directory, not a file")
            self._files[parts] = content

    def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        """Replace ``old`` with ``new`` in file ``path``; return how many were replaced."""
        parts = relative_parts(path)
        with self._lock:
            content = self._files.get(parts)
            if content is None:
                raise PathNotFoundError(f"there is no file {path!r} in the backend")
            updated, count = replace_text(path, content, old, new, replace_all)
            size = len(updated.encode("utf-8"))
            if size > self._max:
                raise too_large(path, size, self._max, "the edited file")
            self._files[parts] = updated
            return count

    def delete(self, path: str) -> None:
        """Delete file ``path``."""
        parts = relative_parts(path)
        with self._lock:
            if self._files.pop(parts, None) is None:
                raise PathNotFoundError(f"there is no file {path!r} in the backend")


def replace_text(path: str, content: str, old: str, new: str, replace_all: bool) -> tuple[str, int]:
    """``content`` with ``old`` replaced by ``new``, and the number of replacements.

    Raises:
        EditError: ``old`` is empty, not in ``content``, or in it more than once without
            ``replace_all``.
    """
    if not isinstance(old, str) or not isinstance(new, str):
        raise EditError("the old and the new text must be strings")
    if not old:
        raise EditError(f"cannot edit {path!r}: the text to replace is empty")
    if old == new:
        raise EditError(f"cannot edit {path!r}: the new text is the same as the old one")
    count = content.count(old)
    if count == 0:
        raise EditError(
            f"cannot edit {path!r}: the text to replace was not found in it (it must match "
            "exactly, with the same spaces and line breaks; read the file first)"
        )
    if count > 1 and not replace_all:
        raise EditError(
            f"cannot edit {path!r}: the text to replace occurs {count} times; include more "
            "surrounding text to make it unique, or replace every occurrence with replace_all"
        )
    return content.replace(old, new), count


def _not_a_directory(path: str) -> str:
    return f"{path!r} is a file, not a directory; read it with read_file"
