"""AG-UI for Flask (or any WSGI app): a run's events as AG-UI events over Server-Sent Events.

`AG-UI <https://docs.ag-ui.com>`_ is the protocol front-end kits (CopilotKit and others) speak
to agents: the page posts a ``RunAgentInput`` (a thread id, the messages, the front end's
tools, state, answers to interrupts) and reads the run as a stream of typed events. Needs the
``agui`` extra (``pip install 'agentkit[agui,flask]'``)::

    from flask import Flask, request
    from agentkit.integrations.agui import agui_response

    @app.post("/agui")
    def agui():
        return agui_response(runner, request.get_json())

What a run becomes:

* the run: ``RUN_STARTED``, then ``RUN_FINISHED`` (or ``RUN_ERROR`` when it fails);
* each assistant message: ``TEXT_MESSAGE_START``, ``TEXT_MESSAGE_CONTENT`` (one per streamed
  chunk with ``Runner(enable_streaming=True)``, else one), ``TEXT_MESSAGE_END``;
* each tool call: ``TOOL_CALL_START``, ``TOOL_CALL_ARGS``, ``TOOL_CALL_END``, and its result
  ``TOOL_CALL_RESULT``;
* session values (the input's ``state`` is the run's session values): a ``STATE_SNAPSHOT`` of
  the values the run starts with, before its first event; then a ``STATE_DELTA`` (a JSON
  Patch, RFC 6902) after each ``TOOL_CALL_RESULT`` whose tool changed them, and one at the end
  for changes made elsewhere (a middleware, a workflow step);
* an interrupt (a tool call waiting for approval, a question from
  :func:`~agentkit.interrupt`, a call of a front-end tool): ``RUN_FINISHED`` with an
  ``interrupt`` outcome listing the interrupts (id, reason, message, the tool call, the JSON
  Schema of the answer). The page answers with a new ``RunAgentInput`` on the same thread
  whose ``resume`` entries carry each interrupt's id and ``payload``.

Front-end tools (``RunAgentInput.tools``) are given to the agent (a ``ChatModelAgent``) for
that run; when the model calls one, the run interrupts with reason ``tool_call`` until the
browser runs it and resumes with the result as the payload.

Interrupted runs are saved in the Runner's checkpoint store (it needs one to resume). A
thread belongs to its ``owner``: a resume of another owner's thread, or of another thread's
interrupt, is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._callbacks import with_callbacks
from agentkit._events import AgentEvent, InterruptContext
from agentkit._lazy import present
from agentkit._options import AgentRunOption, with_checkpoint_id, with_session_values
from agentkit._persist import persisted
from agentkit._runctx import get_session_values
from agentkit._runner import Runner
from agentkit.errors import AgentKitError, CheckpointError
from agentkit.integrations._errors import RunNotFoundError
from agentkit.schema import FunctionCall, Message, Role, ToolCall, ToolInfo
from agentkit.tools._approval import ApprovalRequest, Approve, Reject
from agentkit.tools._base import ToolCallInfo

if TYPE_CHECKING:
    from flask import Response

__all__ = ["AGUIInputError", "FrontendToolCall", "agui_events", "agui_response"]

_MAX_INPUT_BYTES = 1_000_000
_MAX_MESSAGES = 500
_CHECKPOINT = re.compile(r"^agui-[0-9a-f]{24}-[0-9a-f]{32}$")

_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "reject", "edit"]},
        "arguments": {"type": "object", "description": "for edit: the call's new arguments"},
        "reason": {"type": "string", "description": "for reject: why"},
    },
    "required": ["decision"],
}


class AGUIInputError(AgentKitError, ValueError):
    """A ``RunAgentInput`` that cannot be run: malformed, too large, or resuming what it may not."""


@persisted("agentkit.integrations.agui.FrontendToolCall")
@attrs.frozen
class FrontendToolCall:
    """The interrupt info of a call of a front-end tool: the browser runs it and resumes.

    Attributes:
        tool_name: the front-end tool the model called.
        call_id: the id of the call.
        arguments: the arguments the model sent (a JSON object, as a dict).
    """

    tool_name: str
    call_id: str
    arguments: dict[str, Any] = attrs.field(hash=False)

    def __str__(self) -> str:
        arguments = json.dumps(self.arguments, ensure_ascii=False)
        return f"run {self.tool_name}({arguments}) in the browser"


class _FrontendTool:
    """A tool of the page: calling it interrupts the run with a :class:`FrontendToolCall`."""

    def __init__(self, name: str, description: str, parameters: Any) -> None:
        schema: dict[str, Any] = (
            parameters if isinstance(parameters, dict) else {"type": "object", "properties": {}}
        )
        self._info = ToolInfo(name, description, schema)

    def info(self) -> ToolInfo:
        return self._info

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        from agentkit._interrupt import interrupt
        from agentkit._runctx import current_frame

        frame = current_frame()
        call_id = frame.tool.call_id if frame is not None and frame.tool is not None else ""

        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            parsed = {"raw": arguments}
        if not isinstance(parsed, dict):
            parsed = {"value": parsed}
        answer = interrupt(FrontendToolCall(self._info.name, call_id, parsed))
        return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)


def _types() -> Any:
    try:
        from ag_ui import core
    except ImportError as error:  # pragma: no cover - the extra is missing
        raise AGUIInputError(
            "agentkit.integrations.agui needs the 'ag-ui-protocol' package; install it with: "
            "pip install 'agentkit[agui]'"
        ) from error
    return core


def _parse_input(
    run_input: Mapping[str, Any] | str | bytes,
    *,
    max_input_bytes: int = _MAX_INPUT_BYTES,
    max_messages: int = _MAX_MESSAGES,
) -> Any:
    """Validate a ``RunAgentInput`` (a dict or its JSON) with ``ag_ui``'s model.

    Raises:
        AGUIInputError: it is larger than ``max_input_bytes``, not JSON, not a
            ``RunAgentInput``, or carries more than ``max_messages`` messages.
    """
    core = _types()
    if isinstance(run_input, (str, bytes)):
        size = len(run_input.encode("utf-8") if isinstance(run_input, str) else run_input)
        if size > max_input_bytes:
            raise AGUIInputError(f"the input is {size} bytes; at most {max_input_bytes} are taken")
        try:
            run_input = json.loads(run_input)
        except ValueError as error:
            raise AGUIInputError(f"the input is not JSON: {error}") from None
    if not isinstance(run_input, Mapping):
        raise AGUIInputError("the input must be a JSON object (an AG-UI RunAgentInput)")
    size = len(json.dumps(run_input, ensure_ascii=False, default=str).encode("utf-8"))
    if size > max_input_bytes:
        raise AGUIInputError(f"the input is {size} bytes; at most {max_input_bytes} are taken")
    try:
        parsed = core.RunAgentInput.model_validate(dict(run_input))
    except Exception as error:  # pydantic's ValidationError
        raise AGUIInputError(f"not an AG-UI RunAgentInput: {_first_line(error)}") from None
    if len(parsed.messages) > max_messages:
        raise AGUIInputError(
            f"the input has {len(parsed.messages)} messages; at most {max_messages} are taken"
        )
    return parsed


def _first_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:300]


def _to_messages(messages: Sequence[Any]) -> list[Message]:
    out: list[Message] = []
    for message in messages:
        role = message.role
        content = message.content
        if isinstance(content, list):
            content = "".join(getattr(part, "text", "") for part in content)
        text = content if isinstance(content, str) else ""
        if role == "user":
            out.append(Message(Role.USER, text))
        elif role in ("system", "developer"):
            out.append(Message(Role.SYSTEM, text))
        elif role == "assistant":
            calls = [
                ToolCall(call.id, FunctionCall(call.function.name, call.function.arguments))
                for call in (message.tool_calls or [])
            ]
            out.append(Message(Role.ASSISTANT, text, calls))
        elif role == "tool":
            out.append(Message(Role.TOOL, text, tool_call_id=message.tool_call_id))
        # activity and reasoning messages are the page's own: not sent to the model
    return out


def _thread_key(owner: str | None, thread_id: str) -> str:
    return hashlib.sha256(f"{owner or ''}\0{thread_id}".encode()).hexdigest()[:24]


def _with_frontend_tools(runner: Runner, tools: Sequence[Any]) -> Runner:
    if not tools:
        return runner
    from agentkit.agents._chatmodel import ChatModelAgent

    inner = getattr(runner.agent, "agent", runner.agent)
    if not isinstance(inner, ChatModelAgent):
        raise AGUIInputError(
            "front-end tools need a ChatModelAgent to give them to; this Runner runs "
            f"{type(inner).__name__}"
        )
    own = {tool.info().name for tool in inner.tools}
    extra = [
        _FrontendTool(tool.name, tool.description, tool.parameters)
        for tool in tools
        if tool.name not in own
    ]
    return Runner(
        inner.replace(tools=[*inner.tools, *extra]),
        enable_streaming=runner.enable_streaming,
        checkpoint_store=runner.checkpoint_store,
        serializer=runner.serializer,
        conversation_store=runner.conversation_store,
        durability=runner.durability,
        limits=runner.limits,
    )


def _resume_data(approval: bool, status: str, payload: Any) -> Any:
    if approval:
        if status == "cancelled":
            return Reject(reason="cancelled by the user")
        if payload is True or payload is False:
            return payload
        decision = payload.get("decision") if isinstance(payload, dict) else payload
        if decision == "approve":
            return Approve()
        if decision == "reject":
            reason = payload.get("reason", "") if isinstance(payload, dict) else ""
            return Reject(reason=str(reason)[:2000])
        edited = payload.get("arguments") if isinstance(payload, dict) else None
        if decision == "edit" and isinstance(edited, dict):
            return Approve(arguments=edited)
        raise AGUIInputError(
            'an approval is answered with {"decision": "approve"}, {"decision": "reject", '
            '"reason": "..."} or {"decision": "edit", "arguments": {...}}'
        )
    if status == "cancelled":
        return None
    return payload


def agui_events(
    runner: Runner,
    run_input: Mapping[str, Any] | str | bytes,
    *,
    owner: str | None = None,
    max_input_bytes: int = _MAX_INPUT_BYTES,
    max_messages: int = _MAX_MESSAGES,
) -> Iterator[str]:
    """Run one ``RunAgentInput`` and yield its AG-UI events as SSE frames (``data: {...}``).

    Closing the generator (the client went away) cancels the run. A bad input yields one
    ``RUN_ERROR`` event and starts nothing (see :func:`agui_response`).
    """
    core = _types()
    encode = _encoder()
    try:
        parsed = _parse_input(run_input, max_input_bytes=max_input_bytes, max_messages=max_messages)
        watch = _SessionWatch()
        events, checkpoint_id = _start(runner, parsed, owner, with_callbacks(watch))
    except (AGUIInputError, RunNotFoundError, CheckpointError, ValueError) as error:
        yield encode(core.RunErrorEvent(message=str(error)[:2000], code="invalid_input"))
        return
    thread_id, run_id = parsed.thread_id, parsed.run_id
    yield encode(core.RunStartedEvent(thread_id=thread_id, run_id=run_id))
    last: AgentEvent | None = None
    state = _StateStream(core)
    with events:
        for event in events:
            if last is None:
                yield from (encode(item) for item in state.update(watch.initial()))
            last = event
            for item in _event_items(core, event):
                yield encode(item)
                if isinstance(item, core.ToolCallResultEvent):
                    changed = watch.after_tool(item.tool_call_id)
                    yield from (encode(update) for update in state.update(changed))
        try:
            values = _as_json(events.result(raise_errors=False).session_values)
        except Exception:  # the values cannot always be read back (an error before the run)
            values = None
    yield from (encode(item) for item in state.update(values))
    if last is not None and last.err is not None:
        yield encode(core.RunErrorEvent(message=f"{type(last.err).__name__}: {last.err}"[:2000]))
        return
    if last is not None and last.action is not None and last.action.interrupted is not None:
        points = [p for p in last.action.interrupted.contexts if p.is_root_cause]
        outcome = core.RunFinishedInterruptOutcome(
            interrupts=[_interrupt(core, checkpoint_id, point) for point in points]
        )
        yield encode(core.RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=outcome))
        return
    answer = last.get_message() if last is not None else None
    yield encode(
        core.RunFinishedEvent(
            thread_id=thread_id,
            run_id=run_id,
            result=answer.content if answer is not None else None,
            outcome=core.RunFinishedSuccessOutcome(),
        )
    )


def _as_json(values: Mapping[str, Any]) -> dict[str, Any]:
    """Session values as JSON values (a value JSON cannot hold becomes its ``str``): a copy
    of its own, which later changes of the run's objects do not reach."""
    result: dict[str, Any] = json.loads(json.dumps(dict(values), default=str))
    return result


