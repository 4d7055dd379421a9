"""A small real Flask app: chat with a travel concierge, streamed token by token, with approvals.

    cd samples && python -m flask_app                  # http://127.0.0.1:5000/
    curl -N -X POST localhost:5000/api/runs -H 'Content-Type: application/json' \\
         -d '{"message": "Plan a weekend in Lisbon"}'

API (every stream is Server-Sent Events; every error is JSON ``{"error": ...}`` with a 4xx):

* ``POST /api/runs`` with ``{"message": "..."}``: starts a run and streams it at once; the run id
  is in the ``X-Run-Id`` header and in the first event (``event: run``).
* ``GET /api/runs/<id>/events``: the run's events, from the start or after ``Last-Event-ID``.
* ``GET /api/runs/<id>/approvals``: the approvals the run waits for, ``{"approvals": [{"id":
  ..., "prompt": ...}]}``, from its verified record (never from its event stream, which
  someone with write access to Redis could rewrite): the page shows these.
* ``POST /api/runs/<id>/resume`` with ``{"approve": true|false, "interrupt_id": "..."}``:
  answers one of the run's approvals (``interrupt_id`` may be left out when it waits for one
  only) and streams the resumed run.
* ``POST /api/runs/<id>/cancel`` with ``{}``: cancels the run.
* ``GET /``: the page.

Runs belong to the browser session that started them: the app has no login, so each session
gets a random owner id in Flask's signed session cookie (``FLASK_SECRET_KEY``; a random one
per process when unset, so set it when several processes serve the app). Another session's
run is a 404. The ``POST`` endpoints take JSON bodies only (415 otherwise) and refuse requests
from pages of other origins (403, :func:`~agentkit.integrations.flask.check_same_origin`), so
another site cannot cancel or approve a run with the user's cookie. A session may follow at
most ``streams_per_client`` event streams at once (429 past that).

By default runs execute in threads of this process with checkpoints in files. With
``REDIS_URL`` set they execute on Celery workers (``celery -A flask_app.tasks worker
--pool=threads``) and any number of app processes serve them. Offline by default (scripted
models); live with ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from flask import Flask, Response, jsonify, request, session
from werkzeug.exceptions import HTTPException

from agentkit import Runner
from agentkit.integrations.flask import (
    StreamLimit,
    check_same_origin,
    run_events_response,
    sse_response,
)
from agentkit.integrations.runs import (
    LocalRuns,
    RunBackend,
    RunIdError,
    RunNotFoundError,
    RunStateError,
)

from .agents import AGENT_NAME, build_agent

PAGE = Path(__file__).with_name("page.html")
AGUI_PAGE = Path(__file__).with_name("agui.html")
MAX_MESSAGE = 4000
IDLE_TIMEOUT = 30.0  # seconds without an event before a stream ends; the page reconnects
STREAMS_PER_CLIENT = 8


class ApiError(Exception):
    """An error the API reports as JSON with a 4xx status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def local_runs(store_dir: str | None = None) -> LocalRuns:
    """Runs in threads of this process; checkpoints in ``store_dir`` (default: a temporary one)."""
    from agentkit.checkpoint import FileCheckPointStore

    directory = store_dir or tempfile.mkdtemp(prefix="agentkit-flask-app-")
    runner = Runner(
        build_agent(), enable_streaming=True, checkpoint_store=FileCheckPointStore(directory)
    )
    return LocalRuns({AGENT_NAME: runner})


def default_runs() -> RunBackend:
    """Celery workers when ``REDIS_URL`` is set, threads of this process otherwise."""
    if os.environ.get("REDIS_URL"):
        from .tasks import queue

        return queue
    return local_runs()


def create_app(
    runs: RunBackend | None = None,
    *,
    idle_timeout: float = IDLE_TIMEOUT,
    secret_key: str | None = None,
    streams_per_client: int = STREAMS_PER_CLIENT,
) -> Flask:
    """The app, serving runs from ``runs`` (default: :func:`default_runs`).

    A stream without a new event for ``idle_timeout`` seconds ends; the page reconnects with
    ``Last-Event-ID`` (this keeps proxies from cutting idle connections at random).
    ``secret_key`` signs the session cookie that holds the owner id (default:
    ``FLASK_SECRET_KEY``, else a random key of this process).
    """
    app = Flask(__name__)
    app.secret_key = secret_key or os.environ.get("FLASK_SECRET_KEY") or secrets.token_hex(32)
    app.config.update(SESSION_COOKIE_SAMESITE="Lax", SESSION_COOKIE_HTTPONLY=True)
    backend = runs if runs is not None else default_runs()
    app.extensions["agentkit_runs"] = backend
    _add_error_handlers(app)

    @app.before_request
    def refuse_cross_site_and_non_json_posts() -> None:
        if request.path.startswith("/api/") and request.method == "POST":
            check_same_origin(request)
            if not request.is_json:
                raise ApiError(
                    415, "send a JSON body (Content-Type: application/json), {} when empty"
                )

    @app.get("/")
    def index() -> Response:
        return Response(PAGE.read_text(encoding="utf-8"), mimetype="text/html")

    _add_run_routes(app, backend, idle_timeout, StreamLimit(streams_per_client))
    _add_agui_routes(app)
    return app


