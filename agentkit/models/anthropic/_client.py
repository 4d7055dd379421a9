"""The client class: :class:`AnthropicChatModel`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx

from agentkit._lazy import present
from agentkit._throttle import ConcurrencyLimiter, RateLimiter
from agentkit.errors import AgentKitValueError
from agentkit.models._base import ModelOptions
from agentkit.models._http._body import DEFAULT_MAX_RESPONSE_BYTES
from agentkit.models._http._encoded import EncodedMessages, join_turns
from agentkit.models._http._json import encode_json
from agentkit.models._http._model import HTTPChatModel, priced
from agentkit.models.anthropic._pause import ContinuedStream, is_paused, joined, too_often
from agentkit.models.anthropic._stream import AnthropicStream
from agentkit.models.anthropic._wire import (
    TOOL_SEARCH_TOOLS,
    message_blocks,
    parse_message,
    request_fields,
    system_json,
    tools_json,
    with_cache_control,
)
from agentkit.schema import Message, Role
from agentkit.streams import StreamReader, stream_from_batches

if TYPE_CHECKING:
    from agentkit._limits import ModelPricing

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_ANTHROPIC_BASE_URL", "AnthropicChatModel"]

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
"""Where requests go when neither ``base_url`` nor ``ANTHROPIC_BASE_URL`` is given."""

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent with every request."""

_USER = b'{"role":"user","content":['
_ASSISTANT = b'{"role":"assistant","content":['


