"""Checking and converting JSON arguments to annotated types (a ``cattrs`` converter), and
explaining what is wrong in words a model can act on.

Two converters are made, on first use: the strict one takes only the JSON kind the schema
names; the lax one (the default for tools) also reads numbers and booleans spelled as strings.
"""

from __future__ import annotations

import collections.abc
import json
import threading
import types
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from agentkit.tools import _lax
from agentkit.tools._schema import (
    SETS,
    NoneType,
    fixed_tuple_args,
    is_array,
    is_attrs,
    is_class,
    is_enum,
    is_literal,
    is_mapping,
    is_union,
    strip_annotated,
)

if TYPE_CHECKING:
    import cattrs

__all__ = ["Hook", "explain", "get_converter", "json_kind", "scalar_hook", "show"]

Hook = Callable[[Any, Any], Any]
"""A structuring hook: ``hook(json_value, annotation) -> converted value``."""


class _Invalid(Exception):
    """A JSON value is not what the annotation accepts (raised by the converter's hooks)."""

    def __init__(self, expected: str, value: Any) -> None:
        super().__init__(f"must be {expected} (got {show(value)})")
        self.expected = expected
        self.value = value


_converters: dict[bool, cattrs.Converter] = {}  # by strictness
_converter_lock = threading.Lock()


def get_converter(strict: bool) -> cattrs.Converter:
    """Return the strict or the lax converter shared by all function tools, made on first use
    (cattrs is heavy)."""
    converter = _converters.get(strict)
    if converter is None:
        with _converter_lock:
            if True not in _converters:
                _converters[True] = _make_converter(None)
            if not strict and False not in _converters:
                _converters[False] = _make_converter(_converters[True])
            converter = _converters[strict]
    return converter


def _make_converter(strict: cattrs.Converter | None) -> cattrs.Converter:
    """A cattrs converter that checks JSON values and reports where they are wrong.

    Given no ``strict`` converter it is the strict one. Given one it is lax: scalars also
    accept strings that spell them (see :mod:`agentkit.tools._lax`), and a union first tries
    the strict converter's hook, so coercion only applies when no member takes the value as
    it is (``"2"`` stays a string in ``int | str``).

    Scalars are registered by class (cattrs dispatches classes first, by MRO); their hooks pass
    enums with a ``str``/``int``/``float`` mixin on to the enum hook. Containers and attrs
    classes reuse cattrs' generated hooks behind a check of the JSON kind, because cattrs would
    happily turn a string into a list of characters.
    """
    import cattrs
    from cattrs.cols import (
        homogenous_tuple_structure_factory,
        list_structure_factory,
        mapping_structure_factory,
    )
    from cattrs.errors import IterableValidationError, IterableValidationNote
    from cattrs.gen import make_dict_structure_fn

    converter = cattrs.Converter(detailed_validation=True, forbid_extra_keys=False)
    lax = strict is not None
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(int, _lax_int if lax else _structure_int)
    converter.register_structure_hook(float, _lax_float if lax else _structure_float)
    converter.register_structure_hook(bool, _lax_bool if lax else _structure_bool)
    converter.register_structure_hook(NoneType, _structure_none)
    converter.register_structure_hook_func(is_enum, _structure_enum)

    def literal_hook(tp: Any) -> Hook:
        choices = typing.get_args(tp)
        expected = _describe(tp)

        def structure_literal(value: Any, _: Any) -> Any:
            for choice in choices:
                if _same_json(choice, value):
                    return choice
            raise _Invalid(expected, value)

        return structure_literal

    def union_hook(tp: Any, converter: cattrs.Converter) -> Hook:
        members = _union_members(tp)
        # A float stays a float when the union has a float member: 3.0 is not taken as the
        # int 3 in `int | float` (the int member comes first).
        has_float = float in members
        handlers = [
            (member, converter.get_structure_hook(member), _union_rank(member) == _STRUCTURED)
            for member in members
        ]
        expected = _describe(tp)

        def structure_union(value: Any, _: Any) -> Any:
            nested: list[Exception] = []
            best: Any = _MISSING
            best_score = (-1, 0)
            for member, handler, structured in handlers:
                if best is not _MISSING and not structured:
                    break
                if member is int and has_float and type(value) is float:
                    continue
                try:
                    result = handler(value, member)
                except _Invalid:
                    continue  # wrong JSON kind for this member
                except Exception as exc:
                    nested.append(exc)
                    continue
                if not structured:
                    return result
                score = _match_score(member, value)
                if score > best_score:
                    best, best_score = result, score
            if best is not _MISSING:
                return best
            if len(nested) == 1:
                # Only one member took this kind of value: its detailed error says the most.
                raise nested[0]
            raise _Invalid(expected, value)

        if strict is None:
            return structure_union
        as_it_is = strict.get_structure_hook(tp)

        def structure_lax_union(value: Any, cl: Any) -> Any:
            try:
                return as_it_is(value, cl)
            except Exception:
                return structure_union(value, cl)

        return structure_lax_union

    def array_hook(tp: Any, converter: cattrs.Converter) -> Hook:
        fixed = fixed_tuple_args(tp)
        if fixed is not None:
            return fixed_tuple_hook(fixed, converter)
        origin = typing.get_origin(tp) or tp
        args = typing.get_args(tp)
        item_type = args[0] if args else Any
        inner: Hook
        if origin is tuple:
            inner = homogenous_tuple_structure_factory(_alias(tuple, item_type, ...), converter)
        elif origin in SETS:
            as_list = list_structure_factory(_alias(list, item_type), converter)
            make = set if origin in (set, collections.abc.MutableSet) else frozenset

            def inner(value: Any, _: Any) -> Any:
                return make(as_list(value, list))

        else:
            inner = list_structure_factory(_alias(list, item_type), converter)

        def structure_array(value: Any, cl: Any) -> Any:
            if type(value) is not list:
                raise _Invalid("an array", value)
            return inner(value, cl)

        return structure_array

    def fixed_tuple_hook(item_types: tuple[Any, ...], converter: cattrs.Converter) -> Hook:
        handlers = [(item, converter.get_structure_hook(item)) for item in item_types]
        size = len(handlers)
        expected = f"an array of {size} items"

        def structure_tuple(value: Any, _: Any) -> Any:
            if type(value) is not list or len(value) != size:
                raise _Invalid(expected, value)
            result = []
            errors: list[Exception] = []
            for index, ((item_type, handler), item) in enumerate(zip(handlers, value, strict=True)):
                try:
                    result.append(handler(item, item_type))
                except Exception as exc:
                    note = IterableValidationNote(
                        f"Structuring tuple @ index {index}", index, item_type
                    )
                    exc.__dict__.setdefault("__notes__", []).append(note)
                    errors.append(exc)
            if errors:
                raise IterableValidationError("While structuring a tuple", errors, tuple)
            return tuple(result)

        return structure_tuple

    def mapping_hook(tp: Any, converter: cattrs.Converter) -> Hook:
        args = typing.get_args(tp)
        value_type = args[1] if len(args) == 2 else Any
        inner: Hook = mapping_structure_factory(_alias(dict, str, value_type), converter)

        def structure_mapping(value: Any, cl: Any) -> Any:
            if type(value) is not dict:
                raise _Invalid("an object", value)
            return inner(value, cl)

        return structure_mapping

    def attrs_hook(tp: Any, converter: cattrs.Converter) -> Hook:
        inner = make_dict_structure_fn(tp, converter)

        def structure_attrs(value: Any, cl: Any) -> Any:
            if type(value) is not dict:
                raise _Invalid("an object", value)
            return inner(value, cl)

        return structure_attrs

    # Factories registered later take precedence over cattrs' own.
    converter.register_structure_hook_factory(is_literal, literal_hook)
    converter.register_structure_hook_factory(is_union, union_hook)
    converter.register_structure_hook_factory(is_array, array_hook)
    converter.register_structure_hook_factory(is_mapping, mapping_hook)
    converter.register_structure_hook_factory(is_attrs, attrs_hook)
    return converter


