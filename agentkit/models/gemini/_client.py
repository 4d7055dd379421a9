"""The client class: :class:`GeminiChatModel`."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from agentkit._lazy import present
from agentkit._throttle import ConcurrencyLimiter, RateLimiter
from agentkit.errors import AgentKitValueError
from agentkit.models._base import ModelOptions
from agentkit.models._http._body import DEFAULT_MAX_RESPONSE_BYTES
from agentkit.models._http._encoded import EncodedMessages, join_turns
from agentkit.models._http._json import encode_json
from agentkit.models._http._model import HTTPChatModel
from agentkit.models._http._retry import parse_retry_after
from agentkit.models._http._stream import Target
from agentkit.models.gemini._stream import GeminiStream
from agentkit.models.gemini._wire import (
    function_names,
    message_parts,
    parse_response,
    parts_bytes,
    request_fields,
    retry_delay,
    takes_function_response_parts,
    tools_field,
)
from agentkit.schema import Message, Role

if TYPE_CHECKING:
    from agentkit._limits import ModelPricing

__all__ = ["DEFAULT_GEMINI_BASE_URL", "GeminiChatModel"]

DEFAULT_GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"
"""Where requests go when neither ``base_url`` nor ``GEMINI_BASE_URL`` is given."""

_USER = b'{"role":"user","parts":['
_MODEL = b'{"role":"model","parts":['


class GeminiChatModel(HTTPChatModel):
    """A chat model served over Google's Gemini API (``generateContent``).

    Requests go to ``{base_url}/v1beta/models/{model}:generateContent`` (a stream to
    ``:streamGenerateContent?alt=sse``) with the key in the ``x-goog-api-key`` header.

    Args:
        model: the model name, such as ``"gemini-2.5-flash"`` (``ModelOptions.model``
            overrides it).
        api_key: defaults to ``GEMINI_API_KEY``.
        base_url: the API root; defaults to ``GEMINI_BASE_URL``, then
            ``https://generativelanguage.googleapis.com``.
        thinking_budget: ``thinkingConfig.thinkingBudget`` in tokens (``0`` turns thinking
            off on models that allow it, ``-1`` lets the model decide; ``None`` sends
            nothing: the model's default). The thoughts come back in
            ``extra["reasoning_content"]``.
        **defaults: default :class:`~agentkit.models.ModelOptions` fields for every call.

    ``timeout``, ``max_retries``, ``http_client``, ``max_response_bytes``, ``pricing``,
    ``concurrency`` and ``rate_limit`` are those of :class:`~agentkit.models.OpenAIChatModel`
    and behave the same: a total deadline per call (for a stream: to the first chunk, then
    between data chunks), a cancel reaching the request in flight, the response size cap,
    shared limits.

    Function calls come back as tool calls, and the thought signatures Gemini attaches to
    them (and to text) are sent back with their parts on the next request, as Gemini
    requires; they are JSON in ``ToolCall.extra`` and ``Message.extra``, so they survive
    checkpoints and conversation stores. A blocked prompt, a reply without candidates or one
    stopped by a safety filter raises :class:`~agentkit.errors.ContentBlockedError` (not
    retried). HTTP 429 and 5xx are retried, after the ``RetryInfo.retryDelay`` Gemini puts in
    its error body when there is one. Structured output (a ``response_format`` of type
    ``json_schema`` in ``ModelOptions.extra``) is ``responseMimeType`` plus
    ``responseJsonSchema``; other ``extra`` keys go to the top level of the request
    (``safetySettings``, ``cachedContent``...), and ``extra={"generationConfig": {...}}``
    merges into ``generationConfig``. Thread-safe; a context manager.

    Example::

        with GeminiChatModel("gemini-2.5-flash", thinking_budget=1024) as model:
            reply = model.generate([user_message("Say hi")])
    """

    _key_env = "GEMINI_API_KEY"
    _base_url_env = "GEMINI_BASE_URL"
    _default_base_url = DEFAULT_GEMINI_BASE_URL
    _example_model = "gemini-2.5-flash"
    _stream_type = GeminiStream

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        thinking_budget: int | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        http_client: httpx.Client | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
        pricing: ModelPricing | None = None,
        concurrency: ConcurrencyLimiter | None = None,
        rate_limit: RateLimiter | None = None,
        **defaults: Any,
    ) -> None:
        if thinking_budget is not None and (
            isinstance(thinking_budget, bool) or not isinstance(thinking_budget, int)
        ):
            raise AgentKitValueError(
                f"thinking_budget is a number of tokens (an int), or None for the model's "
                f"default (got {thinking_budget!r})"
            )
        # Gemini 3 models read a tool result's media inside its functionResponse; the
        # encodings are kept per model, so the choice is made once, by the model's name.
        self._nested = takes_function_response_parts(model)
        encoded = EncodedMessages(partial(parts_bytes, nested=self._nested))
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
        self._thinking_budget = thinking_budget
        self._targets = {stream: self._make_target(model, stream) for stream in (False, True)}
        self._tools_json = b""

    @property
    def thinking_budget(self) -> int | None:
        """The thinking budget sent with every request (``None``: the model's default)."""
        return self._thinking_budget

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["x-goog-api-key"] = api_key
        return headers

    def _make_target(self, model: str, stream: bool) -> Target:
        name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return Target(f"{self._base_url}/v1beta/{quote(name, safe='/')}:{method}")

    def _target(self, options: ModelOptions | None, stream: bool) -> Target:
        model = options.model if options is not None else None
        if model and model != self._model:
            return self._make_target(model, stream)
        return self._targets[stream]

    def _tools_changed(self) -> None:
        self._tools_json = encode_json(tools_field(self._tools)) if self._tools else b""

    def _body(
        self, messages: Sequence[Message], options: ModelOptions | None, stream: bool
    ) -> bytes:
        merged = self._defaults if options is None else self._defaults.merge(options)
        fields = request_fields(merged, self._thinking_budget)
        # System instructions are text (a system message's media are not sent).
        system = [{"text": m.content} for m in messages if m.role is Role.SYSTEM and m.content]
        if system:
            fields["systemInstruction"] = {"parts": system}
        head = [encode_json(fields)[1:-1]] if fields else []
        if self._tools_json and "tools" not in fields:
            head.append(b'"tools":' + self._tools_json)
        head.append(b'"contents":[')
        turns = [m for m in messages if m.role is not Role.SYSTEM]
        encoded = self._encode(turns)  # a new list: ours to change
        names: dict[str, str] | None = None
        for position, message in enumerate(turns):
            if message.role is Role.TOOL and not message.tool_name:
                # Its function's name comes from the call it answers (not kept: it depends
                # on the history, not on the message alone).
                names = function_names(turns) if names is None else names
                name = names.get(message.tool_call_id, "")
                encoded[position] = encode_json(message_parts(message, name, self._nested))[1:-1]
        return b"{" + b",".join(head) + join_turns(turns, encoded, _USER, _MODEL) + b"]}"

    def _parse_reply(self, content: bytes, url: str, status: int) -> Message:
        return parse_response(content, url, status)

    def _retry_after(self, headers: httpx.Headers, body: Any) -> float | None:
        delay = parse_retry_after(headers)
        return delay if delay is not None else retry_delay(body)


# Defined here; documented and imported as agentkit.models.GeminiChatModel.
present((GeminiChatModel,), "agentkit.models")
