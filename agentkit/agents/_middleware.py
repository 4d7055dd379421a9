"""The hooks of one ChatModelAgent run: middleware, callbacks and model retry, composed once.

:class:`ReactHooks` exists only for runs that need it (:meth:`ReactHooks.build` returns
``None`` otherwise), so a run without middleware, callback handlers or a retry policy takes
the ReAct loop's plain path.

Around one model call, outermost first: ``before_model`` hooks, model retry, ``wrap_model``
layers, callbacks, the model; then ``after_model`` hooks (reverse order). A non-streamed reply
is emitted after the retry (only the accepted reply), before ``after_model``. Around one tool
call: ``wrap_tool_call`` layers, the time limit, callbacks, the tool.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from agentkit._observe import CallbackSet, RunInfo, fire
from agentkit.agents._call_ids import unique_call_ids
from agentkit.agents._model_retry import ModelRetryConfig, StreamVerdicts
from agentkit.errors import AgentConfigError
from agentkit.events import AgentEvent, event_from_message
from agentkit.middleware import AgentContext, AgentMiddleware, ModelCallable, ModelState
from agentkit.schema import FunctionCall, Message, Role, ToolCall, tool_message
from agentkit.tools.base import BaseTool, ToolCallInfo
from agentkit.tools.function import FunctionTool

if TYPE_CHECKING:
    from agentkit._options import AgentRunOption
    from agentkit._runctx import RunFrame, ToolCallFrame
    from agentkit.agents._react_config import ReactConfig
    from agentkit.models.base import ModelOptions
    from agentkit.schema import ToolInfo

__all__ = [
    "HookedRun",
    "ReactHooks",
    "apply_before_agent",
    "checked_middlewares",
    "tool_timeouts",
]


class HookedRun(Protocol):
    """What the hooks use of the run they wrap (framework-internal); ``ReactRun`` is one.

    A protocol, so that this module sits below the ReAct loop that builds the hooks.
    """

    @property
    def config(self) -> ReactConfig:
        """The agent's configuration for this run."""

    @property
    def frame(self) -> RunFrame:
        """The run's frame."""

    @property
    def model_options(self) -> ModelOptions | None:
        """The run's model options."""

    @property
    def streaming(self) -> bool:
        """Whether the run streams model replies."""

    @property
    def verdicts(self) -> StreamVerdicts | None:
        """The streams a retried model call emitted (``None`` without a retry policy)."""

    def emit(self, event: AgentEvent) -> None:
        """Send ``event`` to the run's sink."""

    def model_call(
        self, model: Any, messages: list[Message], options: ModelOptions | None
    ) -> Message:
        """One call of ``model``."""

    def invoke(
        self,
        tool: BaseTool,
        call: ToolCall,
        use_stream: bool,
        call_frame: ToolCallFrame,
        index: int,
        put: Callable[[Any], object],
    ) -> Message:
        """One call of ``tool``; reports go to ``put``."""


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
    items: tuple[object, ...] = tuple(middlewares)
    checked: list[AgentMiddleware] = []
    for item in items:
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


def _overrides(middleware: AgentMiddleware, method: str) -> bool:
    return getattr(type(middleware), method) is not getattr(AgentMiddleware, method)


_HOOKS = ("before_model", "after_model", "wrap_model", "wrap_tool_call")


_CALL_CALLBACKS = ("on_model_start", "on_model_end", "on_tool_start", "on_tool_end")


def _observes_calls(handler: object) -> bool:
    """Whether a callback handler has a model or tool callback."""
    return any(callable(getattr(handler, method, None)) for method in _CALL_CALLBACKS)


def _overrides_any(middleware: AgentMiddleware) -> bool:
    """Whether ``middleware`` has a per-call hook (others cost nothing at all)."""
    return any(_overrides(middleware, method) for method in _HOOKS)


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


