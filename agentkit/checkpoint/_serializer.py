"""Checkpoint serialization: pickle inside a versioned envelope, signed by default.

The definitions behind :mod:`agentkit.checkpoint.serializer`, whose docstring documents them.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import io
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from agentkit._lazy import present
from agentkit.checkpoint._base import DEFAULT_MAX_BYTES, _check_max_bytes
from agentkit.checkpoint._codec import Encoder, TypeTable
from agentkit.checkpoint._decode import Reader
from agentkit.checkpoint._keys import (
    KEY_ENV_VAR,
    MIN_KEY_BYTES,
    PREVIOUS_KEYS_ENV_VAR,
    default_keys,
    key_id,
)
from agentkit.checkpoint._mac import MacKey
from agentkit.errors import AgentKitTypeError, AgentKitValueError, CheckpointError

__all__ = [
    "PickleSerializer",
    "Serializer",
    "UnsignedCheckpointWarning",
    "FLAG_SIGNED",
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_DEPTH",
    "MAX_OBJECTS",
]

MAGIC = b"AGKCKPT"
"""The bytes every checkpoint starts with."""
FORMAT_VERSION = 2
"""The envelope version this agentkit writes (the byte after :data:`MAGIC`); it reads it and every
earlier one."""
FLAG_SIGNED = 0x01
"""The flag bit (in the byte after the version) of a signed checkpoint."""
_KNOWN_FLAGS = FLAG_SIGNED
_HEADER_LEN = len(MAGIC) + 2
_KEY_ID_LEN = 8
_MAC_LEN = hashlib.sha256().digest_size
MAX_DEPTH = 1000
"""Deepest nesting a checkpoint may hold (pickle itself cannot write much deeper)."""
MAX_OBJECTS = 1_000_000
"""Most objects a checkpoint may hold, counted as pickle opcodes, a ``MEMOIZE`` right after the
object it remembers counted with it (a 50-message run takes about 2 600); the opcode check
refuses a checkpoint over the limit in about a third of a second."""


class UnsignedCheckpointWarning(UserWarning):
    """An unsigned checkpoint was written or read (``PickleSerializer(allow_unsigned=True)``)."""


@runtime_checkable
class Serializer(Protocol):
    """What a :class:`~agentkit.Runner` needs to turn checkpoint state into bytes and back.

    ``loads`` must raise :class:`~agentkit.errors.CheckpointError` for data it does not trust.
    A serializer whose ``dumps`` and ``loads`` also accept a ``namespace`` keyword is given the
    store's namespace (see :func:`~agentkit.checkpoint.namespace_of`) by the Runner, so it can
    bind checkpoints to their store as :class:`PickleSerializer` does.
    """

    def dumps(self, obj: Any, *, checkpoint_id: str) -> bytes:
        """Encode ``obj`` as the checkpoint stored under ``checkpoint_id``."""
        ...

    def loads(self, data: bytes, *, checkpoint_id: str) -> Any:
        """Decode the checkpoint ``data`` that was stored under ``checkpoint_id``."""
        ...


class PickleSerializer:
    """Pickle-based checkpoint serializer: signed by default, with a restricted unpickler.

    Args:
        secret_key: the HMAC-SHA256 key (at least 16 bytes), or a list of keys to rotate
            them: the first signs, and every one verifies, so checkpoints saved under an old
            key still load (``[new_key, old_key]``; drop the old key once those runs are
            done). Default: the value of ``AGENTKIT_CHECKPOINT_KEY`` (surrounding whitespace
            stripped), else a key file created once in your configuration directory
            (``AGENTKIT_CHECKPOINT_KEY_FILE`` overrides its path), plus the earlier keys
            listed in ``AGENTKIT_CHECKPOINT_PREVIOUS_KEYS`` (comma-separated), which only
            verify.
        allowed_types: your own classes that may appear in checkpoints (session values,
            interrupt state, tool results). Each is stored under the stable name
            ``module.qualname``; pass a mapping ``{"stable.name": cls}`` to choose the names
            (then moving the class keeps old checkpoints loadable). Loading calls an allowed
            class's ``__new__`` (or the class, when its ``__reduce__`` says so) and
            ``__setstate__`` with the stored data, so allow only plain data classes.
        allow_unsigned: write unsigned checkpoints when no ``secret_key`` is given, and accept
            unsigned ones when reading; both warn with :class:`UnsignedCheckpointWarning`.
            Anyone who can write to the store can then make a run resume from any state.
        max_bytes: the largest checkpoint ``dumps`` writes and ``loads`` reads.

    Every refusal is a :class:`~agentkit.errors.CheckpointError`, and nothing from the
    refused data runs or changes anything.

    Example::

        serializer = PickleSerializer(allowed_types=[Order])   # key from env or key file
        data = serializer.dumps({"order": Order(7)}, checkpoint_id="run-1")
        serializer.loads(data, checkpoint_id="run-1")   # {'order': Order(id=7)}
        serializer.loads(data, checkpoint_id="run-2")   # CheckpointError: failed its
                                                        # signature check
    """

    __slots__ = (
        "_allow_unsigned",
        "_key",
        "_key_id",
        "_key_source",
        "_max_bytes",
        "_reader",
        "_table",
        "_verifiers",
    )

    def __init__(
        self,
        secret_key: bytes | Sequence[bytes] | None = None,
        allowed_types: Iterable[type] | Mapping[str, type] = (),
        *,
        allow_unsigned: bool = False,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        keys: list[bytes] = []
        if secret_key is not None:
            keys, source = _check_keys(secret_key), "secret_key"
        elif not allow_unsigned:
            keys, source = default_keys()
        else:
            source = ""
            warnings.warn(
                "PickleSerializer(allow_unsigned=True) without a secret_key writes unsigned "
                "checkpoints: anyone who can write to the store can forge a run's state",
                UnsignedCheckpointWarning,
                stacklevel=2,
            )
        _check_max_bytes(max_bytes)
        self._key: MacKey | None = MacKey(keys[0]) if keys else None
        self._key_id = key_id(keys[0]) if keys else b""
        # key id -> the keys with that id (two keys sharing a 64-bit id is all but impossible,
        # but then both are tried rather than one being lost)
        verifiers: dict[bytes, list[bytes]] = {}
        for key in keys:
            same_id = verifiers.setdefault(key_id(key), [])
            if key not in same_id:
                same_id.append(key)
        self._verifiers = {
            fingerprint: [MacKey(key) for key in same] for fingerprint, same in verifiers.items()
        }
        self._key_source = source
        self._allow_unsigned = bool(allow_unsigned)
        self._max_bytes = max_bytes
        self._table = TypeTable(_allowed_by_name(allowed_types))
        self._reader = Reader(self._table)

    @classmethod
    def from_env(cls, allowed_types: Iterable[type] | Mapping[str, type] = ()) -> PickleSerializer:
        """Build the default serializer (what ``Runner(serializer=None)`` uses).

        The same as ``PickleSerializer(allowed_types=allowed_types)``: signed, keyed from
        ``AGENTKIT_CHECKPOINT_KEY`` or the key file.
        """
        return cls(None, allowed_types)

    @property
    def signed(self) -> bool:
        """Whether :meth:`dumps` signs (always, unless ``allow_unsigned`` and no key)."""
        return self._key is not None

    @property
    def allow_unsigned(self) -> bool:
        """Whether unsigned checkpoints are accepted (with a warning)."""
        return self._allow_unsigned

    @property
    def max_bytes(self) -> int:
        """The largest checkpoint written or read, in bytes."""
        return self._max_bytes

    @property
    def allowed_types(self) -> frozenset[type]:
        """The user classes given as ``allowed_types``."""
        return frozenset(self._table.user_types.values())

    def __repr__(self) -> str:
        names = sorted(self._table.user_types)
        return f"PickleSerializer(signed={self.signed}, allowed_types={names})"

    # -- writing -------------------------------------------------------------------------

    def dumps(self, obj: Any, *, checkpoint_id: str, namespace: str = "") -> bytes:
        """Encode ``obj`` into a checkpoint for ``checkpoint_id`` in the store ``namespace``.

        The structural limits :meth:`loads` applies (nesting depth, object count, no
        reference cycles through lists, dicts or sets) are not checked again here; values
        that reach them cannot be pickled in practice or are not checkpoint state.

        Raises:
            CheckpointError: ``obj`` holds a value of a type :meth:`loads` would refuse (the
                message names its type and how to allow it), or the checkpoint would exceed
                ``max_bytes``.
        """
        _check_str("checkpoint_id", checkpoint_id)
        _check_str("namespace", namespace)
        buffer = io.BytesIO()
        _pickle(Encoder(buffer, self._table), obj)
        payload = buffer.getvalue()
        if self._key is None:
            data = _header(0) + payload
            warnings.warn(
                f"checkpoint {checkpoint_id!r} is written unsigned (allow_unsigned=True)",
                UnsignedCheckpointWarning,
                stacklevel=2,
            )
        else:
            header = _header(FLAG_SIGNED) + self._key_id
            data = header + self._key.digest(_signed_prefix(header, namespace, checkpoint_id),
                                             payload) + payload
        _check_written(len(data), self._max_bytes)
        return data

    def bound_encoder(self, *, checkpoint_id: str, namespace: str = "") -> Callable[[Any], bytes]:
        """``dumps`` with ``checkpoint_id`` and ``namespace`` fixed, for one writer of many values.

        The same bytes as :meth:`dumps`, for less work per value: the pickler and its buffer
        are reused and the signature's fixed prefix is hashed once. What a durable run calls
        for every step record. Not thread-safe: one caller at a time (a run's step writer
        calls it under its lock).
        """
        _check_str("checkpoint_id", checkpoint_id)
        _check_str("namespace", namespace)
        if self._key is None:  # unsigned: warns at every value, as dumps does
            return functools.partial(self.dumps, checkpoint_id=checkpoint_id, namespace=namespace)
        header = _header(FLAG_SIGNED) + self._key_id
        key = self._key.extended(_signed_prefix(header, namespace, checkpoint_id))
        return _BoundEncoder(self._table, header, key, self._max_bytes)

    # -- reading -------------------------------------------------------------------------

    def loads(self, data: bytes, *, checkpoint_id: str, namespace: str = "") -> Any:
        """Decode checkpoint ``data`` stored under ``checkpoint_id`` in the store ``namespace``.

        Raises:
            CheckpointError: the data is over ``max_bytes``, not an agentkit checkpoint, of an
                unknown or retired format version, corrupt or truncated, unsigned (unless
                ``allow_unsigned``), signed with another key, fails the signature check
                (altered, saved under another id or in another store), or holds a type or
                structure that is not allowed. Nothing from the data runs in any of these
                cases.
        """
        _check_str("checkpoint_id", checkpoint_id)
        _check_str("namespace", namespace)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise AgentKitTypeError(f"checkpoint data must be bytes, not {type(data).__name__}")
        where = f"checkpoint {checkpoint_id!r}"
        if len(data) > self._max_bytes:
            raise CheckpointError(
                f"{where} is {len(data)} bytes, over max_bytes={self._max_bytes}; refusing to "
                "load it (raise max_bytes if it is legitimate)"
            )
        data = bytes(data)
        payload = self._open_envelope(data, checkpoint_id, namespace, where)
        try:
            return self._reader.decode(payload, max_depth=MAX_DEPTH, max_objects=MAX_OBJECTS)
        except CheckpointError as exc:
            raise CheckpointError(f"{where} is refused: {exc}") from None
        except RecursionError:
            raise CheckpointError(f"{where} is corrupt: nested too deeply") from None
        except Exception as exc:  # UnpicklingError, EOFError, ValueError, TypeError, ...
            raise CheckpointError(f"{where} is corrupt or truncated: {exc!r}") from None

    def _open_envelope(self, data: bytes, checkpoint_id: str, namespace: str, where: str) -> bytes:
        """Check magic, version, flags and signature; return the payload."""
        if not data:
            raise CheckpointError(f"{where} is empty (0 bytes): not an agentkit checkpoint")
        if not data.startswith(MAGIC):
            if MAGIC.startswith(data):
                raise CheckpointError(f"{where} is truncated ({len(data)} bytes)")
            raise CheckpointError(
                f"{where} is not an agentkit checkpoint (no {MAGIC.decode()} header): "
                "it is foreign or corrupt data, refusing to load it"
            )
        if len(data) < _HEADER_LEN:
            raise CheckpointError(f"{where} is truncated ({len(data)} bytes)")
        version, flags = data[len(MAGIC)], data[len(MAGIC) + 1]
        if version == 1:
            raise CheckpointError(
                f"{where} has format version 1, written by agentkit before stable names and "
                "signing; this agentkit does not load it. Finish that run with the agentkit "
                "that saved it, or start it again"
            )
        if version > FORMAT_VERSION:
            raise CheckpointError(
                f"{where} has format version {version}: it was written by a newer agentkit; "
                f"upgrade agentkit to load it (this one reads version {FORMAT_VERSION})"
            )
        if version != FORMAT_VERSION or flags & ~_KNOWN_FLAGS:
            raise CheckpointError(f"{where} is corrupt (version {version}, flags {flags:#04x})")
        if not flags & FLAG_SIGNED:
            if not self._allow_unsigned:
                raise CheckpointError(
                    f"{where} is not signed; refusing to load it. Unsigned checkpoints are "
                    "loaded only by PickleSerializer(allow_unsigned=True)"
                )
            warnings.warn(
                f"{where} is unsigned and loaded only because allow_unsigned=True",
                UnsignedCheckpointWarning,
                stacklevel=3,
            )
            return data[_HEADER_LEN:]
        if self._key is None:
            raise CheckpointError(
                f"{where} is signed; this serializer has no key to check it "
                "(allow_unsigned=True without secret_key): pass secret_key, or drop "
                f"allow_unsigned to use {KEY_ENV_VAR} or the key file"
            )
        start = _HEADER_LEN + _KEY_ID_LEN
        if len(data) < start + _MAC_LEN:
            raise CheckpointError(f"{where} is truncated ({len(data)} bytes)")
        header, mac = data[:start], data[start : start + _MAC_LEN]
        payload = data[start + _MAC_LEN :]
        keys = self._verifiers.get(header[_HEADER_LEN:], ())
        prefix = _signed_prefix(header, namespace, checkpoint_id)
        for key in keys:
            if hmac.compare_digest(mac, key.digest(prefix, payload)):
                return payload
        if not keys:
            raise CheckpointError(self._unknown_key(where))
        raise CheckpointError(
            f"{where} failed its signature check: it was altered, or saved under another "
            f"checkpoint id or in another store{_this_store(namespace)}; refusing to load it. "
            "A checkpoint loads only under the id it was saved under, in the store it was "
            "saved in (the same Redis database and key prefix, SQLite file or directory)"
        )

    def _unknown_key(self, where: str) -> str:
        count = sum(len(keys) for keys in self._verifiers.values())
        mine = "this serializer's" if count == 1 else f"any of this serializer's {count} keys"
        return (
            f"{where} was signed with another key than {mine} (from {self._key_source}); "
            "refusing to load it. When several processes or machines share a checkpoint "
            f"store, set the same {KEY_ENV_VAR} for all of them. If the key was changed, keep "
            "the old one for verifying: PickleSerializer(secret_key=[new, old]), or list it in "
            f"{PREVIOUS_KEYS_ENV_VAR}"
        )


def _check_keys(secret_key: object) -> list[bytes]:
    """The keys of ``secret_key`` (one key or a sequence of keys), checked."""
    if isinstance(secret_key, str):
        raise AgentKitTypeError("secret_key must be bytes, not str: pass secret.encode('utf-8')")
    if isinstance(secret_key, (bytes, bytearray, memoryview)):
        return [_check_key(secret_key, "secret_key")]
    if not isinstance(secret_key, Sequence):
        raise AgentKitTypeError(
            f"secret_key must be bytes, a list of bytes or None, not {type(secret_key).__name__}"
        )
    if not secret_key:
        raise AgentKitValueError(
            "secret_key is a list with no keys; give at least one (the first signs, all verify)"
        )
    return [_check_key(key, f"secret_key[{number}]") for number, key in enumerate(secret_key)]


def _check_key(key: object, what: str) -> bytes:
    if not isinstance(key, (bytes, bytearray, memoryview)):
        hint = ": pass secret.encode('utf-8')" if isinstance(key, str) else ""
        raise AgentKitTypeError(f"{what} must be bytes, not {type(key).__name__}{hint}")
    key = bytes(key)
    if len(key) < MIN_KEY_BYTES:
        raise AgentKitValueError(
            f"{what} is {len(key)} bytes long; use at least {MIN_KEY_BYTES} random bytes "
            "(secrets.token_bytes(32))"
        )
    return key


def _this_store(namespace: str) -> str:
    """How an error names the store a checkpoint was refused in."""
    return f" (this store's namespace is {namespace!r})" if namespace else ""


def _allowed_by_name(allowed_types: Iterable[type] | Mapping[str, type]) -> dict[str, type]:
    if isinstance(allowed_types, Mapping):
        pairs = list(allowed_types.items())
    else:
        pairs = [(None, cls) for cls in allowed_types]
    allowed: dict[str, type] = {}
    for name, cls in pairs:
        if not isinstance(cls, type):
            raise AgentKitTypeError(
                f"allowed_types takes classes only, got {cls!r}; "
                "functions and other objects are never loaded from checkpoints"
            )
        if name is None:
            if "<locals>" in cls.__qualname__:
                raise AgentKitTypeError(
                    f"{cls.__module__}.{cls.__qualname__} is defined inside a function, so it "
                    "has no stable name: define it at module level, or pass allowed_types as "
                    "a mapping {'a.stable.name': cls}"
                )
            name = f"{cls.__module__}.{cls.__qualname__}"
        elif not isinstance(name, str) or not name:
            raise AgentKitTypeError(f"allowed_types names must be non-empty strings, got {name!r}")
        if allowed.get(name, cls) is not cls:
            raise AgentKitValueError(f"allowed_types names two classes {name!r}")
        allowed[name] = cls
    return allowed


def _header(flags: int) -> bytes:
    return MAGIC + bytes((FORMAT_VERSION, flags))


def _signed_prefix(header: bytes, namespace: str, checkpoint_id: str) -> bytes:
    """What the HMAC covers before the payload: the header, then the namespace and the id,
    each as a 4-byte big-endian length and its UTF-8."""
    space = namespace.encode("utf-8", "surrogatepass")
    name = checkpoint_id.encode("utf-8", "surrogatepass")
    return b"".join(
        (header, len(space).to_bytes(4, "big"), space, len(name).to_bytes(4, "big"), name)
    )


def _pickle(encoder: Encoder, obj: Any) -> None:
    """``encoder.dump(obj)``, every failure a :class:`CheckpointError`."""
    try:
        encoder.dump(obj)
    except CheckpointError:
        raise
    except RecursionError as exc:
        raise CheckpointError(
            "cannot checkpoint value: it is nested too deeply or refers to itself"
        ) from exc
    except Exception as exc:  # pickle raises TypeError, PicklingError, AttributeError...
        raise CheckpointError(f"cannot checkpoint value: {exc}") from exc


def _check_written(size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise CheckpointError(
            f"cannot checkpoint value: it takes {size} bytes, over max_bytes="
            f"{max_bytes}; keep less in session values and interrupt state, or raise "
            "max_bytes on the serializer and the store"
        )


class _BoundEncoder:
    """:meth:`PickleSerializer.bound_encoder` of a signing serializer (see there)."""

    __slots__ = ("_buffer", "_encoder", "_header", "_key", "_max_bytes", "_table")

    def __init__(self, table: TypeTable, header: bytes, key: MacKey, max_bytes: int) -> None:
        self._table = table
        self._header = header
        self._key = key
        self._max_bytes = max_bytes
        self._buffer = io.BytesIO()
        self._encoder: Encoder | None = None

    def __call__(self, obj: Any) -> bytes:
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        encoder = self._encoder
        if encoder is None:
            encoder = self._encoder = Encoder(buffer, self._table)
        try:
            _pickle(encoder, obj)
        except BaseException:
            self._encoder = None  # a dump cut short may leave the pickler mid-frame
            raise
        finally:
            encoder.clear_memo()  # holds every object pickled: let them go
        payload = buffer.getvalue()
        data = self._header + self._key.digest(payload) + payload
        _check_written(len(data), self._max_bytes)
        return data


def _check_str(what: str, value: object) -> None:
    if not isinstance(value, str):
        raise AgentKitTypeError(f"{what} must be a str, not {type(value).__name__}")

present((PickleSerializer, Serializer, UnsignedCheckpointWarning,), "agentkit.checkpoint")
