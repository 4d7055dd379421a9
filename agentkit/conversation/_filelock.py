"""A conversation lock held as an OS file lock (``flock``): released when its process dies."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from agentkit.conversation._base import ConversationLock, busy
from agentkit.conversation._records import ThreadLocks

__all__ = ["FileLocks"]


class FileLocks:
    """Per-conversation lock files in ``directory`` (0700), locked with ``flock``.

    The OS drops the lock when the holding process ends, even by ``kill -9``, so a crashed
    turn never leaves a conversation locked. On systems without ``fcntl`` (Windows) only
    threads of one process are kept apart.
    """

    __slots__ = ("_directory", "_threads")

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._threads = ThreadLocks()

    def take(self, conversation_id: str) -> ConversationLock:
        if not self._threads.take(conversation_id):
            raise busy(conversation_id, "in this process")
        try:
            fd = self._lock_file(conversation_id)
        except BaseException:
            self._threads.give_back(conversation_id)
            raise
        return _FileLock(self._threads, conversation_id, fd)

    def _lock_file(self, conversation_id: str) -> int | None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return None
        self._directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        name = hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()
        fd = os.open(self._directory / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise busy(conversation_id, "in another process") from None
        except BaseException:
            os.close(fd)
            raise
        return fd


class _FileLock:
    __slots__ = ("_fd", "_id", "_released", "_threads")

    def __init__(self, threads: ThreadLocks, conversation_id: str, fd: int | None) -> None:
        self._threads = threads
        self._id = conversation_id
        self._fd = fd
        self._released = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
        self._threads.give_back(self._id)
