"""Plan-execute-replan: a travel planner that plans, searches and revises its plan.

The planner breaks the trip request into steps; the executor carries them out one at a time
with flight, hotel and weather tools (deterministic fake data); after every step the
replanner either revises the remaining steps or answers with the finished itinerary.

Offline by default (scripted models play the planner, the executor and the replanner).
With ``OPENAI_API_KEY`` set all three talk to a real OpenAI-compatible endpoint:
``OPENAI_BASE_URL`` picks the server and ``AGENTKIT_MODEL`` the model (default
``gpt-4o-mini``).

    python samples/plan_execute.py
    python samples/plan_execute.py "Plan 3 days in Lisbon from Berlin, 16-18 May, 900 EUR"
    python samples/plan_execute.py --no-stream
"""

from __future__ import annotations

import json
import os
import re
import sys
import zlib
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import ask, banner, make_model, sample_args

from agentkit import AgentEvent, Message, Role, Runner, SequentialAgent, tool
from agentkit.prebuilt import planexecute
from agentkit.testing import call, calls_message

DEFAULT_REQUEST = (
    "Plan a weekend trip from Berlin to Lisbon, 2025-05-16 to 2025-05-18, for one person "
    "with a total budget of 900 EUR."
)

# --- tools (deterministic fake data) ---------------------------------------------------------

_AIRLINES = ["TP", "FR", "LH", "U2", "VY"]
_HOTELS = [
    ("Casa do Rio", "Alfama"),
    ("Hotel Miradouro", "Bairro Alto"),
    ("Baixa Suites", "Baixa"),
    ("Belem Garden Inn", "Belem"),
]
_WEATHER = ["sunny", "partly cloudy", "light showers", "sunny, breezy"]


def _seed(*parts: str) -> int:
    # crc32, not hash(): the same answer in every process.
    return zlib.crc32("|".join(part.strip().lower() for part in parts).encode())


@tool
def search_flights(origin: str, destination: str, date: str) -> list[dict[str, object]]:
    """Search one-way flights.

    Args:
        origin: departure city, e.g. "Berlin".
        destination: arrival city, e.g. "Lisbon".
        date: travel date as YYYY-MM-DD.
    """
    seed = _seed(origin, destination, date)
    flights: list[dict[str, object]] = []
    for n in range(3):
        hour = 6 + (seed >> (n * 3)) % 14
        minutes = ((seed >> (n * 5)) % 4) * 15
        flights.append(
            {
                "flight": f"{_AIRLINES[(seed + n) % len(_AIRLINES)]} {100 + (seed >> n) % 900}",
                "departs": f"{date} {hour:02d}:{minutes:02d}",
                "duration": "3h 25m",
                "price_eur": 79 + (seed >> (n * 4)) % 160,
            }
        )
    return sorted(flights, key=lambda flight: str(flight["departs"]))


@tool
def search_hotels(
    city: str, check_in: str, check_out: str, max_price_per_night: int | None = None
) -> list[dict[str, object]]:
    """Search hotels with free rooms.

    Args:
        city: the city, e.g. "Lisbon".
        check_in: arrival date as YYYY-MM-DD.
        check_out: departure date as YYYY-MM-DD.
        max_price_per_night: only hotels at or below this price in EUR.
    """
    seed = _seed(city, check_in, check_out)
    hotels = []
    for n, (name, area) in enumerate(_HOTELS):
        price = 70 + (seed >> (n * 4)) % 150
        if max_price_per_night is None or price <= max_price_per_night:
            hotels.append(
                {
                    "hotel": name,
                    "area": area,
                    "price_per_night_eur": price,
                    "rating": round(7.5 + ((seed >> n) % 24) / 10, 1),
                }
            )
    return hotels


@tool
def get_weather(city: str, date: str) -> str:
    """Get the weather forecast for a city on a day.

    Args:
        city: the city, e.g. "Lisbon".
        date: the day as YYYY-MM-DD.
    """
    seed = _seed(city, date)
    return f"{_WEATHER[seed % len(_WEATHER)]}, {18 + seed % 9}°C"


# --- the offline script: what the three models answer -------------------------------------------

_OUT, _BACK = "2025-05-16", "2025-05-18"


def scripted_planner(messages: list[Message]) -> Message:
    """Plays the planner: a four-step plan for the trip."""
    return calls_message(
        call(
            "plan",
            {
                "steps": [
                    f"Find the cheapest flights Berlin -> Lisbon on {_OUT} and Lisbon -> "
                    f"Berlin on {_BACK}, and report the round-trip price.",
                    f"Find a well-rated hotel in Lisbon from {_OUT} to {_BACK} (2 nights) "
                    "that fits the budget.",
                    f"Get the weather forecast in Lisbon for {_OUT}, 2025-05-17 and {_BACK}.",
                    "Write the itinerary: flights, hotel, a plan per day suited to the "
                    "weather, and the total cost against the 900 EUR budget.",
                ]
            },
        )
    )


def _step(messages: list[Message]) -> str:
    """The step the executor is asked to do: the last line of its user message."""
    user = next(m for m in messages if m.role is Role.USER)
    return user.content.rstrip().rsplit("\n", 1)[-1]


