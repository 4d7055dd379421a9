"""ChatModelAgent: a chat model in a ReAct loop with tools."""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agentkit.agents._tool_errors import ToolErrorPolicy, ToolExceptionHandler
from agentkit.cancel import CancelMode, Point
from agentkit.errors import (
    AgentCancelledError,
    AgentConfigError,
    AgentFrozenError,
    ExceedMaxIterationsError,
    InstructionFormatError,
    ResumeError,
)
from agentkit.events import (
    Agent,
    AgentAction,
    AgentEvent,
    AgentInput,
    InterruptInfo,
    ResumeInfo,
    event_from_message,
)
from agentkit.interrupt import InterruptSignal, ToolRoundState
from agentkit.options import AgentRunOption, ChatModelAgentOptions, get_impl_specific_options
from agentkit.runctx import RunFrame, ToolCallFrame, current_frame, use_frame
from agentkit.schema import Message, Role, ToolCall, system_message, tool_message
from agentkit.streams import StreamReader, concat_message_stream, stream_from_iterator
from agentkit.tools.base import BaseTool, as_tool
from agentkit.tools.transfer import TransferToAgentTool, transfer_instruction
from agentkit.worker import BuiltinAgent, EventSink

if TYPE_CHECKING:
    from agentkit.models.base import ChatModel, ModelOptions

__all__ = ["ChatModelAgent", "GenModelInput"]

GenModelInput = Callable[[str, AgentInput], Sequence[Message]]
"""``gen_model_input(instruction, input) -> messages``: builds what the model is sent."""

_FORMAT_ERROR = (
    "failed to format instruction with the session values: {detail}. When a run has session "
    "values, the instruction is a str.format template: {{name}} is replaced by the session "
    "value 'name'. Write literal braces doubled: {{{{ and }}}} (for JSON, "
    '\'{{{{"city": "Paris"}}}}\'). To send the instruction as it is, pass '
    "gen_model_input=... to ChatModelAgent"
)


@attrs.frozen
class _Frozen:
    """What an agent computes on its first run and never changes afterwards."""

    instruction: str
    tools: dict[str, BaseTool]
    return_directly: frozenset[str]
    model: Any


@attrs.define(eq=False)
class ReactState:
    """The ReAct loop's state: the conversation and the model calls left."""

    messages: list[Message]
    remaining: int


