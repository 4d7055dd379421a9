"""Chat models: the protocols, per-call options, a scripted model and the HTTP clients.

The model errors (:class:`ModelError` and its subclasses) are exported here too, the same
classes as in :mod:`agentkit` and :mod:`agentkit.errors`.

The HTTP clients: :class:`OpenAIChatModel` (Chat Completions, any compatible server),
:class:`OpenAIResponsesModel` (OpenAI's Responses API), :class:`AnthropicChatModel`
(Anthropic's Messages API) and :class:`GeminiChatModel` (Google's Gemini API), each a
hand-written wire over the same HTTP machinery (deadlines, cancel, size caps, retries, limits).

The models themselves load on first use: the HTTP clients bring httpx, so ``import
agentkit`` does not pay for it (nor for the scripted and failover models it does not need).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ContentBlockedError,
    IncompleteStreamError,
    ModelError,
    PermissionDeniedError,
    RateLimitError,
    ResponseTooLargeError,
)
from agentkit.models._base import (
    ChatModel,
    ModelOptions,
    ToolCallingChatModel,
    ToolSearchUnsupportedError,
)

__all__ = [
    "AnthropicChatModel",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ChatModel",
    "ContentBlockedError",
    "IncompleteStreamError",
    "ResponseTooLargeError",
    "ModelError",
    "PermissionDeniedError",
    "RateLimitError",
    "FailoverChatModel",
    "GeminiChatModel",
    "ModelCall",
    "ModelOptions",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ScriptedChatModel",
    "ToolCallingChatModel",
    "ToolSearchUnsupportedError",
]

if TYPE_CHECKING:
    from agentkit.models._failover import FailoverChatModel
    from agentkit.models._scripted import ModelCall, ScriptedChatModel
    from agentkit.models.anthropic._client import AnthropicChatModel
    from agentkit.models.gemini._client import GeminiChatModel
    from agentkit.models.openai._client import OpenAIChatModel
    from agentkit.models.responses._client import OpenAIResponsesModel
else:
    __getattr__, __dir__ = attach(
        __name__,
        {
            "AnthropicChatModel": "agentkit.models.anthropic._client",
            "FailoverChatModel": "agentkit.models._failover",
            "GeminiChatModel": "agentkit.models.gemini._client",
            "OpenAIChatModel": "agentkit.models.openai._client",
            "OpenAIResponsesModel": "agentkit.models.responses._client",
            "ModelCall": "agentkit.models._scripted",
            "ScriptedChatModel": "agentkit.models._scripted",
        },
        submodules=("anthropic", "base", "failover", "gemini", "openai", "responses", "scripted"),
    )
