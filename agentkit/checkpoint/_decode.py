"""How checkpoint payloads become values again: the restore function and its builders.

The payload first passes :func:`~agentkit.checkpoint._scan.check_stream`, which guarantees
that the only callable the C unpickler ever invokes is the restore function and that nothing
is mutated once built. The restore function then resolves the tag of each call (a mode letter
and a stable name, see :mod:`agentkit.checkpoint._codec`) in the serializer's type table,
refusing an unknown name, and builds a **fresh** object; the only objects it does not create
are enum members, which it returns as found and never changes, and classes (``T`` tags).

Resolving a tag costs a table lookup and a few checks, and a checkpoint repeats a handful of
tags hundreds of times, so a :class:`Reader` keeps what each tag resolved to, for all the
loads of its serializer (at most :data:`MAX_CACHED_TAGS`; tags past that are resolved on
every call). What a tag resolves to depends only on the tag and the fixed type table, and
every per-object check (argument count and types, state keys, the class of the new object)
still runs on every call.
"""

from __future__ import annotations

import enum
import functools
import io
import pickle
from collections.abc import Callable
from typing import Any

import attrs

from agentkit.checkpoint._attrs_state import attrs_field_names
from agentkit.checkpoint._codec import (
    RESTORE_GLOBAL,
    TypeTable,
    has_dunder_key,
    is_dunder,
    set_default_state,
)
from agentkit.checkpoint._scan import check_stream
from agentkit.checkpoint._values import VALUE_BY_NAME, VALUE_CODECS
from agentkit.errors import CheckpointError

__all__ = ["MAX_CACHED_TAGS", "Reader"]

MAX_CACHED_TAGS = 1024
"""Most distinct tags a :class:`Reader` remembers (a real checkpoint has a few dozen)."""

# What a short tag ("S" + name, *field names) resolves to: the class, its __new__, the field
# names, its __setstate__ (None: pickle's default state update), whether that __setstate__
# takes the values as a tuple (see attrs_field_names), the stable name, and the defaults of
# attrs fields the checkpoint predates (see _later_fields).
_Short = tuple[Any, Any, tuple[str, ...], Any, bool, str, tuple[tuple[str, Any, bool], ...]]


class Reader:
    """Loads checked payloads for one type table; remembers what each tag resolved to."""

    __slots__ = ("_builders", "_shorts", "_table")

    def __init__(self, table: TypeTable) -> None:
        self._table = table
        self._shorts: dict[tuple[Any, ...], _Short] = {}
        self._builders: dict[str, Callable[..., Any]] = {}

    def decode(self, payload: bytes, *, max_depth: int, max_objects: int) -> Any:
        """Check ``payload`` (see :mod:`agentkit.checkpoint._scan`), then build its value."""
        check_stream(payload, max_depth=max_depth, max_objects=max_objects)
        return _Unpickler(io.BytesIO(payload), self.restore).load()

    def restore(self, tag: Any, *values: Any) -> Any:
        """What the restore global does while loading: build the object ``tag`` names."""
        if type(tag) is tuple:  # the short form: ("S" + name, *field names), *field values
            short = self._shorts.get(tag)
            if short is None:
                short = self._resolve_short(tag)
            cls, new, keys, setstate, positional, name, later = short
            if len(values) != len(keys):
                raise CheckpointError(f"bad state for {name!r}")
            obj = new(cls)
            if type(obj) is not cls:
                raise CheckpointError(f"rebuilding {name!r} gave a {type(obj).__name__}")
            if positional:  # attrs' own __setstate__, and keys are its field names in order
                setstate(obj, values)
            elif setstate is not None:
                setstate(obj, dict(zip(keys, values, strict=False)))  # same length: checked
            else:
                set_default_state(obj, name, dict(zip(keys, values, strict=False)))
            for field, default, factory in later:  # empty unless written by an older version
                object.__setattr__(obj, field, default() if factory else default)
            return obj
        builder = self._builders.get(tag) if type(tag) is str else None
        if builder is None:
            builder = self._resolve(tag)
        return builder(*values)

    def _resolve_short(self, tag: tuple[Any, ...]) -> _Short:
        if not tag or not all(type(part) is str for part in tag):
            raise CheckpointError("bad restore call")
        mode_name, keys = tag[0], tag[1:]
        if not mode_name.startswith("S") or any(is_dunder(key) for key in keys):
            raise CheckpointError("bad restore call")
        name = mode_name[1:]
        cls = self._table.type_for(name)
        if issubclass(cls, enum.Enum) or cls in VALUE_CODECS:
            raise CheckpointError(f"bad restore call for {name!r}")
        setstate = getattr(cls, "__setstate__", None)
        positional = setstate is not None and attrs_field_names(setstate) == keys
        short: _Short = (
            cls,
            cls.__new__,
            keys,
            setstate,
            positional,
            name,
            _later_fields(cls, keys),
        )
        if len(self._shorts) < MAX_CACHED_TAGS:
            self._shorts[tag] = short
        return short

    def _resolve(self, tag: Any) -> Callable[..., Any]:
        """The builder for a string tag (mode letter + stable name)."""
        if type(tag) is not str or not tag or tag[0] not in _BUILDERS:
            raise CheckpointError("bad restore call")
        mode, name = tag[0], tag[1:]
        builder = _BUILDERS[mode](self._table.type_for(name), name)
        if builder is None:
            raise CheckpointError(f"bad restore call for {name!r}")
        if len(self._builders) < MAX_CACHED_TAGS:
            self._builders[tag] = builder
        return builder


