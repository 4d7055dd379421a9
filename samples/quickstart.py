"""Quickstart: a weather and calculator assistant.

Offline by default (a scripted model plays the LLM). With ``OPENAI_API_KEY`` set it talks to
a real OpenAI-compatible endpoint: ``OPENAI_BASE_URL`` picks the server (OpenAI, vLLM,
Ollama, DeepSeek, ...) and ``AGENTKIT_MODEL`` the model (default ``gpt-4o-mini``).

    python samples/quickstart.py
    python samples/quickstart.py "What is 17 * 23, and is it raining in Oslo?"
    python samples/quickstart.py --no-stream
"""

from __future__ import annotations

import ast
import operator
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import ask, banner, make_model, sample_args

from agentkit import (
    AgentEvent,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    tool,
)
from agentkit.testing import call, calls_message

WEATHER = {
    "paris": "sunny, 21°C",
    "london": "light rain, 14°C",
    "oslo": "snow showers, -2°C",
    "tokyo": "cloudy, 18°C",
}


@tool
def get_weather(city: str) -> str:
    """Get the current weather of a city.

    Args:
        city: the city name, e.g. "Paris".
    """
    return WEATHER.get(city.strip().lower(), f"no weather data for {city}")


_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))  # type: ignore[no-any-return]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))  # type: ignore[no-any-return]
    raise ValueError(f"unsupported expression: {ast.dump(node)}")


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression (+, -, *, /, %, **).

    Args:
        expression: the expression, e.g. "17 * 23".
    """
    try:
        value = _evaluate(ast.parse(expression, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError) as error:
        return f"error: {error}"
    return str(int(value) if float(value).is_integer() else value)


def scripted_assistant(messages: list[Message]) -> Message | str:
    """Plays the LLM offline: asks for the tools on the first turn, then answers."""
    last = messages[-1]
    if last.role is Role.USER:
        return calls_message(
            call("get_weather", {"city": "Paris"}),
            call("calculate", {"expression": "17 * 23"}),
            content="Let me check the weather and do the math.",
        )
    results = {m.tool_name: m.content for m in messages if m.role is Role.TOOL}
    return (
        f"In Paris it is {results.get('get_weather')}, and 17 * 23 = "
        f"{results.get('calculate')}."
    )


def build_agent() -> ChatModelAgent:
    """The assistant: a chat model with the weather and calculator tools."""
    return ChatModelAgent(
        name="assistant",
        description="answers questions about the weather and does arithmetic",
        model=make_model(scripted_assistant),
        instruction=(
            "You are a helpful assistant. Use get_weather for weather questions and calculate "
            "for arithmetic. Answer in one or two sentences."
        ),
        tools=[get_weather, calculate],
    )


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Run the assistant on a question and print the run live."""
    args = sample_args(__doc__, "What's the weather in Paris, and what is 17 * 23?", argv)
    banner("quickstart")
    runner = Runner(build_agent(), enable_streaming=not args.no_stream)
    return ask(runner, args.questions[0])


if __name__ == "__main__":
    main()