def scalar_hook(annotation: Any, strict: bool) -> Hook | None:
    """The hook of a bare ``str``/``int``/``float``/``bool``/``None`` parameter, the same as the
    converter's, without making the converter: a tool with only such parameters never imports
    cattrs. ``None`` for any other annotation."""
    if annotation is str:
        return _structure_str
    if annotation is int:
        return _structure_int if strict else _lax_int
    if annotation is float:
        return _structure_float if strict else _lax_float
    if annotation is bool:
        return _structure_bool if strict else _lax_bool
    if annotation is NoneType or annotation is None:
        return _structure_none
    return None


def _alias(origin: type, *args: Any) -> Any:
    """``origin[args]`` for type arguments known only at run time."""
    return types.GenericAlias(origin, args)


# Union members are tried from the most specific kind to the least. The order cannot be the
# declared one: `A | B == B | A`, so cattrs caches one hook for both spellings.
_STRUCTURED = 6


def _union_rank(tp: Any) -> int:
    tp = strip_annotated(tp)
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:
        return _union_rank(supertype)
    if is_literal(tp) or is_enum(tp):
        return 0
    ranks = {bool: 1, int: 2, float: 3, str: 4, NoneType: 7}
    if is_class(tp) and tp in ranks:
        return ranks[tp]
    if tp is Any:
        return 8
    return _STRUCTURED  # arrays, objects, attrs classes


def _union_members(tp: Any) -> list[Any]:
    """The members of a union, most specific first, in an order that does not depend on how
    the union was spelled."""
    return sorted(typing.get_args(tp), key=lambda member: (_union_rank(member), repr(member)))


