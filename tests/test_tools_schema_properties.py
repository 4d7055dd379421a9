"""Properties of function tools over random signatures.

Hypothesis draws parameter types from the grammar that ``tool`` supports (scalars, enums,
literals, lists, tuples, sets, dicts, unions and attrs classes made on the fly, nested), builds a
function with that signature from generated source (with or without
``from __future__ import annotations``), and checks that:

* the inferred schema is well formed and its properties and required list match the signature;
* values of the annotated types survive the trip through JSON: the function receives values
  equal to the ones that were encoded, of the same types;
* the schema and the argument conversion agree on arbitrary JSON: a value is accepted exactly
  when it conforms to the schema.
"""

from __future__ import annotations
import __future__

import enum
import itertools
import json
import keyword
import math
from types import GenericAlias
from typing import Any, Literal, Optional, Union

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit import tool
from agentkit.errors import ToolArgumentsError
from agentkit.tools import FunctionTool

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


# --- JSON values and a checker for the schema subset tools produce -------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(
            st.sampled_from(["a", "b", "c", "d"]) | st.text(max_size=3), children, max_size=3
        ),
    ),
    max_leaves=8,
)

SCHEMA_KEYS = {
    "type",
    "properties",
    "required",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "additionalProperties",
    "anyOf",
    "enum",
    "description",
    "default",
}
JSON_TYPES = {"string", "integer", "number", "boolean", "null", "array", "object"}


def json_type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    assert isinstance(value, dict)
    return "object"


def has_type(value: Any, name: str) -> bool:
    kind = json_type_of(value)
    if name == "number":
        return kind in ("integer", "number")
    if name == "integer":  # JSON Schema: 3.0 is an integer
        return kind == "integer" or (kind == "number" and float(value).is_integer())
    return kind == name


def json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, str) != isinstance(b, str):
        return False
    return bool(a == b)


def check_schema(schema: Any) -> None:
    """Assert that ``schema`` is a well-formed schema of the subset tools produce."""
    assert isinstance(schema, dict)
    assert set(schema) <= SCHEMA_KEYS, set(schema) - SCHEMA_KEYS
    json.dumps(schema, allow_nan=False)
    types: list[str] = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        assert types and set(types) <= JSON_TYPES and len(set(types)) == len(types)
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        assert types == ["object"]
        for sub in schema.get("properties", {}).values():
            check_schema(sub)
        required = schema.get("required", [])
        assert "required" not in schema or required, "an empty required list is left out"
        assert len(set(required)) == len(required)
        assert set(required) <= set(schema.get("properties", {}))
        if "additionalProperties" in schema:
            check_schema(schema["additionalProperties"])
    if types == ["object"]:
        assert "properties" in schema or "required" not in schema
    if types == ["array"]:
        assert "items" in schema, "model APIs want items on every array"
        check_schema(schema["items"])
        if "prefixItems" in schema:
            for sub in schema["prefixItems"]:
                check_schema(sub)
            assert schema["minItems"] == schema["maxItems"] == len(schema["prefixItems"])
    else:
        assert not {"items", "prefixItems", "minItems", "maxItems", "uniqueItems"} & set(schema)
    if "anyOf" in schema:
        assert len(schema["anyOf"]) >= 2
        for sub in schema["anyOf"]:
            check_schema(sub)
    if "enum" in schema:
        assert schema["enum"]
        for value in schema["enum"]:
            assert any(has_type(value, name) for name in types)
    if "default" in schema:
        assert conforms(schema["default"], schema)


def conforms(value: Any, schema: dict[str, Any]) -> bool:
    """Whether a JSON value is valid for a schema of the subset (``uniqueItems`` is not checked:
    tools collapse duplicates into the set rather than refuse them)."""
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(has_type(value, name) for name in types):
            return False
    if "enum" in schema and not any(json_equal(choice, value) for choice in schema["enum"]):
        return False
    if "anyOf" in schema and not any(conforms(value, sub) for sub in schema["anyOf"]):
        return False
    if isinstance(value, list):
        prefix = schema.get("prefixItems")
        if prefix is not None:
            if not schema["minItems"] <= len(value) <= schema["maxItems"]:
                return False
            return all(conforms(item, sub) for item, sub in zip(value, prefix, strict=True))
        if "items" in schema:
            return all(conforms(item, schema["items"]) for item in value)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        if any(key not in value for key in schema.get("required", [])):
            return False
        for key, item in value.items():
            if key in properties:
                if not conforms(item, properties[key]):
                    return False
            elif "additionalProperties" in schema and not conforms(
                item, schema["additionalProperties"]
            ):
                return False
    return True


