"""JSON Schema for Python annotations, and the type tests argument conversion shares.

Used by :mod:`agentkit.tools.function` when a tool is made; see its docstring for the table of
supported annotations.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

import attrs

from agentkit._jsonable import dumps as json_dumps
from agentkit.tools._pydantic import is_pydantic_model, is_pydantic_v1_model, model_schema

__all__ = [
    "SETS",
    "NoneType",
    "Unsupported",
    "describe_property",
    "fixed_tuple_args",
    "is_array",
    "is_attrs",
    "is_class",
    "is_enum",
    "is_literal",
    "is_mapping",
    "is_union",
    "parse_docstring",
    "record_default",
    "schema_of",
    "strip_annotated",
    "type_name",
]

NoneType = type(None)


class Unsupported(Exception):
    """An annotation that has no JSON form; the message says which part and why."""


_ARRAYS: frozenset[Any] = frozenset(
    {
        list,
        tuple,
        set,
        frozenset,
        collections.abc.Sequence,
        collections.abc.MutableSequence,
        collections.abc.Set,
        collections.abc.MutableSet,
    }
)
SETS: frozenset[Any] = frozenset({set, frozenset, collections.abc.Set, collections.abc.MutableSet})
_MAPPINGS: frozenset[Any] = frozenset(
    {dict, collections.abc.Mapping, collections.abc.MutableMapping}
)
_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    NoneType: "null",
}


def is_class(tp: Any) -> bool:
    # list[int] passes isinstance(..., type) on Python 3.10; it is no class here.
    return isinstance(tp, type) and not isinstance(tp, types.GenericAlias)


def _bare(tp: Any) -> Any:
    """``tp`` without its type arguments: ``list`` for ``list[int]``."""
    origin = typing.get_origin(tp)
    return tp if origin is None else origin


def is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is Literal


def is_enum(tp: Any) -> bool:
    return isinstance(tp, enum.EnumMeta)


def is_attrs(tp: Any) -> bool:
    return is_class(tp) and attrs.has(tp)


def is_array(tp: Any) -> bool:
    return is_class(_bare(tp)) and _bare(tp) in _ARRAYS


def is_mapping(tp: Any) -> bool:
    return is_class(_bare(tp)) and _bare(tp) in _MAPPINGS


def strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def fixed_tuple_args(tp: Any) -> tuple[Any, ...] | None:
    """The element types of ``tuple[X, Y]``; ``None`` for ``tuple[X, ...]`` and bare tuples."""
    if typing.get_origin(tp) is not tuple:
        return None
    args = typing.get_args(tp)
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        return None
    return args


def schema_of(
    tp: Any, localns: Mapping[str, Any] | None, seen: tuple[type, ...]
) -> dict[str, Any]:
    """Return a fresh JSON Schema for ``tp``; raise :class:`Unsupported` when it has none."""
    if typing.get_origin(tp) is typing.Annotated:
        return _annotated_schema(tp, localns, seen)
    simple = _simple_schema(tp)
    if simple is not None:
        return simple
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:  # typing.NewType
        return schema_of(supertype, localns, seen)
    if is_enum(tp) or is_literal(tp):
        return _choice_schema(tp)
    if is_union(tp):
        return {"anyOf": [schema_of(member, localns, seen) for member in typing.get_args(tp)]}
    if is_attrs(tp):
        return _attrs_schema(tp, localns, seen)
    if is_class(tp) and (dataclasses.is_dataclass(tp) or typing.is_typeddict(tp)):
        return _record_schema(tp, localns, seen)
    if is_pydantic_model(tp):
        try:
            return model_schema(tp)
        except ValueError as error:
            raise Unsupported(str(error)) from None
    if is_array(tp):
        return _array_schema(tp, localns, seen)
    if is_mapping(tp):
        return _mapping_schema(tp, localns, seen)
    if is_pydantic_v1_model(tp):
        raise Unsupported(
            f"{type_name(tp)} is a pydantic v1 model; agentkit supports pydantic v2 models "
            "(pydantic.BaseModel of pydantic 2, not pydantic.v1.BaseModel)"
        )
    hint = ""
    if is_class(tp) and tp.__module__ != "builtins":
        hint = (
            " (a class must be an attrs class, a dataclass, a TypedDict, an Enum or a pydantic "
            "model)"
        )
    raise Unsupported(f"{type_name(tp)} has no JSON form{hint}")


def _annotated_schema(
    tp: Any, localns: Mapping[str, Any] | None, seen: tuple[type, ...]
) -> dict[str, Any]:
    """The schema of ``Annotated[X, ...]``: X's, described by the first string metadata."""
    schema = schema_of(typing.get_args(tp)[0], localns, seen)
    text = next((meta for meta in tp.__metadata__ if isinstance(meta, str)), None)
    if text:
        schema["description"] = text
    return schema


