"""The sample app's agents: a concierge that transfers to a travel agent with an approval tool.

Offline by default (scripted models play the LLMs, so every run is the same); with
``OPENAI_API_KEY`` set they talk to a real OpenAI-compatible endpoint (``OPENAI_BASE_URL``,
``AGENTKIT_MODEL``), see ``samples/_common.py``.
"""

from __future__ import annotations

import os
import re
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _common import make_model

from agentkit import Agent, ChatModelAgent, Message, Role, interrupt, set_sub_agents, tool
from agentkit.testing import call, calls_message

AGENT_NAME = "concierge"
"""The name the app submits runs under."""

WEATHER = {
    "lisbon": "19°C and clear",
    "paris": "sunny, 21°C",
    "oslo": "snow showers, -2°C",
}


@tool
def get_weather(city: str) -> str:
    """Get the current weather of a city.

    Args:
        city: the city name, e.g. "Lisbon".
    """
    return WEATHER.get(city.strip().lower(), f"no weather data for {city}")


@tool
def book_hotel(city: str, nights: int) -> str:
    """Book a hotel room. A human must approve every booking.

    Args:
        city: where.
        nights: how many nights.
    """
    approved = interrupt(f"Book a hotel in {city} for {nights} nights (120 EUR a night)?")
    if not approved:
        return f"the booking in {city} was declined by the user"
    reference = zlib.crc32(f"{city}:{nights}".encode()) % 10_000
    return f"booked {nights} nights in {city}, reference HTL-{reference:04d}"


def _question(messages: list[Message]) -> str:
    for message in reversed(messages):
        if message.role is Role.USER and not message.content.startswith("For context:"):
            return message.content
    return ""


def _city(messages: list[Message]) -> str:
    match = re.search(r"\b(?:in|to) ([A-Z][\w-]*)", _question(messages))
    return match.group(1) if match else "Lisbon"


def scripted_concierge(messages: list[Message]) -> Message | str:
    """Plays the concierge: every request goes to the travel agent."""
    return calls_message(call("transfer_to_agent", {"agent_name": "travel"}))


def scripted_travel(messages: list[Message]) -> Message | str:
    """Plays the travel agent: weather, then a booking (a human approves it), then an answer."""
    city = _city(messages)
    last = messages[-1]
    if last.role is not Role.TOOL or last.tool_name == "transfer_to_agent":
        return calls_message(
            call("get_weather", {"city": city}), content=f"Let me check the weather in {city}."
        )
    if last.tool_name == "get_weather":
        return calls_message(
            call("book_hotel", {"city": city, "nights": 2}),
            content=f"It is {last.content} in {city}. I will book a hotel for you.",
        )
    if "declined" in last.content:
        return "No booking was made, as you declined it. Anything else I can do?"
    return f"All set: {last.content}. Enjoy {city}!"


def build_agent() -> Agent:
    """The concierge with its travel agent."""
    concierge = ChatModelAgent(
        name=AGENT_NAME,
        description="greets the user and hands travel requests to the travel agent",
        model=make_model(scripted_concierge),
        instruction="Transfer every travel request to the travel agent.",
    )
    travel = ChatModelAgent(
        name="travel",
        description="plans trips: checks the weather and books hotels",
        model=make_model(scripted_travel),
        instruction=(
            "You help with trips. Check the weather with get_weather, then book a hotel with "
            "book_hotel (2 nights unless told otherwise), then confirm in one sentence."
        ),
        tools=[get_weather, book_hotel],
    )
    return set_sub_agents(concierge, [travel])
