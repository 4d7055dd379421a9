"""to_mcp_server: an agent (or a Runner) served as MCP tools over stdio or streamable HTTP."""

from __future__ import annotations

import collections
import hashlib
import json
import re
import uuid
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from agentkit._cancel import CancelHandle
from agentkit._events import AgentEvent, InterruptContext
from agentkit._options import with_cancel, with_checkpoint_id
from agentkit._runner import Runner
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import (
    AgentKitValueError,
    CheckpointConsumedError,
    CheckpointError,
    CheckpointNotFoundError,
)
from agentkit.iterators import AsyncIterator
from agentkit.mcp import _compat
from agentkit.schema import Role
from agentkit.tools._approval import ApprovalRequest, Approve, Reject

__all__ = ["AgentMCPServer", "to_mcp_server"]

DEFAULT_MAX_INPUT_CHARS = 100_000
DEFAULT_TIMEOUT = 600.0
_TEXT_EXCERPT = 2000  # characters of a message sent in one progress or log notification
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_.-]")
_RUN_ID = re.compile(r"^[0-9a-f]{32}(\.[0-9a-f]{24})?$")
_DECISIONS = ("approve", "reject", "edit")
_MAX_PENDING = 10_000

_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "enum": list(_DECISIONS),
            "description": "approve the call, reject it, or edit its arguments",
        },
        "arguments": {
            "type": "string",
            "title": "Edited arguments",
            "description": "for edit: the call's arguments as a JSON object",
        },
        "reason": {"type": "string", "title": "Reason", "description": "for reject: why"},
    },
    "required": ["decision"],
}
_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "title": "Answer"}},
    "required": ["answer"],
}


class _DecisionError(ValueError):
    """A tool call the served agent refuses (bad input); the client gets it as an error result."""


def _mcp_server_class() -> Any:
    _compat.require_mcp()
    if _compat.mcp_major_version() >= 2:
        return _compat._module("mcp.server.mcpserver").MCPServer
    return _compat._module("mcp.server.fastmcp").FastMCP


def _context_class() -> Any:
    if _compat.mcp_major_version() >= 2:
        return _compat._module("mcp.server.mcpserver").Context
    return _compat._module("mcp.server.fastmcp").Context


@attrs.frozen
class _Pending:
    """The root-cause interrupts a stopped run waits on."""

    contexts: tuple[InterruptContext, ...]


def _owner_digest(owner: str) -> str:
    return hashlib.sha256(owner.encode("utf-8")).hexdigest()[:24]


def _default_owner(headers: Mapping[str, str] | None) -> str | None:
    """The OAuth client of the request when the server authenticates, else nobody."""
    try:
        auth_context = _compat._module("mcp.server.auth.middleware.auth_context")
    except Exception:
        return None
    token = auth_context.get_access_token()
    return None if token is None else str(token.client_id)