def _match_score(tp: Any, value: Any) -> tuple[int, int]:
    """How well a JSON object fits an attrs class: most of its keys are fields, fewest fields
    left to their defaults."""
    tp = strip_annotated(tp)
    if type(value) is dict and is_attrs(tp):
        fields = attrs.fields(tp)
        matched = sum(1 for field in fields if field.name in value)
        return matched, matched - len(fields)
    return 0, 0


def _structure_str(value: Any, cl: Any) -> Any:
    if cl is not str:
        return _structure_enum(value, cl)
    if isinstance(value, str):
        return value
    raise _Invalid("a string", value)


def _structure_int(value: Any, cl: Any) -> Any:
    if cl is not int:
        return _structure_enum(value, cl)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _Invalid("an integer", value)


def _structure_float(value: Any, cl: Any) -> Any:
    if cl is not float:
        return _structure_enum(value, cl)
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise _Invalid("a number in the range of a float", value) from None
    raise _Invalid("a number", value)


def _lax_int(value: Any, cl: Any) -> Any:
    return _lax_scalar(_structure_int, _lax.number, int, value, cl)


def _lax_float(value: Any, cl: Any) -> Any:
    return _lax_scalar(_structure_float, _lax.number, float, value, cl)


def _lax_bool(value: Any, cl: Any) -> Any:
    return _lax_scalar(_structure_bool, _lax.boolean, bool, value, cl)


def _lax_scalar(
    structure: Hook, read: Callable[[str, Any], Any], scalar: type, value: Any, cl: Any
) -> Any:
    """``structure(value)``; when that fails on a string, the value the string spells (the
    error keeps naming what the model sent)."""
    try:
        return structure(value, cl)
    except _Invalid:
        spelled = read(value, _MISSING) if cl is scalar and type(value) is str else _MISSING
        if spelled is _MISSING:
            raise
        try:
            return structure(spelled, cl)
        except _Invalid:
            pass
        raise


def _structure_bool(value: Any, _: Any) -> Any:
    if value is True or value is False:
        return value
    raise _Invalid("a boolean", value)


def _structure_none(value: Any, _: Any) -> Any:
    if value is None:
        return None
    raise _Invalid("null", value)


def _structure_enum(value: Any, cl: Any) -> Any:
    for member in cl:
        if _same_json(member.value, value):
            return member
    raise _Invalid(_describe(cl), value)


def _same_json(expected: Any, value: Any) -> bool:
    """Whether a JSON value equals a Literal/enum value (``True`` is not ``1``; ``1.0`` is)."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return expected is value
    if isinstance(expected, str) != isinstance(value, str):
        return False
    return bool(expected == value)


def _describe(tp: Any) -> str:
    """What a JSON value of type ``tp`` is, for error messages: 'an integer', 'one of ...'."""
    tp = strip_annotated(tp)
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:
        return _describe(supertype)
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
        for member in _union_members(tp):
            text = _describe(member)
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


_Segment = tuple[str, Any]  # ("attr", name) | ("key", dict key) | ("index", position)


def explain(exc: BaseException, path: list[_Segment], data: Any, problems: list[str]) -> None:
    """Turn a structuring error (a tree of cattrs validation errors) into messages for the model."""
    where = _format_path(path)
    if isinstance(exc, _Invalid):
        problems.append(f"'{where}' must be {exc.expected} (got {show(exc.value)})")
        return
    from cattrs.errors import AttributeValidationNote, BaseValidationError, IterableValidationNote

    if isinstance(exc, BaseValidationError):
        for sub in exc.exceptions:
            segment: _Segment | None = None
            for note in getattr(sub, "__notes__", ()):
                if isinstance(note, AttributeValidationNote):
                    segment = ("attr", note.name)
                elif isinstance(note, IterableValidationNote):
                    segment = ("key" if isinstance(note.index, str) else "index", note.index)
            explain(sub, path if segment is None else [*path, segment], data, problems)
    elif isinstance(exc, KeyError) and _is_missing(data, path):
        problems.append(f"'{where}' is required (got {show(_lookup(data, path[:-1]))})")
    else:
        problems.append(f"'{where}' is not valid: {str(exc) or type(exc).__name__}")


def _format_path(path: list[_Segment]) -> str:
    text = ""
    for kind, key in path:
        if kind == "index":
            text += f"[{key}]"
        elif kind == "key":
            text += f"[{json.dumps(key, ensure_ascii=False)}]"
        else:
            text += f".{key}" if text else str(key)
    return text


_MISSING = object()


def _lookup(data: Any, path: list[_Segment]) -> Any:
    for kind, key in path:
        found = (
            type(data) is list and 0 <= key < len(data)
            if kind == "index"
            else type(data) is dict and key in data
        )
        if not found:
            return _MISSING
        data = data[key]
    return data


def _is_missing(data: Any, path: list[_Segment]) -> bool:
    if not path or path[-1][0] != "attr":
        return False
    parent = _lookup(data, path[:-1])
    return type(parent) is dict and path[-1][1] not in parent


def show(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null"
