"""The ReAct loop of a :class:`~agentkit.ChatModelAgent`: model calls and tool rounds.

:class:`ReactConfig` is what an agent fixes on its first run; :class:`ReactRun` is one run of
it (nothing kept afterwards): call the model, run the tool calls of its reply concurrently
(events in completion order, history in call order), repeat until an answer, a return-directly
tool or ``max_iterations``. A stop (interrupt, cancel, failure) records the agent's progress as
its resume point.
"""

from __future__ import annotations

import contextvars
import queue
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._points import PointResume
from agentkit._runlocals import RunLocals, run_locals
from agentkit.agents._middleware import ReactHooks
from agentkit.agents._model_retry import StreamVerdicts
from agentkit.agents._structured import StructuredOutput
from agentkit.agents._tool_errors import ToolErrorPolicy
from agentkit.agents._tool_timeout import AbandonablePut, call_with_timeout
from agentkit.cancel import CancelMode, Point
from agentkit.errors import AgentCancelledError, ExceedMaxIterationsError
from agentkit.events import (
    AgentAction,
    AgentEvent,
    InterruptInfo,
    event_from_message,
)
from agentkit.interrupt import InterruptSignal, ToolRoundState
from agentkit.middleware import AgentMiddleware
from agentkit.options import AgentRunOption, ChatModelAgentOptions, get_impl_specific_options
from agentkit.runctx import RunFrame, ToolCallFrame, use_frame
from agentkit.schema import Message, Role, ToolCall, tool_message
from agentkit.streams import StreamReader, concat_message_stream, stream_from_iterator
from agentkit.tools.base import BaseTool
from agentkit.worker import EventSink

if TYPE_CHECKING:
    from agentkit.agents._model_retry import ModelRetryConfig
    from agentkit.models.base import ModelOptions

__all__ = ["ReactConfig", "ReactRun", "ReactState"]


@attrs.frozen
class ReactConfig:
    """What a ChatModelAgent computes on its first run and never changes afterwards."""

    name: str
    instruction: str
    tools: dict[str, BaseTool]
    return_directly: frozenset[str]
    model: Any
    output_key: str | None
    max_iterations: int
    emit_internal_events: bool
    tool_policy: ToolErrorPolicy
    structured: StructuredOutput | None = None
    # --- middleware, callbacks, retries, timeouts (see _middleware.py) ---
    middlewares: tuple[AgentMiddleware, ...] = ()
    base_model: Any = None  # the model before with_tools, to offer other tools
    tool_timeouts: Mapping[str, float] = attrs.field(factory=dict)  # per tool name
    tool_timeout: float | None = None  # the agent's default, for tools added by middleware
    model_retry: ModelRetryConfig | None = None


@attrs.define(eq=False)
class ReactState:
    """The ReAct loop's state: the conversation and the model calls left."""

    messages: list[Message]
    remaining: int