class AgentMCPServer:
    """An agent served as MCP tools; made by :func:`to_mcp_server`.

    It lists two tools: one named after the agent (input schema: one string property
    ``input``), which runs the agent and returns its final answer as text content, and
    ``resume_<agent>``, which continues a run that waits for a human decision (see
    :func:`to_mcp_server`).

    Attributes:
        server: the ``mcp`` package's server object (``MCPServer`` of mcp 2.x, ``FastMCP`` of
            1.x); use it to mount the server in an ASGI app (``server.streamable_http_app()``).
        runner: the Runner the calls run on.
        tool_name: the name of the agent's tool.
    """

    def __init__(
        self,
        runner: Runner,
        *,
        name: str | None = None,
        max_input_chars: int = DEFAULT_MAX_INPUT_CHARS,
        timeout: float | None = DEFAULT_TIMEOUT,
        owner: Callable[[Mapping[str, str] | None], str | None] | None = None,
    ) -> None:
        if max_input_chars < 1:
            raise AgentKitValueError(f"max_input_chars must be at least 1 (got {max_input_chars})")
        if timeout is not None and timeout <= 0:
            raise AgentKitValueError(f"timeout must be > 0 seconds or None (got {timeout})")
        self.runner = runner
        self.max_input_chars = max_input_chars
        self.timeout = timeout
        self._owner = owner or _default_owner
        agent = runner.agent
        self.tool_name = _TOOL_NAME.sub("_", agent.name)[:100] or "agent"
        self.resume_tool_name = f"resume_{self.tool_name}"
        # Waiting runs by id, the oldest forgotten past _MAX_PENDING (a forgotten one is found
        # again in the checkpoint store when it is resumed).
        self._pending: collections.OrderedDict[str, _Pending] = collections.OrderedDict()
        self.server = _mcp_server_class()(name or agent.name)
        self._register(agent.description)

    def run(
        self, transport: str = "stdio", *, host: str = "127.0.0.1", port: int = 8000
    ) -> None:
        """Serve until stopped: ``"stdio"`` (on this process's stdin and stdout) or
        ``"streamable-http"`` (at ``http://{host}:{port}/mcp``)."""
        if transport == "stdio":
            self.server.run(transport="stdio")
        elif transport == "streamable-http":
            if _compat.mcp_major_version() >= 2:
                self.server.run(transport="streamable-http", host=host, port=port)
            else:
                self.server.settings.host, self.server.settings.port = host, port
                self.server.run(transport="streamable-http")
        else:
            raise AgentKitValueError(
                f"transport must be 'stdio' or 'streamable-http' (got {transport!r})"
            )

    def _register(self, description: str) -> None:
        context_class = _context_class()
        limit = self.max_input_chars

        async def call_agent(input: str, ctx: Any) -> Any:
            if len(input) > limit:
                return _error(
                    f"input is {len(input)} characters; this server takes at most {limit}"
                )
            owner = self._owner(_headers(ctx))
            run_id = uuid.uuid4().hex + ("" if owner is None else "." + _owner_digest(owner))
            return await self._drive(ctx, run_id, lambda handle: self.runner.query(
                input, with_checkpoint_id(run_id), with_cancel(handle)
            ))

        async def resume(
            run_id: str,
            decision: str = "approve",
            arguments: str = "",
            reason: str = "",
            answer: str = "",
            ctx: Any = None,
        ) -> Any:
            for field, value in (("arguments", arguments), ("reason", reason), ("answer", answer)):
                if len(value) > limit:
                    return _error(f"{field} is {len(value)} characters; at most {limit} are taken")
            owner = self._owner(_headers(ctx))
            if not self._owns(run_id, owner):
                return _error(f"no waiting run with id {run_id[:80]!r}")
            try:
                pending = await self._pending_of(run_id)
            except (CheckpointNotFoundError, CheckpointConsumedError):
                pending = None
            except CheckpointError as error:
                return _error(f"run {run_id!r} cannot be resumed now: {error}")
            if pending is None:
                return _error(f"no waiting run with id {run_id[:80]!r}")
            try:
                targets = {
                    point.id: _decision(point, decision, arguments, reason, answer)
                    for point in pending.contexts
                }
            except _DecisionError as error:
                return _error(str(error))
            self._pending.pop(run_id, None)
            return await self._drive(ctx, run_id, lambda handle: self.runner.resume(
                run_id, with_cancel(handle), targets=targets
            ))

        call_agent.__annotations__ = {"input": str, "ctx": context_class, "return": Any}
        resume.__annotations__ = {
            "run_id": str, "decision": str, "arguments": str, "reason": str, "answer": str,
            "ctx": context_class, "return": Any,
        }
        self.server.add_tool(
            call_agent,
            name=self.tool_name,
            description=description or f"Runs the agent {self.tool_name}.",
            structured_output=False,
        )
        self.server.add_tool(
            resume,
            name=self.resume_tool_name,
            description=(
                f"Continues a run of {self.tool_name} that waits for a decision. run_id: the "
                "id the waiting result gave; decision: approve, reject or edit (with "
                "arguments: the call's arguments as a JSON object; reason: why it is "
                "rejected); answer: the reply to a question the agent asked."
            ),
            structured_output=False,
        )

    def _owns(self, run_id: str, owner: str | None) -> bool:
        match = _RUN_ID.match(run_id)
        if match is None:
            return False
        suffix = match.group(1)
        if owner is None:
            return suffix is None
        return suffix == "." + _owner_digest(owner)

    async def _pending_of(self, run_id: str) -> _Pending | None:
        pending = self._pending.get(run_id)
        if pending is not None:
            return pending
        # Not in memory (the server restarted): the store still has the checkpoint. A
        # resume without decisions interrupts again at once and names what it waits on.
        if self.runner.checkpoint_store is None:
            return None
        anyio = _compat._module("anyio")

        def rediscover() -> _Pending | None:
            with self.runner.resume(run_id) as events:
                last = None
                for event in events:
                    last = event
            if last is None or last.action is None or last.action.interrupted is None:
                return None
            return _Pending(_root_causes(last))

        found: _Pending | None = await anyio.to_thread.run_sync(rediscover)
        return found

    async def _drive(
        self, ctx: Any, run_id: str, start: Callable[[CancelHandle], AsyncIterator[AgentEvent]]
    ) -> Any:
        anyio = _compat._module("anyio")
        handle = CancelHandle()
        while True:
            events = await anyio.to_thread.run_sync(start, handle)
            try:
                with anyio.fail_after(self.timeout):
                    last = await self._forward(ctx, events)
            except TimeoutError:
                handle.cancel()
                await _close(anyio, events)
                return _error(
                    f"the run took longer than {self.timeout} seconds and was cancelled"
                )
            except BaseException:  # the client cancelled the call (or the server stops)
                handle.cancel()
                with anyio.CancelScope(shield=True):
                    await _close(anyio, events)
                raise
            await _close(anyio, events)
            if last is None:
                return _error("the run ended without an event")
            if last.err is not None:
                return _error(f"the run failed: {type(last.err).__name__}: {last.err}")
            if last.action is None or last.action.interrupted is None:
                message = last.get_message()
                return message.content if message is not None else ""
            pending = _Pending(_root_causes(last))
            targets = await self._elicit(ctx, pending)
            if targets is None:
                self._pending[run_id] = pending
                while len(self._pending) > _MAX_PENDING:
                    self._pending.popitem(last=False)
                return _waiting(run_id, pending, self.resume_tool_name)

            def start_resume(
                handle: CancelHandle, targets: dict[str, Any] = targets
            ) -> AsyncIterator[AgentEvent]:
                return self.runner.resume(run_id, with_cancel(handle), targets=targets)

            start = start_resume
            handle = CancelHandle()

    async def _forward(self, ctx: Any, events: AsyncIterator[AgentEvent]) -> AgentEvent | None:
        anyio = _compat._module("anyio")
        last: AgentEvent | None = None
        step = 0
        done = object()
        while True:
            event = await anyio.to_thread.run_sync(next, events, done, abandon_on_cancel=True)
            if event is done:
                return last
            assert isinstance(event, AgentEvent)
            last = event
            step += 1
            note = describe_event(event)
            if note is None:
                continue
            await ctx.report_progress(step, None, f"{event.agent_name}: {note['text']}")
            await _log(ctx, "error" if event.err is not None else "info", event.agent_name, note)

    async def _elicit(self, ctx: Any, pending: _Pending) -> dict[str, Any] | None:
        """Ask the client for each decision; ``None`` when it cannot ask (or the user cancelled)."""
        if not _supports_elicitation(ctx):
            return None
        targets: dict[str, Any] = {}
        for point in pending.contexts:
            approval = isinstance(point.info, ApprovalRequest)
            schema = _APPROVAL_SCHEMA if approval else _ANSWER_SCHEMA
            result = await _elicit_form(ctx, _question(point), schema)
            action = getattr(result, "action", "cancel")
            content = getattr(result, "content", None) or {}
            if action == "decline":
                if not approval:
                    return None
                targets[point.id] = Reject(reason="declined by the user")
                continue
            if action != "accept":
                return None
            try:
                targets[point.id] = _decision(
                    point,
                    str(content.get("decision", "approve")),
                    str(content.get("arguments", "")),
                    str(content.get("reason", "")),
                    str(content.get("answer", "")),
                )
            except _DecisionError:
                return None  # an answer that does not fit: the run waits for resume_<agent>
        return targets


