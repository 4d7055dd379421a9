"""LocalBackend: a directory on disk as a file backend, every path confined under its root.

How the confinement holds, also against a file system that changes while the agent works:

1. A path is taken apart with ``.`` and ``..`` resolved on its own (``..`` may not climb above
   the root); an absolute path must name something under the root.
2. The path is resolved with :func:`os.path.realpath`: a symbolic link inside the root is
   followed to its target, and a path whose target is outside the root is refused.
3. The resolved path is then opened one component at a time, from a descriptor of the root,
   with ``O_NOFOLLOW`` (``openat``): no symbolic link is followed any more. A link made between
   steps 2 and 3 makes the open fail; it never leads outside.
4. Writes go to a new file in the target's directory, renamed over the target: a link put in
   place of the target is replaced, never written through. Special files (pipes, devices)
   are refused, so a read never blocks on one.

Not covered: hard links to files outside the root (made by someone who can already write
there) are read like any file. The shell (:class:`~agentkit.backends.LocalShell`) is not
confined by any of this.
"""

from __future__ import annotations

import errno
import os
import posixpath
import secrets
import stat
import threading
from collections.abc import Callable, Iterator
from typing import BinaryIO

from agentkit._media import sniff
from agentkit._runctx import check_cancelled
from agentkit.backends._base import MEDIA_TYPES, GrepMatch
from agentkit.backends._errors import (
    BackendError,
    PathIsDirectoryError,
    PathNotFoundError,
    PathOutsideRootError,
)
from agentkit.backends._match import (
    SEARCH_TIMEOUT,
    MiB,
    TimedPattern,
    binary_error,
    check_line_range,
    check_max_count,
    check_search_timeout,
    compile_pattern,
    decode_text,
    file_filter,
    glob_regex,
    grep_text,
    relative_parts,
    shown,
    too_large,
)
from agentkit.backends._memory import replace_text
from agentkit.errors import AgentKitValueError
from agentkit.schema import FilePart, ImagePart