def to_json(value: Any) -> Any:
    """Encode a value of the annotated types the way a model would send it."""
    if isinstance(value, enum.Enum):
        return value.value
    if attrs.has(type(value)):
        return {
            field.name: to_json(getattr(value, field.name)) for field in attrs.fields(type(value))
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    return value


# --- the type grammar ---------------------------------------------------------------------------


@attrs.frozen
class Spec:
    """A type annotation and a strategy for values of that type."""

    annotation: Any
    values: st.SearchStrategy[Any]
    hashable: bool = False


SCALARS = [
    Spec(str, st.text(max_size=6), hashable=True),
    Spec(int, st.integers(-(2**40), 2**40), hashable=True),
    Spec(float, st.floats(allow_nan=False, allow_infinity=False), hashable=True),
    Spec(bool, st.booleans(), hashable=True),
    Spec(type(None), st.none(), hashable=True),
    Spec(Color, st.sampled_from(Color), hashable=True),
    Spec(Level, st.sampled_from(Level), hashable=True),
    Spec(Literal["x", "y", 7], st.sampled_from(["x", "y", 7]), hashable=True),
    Spec(Any, json_values),
]
# Members of generated unions accept disjoint JSON values, so a value keeps its type.
UNION_MEMBERS = [SCALARS[0], SCALARS[1], SCALARS[2], SCALARS[3], SCALARS[4]]

class_names = (f"Generated{number}" for number in itertools.count())


@st.composite
def attrs_class_specs(draw: st.DrawFn, children: st.SearchStrategy[Spec]) -> Spec:
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3, unique=True))
    fields: dict[str, Any] = {}
    strategies: dict[str, st.SearchStrategy[Any]] = {}
    for name in names:
        spec = draw(children)
        if draw(st.booleans()):
            fields[name] = attrs.field(type=spec.annotation, default=draw(spec.values))
        else:
            fields[name] = attrs.field(type=spec.annotation)
        strategies[name] = spec.values
    cls = attrs.make_class(next(class_names), fields, kw_only=True)
    return Spec(cls, st.builds(cls, **strategies))


def extend(children: st.SearchStrategy[Spec]) -> st.SearchStrategy[Spec]:
    hashable = children.filter(lambda spec: spec.hashable)
    return st.one_of(
        children.map(lambda s: Spec(GenericAlias(list, (s.annotation,)), st.lists(s.values, max_size=3))),
        children.map(
            lambda s: Spec(GenericAlias(tuple, (s.annotation, ...)), st.lists(s.values, max_size=3).map(tuple))
        ),
        st.tuples(children, children).map(
            lambda pair: Spec(
                GenericAlias(tuple, (pair[0].annotation, pair[1].annotation)),
                st.tuples(pair[0].values, pair[1].values),
                hashable=pair[0].hashable and pair[1].hashable,
            )
        ),
        hashable.map(lambda s: Spec(GenericAlias(set, (s.annotation,)), st.sets(s.values, max_size=3))),
        hashable.map(
            lambda s: Spec(
                GenericAlias(frozenset, (s.annotation,)), st.frozensets(s.values, max_size=3), hashable=True
            )
        ),
        children.map(
            lambda s: Spec(
                GenericAlias(dict, (str, s.annotation)), st.dictionaries(st.text(max_size=4), s.values, max_size=3)
            )
        ),
        children.map(
            lambda s: Spec(
                Optional[s.annotation],  # noqa: UP045
                st.none() | s.values,
                hashable=s.hashable,
            )
        ),
        attrs_class_specs(children),
    )


unions = st.lists(st.sampled_from(UNION_MEMBERS), min_size=2, max_size=3, unique=True).map(
    lambda members: Spec(
        Union[tuple(member.annotation for member in members)],  # noqa: UP007
        st.one_of(*(member.values for member in members)),
        hashable=True,
    )
)
specs = st.recursive(st.sampled_from(SCALARS) | unions, extend, max_leaves=5)


# --- generated functions ------------------------------------------------------------------------


@attrs.frozen
class Param:
    name: str
    spec: Spec
    keyword_only: bool = False
    has_default: bool = False
    default: Any = None


param_names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name) and name not in ("self", "cls")
)


