"""The ReAct loop of a :class:`~agentkit.ChatModelAgent`: model calls and tool rounds.

:class:`ReactConfig` is what an agent fixes on its first run; :class:`ReactRun` is one run of
it (nothing kept afterwards): call the model, run the tool calls of its reply concurrently
(events in completion order, history in call order), repeat until an answer, a return-directly
tool or ``max_iterations``. A stop (interrupt, cancel, failure) records the agent's progress as
its resume point.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentkit._interrupt import InterruptSignal, ToolRoundState
from agentkit._options import AgentRunOption, ChatModelAgentOptions, get_impl_specific_options
from agentkit._runctx import RunFrame
from agentkit._runlocals import RunLocals, run_locals
from agentkit._scope import Point
from agentkit._worker import EventSink
from agentkit.agents._call_ids import UniqueCallIds, unique_call_ids
from agentkit.agents._middleware import ReactHooks
from agentkit.agents._model_retry import StreamVerdicts
from agentkit.agents._react_config import ReactConfig, ReactState
from agentkit.agents._tool_calls import ToolCalls, ToolItem
from agentkit.agents._tool_round import RoundOutcome, return_directly_call
from agentkit.cancel import CancelMode
from agentkit.errors import AgentCancelledError, ExceedMaxIterationsError
from agentkit.events import (
    AgentAction,
    AgentEvent,
    InterruptInfo,
    event_from_message,
)
from agentkit.schema import Message, Role
from agentkit.streams import StreamReader, concat_message_stream

if TYPE_CHECKING:
    from agentkit.models.base import ModelOptions

__all__ = ["ReactConfig", "ReactRun", "ReactState"]


class ReactRun(ToolCalls):
    """One run of a ChatModelAgent: everything that is per run, nothing kept afterwards."""

    __slots__ = (
        "config",
        "corrections",
        "frame",
        "hooks",
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
        # Made here, not kept on the run: RunLocals holds self.emit, and a reference back would
        # make a cycle that keeps the run's whole history alive until the garbage collector.
        token = run_locals.set(RunLocals(self.emit))
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
            reply = unique_call_ids(reply)  # what middleware returned, too
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
            reply: Message = unique_call_ids(model.generate(messages, options))
            if scope.stopping:
                # Cancelled while the model was answering: the answer is not delivered, and
                # a resumed run makes the call again.
                scope.check()
        else:
            stream: StreamReader[Message] = UniqueCallIds(model.stream(messages, options))
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
        return_directly_id = return_directly_call(round_state.calls, self.config.return_directly)
        held_before = self._held_from_earlier_run(round_state, return_directly_id)
        outcome = RoundOutcome(self.emit, round_state, return_directly_id)
        pending = outcome.pending()
        if len(pending) == 1:
            index = pending[0]
            self.call_tool(
                round_state.calls[index],
                index,
                round_state.resume_of.get(index),
                round_state.messages,
                outcome.handle,
            )
        else:
            self._run_concurrently(round_state, pending, outcome.handle)
        outcome.raise_stop()
        return outcome.finish(state, held_before)

    def _run_concurrently(
        self, round_state: ToolRoundState, pending: list[int], handle: Callable[[ToolItem], None]
    ) -> None:
        """Run the ``pending`` calls on the run's pool; hand their reports to ``handle``.

        This thread delivers the outcomes as they arrive: events in completion order, each as
        soon as its call finished (so all calls run on the pool).
        """
        calls = round_state.calls
        resumed = round_state.resume_of
        history = round_state.messages
        inbox: queue.SimpleQueue[ToolItem | None] = queue.SimpleQueue()
        for index in pending:
            self.scope.spawn(
                self.call_tool_to_queue, calls[index], index, resumed.get(index), history,
                inbox, name=f"agentkit-tool {calls[index].function.name}",
            )
        finished = 0
        while finished < len(pending):
            item = inbox.get()
            if item is None:
                finished += 1
            else:
                handle(item)


def _model_options(values: dict[str, Any]) -> ModelOptions | None:
    if not values:
        return None
    from agentkit.models.base import ModelOptions

    return ModelOptions(**values)
