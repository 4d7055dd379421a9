"""A checkpoint store in a directory: one file per checkpoint, atomic writes, leases."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from agentkit.checkpoint.base import (
    _check_data,
    _check_owner,
    _check_ttl,
    _encode_id,
)
from agentkit.errors import CheckpointError

__all__ = ["FileCheckPointStore"]

_DATA_SUFFIX = ".ckpt"
_LEASE_SUFFIX = ".lease"
_TEMP_PREFIX = ".tmp-"
_GUARD_NAME = ".leases.lock"
# Longest encoded id kept readable in the file name; longer ids use a hash, so names stay
# well under the usual 255-byte limit.
_MAX_ENCODED_LEN = 200


class FileCheckPointStore:
    """Checkpoints as files in ``directory`` (created if missing), shareable by processes.

    * File names are derived from the id, never taken from it: ``c-<base32 of the UTF-8
      id>.ckpt`` (lower case, so it is also safe on case-insensitive file systems), or
      ``h-<sha256 of the id>.ckpt`` for long ids. Any string is a valid id; ``"../x"`` is not a
      path.
    * Writes are atomic and durable: a temporary file in the same directory is written,
      flushed, ``fsync``-ed and moved over the old file with ``os.replace`` (then the directory
      is ``fsync``-ed where the platform allows). A reader sees the old or the new checkpoint,
      never a mix, and a crash never leaves a half-written one.
    * Leases (see :class:`~agentkit.checkpoint.LeasingCheckPointStore`) are ``<name>.lease``
      files holding the owner and the expiry time (wall clock). Every lease decision is made
      while holding an OS file lock (``flock``) on ``<directory>/.leases.lock``, held only for
      the read-check-write, so leases are exclusive across threads and processes; the OS
      drops that lock if a process dies. Processes sharing a directory over a network file
      system need working file locks and synchronized clocks.

    I/O failures are raised as :class:`~agentkit.errors.CheckpointError` naming the file.

    Example::

        store = FileCheckPointStore("checkpoints")
        runner = Runner(agent, checkpoint_store=store)
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._directory = Path(directory)
        try:
            self._directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(
                f"cannot create the checkpoint directory {str(self._directory)!r}: {exc}"
            ) from exc

    @property
    def directory(self) -> Path:
        """The directory holding the checkpoint files."""
        return self._directory

    def path_for(self, checkpoint_id: str) -> Path:
        """Return the file that holds (or would hold) the checkpoint ``checkpoint_id``."""
        return self._directory / (_file_stem(checkpoint_id) + _DATA_SUFFIX)

    def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes stored under ``checkpoint_id``, or ``None``."""
        path = self.path_for(checkpoint_id)
        try:
            with open(path, "rb") as file:
                return file.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(
                f"cannot read checkpoint {checkpoint_id!r} from {str(path)!r}: {exc}"
            ) from exc

    def set(self, checkpoint_id: str, data: bytes) -> None:
        """Atomically replace the checkpoint file of ``checkpoint_id`` with ``data``."""
        path = self.path_for(checkpoint_id)
        data = _check_data(data)
        try:
            self._write_atomic(path, data, durable=True)
        except OSError as exc:
            raise CheckpointError(
                f"cannot write checkpoint {checkpoint_id!r} to {str(path)!r}: {exc}"
            ) from exc

    def delete(self, checkpoint_id: str) -> None:
        """Remove the checkpoint file; an unknown id is not an error."""
        path = self.path_for(checkpoint_id)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise CheckpointError(
                f"cannot delete checkpoint {checkpoint_id!r} ({str(path)!r}): {exc}"
            ) from exc
        _fsync_directory(self._directory)

    def acquire_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool:
        """Lease ``checkpoint_id`` for ``owner``; see :class:`LeasingCheckPointStore`."""
        _check_owner(owner)
        _check_ttl(ttl)
        path = self._lease_path(checkpoint_id)
        try:
            with self._guard():
                current = _read_lease(path)
                if current is not None and current[0] != owner and current[1] > time.time():
                    return False
                record = {"owner": owner, "expires": time.time() + ttl}
                self._write_atomic(path, json.dumps(record).encode(), durable=False)
                return True
        except OSError as exc:
            raise CheckpointError(
                f"cannot take the lease on checkpoint {checkpoint_id!r} ({str(path)!r}): {exc}"
            ) from exc

    def release_lease(self, checkpoint_id: str, owner: str) -> None:
        """Release the lease if ``owner`` holds it."""
        path = self._lease_path(checkpoint_id)
        try:
            with self._guard():
                current = _read_lease(path)
                if current is not None and current[0] == owner:
                    path.unlink()
        except OSError as exc:
            raise CheckpointError(
                f"cannot release the lease on checkpoint {checkpoint_id!r} ({str(path)!r}): {exc}"
            ) from exc

    def __repr__(self) -> str:
        return f"FileCheckPointStore({str(self._directory)!r})"

    def _lease_path(self, checkpoint_id: str) -> Path:
        return self._directory / (_file_stem(checkpoint_id) + _LEASE_SUFFIX)

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Hold the directory's lease lock (exclusive across threads and processes)."""
        fd = os.open(self._directory / _GUARD_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _lock(fd)
            try:
                yield
            finally:
                _unlock(fd)
        finally:
            os.close(fd)

    def _write_atomic(self, path: Path, data: bytes, *, durable: bool) -> None:
        fd, temp = tempfile.mkstemp(dir=self._directory, prefix=_TEMP_PREFIX)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                if durable:
                    os.fsync(file.fileno())
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        if durable:
            _fsync_directory(self._directory)


def _file_stem(checkpoint_id: str) -> str:
    raw = _encode_id(checkpoint_id)
    encoded = base64.b32encode(raw).decode("ascii").rstrip("=").lower()
    if len(encoded) <= _MAX_ENCODED_LEN:
        return "c-" + encoded
    return "h-" + hashlib.sha256(raw).hexdigest()


def _read_lease(path: Path) -> tuple[str, float] | None:
    """Return ``(owner, expires)``; ``None`` when there is no lease or it is unreadable.

    Lease files are only written whole (under the guard lock), so an unreadable one is left
    over from a crash or damaged; it is treated as free.
    """
    try:
        record = json.loads(path.read_bytes())
        owner, expires = record["owner"], float(record["expires"])
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(owner, str):
        return None
    return owner, expires


def _fsync_directory(directory: Path) -> None:
    if os.name != "posix":  # directories cannot be opened for fsync on Windows
        return
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems do not support it; the data file itself was synced
        pass
    finally:
        os.close(fd)


if sys.platform == "win32":
    import msvcrt

    def _lock(fd: int) -> None:
        # LK_LOCK retries for about 10 s before failing; lease decisions take microseconds,
        # so only a wedged process could hold the lock that long.
        for _ in range(5):
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                return
            except OSError:
                continue
        msvcrt.locking(fd, msvcrt.LK_LOCK, 1)

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
