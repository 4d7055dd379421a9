"""Function tools: @tool, schema inference, argument conversion, errors, results, streaming."""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import inspect
import json
import subprocess
import sys
import threading
import typing
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal, NewType, Optional, Union

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit import BaseTool, InvokableTool, StreamableTool, tool
from agentkit.errors import AgentConfigError, ToolArgumentsError, ToolError
from agentkit.schema import ToolInfo
from agentkit.streams import StreamEOF
from agentkit.tools import FunctionTool, StreamingFunctionTool, as_tool
from tests import _future_annotated_tools as future_tools


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Unit(str, enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Ratio(float, enum.Enum):
    HALF = 0.5
    ONE = 1.0


UserId = NewType("UserId", int)


@attrs.define
class Location:
    """A place on Earth.

    Attributes:
        city: the city name.
        country: ISO country code.
    """

    city: str
    country: str = "FR"


@attrs.define
class Trip:
    stops: list[Location]
    nights: dict[str, int] = attrs.Factory(dict)
    color: Color | None = None


@attrs.frozen
class Point:
    x: int
    y: int


@attrs.define
class Range:
    low: int = attrs.field(validator=attrs.validators.ge(0))


@attrs.define
class Node:
    children: list[Node]


@dataclasses.dataclass
class PlainPoint:
    x: int


class BarePoint:
    x: int


def schema_of(annotation: Any, **extra: Any) -> dict[str, Any]:
    """The schema inferred for a single parameter ``x`` of the given annotation."""

    def probe(x):  # type: ignore[no-untyped-def]
        return x

    probe.__annotations__ = {"x": annotation}
    schema: dict[str, Any] = tool(probe).info().parameters["properties"]["x"]
    return schema


def echo_tool(annotation: Any, *, strict: bool = False) -> FunctionTool[Any, Any]:
    """A tool whose only parameter ``x`` has the annotation; it returns what it received."""
    received: list[Any] = []

    def probe(x):  # type: ignore[no-untyped-def]
        received.append(x)
        return "ok"

    probe.__annotations__ = {"x": annotation}
    made = tool(probe, strict=strict)
    made.received = received  # type: ignore[attr-defined]
    return made


def convert(annotation: Any, value: Any, *, strict: bool = False) -> Any:
    """What a parameter of the annotation receives when the model sends ``value``."""
    made = echo_tool(annotation, strict=strict)
    assert made.invoke(json.dumps({"x": value})) == "ok"
    return made.received[-1]  # type: ignore[attr-defined]


def arguments_error(annotation: Any, value: Any, *, strict: bool = False) -> str:
    made = echo_tool(annotation, strict=strict)
    with pytest.raises(ToolArgumentsError) as caught:
        made.invoke(json.dumps({"x": value}))
    assert made.received == []  # type: ignore[attr-defined]
    return str(caught.value)


@tool
def get_weather(city: str, days: int = 1, unit: Unit = Unit.CELSIUS) -> dict[str, Any]:
    """Get the weather forecast for a city.

    Args:
        city: the city, for example "Paris".
        days: how many days to forecast.
        unit: the temperature unit.
    """
    return {"city": city, "days": days, "unit": unit}


# --- decorator forms and the tool object ---------------------------------------------------------


def test_bare_decorator_makes_an_invokable_function_tool() -> None:
    assert isinstance(get_weather, FunctionTool)
    assert not isinstance(get_weather, StreamingFunctionTool)
    assert isinstance(get_weather, InvokableTool)
    assert isinstance(get_weather, BaseTool)
    assert not isinstance(get_weather, StreamableTool)
    info = get_weather.info()
    assert isinstance(info, ToolInfo)
    assert info.name == "get_weather" == get_weather.name
    assert info.description == "Get the weather forecast for a city."


def test_the_example_in_the_tool_docstring() -> None:
    @tool
    def get_weather(city: str, days: int = 1, unit: Literal["C", "F"] = "C") -> dict[str, Any]:
        """Get the weather forecast for a city.

        Args:
            city: the city, for example "Paris".
            days: how many days to forecast.
            unit: the temperature unit.
        """
        return {"city": city, "forecast": ["sunny"] * days, "unit": unit}

    assert get_weather.info().parameters["required"] == ["city"]
    assert get_weather.invoke('{"city": "Paris"}') == (
        '{"city": "Paris", "forecast": ["sunny"], "unit": "C"}'
    )
    assert get_weather("Paris", days=2)["forecast"] == ["sunny", "sunny"]


def test_decorator_with_parentheses_name_and_description() -> None:
    @tool()
    def first(a: int) -> int:
        """First."""
        return a

    @tool(name="renamed", description="Does things.")
    def second(a: int) -> int:
        """Ignored for the description."""
        return a

    assert first.info().name == "first"
    assert first.info().description == "First."
    assert second.info().name == "renamed"
    assert second.info().description == "Does things."
    assert second.invoke('{"a": 2}') == "2"


def test_call_form_with_name_and_description() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    made = tool(add, name="plus", description="Add two numbers.")
    assert made.info() == ToolInfo(
        "plus",
        "Add two numbers.",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    )
    assert made.invoke('{"a": 2, "b": 3}') == "5"


def test_tool_of_a_tool_wraps_the_same_function_again() -> None:
    renamed = tool(get_weather, name="weather")
    assert renamed.__wrapped__ is get_weather.__wrapped__
    assert renamed.info().name == "weather"
    assert renamed.info().parameters == get_weather.info().parameters


def test_tool_stays_callable_like_the_function() -> None:
    assert get_weather("Paris", days=2) == {"city": "Paris", "days": 2, "unit": Unit.CELSIUS}
    assert get_weather.__name__ == "get_weather"
    assert get_weather.__doc__ is not None
    assert get_weather.__doc__.startswith("Get the weather forecast")
    assert get_weather.__module__ == __name__
    assert get_weather.__qualname__ == "get_weather"
    assert inspect.signature(get_weather) == inspect.signature(get_weather.__wrapped__)
    assert repr(get_weather) == "FunctionTool(name='get_weather')"


def test_info_returns_a_fresh_copy_each_time() -> None:
    first = get_weather.info()
    first.parameters["properties"].clear()
    first.parameters["required"].append("nonsense")
    assert get_weather.info().parameters["required"] == ["city"]
    assert "city" in get_weather.info().parameters["properties"]


def test_bound_method_becomes_a_tool_without_self() -> None:
    class Greeter:
        def __init__(self, greeting: str) -> None:
            self.greeting = greeting

        def greet(self, name: str) -> str:
            """Greet someone."""
            return f"{self.greeting}, {name}!"

    made = tool(Greeter("Hello").greet)
    assert made.info().parameters == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }
    assert made.invoke('{"name": "Ann"}') == "Hello, Ann!"


