"""The ReAct run of a :class:`~agentkit.ChatModelAgent`: its model calls and its tool rounds.

One module for one concept, the run of a ReAct agent, read top to bottom:

* :class:`ReactConfig` is what an agent fixes on its first run, :class:`ReactState` the
  loop's state (the conversation and the model calls left).
* :class:`ModelCaller` makes one model call of an agent's run: streamed replies delivered as
  they arrive, a cancel that closes the stream, the call counted once in the run's usage ledger
  and reported to the callbacks. The ReAct loop and the plan-execute planner both use it.
* :class:`ReactHooks`: the middleware and the model retry of one run, composed once (a run
  without any takes the plain path and never builds it).
* :class:`ReactRun` is one run (nothing kept afterwards): call the model, run the tool calls of
  its reply (one inline, several concurrently: events in completion order, history in call
  order), repeat until an answer, a return-directly tool or ``max_iterations``. A stop
  (interrupt, cancel, failure) records the agent's progress as its resume point.
* :class:`RoundOutcome` gathers a tool round's reports in the agent's thread;
  :func:`call_with_timeout` runs a call with a time limit; :func:`unique_call_ids` gives every
  call of a reply its own id.

Around one model call, outermost first: ``before_model`` hooks, model retry, ``wrap_model``
layers, the call (callbacks, the model); then ``after_model`` hooks (reverse order). Around
one tool call: ``wrap_tool_call`` layers, the tool callbacks, the time limit, the tool.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent import futures
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from agentkit._agent import AgentRun, call_run, frame_of, record_event, send_recorded
from agentkit._cancel import CancelMode
from agentkit._events import (
    AgentAction,
    AgentEvent,
    InterruptInfo,
    _message_event,
    event_from_message,
)
from agentkit._interrupt import InterruptSignal, ToolRoundState
from agentkit._limits import LimitReached
from agentkit._middleware import (
    AgentContext,
    AgentMiddleware,
    ModelCallable,
    ModelEventSender,
    ModelState,
    ToolEventSender,
)
from agentkit._observe import CallEstimate, RunInfo, UsageLedger, fire
from agentkit._points import PointResume
from agentkit._runctx import RunFrame, RunKey, ToolCallFrame, current_frame, use_frame
from agentkit._runlocals import RunLocals, run_locals
from agentkit._scope import Point, RunScope
from agentkit._stream_base import StreamReader
from agentkit.agents._guardrails import Guardrails
from agentkit.agents._model_retry import ModelRetryConfig, StreamVerdicts
from agentkit.agents._structured import StructuredOutput
from agentkit.agents._tool_errors import ToolErrorPolicy
from agentkit.agents._tool_wraps import WrappedTool
from agentkit.errors import (
    AgentCancelledError,
    AgentConfigError,
    AgentKitRuntimeError,
    AgentKitTypeError,
    ExceedMaxIterationsError,
    GuardrailTripped,
    ResumeError,
    RunLimitError,
    ToolTimeoutError,
)
from agentkit.schema import (
    AudioPart,
    ContentPart,
    FilePart,
    FunctionCall,
    ImagePart,
    Message,
    Role,
    TextPart,
    TokenUsage,
    ToolCall,
    tool_message,
)
from agentkit.streams import concat_message_stream, stream_from_iterator
from agentkit.tools._base import (
    BaseTool,
    ContentTool,
    StreamableContentTool,
    ToolCallInfo,
    is_idempotent,
)
from agentkit.tools._function import FunctionTool
from agentkit.tools._unfinished import UnfinishedToolCall, unfinished_decision

if TYPE_CHECKING:
    from agentkit.models._base import ModelOptions
    from agentkit.schema import ToolInfo

__all__ = [
    "ModelCaller",
    "ReactConfig",
    "ReactHooks",
    "ReactRun",
    "ReactState",
    "RoundOutcome",
    "ToolItem",
    "UniqueCallIds",
    "apply_after_agent",
    "apply_before_agent",
    "call_with_timeout",
    "checked_middlewares",
    "limit_pause",
    "return_directly_call",
    "tool_timeouts",
    "unique_call_ids",
]

T = TypeVar("T")


# --- configuration and state ---------------------------------------------------------------------


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
    # --- middleware, callbacks, retries, timeouts ---
    middlewares: tuple[AgentMiddleware, ...] = ()
    base_model: Any = None  # the model before with_tools, to offer other tools
    tool_timeouts: Mapping[str, float] = attrs.field(factory=dict)  # per tool name
    tool_timeout: float | None = None  # the agent's default, for tools added by middleware
    model_retry: ModelRetryConfig | None = None
    guardrails: Guardrails | None = None
    share_guardrails: bool = True  # the guardrails also check the agents this one runs


@attrs.define(eq=False)
class ReactState:
    """The ReAct loop's state: the conversation and the model calls left."""

    messages: list[Message]
    remaining: int


def checked_middlewares(middlewares: object) -> tuple[AgentMiddleware, ...]:
    """Validate ``ChatModelAgent(middlewares=...)``."""
    if isinstance(middlewares, AgentMiddleware):
        raise AgentConfigError(
            "middlewares takes a list of middlewares, not one; write middlewares=[...]"
        )
    if not isinstance(middlewares, Iterable):
        raise AgentConfigError(
            f"middlewares must be a list of AgentMiddleware objects (got {middlewares!r})"
        )
    checked: list[AgentMiddleware] = []
    for item in tuple(middlewares):
        if not isinstance(item, AgentMiddleware):
            raise AgentConfigError(
                f"middleware {item!r} is not an AgentMiddleware: subclass "
                "agentkit.AgentMiddleware and override the hooks you need"
            )
        checked.append(item)
    return tuple(checked)


def tool_timeouts(tools: Mapping[str, BaseTool], default: float | None) -> dict[str, float]:
    """The time limit of each tool: its own (``@tool(timeout=...)``), else ``default``."""
    limits: dict[str, float] = {}
    for name, item in tools.items():
        own = item.timeout if isinstance(item, FunctionTool) else None
        limit = own if own is not None else default
        if limit is not None:
            limits[name] = limit
    return limits


def apply_before_agent(
    config: ReactConfig, agent_name: str, instruction: str, messages: list[Message], resumed: bool
) -> tuple[ReactConfig, str, list[Message]]:
    """Run the ``before_agent`` hooks; return the run's configuration, instruction and input."""
    hooks = [m for m in config.middlewares if _overrides(m, "before_agent")]
    if not hooks:
        return config, instruction, messages
    tools = list(config.tools.values())
    context = AgentContext(
        agent_name=agent_name,
        instruction=instruction,
        tools=list(tools),
        messages=list(messages),
        resumed=resumed,
    )
    for middleware in hooks:
        middleware.before_agent(context)
    if context.tools != tools:
        by_name: dict[str, BaseTool] = {}
        for item in context.tools:
            by_name[item.info().name] = item
        model = config.base_model
        if by_name:
            model = model.with_tools([item.info() for item in by_name.values()])
        config = attrs.evolve(
            config,
            tools=by_name,
            model=model,
            tool_timeouts=tool_timeouts(by_name, config.tool_timeout),
        )
    return config, context.instruction, list(context.messages)


def apply_after_agent(
    config: ReactConfig, run: AgentRun, messages: list[Message], final: Message
) -> None:
    """Run the ``after_agent`` hooks (innermost first) of a run that ended with ``final``."""
    hooks = [m for m in reversed(config.middlewares) if _overrides(m, "after_agent")]
    if not hooks:
        return
    start = 0
    while start < len(messages) and messages[start].role is Role.SYSTEM:
        start += 1
    conversation = messages[start:]
    if not conversation or conversation[-1] != final:
        conversation.append(final)  # a model answer without tools is not kept in the loop
    context = AgentContext(
        agent_name=config.name,
        instruction=config.instruction,
        tools=list(config.tools.values()),
        messages=list(conversation),
        resumed=run.resume_info is not None,
    )
    for middleware in hooks:
        middleware.after_agent(context, list(conversation))


# --- one id per call -----------------------------------------------------------------------------
# A call's id is its name: the history pairs it with its result, and the interrupt address
# ``tool:<name>:<call id>`` is where an approval or an interrupt of that call is decided. A model
# that gives two calls of one reply the same id (or none) would make them one point: one approval
# request, and approving it would run both. Later calls that repeat an id get a derived one,
# ``<id>#2``, ``<id>#3``..., in the reply itself, so the history, the events, the tool results and
# the addresses all carry it.


