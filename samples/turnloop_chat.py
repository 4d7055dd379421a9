"""A TurnLoop chat: type a new message while the agent is still working, and it changes course.

Every line you type is pushed into a :class:`~agentkit.TurnLoop`. The loop runs one turn at a
time; a line typed while a turn runs preempts it: the turn stops at its next safe point (or at
once after half a second), and the next turn starts with everything: what you said before,
what the agent did so far (its tool calls, answered), and the new line. The flight search
takes a few seconds, so there is time to change your mind.

    python samples/turnloop_chat.py
    you> Find me a flight to Lisbon
    you> Actually, make it Porto          (typed while it searches)

End with an empty line, ``/quit`` or Ctrl-D: the loop handles what is left, then ends.
Offline by default (a scripted model); live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import os
import re
import sys
import zlib
from collections.abc import Iterator, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, make_model

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    ChatModelAgent,
    Message,
    Role,
    TurnLoop,
    TurnLoopExit,
    cancellable_sleep,
    print_events,
    tool,
)
from agentkit.results import RunIterator
from agentkit.testing import call, calls_message
from agentkit.turnloop import TurnContext

SEARCH_SECONDS = float(os.environ.get("SAMPLE_STEP_SECONDS", "3.0"))  # how long a search takes
PREEMPT_TIMEOUT = 0.5  # how long a new message waits for the running turn's safe point
CITIES = ("Lisbon", "Porto", "Madrid", "Seville", "Barcelona", "Valencia")


@tool
def search_flights(destination: str) -> str:
    """Search tomorrow's flights from Berlin to a city.

    Args:
        destination: the city to fly to.
    """
    print(f"  [search_flights] searching {destination}...", flush=True)
    cancellable_sleep(SEARCH_SECONDS)  # a new message cuts the search short
    seed = zlib.crc32(destination.lower().encode())
    flights, price, hour = 2 + seed % 3, 59 + seed % 120, 7 + seed % 12
    return f"{destination}: {flights} flights tomorrow, the cheapest {price} EUR at {hour}:05"


def scripted_travel_agent(messages: list[Message]) -> Message | str:
    """Plays the LLM offline: searches the city of the latest user message, then answers."""
    last = messages[-1]
    if last.role is Role.TOOL:
        return f"Here is what I found: {last.content}."
    cities = [city for city in CITIES if re.search(city, last.content, re.IGNORECASE)]
    if not cities:
        return f"Where would you like to fly? (I know {', '.join(CITIES)}.)"
    return calls_message(
        call("search_flights", {"destination": cities[-1]}, id=f"s{len(messages)}")
    )


def show_turn(turn: TurnContext[str], events: RunIterator) -> None:
    """Print a turn as it happens; a turn stopped by a new message says so."""

    def shown() -> Iterator[AgentEvent]:
        for event in events:
            if isinstance(event.err, AgentCancelledError) and turn.preempted:
                print("\n  (stopped: a new message came in)", flush=True)
                continue
            yield event

    print_events(shown(), raise_errors=False)
    print(flush=True)


def build_loop() -> TurnLoop[str]:
    agent = ChatModelAgent(
        "travel_agent",
        "finds flights",
        make_model(scripted_travel_agent),
        instruction=(
            "You find flights from Berlin with search_flights. The user may change their mind "
            "while you work: always follow their latest message. Answer in one sentence."
        ),
        tools=[search_flights],
    )
    return TurnLoop(agent, on_events=show_turn)


def chat(lines: Iterator[str]) -> TurnLoopExit[str]:
    """Push every line; end at an empty line or /quit; return how the loop ended."""
    with build_loop() as loop:
        for line in lines:
            text = line.strip()
            if text in ("", "/quit"):
                break
            loop.push(text, preempt=True, preempt_timeout=PREEMPT_TIMEOUT)
    return loop.wait()


def stdin_lines() -> Iterator[str]:
    """The lines typed; piped input is echoed, so a transcript shows who said what."""
    interactive = sys.stdin.isatty()
    while True:
        try:
            line = input("you> " if interactive else "")
        except EOFError:
            return
        if not interactive:
            print(f"you> {line}", flush=True)
        yield line


def main(argv: Sequence[str] | None = None) -> int:
    banner("TurnLoop chat")
    print("Type a message; type another while the agent works to change its course.\n")
    exit_state = chat(stdin_lines())
    if exit_state.reason is not None:
        print(f"the chat ended with an error: {exit_state.reason!r}", file=sys.stderr)
        return 1
    print("bye.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