def test_method_in_a_class_body_is_refused_with_advice() -> None:
    with pytest.raises(TypeError, match=r"bound method, e\.g\. tool\(instance\.method\)"):

        class Service:
            @tool
            def search(self, query: str) -> str:
                return query


def test_name_passed_positionally_is_refused_with_advice() -> None:
    with pytest.raises(TypeError, match=r"@tool\(name='search'\)"):
        tool("search")  # type: ignore[call-overload]


def test_lambda_needs_an_explicit_name() -> None:
    with pytest.raises(AgentConfigError, match="'<lambda>' is not a valid tool name"):
        tool(lambda: "x")
    assert tool(lambda: "x", name="constant").invoke("") == "x"


@pytest.mark.parametrize("name", ["", "has space", "dots.not.allowed", "x" * 65])
def test_invalid_tool_names_are_refused(name: str) -> None:
    def fn() -> None:
        pass

    with pytest.raises(AgentConfigError, match="not a valid tool name"):
        tool(fn, name=name)


def test_non_functions_are_refused() -> None:
    with pytest.raises(TypeError, match="needs a Python function or bound method"):
        tool(print)  # builtins have no signature to infer a schema from
    with pytest.raises(TypeError, match="needs a Python function or bound method"):
        tool(42)  # type: ignore[call-overload]


def test_async_functions_are_tools_and_async_generators_streaming_tools() -> None:
    # They used to be refused; tests/test_tools_async.py has how they run.
    async def fetch(url: str) -> str:
        """Fetch."""
        return url

    async def pages(url: str) -> AsyncIterator[str]:
        """Pages."""
        yield url

    made = tool(fetch)
    assert type(made) is FunctionTool and made.invoke('{"url": "x"}') == "x"
    streaming = tool(pages)
    assert isinstance(streaming, StreamingFunctionTool) and streaming.invoke('{"url": "y"}') == "y"


def test_var_positional_parameters_are_refused() -> None:
    def total(*numbers: int) -> int:
        return sum(numbers)

    with pytest.raises(TypeError, match=r"total: \*numbers cannot be filled .* use a list"):
        tool(total)


def test_var_keyword_parameter_is_left_out_and_receives_nothing() -> None:
    seen: list[dict[str, Any]] = []

    def search(query: str, **options: Any) -> str:
        seen.append(options)
        return query

    made = tool(search)
    assert made.info().parameters["properties"].keys() == {"query"}
    assert made.invoke('{"query": "q", "limit": 3}') == "q"
    assert seen == [{}]


def test_positional_only_parameters_are_passed_positionally_with_defaults() -> None:
    def power(base: int, exponent: int = 2, /, *, offset: int = 0) -> int:
        return int(base**exponent) + offset

    made = tool(power)
    assert made.info().parameters["required"] == ["base"]
    assert made.invoke('{"base": 3}') == "9"
    assert made.invoke('{"base": 2, "exponent": 3, "offset": 1}') == "9"


def test_tool_options_are_ignored() -> None:
    assert get_weather.invoke('{"city": "Oslo"}', timeout=3, anything="x") == (
        '{"city": "Oslo", "days": 1, "unit": "celsius"}'
    )


