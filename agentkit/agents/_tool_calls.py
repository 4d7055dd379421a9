"""One tool call of a ChatModelAgent's tool round: run it, report its outcome.

:class:`ToolCalls` is the part of :class:`~agentkit.agents._react.ReactRun` that runs single
calls: it sets up the call's frame (address, resume data, options), applies the middleware,
the time limit and the tool-error policy, and reports the event, the message or the error of
the call as a :class:`ToolItem`. The round itself (concurrency, order, return-directly,
interrupts) is :meth:`ReactRun.tool_round`.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._interrupt import InterruptSignal, ToolRoundState
from agentkit._points import PointResume
from agentkit._runctx import ToolCallFrame, use_frame
from agentkit.agents._tool_timeout import AbandonablePut, call_with_timeout
from agentkit.errors import AgentCancelledError
from agentkit.events import AgentEvent, _message_event, event_from_message
from agentkit.schema import Message, Role, ToolCall, tool_message
from agentkit.streams import StreamReader, concat_message_stream, stream_from_iterator
from agentkit.tools.base import BaseTool

if TYPE_CHECKING:
    from agentkit._runctx import RunFrame
    from agentkit._scope import RunScope
    from agentkit.agents._middleware import ReactHooks
    from agentkit.agents._react_config import ReactConfig

__all__ = ["ToolCalls", "ToolItem", "streams", "tool_message_stream"]


class ToolCalls:
    """Running single tool calls (a base of ``ReactRun``, which provides the attributes)."""

    __slots__ = ()

    config: ReactConfig
    frame: RunFrame
    scope: RunScope
    streaming: bool
    tool_options: dict[str, Any]
    hooks: ReactHooks | None

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
                return _message_event(
                    round_state.done[index],
                    None,
                    Role.TOOL,
                    call.function.name,
                    round_state.actions.get(index),
                )
        return None

    def call_tool_to_queue(
        self,
        call: ToolCall,
        index: int,
        resume: PointResume | None,
        history: list[Message],
        inbox: queue.SimpleQueue[ToolItem | None],
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
        put: Callable[[ToolItem], object],
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
                    put(ToolItem(index, event=event, forwarded=True))

            call_frame = ToolCallFrame(
                name=name,
                call_id=call.id,
                options=self.tool_options,
                resume=resume,
                agent_name=self.config.name,
                history=history,
                streaming=self.streaming,
                forward=forward,
                emit=lambda event: put(ToolItem(index, event, forwarded=True)),
            )
            tool_frame = frame.at_tool(call_frame)
            with use_frame(tool_frame):
                use_stream = streams(tool, self.streaming)
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
                put(ToolItem(index, message=message))
            else:
                event = _message_event(message, None, Role.TOOL, name, call_frame.action)
                put(ToolItem(index, event=event, message=message))
        except BaseException as error:
            put(ToolItem(index, error=error))

    def _put_failure(
        self, text: str, call: ToolCall, index: int, put: Callable[[ToolItem], object]
    ) -> None:
        """Report ``text`` as the result of a call that failed, with an event showing it.

        The event carries no action, whatever the tool sent before it failed: a refused
        transfer transfers nowhere, a failed exit tool exits nothing.
        """
        name = call.function.name
        message = self.config.tool_policy.limit(tool_message(text, call.id, name), self.config.name)
        event = event_from_message(message, None, Role.TOOL, name)
        put(ToolItem(index, event=event, message=message, failed=True))

    def invoke(
        self,
        tool: BaseTool,
        call: ToolCall,
        use_stream: bool,
        call_frame: ToolCallFrame,
        index: int,
        put: Callable[[ToolItem], object],
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
        put: Callable[[ToolItem], object],
    ) -> Message:
        name = call.function.name
        if use_stream:
            chunks = tool.stream(call.function.arguments, **self.tool_options)  # type: ignore[attr-defined]
            reader = tool_message_stream(chunks, call.id, name)
            for_user, for_history = reader.copy(2)
            event = _message_event(None, for_user, Role.TOOL, name, call_frame.action)
            put(ToolItem(index, event=event))
            return concat_message_stream(for_history)
        result = tool.invoke(call.function.arguments, **self.tool_options)  # type: ignore[attr-defined]
        if not isinstance(result, str):
            raise TypeError(f"tool {name!r} returned {type(result).__name__}, not str")
        return tool_message(result, call.id, name)


@attrs.define(eq=False)
class ToolItem:
    index: int
    event: AgentEvent | None = None
    message: Message | None = None
    error: BaseException | None = None
    forwarded: bool = False
    failed: bool = False  # the message tells the model how the call failed


def streams(tool: BaseTool, streaming: bool) -> bool:
    can_stream = callable(getattr(tool, "stream", None))
    if not can_stream:
        return False
    if streaming:
        return True
    return not callable(getattr(tool, "invoke", None))


def tool_message_stream(
    chunks: StreamReader[str], call_id: str, name: str
) -> StreamReader[Message]:
    return stream_from_iterator(
        (tool_message(chunk, call_id, name) for chunk in chunks), on_close=chunks.close
    )
