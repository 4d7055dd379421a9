"""OpenTelemetry tracing of agent runs: :class:`OpenTelemetryHandler` (extra ``[otel]``).

A callback handler (:func:`~agentkit.with_callbacks`) that makes one span per agent turn
(``invoke_agent {agent}``), per model call (``chat {model}``) and per tool call
(``execute_tool {tool}``), with the attributes of the OpenTelemetry GenAI semantic
conventions. Spans nest the way the run does: a workflow's children under the workflow, the
branches of a Parallel agent under its span (each branch in its own thread), model and tool
calls under their agent, an agent used as a tool under the tool call. The run's spans are
children of whatever span is current where the run was started.

Only ``opentelemetry-api`` is needed at runtime; configure a ``TracerProvider`` with the SDK
(or any other implementation) to export the spans.

Example::

    from opentelemetry.sdk.trace import TracerProvider
    from agentkit.integrations.otel import OpenTelemetryHandler

    tracing = OpenTelemetryHandler(tracer_provider=TracerProvider())
    runner.query("hi", with_callbacks(tracing))
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._callbacks import RunInfo
from agentkit._events import AgentInput
from agentkit._throttle import LimitWait
from agentkit.errors import MissingDependencyError
from agentkit.schema import Message
from agentkit.tools._base import ToolCallInfo

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

__all__ = ["OpenTelemetryHandler"]


@attrs.define(eq=False)
class _Open:
    """A span this handler started in the current context, and how to leave it."""

    span: Any
    context_token: Any  # from opentelemetry.context.attach
    stack_token: contextvars.Token[_Open | None] | None = None  # set right after it is made


class OpenTelemetryHandler:
    """A callback handler that records a run as OpenTelemetry spans.

    Args:
        tracer_provider: where spans go; ``None`` uses the global provider
            (``opentelemetry.trace.set_tracer_provider``).

    Attributes on the spans: ``gen_ai.operation.name`` (``invoke_agent``, ``chat``,
    ``execute_tool``), ``gen_ai.agent.name``, ``gen_ai.request.model``,
    ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``,
    ``gen_ai.usage.cache_read.input_tokens`` (prompt tokens read from the provider's cache,
    when the server reports them), ``gen_ai.response.finish_reasons``, ``gen_ai.tool.name``,
    ``gen_ai.tool.call.id``, ``gen_ai.tool.type``, plus ``agentkit.agent.type`` and
    ``agentkit.run_path``. The cost of a model call (a model with a
    :class:`~agentkit.ModelPricing`) is ``gen_ai.usage.cost.amount`` on its ``chat``
    span: the GenAI conventions have no cost attribute yet, and this is the name the open
    proposal for one uses (semantic-conventions-genai pull request 443); its currency is the
    pricing's, which agentkit does not know, so no ``gen_ai.usage.cost.currency`` is set. A failed
    agent, model call or tool call sets the span's status to error, records the exception
    and sets ``error.type``.

    A model or tool call that waited for a shared limit (:mod:`agentkit.throttle`) gets an
    ``agentkit.limit_wait`` event on its span, with ``agentkit.limit.kind`` (``concurrency``
    or ``rate``), ``agentkit.limit`` (the limit's repr), ``agentkit.limit.wait_seconds`` and,
    when the wait failed, ``error.type``.

    One handler can trace many runs at once, from many threads.

    Raises:
        ImportError: ``opentelemetry-api`` is not installed (``pip install agentkit[otel]``).
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        try:
            from opentelemetry import trace
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise MissingDependencyError(
                "OpenTelemetryHandler needs opentelemetry-api: pip install 'agentkit[otel]'"
            ) from error
        from agentkit import __version__

        self._tracer = trace.get_tracer("agentkit", __version__, tracer_provider=tracer_provider)
        self._open: contextvars.ContextVar[_Open | None] = contextvars.ContextVar(
            f"agentkit_otel_{id(self)}", default=None
        )

    def __repr__(self) -> str:
        return "OpenTelemetryHandler()"

    # --- agents ---

    def on_agent_start(self, info: RunInfo, input: AgentInput) -> None:
        """Open ``invoke_agent {name}``."""
        self._start(
            f"invoke_agent {info.name}",
            info,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": info.name,
                "agentkit.agent.type": info.type,
            },
            client=False,
        )

    def on_agent_end(self, info: RunInfo, error: BaseException | None) -> None:
        """Close the agent's span."""
        self._end(error)

    # --- model calls ---

    def on_model_start(self, info: RunInfo, messages: list[Message]) -> None:
        """Open ``chat {model}``."""
        self._start(
            f"chat {info.name}",
            info,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": info.name,
                "gen_ai.agent.name": info.agent_name,
            },
            client=True,
        )

    def on_model_end(
        self, info: RunInfo, message: Message | None, error: BaseException | None
    ) -> None:
        """Close the model call's span, with the token usage and the cost."""
        current = self._open.get()
        meta = message.response_meta if message is not None else None
        if current is not None and meta is not None:
            if meta.finish_reason:
                current.span.set_attribute("gen_ai.response.finish_reasons", [meta.finish_reason])
            if meta.usage is not None:
                current.span.set_attribute("gen_ai.usage.input_tokens", meta.usage.prompt_tokens)
                current.span.set_attribute(
                    "gen_ai.usage.output_tokens", meta.usage.completion_tokens
                )
                if meta.usage.cached_tokens:
                    current.span.set_attribute(
                        "gen_ai.usage.cache_read.input_tokens", meta.usage.cached_tokens
                    )
                if meta.usage.cache_write_tokens:
                    current.span.set_attribute(
                        "gen_ai.usage.cache_creation.input_tokens", meta.usage.cache_write_tokens
                    )
            if meta.cost is not None:
                current.span.set_attribute("gen_ai.usage.cost.amount", meta.cost)
        self._end(error)

    # --- tool calls ---

    def on_tool_start(self, info: RunInfo, call: ToolCallInfo) -> None:
        """Open ``execute_tool {tool}``."""
        self._start(
            f"execute_tool {info.name}",
            info,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": info.name,
                "gen_ai.tool.call.id": call.call_id,
                "gen_ai.tool.type": "function",
                "gen_ai.agent.name": info.agent_name,
            },
            client=False,
        )

    def on_tool_end(
        self,
        info: RunInfo,
        call: ToolCallInfo,
        result: str | None,
        error: BaseException | None,
    ) -> None:
        """Close the tool call's span."""
        self._end(error)

    # --- shared limits ---

    def on_limit_wait(self, info: RunInfo, wait: LimitWait) -> None:
        """Add an ``agentkit.limit_wait`` event to the waiting call's span."""
        current = self._open.get()
        if current is None:
            return  # the wait of a call whose start this handler did not see
        attributes: dict[str, Any] = {
            "agentkit.limit.kind": wait.kind,
            "agentkit.limit": repr(wait.limit),
            "agentkit.limit.wait_seconds": wait.seconds,
        }
        if wait.error is not None:
            attributes["error.type"] = type(wait.error).__qualname__
        current.span.add_event("agentkit.limit_wait", attributes)

    # --- spans ---

    def _start(self, name: str, info: RunInfo, attributes: dict[str, Any], client: bool) -> None:
        from opentelemetry import context, trace

        attributes["agentkit.run_path"] = "/".join(info.run_path)
        kind = trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL
        # The parent is the span current in this context: the enclosing agent or tool call of
        # this run (contexts are copied into every thread agentkit starts), or the caller's.
        span: Span = self._tracer.start_span(name, kind=kind, attributes=attributes)
        node = _Open(span, context.attach(trace.set_span_in_context(span)))
        node.stack_token = self._open.set(node)

    def _end(self, error: BaseException | None) -> None:
        from opentelemetry import context
        from opentelemetry.trace import Status, StatusCode

        current = self._open.get()
        if current is None:
            return  # a start this handler did not see (added in the middle of a run)
        span = current.span
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, str(error)))
            span.set_attribute("error.type", type(error).__qualname__)
            span.record_exception(error)
        span.end()
        context.detach(current.context_token)
        if current.stack_token is not None:
            self._open.reset(current.stack_token)
