"""Checkpoint serialization: pickle inside a versioned, optionally signed envelope.

Envelope layout (all checkpoints written by :class:`PickleSerializer`)::

    b"AGKCKPT"        7 bytes   magic: "this is an agentkit checkpoint"
    version           1 byte    format version, currently 1
    flags             1 byte    bit 0 set: signed
    [hmac]            32 bytes  only when signed: HMAC-SHA256, see below
    payload           ...       pickle, protocol 5

The HMAC covers ``magic + version + flags + len(id) (4 bytes, big-endian) + id (UTF-8) +
payload``, so a signed checkpoint cannot be altered, nor replayed under another checkpoint id.

The payload is always read by a restricted unpickler, keyed or not. It resolves only:

* plain builtins (``dict``, ``list``, ``tuple``, ``set``, ``frozenset``, ``str``, ``bytes``,
  ``bytearray``, ``int``, ``float``, ``complex``, ``bool``, ``slice``, ``range``) and the builtin
  exception classes;
* ``datetime.{date, time, datetime, timedelta, timezone}``, ``decimal.Decimal``, ``uuid.UUID``,
  ``fractions.Fraction``, ``collections.{OrderedDict, deque}``;
* agentkit's own data types: classes defined in ``agentkit`` or an ``agentkit.*`` module that are
  attrs classes, :class:`enum.Enum` subclasses or :class:`~agentkit.errors.AgentKitError`
  subclasses;
* the classes given in ``allowed_types``, matched by module and qualified name.

Functions, modules and other callables are never resolved, so a checkpoint cannot name
``os.system`` and have it called.
"""

from __future__ import annotations

import builtins
import collections
import datetime
import decimal
import enum
import fractions
import hashlib
import hmac
import importlib
import io
import os
import pickle
import re
import sys
import types
import uuid
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from agentkit.errors import AgentKitError, CheckpointError

__all__ = ["PickleSerializer", "Serializer"]

MAGIC = b"AGKCKPT"
FORMAT_VERSION = 1
FLAG_SIGNED = 0x01
_KNOWN_FLAGS = FLAG_SIGNED
_HEADER_LEN = len(MAGIC) + 2
_MAC_LEN = hashlib.sha256().digest_size
_PICKLE_PROTOCOL = 5
KEY_ENV_VAR = "AGENTKIT_CHECKPOINT_KEY"


@runtime_checkable
class Serializer(Protocol):
    """What a :class:`~agentkit.Runner` needs to turn checkpoint state into bytes and back.

    ``loads`` must raise :class:`~agentkit.errors.CheckpointError` for data it does not trust.
    """

    def dumps(self, obj: Any, *, checkpoint_id: str) -> bytes:
        """Encode ``obj`` as the checkpoint stored under ``checkpoint_id``."""
        ...

    def loads(self, data: bytes, *, checkpoint_id: str) -> Any:
        """Decode the checkpoint ``data`` that was stored under ``checkpoint_id``."""
        ...


def _builtin_allowlist() -> dict[tuple[str, str], type]:
    plain: list[type] = [
        dict, list, tuple, set, frozenset, str, bytes, bytearray,
        int, float, complex, bool, slice, range,
    ]  # fmt: skip
    errors = [
        value
        for value in vars(builtins).values()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == "builtins"
    ]
    stdlib: list[type] = [
        datetime.date,
        datetime.time,
        datetime.datetime,
        datetime.timedelta,
        datetime.timezone,
        decimal.Decimal,
        uuid.UUID,
        fractions.Fraction,
        collections.OrderedDict,
        collections.deque,
    ]
    return {(cls.__module__, cls.__qualname__): cls for cls in [*plain, *errors, *stdlib]}