def _derived(call_id: str, used: set[str]) -> str:
    number = 2
    while f"{call_id}#{number}" in used:
        number += 1
    derived = f"{call_id}#{number}"
    used.add(derived)
    return derived


def unique_call_ids(message: Message) -> Message:
    """``message`` with every tool call id unique: a repeated id becomes ``<id>#<n>``.

    The first call with an id keeps it. Returns ``message`` itself when its ids are unique.
    """
    calls = message.tool_calls
    if len(calls) < 2:
        return message
    ids = [call.id for call in calls]
    if len(set(ids)) == len(ids):
        return message
    used = set(ids)
    seen: set[str] = set()
    fixed: list[ToolCall] = []
    for call in calls:
        if call.id in seen:
            call = attrs.evolve(call, id=_derived(call.id, used))
        seen.add(call.id)
        fixed.append(call)
    return attrs.evolve(message, tool_calls=fixed)


class UniqueCallIds(StreamReader[Message]):
    """A model's reply stream with every tool call id unique (see :func:`unique_call_ids`).

    A streamed call comes in fragments sharing an ``index``; its id is in the first fragment
    (some servers repeat it in every one). A fragment whose index already has an id carries that
    id; a new index whose id an earlier call has gets a derived id. Fragments without an index
    are calls of their own. Chunks without tool calls pass as they are.
    """

    __slots__ = ("_by_index", "_seen", "_source")

    def __init__(self, source: StreamReader[Message]) -> None:
        self._copied = False  # StreamReader.__init__, written out (one per model call)
        self._source = source
        self._by_index: dict[int, str] = {}
        self._seen: set[str] = set()

    def _recv(self) -> Message:
        chunk = self._source._recv()
        return self._fix(chunk) if chunk.tool_calls else chunk

    def _recv_batch(self) -> list[Message]:
        # Most fragments are a call's later pieces (no id, an index): they stay as they are,
        # and are passed over here without a call per chunk. A list of the source's is
        # never changed: a batch with a chunk to fix is copied.
        batch = self._source._recv_batch()
        fixed: list[Message] | None = None
        for position, chunk in enumerate(batch):
            for call in chunk.tool_calls:
                if call.id or call.index is None:
                    if fixed is None:
                        fixed = list(batch)
                    fixed[position] = self._fix(chunk)
                    break
        return batch if fixed is None else fixed

    def close(self) -> None:
        self._source.close()

    def _fix(self, chunk: Message) -> Message:
        fixed: list[ToolCall] | None = None
        for position, call in enumerate(chunk.tool_calls):
            if not call.id and call.index is not None:
                continue  # a later fragment of a call: _id_of keeps its empty id
            wanted = self._id_of(call)
            if wanted == call.id:
                continue
            if fixed is None:
                fixed = list(chunk.tool_calls)
            fixed[position] = attrs.evolve(call, id=wanted)
        return chunk if fixed is None else attrs.evolve(chunk, tool_calls=fixed)

    def _id_of(self, call: ToolCall) -> str:
        index = call.index
        if index is not None:
            known = self._by_index.get(index)
            if known is not None:
                return known if call.id else call.id
            if not call.id:
                return call.id  # the id comes in a later fragment
        call_id = call.id
        if call_id in self._seen:
            call_id = _derived(call_id, self._seen)
        self._seen.add(call_id)
        if index is not None:
            self._by_index[index] = call_id
        return call_id


# --- one model call ------------------------------------------------------------------------------


class ModelCaller:
    """The model calls of one agent in one run: streamed, cancellable, counted, reported.

    :meth:`call` makes one call. A streamed run delivers the reply's stream as an event as it
    arrives (``show`` may change what the user sees of it; a retried run marks the streams of
    rejected attempts) and concatenates it; a cancel closes the stream. Every call is counted
    once, in the run's usage ledger (which ``RunResult.usage`` reads), and reported to the
    callback handlers that watch models (``on_model_start``/``on_model_end``, which tracing and
    ``UsageTracker`` use): one count, three readers. In a run with limits, the ledger counts
    the call before it starts, or refuses it with :class:`~agentkit.RunLimitError` once a
    limit is reached.
    """

    __slots__ = ("agent_name", "budget", "emit", "handlers", "info", "scope", "show",
                 "streaming", "usage", "verdicts")

    def __init__(
        self,
        run: AgentRun,
        agent_name: str,
        model: Any,
        *,
        streaming: bool | None = None,
        verdicts: StreamVerdicts | None = None,
        show: Callable[[StreamReader[Message]], StreamReader[Message]] | None = None,
    ) -> None:
        frame = frame_of(run)
        self.agent_name = agent_name
        self.emit = run.emit
        self.scope = frame.scope
        self.streaming = run.streaming if streaming is None else streaming
        self.usage = frame.observers.usage
        # The ledger again, when the run has limits to check before each call.
        self.budget: UsageLedger | None = self.usage if self.usage.limits is not None else None
        self.verdicts = verdicts
        self.show = show
        callbacks = frame.observers.callbacks
        handlers = callbacks.for_agent(agent_name) if callbacks is not None else ()
        self.handlers = tuple(h for h in handlers if _has(h, _MODEL_CALLBACKS)) if handlers else ()
        self.info: RunInfo | None = None
        if self.handlers:
            self.info = RunInfo(
                name=_model_name(model),
                type=type(model).__name__,
                component="ChatModel",
                run_path=tuple(str(step) for step in frame.run_path),
                agent_name=agent_name,
                invocation_id=run.invocation_id,
            )

    def call(self, model: Any, messages: list[Message], options: ModelOptions | None) -> Message:
        """One call of ``model`` on ``messages``; returns the (whole) reply.

        Raises:
            RunLimitError: the run reached one of its limits (the call is not made).
        """
        budget = self.budget
        if budget is None:
            return self._reported(model, messages, options)
        # Reserved before the call from its request, given back once its usage is counted:
        # parallel calls cannot together spend past a token or cost limit.
        max_tokens = None if options is None else options.max_tokens
        pricing = getattr(model, "pricing", None)
        estimate = CallEstimate.of(self.agent_name, messages, max_tokens, pricing)
        reservation = budget.begin("model_calls", estimate, self.scope)
        if reservation is None:
            return self._reported(model, messages, options)
        answered = False
        try:
            reply = self._reported(model, messages, options)
            answered = True
            return reply
        finally:
            budget.release(reservation, estimate, answered)

    def _reported(
        self, model: Any, messages: list[Message], options: ModelOptions | None
    ) -> Message:
        handlers = self.handlers
        if not handlers:
            return self._counted(model, messages, options)
        fire(handlers, "on_model_start", self.info, messages)
        try:
            reply = self._counted(model, messages, options)
        except BaseException as error:
            fire(handlers, "on_model_end", self.info, None, error)
            raise
        fire(handlers, "on_model_end", self.info, reply, None)
        return reply

    def _counted(
        self, model: Any, messages: list[Message], options: ModelOptions | None
    ) -> Message:
        if self.streaming:
            reply = self._stream(model, messages, options)
        else:
            reply = model.generate(messages, options)
            if len(reply.tool_calls) > 1:
                reply = unique_call_ids(reply)
            scope = self.scope
            if scope.stopping:
                # Cancelled while the model was answering: the answer is not delivered, and a
                # resumed run makes the call again.
                scope.check()
        meta = reply.response_meta
        if meta is not None and (meta.usage is not None or meta.cost is not None):
            self.usage.add(self.agent_name, meta.usage or _NO_USAGE, meta.cost)
        return reply

    def _stream(
        self, model: Any, messages: list[Message], options: ModelOptions | None
    ) -> Message:
        scope = self.scope
        stream: StreamReader[Message] = UniqueCallIds(model.stream(messages, options))
        scope.open(stream)  # an immediate cancel closes it
        try:
            for_user, for_self = stream.copy(2)
            if self.verdicts is not None:
                for_user = self.verdicts.guard(for_user)
            if self.show is not None:
                for_user = self.show(for_user)
            self.emit(event_from_message(None, for_user, Role.ASSISTANT))
            try:
                reply = concat_message_stream(for_self)
                if scope.stopping:
                    scope.check()  # cut short by the cancel: not an answer
            except Exception as error:
                scope.check_failure(error)  # the stream closed by a cancel: cancelled
                raise
        finally:
            scope.closed(stream)
        return reply


