"""How checkpoint values become pickle payloads, and how payloads become values again.

Writing (:class:`Encoder`): a ``pickle.Pickler`` whose ``reducer_override`` sees every value
that is not a plain builtin (str, bytes, int, float, bool, None, list, dict, tuple, set,
frozenset, bytearray) and rewrites it as a call of one global, the restore function, on a
tuple of plain data that names the class by its **stable name**, never by its module path:

* ``("T" + name,)``: the class itself, as a value;
* ``("E" + name, value)``: an enum member, rebuilt by value (``Role("user")``), so it is
  looked up, never created or changed;
* ``("V" + name, args)``: a standard library value type (datetime types, ``Decimal``,
  ``Fraction``, ``UUID``, ``OrderedDict``, ``deque``, ``complex``), rebuilt by a constructor
  of ours that checks the type of every argument first;
* ``("N" + name, newargs, state, listitems, dictitems)`` and ``("C" + name, args, state,
  listitems, dictitems)``: any other allowed class, from what its ``__reduce_ex__(5)`` says
  (``cls.__new__(cls, *newargs)`` or ``cls(*args)``, then ``__setstate__`` or the default
  state update, exactly as pickle would), but only when that reduction names the class
  itself; a reduction naming any other function is refused.
* ``(("S" + name, *keys), *values)``: the short form of ``N`` without arguments and with a
  dict state (attrs classes): the first argument, the tag with the field names, is the same
  tuple for every object of a class, so the pickler writes it once and refers back to it.

Stable names come from :mod:`agentkit._persist` for agentkit's types, are ``builtins.<Name>``
for builtin exceptions and ``module.qualname`` (or the key given) for ``allowed_types``.

Reading is :mod:`agentkit.checkpoint._decode`: the payload is checked opcode by opcode
first, then the only global it names, the restore function, resolves every tag in the same
table (an unknown name is refused) and builds a **fresh** object; the only objects it does
not create are enum members, which it returns as found and never changes.
"""

from __future__ import annotations

import copyreg
import enum
import importlib
import io
import operator
import pickle
import types
from collections.abc import Callable, Mapping
from typing import Any

from agentkit._persist import persisted_name, persisted_type
from agentkit.checkpoint._attrs_state import attrs_field_names
from agentkit.checkpoint._values import BUILTIN_ERRORS, VALUE_BY_NAME, VALUE_CODECS
from agentkit.errors import CheckpointError

__all__ = [
    "RESTORE_GLOBAL",
    "Encoder",
    "TypeTable",
    "has_dunder_key",
    "is_dunder",
    "set_default_state",
]

PICKLE_PROTOCOL = 5

# Modules that register persisted types. Loading imports them when a checkpoint names a type
# not registered yet (the process that resumes may not have imported, say, the plan-execute
# agent). A hint for finding classes, never written into checkpoints.
_PERSISTED_MODULES = (
    "agentkit.errors",
    "agentkit.schema",
    "agentkit._events",
    "agentkit._cancel",
    "agentkit._runctx",
    "agentkit._interrupt",
    "agentkit._progress",
    "agentkit._checkpoints",
    "agentkit._runner",
    "agentkit.tools._approval",
    "agentkit.tools._unfinished",
    "agentkit.agents._flow",
    "agentkit.agents._agenttool",
    "agentkit.agents._workflow",
    "agentkit.agents._deterministic",
    "agentkit.prebuilt.planexecute",
    "agentkit.prebuilt.deep",
    "agentkit.backends",
    "agentkit.middlewares._skill",
    "agentkit.mcp._errors",
    "agentkit.mcp._elicit",
    "agentkit.integrations.agui",
    "agentkit.a2a._client",
    "agentkit.conversation._turn",
    "agentkit._turnloop",
    "agentkit.approvals",
)

_ENUM, _VALUE, _OBJECT = "enum", "value", "object"