def test_as_tool_returns_tools_unchanged_and_wraps_functions() -> None:
    class Custom:
        def info(self) -> ToolInfo:
            return ToolInfo("custom")

        def invoke(self, arguments: str, **tool_options: Any) -> str:
            return "custom"

    custom = Custom()
    assert as_tool(custom) is custom
    assert as_tool(get_weather) is get_weather

    def shout(text: str) -> str:
        return text.upper()

    made = as_tool(shout)
    assert isinstance(made, FunctionTool)
    assert made.invoke('{"text": "hi"}') == "HI"


def test_as_tool_refuses_other_objects_naming_them() -> None:
    with pytest.raises(TypeError, match=r"cannot make a tool of 42 \(int\).*info\(\)"):
        as_tool(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got the class FunctionTool.*pass an instance"):
        as_tool(FunctionTool)


# --- schema inference ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (Any, {}),
        (UserId, {"type": "integer"}),
        (list, {"type": "array", "items": {}}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (typing.List[str], {"type": "array", "items": {"type": "string"}}),  # noqa: UP006
        (Sequence[bool], {"type": "array", "items": {"type": "boolean"}}),
        (collections.abc.MutableSequence[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (tuple, {"type": "array", "items": {}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (
            tuple[float, float],
            {
                "type": "array",
                "prefixItems": [{"type": "number"}, {"type": "number"}],
                "items": {"type": "number"},
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (frozenset[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
        (dict, {"type": "object"}),
        (dict[str, Any], {"type": "object"}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Mapping[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),  # noqa: UP007
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal[1, 2.5], {"type": "number", "enum": [1, 2.5]}),
        (Literal["a", 1, None], {"type": ["string", "integer", "null"], "enum": ["a", 1, None]}),
        (Literal[True], {"type": "boolean", "enum": [True]}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (Unit, {"type": "string", "enum": ["celsius", "fahrenheit"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Ratio, {"type": "number", "enum": [0.5, 1.0]}),
        (Annotated[int, "how many"], {"type": "integer", "description": "how many"}),
        (
            Annotated[int, 3, "text wins over other metadata"],
            {"type": "integer", "description": "text wins over other metadata"},
        ),
        (
            Point,
            {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
            },
        ),
        (
            Location,
            {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "the city name."},
                    "country": {
                        "type": "string",
                        "description": "ISO country code.",
                        "default": "FR",
                    },
                },
                "required": ["city"],
                "description": "A place on Earth.",
            },
        ),
    ],
)
def test_schema_of_each_supported_annotation(annotation: Any, expected: dict[str, Any]) -> None:
    assert schema_of(annotation) == expected


def test_schema_of_nested_combinations() -> None:
    assert schema_of(list[dict[str, tuple[int, Color]]] | None) == {
        "anyOf": [
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "array",
                        "prefixItems": [
                            {"type": "integer"},
                            {"type": "string", "enum": ["red", "green"]},
                        ],
                        "items": {
                            "anyOf": [
                                {"type": "integer"},
                                {"type": "string", "enum": ["red", "green"]},
                            ]
                        },
                        "minItems": 2,
                        "maxItems": 2,
                    },
                },
            },
            {"type": "null"},
        ]
    }
    trip = schema_of(Trip)
    assert trip["required"] == ["stops"]
    assert trip["properties"]["stops"]["items"]["properties"]["city"] == {
        "type": "string",
        "description": "the city name.",
    }
    # A factory default is not called to find its value: the field is just not required.
    assert trip["properties"]["nights"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }
    assert trip["properties"]["color"] == {
        "anyOf": [{"type": "string", "enum": ["red", "green"]}, {"type": "null"}],
        "default": None,
    }


def test_unannotated_parameters_accept_any_value() -> None:
    def anything(value, label: str = "x"):  # type: ignore[no-untyped-def]
        return [value, label]

    made = tool(anything)
    assert made.info().parameters["properties"]["value"] == {}
    assert made.invoke('{"value": {"a": [1, null]}}') == '[{"a": [1, null]}, "x"]'


def test_required_and_defaults() -> None:
    class Shade(enum.Enum):
        DARK = "dark"

    marker = object()

    def paint(
        wall: str,
        coats: int = 2,
        shade: Shade = Shade.DARK,
        corner: Point = Point(0, 0),
        size: tuple[int, int] = (3, 4),
        ratio: float = float("nan"),
        extra: Any = marker,
        note: str | None = None,
        *,
        dry: bool,
    ) -> str:
        return wall

    parameters = tool(paint).info().parameters
    properties = parameters["properties"]
    assert parameters["required"] == ["wall", "dry"]
    assert properties["coats"]["default"] == 2
    assert properties["shade"]["default"] == "dark"
    assert properties["corner"]["default"] == {"x": 0, "y": 0}
    assert properties["size"]["default"] == [3, 4]
    assert "default" not in properties["ratio"]  # NaN is not JSON
    assert properties["extra"] == {}  # no JSON form: no default recorded
    assert properties["note"]["default"] is None
    assert "default" not in properties["dry"]


def test_function_without_parameters_has_an_empty_object_schema() -> None:
    def now() -> str:
        return "12:00"

    made = tool(now)
    assert made.info().parameters == {"type": "object", "properties": {}}
    assert made.invoke("") == "12:00"
    assert made.invoke("  \n") == "12:00"
    assert made.invoke("{}") == "12:00"


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (bytes, "parameter 'x' has the type bytes, which tools do not support: bytes has no JSON"),
        (list[bytes], "the type list[bytes], which tools do not support: bytes has no JSON form"),
        (dict[int, str], "dictionary keys must be str (JSON object keys are strings), not int"),
        (set[list[int]], "set items must be hashable and list[int] is not"),
        (set[Location], "set items must be hashable and Location is not"),
        (Node, "Node refers to itself; recursive types cannot be tool parameters"),
        (Literal[b"x"], "the Literal value b'x' is not a JSON string, number, boolean or null"),
        (threading.Thread, "Thread has no JSON form"),
        (Optional[complex], "complex has no JSON form"),  # noqa: UP045
        (
            BarePoint,
            "BarePoint has no JSON form (a class must be an attrs class, a dataclass, a "
            "TypedDict, an Enum or a pydantic model)",
        ),
    ],
)
def test_unsupported_annotations_are_refused_at_decoration(annotation: Any, message: str) -> None:
    def probe(x):  # type: ignore[no-untyped-def]
        return x

    probe.__annotations__ = {"x": annotation}
    with pytest.raises(TypeError) as caught:
        tool(probe)
    text = str(caught.value)
    assert text.startswith(
        "test_unsupported_annotations_are_refused_at_decoration.<locals>.probe: "
    )
    assert message in text
    assert "Supported: str, int, float, bool, None, Any" in text


def test_enum_with_values_that_are_not_json_is_refused() -> None:
    class Corner(enum.Enum):
        TOP_LEFT = (0, 0)

    def place(corner: Corner) -> None:
        pass

    with pytest.raises(TypeError, match=r"the value \(0, 0\) of .*Corner is not a JSON string"):
        tool(place)


def test_attrs_field_with_unsupported_type_names_the_field() -> None:
    @attrs.define
    class Upload:
        name: str
        data: bytes

    def upload(file: Upload) -> None:
        pass

    with pytest.raises(TypeError, match=r"parameter 'file' .* in .*Upload\.data: bytes has no"):
        tool(upload)


def test_unresolvable_annotation_is_a_clear_error() -> None:
    def lookup(key: Missing) -> str:  # type: ignore[name-defined]  # noqa: F821
        return "x"

    with pytest.raises(TypeError, match=r"lookup: cannot resolve its type annotations \(NameError"):
        tool(lookup)


def test_annotations_naming_local_classes_are_resolved_where_tool_is_called() -> None:
    # This module uses `from __future__ import annotations`: "Box" is a string that is not a
    # global of the module; tool() falls back to the namespace it is called from.
    @attrs.define
    class Box:
        label: str
        size: Size

    class Size(enum.Enum):
        S = "s"
        L = "l"

    def ship(box: Box) -> str:
        return f"{box.label}:{box.size.name}"

    made = tool(ship)
    assert made.info().parameters["properties"]["box"]["properties"]["size"] == {
        "type": "string",
        "enum": ["s", "l"],
    }
    assert made.invoke('{"box": {"label": "books", "size": "l"}}') == "books:L"


def test_string_annotations_from_a_future_annotations_module() -> None:
    parameters = future_tools.book_trip.info().parameters
    assert parameters["required"] == ["traveller", "destination"]
    traveller = parameters["properties"]["traveller"]
    assert traveller["description"] == "who travels."  # the parameter doc beats the class doc
    assert traveller["properties"]["age"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}],
        "description": "age in years.",
        "default": None,
    }
    assert parameters["properties"]["destination"] == {
        "type": "string",
        "description": "where to go",
    }
    assert parameters["properties"]["legs"]["anyOf"][0]["items"]["properties"]["stops"] == {
        "type": "array",
        "items": {"type": "string"},
        "default": [],
    }
    assert parameters["properties"]["seat"]["anyOf"][0] == {
        "type": "string",
        "enum": ["window", "aisle"],
    }


def test_future_annotations_module_tools_convert_arguments() -> None:
    arguments = {
        "traveller": {"name": "Ann", "age": 40},
        "destination": "Rome",
        "legs": [{"origin": "Paris", "destination": "Rome", "stops": ["Turin"]}],
        "seat": "aisle",
    }
    assert json.loads(future_tools.book_trip.invoke(json.dumps(arguments))) == {
        **arguments,
        "mode": "train",
    }
    assert json.loads(future_tools.inspect_types.invoke(json.dumps(arguments))) == [
        "Traveller",
        "Leg",
        "tuple",
        "<Seat.AISLE: 'aisle'>",
    ]
    assert isinstance(future_tools.count_up, StreamingFunctionTool)
    assert future_tools.count_up.invoke('{"to": 3, "label": "#"}') == "#1#2#3"


# --- docstrings ---------------------------------------------------------------------------------


def test_google_style_docstring() -> None:
    def fn(city: str, days: int = 1) -> None:
        """Get the weather.

        Uses the national weather service.

        Args:
            city: The city name,
                on two lines.
            days (int): Number of days.

        Returns:
            The forecast.
        """

    made = tool(fn)
    assert made.info().description == "Get the weather.\n\nUses the national weather service."
    properties = made.info().parameters["properties"]
    assert properties["city"]["description"] == "The city name,\non two lines."
    assert properties["days"]["description"] == "Number of days."


def test_rest_style_docstring() -> None:
    def fn(city: str, days: int = 1) -> None:
        """Get the weather.

        :param city: The city name.
        :param int days: Number of days.
        :returns: the forecast.
        """

    made = tool(fn)
    assert made.info().description == "Get the weather."
    properties = made.info().parameters["properties"]
    assert properties["city"]["description"] == "The city name."
    assert properties["days"]["description"] == "Number of days."


def test_numpy_style_docstring() -> None:
    def fn(city: str, days: int = 1) -> None:
        """Get the weather.

        Parameters
        ----------
        city : str
            The city name.
        days : int, optional
            Number of days.

        Returns
        -------
        str
            The forecast.
        """

    made = tool(fn)
    assert made.info().description == "Get the weather."
    properties = made.info().parameters["properties"]
    assert properties["city"]["description"] == "The city name."
    assert properties["days"]["description"] == "Number of days."


def test_no_docstring_means_empty_description() -> None:
    def fn(city: str) -> None:
        pass

    made = tool(fn)
    assert made.info().description == ""
    assert made.info().parameters["properties"]["city"] == {"type": "string"}


def test_annotated_text_beats_the_docstring_entry() -> None:
    def fn(city: Annotated[str, "from Annotated"], days: int) -> None:
        """Weather.

        Args:
            city: from the docstring.
            days: days from the docstring.
        """

    properties = tool(fn).info().parameters["properties"]
    assert properties["city"]["description"] == "from Annotated"
    assert properties["days"]["description"] == "days from the docstring."


def test_explicit_description_keeps_parameter_docs() -> None:
    def fn(city: str) -> None:
        """Weather.

        Args:
            city: the city.
        """

    made = tool(fn, description="Custom.")
    assert made.info().description == "Custom."
    assert made.info().parameters["properties"]["city"]["description"] == "the city."


# --- argument conversion ------------------------------------------------------------------------


def test_attrs_classes_are_built_with_nested_values_and_defaults() -> None:
    trip = convert(
        Trip,
        {"stops": [{"city": "Lyon"}, {"city": "Turin", "country": "IT"}], "color": "green"},
    )
    assert trip == Trip(
        stops=[Location("Lyon"), Location("Turin", "IT")], nights={}, color=Color.GREEN
    )
    assert type(trip.stops[0]) is Location


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (Color, "red", Color.RED),
        (Unit, "fahrenheit", Unit.FAHRENHEIT),
        (Level, 2, Level.HIGH),
        (Ratio, 1, Ratio.ONE),
        (Literal["a", "b"], "b", "b"),
        (Literal[1, 2], 2.0, 2),
        (Literal[True, 1], 1, 1),
        (Literal[True, 1], True, True),
        (Optional[int], None, None),  # noqa: UP045
        (Optional[int], 5, 5),  # noqa: UP045
        (list[int], [1, 2], [1, 2]),
        (Sequence[str], ["a"], ["a"]),
        (tuple[int, ...], [1, 2, 3], (1, 2, 3)),
        (tuple[int, str], [1, "a"], (1, "a")),
        (set[int], [3, 1, 3], {1, 3}),
        (frozenset[str], ["a"], frozenset({"a"})),
        (dict[str, Point], {"p": {"x": 1, "y": 2}}, {"p": Point(1, 2)}),
        (Mapping[str, int], {"a": 1}, {"a": 1}),
        (UserId, 7, 7),
        (Annotated[list[Color], "colors"], ["red"], [Color.RED]),
        (Any, {"raw": [1]}, {"raw": [1]}),
        (dict, {"raw": 1}, {"raw": 1}),
        (list, [1, "a"], [1, "a"]),
    ],
)
def test_values_are_converted_to_the_annotated_type(
    annotation: Any, value: Any, expected: Any
) -> None:
    result = convert(annotation, value)
    assert result == expected
    assert type(result) is type(expected)