class AnthropicChatModel(HTTPChatModel):
    """A chat model served over Anthropic's Messages API (``POST {base_url}/v1/messages``).

    Args:
        model: the model name, such as ``"claude-sonnet-4-5"`` (``ModelOptions.model``
            overrides it).
        api_key: sent as ``x-api-key``; defaults to ``ANTHROPIC_API_KEY``.
        base_url: the API root; defaults to ``ANTHROPIC_BASE_URL``, then
            ``https://api.anthropic.com``.
        max_tokens: the most tokens a reply may have (the API requires a value;
            ``ModelOptions.max_tokens`` overrides it).
        thinking: the extended-thinking budget in tokens (``None``: thinking off). It must
            be at least 1,024 and below ``max_tokens``. The thinking blocks of a reply are
            kept, signatures and all, in ``Message.extra["thinking_blocks"]`` (JSON, so they
            survive checkpoints and conversation stores) and sent back with the assistant
            turn, as the API requires on the next tool-use turn; their text is also in
            ``extra["reasoning_content"]``.
        prompt_caching: put ``cache_control`` breakpoints on the system prompt, the tools
            and the end of the history, so that each call of an agent loop reads the prefix
            the previous call wrote from Anthropic's cache (``TokenUsage.cached_tokens``,
            priced at ``ModelPricing.cached_input_per_million``) and writes only what is new
            (``TokenUsage.cache_write_tokens``, at ``cache_write_per_million``). On by
            default; ``False`` sends no breakpoints.
        tool_search: the server-side tool search that finds deferred tools
            (``deferred=True`` in a :class:`~agentkit.ToolInfo`): ``"regex"`` (the
            model writes regular expressions, ``tool_search_tool_regex_20251119``) or
            ``"bm25"`` (natural-language queries, ``tool_search_tool_bm25_20251119``). It is
            sent only when a bound tool is deferred; each deferred tool goes with
            ``"defer_loading": true``. The search's ``server_tool_use`` and
            ``tool_search_tool_result`` blocks are kept in
            ``Message.extra["server_tool_blocks"]`` and sent back with the assistant turn,
            in the order the reply had them among its texts and tool calls (kept in
            ``extra["block_order"]`` when it is not thinking, server blocks, text, tool
            calls); they are no tool calls for the agent to run (a found tool's
            ``tool_use`` is).
        max_continuations: how many times a turn Anthropic paused (``stop_reason``
            ``pause_turn``: its server tools, such as a long tool search, are still
            working) is continued: the paused content is sent back as it is, with the same
            tools, as Anthropic documents, and the replies are joined into one (streamed:
            each one's chunks in turn, as chunks of one reply; usage added up). A turn
            still paused after that many continuations raises a
            :class:`~agentkit.ModelError` saying so.
        **defaults: default :class:`~agentkit.models.ModelOptions` fields for every call.

    ``timeout``, ``max_retries``, ``http_client``, ``max_response_bytes``, ``pricing``,
    ``concurrency`` and ``rate_limit`` are those of :class:`~agentkit.models.OpenAIChatModel`
    and behave the same: a total deadline per call (for a stream: to the first chunk, then
    between data chunks), a cancel reaching the request in flight, the response size cap,
    shared limits.

    Retries connection errors, timeouts and HTTP 408, 409, 429, 5xx and 529 (``overloaded``)
    with backoff, honouring ``retry-after``. Errors are the :class:`~agentkit.ModelError`
    subclasses :class:`~agentkit.models.OpenAIChatModel` raises; an ``error`` event inside a
    stream (such as ``overloaded_error``) is a :class:`~agentkit.ModelError` with Anthropic's
    message. ``stop_reason`` becomes the finish reason (``max_tokens``: ``"length"``;
    ``refusal``: ``"content_filter"``, with ``extra["refusal"]``, never an empty answer).
    Structured output (a ``response_format`` of type ``json_schema`` in
    ``ModelOptions.extra``) is sent as ``output_config.format``. Thread-safe; a context
    manager.

    Example::

        with AnthropicChatModel("claude-sonnet-4-5", thinking=2048) as model:
            reply = model.generate([user_message("Say hi")])
    """

    _key_env = "ANTHROPIC_API_KEY"
    _base_url_env = "ANTHROPIC_BASE_URL"
    _default_base_url = DEFAULT_ANTHROPIC_BASE_URL
    _example_model = "claude-sonnet-4-5"
    _path = "/v1/messages"
    _stream_type = AnthropicStream
    _tool_search = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 4096,
        thinking: int | None = None,
        prompt_caching: bool = True,
        tool_search: str = "regex",
        max_continuations: int = 5,
        timeout: float = 60.0,
        max_retries: int = 3,
        http_client: httpx.Client | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
        pricing: ModelPricing | None = None,
        concurrency: ConcurrencyLimiter | None = None,
        rate_limit: RateLimiter | None = None,
        **defaults: Any,
    ) -> None:
        _check_budget(max_tokens, thinking)
        if tool_search not in TOOL_SEARCH_TOOLS:
            raise AgentKitValueError(
                f"tool_search is the server-side tool search for deferred tools, 'regex' or "
                f"'bm25' (got {tool_search!r})"
            )
        if (
            isinstance(max_continuations, bool)
            or not isinstance(max_continuations, int)
            or max_continuations < 0
        ):
            raise AgentKitValueError(
                "max_continuations is how many times a paused turn (stop_reason "
                f"'pause_turn') is continued, an int >= 0 (got {max_continuations!r})"
            )
        encoded = EncodedMessages(message_blocks)
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
        self._max_tokens = max_tokens
        self._thinking = thinking
        self._caching = bool(prompt_caching)
        self._search = tool_search
        self._continuations = max_continuations
        self._encode = encoded.encode
        self._tools_json = b""
        self._heads = self._make_heads()

    @property
    def max_tokens(self) -> int:
        """The most tokens a reply may have when the call's options say nothing."""
        return self._max_tokens

    @property
    def thinking(self) -> int | None:
        """The extended-thinking budget in tokens (``None``: off)."""
        return self._thinking

    @property
    def prompt_caching(self) -> bool:
        """Whether requests carry ``cache_control`` breakpoints."""
        return self._caching

    @property
    def tool_search(self) -> str:
        """The server-side tool search sent with deferred tools (``"regex"`` or ``"bm25"``)."""
        return self._search

    @property
    def max_continuations(self) -> int:
        """How many times a paused turn (``stop_reason`` ``pause_turn``) is continued."""
        return self._continuations

    # -- calls -----------------------------------------------------------------------------

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        """Send ``messages`` and return the assistant's reply (a paused turn continued until
        it ends, at most ``max_continuations`` times).

        Raises:
            ModelError: the request failed after its retries, the response was malformed,
                or the turn was still paused after ``max_continuations`` continuations.
            AgentCancelledError: inside a run, the run was cancelled immediately.
        """
        reply = super().generate(messages, options)
        continuations = 0
        while is_paused(reply):
            if continuations == self._continuations:
                raise too_often(continuations)
            continuations += 1
            more = self._send(self._body(messages, options, stream=False, paused=reply), options)
            reply = joined(reply, more)
        return reply

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        """Send ``messages`` and return the reply as a stream of message chunks.

        As :meth:`OpenAIChatModel.stream <agentkit.models.OpenAIChatModel.stream>`; a turn
        Anthropic paused goes on in the same stream (at most ``max_continuations`` times):
        the chunks of each continuation follow, and the last chunk carries the usage of the
        whole turn. Closing the reader closes the request in flight.
        """
        turn = ContinuedStream(
            self._open_stream,
            lambda paused: self._stream_call(
                self._body(messages, options, stream=True, paused=paused), options
            ),
            self._continuations,
        )
        opened = turn.open(self._stream_call(self._body(messages, options, stream=True), options))
        batches = turn.batches(opened)
        pricing = self._pricing
        if pricing is not None:
            batches = ([priced(chunk, pricing) for chunk in batch] for batch in batches)
        return stream_from_batches(batches, on_close=turn.close, abort=turn.abort)

    # -- request building ------------------------------------------------------------------

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def _tools_changed(self) -> None:
        self._tools_json = (
            tools_json(self._tools, self._caching, self._search) if self._tools else b""
        )
        self._heads = self._make_heads()

    def _make_heads(self) -> dict[bool, bytes]:
        return {stream: self._head(self._defaults, stream) for stream in (False, True)}

    def _head(self, options: ModelOptions, stream: bool) -> bytes:
        """The body's bytes before ``system``, ``tools`` and ``messages`` (no closing brace)."""
        fields = request_fields(self._model, options, self._max_tokens, self._thinking, stream)
        head = encode_json(fields)[:-1]
        if self._tools_json and "tools" not in fields:
            head += b',"tools":' + self._tools_json
        return head

    def _body(
        self,
        messages: Sequence[Message],
        options: ModelOptions | None,
        stream: bool,
        paused: Message | None = None,
    ) -> bytes:
        """The request body; with ``paused``, the one continuing that paused turn: its
        content last, as it came, after the history's cache breakpoint."""
        if options is None:
            head = self._heads[stream]
        else:
            head = self._head(self._defaults.merge(options), stream)
        system = system_json(messages, self._caching)
        turns = [m for m in messages if m.role is not Role.SYSTEM]
        encoded = self._encode(turns)  # a new list: ours to change
        if self._caching and encoded:
            encoded[-1] = with_cache_control(encoded[-1])
        if paused is not None:
            turns = [*turns, paused]
            encoded.append(message_blocks(paused))
        return b"".join(
            (
                head,
                b',"system":' + system if system else b"",
                b',"messages":[',
                join_turns(turns, encoded, _USER, _ASSISTANT),
                b"]}",
            )
        )

    def _parse_reply(self, content: bytes, url: str, status: int) -> Message:
        return parse_message(content, url, status)


def _check_budget(max_tokens: object, thinking: object) -> None:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise AgentKitValueError(f"max_tokens must be an int >= 1 (got {max_tokens!r})")
    if thinking is None:
        return
    if isinstance(thinking, bool) or not isinstance(thinking, int) or thinking < 1024:
        raise AgentKitValueError(
            f"thinking is the thinking budget in tokens, an int >= 1024, or None for no "
            f"extended thinking (got {thinking!r})"
        )
    if thinking >= max_tokens:
        raise AgentKitValueError(
            f"the thinking budget ({thinking}) must be below max_tokens ({max_tokens}): "
            f"pass a larger AnthropicChatModel(..., max_tokens=...)"
        )


# Defined here; documented and imported as agentkit.models.AnthropicChatModel.
present((AnthropicChatModel,), "agentkit.models")
