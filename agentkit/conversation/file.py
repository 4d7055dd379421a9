"""A conversation store in a directory: one JSON-lines file per conversation."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from agentkit.conversation._filelock import FileLocks
from agentkit.conversation._records import check_id, decode, encode
from agentkit.conversation.base import ConversationLock
from agentkit.schema import Message

__all__ = ["FileConversationStore"]


class FileConversationStore:
    """Conversations as files ``<sha256 of id>.jsonl`` in ``directory``, one message a line.

    The directory is created with mode 0700 and files with 0600. An append writes all its
    lines with one ``write`` on a file opened for appending, then ``fsync``s it, so a crash
    leaves whole messages; a torn last line (a crash mid-write) is skipped when loading.
    The writer lock is an OS file lock in ``directory/locks`` (see ``with_conversation_id``),
    so processes sharing the directory are kept apart too.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._directory = Path(directory)
        self._directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._locks = FileLocks(self._directory / "locks")
        self._lock = threading.Lock()

    @property
    def directory(self) -> Path:
        """Where the conversations are."""
        return self._directory

    def _path(self, conversation_id: str) -> Path:
        name = hashlib.sha256(check_id(conversation_id).encode("utf-8", "surrogatepass"))
        return self._directory / f"{name.hexdigest()}.jsonl"

    def load(self, conversation_id: str) -> list[Message]:
        """Return the conversation's messages, oldest first."""
        try:
            data = self._path(conversation_id).read_bytes()
        except FileNotFoundError:
            return []
        messages = []
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                messages.append(decode(line))
            except ValueError:
                continue  # a line torn by a crash while it was written
        return messages

    def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the conversation (one write, then fsync)."""
        payload = "".join(encode(message) + "\n" for message in messages).encode("utf-8")
        if not payload:
            return
        path = self._path(conversation_id)
        with self._lock:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                view = memoryview(payload)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete(self, conversation_id: str) -> None:
        """Forget the conversation."""
        try:
            self._path(conversation_id).unlink()
        except FileNotFoundError:
            pass

    def lock(self, conversation_id: str) -> ConversationLock:
        """Take the conversation's writer lock (raises ConversationBusyError if taken)."""
        return self._locks.take(check_id(conversation_id))

    def __repr__(self) -> str:
        return f"FileConversationStore({str(self._directory)!r})"