def test_numbers_follow_json_schema_rules() -> None:
    assert convert(float, 3) == 3.0
    assert type(convert(float, 3)) is float
    assert convert(int, 3.0) == 3  # 3.0 is an integer in JSON Schema
    assert type(convert(int, 3.0)) is int
    assert "'x' must be an integer (got 3.5)" in arguments_error(int, 3.5)
    assert "'x' must be an integer (got True)" in arguments_error(int, True)
    assert "'x' must be a number (got False)" in arguments_error(float, False)
    assert "'x' must be an integer (got '3')" in arguments_error(int, "3", strict=True)
    assert "'x' must be a boolean (got 'true')" in arguments_error(bool, "true", strict=True)
    assert "'x' must be a boolean (got 1)" in arguments_error(bool, 1)
    assert "'x' must be a string (got 3)" in arguments_error(str, 3)
    assert "'x' must be null (got 0)" in arguments_error(None, 0)
    assert "'x' must be a number in the range of a float (got 1000" in arguments_error(
        float, 10**400
    )


def test_unions_pick_the_most_specific_member_whatever_the_order() -> None:
    assert type(convert(float | int, 3)) is int
    assert type(convert(int | float, 3.0)) is float
    assert type(convert(float | str, 3)) is float
    assert convert(int | str, "3") == "3"
    assert convert(Color | str, "red") is Color.RED
    assert convert(str | Color, "red") is Color.RED
    assert convert(str | Color, "blue") == "blue"
    assert convert(Literal["auto"] | int, "auto") == "auto"
    assert convert(list[int] | None, [1]) == [1]
    assert convert(Any | int, 3) == 3
    assert convert(Level | int | float, 2) is Level.HIGH
    assert type(convert(Level | int | float, 3)) is int
    assert type(convert(Level | int | float, 3.0)) is float


