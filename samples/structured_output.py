"""Structured output: an agent that answers with a typed value, using a tool on the way.

The agent looks up the weather with a tool, then answers with a ``TripAdvice`` (an attrs
class): the model is asked for JSON matching its schema, the reply is checked and converted,
and an invalid reply goes back to the model with what was wrong. ``result.output`` is the
``TripAdvice``.

    python samples/structured_output.py
    python samples/structured_output.py "Should I go to Oslo this weekend?"

Offline by default (the scripted model first answers with a mistake, to show the correction);
live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import enum
import json
import os
import re
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attrs
from _common import banner, make_model, sample_args

from agentkit import ChatModelAgent, Message, Role, Runner, tool
from agentkit.testing import call, calls_message

DEFAULT_QUESTION = "Should I go to Lisbon this weekend?"


class Verdict(enum.Enum):
    """Whether to go."""

    GO = "go"
    WAIT = "wait"


@attrs.define
class TripAdvice:
    """Advice about a weekend trip.

    Args:
        city: the destination.
        verdict: go now, or wait for better weather.
        reasons: short reasons for the verdict.
        pack: what to pack.
    """

    city: str
    verdict: Verdict
    reasons: list[str]
    pack: list[str] = attrs.Factory(list)


@tool
def get_weather(city: str) -> dict[str, object]:
    """Get the weekend forecast for a city.

    Args:
        city: the city, for example "Lisbon".
    """
    sunny = city.lower() not in ("oslo", "bergen")
    return {"city": city, "sky": "sunny" if sunny else "rain", "celsius": 24 if sunny else 6}


def scripted_advisor(messages: list[Message]) -> Message | str:
    """Plays the LLM offline: weather first, then a wrong answer, then a corrected one."""
    last = messages[-1]
    question = next(m.content for m in messages if m.role is Role.USER)
    found = re.search(r"\b(?:to|in) ([A-Z][\w-]+)", question)
    city = found.group(1) if found else "Lisbon"
    if last.role is Role.USER and last.content == question:
        return calls_message(call("get_weather", {"city": city}, id="w1"))
    if last.role is Role.TOOL:
        forecast = json.loads(last.content)
        return json.dumps({"city": city, "verdict": "maybe", "reasons": [forecast["sky"]]})
    forecast = json.loads(next(m.content for m in messages if m.role is Role.TOOL))
    good = forecast["sky"] == "sunny"
    return json.dumps(
        {
            "city": city,
            "verdict": "go" if good else "wait",
            "reasons": [f"{forecast['sky']}, {forecast['celsius']} °C"],
            "pack": ["sunglasses", "sunscreen"] if good else ["umbrella", "boots"],
        }
    )


def build_agent() -> ChatModelAgent:
    """The advisor: a weather tool, and ``TripAdvice`` as its output type."""
    return ChatModelAgent(
        "advisor",
        "advises on weekend trips",
        make_model(scripted_advisor),
        instruction="Check the weather with get_weather, then advise on the trip.",
        tools=[get_weather],
        output_type=TripAdvice,
        output_key="advice",
    )


def main(argv: Sequence[str] | None = None) -> TripAdvice:
    """Ask for advice and print the typed answer."""
    args = sample_args(__doc__, DEFAULT_QUESTION, argv)
    banner("structured output")
    print(f"> {args.questions[0]}")
    result = Runner(build_agent()).invoke(args.questions[0])
    for event in result.events:
        message = event.get_message()
        typed = event.output.customized_output if event.output is not None else None
        if message is None:
            continue
        if message.tool_calls:
            print(f"  calls {', '.join(c.function.name for c in message.tool_calls)}")
        elif message.role is Role.TOOL:
            print(f"  tool result: {message.content}")
        elif typed is None:
            print(f"  rejected answer: {message.content}")
    advice: TripAdvice = result.output
    print(f"\ncity:    {advice.city}\nverdict: {advice.verdict.value}")
    print(f"reasons: {'; '.join(advice.reasons)}\npack:    {', '.join(advice.pack)}")
    print(f"\nsession['advice'] is the same object: {result.session_values['advice'] is advice}")
    return advice


if __name__ == "__main__":
    main()