_NO_USAGE = TokenUsage()
"""Counted for a reply that has a cost but reports no tokens."""


def limit_pause(run: AgentRun, reached: RunLimitError, state: Any) -> AgentEvent | None:
    """The interrupt that pauses the agent of ``run`` on the limit it ``reached``, or ``None``
    (after saving ``state`` as where it stopped) when the run cannot pause.

    The agent itself is the interrupt's root cause, with a :class:`~agentkit.LimitReached` as
    its info and ``state`` as what it needs to make the refused call when resumed. A run pauses
    when it has a checkpoint to be saved in (``UsageLedger.pausable``); emit the event as the
    agent's last one.
    """
    if not frame_of(run).observers.usage.pausable:
        run.save_state(state, flush=False)
        return None
    info = LimitReached(reached.limit, reached.used, reached.allowed)
    run.save_state(state, info=info, root_cause=True, flush=False)
    return AgentEvent(action=AgentAction(interrupted=InterruptInfo()))


def _model_name(model: Any) -> str:
    """The model's name for traces: its ``model`` attribute when a string, else its class."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else type(model).__name__


# --- middleware and retry ------------------------------------------------------------------------

_HOOKS = (
    "before_model",
    "after_model",
    "wrap_model",
    "wrap_tool_call",
    "wrap_stream_tool_call",
    "wrap_content_tool_call",
    "wrap_stream_content_tool_call",
)
_MODEL_CALLBACKS = ("on_model_start", "on_model_end")
_TOOL_CALLBACKS = ("on_tool_start", "on_tool_end")


def _overrides(middleware: AgentMiddleware, method: str) -> bool:
    return getattr(type(middleware), method) is not getattr(AgentMiddleware, method)


def _overrides_any(middleware: AgentMiddleware) -> bool:
    """Whether ``middleware`` has a per-call hook (others cost nothing at all)."""
    return any(_overrides(middleware, method) for method in _HOOKS)


def _has(handler: object, methods: tuple[str, ...]) -> bool:
    """Whether a callback handler has one of ``methods``."""
    return any(callable(getattr(handler, method, None)) for method in methods)


class ReactHooks:
    """Middleware, tool callbacks and model retry of one run, composed once."""

    __slots__ = (
        "after_model",
        "before_model",
        "content_wraps",
        "handlers",
        "model",
        "model_chain",
        "pending",
        "persisted",
        "run",
        "stream_content_wraps",
        "stream_wraps",
        "tool_infos",
        "tool_run_infos",
        "tool_wraps",
    )

    def __init__(
        self,
        run: ReactRun,
        middlewares: Sequence[AgentMiddleware],
        handlers: tuple[object, ...],
        retry: ModelRetryConfig | None,
    ) -> None:
        self.run = run
        self.handlers = handlers  # those that watch tool calls
        self.model = run.config.model
        self.tool_infos: list[ToolInfo] = [tool.info() for tool in run.config.tools.values()]
        self.before_model = [m for m in middlewares if _overrides(m, "before_model")]
        self.after_model = [m for m in reversed(middlewares) if _overrides(m, "after_model")]
        self.tool_wraps = [m for m in middlewares if _overrides(m, "wrap_tool_call")]
        self.stream_wraps = [m for m in middlewares if _overrides(m, "wrap_stream_tool_call")]
        self.content_wraps = [m for m in middlewares if _overrides(m, "wrap_content_tool_call")]
        self.stream_content_wraps = [
            m for m in middlewares if _overrides(m, "wrap_stream_content_tool_call")
        ]
        self.tool_run_infos: dict[str, RunInfo] = {}  # per tool name (same in every call)
        self.pending = False  # a ModelEventSender layer is to send this step's reply
        # The conversation a retry decision replaced the agent's with, during a model call.
        self.persisted: list[Message] | None = None
        chain: ModelCallable = self._call_model
        for middleware in reversed(middlewares):
            if isinstance(middleware, ModelEventSender):
                chain = self._sender(chain)
            elif _overrides(middleware, "wrap_model"):
                chain = middleware.wrap_model(chain)
        if retry is not None:
            chain = retry.wrap(chain, run.config.name, run.caller.verdicts, self._persist)
        self.model_chain = chain

    @classmethod
    def build(cls, run: ReactRun) -> ReactHooks | None:
        """The hooks of ``run``, or ``None`` when it has none."""
        config = run.config
        callbacks = run.frame.observers.callbacks
        handlers = callbacks.for_agent(config.name) if callbacks is not None else ()
        if handlers:
            # Handlers that watch models only (or agents only) need nothing per tool call.
            handlers = tuple(h for h in handlers if _has(h, _TOOL_CALLBACKS))
        middlewares = (
            [m for m in config.middlewares if _overrides_any(m)] if config.middlewares else []
        )
        if not middlewares and not handlers and config.model_retry is None:
            return None
        return cls(run, middlewares, handlers, config.model_retry)

    # --- model calls ---

    def call_model(self, messages: list[Message], emit: bool = True) -> Message:
        """One model step: hooks, the wrapped call, the event (a whole reply only with
        ``emit``); returns the reply to act on."""
        run = self.run
        state: ModelState | None = None
        if self.before_model:
            # The state holds the conversation itself: what the hooks change is kept.
            state = ModelState(run.config.name, messages, list(self.tool_infos))
            for middleware in self.before_model:
                middleware.before_model(state)
            if state.messages is not messages:
                messages[:] = state.messages
            if _changed(state.tools, self.tool_infos):
                self.tool_infos = list(state.tools)
                base = run.config.base_model
                self.model = base.with_tools(self.tool_infos) if self.tool_infos else base
        self.pending = emit
        try:
            reply = self.model_chain(list(messages), run.model_options)
        finally:
            persisted = self.persisted
            if persisted is not None:
                # RetryDecision(persist_input_messages=True): the conversation the retries went
                # on with is the agent's from now on, also when the call then failed (a stop
                # saves it; a resumed run goes on with it).
                self.persisted = None
                messages[:] = persisted
        if not isinstance(reply, Message):
            raise AgentKitTypeError(
                f"a wrap_model layer of agent {run.config.name!r} returned "
                f"{type(reply).__name__}, not a Message"
            )
        if self.pending:
            reply = self._send(reply)
        elif emit and not run.streaming:
            reply = unique_call_ids(reply)  # a ModelEventSender sent the event
        if self.after_model:
            if state is None:
                state = ModelState(run.config.name, messages, list(self.tool_infos))
            for middleware in self.after_model:
                reply = middleware.after_model(state, reply)
                if not isinstance(reply, Message):
                    raise AgentKitTypeError(
                        f"{type(middleware).__name__}.after_model returned "
                        f"{type(reply).__name__}; return the Message the agent should go on with"
                    )
        return reply

    def _call_model(self, messages: list[Message], options: ModelOptions | None) -> Message:
        return self.run.caller.call(self.model, messages, options)

    def _persist(self, messages: list[Message]) -> None:
        self.persisted = messages

    def _send(self, reply: Message) -> Message:
        """Check ``reply`` and send its event (a whole reply's); return it as sent."""
        run = self.run
        self.pending = False
        if run.guards is not None:
            run.check_answer(reply)
        if not run.streaming:
            # A wrap_model layer may have made the reply: its calls get one id each too.
            reply = unique_call_ids(reply)
            run.send_reply(reply)
        return reply

    def _sender(self, inner: ModelCallable) -> ModelCallable:
        """The layer of a :class:`~agentkit.middleware.ModelEventSender`: the event of the
        step's reply is sent here, the first time one passes."""

        def call(messages: list[Message], options: ModelOptions | None) -> Message:
            reply = inner(messages, options)
            if self.pending and not self.run.streaming and isinstance(reply, Message):
                reply = self._send(reply)  # the answer guards check what the event shows
            return reply

        return call

    # --- tool calls ---

    def invoke_tool(
        self,
        tool: BaseTool,
        call: ToolCall,
        use_stream: bool,
        call_frame: ToolCallFrame,
        index: int,
        put: Callable[[ToolItem], object],
    ) -> tuple[Message, bool]:
        """Run one tool call through the middlewares; return its message and whether its
        event was streamed already (a short-circuited call's was not)."""
        run = self.run
        name = call.function.name
        handlers = self.handlers
        runnable = tool  # the tool seen through the stream or content layers, if any
        if not use_stream:
            wrapped = self.content_wraps
        elif _streams_content(tool):
            wrapped = self.stream_content_wraps
        else:
            wrapped = self.stream_wraps
        if wrapped and (use_stream or _is_content_tool(tool)):
            runnable = WrappedTool(
                tool, call, self.stream_wraps, self.content_wraps, self.stream_content_wraps
            )
        if not self.tool_wraps and not handlers:
            return run.invoke(runnable, call, use_stream, call_frame, index, put), use_stream
        streamed = False
        result: Message | None = None
        original = ToolCallInfo.from_tool_call(call)

        def innermost(info: ToolCallInfo) -> str:
            nonlocal streamed, result
            actual = call if info is original else _tool_call(call, info)
            if not handlers:
                result = run.invoke(runnable, actual, use_stream, call_frame, index, put)
                streamed = use_stream
                return result.content
            run_info = self._tool_run_info(tool, name)
            fire(handlers, "on_tool_start", run_info, info)
            try:
                message = run.invoke(runnable, actual, use_stream, call_frame, index, put)
            except BaseException as error:
                fire(handlers, "on_tool_end", run_info, info, None, error)
                raise
            streamed = use_stream
            result = message
            fire(handlers, "on_tool_end", run_info, info, message.content, None)
            return message.content

        sent = False  # a ToolEventSender among the layers sent the call's event

        def send_event(inner: Callable[[ToolCallInfo], str]) -> Callable[[ToolCallInfo], str]:
            def invoke(info: ToolCallInfo) -> str:
                nonlocal sent
                text = inner(info)
                if not streamed and not sent:  # a streamed call's event went as it streamed
                    shown = _result_message(text, result, call)
                    shown = run.config.tool_policy.limit(shown, run.config.name)
                    event = _message_event(shown, None, Role.TOOL, name, call_frame.action)
                    put(ToolItem(index, event=event))
                    sent = True
                return text

            return invoke

        invoke: Callable[[ToolCallInfo], str] = innermost
        for middleware in reversed(self.tool_wraps):
            if isinstance(middleware, ToolEventSender):
                invoke = send_event(invoke)
            else:
                invoke = _layer(middleware, invoke)
        text = invoke(original)
        if not isinstance(text, str):
            raise AgentKitTypeError(
                f"a wrap_tool_call layer returned {type(text).__name__} for tool {name!r}, "
                "not str"
            )
        return _result_message(text, result, call), streamed or sent

    def _tool_run_info(self, tool: BaseTool, name: str) -> RunInfo:
        run_info = self.tool_run_infos.get(name)
        if run_info is None:
            run_info = RunInfo(
                name=name,
                type=type(tool).__name__,
                component="Tool",
                run_path=tuple(str(step) for step in self.run.frame.run_path),
                agent_name=self.run.config.name,
                invocation_id=self.run.run.invocation_id,
            )
            self.tool_run_infos[name] = run_info
        return run_info


def _changed(tools: list[ToolInfo], before: list[ToolInfo]) -> bool:
    """Whether a hook replaced, added or removed tools (by identity: cheap, and exact)."""
    return len(tools) != len(before) or any(a is not b for a, b in zip(tools, before, strict=True))


def _result_message(text: str, result: Message | None, call: ToolCall) -> Message:
    """The message of a call whose layers returned ``text``: the tool's own message when they
    returned its text as it was (its parts kept), else a message of ``text``."""
    if result is not None and text is result.content:
        return result
    return tool_message(text, call.id, call.function.name)


def _layer(
    middleware: AgentMiddleware, inner: Callable[[ToolCallInfo], str]
) -> Callable[[ToolCallInfo], str]:
    def invoke(info: ToolCallInfo) -> str:
        return middleware.wrap_tool_call(info, inner)

    return invoke


def _tool_call(call: ToolCall, info: ToolCallInfo) -> ToolCall:
    """``call`` with the arguments a middleware may have changed."""
    if isinstance(info.arguments, str):
        arguments = info.arguments
        if arguments == call.function.arguments:
            return call
    else:
        original = ToolCallInfo.from_tool_call(call)
        if original.arguments == info.arguments:
            return call
        arguments = json.dumps(info.arguments, ensure_ascii=False)
    return ToolCall(
        id=call.id,
        function=FunctionCall(call.function.name, arguments),
        type=call.type,
        index=call.index,
    )


# --- the run -------------------------------------------------------------------------------------


class ReactRun:
    """One run of a ChatModelAgent: everything that is per run, nothing kept afterwards."""

    __slots__ = (
        "caller",
        "config",
        "corrections",
        "durable",
        "emit",
        "failures",
        "frame",
        "guards",
        "hooks",
        "locals",
        "model_options",
        "model_pending",
        "round",
        "run",
        "saving",
        "scope",
        "shared",
        "streaming",
        "tool_options",
        "typed_output",
        "unsent",
    )

    def __init__(self, config: ReactConfig, run: AgentRun, streaming: bool) -> None:
        self.config = config
        frame = frame_of(run)
        self.frame = frame
        self.scope = frame.scope
        self.run = run
        self.emit = run.emit
        self.streaming = streaming
        agent_options = run.options
        self.model_options = agent_options.model_options
        # --- structured output (see _structured.py) ---
        self.corrections = 0
        self.typed_output: tuple[Any] | None = None  # (value,) once a valid answer was given
        if config.structured is not None:
            self.model_options = config.structured.model_options(self.model_options)
            self.corrections = config.structured.max_corrections
        self.tool_options = agent_options.tool_options
        self.round: ToolRoundState | None = None  # the tool round in progress
        self.model_pending = False  # a model call is in progress
        # A durable run (durability="step") writes each declared step before it goes on: the
        # loop declares at every step, and shows its replies and results only once their step
        # is written (see AgentRun.durable). Any run declares where it stops.
        self.durable = run.durable
        # Orders the declarations of the agent's thread and its tool threads: a later one
        # holds all an earlier one did (a started call is never written as not started).
        self.saving = threading.Lock()
        # A durable run's reply event, recorded but sent only once its step is written.
        self.unsent: AgentEvent | None = None
        # This agent's guardrails and those the agents above hand down (None: none at all);
        # the agents this one runs as tools get its own too, unless it keeps them.
        own = config.guardrails
        self.guards = Guardrails.inheriting(config.name, own, frame.guardrails)
        self.shared = own.items if own is not None and config.share_guardrails else ()
        # The texts of failed tool calls, how often each came back (oldest first), to quote
        # when the run exceeds max_iterations.
        self.failures: dict[str, int] = {}
        # A streamed run that retries model calls marks the streams of rejected attempts.
        retrying = streaming and config.model_retry is not None
        self.caller = ModelCaller(
            run,
            config.name,
            config.base_model,
            streaming=streaming,
            verdicts=StreamVerdicts() if retrying else None,
        )
        self.hooks = ReactHooks.build(self)  # None: no middleware, tool callback or retry
        self.locals: RunLocals | None = None  # while the loop runs

    def loop(self, state: ReactState, pending_round: ToolRoundState | None) -> None:
        """Run the ReAct loop; on a stop, save where the run can go on from."""
        # Kept on the run only while the loop runs: RunLocals holds self.emit, and a lasting
        # reference back would make a cycle that keeps the run's whole history alive until the
        # garbage collector. A resumed run starts with the values its saved state kept.
        local = RunLocals(self.emit, pending_round.run_locals if pending_round else None)
        self.locals = local
        token = run_locals.set(local)
        try:
            self._loop(state, pending_round)
        except InterruptSignal:
            # The interrupting tools recorded their points; this one finishes the round later.
            self._save(state, flush=False)
            self._send_unsent()  # a held reply goes first, as it came first
            self.emit(AgentEvent(action=AgentAction(interrupted=InterruptInfo())))
        except RunLimitError as reached:
            # A limit stopped the next model or tool call: a run with a checkpoint pauses here
            # (resumed, the agent makes that call), the others end.
            with self.saving:
                pause = limit_pause(self.run, reached, self._progress(state))
            if pause is None:
                raise
            self._send_unsent()
            self.emit(pause)
        except Exception:
            # Cancelled or failed: keep the last safe point (after the last finished model or
            # tool call), so that resuming retries from there and runs no finished tool again.
            self._save(state, flush=False)
            raise
        finally:
            try:
                local.end()  # what the run's middleware started ends with it
            finally:
                run_locals.reset(token)
                self.locals = None
                self._send_unsent()  # a reply no commit followed (the run stopped): as it was

    def _progress(self, state: ReactState) -> ToolRoundState:
        current = self.round
        if current is not None:
            return self._snapshot(current)
        remaining = state.remaining + (1 if self.model_pending else 0)
        return ToolRoundState(
            messages=list(state.messages), remaining=remaining, calls=[],
            run_locals=self._run_locals(),
        )

    def _snapshot(self, round_state: ToolRoundState) -> ToolRoundState:
        """A copy of ``round_state`` to declare, with the run-local values as they are now."""
        snapshot = round_state.snapshot()
        snapshot.run_locals = self._run_locals()
        return snapshot

    def _run_locals(self) -> dict[str, Any]:
        local = self.locals
        return local.snapshot() if local is not None else {}

    def _save(
        self,
        state: ReactState,
        *,
        finished: bool = False,
        completed: tuple[str, ...] = (),
        flush: bool = True,
    ) -> None:
        """Declare where this run is (``AgentRun.save_state``), then send the reply held for
        it (if any).

        ``finished``: the agent answered; a resumed run ends its turn at once. ``completed``:
        the segments of the tool calls that finished (what they saved is dropped).
        ``flush=False``: a stop (its save writes it).
        """
        with self.saving:
            snapshot = self._progress(state)
            snapshot.finished = finished
            self.run.save_state(snapshot, completed=completed, flush=flush)
        if flush:
            self._send_unsent()

    def _save_start(self, round_state: ToolRoundState, index: int) -> None:
        """The call at ``index`` of the round starts (a durable run, a tool that is not
        idempotent): declare it started, written to the disk before it runs, so a resumed run
        asks before running it again (:class:`~agentkit.UnfinishedToolCall`)."""
        with self.saving:
            round_state.started.add(index)
            self.run.save_state(self._snapshot(round_state), sync=True)

    def _send_unsent(self) -> None:
        """Send the reply event held until its step was committed (if any)."""
        unsent = self.unsent
        if unsent is not None:
            self.unsent = None
            send_recorded(self.run, unsent)

    def _call_done(self, state: ReactState, round_state: ToolRoundState, index: int) -> None:
        """A call of the round finished (its result is in ``round_state.done``): commit it."""
        call = round_state.calls[index]
        self._save(state, completed=(f"tool:{call.function.name}:{call.id}",))

    def _loop(self, state: ReactState, pending_round: ToolRoundState | None) -> None:
        scope = self.scope
        final: Message | None = None
        answered = False  # the model gave the final answer (not a return-directly tool)
        # In a durable run the loop declares its state after each model reply that calls
        # tools, each finished call and its answer, and the Runner's writer writes what
        # changed since the previous one. Otherwise only the stop declares (see loop): a
        # declaration kept in memory would be replaced by it anyway, and a step should not
        # pay for a copy of the conversation nobody reads.
        if pending_round is not None:
            self.round = pending_round
            final = self.tool_round(state, pending_round)
            self.round = None
            if final is None:
                scope.check(Point.AFTER_TOOL_CALLS)
        elif self.guards is not None and self.guards.input:
            # A fresh turn: the input checks run before the first model call, not beside it,
            # so that a tripped input costs no model call.
            self.guards.check_input(state.messages)
        while final is None:
            scope.check()
            self._take_sent(state)
            final, answered = self._step(state)
        output_key = self.config.output_key
        if output_key is not None and self.frame.session is not None:
            typed = self.typed_output
            # With output_type, the key holds the typed value (the text otherwise).
            self.frame.session.set(output_key, final.content if typed is None else typed[0])
        if self.config.middlewares:
            apply_after_agent(self.config, self.run, state.messages, final)
        if answered and self.durable:
            # The answer (and its output key) is saved: a resumed run does not ask again.
            # A return-directly tool's result ends the turn with an action its parent acts on
            # (a transfer, an exit): that turn stays resumable from its tool round instead,
            # whose resume delivers the result again.
            self._save(state, finished=True)

    def _take_sent(self, state: ReactState) -> None:
        """Add the messages sent to the run (``RunIterator.send``) before the next model call.

        Here the conversation ends with the input or a finished tool round, never inside a
        tool call and its result. The emptied inbox is written with this agent's next step.
        """
        steering = self.frame.steering
        if steering is None:
            return
        for message in steering.take():
            state.messages.append(message)
            self.emit(event_from_message(message, None, Role.USER))

    def _step(self, state: ReactState) -> tuple[Message | None, bool]:
        """One model call and the tool round of its reply.

        Returns the final message (``None``: the loop goes on) and whether the model gave it
        (rather than a return-directly tool).
        """
        structured = self.config.structured
        if not self.config.tools:
            self.model_pending = True
            final: Message | None = self.call_model(state.messages, emit=structured is None)
            self.model_pending = False
            if structured is not None and final is not None:
                state.messages.append(final)
                final = self._structured_answer(final, state)
            return final, final is not None
        if state.remaining <= 0:
            raise ExceedMaxIterationsError(
                max_iterations=self.config.max_iterations,
                agent_name=self.config.name,
                tool_errors=list(self.failures.items())[-_QUOTED_FAILURES:],
            )
        state.remaining -= 1
        self.model_pending = True
        reply = self.call_model(state.messages, emit=structured is None)
        self.model_pending = False
        if structured is not None and structured.answer_of(reply) is not None:
            state.messages.append(reply)
            final = self._structured_answer(reply, state)
            return final, final is not None
        if structured is not None:
            self._emit_reply(reply)
        if self.hooks is not None:
            reply = unique_call_ids(reply)  # what middleware returned, too
        state.messages.append(reply)
        if not reply.tool_calls:
            return reply, True
        round_state = ToolRoundState(
            messages=list(state.messages),
            remaining=state.remaining,
            calls=list(reply.tool_calls),
        )
        self.round = round_state
        if self.durable:
            self._save(state)  # the reply is saved before any of its calls runs
        self.scope.check(Point.AFTER_CHAT_MODEL)
        final = self.tool_round(state, round_state)
        self.round = None
        if final is None:
            self.scope.check(Point.AFTER_TOOL_CALLS)
        return final, False

    # --- structured output (see _structured.py) ---

    def _structured_answer(self, reply: Message, state: ReactState) -> Message | None:
        """Check the answer ``reply`` gives: deliver it typed, or ask the model to correct it.

        Returns the final message, or ``None`` when a correction was sent (the loop goes on).
        """
        structured = self.config.structured
        assert structured is not None
        settled = structured.settle(reply, state.messages, self.streaming, self.corrections)
        if settled.answer is not None and self.guards is not None and self.guards.output:
            self.guards.check_output(settled.answer)  # before the answer is delivered
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
            self.send_reply(reply)

    def send_reply(self, reply: Message) -> None:
        """Deliver the whole ``reply``: at once, or (a durable run) in the history now and to
        readers once its step is committed, so that a crash before the commit (which asks the
        model again) leaves no reader with a reply the run does not have."""
        event = event_from_message(reply, None, Role.ASSISTANT)
        if not self.durable:
            self.emit(event)
            return
        self._send_unsent()
        self.unsent = record_event(self.run, event)

    # --- model calls ---

    def call_model(self, messages: list[Message], emit: bool = True) -> Message:
        """Call the model on ``messages`` (through the hooks, if any) and return its reply.

        A stream is always delivered as it arrives; a whole reply only with ``emit`` (structured
        output delivers it once it is checked).
        """
        if self.hooks is not None:
            return self.hooks.call_model(messages, emit)
        reply = self.caller.call(self.config.model, list(messages), self.model_options)
        if emit:
            if self.guards is not None:
                self.check_answer(reply)
            if not self.streaming:
                self.send_reply(reply)
        return reply

    def check_answer(self, reply: Message) -> None:
        """Run the output guardrails on ``reply`` if it is an answer (it calls no tool).

        Called before a whole reply is delivered; a streamed one was shown as it came.
        """
        guards = self.guards
        if guards is not None and guards.output and not reply.tool_calls:
            guards.check_output(reply)

    # --- the tool round ---

    def tool_round(self, state: ReactState, round_state: ToolRoundState) -> Message | None:
        """Run the tool calls of one model reply; return the final message if the run ends."""
        return_directly = self.config.return_directly
        return_directly_id = (
            return_directly_call(round_state.calls, return_directly) if return_directly else None
        )
        held_before = (
            None
            if return_directly_id is None
            else self._held_from_earlier_run(round_state, return_directly_id)
        )
        on_result = None
        if self.durable:

            def on_result(index: int) -> None:
                self._call_done(state, round_state, index)

        outcome = RoundOutcome(
            self.emit, round_state, return_directly_id, on_result,
            None if on_result is None else self.run,
        )
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
        final = outcome.finish(state, held_before)
        if outcome.failed:
            self._note_failures(outcome)
        return final

    def _note_failures(self, outcome: RoundOutcome) -> None:
        """Remember what the failed calls of a round told the model (the latest last)."""
        failures = self.failures
        for index in sorted(outcome.failed):
            text = outcome.results[index].content
            failures[text] = failures.pop(text, 0) + 1
        while len(failures) > _QUOTED_FAILURES:
            del failures[next(iter(failures))]

    def _run_concurrently(
        self, round_state: ToolRoundState, pending: list[int], handle: Callable[[ToolItem], None]
    ) -> None:
        """Run the ``pending`` calls on the run's pool; hand their reports to ``handle``.

        This thread delivers the outcomes as they arrive: events in completion order, each as
        soon as its call finished (so all calls run on the pool). An immediate cancel wakes the
        wait: the round stops waiting for calls that ignore the cancel (they are joined when
        the run ends; what they report later is dropped).
        """
        calls = round_state.calls
        resumed = round_state.resume_of
        history = round_state.messages
        inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        scope = self.scope
        waker = _Waker(inbox)
        scope.open(waker)
        try:
            for index in pending:
                scope.spawn(
                    self.call_tool_to_queue, calls[index], index, resumed.get(index), history,
                    inbox, name=f"agentkit-tool {calls[index].function.name}",
                )
            finished = 0
            while finished < len(pending):
                item = inbox.get()
                if item is None:
                    finished += 1
                elif item is _WOKEN:
                    scope.check()
                else:
                    handle(item)
        finally:
            scope.closed(waker)

    def _held_from_earlier_run(
        self, round_state: ToolRoundState, return_directly_id: str
    ) -> AgentEvent | None:
        """The held-back event of a return-directly call that finished before a resume.

        A return-directly call's event is delivered after its round; when another call of
        the round interrupted, the round ended before that, so the resumed round delivers it.
        """
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

    # --- one tool call ---

    def call_tool_to_queue(
        self,
        call: ToolCall,
        index: int,
        resume: PointResume | None,
        history: list[Message],
        inbox: queue.SimpleQueue[Any],
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
                self._check_not_targeted(call, resume)
                self._put_failure(policy.unknown_tool(call, self.config.tools), call, index, put)
                return
            if self.guards is not None:
                refusal = self.guards.refusal(call)
                if refusal is not None:  # blocked: not run, not counted; the model is told
                    self._put_failure(refusal, call, index, put)
                    return
            put = self._count_call(put)
            forward = None
            if self.config.emit_internal_events:

                def forward(event: AgentEvent) -> None:
                    put(ToolItem(index, event=event, forwarded=True))

            round_state = self.round
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
                call_key=RunKey.of_call(
                    frame.key,
                    frame.address,
                    name,
                    call.id,
                    frame.run_path,
                    round_state.remaining if round_state is not None else None,
                ),
            )
            tool_frame = frame.at_tool(call_frame).handing_down(self.shared)
            with use_frame(tool_frame):
                use_stream = streams(tool, self.streaming)
                if (
                    round_state is not None
                    and index in round_state.started
                    and not is_idempotent(tool)
                ):
                    # It started before the run stopped and did not finish: ask, or act on
                    # the answer (an interrupt or a bad answer ends the call here).
                    decided = self._unfinished(call, call_frame, tool_frame)
                    if isinstance(decided, str):
                        self._put_result(tool_message(decided, call.id, name), index, put)
                        return
                    call = decided
                try:
                    message, use_stream = self._run_call(
                        tool, call, index, use_stream, call_frame, put
                    )
                    if self.scope.stopping:
                        # Cancelled while the tool ran: its result is not delivered, and a
                        # resumed run calls it again.
                        self.scope.check()
                except InterruptSignal:
                    self._not_running(index)  # it stopped to ask
                    raise
                except (AgentCancelledError, RunLimitError, GuardrailTripped):
                    raise  # a cancel, a limit, a guardrail: the run's, not the tool's
                except Exception as error:
                    self._not_running(index)
                    # A failure caused by a cancel is the cancel, not the tool's error.
                    self.scope.check()
                    text = policy.failed(error, call)
                    # Handled: what stopped inside the call (an agent tool's inner run) is
                    # over, so nothing there is resumed.
                    call_run(tool_frame).discard_state()
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

    def _run_call(
        self,
        tool: BaseTool,
        call: ToolCall,
        index: int,
        use_stream: bool,
        call_frame: ToolCallFrame,
        put: Callable[[ToolItem], object],
    ) -> tuple[Message, bool]:
        """Run the call (through the hooks); return its message and whether it streamed.

        In a durable run, the start of a call whose tool is not idempotent is made durable
        (to the disk) before the tool runs.
        """
        if self.durable and self.round is not None and not is_idempotent(tool):
            self._save_start(self.round, index)
        if self.hooks is not None:
            return self.hooks.invoke_tool(tool, call, use_stream, call_frame, index, put)
        return self.invoke(tool, call, use_stream, call_frame, index, put), use_stream

    def _unfinished(
        self, call: ToolCall, call_frame: ToolCallFrame, tool_frame: RunFrame
    ) -> ToolCall | str:
        """A call that started before the run stopped and did not finish, of a tool that is not
        idempotent: interrupt with an :class:`~agentkit.UnfinishedToolCall`, or act on the
        decision the run was resumed with (the call to run, or the result to give instead)."""
        name = call.function.name
        parsed = ToolCallInfo.from_tool_call(call).arguments
        info = UnfinishedToolCall(
            tool_name=name,
            call_id=call.id,
            arguments=parsed if isinstance(parsed, dict) else {},
            key=call_frame.key(),
        )
        resume = call_frame.resume
        if (
            resume is not None
            and isinstance(resume.state, UnfinishedToolCall)
            and resume.is_resume_target
            and resume.has_data
        ):
            resume.has_data = False  # decided once
            try:
                arguments, text = unfinished_decision(info, call.function.arguments, resume.data)
            except ResumeError:
                resume_state = self.frame.resume
                if resume_state is not None:  # keep the question for a resume with an answer
                    resume_state.unreach((*self.frame.address, f"tool:{name}:{call.id}"))
                raise
            if arguments is None:
                return text
            if arguments == call.function.arguments:
                return call
            return attrs.evolve(call, function=FunctionCall(name, arguments))
        call_run(tool_frame).save_state(info, info=info, root_cause=True, flush=False)
        raise InterruptSignal(tool_frame.address)

    def _put_result(self, message: Message, index: int, put: Callable[[ToolItem], object]
                    ) -> None:
        """Report ``message`` as the result of the call at ``index`` (not run: decided)."""
        event = _message_event(message, None, Role.TOOL, message.tool_name)
        put(ToolItem(index, event=event, message=message, ran=False))

    def _count_call(self, put: Callable[[ToolItem], object]) -> Callable[[ToolItem], object]:
        """Count a tool call about to run against the run's limits (or raise
        :class:`~agentkit.RunLimitError`); returns the ``put`` that ends its count."""
        budget = self.caller.budget
        if budget is None:
            return put
        budget.begin("tool_calls")
        return CountedCall(budget, put).put

    def _not_running(self, index: int) -> None:
        """The call at ``index`` ended (it raised, or interrupted): it is not in flight."""
        round_state = self.round
        if round_state is not None:
            round_state.started.discard(index)

    def _check_not_targeted(self, call: ToolCall, resume: PointResume | None) -> None:
        """Refuse resume data for a call of a tool the agent does not have (any more).

        The run was resumed with a decision (an approval, an answer) for this call, but the
        code changed since the run stopped: dropping the decision silently would lose it.
        """
        if resume is None or not resume.is_resume_target or not resume.has_data:
            return
        name = call.function.name
        resume_state = self.frame.resume
        if resume_state is not None:  # the checkpoint keeps the decision for a fixed agent
            resume_state.unreach((*self.frame.address, f"tool:{name}:{call.id}"))
        tools = ", ".join(repr(known) for known in sorted(self.config.tools)) or "none"
        raise ResumeError(
            f"cannot resume: the resume data for the interrupt at tool {name!r} (call "
            f"{call.id!r}) of agent {self.config.name!r} targets a tool that agent "
            f"{self.config.name!r} does not have now (its tools: {tools}); the code changed "
            "since the run stopped. Give the agent its tool back to resume this run"
        )

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
            if _streams_content(tool):  # its chunks are parts: text, images, files, sounds
                parts = tool.stream_content(call.function.arguments, **self.tool_options)  # type: ignore[attr-defined]
                reader = content_message_stream(parts, call.id, name)
            else:
                chunks = tool.stream(call.function.arguments, **self.tool_options)  # type: ignore[attr-defined]
                reader = tool_message_stream(chunks, call.id, name)
            # The copies share the chunks: an image part is one object for every reader.
            for_user, for_history = reader.copy(2)
            event = _message_event(None, for_user, Role.TOOL, name, call_frame.action)
            put(ToolItem(index, event=event))
            return concat_message_stream(for_history)
        if _is_content_tool(tool):  # its result may hold images, files, sounds
            result: Any = tool.invoke_content(call.function.arguments, **self.tool_options)  # type: ignore[attr-defined]
        else:
            result = tool.invoke(call.function.arguments, **self.tool_options)  # type: ignore[attr-defined]
        if isinstance(result, tuple):  # content parts (text, images, files, sounds)
            return Message(Role.TOOL, tool_call_id=call.id, tool_name=name, parts=result)
        if not isinstance(result, str):
            raise AgentKitTypeError(
                f"tool {name!r} returned {type(result).__name__}, not str or a tuple of parts"
            )
        return tool_message(result, call.id, name)


_CONTENT_TOOL_TYPES: dict[type, bool] = {}


def _is_content_tool(tool: BaseTool) -> bool:
    """Whether ``tool`` is a :class:`~agentkit.tools.ContentTool`, decided once per class (a
    protocol ``isinstance`` check costs about 20 us, a tool call should not)."""
    kind = type(tool)
    known = _CONTENT_TOOL_TYPES.get(kind)
    if known is None:
        known = _CONTENT_TOOL_TYPES[kind] = isinstance(tool, ContentTool)
    return known


_STREAM_CONTENT_TOOL_TYPES: dict[type, bool] = {}


def _streams_content(tool: BaseTool) -> bool:
    """Whether a streamed call of ``tool`` (or of the tool a :class:`WrappedTool` wraps) is a
    :class:`~agentkit.tools.StreamableContentTool`'s, decided once per class."""
    if isinstance(tool, WrappedTool):
        tool = tool.tool
    kind = type(tool)
    known = _STREAM_CONTENT_TOOL_TYPES.get(kind)
    if known is None:
        known = _STREAM_CONTENT_TOOL_TYPES[kind] = isinstance(tool, StreamableContentTool)
    return known


_QUOTED_FAILURES = 3
"""How many distinct failed tool results ExceedMaxIterationsError quotes."""

_WOKEN: Any = object()
"""Put in a tool round's inbox when a cancel wakes the round (see :class:`_Waker`)."""


class _Waker:
    """Wakes a tool round's wait for its calls when the run is cancelled immediately."""

    __slots__ = ("inbox",)

    def __init__(self, inbox: queue.SimpleQueue[Any]) -> None:
        self.inbox = inbox

    def close(self) -> None:
        self.inbox.put(_WOKEN)


def streams(tool: BaseTool, streaming: bool) -> bool:
    """Whether a call of ``tool`` streams its result in a run that does (or does not)."""
    can_stream = callable(getattr(tool, "stream", None)) or _streams_content(tool)
    if not can_stream:
        return False
    if streaming:
        return True
    return not callable(getattr(tool, "invoke", None))


def tool_message_stream(
    chunks: StreamReader[str], call_id: str, name: str
) -> StreamReader[Message]:
    """A tool's text stream as a stream of tool-message chunks."""
    return stream_from_iterator(
        (tool_message(chunk, call_id, name) for chunk in chunks), on_close=chunks.close
    )


def content_message_stream(
    parts: StreamReader[ContentPart], call_id: str, name: str
) -> StreamReader[Message]:
    """A tool's stream of content parts as a stream of tool-message chunks: a text part as
    the chunk's text, any other part as its one part (the same object, not a copy)."""

    def chunks() -> Iterator[Message]:
        for part in parts:
            if isinstance(part, TextPart):
                yield tool_message(part.text, call_id, name)
            elif isinstance(part, (ImagePart, FilePart, AudioPart)):
                yield Message(Role.TOOL, tool_call_id=call_id, tool_name=name, parts=(part,))
            else:
                raise AgentKitTypeError(
                    f"tool {name!r} streamed {type(part).__name__}, not a content part; "
                    "stream_content yields TextPart, ImagePart, FilePart or AudioPart"
                )

    return stream_from_iterator(chunks(), on_close=parts.close)


# --- a tool round's reports ----------------------------------------------------------------------


class CountedCall:
    """One tool call counted against the run's limits; ends the count when the call reports
    its outcome (before the round sees it, so the step record of its result counts it).

    The call ran when it reports a message (a result, or a failure the model is told), unless
    the message was decided instead of running it; one that reports an error (an interrupt, a
    cancel, the run's failure) did not, and is counted again if it runs after a resume
    (:meth:`agentkit._observe.UsageLedger.end_tool_call`).
    """

    __slots__ = ("_budget", "_ended", "_put")

    def __init__(self, budget: UsageLedger, put: Callable[[ToolItem], object]) -> None:
        self._budget = budget
        self._put = put
        self._ended = False

    def end(self, ran: bool) -> None:
        """End the count once: ``ran`` says whether the call is counted."""
        if not self._ended:
            self._ended = True
            self._budget.end_tool_call(ran)

    def put(self, item: ToolItem) -> object:
        """Report ``item``, ending the count first when it is the call's outcome."""
        if not item.forwarded and (item.message is not None or item.error is not None):
            self.end(item.error is None and item.ran)
        return self._put(item)


@attrs.define(eq=False)
class ToolItem:
    """One report of a tool call to its round: an event, the call's message, or its error."""

    index: int
    event: AgentEvent | None = None
    message: Message | None = None
    error: BaseException | None = None
    forwarded: bool = False
    failed: bool = False  # the message tells the model how the call failed
    ran: bool = True  # False: the message was decided instead of running the call


def return_directly_call(calls: list[ToolCall], names: frozenset[str]) -> str | None:
    """The id of the last call of a return-directly tool among ``calls``, or ``None``."""
    found: str | None = None
    for call in calls:
        if call.function.name in names:
            found = call.id
    return found


def _record_into(run: AgentRun, event: AgentEvent, unsent: list[AgentEvent]) -> None:
    """Record ``event`` in ``run`` now; keep it in ``unsent`` to send after the commit."""
    recorded = record_event(run, event)
    if recorded is not None:
        unsent.append(recorded)


class RoundOutcome:
    """What the calls of one tool round reported so far (one round, the agent's thread only).

    It delivers events in completion order (holding back the event of a return-directly call
    until the round is over), keeps results in call order, and collects the errors and
    interrupts that end the round.
    """

    __slots__ = (
        "calls",
        "emit",
        "errors",
        "failed",
        "held",
        "on_result",
        "recording",
        "results",
        "return_directly_id",
        "round_state",
        "signals",
    )

    def __init__(
        self,
        emit: Callable[[AgentEvent], None],
        round_state: ToolRoundState,
        return_directly_id: str | None,
        on_result: Callable[[int], None] | None = None,
        recording: AgentRun | None = None,
    ) -> None:
        """``on_result(index)`` is called once each call's result is kept (a durable run
        commits it there, before anything else happens). With ``recording`` (the agent's run;
        a durable run), a call's own result event is recorded in that run at once but sent
        only after ``on_result``: no reader sees a result whose step a crash could undo."""
        self.emit = emit
        self.on_result = on_result
        self.recording = recording
        self.round_state = round_state
        self.calls = round_state.calls
        self.return_directly_id = return_directly_id
        # Calls finished before a resume count as done; their events were delivered then.
        self.results: dict[int, Message] = dict(round_state.done)
        self.held: AgentEvent | None = None  # the return-directly call's event, until the end
        self.errors: list[BaseException] = []
        self.signals: dict[int, InterruptSignal] = {}
        self.failed: set[int] = set()  # calls whose result tells the model how they failed

    def pending(self) -> list[int]:
        """The indexes of the calls that have no result yet, in call order."""
        return [index for index in range(len(self.calls)) if index not in self.results]

    def handle(self, item: ToolItem) -> None:
        """Take one report of a call: deliver its event, keep its result or its error."""
        event = item.event
        unsent: list[AgentEvent] = []
        if event is not None:
            run = self.recording
            if run is not None and item.message is not None and not item.forwarded:
                target: AgentRun = run
                self._deliver(item, event, lambda made: _record_into(target, made, unsent))
            else:
                self._deliver(item, event, self.emit)
            if not item.forwarded and event.action is not None:
                self.round_state.actions[item.index] = event.action
        if item.message is not None:
            self.results[item.index] = item.message
            self.round_state.done[item.index] = item.message
            if item.failed:
                self.failed.add(item.index)
            if self.on_result is not None:
                self.on_result(item.index)
        if unsent:
            run = self.recording
            assert run is not None
            for recorded in unsent:
                send_recorded(run, recorded)
        if item.error is not None:
            if isinstance(item.error, InterruptSignal):
                self.signals[item.index] = item.error
            else:
                self.errors.append(item.error)

    def _deliver(
        self, item: ToolItem, event: AgentEvent, emit: Callable[[AgentEvent], None]
    ) -> None:
        if (
            item.forwarded
            or not self.return_directly_id
            or self.calls[item.index].id != self.return_directly_id
        ):
            emit(event)
        elif not item.failed:
            self.held = event
        else:
            if self.held is not None:  # the call's stream, which broke
                emit(self.held)
                self.held = None
            emit(event)

    def raise_stop(self) -> None:
        """Raise what ends the round early: a call's error (not a cancel, if any), an interrupt.

        Of several interrupts, the first call's is raised (each recorded its own point).
        """
        if self.errors:
            for error in self.errors:
                if not isinstance(error, AgentCancelledError):
                    raise error
            raise self.errors[0]
        if self.signals:
            raise self.signals[min(self.signals)]

    def finish(self, state: ReactState, held_before: AgentEvent | None) -> Message | None:
        """Deliver the held event, extend the conversation; return the final message, if any.

        ``held_before`` is the event of a return-directly call that finished before a resume.
        A failed call of a return-directly tool (a transfer to nobody) ends nothing: the
        model gets to read what went wrong.
        """
        held = self.held if self.held is not None else held_before
        if held is not None:
            self.emit(held)
        results = self.results
        state.messages.extend([results[index] for index in range(len(self.calls))])
        if not self.return_directly_id:
            return None
        final = None
        for index, call in enumerate(self.calls):
            if call.id == self.return_directly_id:
                final = None if index in self.failed else results[index]
        return final


# --- tool time limits ----------------------------------------------------------------------------
# A call with a time limit runs on another thread of the run (``RunScope.spawn``). Python cannot
# kill a thread: a call that overruns its limit is *abandoned*. The agent stops waiting, the call
# fails with ToolTimeoutError, and the run lets go of the call's thread (``RunScope.release``):
# the run's end does not wait for it, and it ends when the call returns (a daemon thread, so it
# never keeps the process alive). Its cancel scope is cancelled at once, so a tool that calls
# check_cancelled() gets AgentCancelledError and one in cancellable_sleep() wakes with it.
# A call the cancel woke from a wait registered with the scope (an ``async def`` tool's task,
# an abort_on_cancel block) is ending: the agent waits for its cleanup, at most CLEANUP_WAIT
# seconds, before it goes on, as a cancel of the run does for an untimed call.
# Whatever the abandoned call does afterwards (events, results) is dropped. A tool that never
# returns and never checks keeps its thread until the process exits: give such tools their own
# way to give up.

CLEANUP_WAIT = 10.0  # seconds a timed-out call woken by its cancel may take to clean up


class AbandonablePut:
    """Forwards a tool call's reports until the call is abandoned, then drops them."""

    __slots__ = ("_abandoned", "_lock", "_put")

    def __init__(self, put: Callable[[Any], object]) -> None:
        self._put = put
        self._lock = threading.Lock()
        self._abandoned = False

    def __call__(self, item: Any) -> object:
        with self._lock:
            if self._abandoned:
                return None
            return self._put(item)

    def abandon(self) -> None:
        """Drop every later report (waits for a report in progress to be delivered)."""
        with self._lock:
            self._abandoned = True


class _Wake:
    """Registered with the run's scope: an immediate cancel of the run cancels the call."""

    __slots__ = ("call_scope", "done")

    def __init__(self, call_scope: RunScope, done: threading.Event) -> None:
        self.call_scope = call_scope
        self.done = done

    def close(self) -> None:
        self.call_scope.request_cancel(CancelMode.IMMEDIATE)
        self.done.set()


def call_with_timeout(
    fn: Callable[[], T],
    timeout: float,
    call: ToolCall,
    *,
    on_abandon: Callable[[], object],
) -> T:
    """Run ``fn()`` (a tool call) on a spawned thread and return its result within ``timeout``.

    The thread runs in the caller's run context with a cancel scope of its own (so that
    cancelling the abandoned call does not cancel the run); an immediate cancel of the run
    cancels it too and ends the wait at once (the call is abandoned then as well).

    Raises:
        ToolTimeoutError: the call took longer than ``timeout`` seconds (it is abandoned:
            ``on_abandon`` is called and its scope cancelled).
        AgentCancelledError: the run was cancelled immediately while waiting.
        BaseException: what ``fn`` raised.
    """
    frame = current_frame()
    if frame is None:
        raise AgentKitRuntimeError("tool time limits apply inside an agent run")
    run_scope = frame.scope
    call_scope = RunScope()
    call_frame = _with_scope(frame, call_scope)
    done = threading.Event()
    outcome: list[tuple[bool, Any]] = []  # (True, value) or (False, error), set before done

    def body() -> None:
        with use_frame(call_frame):
            try:
                outcome.append((True, fn()))
            except BaseException as error:  # carried to the waiting thread
                outcome.append((False, error))
            finally:
                done.set()
                call_scope.finish()

    wake = _Wake(call_scope, done)
    run_scope.open(wake)  # raises at once if the run is being cancelled
    try:
        spawned = run_scope.spawn(body, name=f"agentkit-tool {call.function.name} (timed)")
        done.wait(timeout)
    finally:
        run_scope.closed(wake)
    if outcome:
        ok, value = outcome[0]
        if ok:
            return value  # type: ignore[no-any-return]
        raise value
    on_abandon()
    call_scope.request_cancel(CancelMode.IMMEDIATE)
    try:
        if call_scope.woke_a_wait:  # the call is ending: let its cleanup run first
            futures.wait([spawned], CLEANUP_WAIT)
    finally:
        run_scope.release(spawned)  # the run's end does not wait for the abandoned call
    run_scope.check()  # the run was cancelled: that is the error, not the time limit
    name = call.function.name
    raise ToolTimeoutError(
        f"tool {name!r} (call {call.id or '-'}) did not finish within {timeout:g} seconds, so "
        "the agent stopped waiting for it; raise the limit with @tool(timeout=...) or "
        "ChatModelAgent(tool_timeout=...) if it needs longer",
        tool_name=name,
        call_id=call.id,
    )


def _with_scope(frame: RunFrame, scope: RunScope) -> RunFrame:
    return attrs.evolve(frame, scope=scope)