def test_unions_of_attrs_classes_pick_the_class_with_most_fields_in_the_value() -> None:
    @attrs.define
    class Short:
        city: str

    @attrs.define
    class Long:
        city: str
        country: str = "FR"

    assert type(convert(Short | Long, {"city": "Oslo"})) is Short
    assert type(convert(Long | Short, {"city": "Oslo", "country": "NO"})) is Long
    assert type(convert(Short | Long, {"city": "Oslo", "country": "NO"})) is Long
    assert convert(Point | Location, {"city": "Oslo"}) == Location("Oslo")
    assert convert(Location | dict[str, str], {"city": "Oslo"}) == Location("Oslo")
    assert convert(Location | dict[str, str], {"town": "Oslo"}) == {"town": "Oslo"}


def test_unknown_extra_arguments_are_ignored() -> None:
    assert get_weather.invoke('{"city": "Rome", "country": "IT", "days": 2}') == (
        '{"city": "Rome", "days": 2, "unit": "celsius"}'
    )


# --- argument errors ----------------------------------------------------------------------------


def test_missing_required_argument_message() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        get_weather.invoke('{"town": "Paris"}')
    assert str(caught.value) == "get_weather: 'city' is required (got {'town': 'Paris'})"
    assert caught.value.tool_name == "get_weather"
    assert caught.value.call_id == ""
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, ToolError)