def _later_fields(cls: type, keys: tuple[str, ...]) -> tuple[tuple[str, Any, bool], ...]:
    """The attrs fields of ``cls`` with a default that a checkpoint's state ``keys`` lacks.

    A persisted attrs class may gain fields with defaults in a later version; a checkpoint
    written before holds none of them, and its object gets each field's default (a factory is
    called per object), so every later reader sees a whole object, wherever it is nested.
    """
    if not attrs.has(cls):
        return ()
    later = []
    for field in attrs.fields(cls):
        if field.name in keys or field.default is attrs.NOTHING:
            continue
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            if default.takes_self:
                continue
            later.append((field.name, default.factory, True))
        else:
            later.append((field.name, default, False))
    return tuple(later)


class _Unpickler(pickle.Unpickler):
    """The C unpickler, with the restore function as its only global."""

    def __init__(self, file: io.BytesIO, restore: Callable[..., Any]) -> None:
        super().__init__(file, fix_imports=False)
        self._restore = restore

    def find_class(self, module: str, name: str) -> Any:
        """Resolve only the restore global."""
        if (module, name) == RESTORE_GLOBAL:
            return self._restore
        raise CheckpointError(f"it refers to the global '{module}.{name}'")

    def persistent_load(self, pid: Any) -> Any:
        """Refuse: checkpoints never hold persistent ids."""
        raise CheckpointError("it uses pickle persistent ids")


# -- builders by mode: each returns None when the class does not fit the mode --------------


def _is_plain(cls: type) -> bool:
    return not issubclass(cls, enum.Enum) and cls not in VALUE_CODECS


def _type_builder(cls: type, name: str) -> Callable[..., Any]:
    def build_type() -> Any:
        return cls

    return build_type


def _member_builder(cls: type, name: str) -> Callable[..., Any] | None:
    if not issubclass(cls, enum.Enum):
        return None

    def build_member(value: Any) -> Any:
        member = cls(value)
        if type(member) is not cls:
            raise CheckpointError(f"{name}({value!r}) is not a member")
        return member

    return build_member


def _value_builder(cls: type, name: str) -> Callable[..., Any] | None:
    if cls not in VALUE_CODECS or issubclass(cls, enum.Enum):
        return None
    return VALUE_BY_NAME[name][1]


def _object_builder(mode: str) -> Callable[[type, str], Callable[..., Any] | None]:
    def builder(cls: type, name: str) -> Callable[..., Any] | None:
        return functools.partial(_rebuild, cls, name, mode) if _is_plain(cls) else None

    return builder


_BUILDERS: dict[str, Callable[[type, str], Callable[..., Any] | None]] = {
    "T": _type_builder,
    "E": _member_builder,
    "V": _value_builder,
    "N": _object_builder("N"),
    "C": _object_builder("C"),
}


def _rebuild(
    cls: type,
    name: str,
    mode: str,
    args: Any,
    state: Any = None,
    listitems: Any = None,
    dictitems: Any = None,
) -> Any:
    if type(args) is not tuple:
        raise CheckpointError(f"bad arguments for {name!r}")
    obj: Any = cls.__new__(cls, *args) if mode == "N" else cls(*args)
    built = type(obj)
    if built is not cls:
        raise CheckpointError(f"rebuilding {name!r} gave a {built.__name__}")
    if state is not None:
        if has_dunder_key(state):
            raise CheckpointError(f"bad state for {name!r}: it sets a __dunder__ attribute")
        setstate = getattr(cls, "__setstate__", None)
        if setstate is not None:
            obj.__setstate__(state)
        else:
            set_default_state(obj, name, state)
    if listitems is not None:
        if type(listitems) is not list:
            raise CheckpointError(f"bad items for {name!r}")
        obj.extend(listitems)
    if dictitems is not None:
        if type(dictitems) is not list:
            raise CheckpointError(f"bad items for {name!r}")
        for key, value in dictitems:
            obj[key] = value
    return obj