_SAFE_CLASSES = _builtin_allowlist()
_AGENTKIT_MODULE = re.compile(r"agentkit(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
_DUNDER = re.compile(r"__\w*__\Z")


def _is_agentkit_module(module: str) -> bool:
    return bool(_AGENTKIT_MODULE.match(module))


def _is_agentkit_data_class(cls: type) -> bool:
    """The allow rule for agentkit's own types (see the module docstring)."""
    if not _is_agentkit_module(getattr(cls, "__module__", "") or ""):
        return False
    if issubclass(cls, (enum.Enum, AgentKitError)):
        return True
    import attrs  # agentkit depends on attrs; imported here to keep module import cheap

    return attrs.has(cls)


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class PickleSerializer:
    """Pickle-based checkpoint serializer with a restricted unpickler and optional signing.

    Args:
        secret_key: when given, checkpoints are signed with HMAC-SHA256 over the envelope and the
            checkpoint id, and only correctly signed checkpoints are loaded (unsigned, tampered
            and replayed-under-another-id ones are refused before anything is unpickled). Without
            a key, checkpoints are written unsigned and signed ones are refused (a key is needed
            to check them).
        allowed_types: your own classes that may appear in checkpoints (session values,
            interrupt state, tool results), matched by module and qualified name. Only classes
            are accepted. Loading calls an allowed class's reconstruction hooks
            (``__reduce__`` target, ``__setstate__``) with the stored data, so allow only plain
            data classes.

    ``loads`` refuses, with a :class:`~agentkit.errors.CheckpointError` and without executing
    anything from the data, every checkpoint it does not trust; ``dumps`` refuses a value of a
    type that ``loads`` would refuse, naming the type, before returning any bytes.

    Example::

        serializer = PickleSerializer(secret_key=b"from your secret store",
                                      allowed_types=[Order])
        data = serializer.dumps({"order": Order(7)}, checkpoint_id="run-1")
        serializer.loads(data, checkpoint_id="run-1")   # {'order': Order(id=7)}
        serializer.loads(data, checkpoint_id="run-2")   # CheckpointError: failed its
                                                        # signature check
    """

    __slots__ = ("_allowed", "_key")

    def __init__(self, secret_key: bytes | None = None, allowed_types: Iterable[type] = ()) -> None:
        key: object = secret_key  # checked at run time: callers are not always type-checked
        if key is not None:
            if isinstance(key, str):
                raise TypeError("secret_key must be bytes, not str: pass secret.encode('utf-8')")
            if not isinstance(key, (bytes, bytearray, memoryview)):
                raise TypeError(f"secret_key must be bytes or None, not {type(key).__name__}")
            secret_key = bytes(key)
            if not secret_key:
                raise ValueError("secret_key is empty; pass None for unsigned checkpoints")
        self._key: bytes | None = secret_key
        allowed: dict[tuple[str, str], type] = {}
        for cls in allowed_types:
            if not isinstance(cls, type):
                raise TypeError(
                    f"allowed_types takes classes only, got {cls!r}; "
                    "functions and other objects are never loaded from checkpoints"
                )
            if "<locals>" in cls.__qualname__:
                raise TypeError(
                    f"{_type_name(cls)} is defined inside a function; pickle cannot find it "
                    "by name, so it cannot be checkpointed: define it at module level"
                )
            allowed[(cls.__module__, cls.__qualname__)] = cls
        self._allowed = allowed

    @classmethod
    def from_env(cls, allowed_types: Iterable[type] = ()) -> PickleSerializer:
        """Build the default serializer: keyed from ``AGENTKIT_CHECKPOINT_KEY`` when it is set.

        The variable's value is used as the key (UTF-8 encoded); when it is unset or empty,
        the serializer is keyless. This is what ``Runner(serializer=None)`` uses.
        """
        value = os.environ.get(KEY_ENV_VAR, "")
        return cls(value.encode("utf-8") if value else None, allowed_types)

    @property
    def signed(self) -> bool:
        """Whether this serializer signs checkpoints and requires signatures when loading."""
        return self._key is not None

    @property
    def allowed_types(self) -> frozenset[type]:
        """The user classes given as ``allowed_types``."""
        return frozenset(self._allowed.values())

    def __repr__(self) -> str:
        names = sorted(f"{module}.{name}" for module, name in self._allowed)
        return f"PickleSerializer(signed={self.signed}, allowed_types={names})"

    # -- writing -------------------------------------------------------------------------

    def dumps(self, obj: Any, *, checkpoint_id: str) -> bytes:
        """Encode ``obj`` into a checkpoint envelope for ``checkpoint_id``.

        Raises:
            CheckpointError: ``obj`` contains a value that :meth:`loads` would refuse (the
                message names its type and how to allow it), or cannot be pickled at all.
        """
        _check_id(checkpoint_id)
        buffer = io.BytesIO()
        try:
            _CheckingPickler(buffer, self).dump(obj)
        except CheckpointError:
            raise
        except RecursionError as exc:
            raise CheckpointError("cannot checkpoint value: it is nested too deeply") from exc
        except Exception as exc:  # pickle raises TypeError, PicklingError, AttributeError...
            raise CheckpointError(f"cannot checkpoint value: {exc}") from exc
        payload = buffer.getvalue()
        if self._key is None:
            return _header(0) + payload
        header = _header(FLAG_SIGNED)
        return header + _mac(self._key, header, checkpoint_id, payload) + payload

    def _check_class(self, cls: type) -> None:
        """Raise unless ``loads`` would resolve ``cls``."""
        if self._resolves_to(cls):
            return
        name = _type_name(cls)
        if _is_agentkit_module(cls.__module__):
            raise CheckpointError(
                f"cannot checkpoint value of type {name!r}: only agentkit's data types "
                "(attrs classes, enums and AgentKitError subclasses) can be checkpointed"
            )
        raise CheckpointError(
            f"cannot checkpoint value of type {name!r}: "
            f"add it to PickleSerializer(allowed_types=[{name}])"
        )

    def _resolves_to(self, cls: type) -> bool:
        key = (cls.__module__, cls.__qualname__)
        if _SAFE_CLASSES.get(key) is cls or self._allowed.get(key) is cls:
            return True
        # Exactly the rule loads applies: the name must lead back to this very class.
        module = getattr(cls, "__module__", None)
        return (
            isinstance(module, str)
            and _is_agentkit_module(module)
            and _resolve_agentkit(module, cls.__qualname__) is cls
        )

    # -- reading -------------------------------------------------------------------------

    def loads(self, data: bytes, *, checkpoint_id: str) -> Any:
        """Decode checkpoint ``data`` that was stored under ``checkpoint_id``.

        Raises:
            CheckpointError: the data is not an agentkit checkpoint, has an unknown format
                version, is corrupt or truncated, is unsigned while this serializer has a key,
                is signed while it has none, fails the signature check (tampered, saved under
                another id or with another key), or names a type that is not allowed. Nothing
                from the data is executed in any of these cases.
        """
        _check_id(checkpoint_id)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"checkpoint data must be bytes, not {type(data).__name__}")
        data = bytes(data)
        where = f"checkpoint {checkpoint_id!r}"
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
        if version != FORMAT_VERSION:
            raise CheckpointError(
                f"{where} has format version {version}; this agentkit reads version "
                f"{FORMAT_VERSION} (was it written by a newer agentkit?)"
            )
        if flags & ~_KNOWN_FLAGS:
            raise CheckpointError(f"{where} is corrupt (unknown flags {flags:#04x})")
        header = data[:_HEADER_LEN]
        if flags & FLAG_SIGNED:
            if self._key is None:
                raise CheckpointError(
                    f"{where} is signed; a secret key is needed to load it: "
                    f"PickleSerializer(secret_key=...) or set {KEY_ENV_VAR}"
                )
            if len(data) < _HEADER_LEN + _MAC_LEN:
                raise CheckpointError(f"{where} is truncated ({len(data)} bytes)")
            mac = data[_HEADER_LEN : _HEADER_LEN + _MAC_LEN]
            payload = data[_HEADER_LEN + _MAC_LEN :]
            expected = _mac(self._key, header, checkpoint_id, payload)
            if not hmac.compare_digest(mac, expected):
                raise CheckpointError(
                    f"{where} failed its signature check: it was tampered with, saved under "
                    "another checkpoint id, or signed with another key; refusing to load it"
                )
        else:
            if self._key is not None:
                raise CheckpointError(
                    f"{where} is not signed; this serializer has a secret key and loads only "
                    "checkpoints signed with it (was it written without "
                    f"{KEY_ENV_VAR} / secret_key?)"
                )
            payload = data[_HEADER_LEN:]
        return self._unpickle(payload, where)

    def _unpickle(self, payload: bytes, where: str) -> Any:
        stream = io.BytesIO(payload)
        try:
            value = _RestrictedUnpickler(stream, self, where).load()
        except CheckpointError:
            raise
        except RecursionError as exc:
            raise CheckpointError(f"{where} is corrupt: nested too deeply") from exc
        except Exception as exc:  # UnpicklingError, EOFError, ValueError, TypeError, ...
            raise CheckpointError(f"{where} is corrupt or truncated: {exc}") from exc
        if stream.tell() != len(payload):
            raise CheckpointError(f"{where} is corrupt: unexpected bytes after the payload")
        return value

    def _find_class(self, module: str, name: str, where: str) -> type:
        key = (module, name)
        cls = _SAFE_CLASSES.get(key) or self._allowed.get(key)
        if cls is not None:
            return cls
        if _is_agentkit_module(module):
            found = _resolve_agentkit(module, name)
            if found is not None:
                return found
            raise CheckpointError(
                f"{where} refers to '{module}.{name}', which is not an agentkit data type "
                "(attrs class, enum or AgentKitError subclass); refusing to load it"
            )
        raise CheckpointError(
            f"{where} refers to '{module}.{name}', which is not an allowed type; refusing to "
            f"load it. If it is a class of yours, pass it in "
            f"PickleSerializer(allowed_types=[{module}.{name}])"
        )


