"""Google's Gemini API: :class:`~agentkit.models.GeminiChatModel`.

A hand-written wire over agentkit's HTTP machinery (``agentkit.models._http``), as
:class:`~agentkit.models.OpenAIChatModel`'s: the same deadlines, cancel, size caps, retries and
limits, and nothing to install beyond httpx. ``_wire`` holds the JSON shapes, ``_stream`` the
reading of a streamed reply, ``_client`` the class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.models.gemini._client import DEFAULT_GEMINI_BASE_URL

__all__ = ["DEFAULT_GEMINI_BASE_URL"]

if not TYPE_CHECKING:
    # The class is imported from agentkit.models; its spelling here goes in agentkit 0.4.
    __getattr__, __dir__ = attach(
        __name__, deprecated={"GeminiChatModel": "agentkit.models.GeminiChatModel"}
    )
