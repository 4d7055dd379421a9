"""Serving agent runs from Flask (or any WSGI app) as Server-Sent Events.

WSGI servers run each request in a thread, which is exactly what agentkit's synchronous
runs need: iterate the run's events in the response generator. When the client goes away,
the WSGI server closes the generator, which closes the run's iterator and cancels the run.

    from flask import Flask, request
    from agentkit.integrations.flask import sse_response

    app = Flask(__name__)

    @app.post("/chat")
    def chat():
        return sse_response(runner.query(request.get_json()["question"]))

Each event is one SSE frame: ``event: agent`` with ``AgentEvent.to_dict()`` as JSON data. With
``stream_tokens=True`` a streamed message is sent as ``event: token`` frames (one per chunk,
data ``{"agent_name": ..., "content": ...}``) before its ``event: agent`` frame. The stream ends
with ``event: done``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agentkit.events import AgentEvent
from agentkit.iterators import AsyncIterator

if TYPE_CHECKING:
    from flask import Response

__all__ = ["sse_events", "sse_response"]


def _frame(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def sse_events(events: AsyncIterator[AgentEvent], *, stream_tokens: bool = False) -> Iterator[str]:
    """Yield the run's events as SSE frames; closing this generator cancels the run.

    Works with any WSGI framework: return it as a streaming response body with the
    ``text/event-stream`` content type.
    """
    with events:
        for event in events:
            variant = event.output.message_output if event.output is not None else None
            if stream_tokens and variant is not None and variant.message_stream is not None:
                keep, read = variant.message_stream.copy(2)
                variant.message_stream = keep
                try:
                    for chunk in read:
                        if chunk.content:
                            yield _frame(
                                "token", {"agent_name": event.agent_name, "content": chunk.content}
                            )
                except Exception:
                    read.close()  # the event's own error is reported by its agent frame
            yield _frame("agent", event.to_dict())
        yield _frame("done", {})


def sse_response(events: AsyncIterator[AgentEvent], *, stream_tokens: bool = False) -> Response:
    """A Flask streaming response of the run's events (see :func:`sse_events`)."""
    from flask import Response, stream_with_context

    return Response(
        stream_with_context(sse_events(events, stream_tokens=stream_tokens)),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
