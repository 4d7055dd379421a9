"""A conversation store in a directory: one JSON-lines file per conversation."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from agentkit.conversation._filelock import FileLocks
from agentkit.conversation._records import (
    check_id,
    check_index,
    check_max_record_bytes,
    decode_records,
    encode_records,
    out_of_range,
)
from agentkit.conversation.base import DEFAULT_MAX_RECORD_BYTES, ConversationLock
from agentkit.schema import Message

__all__ = ["FileConversationStore"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class FileConversationStore:
    """Conversations as files ``<sha256 of id>.jsonl`` in ``directory``, one record a line.

    Args:
        directory: where the files live (created with mode 0700 if missing).
        max_record_bytes: the largest record (one message as UTF-8 JSON) appended or loaded.

    Files are created with mode 0600. A record is a line ending in a newline; an append
    writes all its lines with one ``write`` on a file opened for appending, then ``fsync``s
    it. A last line without its newline is an append that never finished (its process died
    mid-write): ``load`` does not count it as a record. Appends and :meth:`drop_record` hold
    an OS file lock (``flock``) on the conversation's file while they change it, so they are
    kept apart across processes. The writer lock of a turn is another OS file lock, in
    ``directory/locks`` (see ``with_conversation_id``).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self._max_record_bytes = check_max_record_bytes(max_record_bytes)
        self._directory = Path(directory)
        self._directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._locks = FileLocks(self._directory / "locks")
        self._lock = threading.Lock()

    @property
    def directory(self) -> Path:
        """Where the conversations are."""
        return self._directory

    @property
    def max_record_bytes(self) -> int:
        """The largest record this store appends or loads, in bytes."""
        return self._max_record_bytes

    def path_for(self, conversation_id: str) -> Path:
        """Return the file that holds (or would hold) the conversation ``conversation_id``."""
        name = hashlib.sha256(check_id(conversation_id).encode("utf-8"))
        return self._directory / f"{name.hexdigest()}.jsonl"

    def load(self, conversation_id: str) -> list[Message]:
        """Return the conversation's messages, oldest first."""
        try:
            data = self.path_for(conversation_id).read_bytes()
        except FileNotFoundError:
            return []
        records, _torn = _split(data)
        return decode_records(conversation_id, records, self._max_record_bytes)

    def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the conversation (one write, then fsync)."""
        records = encode_records(check_id(conversation_id), messages, self._max_record_bytes)
        if not records:
            return
        payload = b"".join(record + b"\n" for record in records)
        with self._lock, self._locked_file(conversation_id) as fd:
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)

    def delete(self, conversation_id: str) -> None:
        """Forget the conversation."""
        try:
            self.path_for(conversation_id).unlink()
        except FileNotFoundError:
            pass

    def drop_record(self, conversation_id: str, index: int) -> None:
        """Remove the record at position ``index`` (0 is the oldest; the later ones move up).

        The file is rewritten to ``<name>.repair`` and moved over the old one, so a crash
        leaves the old file or the new one; a ``.repair`` file left by a crash is
        overwritten by the next repair of that conversation.

        Raises:
            IndexError: there is no record at ``index``.
            ConversationBusyError: a turn of the conversation is running.
        """
        path = self.path_for(conversation_id)
        check_index(index)
        lock = self.lock(conversation_id)
        try:
            with self._lock, self._locked_file(conversation_id) as fd:
                records, torn = _split(_read_all(fd))
                if not 0 <= index < len(records):
                    raise out_of_range(conversation_id, index, len(records))
                del records[index]
                kept = b"".join(record + b"\n" for record in records) + torn
                _replace(path, path.with_suffix(".repair"), kept)
        finally:
            lock.release()

    def lock(self, conversation_id: str) -> ConversationLock:
        """Take the conversation's writer lock (raises ConversationBusyError if taken)."""
        return self._locks.take(check_id(conversation_id))

    @contextlib.contextmanager
    def _locked_file(self, conversation_id: str) -> Iterator[int]:
        """The conversation's file, open for appending, under an exclusive ``flock``.

        A repair replaces the file; whoever opened the old one before that gets its lock
        after the replacement and must open the new file instead.
        """
        path = self.path_for(conversation_id)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o600)
            try:
                _flock(fd)
                if _same_file(fd, path):
                    break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        try:
            yield fd
        finally:
            os.close(fd)  # closing the descriptor drops the flock

    def __repr__(self) -> str:
        return f"FileConversationStore({str(self._directory)!r})"


def _split(data: bytes) -> tuple[list[bytes], bytes]:
    """The complete records of a file, and what follows the last newline (a torn append)."""
    *records, torn = data.split(b"\n")
    return records, torn


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def _replace(path: Path, temporary: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC
    fd = os.open(temporary, flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    if os.name == "posix":
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: appends of one process are kept apart only

    def _flock(fd: int) -> None:
        pass

else:

    def _flock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)
