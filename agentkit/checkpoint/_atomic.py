"""Atomic file replacement whose temporary files a killed writer does not leave behind.

A file is replaced by writing a temporary file and moving it over the old one, so readers
see the old or the new content, never a mix. A writer killed in between (SIGKILL, OOM, power
loss) leaves its temporary file behind; these are removed by the next write to the same
directory, from any process, and never while their writer lives:

* Temporary files live in ``<directory>/.tmp/`` (mode 0700), so a write looks through the
  few files there, not through every checkpoint.
* A writer holds an exclusive ``flock`` on its temporary file from when it exists until it
  has been moved into place. The OS drops the lock when the process ends, however it ends,
  so a temporary file whose lock can be taken belongs to a writer that is gone: every write
  (and opening a store) first removes those.
* A writer creates its file, then locks it; between the two a sweep may take the lock and
  remove the file. So after locking, the writer checks that the name still refers to its
  file, and starts over with a new name when it does not. A sweep removes a file only while
  holding its lock and only if the name still refers to the file it locked.

The temporary directory is opened with ``O_NOFOLLOW`` and every name in it is used relative
to that descriptor, so a symbolic link planted at ``.tmp`` or in it is never followed.
Platforms without ``flock`` or ``*at`` system calls (Windows) keep the temporary files in
``.tmp`` too and remove them by age only (:data:`STALE_TEMP_SECONDS`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import tempfile
import time
from pathlib import Path

from agentkit.checkpoint._files import fsync_directory, make_private_dir

__all__ = ["STALE_TEMP_SECONDS", "TEMP_DIRECTORY", "TEMP_PREFIX", "AtomicFiles"]

TEMP_DIRECTORY = ".tmp"
TEMP_PREFIX = ".tmp-"
STALE_TEMP_SECONDS = 600.0
"""Age (seconds) after which a temporary file is taken for left over where locks cannot tell
(temporary files of earlier releases, kept in the store's directory itself; Windows)."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_ATTEMPTS = 100

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    _LOCKS = False
else:
    _LOCKS = os.rename in os.supports_dir_fd and os.open in os.supports_dir_fd


class AtomicFiles:
    """Atomic replacement of files in one directory, with temporary files in ``.tmp``."""

    __slots__ = ("_directory", "_temp")

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._temp = directory / TEMP_DIRECTORY

    def replace(
        self, path: Path, data: bytes, *, durable: bool, sync_directory: bool = True
    ) -> None:
        """Replace ``path`` (in the directory) with ``data``, removing dead writers' leftovers.

        With ``durable``, the data and then (unless ``sync_directory`` is false) the
        directory are ``fsync``-ed.

        Raises:
            OSError: the write failed; ``path`` is unchanged and no temporary file is left.
        """
        if not _LOCKS:  # pragma: no cover - Windows
            self._replace_by_path(path, data, durable=durable)
            return
        temp = self._open_temp()
        try:
            _sweep(temp)
            name, fd = _create_locked(temp)
            try:
                try:
                    _write_all(fd, data)
                    if durable:
                        os.fsync(fd)
                    os.replace(name, path, src_dir_fd=temp)  # still locked: never swept
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=temp)
                    raise
            finally:
                os.close(fd)  # drops the lock
        finally:
            os.close(temp)
        if durable and sync_directory:
            fsync_directory(self._directory)

    def sweep(self) -> int:
        """Remove the temporary files of writers that are gone; return how many."""
        if not _LOCKS:  # pragma: no cover - Windows
            return self.remove_older_than(STALE_TEMP_SECONDS)
        try:
            temp = self._open_temp(create=False)
        except FileNotFoundError:
            return 0
        try:
            return _sweep(temp)
        finally:
            os.close(temp)

    def remove_older_than(self, seconds: float) -> int:
        """Remove temporary files older than ``seconds``, in ``.tmp`` and (from earlier
        releases) in the directory itself; return how many."""
        deadline = time.time() - seconds
        removed = 0
        for folder in (self._directory, self._temp):
            with contextlib.suppress(OSError), os.scandir(folder) as entries:
                for entry in entries:
                    if not entry.name.startswith(TEMP_PREFIX):
                        continue
                    with contextlib.suppress(OSError):
                        if entry.stat(follow_symlinks=False).st_mtime < deadline:
                            os.unlink(entry.path)
                            removed += 1
        return removed

    def _open_temp(self, *, create: bool = True) -> int:
        try:
            return _open_directory(self._temp)
        except FileNotFoundError:
            if not create:
                raise
        make_private_dir(self._temp)
        return _open_directory(self._temp)

    def _replace_by_path(self, path: Path, data: bytes, *, durable: bool) -> None:
        make_private_dir(self._temp)
        fd, name = tempfile.mkstemp(dir=self._temp, prefix=TEMP_PREFIX)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                if durable:
                    os.fsync(file.fileno())
            os.replace(name, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name)
            raise
        if durable:
            fsync_directory(self._directory)


def _open_directory(path: Path) -> int:
    try:
        return os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC)
    except OSError as error:
        # O_NOFOLLOW with O_DIRECTORY says ENOTDIR for a link on Linux, ELOOP elsewhere
        if error.errno in (errno.ELOOP, errno.ENOTDIR) and path.is_symlink():
            raise OSError(errno.ELOOP, "a symbolic link", str(path)) from error
        raise


def _create_locked(temp: int) -> tuple[str, int]:
    """A new temporary file in the directory ``temp``, open and locked: (name, descriptor)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY
    for _ in range(_ATTEMPTS):
        name = TEMP_PREFIX + secrets.token_hex(8)
        try:
            fd = os.open(name, flags, 0o600, dir_fd=temp)
        except FileExistsError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits only while a sweep looks at this file
            if _names(temp, name, fd):
                return name, fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # a sweep took it for a dead writer's before it was locked: next name
    raise FileExistsError(f"could not create a temporary file in {TEMP_DIRECTORY!r}")


def _sweep(temp: int) -> int:
    """Remove the files in ``temp`` whose lock is free (their writer is gone)."""
    with os.scandir(temp) as entries:
        names = [entry.name for entry in entries if entry.name.startswith(TEMP_PREFIX)]
    removed = 0
    for name in names:
        try:
            fd = os.open(name, os.O_RDWR | _NOFOLLOW | _CLOEXEC, dir_fd=temp)
        except OSError:  # gone meanwhile (moved into place), or not a regular file
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _names(temp, name, fd):
                os.unlink(name, dir_fd=temp)
                removed += 1
        except OSError:  # BlockingIOError: its writer is alive and holds it
            continue
        finally:
            os.close(fd)
    return removed


def _names(temp: int, name: str, fd: int) -> bool:
    """Whether ``name`` in ``temp`` is still the file open as ``fd``."""
    try:
        named = os.stat(name, dir_fd=temp, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
