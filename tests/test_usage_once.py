"""Counted once: a run's token usage is one ledger, which every reader agrees on.

Each model call of a run is counted once, where the call is made (the ReAct model call, which
the plan-execute planner and replanner use too). ``RunResult.usage`` reads that ledger; the
callbacks (``UsageTracker``) and tracing (``OpenTelemetryHandler``) see the same calls. The
runs below mix agents that used to be counted differently by each reader: a supervisor and its
workers, an agent used as a tool, a retried model call, the planner and the replanner.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentkit import (
    AgentTool,
    ChatModelAgent,
    ModelRetryConfig,
    ResponseMeta,
    Runner,
    TokenUsage,
    UsageTracker,
    assistant_message,
    with_callbacks,
)
from agentkit.integrations.otel import OpenTelemetryHandler
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import planexecute, supervisor
from agentkit.schema import Message, ToolCall
from agentkit.testing import call, calls_message


def costs(message: Message, prompt: int, completion: int) -> Message:
    """``message`` with the usage a server would report."""
    import attrs

    usage = TokenUsage(prompt, completion, prompt + completion)
    return attrs.evolve(message, response_meta=ResponseMeta(finish_reason="stop", usage=usage))


def say(text: str, prompt: int, completion: int) -> Message:
    return costs(assistant_message(text), prompt, completion)


def calling(tool_call: ToolCall, prompt: int, completion: int) -> Message:
    return costs(calls_message(tool_call), prompt, completion)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


def readers(exporter: InMemorySpanExporter) -> tuple[UsageTracker, OpenTelemetryHandler]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return UsageTracker(), OpenTelemetryHandler(tracer_provider=provider)


def traced_usage(exporter: InMemorySpanExporter) -> TokenUsage:
    prompt = completion = 0
    for span in exporter.get_finished_spans():
        attributes: Any = span.attributes or {}
        prompt += int(attributes.get("gen_ai.usage.input_tokens", 0))
        completion += int(attributes.get("gen_ai.usage.output_tokens", 0))
    return TokenUsage(prompt, completion, prompt + completion)


def team() -> Any:
    helper = ChatModelAgent("Helper", "looks things up", ScriptedChatModel([say("found", 3, 1)]))
    worker_model = ScriptedChatModel(
        [
            RuntimeError("a flaky server"),  # retried: it used no tokens
            calling(call("Helper", {"request": "look it up"}, id="w1"), 11, 2),
            say("worked", 13, 4),
        ]
    )
    worker = ChatModelAgent(
        "Worker",
        "works",
        worker_model,
        tools=[AgentTool(helper)],
        model_retry=ModelRetryConfig(max_retries=1, backoff=lambda attempt: 0.0),
    )
    boss_model = ScriptedChatModel(
        [
            calling(call("transfer_to_agent", {"agent_name": "Worker"}, id="b1"), 7, 1),
            say("the boss sums up", 17, 5),
        ]
    )
    return supervisor.new(ChatModelAgent("Boss", "leads", boss_model), [worker])


def plan_execute() -> Any:
    return planexecute.new(
        planexecute.new_planner(
            ScriptedChatModel([calling(call("plan", {"steps": ["a", "b"]}), 5, 3)])
        ),
        planexecute.new_executor(ScriptedChatModel([say("did a", 2, 2), say("did b", 2, 2)])),
        planexecute.new_replanner(
            ScriptedChatModel(
                [
                    calling(call("plan", {"steps": ["b"]}), 6, 1),
                    calling(call("respond", {"response": "all done"}), 9, 2),
                ]
            )
        ),
    )


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("make", "by_agent"),
    [
        (
            team,
            {
                "Boss": TokenUsage(24, 6, 30),
                "Worker": TokenUsage(24, 6, 30),
                "Helper": TokenUsage(3, 1, 4),
            },
        ),
        (
            plan_execute,
            {
                "planner": TokenUsage(5, 3, 8),
                "executor": TokenUsage(4, 4, 8),
                "replanner": TokenUsage(15, 3, 18),
            },
        ),
    ],
    ids=["supervisor+agent-tool+retry", "plan-execute"],
)
def test_result_callbacks_and_tracing_agree_on_a_multi_agent_run(
    exporter: InMemorySpanExporter, make: Any, by_agent: dict[str, TokenUsage], streaming: bool
) -> None:
    tracker, tracing = readers(exporter)
    result = Runner(make(), enable_streaming=streaming).invoke(
        "go", with_callbacks(tracker, tracing)
    )
    total = TokenUsage(
        sum(u.prompt_tokens for u in by_agent.values()),
        sum(u.completion_tokens for u in by_agent.values()),
        sum(u.total_tokens for u in by_agent.values()),
    )
    assert result.usage == total
    assert result.usage_by_agent == by_agent
    assert tracker.total == total
    assert tracker.by_agent == by_agent
    assert traced_usage(exporter) == total