def _simple_schema(tp: Any) -> dict[str, Any] | None:
    """The schema of ``Any``, ``None`` and the JSON scalars; ``None`` for any other type."""
    if tp is Any:
        return {}
    if tp is None or tp is NoneType:
        return {"type": "null"}
    if is_class(tp) and tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    return None


def _choice_schema(tp: Any) -> dict[str, Any]:
    """The schema of an Enum or a ``Literal``: one of its values, each a JSON scalar."""
    values = [member.value for member in tp] if is_enum(tp) else list(typing.get_args(tp))
    for value in values:
        if not _is_json_scalar(value):
            where = (
                f"the value {value!r} of {tp.__qualname__}"
                if is_enum(tp)
                else f"the Literal value {value!r}"
            )
            raise Unsupported(f"{where} is not a JSON string, number, boolean or null")
    return _enum_schema(values)


def _array_schema(
    tp: Any, localns: Mapping[str, Any] | None, seen: tuple[type, ...]
) -> dict[str, Any]:
    """The schema of a list, set, sequence or tuple (fixed-length tuples list each item)."""
    fixed = fixed_tuple_args(tp)
    if fixed is not None:
        return _fixed_tuple_schema(fixed, localns, seen)
    args = typing.get_args(tp)
    item_type = args[0] if args else Any
    schema: dict[str, Any] = {"type": "array", "items": schema_of(item_type, localns, seen)}
    if _bare(tp) in SETS:
        if not _is_hashable(item_type):
            raise Unsupported(f"set items must be hashable and {type_name(item_type)} is not")
        schema["uniqueItems"] = True
    return schema


def _fixed_tuple_schema(
    fixed: tuple[Any, ...], localns: Mapping[str, Any] | None, seen: tuple[type, ...]
) -> dict[str, Any]:
    """The schema of ``tuple[X, Y]``: an array of exactly those items, in that order."""
    items = [schema_of(item, localns, seen) for item in fixed]
    # `items` for readers that ignore prefixItems: any of the element schemas
    # ({} when one of them is already anything).
    any_item: dict[str, Any] = {}
    unique = [item for i, item in enumerate(items) if item not in items[:i]]
    if len(unique) == 1:
        any_item = copy.deepcopy(unique[0])
    elif all(unique):
        any_item = {"anyOf": copy.deepcopy(unique)}
    return {
        "type": "array",
        "prefixItems": items,
        "items": any_item,
        "minItems": len(items),
        "maxItems": len(items),
    }


def _mapping_schema(
    tp: Any, localns: Mapping[str, Any] | None, seen: tuple[type, ...]
) -> dict[str, Any]:
    """The schema of a dict or mapping with str keys: an object of any properties."""
    args = typing.get_args(tp)
    if args and strip_annotated(args[0]) not in (str, Any):
        raise Unsupported(
            f"dictionary keys must be str (JSON object keys are strings), not "
            f"{type_name(args[0])}"
        )
    value_type = args[1] if len(args) == 2 else Any
    schema: dict[str, Any] = {"type": "object"}
    if strip_annotated(value_type) is not Any:
        schema["additionalProperties"] = schema_of(value_type, localns, seen)
    return schema


def describe_property(schema: dict[str, Any], tp: Any, doc: str | None) -> None:
    """Describe a parameter or field: ``Annotated`` text, else its docstring entry, else the
    description its type has (an attrs class's docstring summary)."""
    if doc and not (
        typing.get_origin(tp) is typing.Annotated
        and any(isinstance(meta, str) for meta in tp.__metadata__)
    ):
        schema["description"] = doc


def _is_json_scalar(value: Any) -> bool:
    return value is None or type(value) in (str, int, float, bool)


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    kinds: list[str] = []
    for value in values:
        kind = _SCALARS[type(value)]
        if kind not in kinds:
            kinds.append(kind)
    if "integer" in kinds and "number" in kinds:
        kinds.remove("integer")
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(values)}


