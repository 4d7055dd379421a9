"""Pydantic v2 models as tool parameters, tool results and structured output.

pydantic is optional: a program that brings no pydantic model never loads it through agentkit
(checked in a fresh interpreter). Models keep pydantic's own rules (schema, validation); their
validation errors reach the model worded like every other argument error.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from typing import Any, Literal, Optional

import attrs
import pydantic
import pytest
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentkit import ChatModelAgent, Role, Runner, ToolArgumentsError, tool
from agentkit.errors import AgentConfigError, OutputValidationError
from agentkit.models import OpenAIChatModel, ScriptedChatModel
from agentkit.testing import FakeOpenAIServer, Reply, call, calls_message


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str
    zip: str = Field(description="the postal code", max_length=5)


class Parcel(BaseModel):
    """A parcel to ship."""

    to: Address
    via: list[Address] = []
    weight_kg: float
    express: bool = False

    @field_validator("weight_kg")
    @classmethod
    def positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("a parcel weighs more than nothing")
        return value


class Forecast(BaseModel):
    """A forecast for one city."""

    city: str
    celsius: float
    sky: Literal["clear", "cloudy", "rain"]
    places: list[Address] = []


@attrs.define
class Label:
    text: str
    address: Address


shipped: list[Any] = []


@tool
def ship(parcel: Parcel, label: Optional[Label] = None) -> str:  # noqa: UP045
    """Ship a parcel.

    Args:
        parcel: what to ship, and where.
        label: a label to print on it.
    """
    shipped.append((parcel, label))
    return f"shipped to {parcel.to.city}"


def refs(schema: Any) -> list[str]:
    """Every ``$ref`` and ``$defs`` key anywhere in ``schema``."""
    text = json.dumps(schema)
    return [key for key in ("$ref", "$defs") if key in text]


def without_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """pydantic's schema with its ``$defs`` written in place (what the tests expect)."""
    definitions = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, dict):
            if "$ref" in node:
                target = walk(definitions[node["$ref"].split("/")[-1]])
                return {**target, **{k: walk(v) for k, v in node.items() if k != "$ref"}}
            return {key: walk(value) for key, value in node.items()}
        return node

    return walk(schema)  # type: ignore[no-any-return]


# --- parameters: schema -------------------------------------------------------------------------


def test_a_model_parameter_has_pydantics_schema_with_nested_models_in_place() -> None:
    parameters = ship.info().parameters
    assert parameters["required"] == ["parcel"]
    parcel = parameters["properties"]["parcel"]
    expected = without_refs(Parcel.model_json_schema())
    expected["description"] = "what to ship, and where."  # the docstring's words win
    assert parcel == expected
    assert parcel["properties"]["to"]["properties"]["zip"] == {
        "description": "the postal code",
        "maxLength": 5,
        "title": "Zip",
        "type": "string",
    }
    assert parcel["properties"]["via"]["items"]["required"] == ["street", "city", "zip"]
    # a model inside an attrs class, inside Optional: the same schema, in place
    label = parameters["properties"]["label"]["anyOf"][0]
    assert label["properties"]["address"] == without_refs(Address.model_json_schema())
    assert refs(parameters) == []


def test_a_recursive_model_is_refused_when_the_tool_is_made() -> None:
    class Node(BaseModel):
        name: str
        children: list[Node] = []

    def walk(tree: Node) -> str:
        return tree.name

    with pytest.raises(TypeError) as caught:
        tool(walk, name="walk")
    assert re.search(
        r"parameter 'tree' has the type \S*Node, which tools do not support: \S*Node refers to "
        r"itself \(through Node\); recursive models have no self-contained JSON schema",
        str(caught.value),
    )


def test_a_pydantic_v1_model_is_refused_saying_v2_is_needed() -> None:
    from pydantic import v1

    class Old(v1.BaseModel):
        name: str

    def use(old: Old) -> str:
        return old.name

    with pytest.raises(TypeError, match=r"Old is a pydantic v1 model; agentkit supports pydantic v2"):
        tool(use, name="use")


# --- parameters: conversion ---------------------------------------------------------------------


def test_arguments_become_model_instances_nested_ones_included() -> None:
    shipped.clear()
    arguments = {
        "parcel": {
            "to": {"street": "1 Rue A", "city": "Lyon", "zip": "69001"},
            "via": [{"street": "2 Via B", "city": "Turin", "zip": "10121"}],
            "weight_kg": "2.5",  # pydantic's lax mode reads it, as agentkit's own hooks would
        },
        "label": {"text": "Fragile", "address": {"street": "3 C", "city": "Oslo", "zip": "0150"}},
    }
    assert ship.invoke(json.dumps(arguments)) == "shipped to Lyon"
    [(parcel, label)] = shipped
    assert parcel == Parcel(
        to=Address(street="1 Rue A", city="Lyon", zip="69001"),
        via=[Address(street="2 Via B", city="Turin", zip="10121")],
        weight_kg=2.5,
    )
    assert isinstance(parcel.to, Address) and isinstance(parcel.via[0], Address)
    assert label == Label("Fragile", Address(street="3 C", city="Oslo", zip="0150"))


