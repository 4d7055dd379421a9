"""``native-models``: per-call cost of the native model classes against raw httpx, same wire.

For each of :class:`~agentkit.models.AnthropicChatModel`, :class:`~agentkit.models.GeminiChatModel`
and :class:`~agentkit.models.OpenAIResponsesModel`, a loopback fake server of its wire (run in
its own process, so that it does not compete with the client for the GIL) answers every
request. One round makes a call through the model (``generate``, or ``stream`` read to its end)
and a raw call: the very same request bytes posted with a plain :class:`httpx.Client` and the
response read whole. The ratio is the model's time over the raw call's: what encoding the
request, the deadlines and retries bookkeeping, and decoding the reply cost on top of HTTP.
:class:`~agentkit.models.OpenAIChatModel` is measured the same way, for reference.
The history is the steady state of an agent loop: a system prompt, a user question, 24 tool
rounds (50 messages), sent again on every call. Budget: 1.10x.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks._inproc import Settings, interleave
from benchmarks._report import Budget, Row

__all__ = ["NATIVE_SCENARIOS", "serve"]

BUDGET = 1.10
REPLY = "It is clear and 21 degrees in Paris today."


def serve() -> None:
    """Serve the fake wires with one fixed reply until standard input closes."""
    from agentkit.testing import (
        FakeAnthropicServer,
        FakeGeminiServer,
        FakeOpenAIServer,
        FakeResponsesServer,
        Reply,
    )

    reply = Reply(REPLY, chunks=4)
    servers = [
        FakeAnthropicServer(handler=lambda request: reply),
        FakeGeminiServer(handler=lambda request: reply),
        FakeResponsesServer(handler=lambda request: reply),
        FakeOpenAIServer(handler=lambda request: reply),
    ]
    for server in servers:
        server.start()
    print(" ".join(server.base_url for server in servers), flush=True)
    sys.stdin.read()
    for server in servers:
        server.stop()


def _history(length: int) -> list[Any]:
    from agentkit.schema import (
        FunctionCall,
        ToolCall,
        assistant_message,
        system_message,
        tool_message,
        user_message,
    )

    history = [system_message("You are a helpful assistant. " * 4)]
    turn = 0
    history.append(user_message("What is the weather in these cities? " * 3))
    while len(history) < length:
        turn += 1
        call = ToolCall(f"call_{turn}", FunctionCall("get_weather", f'{{"city": "c{turn}"}}'))
        history.append(assistant_message("", [call]))
        result = f'{{"city": "c{turn}", "sky": "clear", "t": 21}}'
        history.append(tool_message(result, f"call_{turn}", "get_weather"))  # as agents do
    return history[:length]


def native_models(settings: Settings) -> list[Row]:
    """Rows ``<Model> generate`` and ``<Model> stream``: model call over raw httpx call."""
    import httpx

    from agentkit.models import (
        AnthropicChatModel,
        GeminiChatModel,
        OpenAIChatModel,
        OpenAIResponsesModel,
    )
    from agentkit.schema import ToolInfo

    tools = [
        ToolInfo(
            "get_weather",
            "Return the weather in a city.",
            {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        )
    ]
    process = subprocess.Popen(
        [sys.executable, "-c", "from benchmarks._native import serve; serve()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert process.stdin is not None and process.stdout is not None
    rows: list[Row] = []
    try:
        anthropic_url, gemini_url, responses_url, openai_url = process.stdout.readline().split()
        models = [
            AnthropicChatModel("claude-bench", base_url=anthropic_url, api_key="k"),
            GeminiChatModel("gemini-bench", base_url=gemini_url, api_key="k"),
            OpenAIResponsesModel("gpt-bench", base_url=responses_url, api_key="k"),
            # The Chat Completions client, measured the same way, for reference.
            OpenAIChatModel("gpt-bench", base_url=openai_url, api_key="k"),
        ]
        history = _history(50)
        with httpx.Client() as client:
            for model in models:
                bound = model.with_tools(tools)
                for stream in (False, True):
                    rows.append(_row(bound, client, history, stream, settings))
        for model in models:
            model.close()
    finally:
        process.stdin.close()
        process.wait(timeout=30)
    return rows


def _row(model: Any, client: Any, history: list[Any], stream: bool, settings: Settings) -> Row:
    body = model._body(history, None, stream)
    target = model._target(None, stream)
    headers = model._headers("k")

    def raw() -> float:
        started = time.perf_counter()
        client.post(target.url, content=body, headers=headers).read()
        return time.perf_counter() - started

    call: Callable[[], object]
    if stream:

        def call() -> object:
            return list(model.stream(history))
    else:

        def call() -> object:
            return model.generate(history)

    def ours() -> float:
        started = time.perf_counter()
        call()
        return time.perf_counter() - started

    baseline, agentkit = interleave([raw, ours], settings.rounds(301), warmup=20)
    name = f"{type(model).__name__} {'stream' if stream else 'generate'} (50 messages)"
    return Row(
        name,
        "ms",
        [value * 1e3 for value in agentkit],
        [value * 1e3 for value in baseline],
        [a / b for a, b in zip(agentkit, baseline, strict=True)],
        budget=Budget("ratio", BUDGET),
        note="raw: the same request bytes posted with httpx, the response read whole",
    )


NATIVE_SCENARIOS = {"native-models": native_models}
