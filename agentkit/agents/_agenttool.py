"""AgentTool: an agent used as a tool by another agent."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from agentkit._agent import call_run, run_agent
from agentkit._events import (
    Agent,
    AgentEvent,
    AgentInput,
    ResumeInfo,
    RunStep,
    gen_transfer_messages,
)
from agentkit._interrupt import InterruptSignal
from agentkit._lazy import present
from agentkit._persist import persisted
from agentkit._runctx import EventLog, RecordedEvent, RunFrame, Session, current_frame
from agentkit._scope import RunScope
from agentkit._values import BuiltValue
from agentkit.agents._agent_tool_retry import AgentToolRetryConfig
from agentkit.agents._flow import FlowAgent, rewrite_message
from agentkit.errors import AgentConfigError, AgentKitError, ToolArgumentsError
from agentkit.schema import ContentPart, Message, Role, TextPart, ToolInfo, user_message
from agentkit.tools._function_tool import content_text

__all__ = ["AgentTool", "AgentToolRetryConfig"]


_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"request": {"type": "string", "description": "request to be processed"}},
    "required": ["request"],
}


@persisted("agentkit.AgentToolState")
@attrs.define(eq=False)
class _AgentToolState:
    """What an interrupted agent tool keeps: its inner run's input and history."""

    root_input: AgentInput
    history: list[RecordedEvent]


class _InnerSink:
    """Collects the inner run's outcome; forwards its events to the caller when asked."""

    __slots__ = ("error", "forward", "interrupted", "last", "outer_path")

    def __init__(
        self, forward: Callable[[AgentEvent], None] | None, outer_path: list[Any]
    ) -> None:
        self.forward = forward
        self.outer_path = outer_path
        self.last: AgentEvent | None = None
        self.error: BaseException | None = None
        self.interrupted = False

    def send(self, item: AgentEvent) -> None:
        action = item.action
        if action is not None and action.interrupted is not None:
            self.interrupted = True
            return
        self.last = item
        if item.err is not None and self.error is None:
            self.error = item.err
        if self.forward is not None:
            # The caller sees the event under its own run path (a new event: the inner run's
            # history keeps the original). The tool reads the message through get_message().
            self.forward(attrs.evolve(item, run_path=[*self.outer_path, *item.run_path]))


def _last_message(log: EventLog) -> Message | None:
    """The last message of a history, if it has one."""
    for record in reversed(log.visible()):
        message = record.message()
        if message is not None:
            return message
    return None


