"""OpenTelemetry spans of a run with media hold no bytes of them."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentkit import ChatModelAgent, ImagePart, Runner, tool, user_message, with_callbacks
from agentkit.integrations.otel import OpenTelemetryHandler
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message
from tests.media_samples import png

IMAGE = png(4, 4)


@tool
def snapshot() -> ImagePart:
    """Take a picture."""
    return ImagePart(IMAGE)


def test_no_span_attribute_or_event_holds_the_bytes_of_a_part() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handler = OpenTelemetryHandler(tracer_provider=provider)
    model = ScriptedChatModel([calls_message(call("snapshot", {})), "A small red square."])
    agent = ChatModelAgent("camera", "takes pictures", model, tools=[snapshot])
    question = user_message(["Look:", ImagePart(IMAGE)])
    result = Runner(agent).invoke(question, with_callbacks(handler))
    assert result.text == "A small red square."
    spans = exporter.get_finished_spans()
    assert spans
    encoded = base64.b64encode(IMAGE).decode()
    for span in spans:
        values = [str(value) for value in (span.attributes or {}).values()]
        values += [
            str(value) for event in span.events for value in (event.attributes or {}).values()
        ]
        for value in values:
            assert encoded[:24] not in value and "\\x89PNG" not in value and "PNG" not in value
