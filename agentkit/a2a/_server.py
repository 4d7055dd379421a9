"""to_a2a: an agent served as an A2A agent, a WSGI application (agent card and JSON-RPC)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from agentkit._runner import Runner
from agentkit.agents._flow import FlowAgent
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import AgentKitError, AgentKitValueError
from agentkit.integrations._errors import RunIdError, RunNotFoundError, RunStateError
from agentkit.integrations.runs import LocalRuns, RunBackend, RunEvent
from agentkit.tools._approval import Approve, Reject

__all__ = ["A2AApplication", "to_a2a"]

WSGIEnviron = dict[str, Any]
StartResponse = Callable[..., Any]

PROTOCOL_VERSION = "0.3.0"
DEFAULT_MAX_BODY_BYTES = 1_000_000
_CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
_STREAM_IDLE = 30.0  # seconds a stream waits for the next entry before it looks again

# JSON-RPC and A2A error codes (A2A 0.3, section 8)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004

_STATES = {
    "queued": "submitted",
    "running": "working",
    "interrupted": "input-required",
    "completed": "completed",
    "cancelled": "canceled",
    "failed": "failed",
}
_APPROVE_WORDS = {"approve", "approved", "yes", "y", "ok", "true"}
_REJECT_WORDS = {"reject", "rejected", "no", "n", "false", "deny"}


class _RPCError(Exception):
    def __init__(self, code: int, message: str, status: int = 200) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def _types() -> Any:
    try:
        from a2a.compat.v0_3 import types
    except ImportError as error:  # pragma: no cover - the extra is missing
        raise AgentKitError(
            "agentkit.a2a needs the 'a2a-sdk' package; install it with: pip install 'agentkit[a2a]'"
        ) from error
    return types


def _wire(model: Any) -> dict[str, Any]:
    data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert isinstance(data, dict)
    return data


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class _Task:
    """What the A2A side keeps of a run: its context and history."""

    def __init__(self, context_id: str) -> None:
        self.context_id = context_id
        self.history: list[dict[str, Any]] = []


class A2AApplication:
    """A WSGI application serving one agent over A2A (JSON-RPC 2.0, A2A protocol 0.3).

    Made by :func:`to_a2a`. ``GET /.well-known/agent-card.json`` is the agent card;
    ``POST /`` takes the JSON-RPC methods ``message/send``, ``message/stream`` (SSE),
    ``tasks/get``, ``tasks/cancel`` and ``tasks/resubscribe`` (SSE). A task is a run of
    :class:`~agentkit.integrations.runs.LocalRuns` (its ``runs`` attribute); :meth:`close`
    cancels the runs in progress and waits for them.
    """

    def __init__(
        self,
        runs: RunBackend,
        agent_name: str,
        *,
        owns_runs: bool,
        name: str,
        description: str,
        url: str | None,
        owner: Callable[[Mapping[str, Any]], str | None] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        timeout: float = 600.0,
    ) -> None:
        if max_body_bytes < 1:
            raise AgentKitValueError(f"max_body_bytes must be at least 1 (got {max_body_bytes})")
        self.name = name
        self.description = description
        self.url = url
        self.max_body_bytes = max_body_bytes
        self.timeout = timeout
        self._owner = owner or (lambda environ: environ.get("REMOTE_USER") or None)
        self._agent_name = agent_name
        self.runs = runs
        self._owns_runs = owns_runs
        self._tasks: dict[str, _Task] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Cancel the tasks in progress and wait for their runs to stop (when this application
        made its ``LocalRuns``; a backend given to :func:`to_a2a` is its owner's to close)."""
        if self._owns_runs and isinstance(self.runs, LocalRuns):
            self.runs.close()

    # -- WSGI ------------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnviron, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "") or "/"
        if method == "GET" and path in _CARD_PATHS:
            return _json(start_response, 200, self.agent_card(_base_url(environ)))
        if path not in ("/", ""):
            return _json(start_response, 404, {"error": f"no such path: {path[:200]}"})
        if method != "POST":
            return _json(start_response, 405, {"error": "POST JSON-RPC requests to this URL"})
        request_id: Any = None
        try:
            request = self._read(environ)
            request_id = request.get("id")
            return self._dispatch(request, environ, start_response)
        except _RPCError as error:
            body = {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": error.code, "message": error.message},
            }
            return _json(start_response, error.status, body)

    def agent_card(self, base_url: str) -> dict[str, Any]:
        """The agent card (A2A 0.3), advertising ``url`` or else ``base_url``."""
        types = _types()
        card = types.AgentCard(
            name=self.name,
            description=self.description or self.name,
            url=self.url or base_url,
            version="1.0.0",
            protocol_version=PROTOCOL_VERSION,
            preferred_transport="JSONRPC",
            capabilities=types.AgentCapabilities(streaming=True, push_notifications=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[
                types.AgentSkill(
                    id=self._agent_name,
                    name=self.name,
                    description=self.description or self.name,
                    tags=["agentkit"],
                )
            ],
        )
        return _wire(card)

    def _read(self, environ: WSGIEnviron) -> dict[str, Any]:
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > self.max_body_bytes:
            raise _RPCError(
                INVALID_REQUEST,
                f"the request is {length} bytes; this agent takes at most {self.max_body_bytes}",
                413,
            )
        body = environ["wsgi.input"].read(min(length, self.max_body_bytes + 1) if length else -1)
        if len(body) > self.max_body_bytes:
            raise _RPCError(
                INVALID_REQUEST, f"the request is over {self.max_body_bytes} bytes", 413
            )
        try:
            request = json.loads(body)
        except ValueError:
            raise _RPCError(PARSE_ERROR, "the request is not JSON") from None
        if (
            not isinstance(request, dict)
            or request.get("jsonrpc") != "2.0"
            or not isinstance(request.get("method"), str)
        ):
            raise _RPCError(INVALID_REQUEST, "not a JSON-RPC 2.0 request")
        if not isinstance(request.get("id"), (str, int)) or isinstance(request.get("id"), bool):
            raise _RPCError(INVALID_REQUEST, "a request needs an id (a string or an integer)")
        return request

    def _dispatch(
        self, request: dict[str, Any], environ: WSGIEnviron, start_response: StartResponse
    ) -> Iterable[bytes]:
        types = _types()
        method = request["method"]
        owner = self._owner(environ)
        models = {
            "message/send": types.SendMessageRequest,
            "message/stream": types.SendStreamingMessageRequest,
            "tasks/get": types.GetTaskRequest,
            "tasks/cancel": types.CancelTaskRequest,
            "tasks/resubscribe": types.TaskResubscriptionRequest,
        }
        model = models.get(method)
        if model is None:
            raise _RPCError(METHOD_NOT_FOUND, f"no method {method[:100]!r}")
        try:
            parsed = model.model_validate(request)
        except Exception as error:  # pydantic's ValidationError
            text = " ".join(str(error).split())[:300]
            raise _RPCError(INVALID_PARAMS, f"invalid params for {method}: {text}") from None
        request_id = request["id"]
        if method == "message/send":
            task_id, after = self._start(parsed.params.message, owner)
            blocking = parsed.params.configuration is None or parsed.params.configuration.blocking
            if blocking is not False:
                for _ in self._entries(task_id, after, owner):
                    pass
            return _json(start_response, 200, _result(request_id, self._task(task_id, owner)))
        if method == "message/stream":
            task_id, after = self._start(parsed.params.message, owner)
            return _sse(start_response, self._stream(request_id, task_id, after, owner))
        task_id = parsed.params.id
        if method == "tasks/get":
            return _json(start_response, 200, _result(request_id, self._task(task_id, owner)))
        if method == "tasks/cancel":
            self._known(task_id, owner)
            if not self.runs.cancel(task_id, owner=owner):
                raise _RPCError(TASK_NOT_CANCELABLE, f"task {task_id} is not running")
            self._wait_stopped(task_id, owner)
            return _json(start_response, 200, _result(request_id, self._task(task_id, owner)))
        # tasks/resubscribe
        self._known(task_id, owner)
        if self.runs.status(task_id, owner=owner)["status"] not in ("queued", "running"):
            raise _RPCError(
                UNSUPPORTED_OPERATION,
                f"task {task_id} is not running; read it with tasks/get",
            )
        return _sse(start_response, self._stream(request_id, task_id, None, owner))

    # -- tasks -----------------------------------------------------------------------------

    def _wait_stopped(self, task_id: str, owner: str | None) -> None:
        """Wait (at most ``timeout``) until a cancelled task's run has stopped."""
        deadline = time.monotonic() + self.timeout
        pause = threading.Event()
        while self.runs.status(task_id, owner=owner)["status"] in ("queued", "running"):
            if time.monotonic() > deadline:
                return
            pause.wait(0.02)

    def _known(self, task_id: str, owner: str | None) -> _Task:
        with self._lock:
            task = self._tasks.get(task_id)
        if task is None or not self.runs.has_run(task_id, owner=owner):
            # Unknown, forgotten, or another owner's: the same answer.
            raise _RPCError(TASK_NOT_FOUND, f"no task with id {task_id[:128]!r}")
        return task

    def _start(self, message: Any, owner: str | None) -> tuple[str, str | None]:
        text = _text_of(message)
        record = _wire(message)
        if message.task_id:
            task_id = message.task_id
            task = self._known(task_id, owner)
            state = self.runs.status(task_id, owner=owner)
            if state["status"] != "interrupted":
                raise _RPCError(
                    INVALID_PARAMS,
                    f"task {task_id} is {_STATES.get(state['status'], 'unknown')}; only a task "
                    "in input-required takes another message",
                )
            prompts = state.get("summary", {}).get("prompts", [])
            targets = {prompt["id"]: _answer(prompt, message) for prompt in prompts}
            task.history.append(record)
            try:
                after = self.runs.resume(task_id, targets, owner=owner)
            except (RunStateError, RunNotFoundError) as error:
                raise _RPCError(INVALID_PARAMS, str(error)) from None
            return task_id, after
        if not text:
            raise _RPCError(INVALID_PARAMS, "the message has no text part")
        task_id = uuid.uuid4().hex
        task = _Task(message.context_id or uuid.uuid4().hex)
        task.history.append(record)
        with self._lock:
            self._sweep()  # before this task is added: it is not a run yet
            self._tasks[task_id] = task
        try:
            self.runs.submit(self._agent_name, text, owner=owner, checkpoint_id=task_id)
        except (RunStateError, RunIdError) as error:
            with self._lock:
                self._tasks.pop(task_id, None)
            raise _RPCError(INTERNAL_ERROR, str(error)) from None
        return task_id, None

    def _sweep(self) -> None:
        """Forget the tasks LocalRuns forgot (lock held)."""
        if len(self._tasks) % 64:
            return
        for task_id in [t for t in self._tasks if not _held(self.runs, t)]:
            del self._tasks[task_id]

    def _entries(self, task_id: str, after: str | None, owner: str | None) -> Iterator[RunEvent]:
        try:
            stream = self.runs.events(task_id, after, owner=owner, idle_timeout=self.timeout)
        except RunNotFoundError:
            raise _RPCError(TASK_NOT_FOUND, f"no task with id {task_id[:128]!r}") from None
        with stream:
            yield from stream

    def _task(self, task_id: str, owner: str | None) -> dict[str, Any]:
        types = _types()
        task = self._known(task_id, owner)
        state = self.runs.status(task_id, owner=owner)
        summary = state.get("summary") or {}
        status = self._status(task_id, task, state["status"], summary)
        artifacts = None
        if state["status"] == "completed" and summary.get("answer"):
            artifacts = [_artifact(types, summary["answer"])]
        history = [types.Message.model_validate(record) for record in task.history]
        model = types.Task(
            id=task_id,
            context_id=task.context_id,
            status=status,
            history=history,
            artifacts=artifacts,
        )
        return _wire(model)

    def _status(self, task_id: str, task: _Task, status: str, summary: Mapping[str, Any]) -> Any:
        types = _types()
        state = _STATES.get(status, "unknown")
        message = None
        if state == "input-required":
            prompts = summary.get("prompts", [])
            message = _agent_message(
                types, task_id, task.context_id, _question(prompts), {"interrupts": prompts}
            )
        elif state == "failed" and summary.get("error"):
            error = summary["error"]
            message = _agent_message(
                types, task_id, task.context_id, f"{error.get('type')}: {error.get('message')}"
            )
        return types.TaskStatus(state=state, message=message, timestamp=_now())

    def _stream(
        self, request_id: Any, task_id: str, after: str | None, owner: str | None
    ) -> Iterator[dict[str, Any]]:
        types = _types()
        task = self._known(task_id, owner)
        first = types.Task(
            id=task_id,
            context_id=task.context_id,
            status=types.TaskStatus(state="submitted" if after is None else "working",
                                    timestamp=_now()),
            history=[types.Message.model_validate(record) for record in task.history],
        )
        yield _result(request_id, _wire(first))
        for entry in self._entries(task_id, after, owner):
            if entry.kind == "agent":
                message = entry.data.get("output", {}).get("message") or {}
                text = message.get("content") or ""
                if message.get("role") != "assistant" or not text:
                    continue
                update = types.TaskStatusUpdateEvent(
                    task_id=task_id,
                    context_id=task.context_id,
                    status=types.TaskStatus(
                        state="working",
                        message=_agent_message(types, task_id, task.context_id, text),
                        timestamp=_now(),
                    ),
                    final=False,
                )
                yield _result(request_id, _wire(update))
            elif entry.kind == "end":
                summary = entry.data
                if summary.get("status") == "completed" and summary.get("answer"):
                    artifact = types.TaskArtifactUpdateEvent(
                        task_id=task_id,
                        context_id=task.context_id,
                        artifact=_artifact(types, summary["answer"]),
                        last_chunk=True,
                    )
                    yield _result(request_id, _wire(artifact))
                final = types.TaskStatusUpdateEvent(
                    task_id=task_id,
                    context_id=task.context_id,
                    status=self._status(task_id, task, str(summary.get("status")), summary),
                    final=True,
                )
                yield _result(request_id, _wire(final))
                return


def _held(runs: RunBackend, task_id: str) -> bool:
    try:
        runs.status(task_id, owner=None)
    except RunNotFoundError as error:
        return "owner" in type(error).__name__.lower()  # RunOwnerError: still held
    return True


def _is_backend(target: Any) -> bool:
    """Whether ``target`` is a run backend (``LocalRuns``, ``AgentQueue``) rather than an agent."""
    return isinstance(target, LocalRuns) or all(
        callable(getattr(target, method, None))
        for method in ("submit", "events", "resume", "cancel", "status", "has_run")
    )


def _artifact(types: Any, answer: str) -> Any:
    return types.Artifact(
        artifact_id=uuid.uuid4().hex,
        name="answer",
        parts=[types.Part(root=types.TextPart(text=answer))],
    )


def _agent_message(
    types: Any, task_id: str, context_id: str, text: str, data: dict[str, Any] | None = None
) -> Any:
    parts = [types.Part(root=types.TextPart(text=text))]
    if data is not None:
        parts.append(types.Part(root=types.DataPart(data=data)))
    return types.Message(
        role="agent",
        parts=parts,
        message_id=uuid.uuid4().hex,
        task_id=task_id,
        context_id=context_id,
    )


def _question(prompts: list[dict[str, Any]]) -> str:
    questions = []
    for prompt in prompts:
        info = prompt.get("info")
        if isinstance(info, dict) and _is_approval(info):
            arguments = json.dumps(info["arguments"], ensure_ascii=False)
            questions.append(
                f"Approve {info['tool_name']}({arguments})? Answer approve, reject, or a data "
                'part {"decision": "edit", "arguments": {...}}.'
            )
        else:
            questions.append(str(info))
    return " ".join(questions) or "The agent waits for input."


def _is_approval(info: Any) -> bool:
    return isinstance(info, dict) and {"tool_name", "call_id", "arguments"} <= set(info)


def _text_of(message: Any) -> str:
    return "".join(
        part.root.text for part in message.parts if getattr(part.root, "kind", "") == "text"
    )


def _data_of(message: Any) -> dict[str, Any] | None:
    for part in message.parts:
        if getattr(part.root, "kind", "") == "data":
            data = part.root.data
            return data if isinstance(data, dict) else None
    return None


def _answer(prompt: Mapping[str, Any], message: Any) -> Any:
    data = _data_of(message)
    text = _text_of(message).strip()
    if not _is_approval(prompt.get("info")):
        if data is not None and "answer" in data:
            return data["answer"]
        return text
    decision = (data or {}).get("decision") or text.lower()
    if decision in _APPROVE_WORDS:
        return Approve()
    if decision in _REJECT_WORDS:
        reason = (data or {}).get("reason", "")
        return Reject(reason=str(reason)[:2000]) if reason else Reject()
    arguments = (data or {}).get("arguments")
    if decision == "edit" and isinstance(arguments, dict):
        return Approve(arguments=arguments)
    raise _RPCError(
        INVALID_PARAMS,
        "answer an approval with the text approve or reject, or a data part "
        '{"decision": "approve" | "reject" | "edit", "arguments": {...}, "reason": "..."}',
    )


def _result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _json(start_response: StartResponse, status: int, body: Any) -> list[bytes]:
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    reasons = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 413: "Content Too Large"}
    start_response(
        f"{status} {reasons.get(status, 'Error')}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
    )
    return [data]