class AgentTool(BuiltValue):
    """An agent used as a tool: the model calls it with a ``request``; it answers with the
    inner agent's final message.

    The inner agent runs as a fresh run (its own run path and history) that shares the
    caller's session values, streams when the caller streams, and runs in the calling tool's
    thread. Its actions (exit, transfer, break loop) never affect the caller; its error is the
    tool's error; its interrupts surface through the caller (addresses like
    ``agent:Boss;tool:Payer:o1;agent:Payer;tool:pay:i1``) and resume through it. With
    ``emit_internal_events=True`` on the calling :class:`~agentkit.ChatModelAgent`, the inner
    events (not interrupts) are forwarded live with run path outer + inner.

    Args:
        agent: the agent; it needs a name (the tool name) and a description.
        full_chat_history_as_input: give the inner agent the caller's conversation (other
            agents' messages rewritten as context) instead of the request.
        input_schema: a JSON Schema for the tool's parameters instead of ``request``; the inner
            agent then receives the raw JSON arguments as its user message.
        retry: an :class:`AgentToolRetryConfig` to run the agent again, afresh, when its run
            fails (Eino's ``WithAgentToolRetry``); by default a failed run is the call's error.

    Raises:
        AgentConfigError: the agent has no name or no description.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        full_chat_history_as_input: bool = False,
        input_schema: Mapping[str, Any] | None = None,
        retry: AgentToolRetryConfig | None = None,
    ) -> None:
        if not getattr(agent, "name", ""):
            raise AgentConfigError(
                f"AgentTool needs an agent with a name (it is the tool's name); {agent!r} has "
                "none"
            )
        if not getattr(agent, "description", ""):
            raise AgentConfigError(
                f"AgentTool needs an agent with a description (the model reads it to decide "
                f"when to call the tool); agent {agent.name!r} has none"
            )
        if retry is not None and not isinstance(retry, AgentToolRetryConfig):
            raise AgentConfigError(f"retry must be an AgentToolRetryConfig (got {retry!r})")
        self._retry = retry
        self._agent = agent
        self._flow = agent if isinstance(agent, FlowAgent) else FlowAgent(agent)
        self._full_history = full_chat_history_as_input
        self._schema = dict(input_schema) if input_schema is not None else None
        self._info = ToolInfo(
            name=agent.name,
            description=agent.description,
            parameters=self._schema if self._schema is not None else dict(_REQUEST_SCHEMA),
        )

    @property
    def agent(self) -> Agent:
        """The wrapped agent."""
        return self._agent

    @property
    def idempotent(self) -> bool:
        """``True``: a call a crash cut short runs again, and goes on inside its agent from
        the agent's last finished step (in a durable run), so nothing it finished runs twice."""
        return True

    def info(self) -> ToolInfo:
        """Return the tool's name and description (the agent's) and its parameters."""
        return self._info

    def __repr__(self) -> str:
        return f"AgentTool({self._agent!r})"

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the inner agent and return the text of its last message (its images, files
        and sounds as placeholder lines; agents use :meth:`invoke_content`)."""
        return content_text(self.invoke_content(arguments, **tool_options))

    def invoke_content(self, arguments: str, **tool_options: Any) -> str | tuple[ContentPart, ...]:
        """Run the inner agent and return its last message: its text, or its parts when it
        has images, files or sounds (the caller's model then receives them too)."""
        frame = current_frame()
        owns_scope = frame is None
        if frame is None:
            frame = RunFrame(scope=RunScope(), log=EventLog(), session=Session())
        try:
            if self._retry is not None:
                at = frame
                return self._retry.run(self._info.name, at, lambda: self._invoke(at, arguments))
            return self._invoke(frame, arguments)
        finally:
            if owns_scope:
                frame.scope.finish()

    def _invoke(self, frame: RunFrame, arguments: str) -> str | tuple[ContentPart, ...]:
        call = frame.tool
        resume = call.resume if call is not None else None
        streaming = call.streaming if call is not None else False
        state: _AgentToolState | None = None
        if resume is not None and resume.was_interrupted:
            if not isinstance(resume.state, _AgentToolState):
                raise AgentKitError(
                    f"agent tool '{self._info.name}' interrupt has happened, but cannot find "
                    "interrupt state"
                )
            state = resume.state
        if state is None:
            root_input = AgentInput(self._input_messages(arguments, call), streaming)
            log = EventLog()
        else:
            root_input = state.root_input
            log = EventLog()
            log.restore(state.history)
        inner_frame = attrs.evolve(
            frame,  # the same scope, journal, writer, observers, guardrails (the caller's
            # guardrails check the inner agents too) and steering, at the call's address
            log=log,
            session=frame.session if frame.session is not None else Session(),
            root_input=root_input,
            run_path=(),
            tool=None,
            resume=frame.resume if state is not None else None,
            # The run's options, and those given for this tool (with_agent_tool_run_options).
            options=(
                frame.options.for_agent_tool(call.agent_name, self._info.name)
                if call is not None
                else frame.options
            ),
            key=call.call_key if call is not None else frame.key,
        )
        forward = call.forward if call is not None else None
        sink = _InnerSink(forward, list(frame.run_path))
        place = inner_frame.at_agent(RunStep(self._flow.name))
        info = None if state is None else ResumeInfo(enable_streaming=root_input.enable_streaming)
        # The tool call's own run: it saves the inner run's point at the call's address.
        saves = call_run(inner_frame)
        with saves.keep_history("history"):
            if saves.durable:
                # The inner run's point (its input and, as its saves come, its history): a
                # call a crash cut short goes on inside the inner run.
                history = [record.checkpointable() for record in log.own()]
                saves.save_state(_AgentToolState(root_input, history), flush=False)
            run_agent(self._flow, place, sink, root_input, info)
        if sink.interrupted or sink.error is not None:
            # The inner run stopped: keep its input and history, so that resuming the caller
            # goes on inside the inner run instead of starting it again.
            history = [record.checkpointable() for record in log.visible()]
            saved = _AgentToolState(root_input=root_input, history=history)
            shown = "agent tool interrupt" if sink.interrupted else None
            saves.save_state(saved, info=shown, flush=False)
            if sink.interrupted:
                raise InterruptSignal(frame.address)
            assert sink.error is not None
            raise sink.error
        # The inner run completed: what it declared as it went (AgentRun.save_state) is over.
        saves.discard_state()
        if sink.last is not None:
            message = sink.last.get_message()
        elif state is not None:
            # Resumed after the inner agent had answered (a durable run died before this call
            # finished): the answer is the last message of the inner run's history.
            message = _last_message(log)
        else:
            message = None
        if sink.last is None and message is None:
            raise AgentKitError(
                f"agent tool {self._info.name!r}: the agent ended its turn without any event, so "
                "there is no answer to return; the agent must answer with a message"
            )
        if message is None:
            return ""
        if any(type(part) is not TextPart for part in message.parts):
            return message.parts
        return message.content

    def _input_messages(self, arguments: str, call: Any) -> list[Message]:
        if self._full_history:
            return self._history_input(call)
        if self._schema is not None:
            return [user_message(arguments)]
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as error:
            raise ToolArgumentsError(
                f"{self._info.name}: arguments are not valid JSON: {error} (got {arguments!r})",
                tool_name=self._info.name,
            ) from error
        request = parsed.get("request") if isinstance(parsed, dict) else None
        if not isinstance(request, str):
            raise ToolArgumentsError(
                f"{self._info.name}: 'request' is required and must be a string (got {parsed!r})",
                tool_name=self._info.name,
            )
        return [user_message(request)]

    def _history_input(self, call: Any) -> list[Message]:
        history: list[Message] = list(call.history[:-1]) if call is not None else []
        caller = call.agent_name if call is not None else ""
        history.extend(gen_transfer_messages(self._info.name))
        messages = []
        for message in history:
            if message.role is Role.SYSTEM:
                continue
            if message.role in (Role.ASSISTANT, Role.TOOL):
                messages.append(rewrite_message(message, caller))
            else:
                messages.append(message)
        return messages

present(
    (
        AgentTool,
    ),
    "agentkit",
)

present(
    (
        AgentToolRetryConfig,
    ),
    "agentkit.agents.agenttool",
)