def describe_event(event: AgentEvent) -> dict[str, Any] | None:
    """A short JSON-safe note of one event for a progress or log notification."""
    if event.err is not None:
        return {"kind": "error", "text": f"{type(event.err).__name__}: {event.err}"[:_TEXT_EXCERPT]}
    if event.action is not None and event.action.interrupted is not None:
        questions = [str(point.info)[:_TEXT_EXCERPT] for point in _root_causes(event)]
        return {"kind": "interrupt", "text": "waiting: " + "; ".join(questions)}
    message = event.get_message()
    if message is None:
        return None
    if message.tool_calls:
        names = ", ".join(call.function.name for call in message.tool_calls)
        return {"kind": "tool_calls", "text": f"calling {names}"}
    if message.role == Role.TOOL:
        return {
            "kind": "tool_result",
            "text": f"{message.tool_name} returned: {message.content[:_TEXT_EXCERPT]}",
        }
    return {"kind": "message", "text": message.content[:_TEXT_EXCERPT]}


def _root_causes(event: AgentEvent) -> tuple[InterruptContext, ...]:
    assert event.action is not None and event.action.interrupted is not None
    return tuple(point for point in event.action.interrupted.contexts if point.is_root_cause)


def _question(point: InterruptContext) -> str:
    if isinstance(point.info, ApprovalRequest):
        arguments = json.dumps(point.info.arguments, ensure_ascii=False)[:_TEXT_EXCERPT]
        return f"Approve {point.info.tool_name}({arguments})?"
    return str(point.info)[:_TEXT_EXCERPT] if point.info is not None else "The agent asks."


