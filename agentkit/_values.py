"""Values: objects that never change once made, and say so when someone tries.

``@refuse_writes(hint)`` goes on top of an ``attrs.frozen`` class (or any class whose ``__init__``
sets its attributes with ``object.__setattr__``): a later write or delete raises
:class:`~agentkit.errors.FrozenError` naming the attribute and how to make a changed copy,
instead of attrs' bare "can't set attribute" (or, for a plain class, silently taking a
setting the object never reads again).

:class:`ReadOnlyDict` is the mapping such values hold: a ``dict`` (JSON, ``==``,
``isinstance`` and ``dict(...)`` work as before) that refuses writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from agentkit.errors import FrozenError

__all__ = ["NO_EXTRA", "ReadOnlyDict", "read_only", "refuse_writes"]

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


def read_only(mapping: Any) -> ReadOnlyDict:
    """``mapping`` as a :class:`ReadOnlyDict` (itself when it is one already)."""
    if type(mapping) is ReadOnlyDict:
        return mapping
    return ReadOnlyDict(mapping)
