"""Anthropic's Messages API: :class:`AnthropicChatModel`.

A hand-written wire over agentkit's HTTP machinery (``agentkit.models._http``), as
:class:`~agentkit.models.OpenAIChatModel`'s: the same deadlines, cancel, size caps, retries and
limits, and nothing to install beyond httpx. ``_wire`` holds the JSON shapes, ``_stream`` the
reading of a streamed reply, ``_client`` the class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach, present
from agentkit.models.anthropic._client import (
    ANTHROPIC_VERSION,
    DEFAULT_ANTHROPIC_BASE_URL,
    AnthropicChatModel,
)

__all__ = ["ANTHROPIC_VERSION", "AnthropicChatModel", "DEFAULT_ANTHROPIC_BASE_URL"]

present((AnthropicChatModel,), __name__)

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(__name__)