class ChatModelAgent(BuiltinAgent):
    """An agent that answers with a chat model, calling tools in a ReAct loop.

    Without tools it makes one model call. With tools it calls the model, runs the tool
    calls of its reply (concurrently; events in completion order, history in call order),
    and repeats until the model answers without tool calls, a return-directly tool ran, or
    ``max_iterations`` model calls were made (then the run ends with
    :class:`~agentkit.ExceedMaxIterationsError`).

    Args:
        name: the agent's name (used in run paths, transfers and as a tool name).
        description: what the agent does (shown to other agents and models).
        model: a :class:`~agentkit.models.ChatModel`; a ``ToolCallingChatModel`` when
            tools are given.
        instruction: the system prompt. When the run's session holds values it is formatted
            with them (``{name}`` placeholders, ``str.format`` rules, ``{{``/``}}`` for braces);
            otherwise it is used verbatim.
        tools: tools, or plain functions (wrapped with :func:`~agentkit.tool`).
        return_directly: names of tools whose result ends the run as the final answer.
        exit_tool: an exit tool (:class:`~agentkit.ExitTool`); calling it ends the run with Exit.
        output_key: store the final answer's text in this session key.
        max_iterations: the most model calls one run may make (default 20).
        gen_model_input: ``(instruction, input) -> messages`` replacing the default
            ``[system(instruction)] + input.messages``.
        emit_internal_events: forward the events of agents used as tools (AgentTool).
        recover_tool_errors: send the model's mistakes back to it as tool messages and go on
            (default): a call of a tool that does not exist, arguments the tool refuses
            (:class:`~agentkit.ToolArgumentsError`), a transfer to an agent that does not
            exist. ``False`` keeps Eino's behaviour: the run ends with
            ``ToolNotFoundError`` / ``ToolArgumentsError`` / ``TransferError``.
        tool_exception_handler: ``handler(error, call) -> str`` for exceptions raised inside
            a tool (``call`` is a :class:`~agentkit.ToolCallInfo`): the text it returns is the
            tool message the model gets; raising ends the run. Without one (Eino's default)
            the run ends with a :class:`~agentkit.ToolError`. Interrupts and cancellation never
            reach it.
        max_tool_result_chars: longer tool results are cut to this many characters, with a
            note to the model and a warning on the ``agentkit`` logger (``None``: no limit).

    The agent is configured once: its first run freezes it (sub-agents can no longer be
    set). A frozen agent holds no per-run state, so one instance can serve many runs from
    many threads at once.
    """

    def __init__(
        self,
        name: str,
        description: str,
        model: ChatModel,
        *,
        instruction: str = "",
        tools: Iterable[BaseTool | Callable[..., Any]] = (),
        return_directly: Iterable[str] = (),
        exit_tool: BaseTool | None = None,
        output_key: str | None = None,
        max_iterations: int = 20,
        gen_model_input: GenModelInput | None = None,
        emit_internal_events: bool = False,
        recover_tool_errors: bool = True,
        tool_exception_handler: ToolExceptionHandler | None = None,
        max_tool_result_chars: int | None = 100_000,
    ) -> None:
        if model is None:
            raise AgentConfigError("agent 'Model' is required")
        if not isinstance(name, str):
            raise AgentConfigError(f"name must be a string (got {name!r})")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise AgentConfigError(f"max_iterations must be an int (got {max_iterations!r})")
        if max_iterations < 1:
            raise AgentConfigError(f"max_iterations must be at least 1 (got {max_iterations})")
        if isinstance(return_directly, str):
            raise AgentConfigError(
                f"return_directly takes tool names, not one string (got {return_directly!r}); "
                f"write return_directly=[{return_directly!r}]"
            )
        self._tool_policy = ToolErrorPolicy.checked(
            recover_tool_errors, tool_exception_handler, max_tool_result_chars
        )
        self._name = name
        self._description = description
        self._model = model
        self.instruction = instruction
        self._tools = [as_tool(item) for item in tools]
        self._return_directly = frozenset(return_directly)
        self._exit_tool = exit_tool
        self.output_key = output_key
        self.max_iterations = max_iterations
        self._gen_model_input = gen_model_input
        self.emit_internal_events = emit_internal_events
        self._lock = threading.Lock()
        self._frozen: _Frozen | None = None
        self._sub_agents: list[Agent] | None = None
        self._parent: Agent | None = None
        self._disallow_transfer_to_parent = False

    @property
    def name(self) -> str:
        """The agent's name."""
        return self._name

    @property
    def description(self) -> str:
        """What the agent does."""
        return self._description

    @property
    def model(self) -> ChatModel:
        """The chat model the agent calls."""
        return self._model

    def __repr__(self) -> str:
        return f"ChatModelAgent(name={self._name!r})"

    # --- sub-agent registration (OnSubAgents) ---

    def on_set_sub_agents(self, sub_agents: Sequence[Agent]) -> None:
        """Record the agents this one may transfer to (called by ``set_sub_agents``)."""
        with self._lock:
            self._check_not_frozen()
            if self._sub_agents is not None:
                raise AgentConfigError("agent's sub-agents has already been set")
            self._sub_agents = list(sub_agents)

    def on_set_as_sub_agent(self, parent: Agent) -> None:
        """Record the parent this agent may transfer back to."""
        with self._lock:
            self._check_not_frozen()
            if self._parent is not None:
                raise AgentConfigError(
                    "agent has already been set as a sub-agent of another agent"
                )
            self._parent = parent

    def on_disallow_transfer_to_parent(self) -> None:
        """Do not offer the parent as a transfer target."""
        with self._lock:
            self._check_not_frozen()
            self._disallow_transfer_to_parent = True

    def _check_not_frozen(self) -> None:
        if self._frozen is not None:
            raise AgentFrozenError("agent has been frozen after run")

    def _freeze(self) -> _Frozen:
        frozen = self._frozen
        if frozen is not None:
            return frozen
        with self._lock:
            if self._frozen is None:
                self._frozen = self._compute_frozen()
            return self._frozen

    def _compute_frozen(self) -> _Frozen:
        instruction = self.instruction
        tools = list(self._tools)
        return_directly = set(self._return_directly)
        targets = list(self._sub_agents or ())
        if self._parent is not None and not self._disallow_transfer_to_parent:
            targets.append(self._parent)
        if targets:
            text = transfer_instruction(targets)
            instruction = f"{instruction}\n\n{text}" if instruction else text
            # Told its targets, the transfer tool refuses unknown ones as a model mistake.
            names = [agent.name for agent in targets] if self._tool_policy.recover else None
            transfer = TransferToAgentTool(names)
            tools.append(transfer)
            return_directly.add(transfer.info().name)
        if self._exit_tool is not None:
            exit_tool = as_tool(self._exit_tool)
            tools.append(exit_tool)
            return_directly.add(exit_tool.info().name)
        by_name: dict[str, BaseTool] = {}
        infos = []
        for item in tools:
            info = item.info()
            if info.name in by_name:
                raise AgentConfigError(
                    f"agent {self._name!r} has two tools named {info.name!r}; tool names "
                    "must be unique"
                )
            by_name[info.name] = item
            infos.append(info)
        model: Any = self._model
        if infos:
            with_tools = getattr(model, "with_tools", None)
            if with_tools is None:
                raise AgentConfigError(
                    f"agent {self._name!r} has tools but its model {model!r} cannot call tools "
                    "(it has no with_tools method); use a ToolCallingChatModel"
                )
            model = with_tools(infos)
        return _Frozen(instruction, by_name, frozenset(return_directly), model)

    # --- running ---

    def _prepare(self) -> None:
        self._freeze()

    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        frozen = self._freeze()
        frame = _require_frame()
        if input is None:
            input = AgentInput()
        messages = self._model_input(frozen.instruction, input, frame)
        state = ReactState(messages=messages, remaining=self.max_iterations)
        run = _ReactRun(self, frozen, frame, sink, options, input.enable_streaming)
        run.loop(state, None)

    def _resume_into(
        self, info: ResumeInfo, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        frozen = self._freeze()
        frame = _require_frame()
        saved = info.interrupt_state
        if not isinstance(saved, ToolRoundState):
            problem = (
                "no state"
                if saved is None
                else f"invalid interrupt state type: {type(saved).__name__}"
            )
            raise ResumeError(
                f"ChatModelAgent.Resume: agent '{self._name}' was asked to resume but has "
                f"{problem}"
            )
        resume_state = frame.resume
        for index, call in enumerate(saved.calls):
            if index not in saved.done and resume_state is not None:
                address = (*frame.address, f"tool:{call.function.name}:{call.id}")
                saved.resume_of[index] = resume_state.at(address)
        state = ReactState(messages=list(saved.messages), remaining=saved.remaining)
        run = _ReactRun(self, frozen, frame, sink, options, info.enable_streaming)
        run.loop(state, saved)

    def _model_input(self, instruction: str, input: AgentInput, frame: RunFrame) -> list[Message]:
        if self._gen_model_input is not None:
            return list(self._gen_model_input(instruction, input))
        session = frame.session
        if instruction and session:
            instruction = _format_instruction(instruction, session.snapshot())
        messages = [system_message(instruction)] if instruction else []
        messages.extend(input.messages)
        return messages


class _ReactRun:
    """One run of a ChatModelAgent: everything that is per run, nothing kept afterwards."""

    __slots__ = (
        "agent",
        "frame",
        "frozen",
        "model_options",
        "model_pending",
        "round",
        "scope",
        "sink",
        "streaming",
        "tool_options",
    )

    def __init__(
        self,
        agent: ChatModelAgent,
        frozen: _Frozen,
        frame: RunFrame,
        sink: EventSink,
        options: tuple[AgentRunOption, ...],
        streaming: bool,
    ) -> None:
        self.agent = agent
        self.frozen = frozen
        self.frame = frame
        self.scope = frame.scope
        self.sink = sink
        self.streaming = streaming
        agent_options = get_impl_specific_options(ChatModelAgentOptions(), *options)
        self.model_options = _model_options(agent_options.model_options)
        self.tool_options = agent_options.tool_options
        self.round: ToolRoundState | None = None  # the tool round in progress
        self.model_pending = False  # a model call is in progress

    def emit(self, event: AgentEvent) -> None:
        if not self.sink.send(event):
            # Nobody reads the events any more: stop the run at the next step boundary.
            self.scope.request_cancel(CancelMode.IMMEDIATE)

    def loop(self, state: ReactState, pending_round: ToolRoundState | None) -> None:
        """Run the ReAct loop; on a stop, record where the run can go on from."""
        journal = self.frame.journal
        try:
            self._loop(state, pending_round)
        except InterruptSignal:
            # The interrupting tools recorded their points; this one finishes the round later.
            journal.record(self.frame.address, self._progress(state))
            self.emit(AgentEvent(action=AgentAction(interrupted=InterruptInfo())))
        except Exception:
            # Cancelled or failed: keep the last safe point (after the last finished model or
            # tool call), so that resuming retries from there and runs no finished tool again.
            journal.record(self.frame.address, self._progress(state))
            raise

    def _progress(self, state: ReactState) -> ToolRoundState:
        current = self.round
        if current is not None:
            return current.snapshot()
        remaining = state.remaining + (1 if self.model_pending else 0)
        return ToolRoundState(messages=list(state.messages), remaining=remaining, calls=[])

    def _loop(self, state: ReactState, pending_round: ToolRoundState | None) -> None:
        scope = self.scope
        final: Message | None = None
        if pending_round is not None:
            self.round = pending_round
            final = self.tool_round(state, pending_round)
            self.round = None
            if final is None:
                scope.check(Point.AFTER_TOOL_CALLS)
        while final is None:
            scope.check()
            if not self.frozen.tools:
                self.model_pending = True
                final = self.call_model(state.messages)
                break
            if state.remaining <= 0:
                raise ExceedMaxIterationsError(
                    max_iterations=self.agent.max_iterations, agent_name=self.agent.name
                )
            state.remaining -= 1
            self.model_pending = True
            reply = self.call_model(state.messages)
            self.model_pending = False
            state.messages.append(reply)
            if not reply.tool_calls:
                final = reply
                break
            round_state = ToolRoundState(
                messages=list(state.messages),
                remaining=state.remaining,
                calls=list(reply.tool_calls),
            )
            self.round = round_state
            scope.check(Point.AFTER_CHAT_MODEL)
            final = self.tool_round(state, round_state)
            self.round = None
            if final is None:
                scope.check(Point.AFTER_TOOL_CALLS)
        output_key = self.agent.output_key
        if output_key is not None and self.frame.session is not None:
            self.frame.session.set(output_key, final.content)

    def call_model(self, messages: list[Message]) -> Message:
        model = self.frozen.model
        scope = self.scope
        if not self.streaming:
            reply: Message = model.generate(list(messages), self.model_options)
            if scope.stopping:
                # Cancelled while the model was answering: the answer is not delivered, and
                # a resumed run makes the call again.
                scope.check()
            self.emit(event_from_message(reply, None, Role.ASSISTANT))
            return reply
        stream: StreamReader[Message] = model.stream(list(messages), self.model_options)
        scope.open(stream)
        try:
            for_user, for_history = stream.copy(2)
            self.emit(event_from_message(None, for_user, Role.ASSISTANT))
            try:
                return concat_message_stream(for_history)
            except Exception as error:
                if scope.mode is CancelMode.IMMEDIATE:
                    scope.fired = True
                    raise AgentCancelledError(scope.mode, scope.escalated) from error
                raise
        finally:
            scope.closed(stream)

    def tool_round(self, state: ReactState, round_state: ToolRoundState) -> Message | None:
        """Run the tool calls of one model reply; return the final message if the run ends."""
        calls = round_state.calls
        return_directly_id: str | None = None
        for call in calls:
            if call.function.name in self.frozen.return_directly:
                return_directly_id = call.id
        held_before = self._held_from_earlier_run(round_state, return_directly_id)
        results: dict[int, Message] = dict(round_state.done)
        pending = [index for index in range(len(calls)) if index not in results]
        held: AgentEvent | None = None
        errors: list[BaseException] = []
        signals: dict[int, InterruptSignal] = {}
        failed: set[int] = set()  # calls whose result tells the model how they failed

        def handle(item: _ToolItem) -> None:
            nonlocal held
            if item.event is not None:
                if item.forwarded:
                    self.emit(item.event)
                elif return_directly_id and calls[item.index].id == return_directly_id:
                    if not item.failed:
                        held = item.event
                    else:
                        if held is not None:  # the call's stream, which broke
                            self.emit(held)
                            held = None
                        self.emit(item.event)
                else:
                    self.emit(item.event)
            if item.event is not None and not item.forwarded and item.event.action is not None:
                round_state.actions[item.index] = item.event.action
            if item.message is not None:
                results[item.index] = item.message
                round_state.done[item.index] = item.message
                if item.failed:
                    failed.add(item.index)
            if item.error is not None:
                if isinstance(item.error, InterruptSignal):
                    signals[item.index] = item.error
                else:
                    errors.append(item.error)

        resumed = round_state.resume_of
        history = round_state.messages
        if len(pending) == 1:
            index = pending[0]
            self.call_tool(calls[index], index, resumed.get(index), history, handle)
        else:
            inbox: queue.SimpleQueue[_ToolItem | None] = queue.SimpleQueue()
            for index in pending:
                context = contextvars.copy_context()
                self.scope.submit(
                    context.run, self.call_tool_to_queue, calls[index], index,
                    resumed.get(index), history, inbox,
                )
            # This thread delivers the outcomes as they arrive: events in completion order,
            # each as soon as its call finished (so all calls run on the pool).
            finished = 0
            while finished < len(pending):
                item = inbox.get()
                if item is None:
                    finished += 1
                else:
                    handle(item)
        if errors:
            for error in errors:
                if not isinstance(error, AgentCancelledError):
                    raise error
            raise errors[0]
        if signals:
            raise signals[min(signals)]
        if held is None:
            held = held_before
        if held is not None:
            self.emit(held)
        state.messages.extend(results[index] for index in range(len(calls)))
        if not return_directly_id:
            return None
        final = None
        for index, call in enumerate(calls):
            if call.id == return_directly_id:
                # A failed call of a return-directly tool (a transfer to nobody) ends
                # nothing: the model gets to read what went wrong.
                final = None if index in failed else results[index]
        return final

    def _held_from_earlier_run(
        self, round_state: ToolRoundState, return_directly_id: str | None
    ) -> AgentEvent | None:
        """The held-back event of a return-directly call that finished before a resume.

        A return-directly call's event is delivered after its round; when another call of
        the round interrupted, the round ended before that, so the resumed round delivers it.
        """
        if return_directly_id is None:
            return None
        for index, call in enumerate(round_state.calls):
            if call.id == return_directly_id and index in round_state.done:
                event = event_from_message(
                    round_state.done[index], None, Role.TOOL, call.function.name
                )
                event.action = round_state.actions.get(index)
                return event
        return None

    def call_tool_to_queue(
        self,
        call: ToolCall,
        index: int,
        resume: Any,
        history: list[Message],
        inbox: queue.SimpleQueue[_ToolItem | None],
    ) -> None:
        try:
            self.call_tool(call, index, resume, history, inbox.put)
        finally:
            inbox.put(None)

    def call_tool(
        self,
        call: ToolCall,
        index: int,
        resume: Any,
        history: list[Message],
        put: Callable[[_ToolItem], object],
    ) -> None:
        """Run one tool call, reporting its event, message and error through ``put``.

        A failure that the agent's :class:`ToolErrorPolicy` turns into text is reported as the
        call's message (with a non-streamed event); any other is reported as its error.
        """
        name = call.function.name
        frame = self.frame
        policy = self.agent._tool_policy
        try:
            self.scope.check()
            tool = self.frozen.tools.get(name)
            if tool is None:
                self._put_failure(policy.unknown_tool(call, self.frozen.tools), call, index, put)
                return
            forward = None
            if self.agent.emit_internal_events:

                def forward(event: AgentEvent) -> None:
                    put(_ToolItem(index, event=event, forwarded=True))

            call_frame = ToolCallFrame(
                name=name,
                call_id=call.id,
                options=self.tool_options,
                resume=resume,
                agent_name=self.agent.name,
                history=history,
                streaming=self.streaming,
                forward=forward,
            )
            tool_frame = attrs.evolve(
                frame, tool=call_frame, address=(*frame.address, f"tool:{name}:{call.id}")
            )
            with use_frame(tool_frame):
                use_stream = _streams(tool, self.streaming)
                try:
                    message = self._invoke(tool, call, use_stream, call_frame, index, put)
                    if self.scope.stopping:
                        # Cancelled while the tool ran: its result is not delivered, and a
                        # resumed run calls it again.
                        self.scope.check()
                except (InterruptSignal, AgentCancelledError):
                    raise
                except Exception as error:
                    # A failure caused by a cancel is the cancel, not the tool's error.
                    self.scope.check()
                    text = policy.failed(error, call)
                    # Handled: what stopped inside the call (an agent tool's inner run) is
                    # over, so nothing there is resumed.
                    frame.journal.discard_under(tool_frame.address)
                    self._put_failure(text, call, index, put)
                    return
            message = policy.limit(message, self.agent.name)
            if use_stream:
                put(_ToolItem(index, message=message))
            else:
                event = event_from_message(message, None, Role.TOOL, name)
                event.action = call_frame.action
                put(_ToolItem(index, event=event, message=message))
        except BaseException as error:
            put(_ToolItem(index, error=error))

    def _put_failure(
        self, text: str, call: ToolCall, index: int, put: Callable[[_ToolItem], object]
    ) -> None:
        """Report ``text`` as the result of a call that failed, with an event showing it.

        The event carries no action, whatever the tool sent before it failed: a refused
        transfer transfers nowhere, a failed exit tool exits nothing.
        """
        name = call.function.name
        message = self.agent._tool_policy.limit(tool_message(text, call.id, name), self.agent.name)
        event = event_from_message(message, None, Role.TOOL, name)
        put(_ToolItem(index, event=event, message=message, failed=True))

    def _invoke(
        self,
        tool: BaseTool,
        call: ToolCall,
        use_stream: bool,
        call_frame: ToolCallFrame,
        index: int,
        put: Callable[[_ToolItem], object],
    ) -> Message:
        name = call.function.name
        if use_stream:
            chunks = tool.stream(call.function.arguments, **self.tool_options)  # type: ignore[attr-defined]
            reader = _tool_message_stream(chunks, call.id, name)
            for_user, for_history = reader.copy(2)
            event = event_from_message(None, for_user, Role.TOOL, name)
            event.action = call_frame.action
            put(_ToolItem(index, event=event))
            return concat_message_stream(for_history)
        result = tool.invoke(call.function.arguments, **self.tool_options)  # type: ignore[attr-defined]
        if not isinstance(result, str):
            raise TypeError(f"tool {name!r} returned {type(result).__name__}, not str")
        return tool_message(result, call.id, name)


@attrs.define(eq=False)
class _ToolItem:
    index: int
    event: AgentEvent | None = None
    message: Message | None = None
    error: BaseException | None = None
    forwarded: bool = False
    failed: bool = False  # the message tells the model how the call failed


def _require_frame() -> RunFrame:
    frame = current_frame()
    if frame is None:
        raise RuntimeError("agents run inside a run context; call run(), not _run_into()")
    return frame


def _streams(tool: BaseTool, streaming: bool) -> bool:
    can_stream = callable(getattr(tool, "stream", None))
    if not can_stream:
        return False
    if streaming:
        return True
    return not callable(getattr(tool, "invoke", None))


def _tool_message_stream(
    chunks: StreamReader[str], call_id: str, name: str
) -> StreamReader[Message]:
    return stream_from_iterator(
        (tool_message(chunk, call_id, name) for chunk in chunks), on_close=chunks.close
    )


def _format_instruction(instruction: str, values: dict[str, Any]) -> str:
    try:
        return instruction.format_map(values)
    except KeyError as error:
        detail = f"could not find key: {error.args[0]}"
        raise InstructionFormatError(_FORMAT_ERROR.format(detail=detail)) from error
    except (ValueError, IndexError, AttributeError) as error:
        raise InstructionFormatError(_FORMAT_ERROR.format(detail=str(error))) from error


def _model_options(values: dict[str, Any]) -> ModelOptions | None:
    if not values:
        return None
    from agentkit.models.base import ModelOptions

    return ModelOptions(**values)
