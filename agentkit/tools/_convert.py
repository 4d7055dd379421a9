"""Checking and converting JSON arguments to annotated types (a ``cattrs`` converter).

Two converters are made, on first use: the strict one takes only the JSON kind the schema
names; the lax one (the default for tools) also reads numbers and booleans spelled as strings.
The scalar hooks and the descriptions of types are in :mod:`agentkit.tools._scalar_hooks`;
turning a failed conversion into messages for the model is :mod:`agentkit.tools._explain`.
Both are re-exported here (``Hook``, ``explain``, ``json_kind``, ``scalar_hook``, ``show``).
"""

from __future__ import annotations

import collections.abc
import threading
import types
import typing
from typing import TYPE_CHECKING, Any

import attrs

from agentkit.tools._explain import explain
from agentkit.tools._pydantic import is_pydantic_model, model_field_names
from agentkit.tools._scalar_hooks import (
    MISSING,
    STRUCTURED,
    Hook,
    Invalid,
    describe,
    json_kind,
    lax_bool,
    lax_float,
    lax_int,
    same_json,
    scalar_hook,
    show,
    structure_bool,
    structure_enum,
    structure_float,
    structure_int,
    structure_none,
    structure_str,
    union_members,
    union_rank,
)
from agentkit.tools._schema import (
    SETS,
    NoneType,
    fixed_tuple_args,
    is_array,
    is_attrs,
    is_enum,
    is_literal,
    is_mapping,
    is_union,
    strip_annotated,
)

if TYPE_CHECKING:
    import cattrs

__all__ = ["Hook", "explain", "get_converter", "json_kind", "scalar_hook", "show"]


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

    converter = cattrs.Converter(detailed_validation=True, forbid_extra_keys=False)
    lax = strict is not None
    converter.register_structure_hook(str, structure_str)
    converter.register_structure_hook(int, lax_int if lax else structure_int)
    converter.register_structure_hook(float, lax_float if lax else structure_float)
    converter.register_structure_hook(bool, lax_bool if lax else structure_bool)
    converter.register_structure_hook(NoneType, structure_none)
    converter.register_structure_hook_func(is_enum, structure_enum)

    def union_hook(tp: Any, converter: cattrs.Converter) -> Hook:
        return _union_hook(tp, converter, strict)

    # Factories registered later take precedence over cattrs' own.
    converter.register_structure_hook_factory(is_literal, _literal_hook)
    converter.register_structure_hook_factory(is_union, union_hook)
    converter.register_structure_hook_factory(is_array, _array_hook)
    converter.register_structure_hook_factory(is_mapping, _mapping_hook)
    converter.register_structure_hook_factory(is_attrs, _attrs_hook)
    converter.register_structure_hook_factory(is_pydantic_model, _pydantic_hook)
    return converter


def _literal_hook(tp: Any) -> Hook:
    """The hook for ``Literal[...]``: the choice equal to the value as JSON (``1`` is not
    ``True``)."""
    choices = typing.get_args(tp)
    expected = describe(tp)

    def structure_literal(value: Any, _: Any) -> Any:
        for choice in choices:
            if same_json(choice, value):
                return choice
        raise Invalid(expected, value)

    return structure_literal


def _union_hook(tp: Any, converter: cattrs.Converter, strict: cattrs.Converter | None) -> Hook:
    """The hook for a union; in the lax converter it tries the strict converter's first."""
    structure_union = _union_members_hook(tp, converter)
    if strict is None:
        return structure_union
    as_it_is = strict.get_structure_hook(tp)

    def structure_lax_union(value: Any, cl: Any) -> Any:
        try:
            return as_it_is(value, cl)
        except Exception:
            return structure_union(value, cl)

    return structure_lax_union