class _SessionWatch:
    """Run callbacks that note the run's session values (as JSON values) as the run starts
    and as each tool call ends.

    They are called in the run's own threads, which may be ahead of the thread that streams
    the events: so the values are kept per tool call, and the stream shows each tool's
    values after that tool's result, whenever it reads it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._initial: dict[str, Any] | None = None
        self._after_tool: dict[str, dict[str, Any]] = {}

    def on_agent_start(self, info: object, input: object) -> None:
        values = _as_json(get_session_values())
        with self._lock:
            if self._initial is None:
                self._initial = values

    def on_tool_end(
        self, info: object, call: ToolCallInfo, result: object, error: object
    ) -> None:
        values = _as_json(get_session_values())
        with self._lock:
            self._after_tool[call.call_id] = values

    def initial(self) -> dict[str, Any] | None:
        """The values the run started with (``None`` before it started)."""
        with self._lock:
            return self._initial

    def after_tool(self, call_id: str) -> dict[str, Any] | None:
        """The values as the tool call ``call_id`` ended (once; ``None`` when not seen)."""
        with self._lock:
            return self._after_tool.pop(call_id, None)


class _StateStream:
    """The session values as the page sees them: a snapshot first, then JSON Patch deltas."""

    def __init__(self, core: Any) -> None:
        self._core = core
        self._sent: dict[str, Any] | None = None

    def update(self, values: dict[str, Any] | None) -> list[Any]:
        """The events that bring the page to ``values``: a ``STATE_SNAPSHOT`` the first time
        (when there are values), else a ``STATE_DELTA`` when they changed."""
        if values is None:
            return []
        if self._sent is None:
            if not values:
                return []
            self._sent = values
            return [self._core.StateSnapshotEvent(snapshot=values)]
        patch = _json_patch(self._sent, values)
        if not patch:
            return []
        self._sent = values
        return [self._core.StateDeltaEvent(delta=patch)]


def _json_patch(
    old: Mapping[str, Any], new: Mapping[str, Any], path: str = ""
) -> list[dict[str, Any]]:
    """The JSON Patch (RFC 6902) that turns the JSON object ``old`` into ``new``.

    Keys are compared one by one: an added key is an ``add``, a removed one a ``remove``, a
    changed value a ``replace``, except that two objects are compared key by key in turn
    (arrays and other values are replaced whole). Keys are escaped per RFC 6901.
    """
    ops: list[dict[str, Any]] = []
    for key in old:
        if key not in new:
            ops.append({"op": "remove", "path": f"{path}/{_pointer(key)}"})
    for key, value in new.items():
        where = f"{path}/{_pointer(key)}"
        if key not in old:
            ops.append({"op": "add", "path": where, "value": value})
        elif isinstance(old[key], dict) and isinstance(value, dict):
            ops.extend(_json_patch(old[key], value, where))
        elif old[key] != value or type(old[key]) is not type(value):
            ops.append({"op": "replace", "path": where, "value": value})
    return ops


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _encoder() -> Any:
    """The SSE encoding of one event: ``ag_ui``'s own encoder."""
    from ag_ui.encoder import EventEncoder

    encoder = EventEncoder()
    return encoder.encode