class ReactHooks:
    """Middleware, callbacks and retry of one run, composed once (framework-internal)."""

    __slots__ = (
        "after_model",
        "before_model",
        "handlers",
        "model",
        "model_chain",
        "model_info",
        "run",
        "tool_infos",
        "tool_run_infos",
        "tool_wraps",
    )

    def __init__(
        self,
        run: HookedRun,
        middlewares: Sequence[AgentMiddleware],
        handlers: tuple[object, ...],
        retry: ModelRetryConfig | None,
    ) -> None:
        self.run = run
        self.handlers = handlers
        self.model = run.config.model
        self.tool_infos: list[ToolInfo] = [tool.info() for tool in run.config.tools.values()]
        self.before_model = [m for m in middlewares if _overrides(m, "before_model")]
        self.after_model = [m for m in reversed(middlewares) if _overrides(m, "after_model")]
        self.tool_wraps = [m for m in middlewares if _overrides(m, "wrap_tool_call")]
        self.tool_run_infos: dict[str, RunInfo] = {}  # per tool name (same in every call)
        chain: ModelCallable = self._call_model_observed
        for middleware in reversed(middlewares):
            if _overrides(middleware, "wrap_model"):
                chain = middleware.wrap_model(chain)
        if retry is not None:
            chain = retry.wrap(chain, run.config.name, run.verdicts)
        self.model_chain = chain
        self.model_info = RunInfo(
            name=_model_name(run.config.base_model),
            type=type(run.config.base_model).__name__,
            component="ChatModel",
            run_path=tuple(str(step) for step in run.frame.run_path),
            agent_name=run.config.name,
        )

    @classmethod
    def build(cls, run: HookedRun, options: tuple[AgentRunOption, ...]) -> ReactHooks | None:
        """The hooks of ``run``, or ``None`` when it has none."""
        config = run.config
        observers = run.frame.observers
        callbacks = observers.callbacks if observers is not None else CallbackSet.from_options(
            options
        )
        handlers = callbacks.for_agent(config.name) if callbacks is not None else ()
        if handlers:
            # Handlers that observe only agents (on_agent_*) need nothing per call.
            handlers = tuple(handler for handler in handlers if _observes_calls(handler))
        middlewares = [m for m in config.middlewares if _overrides_any(m)]
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
        reply = self.model_chain(list(messages), run.model_options)
        if not isinstance(reply, Message):
            raise TypeError(
                f"a wrap_model layer of agent {run.config.name!r} returned "
                f"{type(reply).__name__}, not a Message"
            )
        if emit and not run.streaming:
            # A wrap_model layer may have made the reply: its calls get one id each too.
            reply = unique_call_ids(reply)
            run.emit(event_from_message(reply, None, Role.ASSISTANT))
        if self.after_model:
            if state is None:
                state = ModelState(run.config.name, messages, list(self.tool_infos))
            for middleware in self.after_model:
                reply = middleware.after_model(state, reply)
                if not isinstance(reply, Message):
                    raise TypeError(
                        f"{type(middleware).__name__}.after_model returned "
                        f"{type(reply).__name__}; return the Message the agent should go on with"
                    )
        return reply

    def _call_model_observed(
        self, messages: list[Message], options: ModelOptions | None
    ) -> Message:
        handlers = self.handlers
        if not handlers:
            return self.run.model_call(self.model, messages, options)
        info = self.model_info
        fire(handlers, "on_model_start", info, messages)
        try:
            reply = self.run.model_call(self.model, messages, options)
        except BaseException as error:
            fire(handlers, "on_model_end", info, None, error)
            raise
        fire(handlers, "on_model_end", info, reply, None)
        return reply

    # --- tool calls ---

    def invoke_tool(
        self,
        tool: BaseTool,
        call: ToolCall,
        use_stream: bool,
        call_frame: ToolCallFrame,
        index: int,
        put: Callable[[Any], object],
    ) -> tuple[Message, bool]:
        """Run one tool call through the middlewares; return its message and whether its
        event was streamed already (a short-circuited call's was not)."""
        run = self.run
        name = call.function.name
        handlers = self.handlers
        if not self.tool_wraps and not handlers:
            return run.invoke(tool, call, use_stream, call_frame, index, put), use_stream
        streamed = False
        result: Message | None = None
        original = ToolCallInfo.from_tool_call(call)

        def innermost(info: ToolCallInfo) -> str:
            nonlocal streamed, result
            actual = call if info is original else _tool_call(call, info)
            if not handlers:
                result = run.invoke(tool, actual, use_stream, call_frame, index, put)
                streamed = use_stream
                return result.content
            run_info = self.tool_run_infos.get(name)
            if run_info is None:
                run_info = RunInfo(
                    name=name,
                    type=type(tool).__name__,
                    component="Tool",
                    run_path=self.model_info.run_path,
                    agent_name=run.config.name,
                )
                self.tool_run_infos[name] = run_info
            fire(handlers, "on_tool_start", run_info, info)
            try:
                message = run.invoke(tool, actual, use_stream, call_frame, index, put)
            except BaseException as error:
                fire(handlers, "on_tool_end", run_info, info, None, error)
                raise
            streamed = use_stream
            result = message
            fire(handlers, "on_tool_end", run_info, info, message.content, None)
            return message.content

        invoke: Callable[[ToolCallInfo], str] = innermost
        for middleware in reversed(self.tool_wraps):
            invoke = _layer(middleware, invoke)
        text = invoke(original)
        if not isinstance(text, str):
            raise TypeError(
                f"a wrap_tool_call layer returned {type(text).__name__} for tool {name!r}, "
                "not str"
            )
        if result is not None and text is result.content:
            return result, streamed  # the tool's own message, as it made it
        return tool_message(text, call.id, name), streamed


def _changed(tools: list[ToolInfo], before: list[ToolInfo]) -> bool:
    """Whether a hook replaced, added or removed tools (by identity: cheap, and exact)."""
    return len(tools) != len(before) or any(a is not b for a, b in zip(tools, before, strict=True))


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


def _model_name(model: Any) -> str:
    """The model's name for traces: its ``model`` attribute when a string, else its class."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else type(model).__name__