def _restore(*args: Any) -> Any:
    """The one global a checkpoint payload names; loading resolves it to a reader's restore."""
    raise CheckpointError("agentkit.checkpoint._restore is only called while loading")


# Written into payloads as the global ("agentkit.checkpoint", "_restore"): part of the
# checkpoint format, so it never changes when this module moves (the package resolves it).
_restore.__module__ = "agentkit.checkpoint"
RESTORE_GLOBAL = ("agentkit.checkpoint", "_restore")


# -- the table of names ----------------------------------------------------------------------


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_agentkit(cls: type) -> bool:
    module = cls.__module__
    return module == "agentkit" or module.startswith("agentkit.")


class TypeTable:
    """Which classes a serializer reads and writes, under which stable names."""

    __slots__ = ("_by_name", "_by_type", "enum_tags", "field_getters", "short_tags", "specs")

    def __init__(self, allowed: Mapping[str, type]) -> None:
        self._by_name = dict(allowed)
        self._by_type = {cls: name for name, cls in allowed.items()}
        # What the encoder learnt, kept for all the checkpoints this table writes: the
        # classes written in the short form (class -> "S" + name), the one shared
        # ("S" + name, *field names) tuple per shape, and for classes with attrs' own
        # __getstate__ that tuple and a getter of the field values (see _attrs_state). All
        # depend only on the classes.
        self.short_tags: dict[type, str] = {}
        self.specs: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.field_getters: dict[type, tuple[tuple[str, ...], Callable[[Any], Any]]] = {}
        self.enum_tags: dict[type, str] = {}  # enum class -> "E" + its name

    @property
    def user_types(self) -> Mapping[str, type]:
        """The ``allowed_types`` by stable name."""
        return self._by_name

    def name_for(self, cls: type) -> str:
        """The stable name ``cls`` is written under; :class:`CheckpointError` when refused."""
        name = persisted_name(cls)
        if name is not None:
            return name
        codec = VALUE_CODECS.get(cls)
        if codec is not None:
            return codec[0]
        if cls.__module__ == "builtins" and BUILTIN_ERRORS.get(f"builtins.{cls.__name__}") is cls:
            return f"builtins.{cls.__name__}"
        name = self._by_type.get(cls)
        if name is not None:
            return name
        if _is_agentkit(cls):
            raise CheckpointError(
                f"cannot checkpoint value of type {_type_name(cls)!r}: it has no stable "
                "persisted name; agentkit types that checkpoints keep are registered with "
                "@persisted(...) in agentkit._persist"
            )
        raise CheckpointError(
            f"cannot checkpoint value of type {_type_name(cls)!r}: "
            f"add it to PickleSerializer(allowed_types=[{_type_name(cls)}])"
        )

    def type_for(self, name: str) -> type:
        """The class stored under ``name``; :class:`CheckpointError` for an unknown name."""
        found = persisted_type(name)
        if found is None and name.startswith("agentkit."):
            for module in _PERSISTED_MODULES:
                importlib.import_module(module)
            found = persisted_type(name)
        if found is None:
            value = VALUE_BY_NAME.get(name)
            found = value[0] if value is not None else BUILTIN_ERRORS.get(name)
        if found is None:
            found = self._by_name.get(name)
        if found is None:
            raise CheckpointError(
                f"it names type {name!r}, which this serializer does not allow; refusing to "
                f"load it. If it is a class of yours, pass it in "
                f"PickleSerializer(allowed_types=[...])"
            )
        return found


# -- writing ---------------------------------------------------------------------------------

_MAX_SPECS = 1024  # shapes remembered per table; a real checkpoint has a few dozen
_FUNCTION_TYPES = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
)


