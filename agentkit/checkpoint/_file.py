"""A checkpoint store in a directory: one file per checkpoint, atomic writes, leases."""

from __future__ import annotations

import base64
import contextlib
import errno
import functools
import hashlib
import json
import os
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit._lazy import present
from agentkit.checkpoint._appends import KEEPS_FILES_OPEN, OpenAppends, append_once
from agentkit.checkpoint._atomic import STALE_TEMP_SECONDS, AtomicFiles
from agentkit.checkpoint._base import (
    DEFAULT_LEASE_TTL,
    DEFAULT_MAX_BYTES,
    StoreLimits,
    _check_age,
    _check_data,
    _check_owner,
    _check_size,
    _check_ttl,
    _encode_id,
)
from agentkit.checkpoint._files import (
    fsync_directory,
    make_private_dir,
    open_nofollow,
    read_bounded,
)
from agentkit.errors import CheckpointError

__all__ = [
    "FileCheckPointStore",
    "STALE_TEMP_SECONDS",
]

_DATA_SUFFIX = ".ckpt"
_STEPS_SUFFIX = ".steps"
_LEASE_SUFFIX = ".lease"
_ID_SUFFIX = ".id"  # beside a hashed name ("h-..."): the id, for checkpoint_ids()
# A step record on disk: 4-byte big-endian length, 4-byte CRC-32 of the record, the record.
_FRAME_HEADER = 8
_GUARD_NAME = ".leases.lock"
_MAX_LEASE_BYTES = 4096
# Longest encoded id kept readable in the file name; longer ids use a hash, so names stay
# well under the usual 255-byte limit.
_MAX_ENCODED_LEN = 200


