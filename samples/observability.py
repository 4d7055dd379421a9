"""Observability: log a multi-agent run, time its tool calls, and count its tokens.

A supervisor hands a question to a researcher (who searches) and a writer, then answers.
Three things watch the run, without changing any agent's code:

* the ``agentkit`` logger (``logging.basicConfig``): transfers, retries, interrupts, cancels;
* a callback handler (``with_callbacks``) that logs each agent, model call and tool call;
* a ``UsageTracker`` (another callback handler) that sums the tokens, in total and per agent;

and one middleware (``ChatModelAgent(middlewares=[...])``) times the researcher's tool calls.
With ``opentelemetry-sdk`` installed, ``--otel`` also prints the run's spans.

Offline by default (scripted models play the LLMs and report token usage). With
``OPENAI_API_KEY`` set it talks to a real OpenAI-compatible endpoint.

    python samples/observability.py
    python samples/observability.py --otel "What does a heat pump cost to run?"
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attrs
from _common import make_model

from agentkit import (
    AgentEvent,
    AgentInput,
    AgentMiddleware,
    ChatModelAgent,
    Message,
    ResponseMeta,
    RunInfo,
    Runner,
    TokenUsage,
    ToolCallInfo,
    UsageTracker,
    assistant_message,
    tool,
    with_callbacks,
)
from agentkit.middleware import ToolInvoke
from agentkit.prebuilt import supervisor
from agentkit.testing import call, calls_message

log = logging.getLogger("observability")


@tool
def search(query: str) -> str:
    """Search the knowledge base.

    Args:
        query: what to look for.
    """
    return "A heat pump uses about 3,000 kWh a year for a 120 m2 house (COP 3.5)."


class LogEverything:
    """A callback handler: one log line per agent, model call and tool call."""

    def on_agent_start(self, info: RunInfo, input: AgentInput) -> None:
        log.info("agent %s (%s) starts at %s", info.name, info.type, "/".join(info.run_path))

    def on_agent_end(self, info: RunInfo, error: BaseException | None) -> None:
        log.info("agent %s ends%s", info.name, f" with {error!r}" if error else "")

    def on_model_end(
        self, info: RunInfo, message: Message | None, error: BaseException | None
    ) -> None:
        meta = message.response_meta if message is not None else None
        tokens = meta.usage.total_tokens if meta is not None and meta.usage else "?"
        log.info("  %s called its model: %s tokens", info.agent_name, tokens)

    def on_tool_start(self, info: RunInfo, call: ToolCallInfo) -> None:
        log.info("  %s calls %s(%s)", info.agent_name, info.name, call.arguments)


class TimeTools(AgentMiddleware):
    """A middleware: logs how long each tool call took."""

    def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
        started = time.perf_counter()
        try:
            return invoke(call)
        finally:
            log.info("  %s took %.1f ms", call.name, (time.perf_counter() - started) * 1e3)


def scripted(text: str, prompt: int, completion: int, message: Message | None = None) -> Message:
    """A scripted reply that reports token usage like a real API."""
    reply = message if message is not None else assistant_message(text)
    usage = TokenUsage(prompt, completion, prompt + completion)
    return attrs.evolve(reply, response_meta=ResponseMeta("stop", usage))


def transfer_to(name: str, id: str) -> Message:
    return calls_message(call("transfer_to_agent", {"agent_name": name}, id=id))


ANSWER = "Running a heat pump costs about 900 EUR a year for a typical house."


def build_agent() -> Any:
    """The supervisor and its two workers."""
    researcher = ChatModelAgent(
        "researcher",
        "finds facts",
        make_model(
            [
                scripted("", 120, 12, calls_message(call("search", {"query": "heat pump"}))),
                scripted("Heat pumps use about 3,000 kWh a year.", 180, 15),
            ]
        ),
        instruction="Find facts with the search tool, then state them in one sentence.",
        tools=[search],
        middlewares=[TimeTools()],
    )
    writer = ChatModelAgent(
        "writer",
        "writes answers",
        make_model([scripted("3,000 kWh at 0.30 EUR/kWh is about 900 EUR a year.", 150, 20)]),
        instruction="Turn the facts you were given into a short answer with a number.",
    )
    boss = ChatModelAgent(
        "boss",
        "coordinates",
        make_model(
            [
                scripted("", 90, 8, transfer_to("researcher", "t1")),
                scripted("", 160, 8, transfer_to("writer", "t2")),
                scripted(ANSWER, 210, 18),
            ]
        ),
        instruction="Ask the researcher for facts, then the writer for the answer; then answer.",
    )
    return supervisor.new(boss, [researcher, writer])


def main(argv: Sequence[str] | None = None) -> tuple[list[AgentEvent], UsageTracker]:
    """Run the team on a question, logging it; print the token totals."""
    args = list(sys.argv[1:] if argv is None else argv)
    otel = "--otel" in args
    question = next((a for a in args if not a.startswith("--")), "What does a heat pump cost?")
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s", force=True)
    usage = UsageTracker()
    handlers: list[Any] = [LogEverything(), usage]
    if otel:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

        from agentkit.integrations.otel import OpenTelemetryHandler

        provider = TracerProvider()
        provider.add_span_processor(
            SimpleSpanProcessor(ConsoleSpanExporter(formatter=lambda s: f"span: {s.name}\n"))
        )
        handlers.append(OpenTelemetryHandler(tracer_provider=provider))
    print(f"> {question}")
    events = list(Runner(build_agent()).query(question, with_callbacks(*handlers)))
    failed = [event for event in events if event.err is not None]
    if failed:
        print(f"the run failed: {failed[-1].err!r}", file=sys.stderr)
        raise SystemExit(1)
    output = events[-1].output
    final = output.message_output.get_message() if output and output.message_output else None
    print(f"answer: {final.content if final else ''}")
    total = usage.total
    print(
        f"tokens: {total.total_tokens} ({total.prompt_tokens} prompt, "
        f"{total.completion_tokens} completion)"
    )
    for name, tokens in sorted(usage.by_agent.items()):
        print(f"  {name}: {tokens.total_tokens}")
    return events, usage


if __name__ == "__main__":
    main()