def test_a_union_of_models_takes_the_one_the_object_fits_best() -> None:
    class Pickup(BaseModel):
        shop: str

    class Delivery(BaseModel):
        shop: str
        address: Address

    @tool
    def order(how: Pickup | Delivery) -> str:
        """Place an order."""
        return type(how).__name__

    address = {"street": "s", "city": "c", "zip": "1"}
    assert order.invoke(json.dumps({"how": {"shop": "A"}})) == "Pickup"
    assert order.invoke(json.dumps({"how": {"shop": "A", "address": address}})) == "Delivery"


def test_a_models_own_config_decides_strictness() -> None:
    class Strict(BaseModel):
        model_config = ConfigDict(strict=True)
        count: int

    @tool
    def count(item: Strict) -> int:
        """Count."""
        return item.count

    assert count.invoke('{"item": {"count": 3}}') == "3"
    with pytest.raises(ToolArgumentsError, match=r"'item.count' must be an integer \(got '3'\)"):
        count.invoke('{"item": {"count": "3"}}')


def test_validation_errors_are_worded_like_every_other_argument_error() -> None:
    arguments = {
        "parcel": {
            "to": {"city": 7, "zip": "123456"},
            "via": [{"street": "s", "city": "c", "zip": "1"}, "nowhere"],
            "weight_kg": -1,
        },
        "label": {"text": "x", "address": {"street": "s", "city": "c"}},
    }
    with pytest.raises(ToolArgumentsError) as caught:
        ship.invoke(json.dumps(arguments))
    assert str(caught.value) == (
        "ship: 'parcel.to.street' is required (got {'city': 7, 'zip': '123456'}); "
        "'parcel.to.city' must be a string (got 7); "
        "'parcel.to.zip' is not valid: String should have at most 5 characters (got '123456'); "
        "'parcel.via[1]' must be an object (got 'nowhere'); "
        "'parcel.weight_kg' is not valid: a parcel weighs more than nothing (got -1); "
        "'label.address.zip' is required (got {'street': 's', 'city': 'c'})"
    )


def test_a_validation_error_goes_back_to_the_model_which_corrects_the_call() -> None:
    shipped.clear()
    good = {"to": {"street": "s", "city": "Nice", "zip": "06000"}, "weight_kg": 1}
    model = ScriptedChatModel(
        [
            calls_message(call("ship", {"parcel": {"to": {"city": "Nice"}, "weight_kg": 1}}, id="a")),
            calls_message(call("ship", {"parcel": good}, id="b")),
            "Shipped.",
        ]
    )
    result = Runner(ChatModelAgent("clerk", "ships", model, tools=[ship])).invoke("ship it")
    assert result.text == "Shipped."
    sent = [(m.tool_call_id, m.content) for m in model.calls[2].messages if m.role is Role.TOOL]
    assert sent == [
        (
            "a",
            "Error: ship: 'parcel.to.street' is required (got {'city': 'Nice'}); 'parcel.to.zip' "
            "is required (got {'city': 'Nice'}). Correct the arguments and call ship again.",
        ),
        ("b", "shipped to Nice"),
    ]
    assert shipped == [(Parcel.model_validate(good), None)]


# --- results ------------------------------------------------------------------------------------


def test_a_model_result_is_sent_as_pydantics_json() -> None:
    class Receipt(BaseModel):
        parcel: Parcel
        price: float
        tracking: str = Field(alias="trackingId")

    @tool
    def quote() -> Receipt:
        """Quote."""
        return Receipt(
            parcel=Parcel(to=Address(street="s", city="c", zip="1"), weight_kg=2),
            price=9.5,
            trackingId="T1",
        )

    assert json.loads(quote.invoke("")) == quote().model_dump(mode="json")
    assert json.loads(quote.invoke(""))["tracking"] == "T1"


# --- structured output --------------------------------------------------------------------------


