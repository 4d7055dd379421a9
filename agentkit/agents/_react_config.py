"""What a :class:`~agentkit.ChatModelAgent` fixes on its first run, and its loop's state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from agentkit.agents._structured import StructuredOutput
from agentkit.agents._tool_errors import ToolErrorPolicy
from agentkit.middleware import AgentMiddleware
from agentkit.schema import Message
from agentkit.tools.base import BaseTool

if TYPE_CHECKING:
    from agentkit.agents._model_retry import ModelRetryConfig

__all__ = ["ReactConfig", "ReactState"]


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
    # --- middleware, callbacks, retries, timeouts (see _middleware.py) ---
    middlewares: tuple[AgentMiddleware, ...] = ()
    base_model: Any = None  # the model before with_tools, to offer other tools
    tool_timeouts: Mapping[str, float] = attrs.field(factory=dict)  # per tool name
    tool_timeout: float | None = None  # the agent's default, for tools added by middleware
    model_retry: ModelRetryConfig | None = None


@attrs.define(eq=False)
class ReactState:
    """The ReAct loop's state: the conversation and the model calls left."""

    messages: list[Message]
    remaining: int
