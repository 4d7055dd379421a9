"""What observes a run: its callback handlers and its token usage (framework-internal).

:class:`RunObservers` rides on the run's :class:`~agentkit._runctx.RunFrame`; the public side is
:mod:`agentkit.callbacks`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from agentkit._options import AgentRunOption, get_impl_specific_options
from agentkit.schema import TokenUsage

if TYPE_CHECKING:
    from agentkit.events import AgentInput

__all__ = [
    "CallbackOptions",
    "HANDLER_METHODS",
    "CallbackSet",
    "RunInfo",
    "RunObservers",
    "UsageLedger",
    "fire",
    "observe_agent",
]

_log = logging.getLogger("agentkit")

T = TypeVar("T")


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


@attrs.define
class CallbackOptions:
    """Handlers given with :func:`with_callbacks` (framework-internal)."""

    handlers: list[object] = attrs.Factory(list)


HANDLER_METHODS = (
    "on_agent_start",
    "on_agent_end",
    "on_model_start",
    "on_model_end",
    "on_tool_start",
    "on_tool_end",
    "on_limit_wait",
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


def observe_agent(
    observers: RunObservers,
    name: str,
    agent_type: Callable[[], str],
    run_path: tuple[str, ...],
    input: AgentInput,
    turn: Callable[[], T],
    own_error: Callable[[T], BaseException | None],
) -> T:
    """Run ``turn()``, one turn of the agent ``name``, reported to the handlers that observe it.

    ``own_error(result)`` names the error event the agent sent, if any, for ``on_agent_end``.
    """
    callbacks = observers.callbacks
    handlers = callbacks.for_agent(name) if callbacks is not None else ()
    if not handlers:
        return turn()
    info = RunInfo(name, agent_type(), "Agent", run_path, name)
    fire(handlers, "on_agent_start", info, input)
    try:
        result = turn()
    except BaseException as error:
        fire(handlers, "on_agent_end", info, error)
        raise
    fire(handlers, "on_agent_end", info, own_error(result))
    return result


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


@attrs.frozen(eq=False)
class RunObservers:
    """What observes one run: its callback handlers and its usage ledger (framework-internal).

    Held by the run's :class:`~agentkit._runctx.RunFrame` (``frame.observers``), so every
    thread and nested agent of the run (agents used as tools included) reaches the same one.
    """

    callbacks: CallbackSet | None = None
    usage: UsageLedger = attrs.Factory(UsageLedger)

    @classmethod
    def from_options(cls, options: Iterable[AgentRunOption]) -> RunObservers:
        """The observers of a run started with ``options``."""
        return cls(callbacks=CallbackSet.from_options(options))