def _start(
    runner: Runner, parsed: Any, owner: str | None, *run_options: AgentRunOption
) -> tuple[Any, str]:
    prefix = f"agui-{_thread_key(owner, parsed.thread_id)}-"
    active = _with_frontend_tools(runner, parsed.tools or [])
    if parsed.resume:
        checkpoint_ids = {entry.interrupt_id.split("/", 1)[0] for entry in parsed.resume}
        if len(checkpoint_ids) != 1:
            raise AGUIInputError("the resume entries answer interrupts of different runs")
        [checkpoint_id] = checkpoint_ids
        if not _CHECKPOINT.match(checkpoint_id) or not checkpoint_id.startswith(prefix):
            raise AGUIInputError("no interrupted run of this thread has these interrupt ids")
        if runner.checkpoint_store is None:
            raise AGUIInputError("this Runner has no checkpoint_store, so runs cannot resume")
        targets = {
            entry.interrupt_id.split("/", 1)[1]: _resume_data(
                _is_approval(entry), entry.status, entry.payload
            )
            for entry in parsed.resume
        }
        try:
            return active.resume(checkpoint_id, *run_options, targets=targets), checkpoint_id
        except CheckpointError as error:
            raise AGUIInputError(
                "no interrupted run of this thread has these interrupt ids "
                f"({type(error).__name__})"
            ) from None
    messages = _to_messages(parsed.messages)
    if not messages:
        raise AGUIInputError("the input has no message to run")
    checkpoint_id = prefix + uuid.uuid4().hex
    options: list[Any] = list(run_options)
    if runner.checkpoint_store is not None:
        options.append(with_checkpoint_id(checkpoint_id))
    if isinstance(parsed.state, dict) and parsed.state:
        options.append(with_session_values(parsed.state))
    return active.run(messages, *options), checkpoint_id