class FileCheckPointStore(StoreLimits):
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
    * Hygiene: directories the store creates get mode 0700 and every file it creates 0600.
      No symbolic link inside the directory is followed: checkpoint, lease and lock files are
      opened with ``O_NOFOLLOW`` (a planted link is refused with an error), and writes replace
      the directory entry rather than writing through it.
    * Temporary files are written in ``<directory>/.tmp/``, each locked (``flock``) by its
      writer until it is moved into place. Those of saves killed midway (SIGKILL, OOM, power
      loss) are removed by the next write to the store, from any process, and when a store
      is opened; the temporary file of a save still running in a live process is never
      touched, because its writer holds its lock.
    * A checkpoint file over ``max_bytes`` is refused from its size (``fstat`` on the opened
      file) before any of it is read, and ``set`` refuses data over ``max_bytes``.
    * Step records (:class:`~agentkit.checkpoint.JournalingCheckPointStore`) are appended to
      ``<name>.steps``, each framed with its length and a CRC-32, in one ``write`` with
      ``O_APPEND``: a record whose writer was killed midway is incomplete or fails its CRC,
      and reading drops it (only the last record can be torn). A record is in the operating
      system's hands when ``append_step`` returns, so it survives the death of the process;
      it reaches the disk when the system writes it back, at once with ``sync=True`` or
      ``sync_steps=True`` (``fdatasync``, a fraction of a millisecond to a few milliseconds
      per step, depending on the disk). On POSIX a run's ``.steps`` file stays open between
      its appends (up to 32 files per store; each append checks that the file still has a
      name and opens it again if another process removed it); it is closed when the run's
      records are removed (its next base or its tombstone), by :meth:`close`, and when the
      store is garbage-collected.
    * A durable run's first image, its compactions and its tombstone are written with
      :meth:`set_base` (:class:`~agentkit.checkpoint.RebasingCheckPointStore`), like its step
      records: atomic (a new file moved over the old one), ``fsync``-ed (file and directory)
      only with ``sync_steps=True``. After a power loss such a run is found at an earlier
      step, or not at all (before its first image reached the disk), or refused as damaged
      (a file whose rename reached the disk before its data, which some file systems allow);
      never loaded as a state it did not have. ``set`` (the checkpoint of an interrupted or
      cancelled run) always ``fsync``-s the file and the directory.
    * Nothing expires by itself: :meth:`delete` removes a checkpoint, :meth:`prune` every
      checkpoint not written for a given time (the tombstones of completed runs included).

    Args:
        directory: where the files live (created, with its missing parents, if missing).
        max_bytes: the largest checkpoint read or written (and the most bytes of step
            records one id may have).
        lease_ttl: how long a resume lease lasts unless refreshed (seconds).
        sync_steps: ``fdatasync`` every step record, so each survives a power loss too
            (otherwise only records appended with ``sync=True`` are synced at once).
        clock: the clock leases and ``prune`` read (its ``time()``); a test passes
            :class:`agentkit.testing.ManualClock` to move time instead of sleeping.

    I/O failures are raised as :class:`~agentkit.errors.CheckpointError` naming the file.

    Example::

        store = FileCheckPointStore("checkpoints")
        runner = Runner(agent, checkpoint_store=store)
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        sync_steps: bool = False,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._directory = Path(directory)
        self._clock = clock
        self._directory_text = str(self._directory)
        self._set_limits(max_bytes, lease_ttl)
        self._sync_steps = bool(sync_steps)
        try:
            make_private_dir(self._directory)
        except OSError as exc:
            raise CheckpointError(
                f"cannot create the checkpoint directory {str(self._directory)!r}: {exc}"
            ) from exc
        self._namespace = "file:" + os.path.realpath(self._directory)
        self._files = AtomicFiles(self._directory)
        # The step files of the runs writing now, kept open between appends (POSIX).
        self._appends = OpenAppends() if KEEPS_FILES_OPEN else None
        with contextlib.suppress(OSError):  # best effort: a write sweeps again, and says why
            self._files.sweep()
        self._files.remove_older_than(STALE_TEMP_SECONDS)  # left by earlier releases

    @property
    def directory(self) -> Path:
        """The directory holding the checkpoint files."""
        return self._directory

    @property
    def namespace(self) -> str:
        """``"file:"`` and the absolute directory: what checkpoints here are signed with."""
        return self._namespace

    def path_for(self, checkpoint_id: str) -> Path:
        """Return the file that holds (or would hold) the checkpoint ``checkpoint_id``."""
        return self._directory / (_file_stem(checkpoint_id) + _DATA_SUFFIX)

    def remove_stale_temp_files(self, older_than: float = STALE_TEMP_SECONDS) -> int:
        """Remove temporary files of saves that are gone, and any older than ``older_than``.

        Every write already removes the temporary files of saves whose process died (their
        lock is free); ``older_than`` also covers files no lock tells about (those of
        earlier releases, which did not lock them; platforms without ``flock``). Returns how
        many files were removed.
        """
        try:
            return self._files.sweep() + self._files.remove_older_than(older_than)
        except OSError as exc:
            raise CheckpointError(
                f"cannot clean the temporary files of {str(self._directory)!r}: {_explain(exc)}"
            ) from exc

    def prune(self, *, older_than: float) -> int:
        """Remove every checkpoint last written more than ``older_than`` seconds ago.

        The way to expire consumed checkpoints (the tombstones of completed durable runs,
        kept so that a late ``resume`` says the run completed) and any other left behind:
        call it from a periodic job. A checkpoint's age is that of its latest write, its
        step records included (a file's modification time); its step records and its lease
        file go with it. A checkpoint whose lease is held (a live run, a resume going on) is
        never removed, whatever its age. Lease files that expired more than ``older_than``
        seconds ago are removed too.

        Like ``RedisCheckPointStore(ttl=...)``, this removes interrupted runs waiting for an
        answer as well: choose ``older_than`` longer than a run may wait for an approval (or
        delete consumed ids yourself with :meth:`delete`). Returns how many checkpoints (ids)
        were removed.

        Raises:
            ValueError: ``older_than`` is not a number of seconds >= 0.
            CheckpointError: the directory cannot be read or a file cannot be removed.
        """
        age = _check_age(older_than)
        try:
            stems = _stems(self._directory)
            removed = 0
            for stem in sorted(stems):
                now = self._clock.time()
                with self._guard():
                    removed += self._prune_one(stem, now, now - age)
        except OSError as exc:
            raise CheckpointError(
                f"cannot prune the checkpoints of {str(self._directory)!r}: {_explain(exc)}"
            ) from exc
        if removed:
            fsync_directory(self._directory)
        return removed

    def _prune_one(self, stem: str, now: float, cutoff: float) -> int:
        """Remove the files of ``stem`` if they are older than ``cutoff`` and not leased
        (holding the lease lock); 1 when a checkpoint or its records were removed."""
        lease = self._directory / (stem + _LEASE_SUFFIX)
        current = _read_lease(lease)
        if current is not None and current[1] > now:
            return 0  # held: a live run or a resume
        data = [self._directory / (stem + suffix) for suffix in (_STEPS_SUFFIX, _DATA_SUFFIX)]
        times = [when for when in map(_modified, data) if when is not None]
        if any(when >= cutoff for when in times):
            return 0
        if not times:  # a lease file alone
            expired = current[1] if current is not None else _modified(lease)
            if expired is not None and expired < cutoff:
                _unlink(lease)
            return 0
        if self._appends is not None:
            self._appends.forget(str(data[0]))
        for path in (*data, lease, self._directory / (stem + _ID_SUFFIX)):  # records first
            _unlink(path)
        return 1

    def get(self, checkpoint_id: str) -> bytes | None:
        """Return the bytes stored under ``checkpoint_id``, or ``None``."""
        path = self.path_for(checkpoint_id)
        try:
            fd = open_nofollow(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(
                f"cannot read checkpoint {checkpoint_id!r} from {str(path)!r}: {_explain(exc)}"
            ) from exc
        try:
            return read_bounded(fd, self._max_bytes, f"checkpoint {checkpoint_id!r} ({path})")
        except OSError as exc:
            raise CheckpointError(
                f"cannot read checkpoint {checkpoint_id!r} from {str(path)!r}: {exc}"
            ) from exc
        finally:
            os.close(fd)

    def set(self, checkpoint_id: str, data: bytes) -> None:
        """Atomically replace the checkpoint file of ``checkpoint_id`` with ``data``."""
        path = self.path_for(checkpoint_id)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        try:
            self._name_hashed(checkpoint_id, durable=True)
            self._write_atomic(path, data, durable=True)
        except OSError as exc:
            raise CheckpointError(
                f"cannot write checkpoint {checkpoint_id!r} to {str(path)!r}: {_explain(exc)}"
            ) from exc

    def set_base(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """Replace the checkpoint file with ``data`` and remove its step records.

        See :class:`~agentkit.checkpoint.RebasingCheckPointStore`. The new file is written
        and moved over the old one (readers see one or the other, and so does a process that
        is killed meanwhile); the file and the directory are ``fsync``-ed only with ``sync``
        or ``sync_steps``, as for a step record (each ``fsync`` costs milliseconds on a real
        disk, two per durable run without it). A power loss may then leave the old file, or
        a new one whose data did not reach the disk: it fails its signature check and is
        refused as damaged, never loaded.
        """
        path = self.path_for(checkpoint_id)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        durable = sync or self._sync_steps
        try:
            self._name_hashed(checkpoint_id, durable=durable)
            self._files.replace(path, data, durable=durable, sync_directory=False)
        except OSError as exc:
            raise CheckpointError(
                f"cannot write checkpoint {checkpoint_id!r} to {str(path)!r}: {_explain(exc)}"
            ) from exc
        self.delete_steps(checkpoint_id)
        if durable:
            fsync_directory(self._directory)

    def delete(self, checkpoint_id: str) -> None:
        """Remove the checkpoint file and its step records; an unknown id is not an error."""
        self.delete_steps(checkpoint_id)
        path = self.path_for(checkpoint_id)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise CheckpointError(
                f"cannot delete checkpoint {checkpoint_id!r} ({str(path)!r}): {exc}"
            ) from exc
        try:
            path.with_suffix(_ID_SUFFIX).unlink(missing_ok=True)
        except OSError as exc:
            raise CheckpointError(
                f"cannot delete checkpoint {checkpoint_id!r} ({str(path)!r}): {exc}"
            ) from exc
        fsync_directory(self._directory)

    def checkpoint_ids(self) -> list[str]:
        """Every id that holds a checkpoint file here, sorted.

        An id too long to be a file name is stored under its hash, with its name in a file
        beside it; such a checkpoint written by an earlier release has no name file, and is
        not listed.

        Raises:
            CheckpointError: the directory cannot be read.
        """
        ids = []
        try:
            with os.scandir(self._directory) as entries:
                names = [entry.name for entry in entries if entry.name.endswith(_DATA_SUFFIX)]
            for name in names:
                stem = name[: -len(_DATA_SUFFIX)]
                if stem.startswith("c-"):
                    ids.append(_decode_stem(stem[2:]))
                elif stem.startswith("h-"):
                    named = self._hashed_name(stem)
                    if named is not None:
                        ids.append(named)
        except OSError as exc:
            raise CheckpointError(
                f"cannot list the checkpoints of {str(self._directory)!r}: {_explain(exc)}"
            ) from exc
        return sorted(ids)

    def _name_hashed(self, checkpoint_id: str, *, durable: bool) -> None:
        """Write the name file of an id stored under its hash (once)."""
        stem = _file_stem(checkpoint_id)
        if not stem.startswith("h-"):
            return
        path = self._directory / (stem + _ID_SUFFIX)
        if not path.exists():
            self._files.replace(path, _encode_id(checkpoint_id), durable=durable)

    def _hashed_name(self, stem: str) -> str | None:
        path = self._directory / (stem + _ID_SUFFIX)
        try:
            fd = open_nofollow(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            raw = read_bounded(fd, 64 * 1024, f"checkpoint name {path}")
        finally:
            os.close(fd)
        if "h-" + hashlib.sha256(raw).hexdigest() != stem:
            return None  # not the name of this file: ignored, as a foreign file is
        return raw.decode("utf-8", "surrogatepass")

    def steps_path_for(self, checkpoint_id: str) -> Path:
        """Return the file that holds (or would hold) the step records of ``checkpoint_id``."""
        return self._directory / (_file_stem(checkpoint_id) + _STEPS_SUFFIX)

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        """Append the step record ``data`` (framed, in one write); see the class docs."""
        # A str path: no Path object per step (this runs after every model reply and tool call).
        path = os.path.join(self._directory_text, _file_stem(checkpoint_id) + _STEPS_SUFFIX)
        data = _check_size(checkpoint_id, _check_data(data), self._max_bytes)
        frame = len(data).to_bytes(4, "big") + zlib.crc32(data).to_bytes(4, "big") + data
        try:
            if self._appends is not None:
                self._appends.append(path, frame, self._step_sync if sync or self._sync_steps
                                     else None)
            else:
                append_once(path, frame, self._step_sync if sync or self._sync_steps else None)
        except OSError as exc:
            raise CheckpointError(
                f"cannot append a step of checkpoint {checkpoint_id!r} to {path!r}: "
                f"{_explain(exc)}"
            ) from exc

    def _step_sync(self, fd: int, created: bool) -> None:
        _datasync(fd)
        if created:  # a new file: its name must survive too
            fsync_directory(self._directory)

    def read_steps(self, checkpoint_id: str) -> list[bytes]:
        """Return the step records of ``checkpoint_id``, oldest first (a torn last one dropped).

        Raises:
            CheckpointError: the file cannot be read, is over ``max_bytes``, or a record
                before the last one is damaged.
        """
        path = self.steps_path_for(checkpoint_id)
        try:
            fd = open_nofollow(path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CheckpointError(
                f"cannot read the steps of checkpoint {checkpoint_id!r} from {str(path)!r}: "
                f"{_explain(exc)}"
            ) from exc
        try:
            raw = read_bounded(fd, self._max_bytes, f"the steps of checkpoint {checkpoint_id!r}")
        except OSError as exc:
            raise CheckpointError(
                f"cannot read the steps of checkpoint {checkpoint_id!r} from {str(path)!r}: {exc}"
            ) from exc
        finally:
            os.close(fd)
        return _frames(raw, checkpoint_id, path)

    def delete_steps(self, checkpoint_id: str) -> None:
        """Remove the step records of ``checkpoint_id``; an unknown id is not an error."""
        path = self.steps_path_for(checkpoint_id)
        if self._appends is not None:
            self._appends.forget(str(path))
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise CheckpointError(
                f"cannot delete the steps of checkpoint {checkpoint_id!r} ({str(path)!r}): {exc}"
            ) from exc

    def acquire_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool:
        """Lease ``checkpoint_id`` for ``owner``.

        See :class:`~agentkit.checkpoint.LeasingCheckPointStore`.
        """
        _check_owner(owner)
        _check_ttl(ttl)
        path = self._lease_path(checkpoint_id)
        try:
            with self._guard():
                current = _read_lease(path)
                now = self._clock.time()
                if current is not None and current[0] != owner and current[1] > now:
                    return False
                record = {"owner": owner, "expires": now + ttl}
                self._write_atomic(path, json.dumps(record).encode(), durable=False)
                return True
        except OSError as exc:
            raise CheckpointError(
                f"cannot take the lease on checkpoint {checkpoint_id!r} ({str(path)!r}): "
                f"{_explain(exc)}"
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
                f"cannot release the lease on checkpoint {checkpoint_id!r} ({str(path)!r}): "
                f"{_explain(exc)}"
            ) from exc

    def close(self) -> None:
        """Close the step-record files kept open between appends (POSIX).

        The store stays usable: the next append opens its file again. Up to 32 files are
        kept open, one per durable run writing at the time; each is closed when its run ends
        (its tombstone or next base is written), when the store removes its records, or when
        the store is garbage-collected.
        """
        if self._appends is not None:
            self._appends.close()

    def __repr__(self) -> str:
        return f"FileCheckPointStore({str(self._directory)!r})"

    def _lease_path(self, checkpoint_id: str) -> Path:
        return self._directory / (_file_stem(checkpoint_id) + _LEASE_SUFFIX)

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """Hold the directory's lease lock (exclusive across threads and processes)."""
        fd = open_nofollow(self._directory / _GUARD_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _lock(fd)
            try:
                yield
            finally:
                _unlock(fd)
        finally:
            os.close(fd)

    def _write_atomic(self, path: Path, data: bytes, *, durable: bool) -> None:
        self._files.replace(path, data, durable=durable)


@functools.lru_cache(maxsize=256)  # a pure function of the id; a durable run asks at each step
def _file_stem(checkpoint_id: str) -> str:
    raw = _encode_id(checkpoint_id)
    encoded = base64.b32encode(raw).decode("ascii").rstrip("=").lower()
    if len(encoded) <= _MAX_ENCODED_LEN:
        return "c-" + encoded
    return "h-" + hashlib.sha256(raw).hexdigest()


def _decode_stem(encoded: str) -> str:
    padded = encoded.upper() + "=" * (-len(encoded) % 8)
    return base64.b32decode(padded).decode("utf-8", "surrogatepass")


def _stems(directory: Path) -> set[str]:
    """The file stems of the checkpoints, step records and leases in ``directory``."""
    stems: set[str] = set()
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if not name.startswith(("c-", "h-")):
                continue
            for suffix in (_DATA_SUFFIX, _STEPS_SUFFIX, _LEASE_SUFFIX):
                if name.endswith(suffix):
                    stems.add(name[: -len(suffix)])
    return stems


def _modified(path: Path) -> float | None:
    """The modification time of ``path`` (not following a symlink), or ``None`` if missing."""
    try:
        return os.lstat(path).st_mtime
    except FileNotFoundError:
        return None


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _frames(raw: bytes, checkpoint_id: str, path: Path) -> list[bytes]:
    """The records framed in ``raw``; an incomplete or damaged last frame is a torn append."""
    records: list[bytes] = []
    position, end = 0, len(raw)
    while end - position >= _FRAME_HEADER:
        size = int.from_bytes(raw[position : position + 4], "big")
        start = position + _FRAME_HEADER
        if start + size > end:
            break  # the writer was killed before the whole record was written
        record = raw[start : start + size]
        if zlib.crc32(record) != int.from_bytes(raw[position + 4 : start], "big"):
            if start + size == end:
                break  # the last record, damaged while it was written
            raise CheckpointError(
                f"the steps of checkpoint {checkpoint_id!r} are damaged ({str(path)!r}: the "
                f"record at byte {position} fails its CRC and is not the last one); the file "
                "was changed by something else than this store"
            )
        records.append(record)
        position = start + size
    return records


def _datasync(fd: int) -> None:
    sync = getattr(os, "fdatasync", os.fsync)  # macOS and Windows have no fdatasync
    sync(fd)


def _read_lease(path: Path) -> tuple[str, float] | None:
    """Return ``(owner, expires)``; ``None`` when there is no lease or it is unreadable.

    Lease files are only written whole (under the guard lock), so an unreadable one is left
    over from a crash or damaged; it is treated as free. A symlink is never followed.
    """
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        record = json.loads(read_bounded(fd, _MAX_LEASE_BYTES, f"lease file {str(path)!r}"))
        owner, expires = record["owner"], float(record["expires"])
    except (CheckpointError, ValueError, TypeError, KeyError):
        return None
    finally:
        os.close(fd)
    if not isinstance(owner, str):
        return None
    return owner, expires


def _explain(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return (
            "it is a symbolic link, which a checkpoint store never follows; remove it (someone "
            "who can write to the checkpoint directory planted it)"
        )
    return str(error)


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

present((FileCheckPointStore,), "agentkit.checkpoint")
