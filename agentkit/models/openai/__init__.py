"""An OpenAI-compatible Chat Completions client: :class:`~agentkit.models.OpenAIChatModel`.

It speaks the ``POST {base_url}/chat/completions`` protocol that OpenAI, Azure OpenAI,
Ollama, vLLM, DeepSeek, Mistral, llama.cpp's server, Gemini's OpenAI-compatible endpoint,
OpenRouter, LiteLLM and many other servers implement, over one shared, thread-safe
:class:`httpx.Client`.

Per-call cost is kept flat as a conversation grows: each message is encoded to JSON once
and the model keeps the bytes (``_encoded``; nothing is written onto the message) while the
message still holds the values they were made from, so a request body is a join of kept
pieces. The tool list is encoded once per bound model.

The package is split by concern: ``_wire`` (the JSON shapes), ``_encoded`` (the encodings
kept for the next calls), ``_sse`` (Server-Sent Events), ``_retry`` (what is retried and
when), ``_transport`` (total deadlines and aborts at the socket level, under a public httpx
transport), ``_body`` (reading a body within the deadline and ``max_response_bytes``),
``_stream`` (reading a streamed reply) and ``_client`` (the class).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach, present
from agentkit.models._http._retry import parse_retry_after
from agentkit.models._http._sse import iter_sse_data
from agentkit.models.openai._client import DEFAULT_BASE_URL

__all__ = ["DEFAULT_BASE_URL", "iter_sse_data", "parse_retry_after"]

# Defined in private modules, documented here.
present((iter_sse_data, parse_retry_after), __name__)

if not TYPE_CHECKING:  # dir() lists the API only (not this module's imports)
    # The class is imported from agentkit.models; its spelling here goes in agentkit 0.4.
    __getattr__, __dir__ = attach(
        __name__, deprecated={"OpenAIChatModel": "agentkit.models.OpenAIChatModel"}
    )
