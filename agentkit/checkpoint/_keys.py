"""Where the checkpoint signing key comes from when none is given.

1. ``AGENTKIT_CHECKPOINT_KEY``: its value (UTF-8, surrounding whitespace stripped, so a key
   pasted with its trailing newline is the same key) is the key. Set the same value on every
   machine that shares a checkpoint store.
2. Otherwise a key file, created once with 32 random bytes (written as 64 hex digits, so its
   text can be copied into ``AGENTKIT_CHECKPOINT_KEY`` as is): ``AGENTKIT_CHECKPOINT_KEY_FILE``
   when set, else ``checkpoint.key`` in agentkit's directory under the user's configuration
   directory (``$XDG_CONFIG_HOME`` or ``~/.config`` on Linux and other Unixes,
   ``~/Library/Application Support`` on macOS, ``%APPDATA%`` on Windows). The file is created
   with mode 0600 in a directory created with mode 0700; two processes creating it at once
   end up with the same key, because the key is written to a private temporary file and
   published with ``os.link``, which fails for every process but the first. Its text is
   stripped of surrounding whitespace too.

Either way, ``AGENTKIT_CHECKPOINT_PREVIOUS_KEYS`` may list earlier keys, separated by commas
(each stripped): they verify checkpoints but never sign, which is how a key is rotated
without losing the checkpoints pending under the old one. A key with a comma in it cannot be
listed there; pass it in ``PickleSerializer(secret_key=[new, old])`` instead.

The lookup is a few lines of standard library code rather than a ``platformdirs`` dependency.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import sys
import tempfile
from pathlib import Path

from agentkit.checkpoint._files import open_nofollow
from agentkit.errors import CheckpointError

__all__ = [
    "KEY_ENV_VAR",
    "KEY_FILE_ENV_VAR",
    "MIN_KEY_BYTES",
    "PREVIOUS_KEYS_ENV_VAR",
    "default_key",
    "default_keys",
    "key_file_path",
]

KEY_ENV_VAR = "AGENTKIT_CHECKPOINT_KEY"
KEY_FILE_ENV_VAR = "AGENTKIT_CHECKPOINT_KEY_FILE"
PREVIOUS_KEYS_ENV_VAR = "AGENTKIT_CHECKPOINT_PREVIOUS_KEYS"
MIN_KEY_BYTES = 16
_MAX_KEY_FILE_BYTES = 4096


def key_file_path() -> Path:
    """The key file used when ``AGENTKIT_CHECKPOINT_KEY`` is not set."""
    override = os.environ.get(KEY_FILE_ENV_VAR)
    if override:
        return Path(override)
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "agentkit" / "checkpoint.key"


def default_key() -> tuple[bytes, str]:
    """Return the default signing key and a description of where it came from."""
    value = os.environ.get(KEY_ENV_VAR, "")
    if value:
        key = value.strip().encode("utf-8")
        if not key:
            raise CheckpointError(
                f"{KEY_ENV_VAR} is set but blank; set it to a key of at least {MIN_KEY_BYTES} "
                "bytes (generate one with: python -c \"import secrets; "
                "print(secrets.token_hex(32))\"), or unset it to use the key file"
            )
        if len(key) < MIN_KEY_BYTES:
            raise CheckpointError(
                f"{KEY_ENV_VAR} is {len(key)} bytes long; a checkpoint key needs at least "
                f"{MIN_KEY_BYTES} (generate one with: python -c "
                "\"import secrets; print(secrets.token_hex(32))\")"
            )
        return key, KEY_ENV_VAR
    path = key_file_path()
    return _load_or_create(path), f"the key file {str(path)!r}"


def default_keys() -> tuple[list[bytes], str]:
    """Return the default keys (the first signs, all verify) and where the first came from.

    After the signing key come the keys of ``AGENTKIT_CHECKPOINT_PREVIOUS_KEYS``, then, when
    ``AGENTKIT_CHECKPOINT_KEY`` has surrounding whitespace, its value as it is: releases
    before whitespace was stripped signed with that, and those checkpoints still load.
    """
    key, source = default_key()
    keys = [key, *_previous_keys()]
    raw = os.environ.get(KEY_ENV_VAR, "").encode("utf-8")
    if raw and raw != key and len(raw) >= MIN_KEY_BYTES:
        keys.append(raw)
    return keys, source


def _previous_keys() -> list[bytes]:
    value = os.environ.get(PREVIOUS_KEYS_ENV_VAR, "")
    keys = [item.strip().encode("utf-8") for item in value.split(",")]
    keys = [key for key in keys if key]
    for number, key in enumerate(keys, 1):
        if len(key) < MIN_KEY_BYTES:
            raise CheckpointError(
                f"{PREVIOUS_KEYS_ENV_VAR}: key {number} is {len(key)} bytes long; a checkpoint "
                f"key has at least {MIN_KEY_BYTES} (list earlier keys exactly as they were, "
                "separated by commas)"
            )
    return keys


def key_id(key: bytes) -> bytes:
    """A short fingerprint of ``key`` (written into signed checkpoints; reveals nothing)."""
    return hmac.new(key, b"agentkit checkpoint key id", hashlib.sha256).digest()[:8]


def _load_or_create(path: Path) -> bytes:
    key = _read(path)
    if key is not None:
        return key
    _create(path)
    key = _read(path)
    if key is None:
        raise CheckpointError(f"the checkpoint key file {str(path)!r} vanished while created")
    return key


def _read(path: Path) -> bytes | None:
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(
            f"cannot read the checkpoint key file {str(path)!r}: {exc}; fix or remove it, or "
            f"set {KEY_ENV_VAR}"
        ) from exc
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise CheckpointError(f"the checkpoint key file {str(path)!r} is not a regular file")
        if os.name == "posix" and (info.st_mode & 0o077 or info.st_uid != os.geteuid()):
            raise CheckpointError(
                f"the checkpoint key file {str(path)!r} is readable or writable by other users "
                f"or not owned by you; run: chmod 600 {path} (and check who wrote it)"
            )
        key = file.read(_MAX_KEY_FILE_BYTES).strip()
    if len(key) < MIN_KEY_BYTES:
        raise CheckpointError(
            f"the checkpoint key file {str(path)!r} holds {len(key)} bytes; a key needs at "
            f"least {MIN_KEY_BYTES}: remove the file to have a new key generated"
        )
    return key


def _create(path: Path) -> None:
    directory = path.parent
    try:
        if not directory.is_dir():
            directory.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                directory.mkdir(mode=0o700)
                os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask
        fd, temp = tempfile.mkstemp(dir=directory, prefix=".checkpoint-key-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(secrets.token_hex(32).encode("ascii") + b"\n")
                file.flush()
                os.fsync(file.fileno())
            with contextlib.suppress(FileExistsError):  # another process was first: use its key
                os.link(temp, path)
        finally:
            os.unlink(temp)
    except OSError as exc:
        raise CheckpointError(
            f"cannot create the checkpoint key file {str(path)!r}: {exc}; set {KEY_ENV_VAR} "
            f"or {KEY_FILE_ENV_VAR} instead"
        ) from exc