class Encoder(pickle.Pickler):
    """Pickles a checkpoint value, writing every class by its stable name (see the module doc)."""

    def __init__(self, file: io.BytesIO, table: TypeTable) -> None:
        super().__init__(file, protocol=PICKLE_PROTOCOL)
        self._table = table
        self._specs = table.specs
        self._short = table.short_tags
        self._getters = table.field_getters
        self._enums = table.enum_tags

    def reducer_override(self, obj: Any) -> Any:
        """Rewrite ``obj`` as a restore call, or refuse it (see the module docstring)."""
        cls = type(obj)
        fields = self._getters.get(cls)
        if fields is not None:  # attrs' own __getstate__: the same values, without the dict
            return _restore, (fields[0], *fields[1](obj))
        tag = self._enums.get(cls)
        if tag is not None:  # an enum class seen before (Role, in every message)
            return _restore, (tag, obj._value_)
        short = self._short.get(cls)
        if short is not None:  # a class seen before, with the common shape: skip the checks
            state = obj.__getstate__()
            if type(state) is dict:
                spec = self._specs.get((short, *state)) or self._spec(short, state)
                if spec is not None:
                    return _restore, (spec, *state.values())
        if obj is _restore:
            return NotImplemented
        return self._reduce_first(obj, cls)

    def _reduce_first(self, obj: Any, cls: type) -> Any:
        """The checks and the reduction of a value none of the short paths took."""
        if isinstance(obj, type):
            return _restore, ("T" + self._table.name_for(obj),)
        if isinstance(obj, types.ModuleType):
            raise CheckpointError(f"cannot checkpoint module {obj.__name__!r}")
        if isinstance(obj, _FUNCTION_TYPES):
            module = getattr(obj, "__module__", None) or "?"
            name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", repr(obj))
            raise CheckpointError(
                f"cannot checkpoint function '{module}.{name}': functions, methods and other "
                "callables are never stored in checkpoints (store data instead)"
            )
        try:
            name = self._table.name_for(cls)
        except CheckpointError as refused:
            raise _unpicklable(obj) or refused from None
        if isinstance(obj, enum.Enum):
            tag = self._enums[cls] = "E" + name
            return _restore, (tag, obj._value_)
        codec = VALUE_CODECS.get(cls)
        if codec is not None:
            return _restore, ("V" + name, codec[1](obj))
        mode, args, state, listitems, dictitems = _reduction(obj, cls, name)
        if (
            mode == "N"
            and not args
            and type(state) is dict
            and listitems is None
            and dictitems is None
        ):
            # The common case (attrs classes): field names as one tuple, which the pickler
            # writes once per class and refers back to afterwards. A class whose own
            # __getstate__ gave this shape takes the short path from now on.
            spec = self._spec("S" + name, state)
            if spec is not None:
                if _plain_getstate(cls):
                    self._remember(cls, spec)
                return _restore, (spec, *state.values())
        return _restore, (mode + name, args, state, listitems, dictitems)

    def _remember(self, cls: type, spec: tuple[str, ...]) -> None:
        """Write ``cls`` in the short form from now on, with a getter when attrs' own
        ``__getstate__`` gave ``spec``'s fields (two at least: attrgetter returns a tuple)."""
        self._short[cls] = spec[0]
        names = attrs_field_names(_class_attr(cls, "__getstate__"))
        if names is not None and len(names) >= 2 and names == spec[1:]:
            self._getters[cls] = (spec, operator.attrgetter(*names))

    def _spec(self, tag: str, state: dict[Any, Any]) -> tuple[str, ...] | None:
        """The shared ``(tag, *field names)`` tuple, or ``None`` when a key is not a plain
        field name (then the general form is written)."""
        spec = (tag, *state)
        known = self._specs.get(spec)
        if known is None:
            if not all(type(key) is str and not is_dunder(key) for key in state):
                return None
            known = spec
            if len(self._specs) < _MAX_SPECS:
                self._specs[spec] = spec
        return known


def _plain_getstate(cls: type) -> bool:
    """Whether ``__reduce_ex__(5)`` of ``cls`` is ``object``'s: new without arguments, then
    the state from ``__getstate__`` (so calling ``__getstate__`` directly is the same)."""
    found = {name: _class_attr(cls, name) for name in _REDUCE_HOOKS}
    return (
        found["__reduce_ex__"] is vars(object)["__reduce_ex__"]
        and found["__reduce__"] is vars(object)["__reduce__"]
        and found["__getnewargs_ex__"] is None
        and found["__getnewargs__"] is None
        and found["__getstate__"] is not None
    )