def test_wrong_type_message() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        get_weather.invoke('{"city": "Paris", "days": "three"}')
    assert str(caught.value) == "get_weather: 'days' must be an integer (got 'three')"


def test_invalid_json_message() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        get_weather.invoke('{"city": "Paris"')
    assert str(caught.value) == (
        "get_weather: arguments are not valid JSON: Expecting ',' delimiter: line 1 column 17 "
        """(char 16) (got '{"city": "Paris"')"""
    )
    assert isinstance(caught.value.__cause__, json.JSONDecodeError)


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [
        ("[1, 2]", "an array"),
        ('"Paris"', "a string"),
        ("3", "a number"),
        ("null", "null"),
        ("true", "a boolean"),
    ],
)
def test_arguments_that_are_not_an_object(arguments: str, kind: str) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        get_weather.invoke(arguments)
    assert str(caught.value) == (
        f"get_weather: arguments must be a JSON object, not {kind} (got {arguments!r})"
    )


def test_enum_and_literal_messages_list_the_choices() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        get_weather.invoke('{"city": "Paris", "unit": "kelvin"}')
    assert str(caught.value) == (
        "get_weather: 'unit' must be one of 'celsius', 'fahrenheit' (got 'kelvin')"
    )
    assert "'x' must be 'only' (got 'other')" in arguments_error(Literal["only"], "other")


def test_nested_errors_name_the_path() -> None:
    assert arguments_error(Trip, {"stops": [{"city": "Lyon"}, {"country": "IT"}]}) == (
        "probe: 'x.stops[1].city' is required (got {'country': 'IT'})"
    )
    assert arguments_error(Trip, {"stops": [], "nights": {"Lyon": "two"}}) == (
        """probe: 'x.nights["Lyon"]' must be an integer (got 'two')"""
    )
    assert arguments_error(tuple[int, str], [1, 2]) == ("probe: 'x[1]' must be a string (got 2)")
    assert arguments_error(list[list[int]], [[1], [2, "3"]], strict=True) == (
        "probe: 'x[1][1]' must be an integer (got '3')"
    )
    assert arguments_error(Trip, {"stops": "Lyon"}) == (
        "probe: 'x.stops' must be an array (got 'Lyon')"
    )
    assert arguments_error(Trip, ["Lyon"]) == "probe: 'x' must be an object (got ['Lyon'])"
    assert arguments_error(dict[str, int], [1]) == "probe: 'x' must be an object (got [1])"
    assert arguments_error(tuple[int, int], [1]) == (
        "probe: 'x' must be an array of 2 items (got [1])"
    )