def _attrs_schema(
    cls: type, localns: Mapping[str, Any] | None, seen: tuple[type, ...]
) -> dict[str, Any]:
    if cls in seen:
        raise Unsupported(
            f"{cls.__qualname__} refers to itself; recursive types cannot be tool parameters"
        )
    _resolve_attrs_types(cls, localns)
    summary, field_docs = parse_docstring(inspect.getdoc(cls) if cls.__doc__ else None)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        if not field.init:
            continue
        field_type = Any if field.type is None else field.type
        try:
            schema = schema_of(field_type, localns, (*seen, cls))
        except Unsupported as exc:
            raise Unsupported(f"in {cls.__qualname__}.{field.name}: {exc}") from None
        describe_property(schema, field_type, field_docs.get(field.name))
        if field.default is attrs.NOTHING:
            required.append(field.name)
        elif not isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            record_default(schema, field.default)
        properties[field.name] = schema
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if summary:
        schema["description"] = summary
    return schema


def _record_schema(
    cls: type, localns: Mapping[str, Any] | None, seen: tuple[type, ...]
) -> dict[str, Any]:
    """The schema of a dataclass or a TypedDict (an object with its fields)."""
    if cls in seen:
        raise Unsupported(f"{cls.__qualname__} refers to itself; recursive types have no schema")
    try:
        hints = typing.get_type_hints(
            cls, localns=dict(localns) if localns else None, include_extras=True
        )
    except Exception as error:
        raise Unsupported(
            f"the annotations of {cls.__qualname__} cannot be resolved "
            f"({type(error).__name__}: {error})"
        ) from None
    summary, field_docs = parse_docstring(inspect.getdoc(cls) if cls.__doc__ else None)
    required: list[str] = []
    if dataclasses.is_dataclass(cls):
        fields = [
            (field.name, field.default is dataclasses.MISSING
             and field.default_factory is dataclasses.MISSING, field.default)
            for field in dataclasses.fields(cls)
            if field.init
        ]
    else:
        required_keys = getattr(cls, "__required_keys__", frozenset(hints))
        fields = [(name, name in required_keys, dataclasses.MISSING) for name in hints]
    properties: dict[str, Any] = {}
    for name, is_required, default in fields:
        field_type = hints.get(name, Any)
        try:
            schema = schema_of(field_type, localns, (*seen, cls))
        except Unsupported as exc:
            raise Unsupported(f"in {cls.__qualname__}.{name}: {exc}") from None
        describe_property(schema, field_type, field_docs.get(name))
        if is_required:
            required.append(name)
        elif default is not dataclasses.MISSING:
            record_default(schema, default)
        properties[name] = schema
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if summary and not summary.startswith(f"{cls.__name__}("):  # a dataclass's generated doc
        schema["description"] = summary
    return schema


def _resolve_attrs_types(cls: type, localns: Mapping[str, Any] | None) -> None:
    try:
        attrs.resolve_types(cls)
        return
    except NameError as exc:
        error: Exception = exc
        if localns:
            try:
                attrs.resolve_types(cls, localns=dict(localns))
                return
            except Exception as retry_exc:
                error = retry_exc
    except Exception as exc:
        error = exc
    raise Unsupported(
        f"the annotations of {cls.__qualname__} cannot be resolved ({type(error).__name__}: "
        f"{error})"
    )


def _is_hashable(tp: Any) -> bool:
    tp = strip_annotated(tp)
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType) or origin is tuple:
        return all(_is_hashable(arg) for arg in typing.get_args(tp) if arg is not Ellipsis)
    if is_array(tp) or is_mapping(tp):
        return _bare(tp) in (tuple, frozenset)
    if is_attrs(tp) or is_pydantic_model(tp):
        return tp.__hash__ is not None
    return True


def record_default(schema: dict[str, Any], default: Any) -> None:
    """Add ``default`` to the schema when it has a JSON form."""
    try:
        text = json_dumps(default, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return
    schema["default"] = json.loads(text)


def type_name(tp: Any) -> str:
    if tp is None or tp is NoneType:
        return "None"
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__qualname__
    return repr(tp).replace("typing.", "")



# Section headers and field markers of the Google, reST, NumPy and Epydoc docstring styles.
_STRUCTURED = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|"
    r"Returns?|Yields?|Raises|Exceptions|Examples?|Attributes|Notes?|Warns|See Also)\s*:?\s*$"
    r"|^\s*[:@]\w+"
    r"|^\s*-{3,}\s*$",
    re.MULTILINE,
)


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return the description and the per-parameter descriptions of a docstring."""
    if not doc:
        return "", {}
    if not _STRUCTURED.search(doc):
        # Prose only (no parameter, return or raise sections): nothing to parse, so the
        # parser is not even imported.
        return doc.strip(), {}
    import docstring_parser

    try:
        parsed = docstring_parser.parse(doc)
    except docstring_parser.ParseError:
        return doc.strip(), {}
    params = {
        param.arg_name: param.description.strip()
        for param in parsed.params
        if param.description and param.description.strip()
    }
    return (parsed.description or "").strip(), params
