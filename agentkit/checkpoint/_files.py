"""File helpers the checkpoint stores share: no symlinks followed, private modes, bounded reads."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agentkit.errors import CheckpointError

__all__ = ["fsync_directory", "make_private_dir", "open_nofollow", "read_bounded"]

# O_NOFOLLOW makes open() fail (ELOOP) when the last path component is a symlink. Windows has
# no such flag; there creating symlinks needs a privilege most users lack.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def open_nofollow(path: str | os.PathLike[str], flags: int, mode: int = 0o600) -> int:
    """``os.open`` that refuses a symlink as the last path component; new files get ``mode``."""
    return os.open(path, flags | _NOFOLLOW | _BINARY | _CLOEXEC, mode)


def make_private_dir(directory: Path) -> None:
    """Create ``directory`` (and missing parents); the directories created here get mode 0700."""
    missing: list[Path] = []
    current = directory
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(path, 0o700)  # mkdir's mode is masked by the umask


def fsync_directory(directory: Path) -> None:
    """``fsync`` a directory, so the entries just added or replaced in it survive a crash."""
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


def read_bounded(fd: int, max_bytes: int, what: str) -> bytes:
    """Read the regular file open as ``fd`` whole, refusing one over ``max_bytes`` unread."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointError(f"cannot read {what}: it is not a regular file")
    if info.st_size > max_bytes:
        raise CheckpointError(_too_large(what, info.st_size, max_bytes))
    chunks: list[bytes] = []
    size = 0
    while True:  # the file may have grown since fstat; never read past the bound
        want = info.st_size + 1 - size if size <= info.st_size else 1 << 16
        chunk = os.read(fd, min(want, max_bytes + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise CheckpointError(_too_large(what, size, max_bytes))
    return b"".join(chunks)


def _too_large(what: str, size: int, max_bytes: int) -> str:
    return (
        f"{what} is {size} bytes, over the limit of {max_bytes}; refusing to read it "
        "(raise max_bytes on the store and the serializer if it is legitimate)"
    )