def test_a_model_as_output_type_is_checked_by_pydantic_and_delivered_as_an_instance() -> None:
    model = ScriptedChatModel(
        [
            '{"city": "Paris", "celsius": "21.5", "sky": "sunny"}',
            '{"city": "Paris", "celsius": "21.5", "sky": "clear", '
            '"places": [{"street": "s", "city": "Paris", "zip": "75001"}]}',
        ]
    )
    agent = ChatModelAgent("w", "d", model, output_type=Forecast, output_key="forecast")
    result = Runner(agent).invoke("weather?")
    expected = Forecast(
        city="Paris",
        celsius=21.5,
        sky="clear",
        places=[Address(street="s", city="Paris", zip="75001")],
    )
    assert result.output == expected and isinstance(result.output.places[0], Address)
    assert result.session_values == {"forecast": expected}
    correction = model.calls[1].messages[-1]
    assert correction.role is Role.USER
    assert correction.content.startswith(
        "Your answer does not match the required format: 'answer.sky' must be 'clear', "
        "'cloudy' or 'rain' (got 'sunny'). Reply again with only a JSON object that matches "
        "this JSON schema: {"
    )
    schema = model.calls[0].options.extra["response_format"]["json_schema"]  # type: ignore[union-attr,index]
    assert schema["name"] == "Forecast"
    assert schema["schema"] == without_refs(Forecast.model_json_schema())
    # the event's JSON form (what SSE and Celery readers get) is pydantic's JSON
    final = result.events[-1].to_dict()
    assert final["output"]["customized_output"] == expected.model_dump(mode="json")


def test_a_list_of_models_as_output_type() -> None:
    model = ScriptedChatModel(['{"value": [{"street": "s", "city": "c", "zip": "1"}]}'])
    agent = ChatModelAgent("w", "d", model, output_type=list[Address])
    assert Runner(agent).invoke("?").output == [Address(street="s", city="c", zip="1")]


def test_an_answer_pydantic_refuses_every_time_ends_the_run() -> None:
    model = ScriptedChatModel(['{"city": "X"}', '{"city": "X", "celsius": 1}'])
    agent = ChatModelAgent("w", "d", model, output_type=Forecast, max_output_corrections=1)
    with pytest.raises(OutputValidationError, match=r"'answer.sky' is required"):
        Runner(agent).invoke("?")


def test_a_recursive_model_as_output_type_is_refused_when_the_agent_is_made() -> None:
    class Tree(BaseModel):
        children: list[Tree] = []

    with pytest.raises(AgentConfigError, match=r"output_type \S*Tree has no JSON schema: \S*Tree refers"):
        ChatModelAgent("w", "d", ScriptedChatModel([]), output_type=Tree)


def test_pydantic_output_in_tool_mode_against_the_loopback_server() -> None:
    def handler(request: dict[str, Any]) -> Reply:
        [final_answer] = request["tools"]
        assert refs(final_answer) == []
        if len(request["messages"]) == 1:
            return Reply(tool_calls=[call("final_answer", {"city": "Oslo"}, id="f1")])
        return Reply(
            tool_calls=[call("final_answer", {"city": "Oslo", "celsius": -2, "sky": "rain"})]
        )

    with FakeOpenAIServer(handler) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("w", "d", model, output_type=Forecast, output_mode="tool")
        result = Runner(agent, enable_streaming=True).invoke("Oslo?")
        second = server.requests[1]["messages"]
    assert result.output == Forecast(city="Oslo", celsius=-2, sky="rain")
    assert second[-2]["role"] == "tool" and second[-2]["tool_call_id"] == "f1"
    assert "'answer.celsius' is required" in second[-1]["content"]


# --- optional -----------------------------------------------------------------------------------


def test_agentkit_never_imports_pydantic_for_a_program_without_models() -> None:
    script = textwrap.dedent(
        """
        import dataclasses, datetime, decimal, enum, sys
        import attrs
        import agentkit
        from agentkit import ChatModelAgent, Runner, tool
        from agentkit.models import ScriptedChatModel
        from agentkit.testing import call, calls_message

        @attrs.define
        class Trip:
            city: str
            days: int

        @dataclasses.dataclass
        class Plan:
            city: str
            when: datetime.date

        @tool
        def plan(trip: Trip) -> Plan:
            '''Plan a trip.'''
            return Plan(trip.city, datetime.date(2025, 5, 1))

        model = ScriptedChatModel(
            [calls_message(call("plan", {"trip": {"city": "Rome", "days": "3"}})),
             '{"city": "Rome", "days": 3}']
        )
        agent = ChatModelAgent("a", "d", model, tools=[plan], output_type=Trip)
        result = Runner(agent).invoke("go")
        assert result.output == Trip("Rome", 3), result
        assert [e.to_dict() for e in result.events]
        assert result.events[1].get_message().content == '{"city": "Rome", "when": "2025-05-01"}'
        print("pydantic" in sys.modules, "pydantic_core" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_the_pydantic_extra_is_declared() -> None:
    import configparser
    from pathlib import Path

    config = configparser.ConfigParser()
    config.read(Path(__file__).resolve().parent.parent / "setup.cfg")
    extras = config["options.extras_require"]
    assert extras["pydantic"].split() == ["pydantic>=2"]
    for extra in ("test", "dev"):
        assert "pydantic>=2" in extras[extra].split()
    assert int(pydantic.VERSION.split(".")[0]) == 2