def _is_approval(entry: Any) -> bool:
    """Whether a resume entry answers an approval: its metadata says so (the page echoes the
    interrupt's), or its payload is a decision."""
    metadata = entry.metadata if isinstance(entry.metadata, dict) else {}
    payload = entry.payload
    return metadata.get("agentkit") == "approval" or (
        isinstance(payload, dict) and "decision" in payload
    )


def _interrupt(core: Any, checkpoint_id: str, point: InterruptContext) -> Any:
    info = point.info
    if isinstance(info, ApprovalRequest):
        return core.Interrupt(
            id=f"{checkpoint_id}/{point.id}",
            reason="tool_approval",
            message=str(info),
            tool_call_id=info.call_id,
            response_schema=_APPROVAL_SCHEMA,
            metadata={"agentkit": "approval", "arguments": info.arguments},
        )
    if isinstance(info, FrontendToolCall):
        return core.Interrupt(
            id=f"{checkpoint_id}/{point.id}",
            reason="tool_call",
            message=str(info),
            tool_call_id=info.call_id,
            metadata={"agentkit": "tool_call", "tool": info.tool_name, "arguments": info.arguments},
        )
    return core.Interrupt(
        id=f"{checkpoint_id}/{point.id}",
        reason="input_required",
        message=str(info)[:2000] if info is not None else None,
        metadata={"agentkit": "question"},
    )


