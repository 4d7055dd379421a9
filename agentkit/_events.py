"""Agent core types: inputs, events, outputs, actions, interrupt data and the agent protocols.

The definitions behind :mod:`agentkit.events`, whose docstring documents them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from agentkit._html import plain
from agentkit._lazy import present
from agentkit._persist import persisted
from agentkit._stream_base import CopyReader
from agentkit._transfer_messages import (
    TRANSFER_TO_AGENT_TOOL_NAME,
    gen_transfer_messages,
    transfer_result_text,
)
from agentkit.errors import AgentKitValueError
from agentkit.schema import (
    EVENT_INLINE_BYTES,
    Message,
    Role,
    _json_safe,
    _message_html_lines,
)
from agentkit.streams import StreamReader, _concatenated, concat_message_stream, stream_from_list

if TYPE_CHECKING:
    from agentkit._options import AgentRunOption
    from agentkit.iterators import AsyncIterator

__all__ = [
    "TRANSFER_TO_AGENT_TOOL_NAME",
    "Agent",
    "AgentAction",
    "AgentEvent",
    "AgentInput",
    "AgentOutput",
    "BreakLoopAction",
    "InterruptContext",
    "InterruptInfo",
    "MessageVariant",
    "OnSubAgents",
    "ResumableAgent",
    "ResumeInfo",
    "RunStep",
    "TransferToAgentAction",
    "event_from_message",
    "new_break_loop_action",
    "new_exit_action",
    "gen_transfer_messages",
    "new_transfer_to_agent_action",
    "transfer_result_text",
]


# How the framework makes instances of the frozen event types on the hot path: a new object,
# its slots set through their descriptors (attrs' own __init__ of a frozen class sets them
# with object.__setattr__, which costs twice as much). Only ever on an object being made.
_new_event = object.__new__


def _slot_setters(cls: type, *names: str) -> tuple[Callable[[Any, Any], None], ...]:
    """The ``__set__`` of the slot descriptors ``names`` of the slotted class ``cls``."""
    return tuple(vars(cls)[name].__set__ for name in names)


@persisted("agentkit.RunStep")
@attrs.frozen(eq=False)
class RunStep:
    """One step of a run path: the name of an agent. ``str(step)`` is the name."""

    agent_name: str

    def __str__(self) -> str:
        return self.agent_name

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RunStep):
            return self.agent_name == other.agent_name
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.agent_name)


@persisted("agentkit.AgentInput")
@attrs.define
class AgentInput:
    """What an agent is run with: the conversation so far and whether to stream."""

    messages: list[Message] = attrs.Factory(list)
    enable_streaming: bool = False


class _Concatenated:
    """A streamed variant's whole message, concatenated once (under a lock) and kept."""

    __slots__ = ("buffer", "lock", "outcome", "start")

    def __init__(self, reader: CopyReader[Message]) -> None:
        self.buffer = reader._buffer
        self.start = reader._position
        self.lock = threading.Lock()
        self.outcome: tuple[Message | None, BaseException | None] | None = None

    def reader(self) -> StreamReader[Message]:
        return self.buffer.readers(1, self.start)[0]

    def message(self) -> Message:
        with self.lock:
            outcome = self.outcome
            if outcome is None:
                # The producer concatenated its own copy already (a streamed model call):
                # its message, without a copy of our own to read to the end again.
                known = _concatenated(self.buffer, self.start)
                if known is not None:
                    outcome = (known, None)
                else:
                    try:
                        outcome = (concat_message_stream(self.reader()), None)
                    except Exception as failure:
                        outcome = (None, failure)
                self.outcome = outcome
        message, error = outcome
        if error is not None:
            raise error
        assert message is not None
        return message


