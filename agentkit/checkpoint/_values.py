"""The standard library value types checkpoints keep, and how each is rebuilt safely.

Each type is written as the arguments of a constructor of ours that checks the type (and
where it matters the size) of every argument before building the value, so no argument from
a checkpoint can make a constructor allocate or compute without bound (a ``Fraction`` is
rebuilt from two ints, never parsed from text such as ``"1e999999999"``).
"""

from __future__ import annotations

import builtins
import collections
import datetime
import decimal
import fractions
import uuid
from collections.abc import Callable
from typing import Any

from agentkit.errors import CheckpointError

__all__ = ["BUILTIN_ERRORS", "VALUE_BY_NAME", "VALUE_CODECS"]

def _check_args(args: Any, *kinds: tuple[type, ...]) -> tuple[Any, ...]:
    if not isinstance(args, tuple) or not 1 <= len(args) <= len(kinds):
        raise CheckpointError(f"bad arguments {args!r}")
    for value, allowed in zip(args, kinds, strict=False):
        if type(value) not in allowed and not (
            datetime.tzinfo in allowed and isinstance(value, datetime.tzinfo)
        ):
            raise CheckpointError(f"bad argument {value!r}")
    return args


def _moment(cls: type, size: int) -> Callable[[Any], Any]:
    def decode(args: Any) -> Any:
        state, *zone = _check_args(args, (bytes,), (type(None), datetime.tzinfo))
        if len(state) != size:
            raise CheckpointError(f"bad {cls.__name__} state")
        return cls(state, *zone)

    return decode


def _timezone(args: Any) -> datetime.timezone:
    return datetime.timezone(*_check_args(args, (datetime.timedelta,), (str,)))


def _pairs(args: Any) -> list[tuple[Any, Any]]:
    items: list[tuple[Any, Any]] = _check_args(args, (list,))[0]
    if not all(type(item) is tuple and len(item) == 2 for item in items):
        raise CheckpointError("bad OrderedDict items")
    return items


def _uuid_hex(args: Any) -> str:
    text: str = _check_args(args, (str,))[0]
    if len(text) != 32:
        raise CheckpointError("bad UUID")
    return text


def _deque(args: Any) -> collections.deque[Any]:
    items, maxlen = _check_args(args, (list,), (int, type(None)))
    return collections.deque(items, maxlen)


VALUE_CODECS: dict[type, tuple[str, Callable[[Any], tuple[Any, ...]], Callable[[Any], Any]]] = {
    complex: (
        "builtins.complex",
        lambda value: (value.real, value.imag),
        lambda args: complex(*_check_args(args, (float,), (float,))),
    ),
    datetime.date: (
        "datetime.date",
        lambda value: value.__reduce__()[1],
        _moment(datetime.date, 4),
    ),
    datetime.time: (
        "datetime.time",
        lambda value: value.__reduce__()[1],
        _moment(datetime.time, 6),
    ),
    datetime.datetime: (
        "datetime.datetime",
        lambda value: value.__reduce__()[1],
        _moment(datetime.datetime, 10),
    ),
    datetime.timedelta: (
        "datetime.timedelta",
        lambda value: (value.days, value.seconds, value.microseconds),
        lambda args: datetime.timedelta(*_check_args(args, (int,), (int,), (int,))),
    ),
    datetime.timezone: ("datetime.timezone", lambda value: value.__getinitargs__(), _timezone),
    decimal.Decimal: (
        "decimal.Decimal",
        lambda value: (str(value),),
        lambda args: decimal.Decimal(*_check_args(args, (str,))),
    ),
    fractions.Fraction: (
        "fractions.Fraction",
        lambda value: (value.numerator, value.denominator),
        lambda args: fractions.Fraction(*_check_args(args, (int,), (int,))),
    ),
    uuid.UUID: (  # as text: a 128-bit int would count as a big integer (see _scan)
        "uuid.UUID",
        lambda value: (value.hex,),
        lambda args: uuid.UUID(hex=_uuid_hex(args)),
    ),
    collections.OrderedDict: (
        "collections.OrderedDict",
        lambda value: (list(value.items()),),
        lambda args: collections.OrderedDict(_pairs(args)),
    ),
    collections.deque: ("collections.deque", lambda value: (list(value), value.maxlen), _deque),
}
VALUE_BY_NAME = {name: (cls, decode) for cls, (name, _, decode) in VALUE_CODECS.items()}
BUILTIN_ERRORS = {
    f"builtins.{name}": value
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}
