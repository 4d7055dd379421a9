"""Google's Gemini API: :class:`GeminiChatModel`.

A hand-written wire over agentkit's HTTP machinery (``agentkit.models._http``), as
:class:`~agentkit.models.OpenAIChatModel`'s: the same deadlines, cancel, size caps, retries and
limits, and nothing to install beyond httpx. ``_wire`` holds the JSON shapes, ``_stream`` the
reading of a streamed reply, ``_client`` the class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach, present
from agentkit.models.gemini._client import DEFAULT_GEMINI_BASE_URL, GeminiChatModel

__all__ = ["DEFAULT_GEMINI_BASE_URL", "GeminiChatModel"]

present((GeminiChatModel,), __name__)

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(__name__)
