"""Values: objects that never change once made, and say so when someone tries.

:class:`BuiltValue` is the same contract for a plain class (a model, an agent): its public
attributes are settled by ``__init__``, a later write raises, and ``replace(**changes)``
builds a changed copy from the constructor's arguments.

``@refuse_writes(hint)`` goes on top of an ``attrs.frozen`` class (or any class whose ``__init__``
sets its attributes with ``object.__setattr__``): a later write or delete raises
:class:`~agentkit.errors.FrozenError` naming the attribute and how to make a changed copy,
instead of attrs' bare "can't set attribute" (or, for a plain class, silently taking a
setting the object never reads again).

:class:`ReadOnlyDict` is the mapping such values hold: a ``dict`` (JSON, ``==``,
``isinstance`` and ``dict(...)`` work as before) that refuses writes.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, TypeVar

from agentkit.errors import AgentKitTypeError, FrozenError

__all__ = ["NO_EXTRA", "BuiltValue", "ReadOnlyDict", "read_only", "refuse_writes"]

_T = TypeVar("_T", bound=type)


def refuse_writes(hint: str) -> Callable[[_T], _T]:
    """Make writes to the instances of the decorated class raise a :class:`FrozenError`.

    ``hint`` says how to get a changed copy; ``{name}`` in it is the attribute's name and
    ``{var}`` a lower-case variable name for the object (``"attrs.evolve({var}, {name}=...)"``).
    """

    def decorate(cls: _T) -> _T:
        kind = cls.__name__
        var = kind.lower()

        def refuse(self: Any, name: str, *_: Any) -> NoReturn:
            raise FrozenError(
                f"cannot set {kind}.{name}: a {kind} is a value and never changes once made "
                f"(a reader's edit would rewrite what a run saw). Make a changed copy: "
                + hint.format(name=name, var=var)
            )

        cls.__setattr__ = refuse  # type: ignore[method-assign]
        cls.__delattr__ = refuse  # type: ignore[method-assign,assignment]
        return cls

    return decorate


class ReadOnlyDict(dict[str, Any]):
    """A ``dict`` that refuses writes: the ``extra`` of a message or a tool call.

    ``dict(d)`` or ``{**d}`` is a plain, writable copy. Pickled (and deep-copied) as a plain
    ``dict``: its owner makes it read-only again when it is loaded.
    """

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise FrozenError(
            "this dict belongs to a value (a message or a tool call) and cannot be changed; "
            "make a changed copy, e.g. attrs.evolve(message, extra={**message.extra, 'key': 1})"
        )

    def __setitem__(self, *args: Any) -> NoReturn:
        self._refuse()

    def __delitem__(self, *args: Any) -> NoReturn:
        self._refuse()

    def __ior__(self, *args: Any) -> NoReturn:  # type: ignore[misc]
        self._refuse()

    def clear(self) -> NoReturn:
        self._refuse()

    def pop(self, *args: Any) -> NoReturn:
        self._refuse()

    def popitem(self) -> NoReturn:
        self._refuse()

    def setdefault(self, *args: Any) -> NoReturn:
        self._refuse()

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def __repr__(self) -> str:
        return dict.__repr__(self)


NO_EXTRA = ReadOnlyDict()  # the empty one every value without extra fields shares (nobody writes)


def read_only(mapping: Mapping[str, Any]) -> ReadOnlyDict:
    """``mapping`` as a :class:`ReadOnlyDict` (itself when it is one already)."""
    if type(mapping) is ReadOnlyDict:
        return mapping
    return ReadOnlyDict(mapping)


class BuiltValue:
    """Mixin: an object that is a value once its ``__init__`` returned.

    A write to a public attribute once ``__init__`` returned raises :class:`FrozenError`
    saying to use :meth:`replace` (``__init__`` itself sets them; private attributes stay the
    object's own business: caches, a copy ``with_tools`` binds). The arguments ``__init__``
    was called with are kept, so :meth:`replace` makes the object again with some changed.
    """

    __slots__ = ()
    _arguments: tuple[tuple[Any, ...], dict[str, Any]]  # __init__'s, as called (bound lazily)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:
            cls.__init__ = _recording(init)  # type: ignore[method-assign]

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_") and getattr(self, "_arguments", None) is not None:
            self._refuse(name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if not name.startswith("_") and getattr(self, "_arguments", None) is not None:
            self._refuse(name)
        object.__delattr__(self, name)

    def _refuse(self, name: str) -> NoReturn:
        kind = type(self).__name__
        raise FrozenError(
            f"cannot set {kind}.{name}: {kind} objects are values once built (a run never "
            f"reads half-changed settings, and a setting it does not read is not taken "
            f"silently). "
            f"Make a changed copy: .replace({name}=...)"
        )

    def replace(self, **changes: Any) -> Any:
        """Return a new object made with this one's constructor arguments, ``changes`` applied.

        Raises:
            AgentKitTypeError: a key is not an argument of the constructor.
        """
        init = type(self).__init__
        signature = inspect.signature(init)  # the wrapped __init__'s, self included
        parameters = signature.parameters
        args, kwargs = self._arguments
        arguments: dict[str, Any] = {}
        for name, value in list(signature.bind(self, *args, **kwargs).arguments.items())[1:]:
            kind = parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                arguments.update(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                raise AgentKitTypeError(f"{type(self).__name__}: *args cannot be replaced")
            else:
                arguments[name] = value
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        unknown = sorted(set(changes) - set(arguments) - set(parameters))
        if unknown and not takes_any:
            raise AgentKitTypeError(
                f"{type(self).__name__}.replace() got unknown argument(s) "
                f"{', '.join(map(repr, unknown))}; its arguments are: "
                f"{', '.join(name for name in parameters if name != 'self')}"
            )
        made = type(self)(**{**arguments, **changes})
        tools = getattr(self, "tools", None)
        if tools and "tools" not in changes and hasattr(made, "with_tools"):
            made = made.with_tools(tools)  # a bound model stays bound to its tools
        return made


def _recording(init: Callable[..., None]) -> Callable[..., None]:
    """``init``, keeping the arguments of the outermost call (see :class:`BuiltValue`): as
    called, bound to their names only by a ``replace`` (a construction pays two stores)."""

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if type(self).__init__ is __init__:  # the object's own class: the outermost call
            object.__setattr__(self, "_arguments", (args, kwargs))

    return __init__
