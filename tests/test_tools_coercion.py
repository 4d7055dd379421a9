"""Lax scalar conversion of function-tool arguments (the default) and ``@tool(strict=True)``."""

from __future__ import annotations

import json
import math
from typing import Any, Literal

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentkit import ToolArgumentsError, tool
from agentkit.tools import FunctionTool


def echo(annotation: Any, *, strict: bool = False) -> FunctionTool[Any, Any]:
    """A tool whose parameter ``x`` has ``annotation``; it returns ``repr`` of what it got."""

    def probe(x):  # type: ignore[no-untyped-def]
        return repr(x)

    probe.__annotations__ = {"x": annotation}
    return tool(probe, strict=strict)


LAX_INT = echo(int)
LAX_FLOAT = echo(float)
LAX_BOOL = echo(bool)
STRICT = {kind: echo(kind, strict=True) for kind in (int, float, bool)}


def received(made: FunctionTool[Any, Any], value: Any) -> Any:
    return eval(made.invoke(json.dumps({"x": value})))  # the repr of a scalar


def refusal(made: FunctionTool[Any, Any], value: Any) -> str:
    with pytest.raises(ToolArgumentsError) as caught:
        made.invoke(json.dumps({"x": value}))
    return str(caught.value)


@given(st.integers())
def test_an_integer_spelled_as_a_string_is_that_integer(number: int) -> None:
    result = received(LAX_INT, str(number))
    assert result == number and type(result) is int
    assert received(LAX_INT, f"  {number} ") == number


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_a_finite_float_spelled_as_a_string_is_that_float(number: float) -> None:
    result = received(LAX_FLOAT, repr(number))
    assert result == number and type(result) is float


@given(st.sampled_from(["true", "false"]), st.data())
def test_true_and_false_in_any_case_are_booleans(word: str, data: st.DataObject) -> None:
    spelled = "".join(
        letter.upper() if data.draw(st.booleans()) else letter for letter in word
    )
    assert received(LAX_BOOL, spelled) is (word == "true")


NUMBERISH = st.text() | st.from_regex(
    r"\s?[+-]?[0-9]{1,5}(\.[0-9]{1,3})?([eE][+-]?[0-9]{1,3})?\s?", fullmatch=True
)


@given(NUMBERISH)
def test_a_string_is_read_as_the_number_it_spells_or_refused(text: str) -> None:
    try:
        result = received(LAX_FLOAT, text)
    except ToolArgumentsError as error:
        assert str(error).startswith(f"probe: 'x' must be a number (got {text!r}"[:40])
    else:
        assert type(result) is float and result == float(text) and math.isfinite(result)


@given(NUMBERISH)
def test_an_integer_parameter_gets_only_integral_numbers(text: str) -> None:
    try:
        result = received(LAX_INT, text)
    except ToolArgumentsError as error:
        assert str(error).startswith(f"probe: 'x' must be an integer (got {text!r}"[:42])
    else:
        assert type(result) is int and result == float(text)


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (int, "2", 2),
        (int, "-7", -7),
        (int, "+7", 7),
        (int, "2.0", 2),
        (int, "1e3", 1000),
        (float, "2.5", 2.5),
        (float, "2", 2.0),
        (float, 2, 2.0),
        (float, "-0.5e-3", -0.0005),
        (bool, "true", True),
        (bool, " False ", False),
        (int | None, "3", 3),
        (bool | None, "true", True),
        (int | str, "3", "3"),  # a member takes the string as it is: no coercion
        (float | str, "2.5", "2.5"),
        (list[int], ["1", 2, "3"], [1, 2, 3]),
        (dict[str, float], {"a": "1.5"}, {"a": 1.5}),
        (tuple[int, bool], ["1", "true"], (1, True)),
    ],
)
def test_unambiguous_spellings_are_converted(annotation: Any, value: Any, expected: Any) -> None:
    result = received(echo(annotation), value)
    assert result == expected and type(result) is type(expected)


@attrs.define
class Booking:
    nights: int
    breakfast: bool = False


def test_fields_of_attrs_classes_are_converted_too() -> None:
    assert received(echo(Booking), {"nights": "2", "breakfast": "true"}) == Booking(2, True)


@pytest.mark.parametrize(
    ("annotation", "value", "message"),
    [
        (int, "2.5", "'x' must be an integer (got '2.5')"),
        (int, "two", "'x' must be an integer (got 'two')"),
        (int, "0x10", "'x' must be an integer (got '0x10')"),
        (int, "1_000", "'x' must be an integer (got '1_000')"),
        (int, "", "'x' must be an integer (got '')"),
        (float, "nan", "'x' must be a number (got 'nan')"),
        (float, "inf", "'x' must be a number (got 'inf')"),
        (float, "1e999", "'x' must be a number (got '1e999')"),
        (float, "1,5", "'x' must be a number (got '1,5')"),
        (bool, "yes", "'x' must be a boolean (got 'yes')"),
        (bool, "1", "'x' must be a boolean (got '1')"),
        (bool, 1, "'x' must be a boolean (got 1)"),
        (int, True, "'x' must be an integer (got True)"),
        (str, 3, "'x' must be a string (got 3)"),
        (Literal[1, 2], "1", "'x' must be one of 1, 2 (got '1')"),
    ],
)
def test_ambiguous_or_wrong_values_are_still_refused(
    annotation: Any, value: Any, message: str
) -> None:
    assert refusal(echo(annotation), value) == f"probe: {message}"


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        (int, "2", "'x' must be an integer (got '2')"),
        (float, "2.5", "'x' must be a number (got '2.5')"),
        (bool, "true", "'x' must be a boolean (got 'true')"),
    ],
)
def test_strict_tools_take_only_the_json_kind_the_schema_names(
    kind: type[int] | type[float] | type[bool], value: str, message: str
) -> None:
    assert refusal(STRICT[kind], value) == f"probe: {message}"


def test_strict_tools_still_take_an_integer_for_a_float() -> None:
    # JSON Schema's "number" includes integers: that is no coercion.
    assert received(STRICT[float], 2) == 2.0


def test_strictness_does_not_change_the_schema() -> None:
    assert echo(int).info() == echo(int, strict=True).info()


def test_strict_is_a_keyword_of_the_decorator() -> None:
    @tool(strict=True, name="exact")
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    assert add.invoke('{"a": 1, "b": 2}') == "3"
    with pytest.raises(ToolArgumentsError, match=r"exact: 'a' must be an integer \(got '1'\)"):
        add.invoke('{"a": "1", "b": 2}')