def _event_items(core: Any, event: AgentEvent) -> Iterator[Any]:
    variant = event.output.message_output if event.output is not None else None
    if variant is None or event.err is not None:
        return
    if variant.role == Role.TOOL:
        message = variant.get_message()
        yield core.ToolCallResultEvent(
            message_id=uuid.uuid4().hex,
            tool_call_id=message.tool_call_id or "unknown",
            content=message.content,
            role="tool",
        )
        return
    message_id = uuid.uuid4().hex
    started = False
    if variant.is_streaming and variant.message_stream is not None:
        read = variant.open_stream()
        try:
            for chunk in read:
                if chunk.content:
                    if not started:
                        yield core.TextMessageStartEvent(message_id=message_id, role="assistant")
                        started = True
                    yield core.TextMessageContentEvent(message_id=message_id, delta=chunk.content)
        except Exception:
            read.close()  # the event's own error ends the run with RUN_ERROR
    message = variant.get_message()
    if not started and message.content:
        yield core.TextMessageStartEvent(message_id=message_id, role="assistant")
        yield core.TextMessageContentEvent(message_id=message_id, delta=message.content)
        started = True
    if started:
        yield core.TextMessageEndEvent(message_id=message_id)
    for call in message.tool_calls:
        yield core.ToolCallStartEvent(
            tool_call_id=call.id, tool_call_name=call.function.name, parent_message_id=message_id
        )
        if call.function.arguments:
            yield core.ToolCallArgsEvent(tool_call_id=call.id, delta=call.function.arguments)
        yield core.ToolCallEndEvent(tool_call_id=call.id)


def agui_response(
    runner: Runner,
    run_input: Mapping[str, Any] | str | bytes,
    *,
    owner: str | None = None,
    max_input_bytes: int = _MAX_INPUT_BYTES,
    max_messages: int = _MAX_MESSAGES,
) -> Response:
    """A Flask streaming response of one AG-UI run (see :mod:`agentkit.integrations.agui`).

    ``run_input`` is the ``RunAgentInput`` (``request.get_json()``, or the raw body). A bad
    input (too large, not a ``RunAgentInput``, more than ``max_messages`` messages, a resume
    of an interrupt that is not this thread's) is answered with status 400 and one
    ``RUN_ERROR`` event; nothing runs. ``owner`` is the logged-in user: threads are
    separate per owner.
    """
    from flask import Response, stream_with_context

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    try:
        _parse_input(run_input, max_input_bytes=max_input_bytes, max_messages=max_messages)
    except AGUIInputError as error:
        core = _types()
        body = _encoder()(core.RunErrorEvent(message=str(error)[:2000], code="invalid_input"))
        return Response(body, status=400, mimetype="text/event-stream", headers=headers)
    frames = agui_events(
        runner, run_input, owner=owner, max_input_bytes=max_input_bytes, max_messages=max_messages
    )
    return Response(stream_with_context(frames), mimetype="text/event-stream", headers=headers)


present((AGUIInputError, FrontendToolCall), __name__)
