"""Callbacks: observe a run's agents, model calls and tool calls (:func:`with_callbacks`).

The definitions behind :mod:`agentkit.callbacks`, whose docstring documents them.
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