def _decision(
    point: InterruptContext, decision: str, arguments: str, reason: str, answer: str
) -> Any:
    if not isinstance(point.info, ApprovalRequest):
        return answer
    if decision == "approve":
        return Approve()
    if decision == "reject":
        return Reject(reason=reason) if reason else Reject()
    if decision == "edit":
        try:
            edited = json.loads(arguments)
        except ValueError:
            edited = None
        if not isinstance(edited, dict):
            raise _DecisionError(
                "decision 'edit' needs arguments: the call's arguments as a JSON object "
                f'such as {{"amount": 100}} (got {arguments[:80]!r})'
            )
        return Approve(arguments=edited)
    raise _DecisionError(f"decision must be approve, reject or edit (got {decision[:40]!r})")


def _waiting(run_id: str, pending: _Pending, resume_tool: str) -> Any:
    questions = "; ".join(_question(point) for point in pending.contexts)
    text = (
        f"The run is waiting for a decision: {questions}\n"
        f"Resume it with the tool {resume_tool}: run_id={run_id!r}, decision='approve', "
        "'reject' or 'edit' (edit: arguments='{...}' as a JSON object); for a question, "
        "answer='...'."
    )
    return _result(
        {
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"status": "waiting", "run_id": run_id},
        }
    )


def _result(wire: dict[str, Any]) -> Any:
    """A ``CallToolResult`` from its wire shape (both lines of ``mcp`` take the JSON names)."""
    return _compat._module("mcp.types").CallToolResult.model_validate(wire)


def _error(text: str) -> Any:
    return _result({"content": [{"type": "text", "text": text}], "isError": True})


def _headers(ctx: Any) -> Mapping[str, str] | None:
    if ctx is None:
        return None
    try:
        request = ctx.request_context.request
    except (AttributeError, LookupError, ValueError):
        return None
    headers = getattr(request, "headers", None)
    return headers if isinstance(headers, Mapping) or headers is None else dict(headers)