def test_union_errors() -> None:
    assert arguments_error(Optional[int], "a") == (  # noqa: UP045
        "probe: 'x' must be an integer or null (got 'a')"
    )
    assert arguments_error(Union[int, str, None], 1.5) == (  # noqa: UP007
        "probe: 'x' must be an integer, a string or null (got 1.5)"
    )
    # Only one member takes an object: its own detailed error is reported.
    assert arguments_error(Optional[Location], {"city": 1}) == (  # noqa: UP045
        "probe: 'x.city' must be a string (got 1)"
    )
    assert arguments_error(Optional[list[int]], ["a"]) == (  # noqa: UP045
        "probe: 'x[0]' must be an integer (got 'a')"
    )
    assert arguments_error(Point | Location, {"z": 1}) == (
        "probe: 'x' must be an object (got {'z': 1})"
    )


def test_all_problems_are_reported_at_once() -> None:
    def fn(a: int, b: str, c: list[int]) -> None:
        pass

    with pytest.raises(ToolArgumentsError) as caught:
        tool(fn, strict=True).invoke('{"a": "1", "c": [1, "x"]}')
    assert str(caught.value) == (
        "fn: 'a' must be an integer (got '1'); 'b' is required (got {'a': '1', 'c': [1, 'x']}); "
        "'c[1]' must be an integer (got 'x')"
    )


def test_attrs_validator_errors_are_argument_errors() -> None:
    message = arguments_error(Range, {"low": -1})
    assert message.startswith("probe: 'x' is not valid: ")
    assert "'low' must be >= 0: -1" in message


def test_long_values_are_shortened_in_messages() -> None:
    message = arguments_error(int, "y" * 1000)
    assert message.endswith("...)")
    assert len(message) < 260


def test_invoke_needs_json_text() -> None:
    with pytest.raises(TypeError, match=r"takes the arguments as JSON text \(str\), not dict"):
        get_weather.invoke({"city": "Paris"})  # type: ignore[arg-type]


def test_function_does_not_run_when_arguments_are_invalid() -> None:
    calls: list[int] = []

    @tool
    def record(n: int) -> None:
        calls.append(n)

    with pytest.raises(ToolArgumentsError):
        record.invoke('{"n": "one"}')
    assert calls == []


# --- results ------------------------------------------------------------------------------------


def test_results_are_encoded_as_text() -> None:
    def result_tool(value: Any) -> FunctionTool[Any, Any]:
        def produce() -> Any:
            return value

        return tool(produce)

    assert result_tool("plain text").invoke("") == "plain text"
    assert result_tool("").invoke("") == ""
    assert result_tool({"city": "Zürich"}).invoke("") == '{"city": "Zürich"}'
    assert result_tool([1, 2.5, None, True]).invoke("") == "[1, 2.5, null, true]"
    assert result_tool(None).invoke("") == "null"
    assert result_tool(3).invoke("") == "3"
    assert result_tool((1, "a")).invoke("") == '[1, "a"]'
    assert result_tool({3}).invoke("") == "[3]"
    assert result_tool(Color.RED).invoke("") == "red"
    assert result_tool(Unit.CELSIUS).invoke("") == "celsius"
    assert result_tool(Level.HIGH).invoke("") == "2"
    assert result_tool(Trip([Location("Oslo", "NO")], color=Color.RED)).invoke("") == (
        '{"stops": [{"city": "Oslo", "country": "NO"}], "nights": {}, "color": "red"}'
    )
    assert result_tool({"points": [Point(1, 2)]}).invoke("") == ('{"points": [{"x": 1, "y": 2}]}')


def test_result_that_is_not_json_encodable_is_a_tool_error() -> None:
    @tool
    def opaque() -> object:
        return object()

    with pytest.raises(ToolError) as caught:
        opaque.invoke("")
    assert not isinstance(caught.value, ToolArgumentsError)
    assert caught.value.tool_name == "opaque"
    assert str(caught.value).startswith(
        "opaque: the result cannot be encoded as JSON: result is of type object, which has no "
        "JSON form; return a str, or data made of"
    )


def test_exceptions_from_the_function_propagate_unchanged() -> None:
    error = LookupError("no such city")

    @tool
    def failing(city: str) -> str:
        raise error

    with pytest.raises(LookupError) as caught:
        failing.invoke('{"city": "Atlantis"}')
    assert caught.value is error


def test_base_exceptions_pass_through() -> None:
    class Signal(BaseException):
        pass

    @tool
    def interrupting() -> str:
        raise Signal

    with pytest.raises(Signal):
        interrupting.invoke("")

    @tool
    def streaming_interrupt() -> Iterator[str]:
        yield "a"
        raise Signal

    reader = streaming_interrupt.stream("")
    assert reader.recv() == "a"
    with pytest.raises(Signal):
        reader.recv()


# --- streaming ----------------------------------------------------------------------------------