def _resolve_agentkit(module_name: str, qualname: str) -> type | None:
    """Resolve ``module_name.qualname`` when it names an agentkit data class, else ``None``."""
    parts = qualname.split(".")
    segments = [*module_name.split("."), *parts]
    if not all(part.isidentifier() and not _DUNDER.match(part) for part in segments):
        return None
    module = sys.modules.get(module_name)
    if module is None:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            return None
    # The first step may go through the module's own __getattr__ (lazy re-exports); later
    # steps walk nested classes through their own namespace, never through descriptors.
    obj: Any = getattr(module, parts[0], None)
    for part in parts[1:]:
        if not isinstance(obj, type):
            return None
        obj = vars(obj).get(part)
    if isinstance(obj, type) and _is_agentkit_data_class(obj):
        return obj
    return None


class _CheckingPickler(pickle.Pickler):
    """A pickler that refuses, before anything is returned, what the unpickler would refuse.

    ``reducer_override`` sees every object that is not a plain builtin container or scalar:
    instances, classes and functions, including the callables and classes that reduce tuples
    refer to. Every class pickle would store by reference passes through here.
    """

    def __init__(self, file: io.BytesIO, owner: PickleSerializer) -> None:
        super().__init__(file, protocol=_PICKLE_PROTOCOL)
        self._owner = owner

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type):
            self._owner._check_class(obj)
        elif isinstance(obj, types.ModuleType):
            raise CheckpointError(f"cannot checkpoint module {obj.__name__!r}")
        elif isinstance(obj, _FUNCTION_TYPES):
            module = getattr(obj, "__module__", None) or "?"
            name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", repr(obj))
            raise CheckpointError(
                f"cannot checkpoint function '{module}.{name}': functions, methods and other "
                "callables are never stored in checkpoints (store data instead)"
            )
        else:
            self._owner._check_class(type(obj))
        return NotImplemented


_FUNCTION_TYPES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
)


class _RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only allowed classes and has no persistent ids."""

    def __init__(self, file: io.BytesIO, owner: PickleSerializer, where: str) -> None:
        super().__init__(file, fix_imports=False)
        self._owner = owner
        self._where = where

    def find_class(self, module: str, name: str) -> Any:
        return self._owner._find_class(module, name, self._where)

    def persistent_load(self, pid: Any) -> Any:
        raise CheckpointError(
            f"{self._where} is corrupt or foreign: it uses pickle persistent ids, "
            "which agentkit never writes"
        )


def _header(flags: int) -> bytes:
    return MAGIC + bytes((FORMAT_VERSION, flags))


def _mac(key: bytes, header: bytes, checkpoint_id: str, payload: bytes) -> bytes:
    encoded_id = checkpoint_id.encode("utf-8", "surrogatepass")
    digest = hmac.new(key, header, hashlib.sha256)
    digest.update(len(encoded_id).to_bytes(4, "big"))
    digest.update(encoded_id)
    digest.update(payload)
    return digest.digest()


def _check_id(checkpoint_id: object) -> None:
    if not isinstance(checkpoint_id, str):
        raise TypeError(f"checkpoint_id must be a str, not {type(checkpoint_id).__name__}")
