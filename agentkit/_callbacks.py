"""Callbacks: observe a run's agents, model calls and tool calls (:func:`with_callbacks`).

A handler is any object with some of these methods (missing ones are skipped)::

    on_agent_start(info: RunInfo, input: AgentInput)
    on_agent_end(info: RunInfo, error: BaseException | None[, events: tuple[AgentEvent, ...]])
    on_model_start(info: RunInfo, messages: list[Message])
    on_model_end(info: RunInfo, message: Message | None, error: BaseException | None)
    on_tool_start(info: RunInfo, call: ToolCallInfo)
    on_tool_end(info: RunInfo, call: ToolCallInfo, result: str | None, error: BaseException | None)
    on_limit_wait(info: RunInfo, wait: LimitWait)

Threading contract: handlers are called synchronously, in the thread that runs what they
observe (the agent's thread for agent and model callbacks, the tool's thread for tool
callbacks; parallel branches and concurrent tool calls call them from several threads at
once, so a handler that keeps state must lock it). A start and its end are called in the same
thread and the same :mod:`contextvars` context, so a handler may set a context variable in a
start callback and reset it in the end one (this is how tracing nests spans). A slow handler
delays only the agent or tool call it observes. A handler that raises never breaks the run:
the exception is logged on ``logging.getLogger("agentkit")`` and the run goes on.

An ``on_agent_end`` that takes a third parameter receives the events of the agent's turn, in
the order they were sent (the agent's own and those of the agents it ran inside the turn, as
Eino's ``OnEnd`` gets a copy of the agent's event stream); events are frozen, and reading a
streamed message from one takes nothing from other readers. Only the agents such a handler
observes keep that copy: with the two-parameter form, no agent does any work per event.

Agent callbacks fire once per agent turn, for every agent the flow runs (the Runner, transfers,
workflows, supervisors, agents used as tools), never twice for one agent however it is wrapped.
Model callbacks fire around each call of the chat model itself (``on_model_end`` sees the
token usage on ``message.response_meta``, and its ``cost`` when the model has a
:class:`~agentkit.ModelPricing`); with streaming the end fires once the stream was
read to its end. Tool callbacks fire around the tool itself, inside any middleware.

``on_limit_wait`` says how long a model or tool call waited for a shared limit
(:class:`~agentkit.ConcurrencyLimit`, :class:`~agentkit.RateLimit` and their Redis
counterparts; see :mod:`agentkit.throttle`): ``info`` names the model or tool and the agent
calling it, ``wait`` is a :class:`~agentkit.throttle.LimitWait` (the limit, ``kind``,
``seconds``, and ``error`` when the wait failed). It fires once per wait, after it, only for
calls that did not get their turn at once, in the waiting thread, between the call's start
and end callbacks.

A resumed run reports the agents it runs again; ``on_agent_start`` then gets an
:class:`~agentkit.AgentInput` without messages (the agent goes on from its saved state). An
interrupt ends the interrupting tool call with the interrupt signal as ``error`` and its agents
without error.
"""

from __future__ import annotations

import contextvars
import threading
import time
from typing import Protocol

from agentkit._events import AgentInput
from agentkit._lazy import present
from agentkit._observe import HANDLER_METHODS, CallbackOptions, RunInfo, UsageLedger
from agentkit._options import AgentRunOption, wrap_impl_specific_opt_fn
from agentkit._runctx import current_usage
from agentkit.errors import AgentKitTypeError
from agentkit.schema import Message, TokenUsage

__all__ = ["CallbackHandler", "RunInfo", "UsageTracker", "current_usage", "with_callbacks"]

# Defined in private modules, documented here.


class CallbackHandler(Protocol):
    """The shape of a callback handler; every method is optional (see the module docs)."""

    def on_agent_start(self, info: RunInfo, input: AgentInput) -> None:
        """An agent starts its turn with ``input``."""

    def on_agent_end(self, info: RunInfo, error: BaseException | None) -> None:
        """An agent's turn ended (``error`` is what it failed with, or ``None``).

        Declared with a third parameter, ``on_agent_end(info, error, events)``, it also gets
        the turn's events as a tuple of :class:`~agentkit.AgentEvent`.
        """


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
        if not any(callable(getattr(handler, name, None)) for name in HANDLER_METHODS):
            raise AgentKitTypeError(
                f"{handler!r} is not a callback handler: give it at least one of "
                f"{', '.join(HANDLER_METHODS)}"
            )
    given = list(handlers)

    def apply(options: CallbackOptions) -> None:
        options.handlers.extend(given)

    return wrap_impl_specific_opt_fn(CallbackOptions, apply)


class UsageTracker:
    """A callback handler that sums token usage, cost and model time over runs, per agent too.

    Example::

        usage = UsageTracker()
        runner.invoke("Plan my trip", with_callbacks(usage))
        print(usage.total.total_tokens, usage.by_agent, usage.model_seconds, usage.cost)

    One tracker may observe several runs (and runs in several threads): it keeps adding up.
    """

    def __init__(self) -> None:
        self._ledger = UsageLedger()
        self._lock = threading.Lock()
        self._calls = 0
        self._seconds: dict[str, float] = {}
        # A model call's start and end come in the same thread and context.
        self._started: contextvars.ContextVar[float] = contextvars.ContextVar(
            f"agentkit_usage_{id(self)}", default=0.0
        )

    def on_model_start(self, info: RunInfo, messages: list[Message]) -> None:
        """Note when a model call started."""
        self._started.set(time.perf_counter())

    def on_model_end(
        self, info: RunInfo, message: Message | None, error: BaseException | None
    ) -> None:
        """Count the usage and the latency of a finished model call."""
        started = self._started.get()
        elapsed = time.perf_counter() - started if started else 0.0
        with self._lock:
            self._calls += 1
            self._seconds[info.agent_name] = self._seconds.get(info.agent_name, 0.0) + elapsed
        if message is None or message.response_meta is None:
            return
        meta = message.response_meta
        if meta.usage is not None or meta.cost is not None:
            self._ledger.add(info.agent_name, meta.usage or TokenUsage(), meta.cost)

    @property
    def total(self) -> TokenUsage:
        """The tokens of every model call seen."""
        return self._ledger.total

    @property
    def by_agent(self) -> dict[str, TokenUsage]:
        """The tokens per agent name."""
        return self._ledger.by_agent

    @property
    def cost(self) -> float | None:
        """What the model calls seen cost (``response_meta.cost``, set by models with a
        :class:`~agentkit.ModelPricing`), or ``None`` when none had a cost."""
        return self._ledger.cost

    @property
    def model_seconds(self) -> float:
        """The time spent in model calls (wall clock, summed: parallel calls add up)."""
        with self._lock:
            return sum(self._seconds.values())

    @property
    def model_seconds_by_agent(self) -> dict[str, float]:
        """The time spent in model calls per agent name."""
        with self._lock:
            return dict(self._seconds)

    @property
    def model_calls(self) -> int:
        """How many model calls ended (with or without usage, failed ones included)."""
        with self._lock:
            return self._calls

    def __repr__(self) -> str:
        return f"UsageTracker(total={self.total!r})"

present(
    (
        RunInfo,
        UsageTracker,
        with_callbacks,
    ),
    "agentkit",
)

present(
    (
        CallbackHandler,
        current_usage,
    ),
    "agentkit.callbacks",
)
