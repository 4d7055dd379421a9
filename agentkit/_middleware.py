"""Middleware: add behaviour around a ChatModelAgent's run, model calls and tool calls.

The definitions behind :mod:`agentkit.middleware`, whose docstring documents them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._events import AgentEvent
from agentkit._lazy import present
from agentkit._runctx import current_frame
from agentkit._runlocals import current_run_locals
from agentkit.errors import AgentKitTypeError
from agentkit.schema import Message
from agentkit.tools._base import BaseTool, ToolCallInfo

if TYPE_CHECKING:
    from agentkit.models._base import ModelOptions
    from agentkit.schema import ContentPart, ToolInfo
    from agentkit.streams import StreamReader

__all__ = [
    "AgentContext",
    "AgentMiddleware",
    "ContentToolInvoke",
    "ModelCallable",
    "ModelEventSender",
    "ModelState",
    "StreamContentToolInvoke",
    "StreamToolInvoke",
    "ToolEventSender",
    "ToolInvoke",
    "delete_run_local_value",
    "get_run_local_value",
    "send_event",
    "set_run_local_value",
]

ModelCallable = Callable[[list[Message], "ModelOptions | None"], Message]
"""``call(messages, options) -> Message``: one model call, as :meth:`.AgentMiddleware.wrap_model`
wraps it."""

ToolInvoke = Callable[[ToolCallInfo], str]
"""``invoke(call) -> str``: runs the tool call (or the next middleware), returns its text."""

StreamToolInvoke = Callable[[ToolCallInfo], "StreamReader[str]"]
"""``invoke(call) -> StreamReader[str]``: starts a streamed tool call (or the next
middleware), returns its text chunks."""

ContentToolInvoke = Callable[[ToolCallInfo], "str | tuple[ContentPart, ...]"]
"""``invoke(call) -> str | tuple[ContentPart, ...]``: runs a tool call whose result may hold
images, files or sounds (or the next middleware), returns its text or its parts."""

StreamContentToolInvoke = Callable[[ToolCallInfo], "StreamReader[ContentPart]"]
"""``invoke(call) -> StreamReader[ContentPart]``: starts a streamed call of a
:class:`~agentkit.tools.StreamableContentTool` (or the next middleware), returns its chunks,
one content part each."""


@attrs.define(eq=False)
class AgentContext:
    """What :meth:`AgentMiddleware.before_agent` may change for one agent run (and what
    :meth:`AgentMiddleware.after_agent` is told about the run that ended).

    Attributes:
        agent_name: the agent that is starting.
        instruction: the agent's instruction (the transfer instruction included).
        tools: the agent's tools (the transfer and exit tools included); replace or edit the
            list to offer other tools for this run.
        messages: the run's input messages (without the system message, which is made from
            ``instruction`` afterwards). On a resumed run the conversation was saved already:
            ``instruction`` and ``messages`` changes are ignored, ``tools`` changes apply.
        resumed: whether this is a resumed run.
    """

    agent_name: str
    instruction: str
    tools: list[BaseTool]
    messages: list[Message]
    resumed: bool = False


@attrs.define(eq=False)
class ModelState:
    """The conversation about to be sent to the model (:meth:`AgentMiddleware.before_model`).

    Attributes:
        agent_name: the agent calling the model.
        messages: the messages the model gets; changes are kept for the rest of the run.
        tools: the tools the model is offered (their :class:`~agentkit.ToolInfo`); a change
            is kept for the rest of the run (tools the agent does not have are answered with
            an error message, per the tool-error policy).
    """

    agent_name: str
    messages: list[Message]
    tools: list[ToolInfo]


class AgentMiddleware:
    """The base class of middlewares: every method does nothing until overridden.

    A middleware object may serve many runs in many threads at once: keep per-run state in
    :func:`set_run_local_value`, not on ``self``. Exceptions raised by a hook end the run
    (hooks are part of the agent), except those raised inside ``invoke`` of
    :meth:`wrap_tool_call`, which go through the agent's tool-error policy when they escape.
    """

    def before_agent(self, context: AgentContext) -> None:
        """Called once when the agent starts a run: change ``context`` to change the run."""

    def after_agent(self, context: AgentContext, messages: list[Message]) -> None:
        """Called once when the agent's run ends without error or interrupt.

        ``messages`` is the conversation of the run without the system message: the input,
        the model's replies, the tool results and the final answer (for a resumed run, the
        conversation it went on with). ``context`` names the agent, its instruction and its
        tools; changing it has no effect, the run is over. The hook may write session values
        (:func:`~agentkit.add_session_values`), which the next agents and the checkpoint see.
        It is not called when the run fails, is cancelled or pauses for an interrupt (it is
        called when the resumed run ends). A hook that raises ends the run with its error.
        Middlewares that do not override it cost nothing when the agent ends (Eino's
        ``AfterAgent``).
        """

    def before_model(self, state: ModelState) -> None:
        """Called before every model call: change ``state.messages`` / ``state.tools``."""

    def after_model(self, state: ModelState, message: Message) -> Message:
        """Called after every model call; return the message the agent goes on with."""
        return message

    def wrap_model(self, call: ModelCallable) -> ModelCallable:
        """Return a callable used instead of ``call`` (same signature); call it to go on.

        Called once per run; the returned callable is used for each model call of the run.
        It may change the messages or options, retry, or return a message of its own.
        """
        return call

    def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
        """Run one tool call: ``invoke(call)`` runs it (and the inner middlewares).

        Inspect or change ``call`` (``attrs.evolve(call, arguments={...})``), return a result
        without calling ``invoke`` (the tool does not run), retry, or time it. Exceptions
        from ``invoke`` that escape go through the agent's tool-error policy. Calls of tools
        the agent does not have are answered by that policy without reaching middleware.
        Interrupts and cancellation raised by ``invoke`` derive from ``BaseException``: let
        them pass.

        A streamed call (a streaming tool in a streamed run) goes through
        :meth:`wrap_stream_tool_call` too, inside these layers: ``invoke`` here returns the
        whole text once the stream ended. A call whose result holds images, files or sounds
        goes through :meth:`wrap_content_tool_call` inside these layers; a layer here that
        returns the text it got keeps the parts.
        """
        return invoke(call)

    def wrap_stream_tool_call(
        self, call: ToolCallInfo, invoke: StreamToolInvoke
    ) -> StreamReader[str]:
        """Run one streamed tool call: ``invoke(call)`` starts it and returns its chunks.

        For a streaming tool in a streamed run (Eino's ``WrapStreamableToolCall``). Return
        the stream (``invoke(call)`` as it is), or a stream made from it
        (:func:`~agentkit.stream_from_iterator` over its chunks, with ``on_close`` closing
        it): what it yields is what the run's event streams and what the agent keeps (the
        chunks joined). Change ``call`` or answer without the tool as in
        :meth:`wrap_tool_call`. Runs inside the :meth:`wrap_tool_call` layers.

        Example, a layer that masks a secret in every chunk::

            def wrap_stream_tool_call(self, call, invoke):
                chunks = invoke(call)
                masked = (chunk.replace(SECRET, "***") for chunk in chunks)
                return stream_from_iterator(masked, on_close=chunks.close)
        """
        return invoke(call)

    def wrap_content_tool_call(
        self, call: ToolCallInfo, invoke: ContentToolInvoke
    ) -> str | tuple[ContentPart, ...]:
        """Run one call of a tool whose result may hold images, files or sounds.

        For content tools (function, MCP and agent tools) run without streaming (Eino's
        ``WrapEnhancedInvokableToolCall``): ``invoke(call)`` returns the text, or a tuple of
        parts (:class:`~agentkit.TextPart`, :class:`~agentkit.ImagePart`, ...); return it, or
        other text or parts. Runs inside the :meth:`wrap_tool_call` layers.
        """
        return invoke(call)

    def wrap_stream_content_tool_call(
        self, call: ToolCallInfo, invoke: StreamContentToolInvoke
    ) -> StreamReader[ContentPart]:
        """Run one streamed call of a tool that streams content parts.

        For a :class:`~agentkit.tools.StreamableContentTool` in a streamed run (Eino's
        ``WrapEnhancedStreamableToolCall``): ``invoke(call)`` starts it and returns its
        chunks, one :class:`~agentkit.TextPart`, :class:`~agentkit.ImagePart`,
        :class:`~agentkit.FilePart` or :class:`~agentkit.AudioPart` each. Return that stream,
        or one made from it (:func:`~agentkit.stream_from_iterator` over its chunks, with
        ``on_close`` closing it): what it yields is what the run's event streams and what
        the agent keeps (one tool message, its parts the chunks joined). Pass the parts on
        as they are (they are values; an image is not copied). Change ``call`` or answer
        without the tool as in :meth:`wrap_tool_call`. Runs inside the
        :meth:`wrap_tool_call` layers; :meth:`wrap_stream_tool_call` does not see such a call.

        Example, a layer that drops the images a tool streams::

            def wrap_stream_content_tool_call(self, call, invoke):
                chunks = invoke(call)
                kept = (part for part in chunks if not isinstance(part, ImagePart))
                return stream_from_iterator(kept, on_close=chunks.close)
        """
        return invoke(call)


class ToolEventSender(AgentMiddleware):
    """Where a tool call's event is sent in the middleware list (Eino's
    ``NewEventSenderToolWrapper``).

    By default a tool call's event shows what the outermost :meth:`.AgentMiddleware.wrap_tool_call`
    layer returned. Put one ``ToolEventSender()`` in ``middlewares=[...]`` and the event shows
    what the layers after it (inner) returned instead; the layers before it (outer) change only
    what the agent keeps and the model sees next. For example, to log or audit the tool's own
    output while the model gets a cleaned one::

        middlewares=[Sanitize(), ToolEventSender()]   # the event: the tool's own result
        middlewares=[ToolEventSender(), Sanitize()]   # the event: the sanitized result

    A streamed call's event is its stream, sent as it streams (see
    :meth:`.AgentMiddleware.wrap_stream_tool_call`). Use one per agent. Outside a
    ChatModelAgent its ``wrap_tool_call`` passes the call on.
    """

    def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
        """Pass the call on (the agent sends the event at this layer)."""
        return invoke(call)


class ModelEventSender(AgentMiddleware):
    """Where a model reply's event is sent in the middleware list (Eino's
    ``NewEventSenderModelWrapper``).

    By default the event of a whole (not streamed) reply shows what the outermost
    :meth:`.AgentMiddleware.wrap_model` layer returned. Put one ``ModelEventSender()`` in
    ``middlewares=[...]`` and the event shows what the layers after it (inner) returned
    instead; the layers before it (outer) change only what the agent keeps and acts on. For
    example, to show the model's own reply while the agent goes on with a cleaned one::

        middlewares=[Clean(), ModelEventSender()]   # the event: the model's own reply
        middlewares=[ModelEventSender(), Clean()]   # the event: the cleaned reply

    One event is sent per model step, the first time a reply passes this layer (a layer
    outside it that calls again does not send a second). In a streamed run the reply streams
    as the model sends it, wherever this layer is. The agent's answer guardrails check the
    reply the event shows. Use one per agent. Outside a ChatModelAgent its ``wrap_model``
    passes the call on.
    """

    def wrap_model(self, call: ModelCallable) -> ModelCallable:
        """Pass the call on (the agent sends the event at this layer)."""
        return call


def set_run_local_value(key: str, value: Any) -> None:
    """Keep ``value`` under ``key`` for the rest of the current agent run (Eino's
    ``SetRunLocalValue``).

    Run-local values belong to one run of one ChatModelAgent: its middleware hooks and its
    tools see them; other agents and later runs do not. They are part of the agent's saved
    state, as its conversation is: a run that stops (an interrupt, a cancel, a failure) keeps
    them in its checkpoint and the resumed run sees them again, and a durable run
    (``durability="step"``) writes them with each step. A value must therefore be one the
    checkpoint serializer can save, as a session value must; keep a value that cannot be
    saved (a connection, a lock) elsewhere, such as on the tool or the middleware. A durable
    run writes a value when it is set anew: set a changed value again rather than changing it
    in place.

    Raises:
        RuntimeError: called outside a ChatModelAgent run.
    """
    current_run_locals("set_run_local_value").set(key, value)


def delete_run_local_value(key: str) -> None:
    """Forget the run-local value ``key`` of the current agent run (Eino's
    ``DeleteRunLocalValue``); nothing happens when there is none.

    A resumed run does not see a deleted value: the agent's saved state is its values at the
    moment it stopped (see :func:`set_run_local_value`).

    Raises:
        RuntimeError: called outside a ChatModelAgent run.
    """
    current_run_locals("delete_run_local_value").delete(key)


def get_run_local_value(key: str, default: Any = None) -> Any:
    """The run-local value ``key`` of the current agent run, or ``default``.

    Raises:
        RuntimeError: called outside a ChatModelAgent run.
    """
    return current_run_locals("get_run_local_value").get(key, default)


def send_event(event: AgentEvent) -> None:
    """Send ``event`` into the current run's event stream, as an event of the current agent.

    Use it in middleware hooks and tools for progress reports or custom data
    (``AgentEvent(output=AgentOutput(customized_output=...))``). The framework fills in the
    agent name and run path; events without a message are not part of the history.

    Raises:
        RuntimeError: called outside a ChatModelAgent run.
    """
    if not isinstance(event, AgentEvent):
        raise AgentKitTypeError(f"send_event() takes an AgentEvent (got {type(event).__name__})")
    run_locals = current_run_locals("send_event")
    frame = current_frame()
    call = frame.tool if frame is not None else None
    if call is not None and call.emit is not None:
        call.emit(event)  # inside a tool call: through the tool round, in order with it
    else:
        run_locals.emit(event)

present(
    (
        AgentContext,
        AgentMiddleware,
        ModelState,
        delete_run_local_value,
        get_run_local_value,
        send_event,
        set_run_local_value,
    ),
    "agentkit",
)

present(
    (
        ContentToolInvoke,
        ModelCallable,
        ModelEventSender,
        StreamToolInvoke,
        ToolEventSender,
        ToolInvoke,
    ),
    "agentkit.middleware",
)
