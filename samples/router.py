"""A router that hands each question to the right agent: weather questions to a weather agent
(which calls a tool), everything else to a chat agent.

``set_sub_agents(router, [weather, chat])`` gives the router the ``transfer_to_agent`` tool
and a system prompt listing both agents with their descriptions; the model picks one, and
the flow wrapper runs it with the conversation so far (the router's turn rewritten as
``For context: ...`` messages). The sub-agents can transfer back to the router.

Offline by default (scripted models play the LLMs). With ``OPENAI_API_KEY`` set it talks to
a real OpenAI-compatible endpoint (``OPENAI_BASE_URL``, ``AGENTKIT_MODEL``).

    python samples/router.py
    python samples/router.py "What's the weather in Oslo?"
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import ask, banner, make_model, sample_args

from agentkit import (
    Agent,
    AgentEvent,
    ChatModelAgent,
    ExitTool,
    Message,
    Role,
    Runner,
    set_sub_agents,
    tool,
)
from agentkit.testing import call, calls_message

QUESTIONS = ["What's the weather in Beijing?", "Tell me something fun about octopuses."]

# A tiny offline weather service (fictional readings).
WEATHER: dict[str, str] = {
    "beijing": "25°C, sunny, light wind from the north-west",
    "oslo": "4°C, drizzle, wind 20 km/h",
    "lisbon": "19°C, clear skies",
}


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: the city's name, e.g. "Beijing".
    """
    reading = WEATHER.get(city.strip().lower())
    if reading is None:
        return f"no weather station data for {city}"
    return f"the weather in {city} is {reading}"


def user_question(messages: list[Message]) -> str:
    """The user's latest question (context messages from other agents are user messages too)."""
    for message in reversed(messages):
        if message.role is Role.USER and not message.content.startswith("For context:"):
            return message.content
    return ""


def scripted_router(messages: list[Message]) -> Message | str:
    """Plays the router: weather questions go to WeatherAgent, the rest to ChatAgent."""
    dest = "WeatherAgent" if "weather" in user_question(messages).lower() else "ChatAgent"
    return calls_message(call("transfer_to_agent", {"agent_name": dest}))


def scripted_weather(messages: list[Message]) -> Message | str:
    """Plays the weather agent: looks the city up, then answers with the reading."""
    last = messages[-1]
    if last.role is Role.TOOL:
        return f"Right now, {last.content}."
    match = re.search(r"\bin ([A-Z][\w-]*)", user_question(messages))
    city = match.group(1) if match else "Beijing"
    return calls_message(call("get_weather", {"city": city}))


def scripted_chat(messages: list[Message]) -> Message | str:
    """Plays the chat agent."""
    question = user_question(messages).lower()
    if "octopus" in question:
        return (
            "Octopuses have three hearts and blue blood, and each of their eight arms can "
            "taste what it touches."
        )
    return "Happy to chat! Ask me anything."


def build_agent() -> Agent:
    """The router with its two sub-agents."""
    router = ChatModelAgent(
        name="RouterAgent",
        description="A router that transfers tasks to other agents.",
        model=make_model(scripted_router),
        instruction=(
            "You are a router. Never answer questions yourself: transfer each one to the "
            "agent best suited for it. Call exit only if the user wants to stop."
        ),
        exit_tool=ExitTool(),
    )
    weather = ChatModelAgent(
        name="WeatherAgent",
        description="This agent can get the current weather for a given city.",
        model=make_model(scripted_weather),
        instruction=(
            "You answer weather questions. Call get_weather for the city the user asks about "
            "and answer in one sentence."
        ),
        tools=[get_weather],
    )
    chat = ChatModelAgent(
        name="ChatAgent",
        description="A general-purpose agent for handling conversational chat.",
        model=make_model(scripted_chat),
        instruction="You are a friendly assistant. Answer briefly, in one or two sentences.",
    )
    return set_sub_agents(router, [weather, chat])


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Route each question and print the runs live; returns all their events."""
    args = sample_args(__doc__, QUESTIONS, argv)
    banner("router")
    runner = Runner(build_agent(), enable_streaming=not args.no_stream)
    events: list[AgentEvent] = []
    for question in args.questions:
        print()
        events.extend(ask(runner, question, show_run_path=True))
    return events


if __name__ == "__main__":
    main()