def _sse(start_response: StartResponse, frames: Iterator[dict[str, Any]]) -> Iterable[bytes]:
    # Evaluate the first frame now, so that an unknown task is a JSON-RPC error, not a stream.
    try:
        first = next(frames)
    except _RPCError:
        raise
    start_response(
        "200 OK",
        [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
         ("X-Accel-Buffering", "no")],
    )

    def body() -> Iterator[bytes]:
        try:
            yield _frame(first)
            for frame in frames:
                yield _frame(frame)
        finally:
            frames.close()  # type: ignore[attr-defined]

    return body()


def _frame(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _base_url(environ: WSGIEnviron) -> str:
    scheme = environ.get("wsgi.url_scheme", "http")
    host = environ.get("HTTP_HOST") or f"{environ.get('SERVER_NAME')}:{environ.get('SERVER_PORT')}"
    root = environ.get("SCRIPT_NAME", "")
    return f"{scheme}://{host}{root}/"


def to_a2a(
    target: Any,
    *,
    name: str | None = None,
    description: str | None = None,
    url: str | None = None,
    owner: Callable[[Mapping[str, Any]], str | None] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    timeout: float = 600.0,
) -> A2AApplication:
    """Serve an agent (or a :class:`~agentkit.Runner`) as an A2A agent: a WSGI application.

    The application serves the agent card at ``/.well-known/agent-card.json`` and the A2A
    JSON-RPC endpoint (protocol 0.3) at ``/``: ``message/send``, ``message/stream``,
    ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``. Each new message starts a task,
    a run of the agent in a thread of this process; a run that stops for a human decision is
    a task in ``input-required`` (its status message says what it waits for), and the next
    message on that task (``taskId`` set) is the answer that resumes it. Mount it in Flask
    with werkzeug's ``DispatcherMiddleware`` (see the Interoperability guide).

    Tasks can also run on a backend of your own: ``to_a2a(runs, name="assistant")`` with a
    :class:`~agentkit.integrations.runs.LocalRuns` or an
    :class:`~agentkit.integrations.celery.AgentQueue` runs the backend's agent ``name`` (the
    backend is yours to close). The A2A side of a task (its context id and history) is kept
    in this process: with several web processes, send a task's requests to the one that
    created it.

    Args:
        target: an agent, a Runner (given an agent, or a Runner without a checkpoint store,
            waiting tasks are kept in memory), or a ``LocalRuns``/``AgentQueue``.
        name: the card's name (default: the agent's); with a backend, the agent's name in it.
        description: the card's description (default: the agent's).
        url: the URL the card advertises; ``None``: the URL the request came in on.
        owner: who is calling, from the WSGI environ (default: ``REMOTE_USER``, which an
            authenticating server or middleware sets). A task belongs to its caller.
        max_body_bytes: the largest request taken.
        timeout: seconds a blocking ``message/send`` or a stream waits between two events.
    """
    if _is_backend(target):
        if not name:
            raise AgentKitValueError(
                "to_a2a(runs, name=...) needs the name of the agent to run: the name it has "
                "in the LocalRuns or AgentQueue"
            )
        return A2AApplication(
            target,
            name,
            owns_runs=False,
            name=name,
            description=description or name,
            url=url,
            owner=owner,
            max_body_bytes=max_body_bytes,
            timeout=timeout,
        )
    runner = target if isinstance(target, Runner) else Runner(target)
    if runner.checkpoint_store is None:
        inner = runner.agent.agent if isinstance(runner.agent, FlowAgent) else runner.agent
        runner = Runner(
            inner,
            enable_streaming=runner.enable_streaming,
            checkpoint_store=InMemoryCheckPointStore(),
            durability="stop",
            limits=runner.limits,
        )
    agent = runner.agent
    return A2AApplication(
        LocalRuns({agent.name: runner}),
        agent.name,
        owns_runs=True,
        name=name or agent.name,
        description=description if description is not None else agent.description,
        url=url,
        owner=owner,
        max_body_bytes=max_body_bytes,
        timeout=timeout,
    )


# Documented, and loaded on first use, as ``agentkit.a2a.X``.
A2AApplication.__module__ = "agentkit.a2a"
to_a2a.__module__ = "agentkit.a2a"
