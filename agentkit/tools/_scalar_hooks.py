"""The scalar hooks of argument conversion, and how JSON values and types are described.

Framework-internal, used by :mod:`agentkit.tools._convert`. The hooks of bare scalars are
usable without ``cattrs`` (:func:`scalar_hook`); a wrong value raises :class:`Invalid`, which
:func:`~agentkit.tools._explain.explain` turns into a message for the model.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from agentkit.tools import _lax
from agentkit.tools._schema import (
    NoneType,
    fixed_tuple_args,
    is_array,
    is_class,
    is_enum,
    is_literal,
    is_union,
    strip_annotated,
)

Hook = Callable[[Any, Any], Any]
"""A structuring hook: ``hook(json_value, annotation) -> converted value``."""

MISSING = object()
"""Marks a value that is not there (distinct from ``None``, a JSON null)."""


class Invalid(Exception):
    """A JSON value is not what the annotation accepts (raised by the converter's hooks)."""

    def __init__(self, expected: str, value: Any) -> None:
        super().__init__(f"must be {expected} (got {show(value)})")
        self.expected = expected
        self.value = value


def scalar_hook(annotation: Any, strict: bool) -> Hook | None:
    """The hook of a bare ``str``/``int``/``float``/``bool``/``None`` parameter, the same as the
    converter's, without making the converter: a tool with only such parameters never imports
    cattrs. ``None`` for any other annotation."""
    if annotation is str:
        return structure_str
    if annotation is int:
        return structure_int if strict else lax_int
    if annotation is float:
        return structure_float if strict else lax_float
    if annotation is bool:
        return structure_bool if strict else lax_bool
    if annotation is NoneType or annotation is None:
        return structure_none
    return None


# Union members are tried from the most specific kind to the least. The order cannot be the
# declared one: `A | B == B | A`, so cattrs caches one hook for both spellings.
STRUCTURED = 6


def union_rank(tp: Any) -> int:
    """Where ``tp`` comes in the order union members are tried (most specific first)."""
    tp = strip_annotated(tp)
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:
        return union_rank(supertype)
    if is_literal(tp) or is_enum(tp):
        return 0
    ranks = {bool: 1, int: 2, float: 3, str: 4, NoneType: 7}
    if is_class(tp) and tp in ranks:
        return ranks[tp]
    if tp is Any:
        return 8
    return STRUCTURED  # arrays, objects, attrs classes


def union_members(tp: Any) -> list[Any]:
    """The members of a union, most specific first, in an order that does not depend on how
    the union was spelled."""
    return sorted(typing.get_args(tp), key=lambda member: (union_rank(member), repr(member)))


def structure_str(value: Any, cl: Any) -> Any:
    if cl is not str:
        return structure_enum(value, cl)
    if isinstance(value, str):
        return value
    raise Invalid("a string", value)


def structure_int(value: Any, cl: Any) -> Any:
    if cl is not int:
        return structure_enum(value, cl)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise Invalid("an integer", value)


def structure_float(value: Any, cl: Any) -> Any:
    if cl is not float:
        return structure_enum(value, cl)
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise Invalid("a number in the range of a float", value) from None
    raise Invalid("a number", value)


def lax_int(value: Any, cl: Any) -> Any:
    return _lax_scalar(structure_int, _lax.number, int, value, cl)


def lax_float(value: Any, cl: Any) -> Any:
    return _lax_scalar(structure_float, _lax.number, float, value, cl)


def lax_bool(value: Any, cl: Any) -> Any:
    return _lax_scalar(structure_bool, _lax.boolean, bool, value, cl)


def _lax_scalar(
    structure: Hook, read: Callable[[str, Any], Any], scalar: type, value: Any, cl: Any
) -> Any:
    """``structure(value)``; when that fails on a string, the value the string spells (the
    error keeps naming what the model sent)."""
    try:
        return structure(value, cl)
    except Invalid:
        spelled = read(value, MISSING) if cl is scalar and type(value) is str else MISSING
        if spelled is MISSING:
            raise
        try:
            return structure(spelled, cl)
        except Invalid:
            pass
        raise


def structure_bool(value: Any, _: Any) -> Any:
    if value is True or value is False:
        return value
    raise Invalid("a boolean", value)


def structure_none(value: Any, _: Any) -> Any:
    if value is None:
        return None
    raise Invalid("null", value)


def structure_enum(value: Any, cl: Any) -> Any:
    for member in cl:
        if same_json(member.value, value):
            return member
    raise Invalid(describe(cl), value)


def same_json(expected: Any, value: Any) -> bool:
    """Whether a JSON value equals a Literal/enum value (``True`` is not ``1``; ``1.0`` is)."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return expected is value
    if isinstance(expected, str) != isinstance(value, str):
        return False
    return bool(expected == value)


def describe(tp: Any) -> str:
    """What a JSON value of type ``tp`` is, for error messages: 'an integer', 'one of ...'."""
    tp = strip_annotated(tp)
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:
        return describe(supertype)
    simple = {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        NoneType: "null",
        None: "null",
        Any: "any JSON value",
    }
    if tp in simple:
        return simple[tp]
    if is_enum(tp):
        return _one_of([member.value for member in tp])
    if is_literal(tp):
        return _one_of(list(typing.get_args(tp)))
    if is_union(tp):
        alternatives: list[str] = []
        for member in union_members(tp):
            text = describe(member)
            if text not in alternatives:
                alternatives.append(text)
        if len(alternatives) == 1:
            return alternatives[0]
        return f"{', '.join(alternatives[:-1])} or {alternatives[-1]}"
    fixed = fixed_tuple_args(tp)
    if fixed is not None:
        return f"an array of {len(fixed)} items"
    if is_array(tp):
        return "an array"
    return "an object"


def _one_of(values: list[Any]) -> str:
    if len(values) == 1:
        return repr(values[0])
    return "one of " + ", ".join(repr(value) for value in values)


def show(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters, for error messages."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def json_kind(value: Any) -> str:
    """The JSON kind of a parsed value that is not an object: 'an array', 'a string'..."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null"
