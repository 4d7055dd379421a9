"""Structured output: ``ChatModelAgent(output_type=...)``."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, TypedDict

import attrs
import pytest

from agentkit import ChatModelAgent, Role, Runner, tool, with_chat_model_options
from agentkit.errors import AgentConfigError, OutputValidationError
from agentkit.models import OpenAIChatModel, ScriptedChatModel
from agentkit.testing import FakeOpenAIServer, Reply, call, calls_message


@attrs.define
class Weather:
    """A forecast.

    Args:
        city: the city.
        celsius: the temperature.
    """

    city: str
    celsius: float
    sunny: bool = True


@dataclasses.dataclass
class Person:
    name: str
    age: int


class Place(TypedDict):
    city: str
    country: str


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


def agent_for(model: ScriptedChatModel, output_type: Any, **kwargs: Any) -> ChatModelAgent:
    return ChatModelAgent("extractor", "extracts", model, output_type=output_type, **kwargs)


def test_the_typed_value_is_on_the_final_event_the_result_and_the_output_key() -> None:
    model = ScriptedChatModel(['{"city": "Paris", "celsius": 21.5}'])
    runner = Runner(agent_for(model, Weather, output_key="weather"))
    result = runner.invoke("weather in Paris?")
    assert result.output == Weather("Paris", 21.5, True)
    assert result.events[-1].output.customized_output == Weather("Paris", 21.5)  # type: ignore[union-attr]
    assert result.text == '{"city": "Paris", "celsius": 21.5}'
    assert result.session_values == {"weather": Weather("Paris", 21.5)}
    assert len(result.events) == 1


def test_the_model_is_sent_the_json_schema_as_response_format() -> None:
    model = ScriptedChatModel(['{"city": "Oslo", "celsius": -3}'])
    Runner(agent_for(model, Weather)).invoke("?", with_chat_model_options(temperature=0))
    options = model.calls[0].options
    assert options is not None and options.temperature == 0
    response_format = options.extra["response_format"]  # type: ignore[index]
    assert response_format["type"] == "json_schema"
    schema = response_format["json_schema"]["schema"]
    assert response_format["json_schema"]["name"] == "Weather"
    assert schema["required"] == ["city", "celsius"]
    assert schema["properties"]["city"] == {"type": "string", "description": "the city."}


def test_invalid_output_goes_back_to_the_model_and_is_corrected() -> None:
    model = ScriptedChatModel(
        [
            "It is sunny in Paris!",
            '{"city": "Paris", "celsius": "warm"}',
            '```json\n{"city": "Paris", "celsius": 20}\n```',
        ]
    )
    result = Runner(agent_for(model, Weather)).invoke("weather?")
    assert result.output == Weather("Paris", 20.0)
    first_fix = model.calls[1].messages[-1]
    assert first_fix.role is Role.USER
    assert "not valid JSON" in first_fix.content
    second_fix = model.calls[2].messages[-1]
    assert "'answer.celsius' must be a number (got 'warm')" in second_fix.content
    # every reply was delivered, the invalid ones without a value
    assert [e.output.customized_output for e in result.events] == [None, None, Weather("Paris", 20.0)]  # type: ignore[union-attr]


def test_output_still_invalid_after_the_corrections_ends_the_run() -> None:
    model = ScriptedChatModel(["nope", "still no", "never"])
    runner = Runner(agent_for(model, Weather, max_output_corrections=1))
    with pytest.raises(OutputValidationError, match="after 1 correction"):
        runner.invoke("weather?")
    assert len(model.calls) == 2


@tool
def lookup_temperature(city: str) -> float:
    """Look up the temperature of a city."""
    return {"Paris": 18.0}.get(city, 0.0)


def test_structured_output_with_a_tool_in_the_same_agent() -> None:
    model = ScriptedChatModel(
        [
            calls_message(call("lookup_temperature", {"city": "Paris"}, id="t")),
            lambda messages: json.dumps({"city": "Paris", "celsius": float(messages[-1].content)}),
        ]
    )
    result = Runner(agent_for(model, Weather, tools=[lookup_temperature])).invoke("Paris?")
    assert result.output == Weather("Paris", 18.0)
    assert [e.get_message().role for e in result.events] == [  # type: ignore[union-attr]
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert model.calls[0].tools[0].name == "lookup_temperature"


@pytest.mark.parametrize(
    ("output_type", "reply", "expected"),
    [
        (Person, '{"name": "Ada", "age": 36}', Person("Ada", 36)),
        (Place, '{"city": "Lyon", "country": "FR"}', {"city": "Lyon", "country": "FR"}),
        (Mood, '{"value": "sad"}', Mood.SAD),
        (list[Person], '{"value": [{"name": "A", "age": 1}]}', [Person("A", 1)]),
        (dict[str, int], '{"value": {"a": 1}}', {"a": 1}),
    ],
)
def test_dataclasses_typeddicts_enums_and_containers(
    output_type: Any, reply: str, expected: Any
) -> None:
    model = ScriptedChatModel([reply])
    assert Runner(agent_for(model, output_type)).invoke("?").output == expected
    schema = model.calls[0].options.extra["response_format"]["json_schema"]["schema"]  # type: ignore[union-attr,index]
    assert schema["type"] == "object"


def test_tool_mode_asks_with_a_final_answer_tool() -> None:
    model = ScriptedChatModel(
        [
            calls_message(call("final_answer", {"city": "Rome"}, id="f1")),
            calls_message(call("final_answer", {"city": "Rome", "celsius": 25}, id="f2")),
        ]
    )
    result = Runner(agent_for(model, Weather, output_mode="tool")).invoke("Rome?")
    assert result.output == Weather("Rome", 25.0)
    assert [info.name for info in model.calls[0].tools] == ["final_answer"]
    options = model.calls[0].options
    assert options is not None and options.tool_choice == "required"
    assert "response_format" not in (options.extra or {})
    sent = model.calls[1].messages
    assert sent[-2].role is Role.TOOL and sent[-2].tool_call_id == "f1"
    assert "'answer.celsius' is required" in sent[-1].content
    assert json.loads(result.text) == {"city": "Rome", "celsius": 25}


def test_streaming_delivers_the_stream_then_the_value() -> None:
    model = ScriptedChatModel(['{"city": "Bern", "celsius": 9}'])
    result = Runner(agent_for(model, Weather), enable_streaming=True).invoke("?")
    assert result.output == Weather("Bern", 9.0)
    stream_event, value_event = result.events
    assert stream_event.output.message_output.is_streaming  # type: ignore[union-attr]
    assert value_event.output.message_output is None  # type: ignore[union-attr]
    assert value_event.output.customized_output == Weather("Bern", 9.0)  # type: ignore[union-attr]
    assert result.text == '{"city": "Bern", "celsius": 9}'


def test_a_type_without_json_form_is_refused_when_the_agent_is_made() -> None:
    with pytest.raises(AgentConfigError, match="output_type .*has no JSON schema"):
        agent_for(ScriptedChatModel([]), complex)
    with pytest.raises(AgentConfigError, match="output_mode must be one of"):
        agent_for(ScriptedChatModel([]), Weather, output_mode="magic")


def test_against_the_loopback_server() -> None:
    def handler(request: dict[str, Any]) -> Reply:
        assert request["response_format"]["type"] == "json_schema"
        if len(request["messages"]) == 1:
            return Reply('{"city": "Nice"}')
        return Reply('{"city": "Nice", "celsius": 23}')

    with FakeOpenAIServer(handler) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("a", "d", model, output_type=Weather)
        result = Runner(agent).invoke("Nice?")
        streamed = Runner(agent, enable_streaming=True).invoke("Nice?")
        second_request = server.requests[1]
    assert result.output == Weather("Nice", 23.0)
    assert streamed.output == Weather("Nice", 23.0)
    assert second_request["messages"][-1]["role"] == "user"
    assert "'answer.celsius' is required" in second_request["messages"][-1]["content"]
    assert result.usage.total_tokens > 0


def test_structured_agent_answers_as_an_agent_tool() -> None:
    from agentkit import AgentTool

    inner = agent_for(ScriptedChatModel(['{"city": "Kyiv", "celsius": 4}']), Weather)
    outer_model = ScriptedChatModel(
        [calls_message(call("extractor", {"request": "x"}, id="e")), lambda m: m[-1].content]
    )
    outer = ChatModelAgent("boss", "d", outer_model, tools=[AgentTool(inner)])
    assert json.loads(Runner(outer).invoke("go").text) == {"city": "Kyiv", "celsius": 4}


def test_tool_mode_against_the_loopback_server() -> None:

    def handler(request: dict[str, Any]) -> Reply:
        assert request["tool_choice"] == "required"
        assert [t["function"]["name"] for t in request["tools"]] == ["final_answer"]
        assert "response_format" not in request
        return Reply(tool_calls=[call("final_answer", '{"city": "Turin", "celsius": 17}')])

    with FakeOpenAIServer(handler) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("a", "d", model, output_type=Weather, output_mode="tool")
        plain = Runner(agent).invoke("Turin?")
        streamed = Runner(agent, enable_streaming=True).invoke("Turin?")
    for result in (plain, streamed):
        assert result.output == Weather("Turin", 17.0)
        assert json.loads(result.text) == {"city": "Turin", "celsius": 17}


def test_the_answer_is_converted_as_tool_arguments_are_quoted_numbers_included() -> None:
    # What a tool accepts as an argument, an answer may be: "21.5" for a float, "false" for
    # a bool (the same converter; it used to be refused and sent back for a correction).
    model = ScriptedChatModel(['{"city": "Paris", "celsius": "21.5", "sunny": "false"}'])
    result = Runner(agent_for(model, Weather)).invoke("weather?")
    assert result.output == Weather("Paris", 21.5, False)
    assert len(model.calls) == 1
    counted = ScriptedChatModel(['{"value": "3"}'])
    assert Runner(agent_for(counted, int)).invoke("how many?").output == 3


@pytest.mark.parametrize(
    ("mode", "reply", "instruction"),
    [
        (
            "response_format",
            "It is sunny.",
            "Reply again with only a JSON object that matches this JSON schema: {",
        ),
        (
            "tool",
            calls_message(call("final_answer", {"city": "Paris"}, id="f1")),
            "Call the final_answer tool again, with arguments that match this JSON schema: {",
        ),
    ],
)
def test_the_correction_tells_the_model_what_was_wrong_and_what_to_send(
    mode: str, reply: Any, instruction: str
) -> None:
    good = '{"city": "Paris", "celsius": 20}'
    model = ScriptedChatModel(
        [reply, good if mode == "response_format" else calls_message(call("final_answer", good))]
    )
    Runner(agent_for(model, Weather, output_mode=mode)).invoke("weather?")
    correction = model.calls[1].messages[-1].content
    assert correction.startswith("Your answer does not match the required format: ")
    assert instruction in correction
    schema = json.loads(correction[correction.index(instruction) + len(instruction) - 1 :])
    assert schema["required"] == ["city", "celsius"]