@persisted("agentkit.MessageVariant")
@attrs.frozen(init=False)
class MessageVariant:
    """A message output: either a whole :class:`Message` or a stream of message chunks.

    ``role`` is ``assistant`` for model output and ``tool`` for tool results; it is set even
    for streams, so consumers can route events without reading them.

    A variant never changes. Its stream is read through a buffer every reader shares:
    :meth:`get_message` concatenates it once, from a reader of its own, and
    :meth:`open_stream` gives any consumer a reader from the first chunk, so reading
    ``message_stream`` (the one reader handed out with the event) takes nothing from anyone.
    """

    is_streaming: bool
    message: Message | None
    message_stream: StreamReader[Message] | None
    role: Role
    tool_name: str = ""
    _whole: _Concatenated | None = attrs.field(repr=False, eq=False, default=None)

    def __init__(
        self,
        is_streaming: bool,
        message: Message | None,
        message_stream: StreamReader[Message] | None,
        role: Role | str,
        tool_name: str = "",
    ) -> None:
        # Written out (not attrs' __init__): one variant is made per event, so this is hot. A
        # stream becomes a reader of a buffer any number of readers share (a reader that is a
        # copy already is kept; any other is copied once: the variant owns the stream from
        # then on), and a streaming variant gets the one place its message is concatenated.
        stream = message_stream
        whole = None
        if stream is not None:
            if not isinstance(stream, CopyReader):
                stream = stream.copy(1)[0]
            if is_streaming:
                whole = _Concatenated(stream)  # type: ignore[arg-type]
        _V_STREAMING(self, is_streaming)
        _V_MESSAGE(self, message)
        _V_STREAM(self, stream)
        _V_ROLE(self, role if role.__class__ is Role else Role(role))
        _V_TOOL_NAME(self, tool_name)
        _V_WHOLE(self, whole)

    def get_message(self) -> Message:
        """Return the message, concatenating the stream if this variant streams.

        Pure and thread-safe: any number of calls, from any thread, before or after someone
        read ``message_stream``, return the same message (the stream is concatenated once).
        Raises the stream's error (every time), or ``ValueError`` for a stream without chunks.
        """
        if not self.is_streaming:
            if self.message is None:
                raise AgentKitValueError("this MessageVariant has no message")
            return self.message
        whole = self._whole
        if whole is None:
            raise AgentKitValueError("this streaming MessageVariant has no message_stream")
        return whole.message()

    def open_stream(self) -> StreamReader[Message]:
        """Return a new reader of the stream, from its first chunk, for one consumer.

        Each consumer that reads a streamed output chunk by chunk (a display, an SSE response)
        takes its own reader, so nobody's reading takes chunks from anyone else. A variant
        that does not stream gives a reader of its one message.
        """
        whole = self._whole
        if whole is not None:
            return whole.reader()
        return stream_from_list([self.get_message()])

    def copy(self) -> MessageVariant:
        """Return a variant with a reader of its own (the stream is shared, never re-read)."""
        if self._whole is None:
            return self
        return MessageVariant(True, None, self._whole.reader(), self.role, self.tool_name)

    def __getstate__(self) -> dict[str, Any]:
        # The persisted form (checkpoints hold materialized variants): the public fields.
        return {
            "is_streaming": self.is_streaming,
            "message": self.message,
            "message_stream": self.message_stream,
            "role": self.role,
            "tool_name": self.tool_name,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Earlier versions also saved a private "_materialized" field: ignored.
        for name in ("is_streaming", "message", "message_stream", "role"):
            object.__setattr__(self, name, state[name])
        object.__setattr__(self, "tool_name", state.get("tool_name", ""))
        stream = self.message_stream
        whole = None
        if self.is_streaming and isinstance(stream, CopyReader):
            whole = _Concatenated(stream)
        object.__setattr__(self, "_whole", whole)


@persisted("agentkit.AgentOutput")
@attrs.frozen
class AgentOutput:
    """What an event outputs: a message (plain or streamed) and/or anything custom."""

    message_output: MessageVariant | None = None
    customized_output: Any = None


@persisted("agentkit.TransferToAgentAction")
@attrs.frozen
class TransferToAgentAction:
    """Hand the conversation to the agent named ``dest_agent_name``."""

    dest_agent_name: str


def _address_converter(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@persisted("agentkit.InterruptContext")
@attrs.frozen(eq=False)
class InterruptContext:
    """One point of a run that interrupted.

    Attributes:
        id: a fresh opaque id minted each time the point interrupts; resume data is keyed by it.
        info: what the point said about itself (shown to the user).
        address: the point's path, segments ``agent:<name>`` and ``tool:<tool name>:<call id>``.
        is_root_cause: ``True`` for the point that actually interrupted (a leaf).
        parent: the enclosing interrupted component, if any.
    """

    id: str
    info: Any
    address: tuple[str, ...] = attrs.field(converter=_address_converter)
    is_root_cause: bool
    parent: InterruptContext | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, InterruptContext):
            return NotImplemented
        return (
            self.id == other.id
            and self.address == other.address
            and self.is_root_cause == other.is_root_cause
        )

    __hash__ = None  # type: ignore[assignment]


def _contexts(value: Iterable[InterruptContext]) -> tuple[InterruptContext, ...]:
    return value if type(value) is tuple else tuple(value)


@persisted("agentkit.InterruptInfo")
@attrs.frozen
class InterruptInfo:
    """Why a run interrupted. ``contexts`` lists the root-cause interrupt points (a tuple)."""

    data: Any = None
    contexts: tuple[InterruptContext, ...] = attrs.field(default=(), converter=_contexts)

    # --- notebook display (see agentkit.display) ---
    def _repr_html_(self) -> str:
        """HTML for Jupyter: each root-cause interrupt point with its id."""
        from agentkit import _html

        return _html.render(_interrupt_html_lines(self), "")


@persisted("agentkit.BreakLoopAction")
@attrs.frozen
class BreakLoopAction:
    """Stop the innermost enclosing :class:`~agentkit.LoopAgent` after the current sub-agent.

    The loop that acts on it passes on a copy with ``done`` set and ``current_iterations``
    (0-based) filled in.
    """

    from_agent: str
    done: bool = False
    current_iterations: int = 0


@persisted("agentkit.AgentAction")
@attrs.frozen
class AgentAction:
    """A control action carried by an event."""

    exit: bool = False
    interrupted: InterruptInfo | None = None
    transfer_to_agent: TransferToAgentAction | None = None
    break_loop: BreakLoopAction | None = None
    customized_action: Any = None


def _run_path_converter(value: Iterable[RunStep | str]) -> tuple[RunStep, ...]:
    if not value:
        return ()  # a new event's path: nothing to walk
    return tuple(step if isinstance(step, RunStep) else RunStep(step) for step in value)


@attrs.frozen
class AgentEvent:
    """One event of an agent run: an output, an action, or a terminal error.

    An event is a fact: once made it never changes, nor does what it carries (messages are
    frozen, ``run_path`` is a tuple). ``agent_name`` and ``run_path`` are filled
    by the framework when the agent emits it into the run (the run makes a named copy of an
    event that has no run path). An agent sends at most one error event, as its last event.

    ``invocation_id`` is filled then too (Eino's ``InvocationID``): one id per execution of an
    agent's turn, shared by the events that turn emitted and by the callbacks about it
    (``RunInfo.invocation_id``), new for each turn (a resumed turn, the next transfer, the next
    loop iteration); ``""`` on an event no run named. It tells apart two turns of one agent in
    an event stream or a trace. Equality ignores it, and :meth:`to_dict` leaves it out (the
    run log's schema, version 1, has no such field).
    """

    agent_name: str = ""
    run_path: tuple[RunStep, ...] = attrs.field(default=(), converter=_run_path_converter)
    output: AgentOutput | None = None
    action: AgentAction | None = None
    err: BaseException | None = None
    # One id per execution of an agent's turn (Eino's InvocationID): not part of what the
    # event says, so two events that say the same are equal whichever turn sent them.
    invocation_id: str = attrs.field(default="", eq=False)

    @property
    def interrupted(self) -> bool:
        """``True`` for an interrupt event (its action carries ``interrupted``)."""
        return self.action is not None and self.action.interrupted is not None

    def get_message(self) -> Message | None:
        """Return the event's message (streams concatenated), or ``None`` without one."""
        if self.output is None or self.output.message_output is None:
            return None
        return self.output.message_output.get_message()

    # --- notebook display (see agentkit.display) ---
    def _repr_html_(self) -> str:
        """HTML for Jupyter: the event's message, tool calls, actions and error."""
        from agentkit import _html

        return _html.render(_event_html_lines(self), self.agent_name or "agent")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict: streams materialized, the error as type and message.

        The message's media larger than :data:`~agentkit.schema.EVENT_INLINE_BYTES` are
        references (their size and SHA-256), not data: what goes to a browser or a run log
        never carries large media (see :meth:`Message.to_dict <agentkit.Message.to_dict>`).
        """
        data: dict[str, Any] = {
            "agent_name": self.agent_name,
            "run_path": [str(step) for step in self.run_path],
        }
        if self.output is not None:
            output: dict[str, Any] = {}
            variant = self.output.message_output
            if variant is not None:
                try:
                    output["message"] = variant.get_message().to_dict(
                        max_inline_bytes=EVENT_INLINE_BYTES
                    )
                except Exception as error:  # a stream that failed: report, don't raise
                    output["stream_error"] = {"type": type(error).__name__, "message": str(error)}
                output["role"] = variant.role.value
                output["is_streaming"] = variant.is_streaming
                if variant.tool_name:
                    output["tool_name"] = variant.tool_name
            if self.output.customized_output is not None:
                output["customized_output"] = _json_safe(self.output.customized_output)
            data["output"] = output
        if self.action is not None:
            data["action"] = _action_to_dict(self.action)
        if self.err is not None:
            data["error"] = {"type": type(self.err).__name__, "message": str(self.err)}
        return data


def _action_to_dict(action: AgentAction) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if action.exit:
        data["exit"] = True
    if action.transfer_to_agent is not None:
        data["transfer_to_agent"] = action.transfer_to_agent.dest_agent_name
    if action.break_loop is not None:
        brk = action.break_loop
        data["break_loop"] = {
            "from_agent": brk.from_agent,
            "done": brk.done,
            "current_iterations": brk.current_iterations,
        }
    if action.interrupted is not None:
        data["interrupted"] = {
            "data": _json_safe(action.interrupted.data),
            "contexts": [
                {
                    "id": ctx.id,
                    "info": _json_safe(ctx.info),
                    "address": list(ctx.address),
                    "is_root_cause": ctx.is_root_cause,
                }
                for ctx in action.interrupted.contexts
            ],
        }
    if action.customized_action is not None:
        data["customized_action"] = _json_safe(action.customized_action)
    return data


@attrs.frozen
class ResumeInfo:
    """What a resumable agent is told when its run is resumed.

    Attributes:
        enable_streaming: the streaming mode of the interrupted run.
        interrupt_info: the interrupt info of the event that stopped the run.
        was_interrupted: this agent itself saved interrupt state.
        interrupt_state: that state (or ``None``).
        is_resume_target: this agent, or something inside it, was targeted with resume data.
        resume_data: data targeted exactly at this agent.
    """

    enable_streaming: bool = False
    interrupt_info: InterruptInfo | None = None
    was_interrupted: bool = False
    interrupt_state: Any = None
    is_resume_target: bool = False
    resume_data: Any = None


# --- protocols ------------------------------------------------------------------------------


@runtime_checkable
class Agent(Protocol):
    """Anything with a name, a description and a ``run`` that returns an event iterator at once."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def run(self, input: AgentInput, *options: AgentRunOption) -> AsyncIterator[AgentEvent]: ...


@runtime_checkable
class ResumableAgent(Agent, Protocol):
    """An agent that can continue an interrupted run."""

    def resume(self, info: ResumeInfo, *options: AgentRunOption) -> AsyncIterator[AgentEvent]: ...


@runtime_checkable
class OnSubAgents(Protocol):
    """Hooks :func:`~agentkit.set_sub_agents` calls on agents that care about their neighbours."""

    def on_set_sub_agents(self, sub_agents: Sequence[Agent]) -> None: ...

    def on_set_as_sub_agent(self, parent: Agent) -> None: ...

    def on_disallow_transfer_to_parent(self) -> None: ...


def event_from_message(
    msg: Message | None,
    stream: StreamReader[Message] | None,
    role: Role | str,
    tool_name: str = "",
) -> AgentEvent:
    """Return an event whose output is ``msg``, or ``stream`` when one is given."""
    return _message_event(msg, stream, role, tool_name)


def _named(
    event: AgentEvent,
    agent_name: str,
    run_path: tuple[RunStep, ...],
    invocation_id: str = "",
) -> AgentEvent:
    """A new event: ``event`` named ``agent_name`` at ``run_path``, sent by the turn
    ``invocation_id`` (framework-internal).

    Made the way attrs' own ``__init__`` of a frozen class makes one, minus the run path
    converter: ``run_path`` is a tuple of :class:`RunStep` objects already (the run made it),
    so the new event shares it. ``event`` is not changed.
    """
    return _event(
        agent_name, run_path, event.output, event.action, event.err, invocation_id
    )


def _event(
    agent_name: str,
    run_path: tuple[RunStep, ...],
    output: AgentOutput | None,
    action: AgentAction | None,
    err: BaseException | None,
    invocation_id: str = "",
) -> AgentEvent:
    """A new event from fields the framework made (``run_path``: a tuple of RunSteps)."""
    event = _new_event(AgentEvent)
    _E_AGENT_NAME(event, agent_name)
    _E_RUN_PATH(event, run_path)
    _E_OUTPUT(event, output)
    _E_ACTION(event, action)
    _E_ERR(event, err)
    _E_INVOCATION_ID(event, invocation_id)
    return event


def _message_event(
    msg: Message | None,
    stream: StreamReader[Message] | None,
    role: Role | str,
    tool_name: str = "",
    action: AgentAction | None = None,
) -> AgentEvent:
    """:func:`event_from_message` with an action (framework-internal; built in one go)."""
    streaming = stream is not None
    variant = MessageVariant(streaming, None if streaming else msg, stream, role, tool_name)
    output = _new_event(AgentOutput)
    _O_MESSAGE_OUTPUT(output, variant)
    _O_CUSTOMIZED_OUTPUT(output, None)
    return _event("", (), output, action, None)


def new_exit_action() -> AgentAction:
    """Return an action that ends the current agent (and stops Sequential/Loop workflows)."""
    return AgentAction(exit=True)


def new_transfer_to_agent_action(dest: str) -> AgentAction:
    """Return an action that transfers the conversation to the agent named ``dest``."""
    return AgentAction(transfer_to_agent=TransferToAgentAction(dest))


def new_break_loop_action(agent_name: str) -> AgentAction:
    """Return an action that stops the innermost enclosing loop, sent by ``agent_name``."""
    return AgentAction(break_loop=BreakLoopAction(from_agent=agent_name))


# --- notebook display: the transcript lines of events (rendered by agentkit._html) ---


def _interrupt_html_lines(info: InterruptInfo) -> list[tuple[str, str]]:
    """The ``(kind, text)`` lines of an interrupt: one per root-cause point, with its id."""
    contexts = [context for context in info.contexts if context.is_root_cause] or info.contexts
    if not contexts:
        return [("interrupt", f"interrupted: {info.data!r}")]
    return [
        ("interrupt", f"waiting for input: {plain(context.info)}  [id {context.id}]")
        for context in contexts
    ]


def _event_html_lines(event: AgentEvent) -> list[tuple[str, str]]:
    """The ``(kind, text)`` lines of an event: its message or output, actions and error."""
    who = event.agent_name or "agent"
    lines: list[tuple[str, str]] = []
    output = event.output
    if output is not None and output.message_output is not None:
        try:
            lines.extend(_message_html_lines(output.message_output.get_message(), who))
        except Exception as error:
            lines.append(("error", f"stream error: {type(error).__name__}: {error}"))
    elif output is not None and output.customized_output is not None:
        lines.append(("result", f"output: {plain(output.customized_output)}"))
    action = event.action
    if action is not None:
        if action.transfer_to_agent is not None:
            lines.append(
                ("transfer", f"{who} transfers to {action.transfer_to_agent.dest_agent_name}")
            )
        if action.exit:
            lines.append(("exit", f"{who} exits"))
        if action.break_loop is not None:
            lines.append(("exit", f"{who} breaks the loop"))
        if action.interrupted is not None:
            lines.extend(_interrupt_html_lines(action.interrupted))
    if event.err is not None:
        lines.append(("error", f"error: {type(event.err).__name__}: {event.err}"))
    return lines


_V_STREAMING, _V_MESSAGE, _V_STREAM, _V_ROLE, _V_TOOL_NAME, _V_WHOLE = _slot_setters(
    MessageVariant, "is_streaming", "message", "message_stream", "role", "tool_name", "_whole"
)
_O_MESSAGE_OUTPUT, _O_CUSTOMIZED_OUTPUT = _slot_setters(
    AgentOutput, "message_output", "customized_output"
)
_E_AGENT_NAME, _E_RUN_PATH, _E_OUTPUT, _E_ACTION, _E_ERR, _E_INVOCATION_ID = _slot_setters(
    AgentEvent, "agent_name", "run_path", "output", "action", "err", "invocation_id"
)

present(
    (
        Agent,
        AgentAction,
        AgentEvent,
        AgentInput,
        AgentOutput,
        BreakLoopAction,
        InterruptContext,
        InterruptInfo,
        MessageVariant,
        OnSubAgents,
        ResumableAgent,
        ResumeInfo,
        RunStep,
        TransferToAgentAction,
        event_from_message,
        gen_transfer_messages,
        new_break_loop_action,
        new_exit_action,
        new_transfer_to_agent_action,
    ),
    "agentkit",
)

present(
    (
        transfer_result_text,
    ),
    "agentkit.events",
)
