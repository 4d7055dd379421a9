"""The errors of :mod:`agentkit.backends`.

Everything a backend refuses is a :class:`BackendError`, which also subclasses the builtin
that says the same thing (``except FileNotFoundError`` still works)::

    AgentKitError
    └── BackendError
        ├── PathNotFoundError (FileNotFoundError)    no file or directory at the path
        ├── PathIsDirectoryError (IsADirectoryError) a directory where a file was meant
        ├── PathNotDirectoryError (NotADirectoryError) a file where a directory was meant
        ├── PathOutsideRootError (PermissionError)   a path leaves the backend's root
        ├── FileTooLargeError (ValueError)           more bytes than the backend reads or writes
        ├── BinaryFileError (ValueError)             not UTF-8 text
        ├── EditError (ValueError)                   the text to replace is missing or not unique
        └── SearchTimeoutError (TimeoutError)        a grep or glob pattern ran past its time
    SandboxUnavailableError (RuntimeError)           bubblewrap cannot run a sandbox here

The file tools (:mod:`agentkit.middlewares.filesystem`) turn all of them into a message the
model reads, so a model's mistake never ends the run.
"""

from __future__ import annotations

from agentkit._persist import persisted
from agentkit.errors import AgentKitError

__all__ = [
    "BackendError",
    "BinaryFileError",
    "EditError",
    "FileTooLargeError",
    "PathIsDirectoryError",
    "PathNotDirectoryError",
    "PathNotFoundError",
    "PathOutsideRootError",
    "SandboxUnavailableError",
    "SearchTimeoutError",
]


@persisted("agentkit.backends.BackendError")  # errors can be kept in checkpoints
class BackendError(AgentKitError):
    """A file backend refused an operation (the message says what and how to go on)."""


@persisted("agentkit.backends.PathOutsideRootError")
class PathOutsideRootError(BackendError, PermissionError):
    """A path leads outside the backend's root (``..``, an absolute path, a symbolic link)."""


@persisted("agentkit.backends.FileTooLargeError")
class FileTooLargeError(BackendError, ValueError):
    """A file, or the part of it asked for, is larger than the backend reads or writes at once."""


@persisted("agentkit.backends.BinaryFileError")
class BinaryFileError(BackendError, ValueError):
    """A file is not UTF-8 text (the file tools read and write text only)."""


@persisted("agentkit.backends.EditError")
class EditError(BackendError, ValueError):
    """An edit could not be made: the text to replace is empty, missing, or found more than once."""


@persisted("agentkit.backends.PathNotFoundError")
class PathNotFoundError(BackendError, FileNotFoundError):
    """No file or directory at the path (a :class:`FileNotFoundError`)."""


@persisted("agentkit.backends.PathIsDirectoryError")
class PathIsDirectoryError(BackendError, IsADirectoryError):
    """The path is a directory where a file was meant (an :class:`IsADirectoryError`)."""


@persisted("agentkit.backends.PathNotDirectoryError")
class PathNotDirectoryError(BackendError, NotADirectoryError):
    """The path is a file where a directory was meant (a :class:`NotADirectoryError`)."""


@persisted("agentkit.backends.SearchTimeoutError")
class SearchTimeoutError(BackendError, TimeoutError):
    """A :meth:`~agentkit.backends.Backend.grep` or :meth:`~agentkit.backends.Backend.glob`
    call ran past the backend's ``search_timeout`` and was stopped.

    A pattern with nested repetition (``(a|aa)+$``) can take exponential time on one line; the
    search is stopped at the time limit instead of holding the process. The message names the
    pattern and how to go on (a simpler pattern, a narrower ``path`` or ``glob``).
    """


@persisted("agentkit.backends.SandboxUnavailableError")
class SandboxUnavailableError(AgentKitError, RuntimeError):
    """A :class:`~agentkit.backends.SandboxShell` cannot run here: bubblewrap (``bwrap``) is
    missing, user namespaces are disabled, or a limit asked for cannot be enforced.

    It is raised when the shell is made (never as a silent fall back to an unconfined shell);
    the message says what is missing and how to provide it.
    """
