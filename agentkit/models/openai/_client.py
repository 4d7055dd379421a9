"""The client class: :class:`OpenAIChatModel`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx

from agentkit._lazy import present
from agentkit._throttle import ConcurrencyLimiter, RateLimiter
from agentkit.models._base import ModelOptions
from agentkit.models._http._body import DEFAULT_MAX_RESPONSE_BYTES
from agentkit.models._http._model import HTTPChatModel
from agentkit.models.openai._encoded import EncodedMessages
from agentkit.models.openai._stream import OpenStream
from agentkit.models.openai._wire import (
    encode_json,
    parse_completion,
    request_fields,
    tools_bytes,
)
from agentkit.schema import Message

if TYPE_CHECKING:
    from agentkit._limits import ModelPricing

__all__ = ["DEFAULT_BASE_URL", "OpenAIChatModel"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where requests go when neither ``base_url`` nor ``OPENAI_BASE_URL`` is given."""


class OpenAIChatModel(HTTPChatModel):
    """A chat model served over the OpenAI Chat Completions API, or any compatible server.

    Args:
        model: the model name sent with every request (``ModelOptions.model`` overrides it).
        api_key: the bearer token; defaults to ``OPENAI_API_KEY``. With neither, no
            ``Authorization`` header is sent (local servers such as Ollama need none).
        base_url: the API root, such as ``http://localhost:11434/v1``; defaults to
            ``OPENAI_BASE_URL``, then ``https://api.openai.com/v1``.
        timeout: seconds. For :meth:`generate` it bounds the whole call, a total deadline
            rather than a limit per read: a server that trickles bytes or sends nothing
            fails with :class:`~agentkit.errors.APITimeoutError` once it has passed. For
            :meth:`stream` it bounds the wait for the first chunk and then the wait between
            data chunks; SSE comments (keep-alives) do not count as data.
        max_retries: how many times a failed request is retried (attempts = ``max_retries + 1``).
        http_client: an :class:`httpx.Client` to use; it stays yours to close. By default the
            model makes one and :meth:`close` closes it. With your own client the deadline is
            checked between reads (not within one) and a cancel reaches a request only once
            its response headers have arrived.
        max_response_bytes: the most bytes a response body may have (after decompression):
            a whole completion, an error body, or all of a stream together. 64 MiB by
            default, about twice what a 128,000-token reply streamed in small chunks takes;
            ``None`` turns the limit off. A response that declares or delivers more fails
            the call at once with :class:`~agentkit.errors.ResponseTooLargeError` (not
            retried): reading stops, the connection is closed, and memory stays near the
            limit however much the server sends.
        pricing: what the model's tokens cost (a :class:`~agentkit.ModelPricing`):
            every reply that reports its token usage gets ``response_meta.cost`` (for a
            stream, on the chunk with the usage), which runs sum into ``RunResult.cost`` and
            count against ``RunLimits(cost=...)``. Prompt tokens the server read from its
            cache (``prompt_tokens_details.cached_tokens``) are priced at
            ``cached_input_per_million`` when given.
        concurrency: a :class:`~agentkit.ConcurrencyLimit` (or
            :class:`~agentkit.integrations.redis.RedisConcurrencyLimit`) shared with other
            models, threads and processes: each request takes a slot before it is sent and
            holds it until its response was read (a stream: until it ends or is closed).
        rate_limit: a :class:`~agentkit.RateLimit` (or
            :class:`~agentkit.integrations.redis.RedisRateLimit`): each request takes its
            place in the rate before it is sent (its tokens estimated, then corrected with
            the usage the response reports), and an HTTP 429 pauses the limit for every
            caller sharing it (see :mod:`agentkit.throttle`).
        **defaults: default :class:`~agentkit.models.ModelOptions` fields for every call
            (``temperature=0.2``, ``max_tokens=512``, ...); options given to a call win.

    Connection errors, timeouts and HTTP 408, 409, 429 and 5xx are retried with exponential
    backoff and jitter (from :attr:`retry_initial_delay` up to :attr:`retry_max_delay`), or after
    the delay the server asks for in ``Retry-After`` (capped at 60 s). Retries count toward
    the same limit: all attempts and the waits between them share the ``timeout`` of the
    call (for a stream: until its first chunk), and a retry that could not finish in time
    is not made, so a call never takes much longer than ``timeout``. Waits for a turn under
    ``concurrency`` or ``rate_limit`` count toward it too (a wait that runs out raises
    :class:`~agentkit.errors.SlotTimeoutError`, not retried). A stream is never
    retried once it has delivered a chunk. Errors are :class:`~agentkit.ModelError`
    subclasses carrying the status code, the server's message and the decoded body.

    Inside an agent run, an immediate cancel (or closing the run's event iterator) aborts
    the request in flight (also while waiting for the first byte), wakes a retry backoff
    at once and sends no further request; the call then raises
    :class:`~agentkit.AgentCancelledError`. A stream reader closed while another thread
    reads it ends that read with :class:`~agentkit.AgentCancelledError` as well.

    Replies from servers that differ from OpenAI in the details are read as the same
    messages: a refusal is kept in ``extra["refusal"]`` and is also the ``content`` (never
    an empty answer); reasoning (``reasoning_content``, ``reasoning``, Mistral's
    ``thinking`` parts) goes to ``extra["reasoning_content"]``; the legacy ``function_call``
    becomes a tool call; an error sent inside a stream raises :class:`~agentkit.ModelError`
    with the server's message. Fields the client does not interpret are sent back
    unchanged on the next request: those of the assistant message from
    ``extra["provider_fields"]`` and those of a tool call (Gemini's thought signature) from
    ``ToolCall.extra``; so is ``extra["reasoning_content"]`` of a tool-calling message,
    which DeepSeek's thinking mode requires.

    The model is thread-safe: one instance, and the models :meth:`with_tools` derives from it,
    share one connection pool; use it from any number of threads. Use it as a context
    manager, or call :meth:`close`, to release the connections.

    Each message is encoded to JSON once: the model keeps the bytes while the message lives
    (nothing is written onto the message). A message's ``content`` assigned after it was sent
    is noticed and sent anew; any other change to a sent message is not: build a new message
    instead (``attrs.evolve(message, name="bob")``), as the framework itself does.

    Example::

        with OpenAIChatModel("gpt-4o-mini", temperature=0) as model:
            reply = model.generate([user_message("Say hi")])
    """

    _key_env = "OPENAI_API_KEY"
    _base_url_env = "OPENAI_BASE_URL"
    _default_base_url = DEFAULT_BASE_URL
    _example_model = "gpt-4o-mini"
    _path = "/chat/completions"
    _stream_type = OpenStream

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        http_client: httpx.Client | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
        pricing: ModelPricing | None = None,
        concurrency: ConcurrencyLimiter | None = None,
        rate_limit: RateLimiter | None = None,
        **defaults: Any,
    ) -> None:
        encoded = EncodedMessages()
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
            max_response_bytes=max_response_bytes,
            pricing=pricing,
            concurrency=concurrency,
            rate_limit=rate_limit,
            defaults=ModelOptions.from_kwargs(**defaults),
            cache=encoded,
        )
        self._encode = encoded.encode
        self._tools_json = b""
        self._envelopes = self._make_envelopes()

    # -- request building ------------------------------------------------------------------

    def _tools_changed(self) -> None:
        self._tools_json = tools_bytes(self._tools) if self._tools else b""
        self._envelopes = self._make_envelopes()

    def _make_envelopes(self) -> dict[bool, tuple[bytes, bytes]]:
        return {stream: self._envelope(self._defaults, stream) for stream in (False, True)}

    def _envelope(self, options: ModelOptions, stream: bool) -> tuple[bytes, bytes]:
        """Return the body bytes before and after the messages."""
        fields = request_fields(self._model, options, stream)
        head = b"{" + encode_json(fields)[1:-1] + b',"messages":['
        if self._tools_json and "tools" not in fields:
            return head, b'],"tools":' + self._tools_json + b"}"
        return head, b"]}"

    def _body(
        self, messages: Sequence[Message], options: ModelOptions | None, stream: bool
    ) -> bytes:
        if options is None:
            head, tail = self._envelopes[stream]
        else:
            head, tail = self._envelope(self._defaults.merge(options), stream)
        parts = self._encode(messages)  # a new list: ours to change
        if not parts:
            return head + tail
        # The envelope joins the first and last pieces, so the body is copied once.
        parts[0] = head + parts[0]
        parts[-1] += tail
        return b",".join(parts)

    def _parse_reply(self, content: bytes, url: str, status: int) -> Message:
        return parse_completion(content, url, status)


# Defined here; documented and imported as agentkit.models.OpenAIChatModel.
present((OpenAIChatModel,), "agentkit.models")
