"""File backends and shells: what the file tools and ``execute`` of a deep agent work on.

- :class:`Backend`: the protocol of a small file system (``ls``, ``read``, ``write``, ``edit``,
  ``glob``, ``grep``); :class:`DeletingBackend` adds ``delete``.
- :class:`InMemoryBackend`: files in memory (tests, scratch space).
- :class:`MultiModalReader`: a backend that reads images and PDFs as content parts
  (:class:`LocalBackend` and :class:`SandboxBackend` are).
- :class:`LocalBackend`: a directory on disk; every path is confined under its root (``..``,
  absolute paths elsewhere and symbolic links out of it are refused, also against a file
  system that changes meanwhile).
- :class:`Shell` and :class:`LocalShell`: shell commands in a subprocess in a directory,
  bounded in time and output, killed with their process group on timeout or cancel (not a
  sandbox); a :class:`StreamingShell` (both built-in shells are) also gives the output as it
  comes.
- :class:`SandboxShell`: shell commands in a bubblewrap sandbox (no network, a read-only
  system, one writable directory, capped resources, every process killed with the command);
  :class:`SandboxBackend` is a :class:`LocalBackend` and a :class:`SandboxShell` in one;
  :class:`SandboxUnavailableError` where bubblewrap cannot run.

Paths are ``/``-separated and relative to the backend's root; what a backend returns is
relative to the root too::

    from agentkit.backends import LocalBackend, LocalShell

    backend = LocalBackend("workspace")
    backend.write("notes/plan.md", "1. read the sources\\n")
    backend.grep("sources", glob="*.md")   # [GrepMatch(path='notes/plan.md', line=1, ...)]
    LocalShell("workspace", timeout=30).execute("ls notes").output   # 'plan.md\\n'

The tools over them are in :mod:`agentkit.middlewares.filesystem`; a deep agent
(:mod:`agentkit.prebuilt.deep`) takes them as ``backend=`` and ``shell=``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach, present
from agentkit.backends._base import (
    MEDIA_TYPES,
    Backend,
    DeletingBackend,
    ExecuteResult,
    GrepMatch,
    MultiModalReader,
    Shell,
    StreamingShell,
)
from agentkit.backends._errors import (
    BackendError,
    BinaryFileError,
    EditError,
    FileTooLargeError,
    PathIsDirectoryError,
    PathNotDirectoryError,
    PathNotFoundError,
    PathOutsideRootError,
    SandboxUnavailableError,
    SearchTimeoutError,
)
from agentkit.backends._local import LocalBackend
from agentkit.backends._memory import InMemoryBackend
from agentkit.backends._sandbox import SANDBOX_WORKDIR, SandboxBackend, SandboxShell
from agentkit.backends._shell import LocalShell

__all__ = [
    "Backend",
    "BackendError",
    "BinaryFileError",
    "DeletingBackend",
    "EditError",
    "ExecuteResult",
    "FileTooLargeError",
    "GrepMatch",
    "InMemoryBackend",
    "LocalBackend",
    "LocalShell",
    "MEDIA_TYPES",
    "MultiModalReader",
    "PathIsDirectoryError",
    "PathNotDirectoryError",
    "PathNotFoundError",
    "PathOutsideRootError",
    "SANDBOX_WORKDIR",
    "SandboxBackend",
    "SandboxShell",
    "SandboxUnavailableError",
    "SearchTimeoutError",
    "Shell",
    "StreamingShell",
]

present([globals()[name] for name in __all__], __name__)

if not TYPE_CHECKING:  # dir() lists the API only (never the private modules)
    __getattr__, __dir__ = attach(__name__)