@st.composite
def signatures(draw: st.DrawFn) -> list[Param]:
    names = draw(st.lists(param_names, min_size=0, max_size=4, unique=True))
    params = []
    for name in names:
        spec = draw(specs)
        has_default = draw(st.booleans())
        params.append(
            Param(
                name,
                spec,
                keyword_only=draw(st.booleans()),
                has_default=has_default,
                default=draw(spec.values) if has_default else None,
            )
        )
    positional = [p for p in params if not p.keyword_only]
    # Python wants positional parameters without defaults first.
    positional.sort(key=lambda p: p.has_default)
    return positional + [p for p in params if p.keyword_only]


def build(
    params: list[Param], future: bool, strict: bool = False
) -> tuple[FunctionTool[Any, Any], list[Any]]:
    """Make a tool from generated source; it records the arguments it receives."""
    received: list[dict[str, Any]] = []
    namespace: dict[str, Any] = {"RECEIVED": received}
    pieces = []
    star_written = False
    for index, param in enumerate(params):
        if param.keyword_only and not star_written:
            pieces.append("*")
            star_written = True
        namespace[f"T{index}"] = param.spec.annotation
        piece = f"{param.name}: T{index}"
        if param.has_default:
            namespace[f"D{index}"] = param.default
            piece += f" = D{index}"
        pieces.append(piece)
    record = ", ".join(f"{param.name!r}: {param.name}" for param in params)
    source = f"def generated({', '.join(pieces)}):\n    RECEIVED.append({{{record}}})\n"
    source += "    return 'ok'\n"
    flags = __future__.annotations.compiler_flag if future else 0
    exec(compile(source, "<generated>", "exec", flags=flags, dont_inherit=True), namespace)
    return tool(namespace["generated"], strict=strict), received


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (a float is not an int)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[key], b[key]) for key in a)
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if attrs.has(type(a)):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in attrs.fields(type(a)))
    return bool(a == b)


# --- properties ---------------------------------------------------------------------------------


@given(signatures(), st.booleans())
@SETTINGS
def test_schema_is_well_formed_and_matches_the_signature(params: list[Param], future: bool) -> None:
    made, _ = build(params, future)
    schema = made.info().parameters
    check_schema(schema)
    assert schema["type"] == "object"
    assert list(schema["properties"]) == [param.name for param in params]
    required = [param.name for param in params if not param.has_default]
    assert schema.get("required", []) == required
    for param in params:
        if param.has_default:
            assert schema["properties"][param.name]["default"] == json.loads(
                json.dumps(to_json(param.default))
            )


@given(st.data(), signatures(), st.booleans())
@SETTINGS
def test_values_round_trip_through_json(
    data: st.DataObject, params: list[Param], future: bool
) -> None:
    made, received = build(params, future)
    schema = made.info().parameters
    sent: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    for param in params:
        if param.has_default and data.draw(st.booleans(), label=f"omit {param.name}"):
            expected[param.name] = param.default
            continue
        value = data.draw(param.spec.values, label=param.name)
        sent[param.name] = to_json(value)
        expected[param.name] = value
    assert conforms(sent, schema)
    extra = {"zz_unknown": [1, {"x": None}]}  # unknown arguments are ignored
    assert made.invoke(json.dumps({**sent, **extra})) == "ok"
    assert len(received) == 1
    got = received[0]
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert same(got[name], value), (name, got[name], value)


@given(st.data(), specs)
@SETTINGS
def test_schema_and_conversion_agree_on_any_json(data: st.DataObject, spec: Spec) -> None:
    # Strict tools: the lax default also accepts strings that spell a number or a boolean,
    # which the schema (rightly) does not describe.
    made, received = build([Param("x", spec)], future=False, strict=True)
    schema = made.info().parameters["properties"]["x"]
    value = data.draw(
        st.one_of(spec.values.map(to_json), json_values, mutated(spec.values.map(to_json))),
        label="value",
    )
    try:
        made.invoke(json.dumps({"x": value}))
    except ToolArgumentsError as error:
        assert str(error).startswith("generated: '")
        assert not conforms(value, schema), str(error)
    else:
        assert conforms(value, schema), received
        assert len(received) == 1


def mutated(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """JSON values of the right shape with one leaf replaced by an arbitrary value."""

    def replace_one(value: Any, replacement: Any, pick: int) -> Any:
        if isinstance(value, list) and value:
            index = pick % len(value)
            return [
                *value[:index],
                replace_one(value[index], replacement, pick // 2),
                *value[index + 1 :],
            ]
        if isinstance(value, dict) and value:
            key = sorted(value)[pick % len(value)]
            return {**value, key: replace_one(value[key], replacement, pick // 2)}
        return replacement

    return st.builds(replace_one, values, json_scalars, st.integers(0, 100))
