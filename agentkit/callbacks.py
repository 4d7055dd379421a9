"""Callbacks: observe a run's agents, model calls and tool calls (:func:`~agentkit.with_callbacks`).

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

``RunInfo``, ``UsageTracker``, ``with_callbacks`` moved to :mod:`agentkit`; their spellings
here still work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._callbacks import (
    CallbackHandler,
    current_usage,
)
from agentkit._lazy import attach

__all__ = [
    "CallbackHandler",
    "current_usage",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "RunInfo": "agentkit.RunInfo",
            "UsageTracker": "agentkit.UsageTracker",
            "with_callbacks": "agentkit.with_callbacks",
        },
    )