def test_generator_function_becomes_a_streaming_tool() -> None:
    log: list[str] = []

    @tool
    def countdown(start: int) -> Iterator[Any]:
        """Count down."""
        log.append("started")
        for number in range(start, 0, -1):
            yield str(number) if number % 2 else {"n": number}
        log.append("finished")

    assert isinstance(countdown, StreamingFunctionTool)
    assert isinstance(countdown, StreamableTool)
    assert isinstance(countdown, InvokableTool)
    assert countdown.info().parameters["required"] == ["start"]

    reader = countdown.stream('{"start": 3}')
    assert log == []  # lazy: nothing runs before the first chunk is read
    assert reader.recv() == "3"
    assert log == ["started"]
    assert list(reader) == ['{"n": 2}', "1"]
    assert log == ["started", "finished"]
    with pytest.raises(StreamEOF):
        reader.recv()
    assert countdown.invoke('{"start": 2}') == '{"n": 2}1'
    assert list(countdown(2)) == [{"n": 2}, "1"]


def test_stream_checks_arguments_before_starting() -> None:
    started: list[bool] = []

    @tool
    def words(text: str) -> Iterator[str]:
        started.append(True)
        yield from text.split()

    with pytest.raises(ToolArgumentsError, match="words: 'text' is required"):
        words.stream("{}")
    assert started == []


def test_generator_error_is_the_stream_error() -> None:
    @tool
    def flaky() -> Iterator[str]:
        yield "partial"
        raise ConnectionError("lost")

    reader = flaky.stream("")
    assert reader.recv() == "partial"
    with pytest.raises(ConnectionError, match="lost"):
        reader.recv()
    with pytest.raises(StreamEOF):
        reader.recv()
    with pytest.raises(ConnectionError, match="lost"):
        flaky.invoke("")


def test_closing_the_stream_closes_the_generator() -> None:
    closed: list[bool] = []

    @tool
    def endless() -> Iterator[str]:
        try:
            while True:
                yield "tick"
        finally:
            closed.append(True)

    reader = endless.stream("")
    assert reader.recv() == "tick"
    reader.close()
    assert closed == [True]


def test_unencodable_chunk_is_a_stream_error() -> None:
    @tool
    def odd() -> Iterator[object]:
        yield "fine"
        yield object()

    reader = odd.stream("")
    assert reader.recv() == "fine"
    with pytest.raises(ToolError, match="odd: the result cannot be encoded as JSON"):
        reader.recv()


def test_function_tool_refuses_generator_functions_directly() -> None:
    def gen() -> Iterator[str]:
        yield "x"

    with pytest.raises(TypeError, match="is a generator function: make it a StreamingFunctionTool"):
        FunctionTool(gen)
    assert isinstance(StreamingFunctionTool(gen), StreamingFunctionTool)


# --- threads and imports ------------------------------------------------------------------------


def test_concurrent_invokes_are_independent() -> None:
    @tool
    def describe(trip: Trip, factor: float = 1.0) -> dict[str, Any]:
        return {"cities": [stop.city for stop in trip.stops], "factor": factor}

    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker(index: int) -> None:
        try:
            barrier.wait()
            for round_ in range(150):
                cities = [f"c{index}-{round_}-{k}" for k in range(3)]
                arguments = {"trip": {"stops": [{"city": c} for c in cities]}, "factor": index}
                result = json.loads(describe.invoke(json.dumps(arguments)))
                assert result == {"cities": cities, "factor": float(index)}
                if round_ % 10 == 0:
                    with pytest.raises(ToolArgumentsError, match=r"'trip.stops\[0\].city'"):
                        describe.invoke('{"trip": {"stops": [{"city": 1}]}}')
        except BaseException as error:  # collected and re-raised in the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_importing_tools_does_not_import_cattrs_or_docstring_parser() -> None:
    code = (
        "import sys, agentkit\n"
        "assert 'cattrs' not in sys.modules, 'cattrs'\n"
        "assert 'docstring_parser' not in sys.modules, 'docstring_parser'\n"
        "@agentkit.tool\n"
        "def f(x: int) -> int:\n"
        "    '''F.'''\n"
        "    return x\n"
        "# scalar parameters and a one-line docstring need neither\n"
        "assert 'cattrs' not in sys.modules and 'docstring_parser' not in sys.modules\n"
        "@agentkit.tool\n"
        "def g(xs: list[int]) -> int:\n"
        "    '''G.\n\n    Args:\n        xs: numbers\n    '''\n"
        "    return sum(xs)\n"
        "assert 'cattrs' in sys.modules and 'docstring_parser' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@settings(max_examples=200)
@given(st.text())
def test_prose_docstrings_read_the_same_without_the_parser(text: str) -> None:
    import docstring_parser

    from agentkit.tools._schema import _STRUCTURED, parse_docstring

    text = inspect.cleandoc(text)  # tools read docstrings with inspect.getdoc
    if _STRUCTURED.search(text):
        return
    parsed = docstring_parser.parse(text)
    assert parse_docstring(text) == ((parsed.description or "").strip(), {})
