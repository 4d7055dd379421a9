"""A layered supervisor: a supervisor whose workers include another supervisor with its own team.

The top supervisor has a research agent and a math team. The math team is itself a supervisor
system (``supervisor.new``) over three agents that each do one operation with a tool:
subtract, multiply, divide. The top supervisor transfers to the math team like to any worker;
the math supervisor runs its own hand-overs and, when its flow ends, the result goes back up
(eino-examples ``adk/multiagent/layered-supervisor``).

The math team runs with a history of its own (it sees the user's question and its own
hand-overs, not what the research agent said), so the research agent stores its findings in a
session value (``output_key="facts"``) and the math agents' instructions include it
(``{facts}``: instructions are formatted with the session's values).

    python samples/layered_supervisor.py
    python samples/layered_supervisor.py --no-stream

Offline by default (scripted models); live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import ask, banner, make_model, sample_args

from agentkit import Agent, AgentEvent, ChatModelAgent, Message, Role, Runner, tool
from agentkit.prebuilt import supervisor
from agentkit.testing import call, calls_message

DEFAULT_QUERY = (
    "Find the US and New York state GDP in 2024. What % of US GDP was New York state? "
    "Then multiply that percentage by 1.589."
)
SEARCH_RESULT = (
    "In 2024, the US GDP was $29.18 trillion and New York State's GDP was $2.297 trillion"
)


@tool
def search(query: str) -> str:
    """Search the internet for information.

    Args:
        query: what to look for.
    """
    return SEARCH_RESULT


@tool
def subtract(a: float, b: float) -> float:
    """Subtract b from a."""
    return a - b


@tool
def multiply(a: float, b: float) -> float:
    """Multiply a by b."""
    return a * b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


# --- the offline script --------------------------------------------------------------------


def said_by(messages: list[Message], agent: str) -> str | None:
    marker = f"For context: [{agent}] said: "
    for message in reversed(messages):
        if message.role is Role.USER and message.content.startswith(marker):
            return message.content[len(marker) :].rstrip(".")
    return None


def _numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)]


def scripted_top(messages: list[Message]) -> Message | str:
    """The top supervisor: research, then the math team, then the answer."""
    if said_by(messages, "research_agent") is None:
        return calls_message(call("transfer_to_agent", {"agent_name": "research_agent"}))
    product = said_by(messages, "multiply_agent")
    if product is None:
        return calls_message(call("transfer_to_agent", {"agent_name": "math_supervisor"}))
    share = said_by(messages, "divide_agent")
    return f"New York state was {share}% of US GDP in 2024; times 1.589 that is {product}."


def scripted_math(messages: list[Message]) -> Message | str:
    """The math supervisor: divide first (the share), then multiply, then hand back."""
    if said_by(messages, "divide_agent") is None:
        return calls_message(call("transfer_to_agent", {"agent_name": "divide_agent"}))
    if said_by(messages, "multiply_agent") is None:
        return calls_message(call("transfer_to_agent", {"agent_name": "multiply_agent"}))
    return "The math is done."


def scripted_researcher(messages: list[Message]) -> Message | str:
    if messages[-1].role is Role.TOOL:
        return messages[-1].content
    return calls_message(call("search", {"query": "US GDP and New York state GDP 2024"}))


def _facts(messages: list[Message]) -> str:
    """The research findings, as the math agents' instructions carry them (``{facts}``)."""
    system = messages[0].content if messages and messages[0].role is Role.SYSTEM else ""
    return system.partition("Facts: ")[2]


def scripted_divider(messages: list[Message]) -> Message | str:
    if messages[-1].role is Role.TOOL:
        return f"{float(messages[-1].content):.2f}"
    us, ny = _numbers(_facts(messages))[1:3]
    return calls_message(call("divide", {"a": round(ny * 100, 3), "b": us}))


def scripted_multiplier(messages: list[Message]) -> Message | str:
    if messages[-1].role is Role.TOOL:
        return f"{float(messages[-1].content):.2f}"
    share = float(said_by(messages, "divide_agent") or 0)
    return calls_message(call("multiply", {"a": share, "b": 1.589}))


def scripted_subtractor(messages: list[Message]) -> Message | str:
    if messages[-1].role is Role.TOOL:
        return messages[-1].content
    a, b = [*_numbers(messages[-1].content), 0.0, 0.0][:2]
    return calls_message(call("subtract", {"a": a, "b": b}))


def _worker(
    name: str,
    what: str,
    script: object,
    tools: list[object],
    *,
    facts: bool = True,
    **extra: object,
) -> ChatModelAgent:
    known = " Facts: {facts}" if facts else ""
    return ChatModelAgent(
        name,
        f"the agent responsible for {what}",
        make_model(script),  # type: ignore[arg-type]
        instruction=(
            f"You are a {what} agent. Assist only with {what}. Respond with the result of "
            f"your work only, nothing else.{known}"
        ),
        tools=tools,  # type: ignore[arg-type]
        **extra,  # type: ignore[arg-type]
    )


def build_agent() -> Agent:
    """The top supervisor over the research agent and the math supervisor's team."""
    math_team = supervisor.new(
        ChatModelAgent(
            "math_supervisor",
            "the team responsible for any math: subtraction, multiplication, division",
            make_model(scripted_math),
            instruction=(
                "You manage math agents: subtract_agent, multiply_agent, divide_agent. Give "
                "each operation to the right agent, one at a time. Do no math yourself. "
                "Facts: {facts}"
            ),
        ),
        [
            _worker("subtract_agent", "math subtractions", scripted_subtractor, [subtract]),
            _worker("multiply_agent", "math multiplications", scripted_multiplier, [multiply]),
            _worker("divide_agent", "math divisions", scripted_divider, [divide]),
        ],
    )
    research = _worker(
        "research_agent", "research", scripted_researcher, [search], facts=False, output_key="facts"
    )
    top = ChatModelAgent(
        "supervisor",
        "answers questions with a research agent and a math team",
        make_model(scripted_top),
        instruction=(
            "You manage a research agent (research_agent) and a math team (math_supervisor). "
            "Give research to research_agent and any math to math_supervisor, one at a time. "
            "When both are done, answer the user in one sentence."
        ),
    )
    return supervisor.new(top, [research, math_team])


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Ask the layered team; prints the run live and returns its events."""
    args = sample_args(__doc__, DEFAULT_QUERY, argv)
    banner("layered supervisor")
    runner = Runner(build_agent(), enable_streaming=not args.no_stream)
    return ask(runner, args.questions[0], show_run_path=True)


if __name__ == "__main__":
    main()