def scripted_executor(messages: list[Message]) -> Message | str:
    """Plays the executor: calls the tools the step needs, then reports what they found."""
    step = _step(messages).lower()
    results = [m for m in messages if m.role is Role.TOOL]
    if "flight" in step:
        if not results:
            return calls_message(
                call("search_flights", {"origin": "Berlin", "destination": "Lisbon",
                                        "date": _OUT}),
                call("search_flights", {"origin": "Lisbon", "destination": "Berlin",
                                        "date": _BACK}),
                content="Searching both directions.",
            )
        out, back = (min(json.loads(m.content), key=lambda f: f["price_eur"]) for m in results)
        total = out["price_eur"] + back["price_eur"]
        return (
            f"Cheapest flights: {out['flight']} on {out['departs']} ({out['price_eur']} EUR) "
            f"and {back['flight']} on {back['departs']} ({back['price_eur']} EUR); "
            f"round trip {total} EUR."
        )
    if "hotel" in step:
        if not results:
            limit = _euros(step, r"at most (\d+) eur per night") or 200
            return calls_message(
                call(
                    "search_hotels",
                    {"city": "Lisbon", "check_in": _OUT, "check_out": _BACK,
                     "max_price_per_night": limit},
                )
            )
        hotels = json.loads(results[0].content)
        best = max(hotels, key=lambda h: h["rating"])
        return (
            f"Best rated within budget: {best['hotel']} in {best['area']}, rating "
            f"{best['rating']}, {best['price_per_night_eur']} EUR/night, "
            f"{2 * best['price_per_night_eur']} EUR for 2 nights."
        )
    if "weather" in step:
        days = [_OUT, "2025-05-17", _BACK]
        if not results:
            return calls_message(
                *(call("get_weather", {"city": "Lisbon", "date": day}) for day in days)
            )
        return "Forecast for Lisbon: " + "; ".join(
            f"{day}: {m.content}" for day, m in zip(days, results, strict=True)
        )
    return f"Done: {step}"


def _results(messages: list[Message]) -> list[str]:
    user = next(m for m in messages if m.role is Role.USER)
    return re.findall(r"^Result: (.*)$", user.content, flags=re.MULTILINE)


def _euros(text: str, pattern: str) -> int:
    found = re.search(pattern, text)
    return int(found.group(1)) if found else 0


def scripted_replanner(messages: list[Message]) -> Message:
    """Plays the replanner: narrows the plan after each step, then writes the itinerary."""
    results = _results(messages)
    if len(results) == 1:
        flights = _euros(results[0], r"round trip (\d+) EUR")
        return calls_message(
            call(
                "plan",
                {
                    "steps": [
                        f"Find a well-rated hotel in Lisbon from {_OUT} to {_BACK} (2 nights) "
                        f"for at most {(900 - flights - 200) // 2} EUR per night, keeping "
                        "200 EUR for food and transport.",
                        f"Get the weather forecast in Lisbon for {_OUT}, 2025-05-17 and "
                        f"{_BACK}.",
                        "Write the itinerary with the total cost.",
                    ]
                },
            )
        )
    if len(results) == 2:
        return calls_message(
            call(
                "plan",
                {
                    "steps": [
                        f"Get the weather forecast in Lisbon for {_OUT}, 2025-05-17 and "
                        f"{_BACK}.",
                        "Write the itinerary with the total cost.",
                    ]
                },
            )
        )
    flights_text, hotel, weather = results[:3]
    total = (
        _euros(flights_text, r"round trip (\d+) EUR") + _euros(hotel, r"(\d+) EUR for 2 nights")
    )
    itinerary = (
        "Your Lisbon weekend (16-18 May 2025):\n"
        f"- Flights: {flights_text}\n"
        f"- Hotel: {hotel}\n"
        f"- Weather: {weather}\n"
        "- Day 1: arrive, walk through Alfama and watch the sunset from a miradouro.\n"
        "- Day 2: Belem in the morning, LX Factory and the riverside in the afternoon.\n"
        "- Day 3: Baixa and Chiado, pasteis de nata, then the flight home.\n"
        f"Flights and hotel come to {total} EUR, leaving {900 - total} EUR of the 900 EUR "
        "budget for food, transport and sights."
    )
    return calls_message(call("respond", {"response": itinerary}))


# --- the agent ---------------------------------------------------------------------------------


def build_agent() -> SequentialAgent:
    """The travel planner: planner, executor with the travel tools, and replanner."""
    return planexecute.new(
        planexecute.new_planner(make_model(scripted_planner)),
        planexecute.new_executor(
            make_model(scripted_executor),
            tools=[search_flights, search_hotels, get_weather],
            max_iterations=10,
        ),
        planexecute.new_replanner(make_model(scripted_replanner)),
        max_iterations=8,
    )


def final_response(events: Sequence[AgentEvent]) -> str | None:
    """The final answer: the run's last message, when the replanner responded (ended the loop)."""
    if not any(e.action is not None and e.action.break_loop is not None for e in events):
        return None
    for event in reversed(events):
        message = event.get_message() if event.output is not None else None
        if message is not None:
            return message.content if event.agent_name == "replanner" else None
    return None


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Plan the trip and print the run live; returns its events."""
    args = sample_args(__doc__, DEFAULT_REQUEST, argv)
    banner("plan-execute travel planner")
    runner = Runner(build_agent(), enable_streaming=not args.no_stream)
    events = ask(runner, args.questions[0])
    answer = final_response(events)
    print("\n== Final answer ==")
    print(answer if answer is not None else "(no final answer: the step limit was reached)")
    return events


if __name__ == "__main__":
    main()
