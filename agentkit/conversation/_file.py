"""A conversation store in a directory: one JSON-lines file per conversation."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from agentkit._lazy import present
from agentkit.conversation._base import DEFAULT_MAX_RECORD_BYTES, ConversationLock
from agentkit.conversation._filelock import FileLocks
from agentkit.conversation._records import (
    check_id,
    check_index,
    check_max_record_bytes,
    decode_records,
    encode_records,
    out_of_range,
)
from agentkit.schema import Message

__all__ = ["FileConversationStore"]

_log = logging.getLogger("agentkit")

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class FileConversationStore:
    """Conversations as files ``<sha256 of id>.jsonl`` in ``directory``, one record a line.

    Args:
        directory: where the files live (created with mode 0700 if missing).
        max_record_bytes: the largest record (one message as UTF-8 JSON) appended or loaded.

    Files are created with mode 0600. A record is a line ending in a newline. An append is
    all or nothing, like a transaction of the other stores: it first notes where it starts
    and ends in ``<name>.pending``, writes all its lines with one ``write`` on a file opened
    for appending, ``fsync``s it, and removes the note. A process that dies mid-append (``kill
    -9``, a lost machine) leaves the note: ``load`` reads only what comes before the
    unfinished append, and the next append (or :meth:`drop_record`) cuts it off the file
    before writing, so the next turn's messages are never glued to half a record. A last line
    without its newline and no note (a file written by an earlier release) is cut off the
    same way. Appends and :meth:`drop_record` hold an OS file lock (``flock``) on the
    conversation's file while they change it, so they are kept apart across processes. The
    writer lock of a turn is another OS file lock, in ``directory/locks`` (see
    ``with_conversation_id``).
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
        """Return the conversation's messages, oldest first.

        An append in progress, or one whose process died, is not part of the conversation.
        """
        path = self.path_for(conversation_id)
        # The note first: the file read after it holds at least what the note describes.
        pending = _read_pending(_pending_path(path))
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        if pending is not None and pending[0] <= len(data) < pending[1]:
            data = data[: pending[0]]  # not all there: being written, or never finished
        records, _torn = _split(data)
        return decode_records(conversation_id, records, self._max_record_bytes)

    def append(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the conversation: all of them or none (one write, fsync).

        An earlier append whose process died is cut off the file first.
        """
        records = encode_records(check_id(conversation_id), messages, self._max_record_bytes)
        if not records:
            return
        payload = b"".join(record + b"\n" for record in records)
        path = self.path_for(conversation_id)
        pending = _pending_path(path)
        with self._lock, self._locked_file(conversation_id) as fd:
            start = _repair(conversation_id, path, fd)
            # Survives the death of this process (the kernel keeps it); no fsync needed.
            _write_file(pending, f"{start} {start + len(payload)}".encode("ascii"), sync=False)
            view = memoryview(payload)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
            pending.unlink()

    def delete(self, conversation_id: str) -> None:
        """Forget the conversation."""
        path = self.path_for(conversation_id)
        for name in (path, _pending_path(path)):
            try:
                name.unlink()
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
                _repair(conversation_id, path, fd)
                records, _torn = _split(_read_all(fd))
                if not 0 <= index < len(records):
                    raise out_of_range(conversation_id, index, len(records))
                del records[index]
                kept = b"".join(record + b"\n" for record in records)
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


def _pending_path(path: Path) -> Path:
    """The note of an append in progress on the conversation file ``path``."""
    return path.with_suffix(".pending")


def _read_pending(pending: Path) -> tuple[int, int] | None:
    """``(start, end)`` of the append noted in ``pending``, or ``None`` (no readable note)."""
    try:
        text = pending.read_bytes()
    except FileNotFoundError:
        return None
    try:
        start, end = (int(part) for part in text.split())
    except ValueError:
        return None  # a note cut by a crash: the torn-tail check stands in for it
    return (start, end) if 0 <= start <= end else None


def _repair(conversation_id: str, path: Path, fd: int) -> int:
    """Cut an unfinished append off the conversation file ``fd`` (locked); its new size.

    An append noted in ``<name>.pending`` whose data is not all there is cut back to where
    it started (one that is all there only lost its note removal, in a power cut, and stays).
    Without a note, a last line without its newline is cut off.
    """
    pending = _pending_path(path)
    noted = _read_pending(pending)
    size = os.fstat(fd).st_size
    unfinished = noted is not None and noted[0] <= size < noted[1]
    keep = noted[0] if noted is not None and unfinished else _whole_lines(fd, size)
    if keep < size:
        os.ftruncate(fd, keep)
        os.fsync(fd)
        _log.warning(
            "agentkit: conversation %r: removed %d bytes of an append that never finished "
            "(its process died while writing); the conversation goes on without them",
            conversation_id,
            size - keep,
        )
    if noted is not None or pending.exists():
        pending.unlink(missing_ok=True)
    return keep


def _whole_lines(fd: int, size: int) -> int:
    """The length of the file ``fd`` up to its last newline (its whole lines)."""
    end = size
    block = 1 << 16
    while end > 0:
        start = max(0, end - block)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


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


def _write_file(path: Path, data: bytes, *, sync: bool) -> None:
    """Write ``data`` to ``path`` (mode 0600, never through a symlink)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _replace(path: Path, temporary: Path, data: bytes) -> None:
    _write_file(temporary, data, sync=True)
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


# Defined here; documented and imported as agentkit.conversation.
present((FileConversationStore,), "agentkit.conversation")
