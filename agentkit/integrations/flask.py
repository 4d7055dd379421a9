"""Serving agent runs from Flask (or any WSGI app) as Server-Sent Events.

WSGI servers run each request in a thread, which is exactly what agentkit's synchronous
runs need: iterate the run's events in the response generator. When the client goes away,
the WSGI server closes the generator, which closes the run's iterator and cancels the run::

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
with :class:`~agentkit.integrations.celery.AgentQueue`) are served from their event log by
:func:`run_events_response`. Each frame then carries the entry's ``id:``, so a browser that
reconnects sends ``Last-Event-ID`` and continues where it left off, repeating nothing (a
``gap`` frame says how many entries a capped log dropped before it). Closing such a response
(the client went away) only stops reading: the run goes on::

    streams = StreamLimit(per_client=8)

    @app.get("/api/runs/<run_id>/events")
    def run_events(run_id):
        return run_events_response(runs, run_id, owner=current_user_id(), limit=streams)

It answers 404 for an unknown run id and for another owner's run alike (a caller cannot tell
which ids exist), 400 for a ``Last-Event-ID`` that is not an event id, and 429 when the client
has ``per_client`` streams open already. Endpoints that change a run (start, resume, cancel)
should call :func:`check_same_origin` first, so a page of another site cannot post to them
with the user's cookies (CSRF).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agentkit._events import AgentEvent
from agentkit.errors import AgentKitValueError
from agentkit.integrations._errors import EventIdError, RunIdError, RunNotFoundError
from agentkit.integrations._runids import stream_position
from agentkit.integrations.runs import RunBackend, RunEvent, RunEventStream
from agentkit.iterators import AsyncIterator

if TYPE_CHECKING:
    from flask import Request, Response

__all__ = [
    "StreamLimit",
    "check_same_origin",
    "last_event_id",
    "run_events_response",
    "sse_events",
    "sse_response",
]


def _frame(kind: str, data: Any, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def last_event_id(request: Request) -> str | None:
    """The id a reconnecting client sent: the ``Last-Event-ID`` header (or ``?last_event_id=``).

    Raises:
        werkzeug.exceptions.BadRequest: (a 400) the value is not an event id: ids are whole
            numbers or two joined by ``-``, in the digits 0-9, each below 2**64.
    """
    from werkzeug.exceptions import BadRequest

    value = request.headers.get("Last-Event-ID") or request.args.get("last_event_id")
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        stream_position(value)
    except EventIdError as error:
        raise BadRequest(description=str(error)) from None
    return value


def check_same_origin(request: Request, *, trusted_origins: Sequence[str] = ()) -> None:
    """Refuse a state-changing request that a page of another origin made (CSRF).

    Safe methods (``GET``, ``HEAD``, ``OPTIONS``) pass. Otherwise a browser's
    ``Sec-Fetch-Site`` header must say ``same-origin`` (or ``none``: the user typed it);
    without that header (older browsers), an ``Origin`` header must match the request's own
    origin. A request with neither header did not come from a browser page and passes.
    ``trusted_origins`` (``"https://app.example.com"``) are other origins allowed to post.
    Pair it with JSON request bodies: an HTML form cannot send ``application/json``. Behind a
    proxy that changes the ``Host`` header, apply werkzeug's ``ProxyFix`` (or list the public
    origin in ``trusted_origins``) so that the request knows its own origin.

    Raises:
        werkzeug.exceptions.Forbidden: (a 403) the request came from another origin.
    """
    from werkzeug.exceptions import Forbidden

    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    origin = request.headers.get("Origin")
    if origin is not None and origin in trusted_origins:
        return
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        if site in ("same-origin", "none"):
            return
        raise Forbidden(
            description=(
                f"cross-origin request refused (Sec-Fetch-Site: {site[:40]}): this endpoint "
                "changes state and takes requests from this site's own pages only"
            )
        )
    if origin is None or _same_origin(origin, request.host_url):
        return
    raise Forbidden(
        description=(
            f"cross-origin request refused (Origin: {origin[:200]}): this endpoint changes "
            "state and takes requests from this site's own pages only"
        )
    )


def _same_origin(origin: str, host_url: str) -> bool:
    theirs, ours = urlsplit(origin), urlsplit(host_url)
    return (theirs.scheme, theirs.netloc.lower()) == (ours.scheme, ours.netloc.lower())


class StreamLimit:
    """At most ``per_client`` open event streams per client, in this process.

    Give one object to every :func:`run_events_response` of an app: a client (an owner, or
    the remote address for runs without one) that opens more streams gets a 429 instead of
    holding the server's threads. A stream's slot is given back when its response closes.
    """

    def __init__(self, per_client: int = 8) -> None:
        if per_client < 1:
            raise AgentKitValueError(f"per_client must be at least 1 (got {per_client})")
        self.per_client = per_client
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, client: str) -> bool:
        """Take a slot for ``client``; ``False`` when it has ``per_client`` open already."""
        with self._lock:
            count = self._open.get(client, 0)
            if count >= self.per_client:
                return False
            self._open[client] = count + 1
            return True

    def release(self, client: str) -> None:
        """Give back a slot of ``client``."""
        with self._lock:
            count = self._open.get(client, 0) - 1
            if count > 0:
                self._open[client] = count
            else:
                self._open.pop(client, None)

    def open_streams(self, client: str) -> int:
        """How many streams ``client`` has open."""
        with self._lock:
            return self._open.get(client, 0)


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


def run_events_response(
    runs: RunBackend,
    run_id: str,
    *,
    owner: str | None = None,
    request: Request | None = None,
    idle_timeout: float | None = None,
    limit: StreamLimit | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """Serve ``owner``'s run ``run_id`` of ``runs`` as SSE, after ``Last-Event-ID`` if sent.

    ``request`` defaults to Flask's current request. The response carries ``X-Run-Id``.

    Raises:
        werkzeug.exceptions.NotFound: (404) no run has this id, it is not a valid run id, or
            it belongs to another owner (the same answer, so ids cannot be probed).
        werkzeug.exceptions.BadRequest: (400) ``Last-Event-ID`` is not an id of the run's log.
        werkzeug.exceptions.TooManyRequests: (429) the client has ``limit.per_client``
            streams open.
    """
    from flask import request as current_request
    from werkzeug.exceptions import BadRequest, NotFound, TooManyRequests

    asked = request if request is not None else current_request
    after = last_event_id(asked)
    try:
        stream = runs.events(run_id, after, owner=owner, idle_timeout=idle_timeout)
    except (RunNotFoundError, RunIdError):
        raise NotFound(description=f"no run with id {run_id[:128]!r}") from None
    except EventIdError as error:
        raise BadRequest(description=str(error)) from None
    client = owner if owner is not None else f"address:{asked.remote_addr}"
    if limit is not None and not limit.acquire(client):
        stream.close()
        raise TooManyRequests(
            description=(
                f"this client has {limit.per_client} event streams open already; close one "
                "(or wait for one to end) before opening another"
            )
        )
    response = sse_response(stream, headers={"X-Run-Id": run_id, **(headers or {})})
    if limit is not None:
        released = threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                limit.release(client)

        response.call_on_close(release)
    return response