_REDUCE_HOOKS = (
    "__reduce_ex__",
    "__reduce__",
    "__getnewargs_ex__",
    "__getnewargs__",
    "__getstate__",
)


def _class_attr(cls: type, name: str) -> object:
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


def _reduction(obj: Any, cls: type, name: str) -> tuple[str, tuple[Any, ...], Any, Any, Any]:
    reduced = obj.__reduce_ex__(PICKLE_PROTOCOL)
    if not isinstance(reduced, tuple) or not 2 <= len(reduced) <= 6:
        raise CheckpointError(
            f"cannot checkpoint value of type {name!r}: its __reduce__ does not describe "
            "how to rebuild it from data"
        )
    func, args, state, listitems, dictitems, setter = (*reduced, None, None, None, None)[:6]
    if setter is not None:
        raise CheckpointError(f"cannot checkpoint value of type {name!r}: it uses a state setter")
    if func is copyreg.__newobj__ and args and args[0] is cls:  # type: ignore[attr-defined]
        mode, args = "N", args[1:]
    elif func is copyreg.__newobj_ex__ and args and args[0] is cls and not args[2]:  # type: ignore[attr-defined]
        mode, args = "N", tuple(args[1])
    elif func is cls:
        mode = "C"
    else:
        called = getattr(func, "__qualname__", None) or repr(func)
        raise CheckpointError(
            f"cannot checkpoint value of type {name!r}: its __reduce__ rebuilds it by calling "
            f"{called!r}; checkpoints rebuild values only through their own class"
        )
    if has_dunder_key(state):
        raise CheckpointError(
            f"cannot checkpoint value of type {name!r}: its state sets a __dunder__ "
            "attribute, which loading refuses"
        )
    listitems = None if listitems is None else list(listitems)
    dictitems = None if dictitems is None else list(dictitems)
    return mode, tuple(args), state, listitems, dictitems


# -- shared with the reader (agentkit.checkpoint._decode) ---------------------------------


def set_default_state(obj: Any, name: str, state: Any) -> None:
    """What pickle's ``BUILD`` does for a class without ``__setstate__``, on a fresh object."""
    slots: Any = None
    if type(state) is tuple and len(state) == 2:
        state, slots = state
    for part in (state, slots):
        if part is not None and (
            type(part) is not dict
            or not all(type(key) is str and not is_dunder(key) for key in part)
        ):
            raise CheckpointError(f"bad state for {name!r}")
    if state:
        try:
            target = vars(obj)
        except TypeError:
            raise CheckpointError(f"bad state for {name!r}: it has no __dict__") from None
        target.update(state)
    if slots:
        for key, value in slots.items():
            setattr(obj, key, value)


def has_dunder_key(state: Any) -> bool:
    """Whether a dict state (or a ``(dict, slots dict)`` pair) names a ``__dunder__``."""
    parts = state if type(state) is tuple and len(state) == 2 else (state,)
    return any(
        type(part) is dict and any(type(key) is str and is_dunder(key) for key in part)
        for part in parts
    )


def is_dunder(name: str) -> bool:
    """``__class__``, ``__dict__``...: never a field of a data class, never set from data."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _unpicklable(obj: Any) -> CheckpointError | None:
    """A clearer refusal for a value that no serializer could store (a lock, a socket)."""
    try:
        obj.__reduce_ex__(5)
    except Exception as error:  # what pickle itself would say: "cannot pickle '...' object"
        return CheckpointError(
            f"cannot checkpoint value of type {_type_name(type(obj))!r}: it cannot be pickled at "
            f"all ({error}); keep such objects out of session values and interrupt state "
            "(store plain data, and re-create the object when the run resumes)"
        )
    return None
