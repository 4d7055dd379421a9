"""One ReAct agent on each native model class: Anthropic, Gemini and OpenAI's Responses API.

Offline by default: each model talks to agentkit's fake server of its wire
(``FakeAnthropicServer``, ``FakeGeminiServer``, ``FakeResponsesServer``), real HTTP on
loopback, which plays a model that calls the weather tool and then answers. A provider whose
key is set is called for real instead: ``ANTHROPIC_API_KEY`` (model ``AGENTKIT_ANTHROPIC_MODEL``,
default ``claude-sonnet-4-5``), ``GEMINI_API_KEY`` (``AGENTKIT_GEMINI_MODEL``, default
``gemini-2.5-flash``), ``OPENAI_API_KEY`` (``AGENTKIT_RESPONSES_MODEL``, default ``gpt-5-mini``).

    python samples/native_models.py
    python samples/native_models.py "Is it raining in London?"
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from agentkit import ChatModelAgent, Runner, tool
from agentkit.models import AnthropicChatModel, GeminiChatModel, OpenAIResponsesModel
from agentkit.testing import (
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeResponsesServer,
    Reply,
    call,
)

WEATHER = {"paris": "sunny, 21°C", "london": "light rain, 14°C", "oslo": "snow showers, -2°C"}


@tool
def get_weather(city: str) -> str:
    """Get the current weather of a city.

    Args:
        city: the city name, e.g. "Paris".
    """
    return WEATHER.get(city.strip().lower(), f"no weather data for {city}")


def _script() -> list[Reply]:
    """What the fake servers answer: a thought and a tool call, then the answer."""
    return [
        Reply(
            reasoning_content="The user asks about Paris: I should look the weather up.",
            tool_calls=[call("get_weather", {"city": "Paris"})],
        ),
        Reply("It is sunny and 21°C in Paris."),
    ]


@contextlib.contextmanager
def _model(
    key: str,
    live: Callable[[], Any],
    fake: Callable[[], Any],
    offline: Callable[[str], Any],
) -> Iterator[tuple[Any, str]]:
    """The provider's model: live when its key is set, else on its fake server."""
    if os.environ.get(key):
        with live() as model:
            yield model, "live"
        return
    with fake() as server:
        server.queue(*_script())
        with offline(server.base_url) as model:
            yield model, f"offline, {type(server).__name__}"


def models() -> Iterator[contextlib.AbstractContextManager[tuple[Any, str]]]:
    """The three models, as context managers."""
    yield _model(
        "ANTHROPIC_API_KEY",
        lambda: AnthropicChatModel(
            os.environ.get("AGENTKIT_ANTHROPIC_MODEL", "claude-sonnet-4-5"), thinking=2048
        ),
        FakeAnthropicServer,
        lambda url: AnthropicChatModel("claude-fake", base_url=url, api_key="-", thinking=2048),
    )
    yield _model(
        "GEMINI_API_KEY",
        lambda: GeminiChatModel(os.environ.get("AGENTKIT_GEMINI_MODEL", "gemini-2.5-flash")),
        FakeGeminiServer,
        lambda url: GeminiChatModel("gemini-fake", base_url=url, api_key="-"),
    )
    yield _model(
        "OPENAI_API_KEY",
        lambda: OpenAIResponsesModel(os.environ.get("AGENTKIT_RESPONSES_MODEL", "gpt-5-mini")),
        FakeResponsesServer,
        lambda url: OpenAIResponsesModel("gpt-fake", base_url=url, api_key="-"),
    )


def main(argv: list[str]) -> int:
    question = argv[0] if argv else "What is the weather in Paris?"
    for made in models():
        with made as (model, mode):
            agent = ChatModelAgent(
                "weather",
                "answers weather questions",
                model,
                instruction="Answer weather questions; use get_weather.",
                tools=[get_weather],
            )
            result = Runner(agent, enable_streaming=True).invoke(question)
            usage = result.usage
            print(f"{type(model).__name__} ({mode}): {result.text}")
            print(
                f"  tokens: {usage.prompt_tokens} in ({usage.cached_tokens} read from the "
                f"cache, {usage.cache_write_tokens} written), {usage.completion_tokens} out"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
