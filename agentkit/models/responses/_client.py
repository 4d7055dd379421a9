"""The client class: :class:`OpenAIResponsesModel`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx

from agentkit._lazy import present
from agentkit._throttle import ConcurrencyLimiter, RateLimiter
from agentkit.errors import AgentKitValueError
from agentkit.models._base import ModelOptions
from agentkit.models._http._body import DEFAULT_MAX_RESPONSE_BYTES
from agentkit.models._http._encoded import EncodedMessages
from agentkit.models._http._json import encode_json
from agentkit.models._http._model import HTTPChatModel
from agentkit.models.responses._stream import ResponsesStream
from agentkit.models.responses._wire import (
    attachment_items,
    attachments_bytes,
    items_bytes,
    parse_response,
    request_fields,
    since_response,
    tools_field,
)
from agentkit.schema import Message

if TYPE_CHECKING:
    from agentkit._limits import ModelPricing

__all__ = ["OpenAIResponsesModel"]

_EFFORTS = ("minimal", "low", "medium", "high")


class OpenAIResponsesModel(HTTPChatModel):
    """A chat model served over OpenAI's Responses API (``POST {base_url}/responses``).

    Args:
        model: the model name, such as ``"gpt-5-mini"`` (``ModelOptions.model`` overrides it).
        api_key: the bearer token; defaults to ``OPENAI_API_KEY``.
        base_url: the API root; defaults to ``OPENAI_BASE_URL``, then
            ``https://api.openai.com/v1``.
        store: whether OpenAI keeps the responses. ``False`` (the default) sends
            ``"store": false`` and asks for ``include: ["reasoning.encrypted_content"]``: the
            reasoning items of each reply come back encrypted, are kept in
            ``Message.extra["reasoning_items"]`` (JSON: checkpoints and conversation stores
            keep them) and are sent back with the assistant's turn, so the model keeps its
            reasoning across tool-use turns without any state at OpenAI. ``True`` keeps the
            state server-side: a request after a reply this model made sends that reply's
            ``previous_response_id`` (``extra["response_id"]``) and only the messages after it.
        reasoning_effort: ``"minimal"``, ``"low"``, ``"medium"`` or ``"high"`` for reasoning
            models (``reasoning.effort``); ``None`` sends nothing.
        **defaults: default :class:`~agentkit.models.ModelOptions` fields for every call.

    Deferred tools (``deferred=True`` in a :class:`~agentkit.ToolInfo`) are sent with
    ``"defer_loading": true`` and the hosted ``{"type": "tool_search"}`` tool (models that
    have it: GPT-5.4 and later). The search's ``tool_search_call`` and ``tool_search_output``
    items are kept in ``Message.extra["server_tool_items"]`` and sent back with the
    assistant's turn; they are no tool calls for the agent to run.

    ``timeout``, ``max_retries``, ``http_client``, ``max_response_bytes``, ``pricing``,
    ``concurrency`` and ``rate_limit`` are those of :class:`~agentkit.models.OpenAIChatModel`
    and behave the same: a total deadline per call (for a stream: to the first chunk, then
    between data chunks), a cancel reaching the request in flight, the response size cap,
    shared limits, retries of connection errors, 408, 409, 429 and 5xx.

    A ``failed`` response, and an ``error`` or ``response.failed`` event in a stream, raise
    :class:`~agentkit.ModelError` with OpenAI's message. Structured output (a
    ``response_format`` of type ``json_schema`` in ``ModelOptions.extra``) is sent as
    ``text.format``. Thread-safe; a context manager.

    Example::

        with OpenAIResponsesModel("gpt-5-mini", reasoning_effort="low") as model:
            reply = model.generate([user_message("Say hi")])
    """

    _key_env = "OPENAI_API_KEY"
    _base_url_env = "OPENAI_BASE_URL"
    _default_base_url = "https://api.openai.com/v1"
    _example_model = "gpt-5-mini"
    _path = "/responses"
    _stream_type = ResponsesStream
    _tool_search = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        store: bool = False,
        reasoning_effort: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        http_client: httpx.Client | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
        pricing: ModelPricing | None = None,
        concurrency: ConcurrencyLimiter | None = None,
        rate_limit: RateLimiter | None = None,
        **defaults: Any,
    ) -> None:
        if reasoning_effort is not None and reasoning_effort not in _EFFORTS:
            raise AgentKitValueError(
                f"reasoning_effort must be one of {', '.join(map(repr, _EFFORTS))} or None "
                f"(got {reasoning_effort!r})"
            )
        encoded = EncodedMessages(items_bytes, attachments=(attachment_items, attachments_bytes))
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
        self._store = bool(store)
        self._effort = reasoning_effort
        self._tools_json = b""

    @property
    def store(self) -> bool:
        """Whether OpenAI keeps the responses (and requests chain by ``previous_response_id``)."""
        return self._store

    @property
    def reasoning_effort(self) -> str | None:
        """The reasoning effort sent with every request (``None``: none)."""
        return self._effort

    def _tools_changed(self) -> None:
        self._tools_json = encode_json(tools_field(self._tools)) if self._tools else b""

    def _body(
        self, messages: Sequence[Message], options: ModelOptions | None, stream: bool
    ) -> bytes:
        merged = self._defaults if options is None else self._defaults.merge(options)
        fields = request_fields(self._model, merged, self._store, self._effort, stream)
        if self._store and "previous_response_id" not in fields:
            previous, messages = since_response(messages)
            if previous is not None:
                fields["previous_response_id"] = previous
        head = encode_json(fields)[:-1]
        if self._tools_json and "tools" not in fields:
            head += b',"tools":' + self._tools_json
        items = b",".join(filter(None, self._encode(messages)))
        return head + b',"input":[' + items + b"]}"

    def _parse_reply(self, content: bytes, url: str, status: int) -> Message:
        return parse_response(content, url, status)


# Defined here; documented and imported as agentkit.models.OpenAIResponsesModel.
present((OpenAIResponsesModel,), "agentkit.models")
