"""Callbacks: observe a run's agents, model calls and tool calls (:func:`with_callbacks`).

A handler is any object with some of these methods (missing ones are skipped)::

    on_agent_start(info: RunInfo, input: AgentInput)
    on_agent_end(info: RunInfo, error: BaseException | None)
    on_model_start(info: RunInfo, messages: list[Message])
    on_model_end(info: RunInfo, message: Message | None, error: BaseException | None)
    on_tool_start(info: RunInfo, call: ToolCallInfo)
    on_tool_end(info: RunInfo, call: ToolCallInfo, result: str | None, error: BaseException | None)

Threading contract: handlers are called synchronously, in the thread that runs what they
observe (the agent's thread for agent and model callbacks, the tool's thread for tool
callbacks; parallel branches and concurrent tool calls call them from several threads at
once, so a handler that keeps state must lock it). A start and its end are called in the same
thread and the same :mod:`contextvars` context, so a handler may set a context variable in a
start callback and reset it in the end one (this is how tracing nests spans). A slow handler
delays only the agent or tool call it observes. A handler that raises never breaks the run:
the exception is logged on ``logging.getLogger("agentkit")`` and the run goes on.

Agent callbacks fire once per agent turn, for every agent the flow runs (the Runner, transfers,
workflows, supervisors, agents used as tools), never twice for one agent however it is wrapped.
Model callbacks fire around each call of the chat model itself (``on_model_end`` sees the
token usage on ``message.response_meta``); with streaming the end fires once the stream was
read to its end. Tool callbacks fire around the tool itself, inside any middleware.

A resumed run reports the agents it runs again; ``on_agent_start`` then gets an
:class:`~agentkit.AgentInput` without messages (the agent goes on from its saved state). An
interrupt ends the interrupting tool call with the interrupt signal as ``error`` and its agents
without error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import attrs

from agentkit.events import AgentInput
from agentkit.options import AgentRunOption, get_impl_specific_options, wrap_impl_specific_opt_fn
from agentkit.schema import Message, TokenUsage

__all__ = ["CallbackHandler", "RunInfo", "UsageTracker", "with_callbacks"]

_log = logging.getLogger("agentkit")


@attrs.frozen
class RunInfo:
    """What a callback is about.

    Attributes:
        name: the agent's name (``component="Agent"``), the model's name (``"ChatModel"``),
            or the tool's name (``"Tool"``).
        type: the agent's type (``"ChatModel"``, ``"Sequential"``, ``"Parallel"``, ``"Loop"``,
            ``"Supervisor"``, ``"PlanExecute"``, or a custom agent's class name); for models and
            tools, the model's or tool's class name.
        component: ``"Agent"``, ``"ChatModel"`` or ``"Tool"``.
        run_path: the names of the run path of the agent concerned (for models and tools: of
            the agent that calls them), ending with that agent's name.
        agent_name: the agent concerned, or the agent calling the model or tool.
    """

    name: str
    type: str
    component: str
    run_path: tuple[str, ...]
    agent_name: str = ""


class CallbackHandler(Protocol):
    """The shape of a callback handler; every method is optional (see the module docs)."""

    def on_agent_start(self, info: RunInfo, input: AgentInput) -> None:
        """An agent starts its turn with ``input``."""

    def on_agent_end(self, info: RunInfo, error: BaseException | None) -> None:
        """An agent's turn ended (``error`` is what it failed with, or ``None``)."""


@attrs.define
class CallbackOptions:
    """Handlers given with :func:`with_callbacks` (framework-internal)."""

    handlers: list[object] = attrs.Factory(list)


def with_callbacks(*handlers: object) -> AgentRunOption:
    """Call ``handlers`` for the agents, model calls and tool calls of the run.

    ``with_callbacks(h).designate_agent("A")`` limits them to agent ``A``: its own start
    and end, and its model and tool calls. Handlers are called in the order given.

    Example::

        class Printer:
            def on_agent_start(self, info, input):
                print("start", info.name, info.type)

        runner.query("hi", with_callbacks(Printer(), UsageTracker()))

    Raises:
        TypeError: a handler has none of the callback methods.
    """
    for handler in handlers:
        if not any(callable(getattr(handler, name, None)) for name in _METHODS):
            raise TypeError(
                f"{handler!r} is not a callback handler: give it at least one of "
                f"{', '.join(_METHODS)}"
            )
    given = list(handlers)

    def apply(options: CallbackOptions) -> None:
        options.handlers.extend(given)

    return wrap_impl_specific_opt_fn(CallbackOptions, apply)


_METHODS = (
    "on_agent_start",
    "on_agent_end",
    "on_model_start",
    "on_model_end",
    "on_tool_start",
    "on_tool_end",
)


