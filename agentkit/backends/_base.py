"""What a file backend and a shell are: the protocols :class:`Backend` and :class:`Shell`.

A backend is a small file system the agent's file tools work on: an in-memory one
(:class:`~agentkit.backends.InMemoryBackend`), a directory on disk
(:class:`~agentkit.backends.LocalBackend`), or anything else with these methods (a sandbox, a
remote store). Paths are ``/``-separated and relative to the backend's root; what a backend
returns (from :meth:`Backend.glob`, in :class:`GrepMatch`) is relative to the root too, so it
can be passed back as it is.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Protocol, runtime_checkable

import attrs

from agentkit.schema import FilePart, ImagePart

MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"})
"""The file types :meth:`MultiModalReader.read_media` gives as content parts (by their bytes)."""

__all__ = [
    "Backend",
    "DeletingBackend",
    "ExecuteResult",
    "GrepMatch",
    "MEDIA_TYPES",
    "MultiModalReader",
    "Shell",
    "StreamingShell",
]


@attrs.frozen
class GrepMatch:
    """One line that matched a :meth:`Backend.grep` search.

    Attributes:
        path: the file, relative to the backend's root.
        line: the line number, from 1.
        content: the line's text (without its line ending).
    """

    path: str
    line: int
    content: str


@attrs.frozen
class ExecuteResult:
    """What a :meth:`Shell.execute` call gave.

    Attributes:
        output: what the command wrote (standard output and standard error, interleaved).
        exit_code: its exit status, ``None`` when it was killed (timeout or cancel).
        truncated: the command wrote more than the shell keeps; ``output`` is the beginning.
        timed_out: the command ran past the shell's time limit and was killed.
    """

    output: str
    exit_code: int | None
    truncated: bool = False
    timed_out: bool = False


@runtime_checkable
class Backend(Protocol):
    """A file system the file tools work on; paths are relative to its root.

    Errors: :class:`FileNotFoundError`, :class:`NotADirectoryError`, :class:`IsADirectoryError`
    for what is not there, and the :class:`~agentkit.backends.BackendError` subclasses for what
    the backend refuses (a path outside its root, a file too large, a binary file, an edit
    that cannot be made).
    """

    def ls(self, path: str = ".") -> list[str]:
        """The names in directory ``path``, sorted; directories end with ``/``."""
        ...

    def read(self, path: str, *, offset: int = 1, limit: int | None = None) -> str:
        """The text of file ``path``: all of it, or ``limit`` lines from line ``offset`` (from 1).

        Read from line 1 without ``limit``, the text is returned exactly as stored; otherwise
        the selected lines are joined with ``"\\n"`` (no trailing newline).
        """
        ...

    def write(self, path: str, content: str) -> None:
        """Create or replace file ``path`` with ``content`` (missing directories are made)."""
        ...

    def edit(self, path: str, old: str, new: str, *, replace_all: bool = False) -> int:
        """Replace ``old`` with ``new`` in file ``path``; return how many were replaced.

        ``old`` must occur exactly once unless ``replace_all``.
        """
        ...

    def glob(self, pattern: str, path: str = ".") -> list[str]:
        """The files under ``path`` whose path relative to ``path`` matches ``pattern``, sorted.

        Patterns: ``*`` (within one directory), ``**`` (any number of directories), ``?``,
        ``[abc]``, ``{a,b}``. The paths returned are relative to the root.
        """
        ...

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
        """The lines of the text files under ``path`` (a directory or a file) matching ``pattern``.

        ``pattern`` is a Python regular expression; ``glob`` keeps the files matching it (by
        name, or by path under ``path`` when it has a ``/`` or ``**``); ``file_type`` keeps
        files of one type (``"py"``, ``"js"``, ``"md"``...). With ``multiline`` a match may span
        lines (``.`` matches a newline) and every line it covers is returned. ``max_count``
        (ripgrep's ``--max-count``) stops the search of each file at that many matching lines.
        Binary files are skipped. Matches are sorted by path, then line.

        Patterns come from a model: a backend bounds the time it spends matching them (the
        built-in ones raise :class:`~agentkit.backends.SearchTimeoutError`).
        """
        ...


@runtime_checkable
class MultiModalReader(Backend, Protocol):
    """A :class:`Backend` that reads images and PDFs as content parts (Eino's
    ``MultiModalReader``): ``read_file`` then gives the model the image or the document
    itself, and the text of every other file as before.
    """

    def read_media(self, path: str, *, max_bytes: int) -> ImagePart | FilePart | None:
        """File ``path`` as a content part when its bytes are an image (PNG, JPEG, GIF, WebP:
        an :class:`~agentkit.ImagePart`) or a PDF (a :class:`~agentkit.FilePart`, with its
        name); ``None`` for any other file (read it with :meth:`~Backend.read`).

        The type is read from the file's first bytes, never from its name.

        Raises:
            FileTooLargeError: the image or PDF has more than ``max_bytes`` bytes.
            ValueError: its bytes are not a whole image or PDF (a truncated file).
        """
        ...


@runtime_checkable
class DeletingBackend(Backend, Protocol):
    """A :class:`Backend` that can also delete files (the plan-task tools need it)."""

    def delete(self, path: str) -> None:
        """Delete file ``path`` (a missing file raises :class:`FileNotFoundError`)."""
        ...


@runtime_checkable
class Shell(Protocol):
    """Runs a shell command for the ``execute`` tool."""

    def execute(self, command: str) -> ExecuteResult:
        """Run ``command`` and return its output and exit status."""
        ...


@runtime_checkable
class StreamingShell(Shell, Protocol):
    """A :class:`Shell` that also gives a command's output as it comes (Eino's
    ``StreamingShell``): in a streamed run, ``execute`` sends it to the caller while the command
    runs. :class:`~agentkit.backends.LocalShell`, :class:`~agentkit.backends.SandboxShell`
    and :class:`~agentkit.backends.SandboxBackend` are streaming shells.
    """

    def execute_streaming(self, command: str) -> Generator[ExecuteResult, None, None]:
        """Run ``command``; yield its output in pieces as it comes.

        Each piece is an :class:`ExecuteResult` with the next part of the output and
        ``exit_code`` ``None``; the last one has no output and the command's exit status,
        ``truncated`` and ``timed_out`` (the pieces joined are what :meth:`~Shell.execute`
        returns). The command starts at the first ``next()``; closing the iterator before its
        end kills the command.
        """
        ...
