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

Runs that outlive a request (:class:`~agentkit.integrations.runs.LocalRuns`, or Celery workers
with :class:`~agentkit.integrations.celery.AgentQueue`) are served from their event log: pass
the reader, ``runs.events(run_id, last_event_id(request))``, to :func:`sse_response`. Each frame
then carries the entry's ``id:``, so a browser that reconnects sends ``Last-Event-ID`` and
continues where it left off, losing and repeating nothing. Closing such a response (the client
went away) only stops reading: the run goes on::

    @app.get("/api/runs/<run_id>/events")
    def run_events(run_id):
        return sse_response(runs.events(run_id, last_event_id(request)))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from agentkit.events import AgentEvent
from agentkit.integrations.runs import RunEvent, RunEventStream
from agentkit.iterators import AsyncIterator

if TYPE_CHECKING:
    from flask import Request, Response

__all__ = ["last_event_id", "sse_events", "sse_response"]


def _frame(kind: str, data: Any, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def last_event_id(request: Request) -> str | None:
    """The id a reconnecting client sent: the ``Last-Event-ID`` header (or ``?last_event_id=``)."""
    value = request.headers.get("Last-Event-ID") or request.args.get("last_event_id")
    if value is None:
        return None
    return value.strip() or None


def sse_events(
    events: AsyncIterator[AgentEvent] | Iterable[RunEvent], *, stream_tokens: bool = False
) -> Iterator[str]:
    """Yield a run's events as SSE frames.

    ``events`` is a run's event iterator (closing this generator cancels the run), or a run's
    log reader such as :class:`~agentkit.integrations.runs.RunEventStream` (entries become
    frames with their ``id:``, tokens included, the last one ``end``, no ``done``; closing only
    stops reading). Works with any WSGI framework: return it as a streaming response body of
    type ``text/event-stream``.
    """
    if not isinstance(events, AsyncIterator):
        yield from _log_frames(events)
        return
    with events:
        for event in events:
            variant = event.output.message_output if event.output is not None else None
            if stream_tokens and variant is not None and variant.message_stream is not None:
                read = variant.open_stream()  # a reader of its own: the event stays unread
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


def _log_frames(entries: Iterable[RunEvent]) -> Iterator[str]:
    try:
        for entry in entries:
            yield _frame(entry.kind, entry.data, entry.id)
    finally:
        if isinstance(entries, RunEventStream):
            entries.close()


def sse_response(
    events: AsyncIterator[AgentEvent] | Iterable[RunEvent],
    *,
    stream_tokens: bool = False,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A Flask streaming response of a run's events or log entries (see :func:`sse_events`).

    ``headers`` are added to the response (an ``X-Run-Id``, for example).
    """
    from flask import Response, stream_with_context

    return Response(
        stream_with_context(sse_events(events, stream_tokens=stream_tokens)),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})},
    )