class CallbackSet:
    """The handlers of one run, filtered per agent where they fire (framework-internal)."""

    __slots__ = ("_cache", "_entries", "_lock")

    def __init__(self, entries: Sequence[tuple[object, tuple[str, ...]]]) -> None:
        self._entries = tuple(entries)
        self._cache: dict[str, tuple[object, ...]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_options(cls, options: Iterable[AgentRunOption]) -> CallbackSet | None:
        """The handlers given in ``options``, or ``None`` when there are none."""
        # Designation is kept with each handler and applied where the handler fires, so
        # that the handlers reach every agent of the run (workflow children, transfer
        # targets, agents used as tools) whatever options those are given.
        entries: list[tuple[object, tuple[str, ...]]] = []
        for option in options:
            if option.target is CallbackOptions:
                found = get_impl_specific_options(CallbackOptions(), option).handlers
                entries.extend((handler, option.agent_names) for handler in found)
        return cls(entries) if entries else None

    def for_agent(self, agent_name: str) -> tuple[object, ...]:
        """The handlers that observe the agent named ``agent_name``."""
        cached = self._cache.get(agent_name)
        if cached is None:
            cached = tuple(
                handler for handler, names in self._entries if not names or agent_name in names
            )
            with self._lock:
                self._cache[agent_name] = cached
        return cached


def fire(handlers: tuple[object, ...], method: str, *args: Any) -> None:
    """Call ``handler.method(*args)`` on each handler that has it; log what they raise."""
    for handler in handlers:
        callback = getattr(handler, method, None)
        if callback is None:
            continue
        try:
            callback(*args)
        except Exception:
            _log.exception(
                "callback handler %r raised in %s; the run goes on", handler, method
            )


@contextmanager
def observe_agent(
    observers: RunObservers | None,
    name: str,
    agent_type: Callable[[], str],
    run_path: tuple[str, ...],
    input: AgentInput,
    own_error: Callable[[], BaseException | None],
) -> Iterator[None]:
    """Report one agent turn (the block) to the handlers that observe agent ``name``.

    ``own_error()`` is read at the end: the error event the agent sent, if any.
    """
    callbacks = observers.callbacks if observers is not None else None
    handlers = callbacks.for_agent(name) if callbacks is not None else ()
    if not handlers:
        yield
        return
    info = RunInfo(name, agent_type(), "Agent", run_path, name)
    fire(handlers, "on_agent_start", info, input)
    error: BaseException | None = None
    try:
        yield
    except BaseException as raised:
        error = raised
        raise
    finally:
        fire(handlers, "on_agent_end", info, error if error is not None else own_error())


class UsageLedger:
    """Token usage summed per run and per agent (thread-safe; framework-internal).

    Every model call of a run adds its ``response_meta.usage`` here, under the calling agent.
    """

    __slots__ = ("_by_agent", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_agent: dict[str, TokenUsage] = {}

    def add(self, agent_name: str, usage: TokenUsage) -> None:
        """Count ``usage`` for ``agent_name``."""
        with self._lock:
            self._by_agent[agent_name] = _plus(self._by_agent.get(agent_name), usage)

    @property
    def total(self) -> TokenUsage:
        """The sum over every agent."""
        with self._lock:
            values = list(self._by_agent.values())
        total = TokenUsage()
        for usage in values:
            total = _plus(total, usage)
        return total

    @property
    def by_agent(self) -> dict[str, TokenUsage]:
        """A copy of the sums per agent name."""
        with self._lock:
            return dict(self._by_agent)


def _plus(left: TokenUsage | None, right: TokenUsage) -> TokenUsage:
    if left is None:
        return TokenUsage(right.prompt_tokens, right.completion_tokens, right.total_tokens)
    return TokenUsage(
        left.prompt_tokens + right.prompt_tokens,
        left.completion_tokens + right.completion_tokens,
        left.total_tokens + right.total_tokens,
    )


class UsageTracker:
    """A callback handler that sums token usage over runs, in total and per agent.

    Example::

        usage = UsageTracker()
        runner.invoke("Plan my trip", with_callbacks(usage))
        print(usage.total.total_tokens, usage.by_agent)

    One tracker may observe several runs (and runs in several threads): it keeps adding up.
    """

    def __init__(self) -> None:
        self._ledger = UsageLedger()
        self._lock = threading.Lock()
        self._calls = 0

    def on_model_end(
        self, info: RunInfo, message: Message | None, error: BaseException | None
    ) -> None:
        """Count the usage of a finished model call."""
        with self._lock:
            self._calls += 1
        if message is None or message.response_meta is None:
            return
        usage = message.response_meta.usage
        if usage is not None:
            self._ledger.add(info.agent_name, usage)

    @property
    def total(self) -> TokenUsage:
        """The tokens of every model call seen."""
        return self._ledger.total

    @property
    def by_agent(self) -> dict[str, TokenUsage]:
        """The tokens per agent name."""
        return self._ledger.by_agent

    @property
    def model_calls(self) -> int:
        """How many model calls ended (with or without usage, failed ones included)."""
        with self._lock:
            return self._calls

    def __repr__(self) -> str:
        return f"UsageTracker(total={self.total!r})"


@attrs.frozen(eq=False)
class RunObservers:
    """What observes one run: its callback handlers and its usage ledger (framework-internal).

    Held by the run's :class:`~agentkit.runctx.RunFrame` (``frame.observers``), so every
    thread and nested agent of the run (agents used as tools included) reaches the same one.
    """

    callbacks: CallbackSet | None = None
    usage: UsageLedger = attrs.Factory(UsageLedger)

    @classmethod
    def from_options(cls, options: Iterable[AgentRunOption]) -> RunObservers:
        """The observers of a run started with ``options``."""
        return cls(callbacks=CallbackSet.from_options(options))
