"""Chat models: the protocols, per-call options, a scripted model and an OpenAI-compatible client.

The model errors (:class:`ModelError` and its subclasses) are exported here too, the same
classes as in :mod:`agentkit` and :mod:`agentkit.errors`.

:class:`OpenAIChatModel` is imported on first use, so ``import agentkit`` does not pay for
httpx and tenacity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentkit.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    IncompleteStreamError,
    ModelError,
    PermissionDeniedError,
    RateLimitError,
)
from agentkit.models.base import ChatModel, ModelOptions, ToolCallingChatModel
from agentkit.models.failover import FailoverChatModel
from agentkit.models.scripted import ModelCall, ScriptedChatModel

if TYPE_CHECKING:
    from agentkit.models.openai import OpenAIChatModel

__all__ = [
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ChatModel",
    "IncompleteStreamError",
    "ModelError",
    "PermissionDeniedError",
    "RateLimitError",
    "FailoverChatModel",
    "ModelCall",
    "ModelOptions",
    "OpenAIChatModel",
    "ScriptedChatModel",
    "ToolCallingChatModel",
]


def __getattr__(name: str) -> Any:
    # PEP 562: load the HTTP client only when someone asks for it.
    if name == "OpenAIChatModel":
        from agentkit.models.openai import OpenAIChatModel

        globals()[name] = OpenAIChatModel
        return OpenAIChatModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