def _union_members_hook(tp: Any, converter: cattrs.Converter) -> Hook:
    """Try a union's members in rank order: the first scalar member that takes the value
    wins; among structured members (attrs classes), the one the JSON object fits best."""
    members = union_members(tp)
    # A float stays a float when the union has a float member: 3.0 is not taken as the
    # int 3 in `int | float` (the int member comes first).
    has_float = float in members
    handlers = [
        (member, converter.get_structure_hook(member), union_rank(member) == STRUCTURED)
        for member in members
    ]
    expected = describe(tp)

    def structure_union(value: Any, _: Any) -> Any:
        nested: list[Exception] = []
        best: Any = MISSING
        best_score = (-1, 0)
        for member, handler, structured in handlers:
            if best is not MISSING and not structured:
                break
            if member is int and has_float and type(value) is float:
                continue
            try:
                result = handler(value, member)
            except Invalid:
                continue  # wrong JSON kind for this member
            except Exception as exc:
                nested.append(exc)
                continue
            if not structured:
                return result
            score = _match_score(member, value)
            if score > best_score:
                best, best_score = result, score
        if best is not MISSING:
            return best
        if len(nested) == 1:
            # Only one member took this kind of value: its detailed error says the most.
            raise nested[0]
        raise Invalid(expected, value)

    return structure_union


def _array_hook(tp: Any, converter: cattrs.Converter) -> Hook:
    """The hook for lists, sets, sequences and tuples: a JSON array, then cattrs' own hook."""
    from cattrs.cols import homogenous_tuple_structure_factory, list_structure_factory

    fixed = fixed_tuple_args(tp)
    if fixed is not None:
        return _fixed_tuple_hook(fixed, converter)
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
            raise Invalid("an array", value)
        return inner(value, cl)

    return structure_array


def _fixed_tuple_hook(item_types: tuple[Any, ...], converter: cattrs.Converter) -> Hook:
    """The hook for ``tuple[X, Y]``: an array of exactly that many items, each converted;
    the errors of all items are reported together, as cattrs does for lists."""
    from cattrs.errors import IterableValidationError, IterableValidationNote

    handlers = [(item, converter.get_structure_hook(item)) for item in item_types]
    size = len(handlers)
    expected = f"an array of {size} items"

    def structure_tuple(value: Any, _: Any) -> Any:
        if type(value) is not list or len(value) != size:
            raise Invalid(expected, value)
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


def _mapping_hook(tp: Any, converter: cattrs.Converter) -> Hook:
    """The hook for dicts and mappings: a JSON object, then cattrs' own hook."""
    from cattrs.cols import mapping_structure_factory

    args = typing.get_args(tp)
    value_type = args[1] if len(args) == 2 else Any
    inner: Hook = mapping_structure_factory(_alias(dict, str, value_type), converter)

    def structure_mapping(value: Any, cl: Any) -> Any:
        if type(value) is not dict:
            raise Invalid("an object", value)
        return inner(value, cl)

    return structure_mapping


def _attrs_hook(tp: Any, converter: cattrs.Converter) -> Hook:
    """The hook for attrs classes: a JSON object, then cattrs' generated hook."""
    from cattrs.gen import make_dict_structure_fn

    inner = make_dict_structure_fn(tp, converter)

    def structure_attrs(value: Any, cl: Any) -> Any:
        if type(value) is not dict:
            raise Invalid("an object", value)
        return inner(value, cl)

    return structure_attrs


def _pydantic_hook(tp: Any) -> Hook:
    """The hook for pydantic models: a JSON object, then the model's own validation (its
    ``ValidationError`` is explained field by field)."""

    def structure_model(value: Any, _: Any) -> Any:
        if type(value) is not dict:
            raise Invalid("an object", value)
        return tp.model_validate(value)

    return structure_model


def _alias(origin: type, *args: Any) -> Any:
    """``origin[args]`` for type arguments known only at run time."""
    return types.GenericAlias(origin, args)


def _match_score(tp: Any, value: Any) -> tuple[int, int]:
    """How well a JSON object fits an attrs class or pydantic model: most of its keys are
    fields, fewest fields left to their defaults."""
    tp = strip_annotated(tp)
    if type(value) is dict and (is_attrs(tp) or is_pydantic_model(tp)):
        names = [field.name for field in attrs.fields(tp)] if is_attrs(tp) else (
            model_field_names(tp)
        )
        matched = sum(1 for name in names if name in value)
        return matched, matched - len(names)
    return 0, 0
