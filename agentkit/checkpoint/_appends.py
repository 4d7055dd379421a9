"""Append-only files kept open between appends: the step records of a file store.

A durable run appends a record to its ``.steps`` file after every model reply and tool call.
Opening, checking and closing the file each time costs more than the write itself once the
processor's caches are cold (after a model call's wait: about 120 us against 55 us on the
development machine), so :class:`OpenAppends` keeps the most recently used files open:

* Only files this process opened itself, with ``O_NOFOLLOW`` and checked to be regular files;
  each append checks with ``fstat`` that the file still has a name (``st_nlink``): one that
  another process removed (a compaction, a ``delete``, a ``prune``) is closed and opened
  again by path, so a record never goes to a file nobody can read. The window this leaves
  (removed between that check and the write) is the one an ``open`` per append had too.
* :meth:`forget` closes a path's file before the store removes or replaces it.
* At most :data:`MAX_OPEN` files per store; the least recently used is closed first.
* Thread-safe: an append holds its file's lock, so a file is never closed (and its
  descriptor number reused) under a write. After ``fork`` the child starts with none open.
* POSIX only: Windows cannot remove a file that is open, so there each append opens it.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import stat
import threading
import weakref
from collections.abc import Callable

from agentkit.checkpoint._files import open_nofollow

__all__ = ["KEEPS_FILES_OPEN", "MAX_OPEN", "OpenAppends", "append_once"]

MAX_OPEN = 32
"""Most step files one store keeps open (the durable runs writing at the same time)."""
KEEPS_FILES_OPEN = os.name == "posix"
"""Whether files are kept open between appends on this platform."""

_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT
_TRIES = 3  # an append that finds its file closed or removed opens it again, this often


class _Open:
    """One open file: its descriptor (``-1`` once closed) and the lock its writers hold."""

    __slots__ = ("fd", "lock")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()

    def close(self) -> None:
        with self.lock:
            fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


class OpenAppends:
    """The append-only files of one store, kept open between appends (see the module doc)."""

    __slots__ = ("__weakref__", "_files", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: collections.OrderedDict[str, _Open] = collections.OrderedDict()
        _ALL.add(self)

    def append(self, path: str, frame: bytes, sync: Callable[[int, bool], None] | None) -> None:
        """Append ``frame`` to ``path`` (created with mode 0600 if missing) in one ``write``.

        ``sync(fd, created)``: called after the write, when given, with the file's descriptor
        and whether the file was empty before it (its name must then be made durable too).

        Raises:
            OSError: the file cannot be opened (a symbolic link, not a regular file, ...) or
                written.
        """
        for _ in range(_TRIES):
            handle = self._get(path)
            with handle.lock:
                fd = handle.fd
                if fd < 0:
                    continue  # closed by forget() meanwhile: open it again
                info = os.fstat(fd)
                if info.st_nlink == 0:  # removed since it was opened: open it by path again
                    self._drop(path, handle)
                    handle.fd = -1
                    os.close(fd)
                    continue
                _write(fd, frame)
                if sync is not None:
                    sync(fd, info.st_size == 0)
                return
        # Closed under every try, or a file system that counts no link for an open file:
        # open it for this append alone.
        append_once(path, frame, sync)

    def forget(self, path: str) -> None:
        """Close ``path``'s file if it is open (before the store removes or replaces it)."""
        with self._lock:
            handle = self._files.pop(path, None)
        if handle is not None:
            handle.close()

    def close(self) -> None:
        """Close every file."""
        with self._lock:
            handles = list(self._files.values())
            self._files.clear()
        for handle in handles:
            handle.close()

    def _get(self, path: str) -> _Open:
        with self._lock:
            handle = self._files.get(path)
            if handle is not None:
                self._files.move_to_end(path)
                return handle
        fd = open_nofollow(path, _FLAGS, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file", path)
        except BaseException:
            os.close(fd)
            raise
        opened = _Open(fd)
        evicted: list[_Open] = []
        with self._lock:
            handle = self._files.get(path)
            if handle is None:  # else another thread opened it meanwhile: use that one
                handle = self._files[path] = opened
                while len(self._files) > MAX_OPEN:
                    evicted.append(self._files.popitem(last=False)[1])
        if handle is not opened:
            opened.close()
        for old in evicted:
            old.close()  # waits for an append to it that is under way
        return handle

    def __del__(self) -> None:
        # The store went away without close(): do not leak its descriptors.
        for handle in self._files.values():
            if handle.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(handle.fd)
                handle.fd = -1

    def _drop(self, path: str, handle: _Open) -> None:
        with self._lock:
            if self._files.get(path) is handle:
                del self._files[path]


def append_once(path: str, frame: bytes, sync: Callable[[int, bool], None] | None) -> None:
    """Open ``path``, append ``frame`` in one write and close it (where files are not kept
    open); ``sync`` as for :meth:`OpenAppends.append`."""
    fd = open_nofollow(path, _FLAGS, 0o600)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        _write(fd, frame)
        if sync is not None:
            sync(fd, info.st_size == 0)
    finally:
        os.close(fd)


def _write(fd: int, frame: bytes) -> None:
    view = memoryview(frame)
    while view:
        view = view[os.write(fd, view) :]


_ALL: weakref.WeakSet[OpenAppends] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # The child shares the parent's descriptors, and a lock held by a parent's thread at the
    # fork stays held for ever: start with nothing open (the parent's descriptors are left
    # open in the child: closing them here could close a number the child reuses).
    for appends in list(_ALL):
        appends._lock = threading.Lock()
        appends._files = collections.OrderedDict()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