def _supports_elicitation(ctx: Any) -> bool:
    capabilities = getattr(ctx, "client_capabilities", None)
    if capabilities is None:
        params = getattr(ctx.session, "client_params", None)
        capabilities = getattr(params, "capabilities", None)
    return getattr(capabilities, "elicitation", None) is not None


async def _elicit_form(ctx: Any, message: str, schema: dict[str, Any]) -> Any:
    session = ctx.session
    if hasattr(session, "elicit_form"):
        return await session.elicit_form(
            message=message, requested_schema=schema, related_request_id=ctx.request_id
        )
    return await session.elicit(
        message=message, requestedSchema=schema, related_request_id=ctx.request_id
    )


async def _log(ctx: Any, level: str, logger: str, data: dict[str, Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated in the 2026 protocol, still served
        await ctx.session.send_log_message(
            level=level, data=data, logger=logger, related_request_id=ctx.request_id
        )


async def _close(anyio: Any, events: AsyncIterator[AgentEvent]) -> None:
    await anyio.to_thread.run_sync(events.close)


def to_mcp_server(
    target: Any,
    *,
    name: str | None = None,
    max_input_chars: int = DEFAULT_MAX_INPUT_CHARS,
    timeout: float | None = DEFAULT_TIMEOUT,
    owner: Callable[[Mapping[str, str] | None], str | None] | None = None,
) -> AgentMCPServer:
    """Serve an agent (or a :class:`~agentkit.Runner`) as an MCP server.

    The server lists a tool named after the agent whose input schema has one string property
    ``input``; calling it runs the agent on that text and returns its final answer as text
    content. Each event of the run is sent as a progress notification (when the client gave
    a progress token) and a log message. When the run stops for a human decision (a tool
    call waiting for approval, or any :func:`~agentkit.interrupt`), the server asks the
    client with an MCP elicitation when the client supports it (approve, reject or edit the
    arguments; a text answer for other questions) and goes on with the answer; otherwise (or
    when the user cancels the question) the result says the run is waiting, with its run id,
    and the second tool, ``resume_<agent>``, continues it. A client that cancels the call
    cancels the run; a call that takes longer than ``timeout`` seconds is cancelled too.

    Runs are saved in the Runner's checkpoint store under their run ids; with a persistent
    store (``FileCheckPointStore``, ``SQLiteCheckPointStore``, Redis) a waiting run can be
    resumed after the server restarted. Given an agent, or a Runner without a store, the
    server keeps waiting runs in memory.

    Args:
        target: an agent or a Runner.
        name: the server's name (default: the agent's).
        max_input_chars: the longest ``input`` (and resume answer) taken, in characters.
        timeout: seconds one call may run (``None``: no limit).
        owner: who is calling: a function of the HTTP request's headers (``None`` on
            stdio) returning a user id, or ``None``; by default the OAuth client id when the
            server authenticates its clients, else nobody. A waiting run can only be resumed
            by the caller that started it.

    Example::

        to_mcp_server(agent).run(transport="stdio")
    """
    if isinstance(target, Runner):
        runner = target
        if runner.checkpoint_store is None:
            runner = Runner(
                runner.agent,
                enable_streaming=runner.enable_streaming,
                checkpoint_store=InMemoryCheckPointStore(),
                conversation_store=runner.conversation_store,
                durability="stop",
                limits=runner.limits,
            )
    else:
        runner = Runner(target, checkpoint_store=InMemoryCheckPointStore(), durability="stop")
    return AgentMCPServer(
        runner, name=name, max_input_chars=max_input_chars, timeout=timeout, owner=owner
    )


# Documented, and loaded on first use, as ``agentkit.mcp.X``.
AgentMCPServer.__module__ = "agentkit.mcp"
to_mcp_server.__module__ = "agentkit.mcp"