class ReactRun:
    """One run of a ChatModelAgent: everything that is per run, nothing kept afterwards."""

    __slots__ = (
        "config",
        "corrections",
        "frame",
        "hooks",
        "locals",
        "model_options",
        "model_pending",
        "round",
        "scope",
        "sink",
        "streaming",
        "tool_options",
        "typed_output",
        "usage",
        "verdicts",
    )

    def __init__(
        self,
        config: ReactConfig,
        frame: RunFrame,
        sink: EventSink,
        options: tuple[AgentRunOption, ...],
        streaming: bool,
    ) -> None:
        self.config = config
        self.frame = frame
        self.scope = frame.scope
        self.sink = sink
        self.streaming = streaming
        agent_options = get_impl_specific_options(ChatModelAgentOptions(), *options)
        self.model_options = _model_options(agent_options.model_options)
        # --- structured output (see _structured.py) ---
        self.corrections = 0
        self.typed_output: tuple[Any] | None = None  # (value,) once a valid answer was given
        if config.structured is not None:
            self.model_options = config.structured.model_options(self.model_options)
            self.corrections = config.structured.max_corrections
        self.tool_options = agent_options.tool_options
        self.round: ToolRoundState | None = None  # the tool round in progress
        self.model_pending = False  # a model call is in progress
        observers = frame.observers
        self.usage = observers.usage if observers is not None else None
        self.locals = RunLocals(self.emit)
        # A streamed run that retries model calls marks the streams of rejected attempts.
        retrying = streaming and config.model_retry is not None
        self.verdicts = StreamVerdicts() if retrying else None
        self.hooks = ReactHooks.build(self, options)  # None: no middleware, callback or retry

    def emit(self, event: AgentEvent) -> None:
        if not self.sink.send(event):
            # Nobody reads the events any more: stop the run at the next step boundary.
            self.scope.request_cancel(CancelMode.IMMEDIATE)

    def loop(self, state: ReactState, pending_round: ToolRoundState | None) -> None:
        """Run the ReAct loop; on a stop, record where the run can go on from."""
        journal = self.frame.journal
        token = run_locals.set(self.locals)
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
        finally:
            run_locals.reset(token)

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
        structured = self.config.structured
        while final is None:
            scope.check()
            if not self.config.tools:
                self.model_pending = True
                final = self.call_model(state.messages, emit=structured is None)
                self.model_pending = False
                if structured is not None:
                    state.messages.append(final)
                    final = self._structured_answer(final, state)
                continue
            if state.remaining <= 0:
                raise ExceedMaxIterationsError(
                    max_iterations=self.config.max_iterations, agent_name=self.config.name
                )
            state.remaining -= 1
            self.model_pending = True
            reply = self.call_model(state.messages, emit=structured is None)
            self.model_pending = False
            if structured is not None and structured.answer_of(reply) is not None:
                state.messages.append(reply)
                final = self._structured_answer(reply, state)
                continue
            if structured is not None:
                self._emit_reply(reply)
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
        output_key = self.config.output_key
        if output_key is not None and self.frame.session is not None:
            typed = self.typed_output
            # With output_type, the key holds the typed value (the text otherwise).
            self.frame.session.set(output_key, final.content if typed is None else typed[0])

    # --- structured output (see _structured.py) ---

    def _structured_answer(self, reply: Message, state: ReactState) -> Message | None:
        """Check the answer ``reply`` gives: deliver it typed, or ask the model to correct it.

        Returns the final message, or ``None`` when a correction was sent (the loop goes on).
        """
        structured = self.config.structured
        assert structured is not None
        settled = structured.settle(reply, state.messages, self.streaming, self.corrections)
        for event in settled.events:
            self.emit(event)
        if settled.answer is None:
            if self.corrections <= 0:
                raise structured.give_up(self.config.name, settled.problem)
            self.corrections -= 1
            return None
        self.typed_output = (settled.value,)
        return settled.answer

    def _emit_reply(self, reply: Message) -> None:
        """Deliver a reply whose delivery waited for the structured-output check."""
        if not self.streaming:
            self.emit(event_from_message(reply, None, Role.ASSISTANT))

    def call_model(self, messages: list[Message], emit: bool = True) -> Message:
        """Call the model on ``messages`` (through the hooks, if any) and return its reply.

        A stream is always delivered as it arrives; a whole reply only with ``emit`` (structured
        output delivers it once it is checked).
        """
        if self.hooks is not None:
            return self.hooks.call_model(messages, emit)
        reply = self.model_call(self.config.model, list(messages), self.model_options)
        if emit and not self.streaming:
            self.emit(event_from_message(reply, None, Role.ASSISTANT))
        return reply

    def model_call(
        self, model: Any, messages: list[Message], options: ModelOptions | None
    ) -> Message:
        """One call of ``model``; a streamed run emits the stream as it arrives."""
        scope = self.scope
        if not self.streaming:
            reply: Message = model.generate(messages, options)
            if scope.stopping:
                # Cancelled while the model was answering: the answer is not delivered, and
                # a resumed run makes the call again.
                scope.check()
        else:
            stream: StreamReader[Message] = model.stream(messages, options)
            scope.open(stream)
            try:
                for_user, for_history = stream.copy(2)
                if self.verdicts is not None:
                    for_user = self.verdicts.guard(for_user)
                self.emit(event_from_message(None, for_user, Role.ASSISTANT))
                try:
                    reply = concat_message_stream(for_history)
                    if scope.stopping:
                        scope.check()  # cut short by the cancel: not an answer
                except Exception as error:
                    if scope.mode is CancelMode.IMMEDIATE:
                        # The stream was closed by the cancel: the run ends as cancelled.
                        scope.fired = True
                        if isinstance(error, AgentCancelledError):
                            raise
                        raise AgentCancelledError(scope.mode, scope.escalated) from error
                    raise
            finally:
                scope.closed(stream)
        meta = reply.response_meta
        if self.usage is not None and meta is not None and meta.usage is not None:
            self.usage.add(self.config.name, meta.usage)
        return reply

    def tool_round(self, state: ReactState, round_state: ToolRoundState) -> Message | None:
        """Run the tool calls of one model reply; return the final message if the run ends."""
        calls = round_state.calls
        return_directly_id: str | None = None
        for call in calls:
            if call.function.name in self.config.return_directly:
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
        resume: PointResume | None,
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
        resume: PointResume | None,
        history: list[Message],
        put: Callable[[_ToolItem], object],
    ) -> None:
        """Run one tool call, reporting its event, message and error through ``put``.

        A failure that the agent's :class:`ToolErrorPolicy` turns into text is reported as the
        call's message (with a non-streamed event); any other is reported as its error.
        """
        name = call.function.name
        frame = self.frame
        policy = self.config.tool_policy
        try:
            self.scope.check()
            tool = self.config.tools.get(name)
            if tool is None:
                self._put_failure(policy.unknown_tool(call, self.config.tools), call, index, put)
                return
            forward = None
            if self.config.emit_internal_events:

                def forward(event: AgentEvent) -> None:
                    put(_ToolItem(index, event=event, forwarded=True))

            call_frame = ToolCallFrame(
                name=name,
                call_id=call.id,
                options=self.tool_options,
                resume=resume,
                agent_name=self.config.name,
                history=history,
                streaming=self.streaming,
                forward=forward,
                emit=lambda event: put(_ToolItem(index, event, forwarded=True)),
            )
            tool_frame = attrs.evolve(
                frame, tool=call_frame, address=(*frame.address, f"tool:{name}:{call.id}")
            )
            with use_frame(tool_frame):
                use_stream = _streams(tool, self.streaming)
                try:
                    if self.hooks is not None:
                        message, use_stream = self.hooks.invoke_tool(
                            tool, call, use_stream, call_frame, index, put
                        )
                    else:
                        message = self.invoke(tool, call, use_stream, call_frame, index, put)
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
            message = policy.limit(message, self.config.name)
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
        message = self.config.tool_policy.limit(tool_message(text, call.id, name), self.config.name)
        event = event_from_message(message, None, Role.TOOL, name)
        put(_ToolItem(index, event=event, message=message, failed=True))

    def invoke(
        self,
        tool: BaseTool,
        call: ToolCall,
        use_stream: bool,
        call_frame: ToolCallFrame,
        index: int,
        put: Callable[[_ToolItem], object],
    ) -> Message:
        """Run the tool of ``call`` (within its time limit, if it has one)."""
        timeout = self.config.tool_timeouts.get(call.function.name)
        if timeout is None:
            return self._invoke(tool, call, use_stream, call_frame, index, put)
        guarded = AbandonablePut(put)
        return call_with_timeout(
            lambda: self._invoke(tool, call, use_stream, call_frame, index, guarded),
            timeout,
            call,
            on_abandon=guarded.abandon,
        )

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


def _model_options(values: dict[str, Any]) -> ModelOptions | None:
    if not values:
        return None
    from agentkit.models.base import ModelOptions

    return ModelOptions(**values)
