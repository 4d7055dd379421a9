"""What a function tool may return: the Python values sent to the model as JSON.

A ``str`` goes as it is; dates, times, durations, decimals, UUIDs, paths, enums, attrs and
dataclass instances and pydantic models go as JSON; anything else is a ``ToolError`` naming
the tool, the part of the result and its type.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import pathlib
import re
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from pydantic import BaseModel

from agentkit import (
    AgentEvent,
    AgentOutput,
    ChatModelAgent,
    Role,
    Runner,
    ToolError,
    tool,
)
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

UTC = datetime.timezone.utc


class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"


@attrs.frozen
class Slot:
    starts: datetime.datetime
    length: datetime.timedelta


@dataclasses.dataclass
class Invoice:
    id: uuid.UUID
    total: decimal.Decimal
    file: pathlib.Path
    level: Level


class Booking(BaseModel):
    slot_start: datetime.datetime
    seats: int


class Clock:
    """A class with no JSON form."""


def result_of(value: Any) -> str:
    @tool
    def give() -> Any:
        """Give the value."""
        return value

    return give.invoke("")


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        (datetime.datetime(2025, 1, 31, 9, 30, tzinfo=UTC), '"2025-01-31T09:30:00+00:00"'),
        (datetime.datetime(2025, 1, 31, 9, 30, 0, 250), '"2025-01-31T09:30:00.000250"'),
        (datetime.date(2025, 1, 31), '"2025-01-31"'),
        (datetime.time(9, 30), '"09:30:00"'),
        (datetime.timedelta(days=1, hours=2, minutes=30), '"P1DT2H30M"'),
        (datetime.timedelta(seconds=-90), '"-PT1M30S"'),
        (decimal.Decimal("12.50"), '"12.50"'),
        (uuid.UUID("0b6f3e9c-8f43-4f1b-9a8e-1d2f3c4b5a69"), '"0b6f3e9c-8f43-4f1b-9a8e-1d2f3c4b5a69"'),
        (pathlib.PurePosixPath("data/report.csv"), '"data/report.csv"'),
        (Level.HIGH, "high"),  # an enum alone is its value, as text
        (frozenset({"x"}), '["x"]'),
        ((1, "a"), '[1, "a"]'),
    ],
    ids=lambda value: type(value).__name__,
)
def test_each_json_able_type_is_sent_as_json(value: Any, sent: str) -> None:
    assert result_of(value) == sent


def test_records_and_models_holding_such_values_are_objects() -> None:
    starts = datetime.datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
    value = {
        "slot": Slot(starts, datetime.timedelta(minutes=45)),
        "invoice": Invoice(
            uuid.UUID(int=1), decimal.Decimal("9.90"), pathlib.Path("inv/1.pdf"), Level.LOW
        ),
        "booking": Booking(slot_start=starts, seats=2),
        "levels": {"low": [Level.HIGH]},
    }
    assert json.loads(result_of(value)) == {
        "slot": {"starts": "2025-03-01T08:00:00+00:00", "length": "PT45M"},
        "invoice": {
            "id": "00000000-0000-0000-0000-000000000001",
            "total": "9.90",
            "file": "inv/1.pdf",
            "level": "low",
        },
        "booking": {"slot_start": "2025-03-01T08:00:00Z", "seats": 2},
        "levels": {"low": ["high"]},
    }


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (Clock(), "result is of type Clock"),
        ({"at": [1, Clock()]}, "result['at'][1] is of type Clock"),
        ([Slot(Clock(), datetime.timedelta())], "result[0].starts is of type Clock"),  # type: ignore[arg-type]
        ({"pairs": {(1, 2): "pair"}}, "result['pairs'] has a key of type tuple: (1, 2)"),
        ({Level.LOW: 1}, "result has a key of type Level: <Level.LOW: 'low'>"),
        (b"bytes", "result is of type bytes"),
    ],
)
def test_anything_else_is_a_tool_error_naming_the_tool_the_part_and_the_type(
    value: Any, where: str
) -> None:
    with pytest.raises(ToolError) as caught:
        result_of(value)
    assert caught.value.tool_name == "give"
    assert str(caught.value).startswith(
        f"give: the result cannot be encoded as JSON: {where}, which has no JSON form; return "
        "a str, or data made of dict (str keys), list, tuple, set, str, int, float, bool, None, "
        "enums, datetime, date, time, timedelta, Decimal, UUID, pathlib paths"
    )


def test_a_result_that_contains_itself_is_a_tool_error_saying_so() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ToolError, match="give: the result cannot be encoded as JSON: the result "
                       "contains itself; return a str"):
        result_of(loop)


def test_a_streaming_tool_sends_each_chunk_as_json() -> None:
    @tool
    def ticks() -> Iterator[datetime.date]:
        """Yield dates."""
        yield datetime.date(2025, 1, 1)
        yield datetime.date(2025, 1, 2)

    assert list(ticks.stream("")) == ['"2025-01-01"', '"2025-01-02"']


def test_a_tool_returning_a_datetime_no_longer_ends_the_run() -> None:
    @tool
    def now() -> datetime.datetime:
        """The time now."""
        return datetime.datetime(2025, 6, 1, 12, 0, tzinfo=UTC)

    for streaming in (False, True):
        model = ScriptedChatModel([calls_message(call("now", id="n1")), "It is noon."])
        runner = Runner(ChatModelAgent("a", "d", model, tools=[now]), enable_streaming=streaming)
        result = runner.invoke("time?")
        assert result.error is None and result.text == "It is noon."
        sent = model.calls[1].messages[-1]
        assert (sent.role, sent.content) == (Role.TOOL, '"2025-06-01T12:00:00+00:00"')


def test_an_unencodable_result_ends_the_run_with_the_named_error() -> None:
    @tool
    def clock() -> Clock:
        """A clock."""
        return Clock()

    model = ScriptedChatModel([calls_message(call("clock", id="c1")), "unreachable"])
    result = Runner(ChatModelAgent("a", "d", model, tools=[clock])).query("go").result(
        raise_errors=False
    )
    assert isinstance(result.error, ToolError)
    assert "clock: the result cannot be encoded as JSON: result is of type Clock" in str(
        result.error
    )


def test_event_dicts_carry_the_same_json_for_custom_outputs() -> None:
    starts = datetime.datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
    event = AgentEvent(
        output=AgentOutput(
            customized_output={
                "slot": Slot(starts, datetime.timedelta(hours=1)),
                "total": decimal.Decimal("1.5"),
                "level": Level.HIGH,
                "booking": Booking(slot_start=starts, seats=1),
                "clock": Clock(),  # no JSON form: its repr, as before
            }
        )
    )
    data = event.to_dict()["output"]["customized_output"]
    assert data["slot"] == {"starts": "2025-03-01T08:00:00+00:00", "length": "PT1H"}
    assert data["total"] == "1.5" and data["level"] == "high"
    assert data["booking"] == {"slot_start": "2025-03-01T08:00:00Z", "seats": 1}
    assert re.fullmatch(r"<\S*Clock object at 0x[0-9a-f]+>", data["clock"])
    json.dumps(data)