def _add_agui_routes(app: Flask) -> None:
    """``GET /agui``: a page that speaks AG-UI; ``POST /api/agui``: the agent over AG-UI."""
    from agentkit.checkpoint import InMemoryCheckPointStore
    from agentkit.integrations.agui import agui_response

    store = InMemoryCheckPointStore()
    runner = Runner(build_agent(), enable_streaming=True, checkpoint_store=store)

    @app.get("/agui")
    def agui_page() -> Response:
        return Response(AGUI_PAGE.read_text(encoding="utf-8"), mimetype="text/html")

    @app.post("/api/agui")
    def agui_run() -> Response:
        return agui_response(runner, request.get_data(), owner=current_owner())


def current_owner() -> str:
    """The owner id of this browser session (made on its first request)."""
    owner = session.get("owner")
    if not isinstance(owner, str):
        owner = session["owner"] = secrets.token_urlsafe(18)
    return owner


def _add_error_handlers(app: Flask) -> None:
    """Answer API errors, and any error under ``/api/``, with JSON ``{"error": ...}``."""

    @app.errorhandler(ApiError)
    def api_error(error: ApiError) -> tuple[Response, int]:
        return jsonify(error=str(error)), error.status

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> tuple[Response, int] | HTTPException:
        if not request.path.startswith("/api/"):
            return error
        return jsonify(error=error.description), error.code or 500

    @app.errorhandler(Exception)
    def unexpected(error: Exception) -> tuple[Response, int]:
        app.logger.exception("unexpected error in %s %s", request.method, request.path)
        return jsonify(error="internal error; the server log has the details"), 500


def _add_run_routes(
    app: Flask, backend: RunBackend, idle_timeout: float, streams: StreamLimit
) -> None:
    """The ``/api/runs`` routes: start, watch, resume and cancel the session's runs."""

    @app.post("/api/runs")
    def start_run() -> Response:
        owner = current_owner()
        run_id = backend.submit(AGENT_NAME, _message_of(_json_body()), owner=owner)
        return sse_response(
            backend.events(run_id, owner=owner, idle_timeout=idle_timeout),
            headers={"X-Run-Id": run_id},
        )

    @app.get("/api/runs/<run_id>/events")
    def run_events(run_id: str) -> Response:
        return run_events_response(
            backend, run_id, owner=current_owner(), idle_timeout=idle_timeout, limit=streams
        )

    @app.get("/api/runs/<run_id>/approvals")
    def run_approvals(run_id: str) -> Response:
        # From the run's record, which the backend verifies (sealed in Redis), never from
        # its event stream: what the user approves is what the run asked.
        owner = _known(run_id)
        state = backend.status(run_id, owner=owner)
        summary = state.get("summary") or {}
        prompts = summary.get("prompts", []) if state["status"] == "interrupted" else []
        return jsonify(
            run_id=run_id,
            approvals=[{"id": prompt["id"], "prompt": prompt["info"]} for prompt in prompts],
        )

    @app.post("/api/runs/<run_id>/resume")
    def resume_run(run_id: str) -> Response:
        owner = _known(run_id)
        body = _json_body()
        approve = _approval_of(body)
        interrupts = backend.interrupts(run_id, owner=owner)
        if not interrupts:
            raise ApiError(409, f"run {run_id} is not waiting for an approval")
        targets = {_interrupt_of(body, interrupts): approve}  # one interrupt at a time
        try:
            after = backend.resume(run_id, targets, owner=owner)
        except RunStateError as error:
            raise ApiError(409, str(error)) from None
        return sse_response(
            backend.events(run_id, after, owner=owner, idle_timeout=idle_timeout),
            headers={"X-Run-Id": run_id},
        )

    @app.post("/api/runs/<run_id>/cancel")
    def cancel_run(run_id: str) -> Response:
        owner = _known(run_id)
        _json_body()
        return jsonify(run_id=run_id, cancelled=backend.cancel(run_id, owner=owner))

    def _known(run_id: str) -> str:
        """The session's owner id, if ``run_id`` is one of its runs; a 404 otherwise."""
        owner = current_owner()
        try:
            known = backend.has_run(run_id, owner=owner)
        except (RunNotFoundError, RunIdError):
            known = False
        if not known:
            raise ApiError(404, f"no run with id {run_id!r}; start one with POST /api/runs")
        return owner


def _message_of(body: dict[str, Any]) -> str:
    """The user's message of a start request, stripped; an :class:`ApiError` when unusable."""
    message = body.get("message")
    if not isinstance(message, str) or not message.strip():
        raise ApiError(400, 'send {"message": "..."} with a non-empty text message')
    if len(message) > MAX_MESSAGE:
        raise ApiError(400, f"the message is too long (at most {MAX_MESSAGE} characters)")
    return message.strip()


def _approval_of(body: dict[str, Any]) -> bool:
    """The ``approve`` flag of a resume request; an :class:`ApiError` when it is no boolean."""
    approve = body.get("approve")
    if not isinstance(approve, bool):
        raise ApiError(400, 'send {"approve": true} or {"approve": false}')
    return approve


def _interrupt_of(body: dict[str, Any], interrupts: list[str]) -> str:
    """The interrupt a resume request answers: its ``interrupt_id`` (optional when the run
    waits for one approval only); an :class:`ApiError` when it names none of ``interrupts``."""
    chosen = body.get("interrupt_id")
    if chosen is None and len(interrupts) == 1:
        return interrupts[0]
    if chosen not in interrupts:
        raise ApiError(
            400,
            'send {"approve": ..., "interrupt_id": "..."} naming one of the approvals the run '
            "waits for (GET /api/runs/<id>/approvals lists them)",
        )
    return str(chosen)


def _json_body() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise ApiError(
            400, "the request body must be a JSON object (Content-Type: application/json)"
        )
    return body
