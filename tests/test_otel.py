"""OpenTelemetry tracing: the span tree of whole runs and the GenAI attributes, read back from
the SDK's in-memory exporter."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from agentkit import (
    AgentTool,
    ChatModelAgent,
    ParallelAgent,
    ResponseMeta,
    Runner,
    SequentialAgent,
    TokenUsage,
    assistant_message,
    tool,
    with_callbacks,
)
from agentkit.integrations.otel import OpenTelemetryHandler
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

GUARD = 30.0


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


def tracing(exporter: InMemorySpanExporter) -> tuple[OpenTelemetryHandler, TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OpenTelemetryHandler(tracer_provider=provider), provider


def tree(spans: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """``{span name: {child name: ...}}`` (children sorted by name; names must be unique)."""
    by_id = {span.context.span_id: span for span in spans}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in by_id else None, []).append(span)

    def build(parent: int | None) -> dict[str, Any]:
        nodes = sorted(children.get(parent, []), key=lambda s: s.name)
        names = [s.name for s in nodes]
        assert len(names) == len(set(names)), f"ambiguous siblings {names}"
        return {s.name: build(s.context.span_id) for s in nodes}

    return build(None)


def reply(text: str, prompt: int, completion: int) -> Any:
    return attrs.evolve(
        assistant_message(text),
        response_meta=ResponseMeta("stop", TokenUsage(prompt, completion, prompt + completion)),
    )


def test_spans_nest_by_run_with_parallel_branches_under_their_parallel_agent(
    exporter: InMemorySpanExporter,
) -> None:
    handler, _ = tracing(exporter)
    barrier = threading.Barrier(2, timeout=GUARD)

    @tool
    def meet_p1() -> str:
        """Meet the other branch."""
        barrier.wait()
        return "met"

    @tool
    def meet_p2() -> str:
        """Meet the other branch."""
        barrier.wait()
        return "met"

    def branch(name: str, meet: Any) -> ChatModelAgent:
        model = ScriptedChatModel(
            [calls_message(call(meet.name, {}, id=f"{name}-c1")), reply(name, 3, 1)]
        )
        return ChatModelAgent(name, "d", model, tools=[meet])

    planner = ChatModelAgent("Planner", "d", ScriptedChatModel([reply("plan", 5, 2)]))
    parallel = ParallelAgent("Par", "d", [branch("P1", meet_p1), branch("P2", meet_p2)])
    events = list(
        Runner(SequentialAgent("Seq", "d", [planner, parallel])).query(
            "hi", with_callbacks(handler)
        )
    )
    assert all(e.err is None for e in events)
    spans = exporter.get_finished_spans()
    agents = tuple(s for s in spans if s.name.startswith("invoke_agent"))
    assert tree(agents) == {
        "invoke_agent Seq": {
            "invoke_agent Par": {"invoke_agent P1": {}, "invoke_agent P2": {}},
            "invoke_agent Planner": {},
        }
    }
    # each branch: two model calls and one tool call, in the branch's own thread
    by_id = {s.context.span_id: s for s in spans}
    for name, tool_name in (("P1", "meet_p1"), ("P2", "meet_p2")):
        agent_span = next(s for s in spans if s.name == f"invoke_agent {name}")
        kids = sorted(
            s.name for s in spans if s.parent and s.parent.span_id == agent_span.context.span_id
        )
        assert kids == ["chat ScriptedChatModel"] * 2 + [f"execute_tool {tool_name}"]
        assert by_id[agent_span.parent.span_id].name == "invoke_agent Par"  # type: ignore[union-attr]
    assert len({s.context.trace_id for s in spans}) == 1


def test_spans_carry_the_gen_ai_attributes(exporter: InMemorySpanExporter) -> None:
    handler, _ = tracing(exporter)

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = ScriptedChatModel(
        [
            attrs.evolve(
                calls_message(call("add", {"a": 1, "b": 2}, id="c1")),
                response_meta=ResponseMeta("tool_calls", TokenUsage(11, 4, 15)),
            ),
            reply("3", 20, 1),
        ]
    )
    list(Runner(ChatModelAgent("calc", "d", model, tools=[add])).query("hi", with_callbacks(handler)))
    spans = {(s.name, s.start_time): s for s in exporter.get_finished_spans()}
    assert all(start is not None for _, start in spans)
    ordered = [spans[key] for key in sorted(spans, key=lambda k: k[1] or 0)]
    assert [s.name for s in ordered] == [
        "invoke_agent calc",
        "chat ScriptedChatModel",
        "execute_tool add",
        "chat ScriptedChatModel",
    ]
    agent, chat1, tool_span, chat2 = ordered
    assert dict(agent.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "agentkit.agent.type": "ChatModel",
        "agentkit.run_path": "calc",
    }
    assert chat1.kind is trace.SpanKind.CLIENT
    attributes = dict(chat1.attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.request.model"] == "ScriptedChatModel"
    assert attributes["gen_ai.agent.name"] == "calc"
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (
        11,
        4,
    )
    reasons = attributes["gen_ai.response.finish_reasons"]
    assert isinstance(reasons, Sequence) and tuple(reasons) == ("tool_calls",)
    assert dict(chat2.attributes or {})["gen_ai.usage.input_tokens"] == 20
    tool_attributes = dict(tool_span.attributes or {})
    assert tool_attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_attributes["gen_ai.tool.name"] == "add"
    assert tool_attributes["gen_ai.tool.call.id"] == "c1"
    assert all(s.status.status_code is not StatusCode.ERROR for s in ordered)


def test_an_agent_used_as_a_tool_nests_under_the_tool_call_and_the_callers_span(
    exporter: InMemorySpanExporter,
) -> None:
    handler, provider = tracing(exporter)
    inner = ChatModelAgent("Helper", "helps", ScriptedChatModel(["helped"]))
    outer = ChatModelAgent(
        "Main",
        "d",
        ScriptedChatModel([calls_message(call("Helper", {"request": "x"}, id="c1")), "ok"]),
        tools=[AgentTool(inner)],
    )
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("request"):
        list(Runner(outer).query("hi", with_callbacks(handler)))
    spans = exporter.get_finished_spans()
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    by_id = {s.context.span_id: s for s in spans}

    def parent(span: ReadableSpan) -> str:
        assert span.parent is not None
        return by_id[span.parent.span_id].name

    assert parent(by_name["invoke_agent Main"][0]) == "request"
    assert parent(by_name["execute_tool Helper"][0]) == "invoke_agent Main"
    assert parent(by_name["invoke_agent Helper"][0]) == "execute_tool Helper"


def test_failures_set_error_status(exporter: InMemorySpanExporter) -> None:
    handler, _ = tracing(exporter)

    @tool
    def broken() -> str:
        """Fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedChatModel([calls_message(call("broken", {}, id="c1"))])
    events = list(
        Runner(ChatModelAgent("a", "d", model, tools=[broken])).query("hi", with_callbacks(handler))
    )
    assert events[-1].err is not None
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["execute_tool broken"].status.status_code is StatusCode.ERROR
    assert dict(spans["execute_tool broken"].attributes or {})["error.type"] == "RuntimeError"
    assert spans["invoke_agent a"].status.status_code is StatusCode.ERROR
    assert spans["chat ScriptedChatModel"].status.status_code is not StatusCode.ERROR


def test_chat_spans_carry_the_cache_reads_and_writes(exporter: InMemorySpanExporter) -> None:
    handler, _ = tracing(exporter)
    usage = TokenUsage(100, 5, 105, cached_tokens=60, cache_write_tokens=30)
    answer = attrs.evolve(reply("ok", 100, 5), response_meta=ResponseMeta("stop", usage))
    model = ScriptedChatModel([answer])
    list(Runner(ChatModelAgent("a", "d", model)).query("hi", with_callbacks(handler)))
    [chat] = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.usage.input_tokens"] == 100
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 60
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 30