__all__ = ["LocalBackend"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
_SNIFF = 8192


class LocalBackend:
    """A :class:`~agentkit.backends.Backend` over the directory ``root``; nothing outside it is
    ever read or written.

    Paths are relative to ``root`` (``"notes/todo.md"``); an absolute path is accepted when it
    is under ``root``. ``..`` that climbs above the root, an absolute path elsewhere, and a
    symbolic link whose target is outside the root are refused with
    :class:`~agentkit.backends.PathOutsideRootError` (a :class:`PermissionError`). Symbolic
    links inside the root are followed; :meth:`grep` and :meth:`glob` do not descend into
    linked directories. Writes are atomic (a new file renamed over the old one, which keeps
    its permission bits). POSIX only (it relies on ``O_NOFOLLOW`` and ``openat``).

    Example::

        backend = LocalBackend("workspace")
        backend.write("notes/todo.md", "- read the paper\\n")
        backend.glob("**/*.md")            # ['notes/todo.md']
        backend.read("../secrets.txt")     # PathOutsideRootError

    Args:
        root: the directory (it must exist).
        max_file_bytes: the most bytes read or written at once: reading a larger file whole,
            or more than this many bytes of its lines, and writing more, raise
            :class:`~agentkit.backends.FileTooLargeError`; :meth:`grep` skips larger files.
        search_timeout: the seconds one :meth:`grep` or :meth:`glob` call may spend matching
            its patterns; past it the call raises
            :class:`~agentkit.backends.SearchTimeoutError`. Matching releases the GIL, so the
            rest of the process runs meanwhile.

    Raises:
        ValueError: ``root`` is not a directory, ``max_file_bytes`` is not a positive int, or
            ``search_timeout`` is not a positive number.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_file_bytes: int = 10 * MiB,
        search_timeout: float = SEARCH_TIMEOUT,
    ) -> None:
        if not _NOFOLLOW or not _DIRECTORY or os.open not in os.supports_dir_fd:
            raise OSError("LocalBackend needs a POSIX system (O_NOFOLLOW and openat)")
        if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int):
            raise AgentKitValueError(
                f"max_file_bytes must be a positive int (got {max_file_bytes!r})"
            )
        if max_file_bytes < 1:
            raise AgentKitValueError(
                f"max_file_bytes must be a positive int (got {max_file_bytes!r})"
            )
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise AgentKitValueError(f"LocalBackend root {os.fspath(root)!r} is not a directory")
        self._root = real
        self._absolute_root = real  # what an absolute path must be under (a subclass may map it)
        self._prefix = real if real.endswith(os.sep) else real + os.sep
        self._max = max_file_bytes
        self._search_timeout = check_search_timeout(search_timeout)
        self._lock = threading.Lock()  # edits are read, change, write: one at a time

    @property
    def root(self) -> str:
        """The root directory (its real path)."""
        return self._root

    def __repr__(self) -> str:
        return f"LocalBackend({self._root!r})"

    # --- paths ---

    def _resolve(self, path: str, *, follow_last: bool = True) -> tuple[str, ...]:
        """The components under the root of what ``path`` names (links inside the root followed;
        the last component's own link too, unless ``follow_last`` is false)."""
        parts = relative_parts(path, absolute_root=self._absolute_root)
        if not follow_last and parts:
            return (*self._resolve(path + "/..", follow_last=True), parts[-1])
        real = os.path.realpath(os.path.join(self._root, *parts))
        if real == self._root:
            return ()
        if not real.startswith(self._prefix):
            raise PathOutsideRootError(
                f"path {path!r} leads outside the backend's root {self._root!r} through a "
                "symbolic link; only files under the root can be used"
            )
        return tuple(real[len(self._prefix):].split(os.sep))

    def _open_dir(self, parts: tuple[str, ...], path: str, *, create: bool = False) -> int:
        """A descriptor of directory ``parts``, opened from the root without following links."""
        fd = os.open(self._root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for depth, part in enumerate(parts, 1):
                try:
                    inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise PathNotFoundError(
                            f"there is no directory {shown(parts[:depth])!r} in the backend"
                        ) from None
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass  # made meanwhile: open it
                    try:
                        inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
                    except OSError as error:
                        raise _refused(error, fd, part, parts[:depth], path) from None
                except OSError as error:
                    raise _refused(error, fd, part, parts[:depth], path) from None
                os.close(fd)
                fd = inner
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _open_file(self, parts: tuple[str, ...], path: str) -> int:
        """A descriptor of regular file ``parts`` opened for reading, without following links."""
        if not parts:
            raise PathIsDirectoryError("the root is a directory, not a file; list it with ls")
        directory = self._open_dir(parts[:-1], path)
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=directory)
        except FileNotFoundError:
            raise PathNotFoundError(f"there is no file {path!r} in the backend") from None
        except OSError as error:
            raise _refused(error, directory, parts[-1], parts, path) from None
        finally:
            os.close(directory)
        try:
            _check_regular(os.fstat(fd).st_mode, path)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # --- reading ---

    def ls(self, path: str = ".") -> list[str]:
        """The names in directory ``path``, sorted; directories end with ``/``."""
        fd = self._open_dir(self._resolve(path), path)
        try:
            with os.scandir(fd) as entries:
                names = [
                    entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "")
                    for entry in entries
                ]
        finally:
            os.close(fd)
        return sorted(names)

    def read(self, path: str, *, offset: int = 1, limit: int | None = None) -> str:
        """The text of file ``path``, or ``limit`` lines of it from line ``offset`` (from 1).

        Raises:
            BinaryFileError: the file is not UTF-8 text.
            FileTooLargeError: the file (read whole) or the lines asked for are larger than
                ``max_file_bytes``.
        """
        first, count = check_line_range(offset, limit)
        fd = self._open_file(self._resolve(path), path)
        with os.fdopen(fd, "rb") as file:
            if b"\x00" in os.pread(fd, _SNIFF, 0):
                raise binary_error(path)
            if first == 1 and count is None:
                size = os.fstat(fd).st_size
                if size > self._max:
                    raise too_large(path, size, self._max)
                data = file.read(self._max + 1)
                if len(data) > self._max:
                    raise too_large(path, len(data), self._max)
                return decode_text(data, path)
            return decode_text(self._lines(file, path, first, count), path)

    def read_media(self, path: str, *, max_bytes: int) -> ImagePart | FilePart | None:
        """File ``path`` as an :class:`~agentkit.ImagePart` (PNG, JPEG, GIF, WebP) or a
        :class:`~agentkit.FilePart` (PDF), by its first bytes; ``None`` for any other file
        (see :class:`~agentkit.backends.MultiModalReader`).

        Raises:
            FileTooLargeError: the image or PDF has more than ``max_bytes`` bytes (or more
                than ``max_file_bytes``).
            ValueError: its bytes are not a whole image or PDF.
        """
        limit = min(max_bytes, self._max)
        fd = self._open_file(self._resolve(path), path)
        with os.fdopen(fd, "rb") as file:
            media_type = sniff(os.pread(fd, 16, 0))
            if media_type not in MEDIA_TYPES:
                return None
            size = os.fstat(fd).st_size
            if size > limit:
                raise too_large(path, size, limit)
            data = file.read(limit + 1)
            if len(data) > limit:
                raise too_large(path, len(data), limit)
        if media_type == "application/pdf":
            return FilePart(data, media_type=media_type, filename=posixpath.basename(path))
        return ImagePart(data, media_type=media_type)

    def _lines(self, file: BinaryIO, path: str, first: int, count: int | None) -> bytes:
        """Lines ``first`` .. ``first + count - 1`` of ``file``, joined with ``\\n``."""
        limit = self._max
        for number in range(1, first):
            skipped = file.readline(limit + 1)
            if not skipped:
                return b""
            while not skipped.endswith(b"\n"):  # a line longer than the limit: skip it all
                skipped = file.readline(limit + 1)
                if not skipped:
                    return b""
            if number % 10_000 == 0:
                check_cancelled()
        chosen: list[bytes] = []
        total = 0
        while count is None or len(chosen) < count:
            line = file.readline(limit + 1 - total)
            if not line:
                break
            total += len(line)
            if total > limit:
                raise too_large(path, total, limit, "the part asked for")
            chosen.append(line.rstrip(b"\n").rstrip(b"\r"))
        return b"\n".join(chosen)

    def glob(self, pattern: str, path: str = ".") -> list[str]:
        """The files under ``path`` whose path relative to ``path`` matches ``pattern``."""
        source = pattern.lstrip("/")
        by_glob = TimedPattern.start(source, glob_regex(source), self._search_timeout)
        base = self._resolve(path)
        found = [
            shown((*base, *sub))
            for sub, _ in self._walk(base, path)
            if by_glob.match("/".join(sub)) is not None
        ]
        return sorted(found)

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
        """The matching lines of the text files under ``path`` (see :meth:`Backend.grep`).

        Binary files, files larger than ``max_file_bytes``, special files and symbolic links
        are skipped. Files are read one at a time.
        """
        limit = check_max_count(max_count)
        search = compile_pattern(pattern, ignore_case, multiline, self._search_timeout)
        base = self._resolve(path)
        matches: list[GrepMatch] = []
        if base and self._is_file(base, path):
            keep = file_filter(glob, file_type, base[:-1], search)
            if keep(base):
                text = self._searchable(lambda: self._open_file(base, path))
                if text is not None:
                    matches.extend(grep_text(shown(base), text, search, multiline, limit))
            return matches
        keep = file_filter(glob, file_type, base, search)
        for sub, opener in self._walk(base, path):
            parts = (*base, *sub)
            if keep(parts):
                text = self._searchable(opener)
                if text is not None:
                    matches.extend(grep_text(shown(parts), text, search, multiline, limit))
        matches.sort(key=lambda match: (match.path, match.line))
        return matches

    def _is_file(self, parts: tuple[str, ...], path: str) -> bool:
        directory = self._open_dir(parts[:-1], path)
        try:
            mode = os.stat(parts[-1], dir_fd=directory, follow_symlinks=False).st_mode
        except FileNotFoundError:
            raise PathNotFoundError(
                f"there is no file or directory {path!r} in the backend"
            ) from None
        finally:
            os.close(directory)
        return not stat.S_ISDIR(mode)

    def _searchable(self, opener: Callable[[], int]) -> str | None:
        """The text of a file to search, or ``None`` when grep skips it."""
        try:
            fd = opener()
        except (OSError, BackendError):
            return None
        with os.fdopen(fd, "rb") as file:
            if os.fstat(fd).st_size > self._max:
                return None
            try:
                return decode_text(file.read(self._max + 1), "")
            except BackendError:
                return None

    def _walk(
        self, base: tuple[str, ...], path: str
    ) -> Iterator[tuple[tuple[str, ...], Callable[[], int]]]:
        """Every file under directory ``base``: its parts under ``base`` and how to open it."""
        fd = self._open_dir(base, path)
        try:
            for top, _dirs, files, dir_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                check_cancelled()
                where = tuple(part for part in top.split("/") if part not in ("", "."))
                for name in sorted(files):
                    yield (*where, name), _opener(dir_fd, name)
        finally:
            os.close(fd)

    # --- writing ---

    def write(self, path: str, content: str) -> None:
        """Create or replace file ``path`` with ``content`` (atomically; missing directories are
        made)."""
        if not isinstance(content, str):
            raise AgentKitValueError(f"content must be text (got {type(content).__name__})")
        data = content.encode("utf-8")
        if len(data) > self._max:
            raise too_large(path, len(data), self._max, "the content")
        parts = self._resolve(path)
        if not parts:
            raise PathIsDirectoryError("the root is a directory; give a file path to write")
        directory = self._open_dir(parts[:-1], path, create=True)
        try:
            _replace(directory, parts[-1], data, path)
        finally:
            os.close(directory)

    def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        """Replace ``old`` with ``new`` in file ``path``; return how many were replaced."""
        with self._lock:
            content = self.read(path)
            updated, count = replace_text(path, content, old, new, replace_all)
            self.write(path, updated)
            return count

    def delete(self, path: str) -> None:
        """Delete file ``path`` (a symbolic link is removed itself, never its target)."""
        parts = self._resolve(path, follow_last=False)
        if not parts:
            raise PathIsDirectoryError("the root is a directory; it cannot be deleted")
        directory = self._open_dir(parts[:-1], path)
        try:
            try:
                mode = os.stat(parts[-1], dir_fd=directory, follow_symlinks=False).st_mode
            except FileNotFoundError:
                raise PathNotFoundError(f"there is no file {path!r} in the backend") from None
            if stat.S_ISDIR(mode):
                raise PathIsDirectoryError(f"{path!r} is a directory; delete deletes files only")
            os.unlink(parts[-1], dir_fd=directory)
        finally:
            os.close(directory)


def _opener(dir_fd: int, name: str) -> Callable[[], int]:
    def open_file() -> int:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise BackendError(f"{name!r} is not a regular file")
        return fd

    return open_file


def _check_regular(mode: int, path: str) -> None:
    if stat.S_ISDIR(mode):
        raise PathIsDirectoryError(f"{path!r} is a directory, not a file; list it with ls")
    if not stat.S_ISREG(mode):
        raise BackendError(
            f"{path!r} is not a regular file (a pipe, socket or device); the file tools work "
            "on regular files only"
        )


def _refused(
    error: OSError, directory: int, name: str, parts: tuple[str, ...], path: str
) -> OSError:
    """The error for component ``name`` of ``path`` that could not be opened."""
    try:
        is_link = stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        is_link = False
    if is_link or error.errno == errno.ELOOP:
        return PathOutsideRootError(
            f"path {path!r}: {shown(parts)!r} is a symbolic link that does not resolve inside "
            "the root (a loop of links, or a link made while the path was opened); links are "
            "not followed there"
        )
    if error.errno == errno.ENOTDIR:
        return NotADirectoryError(f"path {path!r}: {shown(parts)!r} is a file, not a directory")
    return error


def _replace(directory: int, name: str, data: bytes, path: str) -> None:
    """Write ``data`` to a new file in ``directory`` and rename it to ``name``."""
    try:
        existing = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise PathIsDirectoryError(f"{path!r} is a directory, not a file")
    temporary = f".agentkit-{secrets.token_hex(8)}.tmp"
    fd = os.open(
        temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666,
        dir_fd=directory,
    )
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if existing is not None and stat.S_ISREG(existing.st_mode):
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
            os.fsync(fd)
        os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=directory)
        except FileNotFoundError:
            pass
        raise
