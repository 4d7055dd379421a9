"""The client class: :class:`OpenAIChatModel`."""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar

import attrs
import httpx

from agentkit._runctx import abort_on_cancel, cancellable_sleep, current_frame
from agentkit._values import BuiltValue
from agentkit._waiting import CallSite
from agentkit.errors import (
    AgentKitTypeError,
    AgentKitValueError,
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    ModelError,
    RateLimitError,
)
from agentkit.models.base import ModelOptions, ToolCallingChatModel
from agentkit.models.openai._body import (
    DEFAULT_MAX_RESPONSE_BYTES,
    check_max_response_bytes,
    read_body,
)
from agentkit.models.openai._encoded import EncodedMessages
from agentkit.models.openai._limits import CallLimits, check_limits
from agentkit.models.openai._retry import (
    STATUS_ERRORS,
    is_retryable,
    parse_retry_after,
    status_hint,
)
from agentkit.models.openai._stream import Call, OpenStream
from agentkit.models.openai._transport import _current, make_client
from agentkit.models.openai._wire import (
    encode_json,
    parse_completion,
    request_fields,
    server_message,
    tools_bytes,
)
from agentkit.schema import Message, ToolInfo
from agentkit.streams import StreamReader, stream_from_batches
from agentkit.throttle import ConcurrencyLimiter, RateLimiter

if TYPE_CHECKING:
    from agentkit.limits import ModelPricing

__all__ = ["DEFAULT_BASE_URL", "OpenAIChatModel"]

_T = TypeVar("_T")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where requests go when neither ``base_url`` nor ``OPENAI_BASE_URL`` is given."""


# tenacity computes the backoff (imported on the first retry: a run that never retries never
# imports it). The retry loop itself is OpenAIChatModel._with_retries.
_retry_state_owner: Any = None


def _add_note(error: BaseException, note: str) -> None:
    add_note = getattr(error, "add_note", None)  # Python 3.11+
    if add_note is not None:
        add_note(note)


def _check_arguments(model: object, timeout: object, max_retries: object) -> None:
    """Raise a ``ValueError`` that says which argument of ``OpenAIChatModel`` is wrong."""
    if not isinstance(model, str) or not model:
        raise AgentKitValueError(
            f"OpenAIChatModel needs a model name as its first argument (got {model!r}), "
            'such as OpenAIChatModel("gpt-4o-mini")'
        )
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise AgentKitValueError(
            f"max_retries must be an int >= 0, the retries after a failed attempt "
            f"(got {max_retries!r})"
        )
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise AgentKitValueError(f"timeout must be a number of seconds > 0 (got {timeout!r})")


def _checked_pricing(pricing: object) -> ModelPricing | None:
    from agentkit.limits import ModelPricing

    if pricing is not None and not isinstance(pricing, ModelPricing):
        raise AgentKitTypeError(
            f"pricing must be a ModelPricing (got {pricing!r}); write "
            "pricing=ModelPricing(input_per_million=..., output_per_million=...)"
        )
    return pricing


def _priced(message: Message, pricing: ModelPricing) -> Message:
    """``message`` with the cost of the usage it reports (itself when it reports none)."""
    meta = message.response_meta
    if meta is None or meta.usage is None or meta.cost is not None:
        return message
    return attrs.evolve(message, response_meta=attrs.evolve(meta, cost=pricing.cost(meta.usage)))


def _priced_batches(
    batches: Iterator[list[Message]], pricing: ModelPricing
) -> Iterator[list[Message]]:
    """The chunks of a stream, the one with the usage priced."""
    for batch in batches:
        yield [_priced(chunk, pricing) for chunk in batch]


class _Shared:
    """What a model shares with its tool-bound copies: the httpx client and the encodings."""

    __slots__ = ("client", "encoded", "owned")

    def __init__(self, client: httpx.Client, owned: bool) -> None:
        self.client = client
        self.owned = owned
        self.encoded = EncodedMessages()


class OpenAIChatModel(BuiltValue):
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
        pricing: what the model's tokens cost (a :class:`~agentkit.limits.ModelPricing`):
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
    :class:`~agentkit.SlotTimeoutError`, not retried). A stream is never
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

    retry_initial_delay: ClassVar[float] = 0.5
    """Backoff before the first retry, in seconds, when the server sends no ``Retry-After``."""
    retry_max_delay: ClassVar[float] = 8.0
    """The longest backoff between two attempts, in seconds."""

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
        _check_arguments(model, timeout, max_retries)
        check_limits(concurrency, rate_limit)
        self._pricing = _checked_pricing(pricing)
        self._defaults = ModelOptions.from_kwargs(**defaults)
        self._model = model
        api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip(
            "/"
        )
        self._url = self._base_url + "/chat/completions"
        # Parsed once: httpx parses a URL given as text on every request (~12 us). A URL it
        # cannot parse stays text, so that the request reports it, as it always has.
        self._request_url: httpx.URL | str = self._url
        with contextlib.suppress(httpx.InvalidURL):
            self._request_url = httpx.URL(self._url)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._timeout_seconds = float(timeout)
        self._timeout = httpx.Timeout(timeout)
        self._max_retries = max_retries
        self._max_response_bytes = check_max_response_bytes(max_response_bytes)
        # An owned client carries the headers and the timeout itself, which spares httpx a
        # merge per request; a client passed in gets them with every request instead.
        self._request_headers: dict[str, str] | None
        self._request_timeout: httpx.Timeout | Any
        if http_client is None:
            self._http = _Shared(make_client(self._timeout, headers), owned=True)
            self._request_headers = None
            self._request_timeout = httpx.USE_CLIENT_DEFAULT
        else:
            self._http = _Shared(http_client, owned=False)
            self._request_headers = headers
            self._request_timeout = self._timeout
        self._client = self._http.client
        self._encode = self._http.encoded.encode
        self._backoff: Any = None  # made on the first retry, see _delay
        self._limits: CallLimits | None = None  # None: the calls do no work for limits
        if concurrency is not None or rate_limit is not None:
            site = CallSite("ChatModel", model, type(self).__name__)
            self._limits = CallLimits(concurrency, rate_limit, site)
        self._tools: tuple[ToolInfo, ...] = ()
        self._tools_json = b""
        self._envelopes = self._make_envelopes()

    # -- public surface --------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The model name sent when the call's options name none."""
        return self._model

    @property
    def base_url(self) -> str:
        """The API root requests go to (without a trailing slash)."""
        return self._base_url

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        """The tools this model is bound to."""
        return self._tools

    @property
    def defaults(self) -> ModelOptions:
        """The default options of every call."""
        return self._defaults

    @property
    def pricing(self) -> ModelPricing | None:
        """What this model's tokens cost (``None``: its replies carry no cost)."""
        return self._pricing

    @property
    def concurrency(self) -> ConcurrencyLimiter | None:
        """The concurrency limit the requests take a slot of (``None``: none)."""
        return None if self._limits is None else self._limits.concurrency

    @property
    def rate_limit(self) -> RateLimiter | None:
        """The rate limit the requests take their place in (``None``: none)."""
        return None if self._limits is None else self._limits.rate

    def with_tools(self, tools: Sequence[ToolInfo]) -> ToolCallingChatModel:
        """Return a model bound to ``tools`` sharing these connections; this one is unchanged."""
        bound = copy.copy(self)
        bound._tools = tuple(tools)
        bound._tools_json = tools_bytes(bound._tools) if bound._tools else b""
        bound._envelopes = bound._make_envelopes()
        return bound

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        """Send ``messages`` and return the assistant's reply.

        Raises:
            ModelError: the request failed after its retries, or the response was malformed.
            AgentCancelledError: inside a run, the run was cancelled immediately.
        """
        call = Call(self._body(messages, options, stream=False), self._timeout_seconds, None)
        if self._limits is None:
            reply = self._call(self._attempt_generate, call)
        else:
            reply = self._call(self._limited_generate, call)
        if self._pricing is not None:
            return _priced(reply, self._pricing)
        return reply

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        """Send ``messages`` and return the reply as a stream of message chunks.

        This call returns once the first chunk has arrived: an error before it (retries
        included) is raised here. Chunks are then read from the connection as the reader
        asks for them; an error later on (a broken or stalled stream, an error the server
        sends inside the stream) is raised by the reader, and a stream that ends before the
        server finished it raises :class:`~agentkit.errors.IncompleteStreamError`. Closing
        the reader early closes the response; from another thread while a read is blocked,
        it aborts that read, which raises :class:`~agentkit.AgentCancelledError`. Chunks
        carry tool-call fragments with ``index`` set, and the last ones the finish reason
        and token usage: merge them with ``concat_messages``.
        """
        call = Call(self._body(messages, options, stream=True), self._timeout_seconds, None)
        attempt = self._attempt_open_stream if self._limits is None else self._limited_open_stream
        opened: OpenStream = self._call(attempt, call)
        batches: Iterator[list[Message]] = opened.chunks()
        if self._pricing is not None:
            batches = _priced_batches(batches, self._pricing)
        return stream_from_batches(batches, on_close=opened.close, abort=call.guard.abort)

    def close(self) -> None:
        """Close the connection pool if this model made it (shared with its tool-bound copies).

        Also drops the encoded messages kept for the next calls.
        """
        self._http.encoded.clear()
        if self._http.owned:
            self._http.client.close()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"OpenAIChatModel(model={self._model!r}, base_url={self._base_url!r}, "
            f"tools={[tool.name for tool in self._tools]!r})"
        )

    # -- request building ------------------------------------------------------------------

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

    # -- attempts --------------------------------------------------------------------------

    def _call(self, attempt: Callable[[Call], _T], call: Call) -> _T:
        """Run ``attempt`` with retries; inside a run, let a cancel abort it."""
        frame = current_frame()
        if frame is None:
            return self._with_retries(attempt, call)
        call.frame = frame
        # Raises the cancel error before any request when the run is being cancelled.
        with abort_on_cancel(call.guard.abort):
            return self._with_retries(attempt, call)

    def _with_retries(self, attempt: Callable[[Call], _T], call: Call) -> _T:
        while True:
            try:
                return attempt(call)
            except ModelError as error:
                if call.attempts > self._max_retries or not is_retryable(error):
                    self._note_attempts(error, call)
                    raise
                delay = self._delay(call)
                if delay >= call.guard.remaining():
                    _add_note(
                        error,
                        f"not retried: the next attempt would start after the call's "
                        f"timeout of {self._timeout_seconds} s",
                    )
                    self._note_attempts(error, call)
                    raise
            # Inside a run, a cancel ends the wait at once (with the cancel error).
            cancellable_sleep(delay)

    @staticmethod
    def _note_attempts(error: ModelError, call: Call) -> None:
        if call.attempts > 1:
            _add_note(error, f"gave up after {call.attempts} attempts")

    def _delay(self, call: Call) -> float:
        """Seconds to wait after the failed attempts of ``call``."""
        if call.retry_after is not None:
            return call.retry_after
        global _retry_state_owner
        import tenacity

        if _retry_state_owner is None:
            _retry_state_owner = tenacity.Retrying()
        if self._backoff is None:
            # Doubling delays plus up to half the first one at random, so that clients that
            # failed together do not retry together.
            self._backoff = tenacity.wait_exponential(
                multiplier=self.retry_initial_delay, max=self.retry_max_delay
            ) + tenacity.wait_random(0, self.retry_initial_delay / 2)
        state = tenacity.RetryCallState(_retry_state_owner, None, (), {})
        state.attempt_number = call.attempts
        return float(self._backoff(state))

    def _transport_error(self, error: httpx.TransportError, call: Call) -> NoReturn:
        if call.guard.aborted:
            raise call.cancelled() from error
        if isinstance(error, httpx.TimeoutException):
            raise APITimeoutError(
                f"no answer from {self._url} within {self._timeout_seconds} s, the call's "
                f"timeout ({type(error).__name__}); if the model needs longer, pass a "
                "larger OpenAIChatModel(..., timeout=...)"
            ) from error
        raise APIConnectionError(
            f"could not talk to {self._url} ({type(error).__name__}: {error}); check "
            "base_url (or OPENAI_BASE_URL) and that the server is running and reachable"
        ) from error

    def _status_error(self, response: httpx.Response, content: bytes, call: Call) -> APIStatusError:
        status = response.status_code
        body: Any
        try:
            body = json.loads(content)
        except ValueError:
            body = content.decode("utf-8", "replace")
        message = server_message(body) or response.reason_phrase or "no error message"
        call.retry_after = parse_retry_after(response.headers)
        error_type = STATUS_ERRORS.get(status, APIStatusError)
        return error_type(
            f"HTTP {status} from {self._url}: {message}{status_hint(status)}",
            status_code=status,
            body=body,
        )

    def _limited_generate(self, call: Call) -> Message:
        """One attempt of ``generate`` under the model's limits (see ``_limits``)."""
        limits = self._limits
        if limits is None:
            return self._attempt_generate(call)
        admission = limits.admit(call.body, call.guard.remaining())
        try:
            reply = self._attempt_generate(call)
        except BaseException as error:
            admission.release()
            self._note_rate_limited(error, call, limits)
            raise
        meta = reply.response_meta
        usage = None if meta is None else meta.usage
        admission.release(None if usage is None else usage.total_tokens)
        return reply

    def _limited_open_stream(self, call: Call) -> OpenStream:
        """One attempt of ``stream`` under the model's limits: the stream holds its turn."""
        limits = self._limits
        if limits is None:
            return self._attempt_open_stream(call)
        admission = limits.admit(call.body, call.guard.remaining())
        try:
            opened = self._attempt_open_stream(call)
        except BaseException as error:
            admission.release()
            self._note_rate_limited(error, call, limits)
            raise
        opened.admission = admission  # released when the stream ends or is closed
        return opened

    def _note_rate_limited(self, error: BaseException, call: Call, limits: CallLimits) -> None:
        """After an HTTP 429, pause the shared rate for the retry's delay (everyone waits)."""
        if limits.rate is None or not isinstance(error, RateLimitError):
            return
        if call.retry_after is None:
            # No Retry-After: the back-off this call would wait, which the retry then uses.
            call.retry_after = self._delay(call)
        limits.rate_limited(call.retry_after)

    def _attempt_generate(self, call: Call) -> Message:
        if call.guard.aborted:
            raise call.cancelled()
        call.attempts += 1
        call.retry_after = None
        client = self._client
        request = client.build_request(
            "POST",
            self._request_url,
            content=call.body,
            headers=self._request_headers,
            timeout=self._request_timeout,
        )
        # The guard is current while httpx works, so the socket layer obeys its deadline
        # and abort (see _transport).
        local = _current
        previous, local.guard = local.guard, call.guard
        try:
            response = client.send(request, stream=True)
            try:
                content = read_body(response, call.guard, self._max_response_bytes, self._url)
            finally:
                response.close()
        except httpx.TransportError as error:
            self._transport_error(error, call)
        finally:
            local.guard = previous
        if call.guard.aborted:
            raise call.cancelled()
        if not response.is_success:
            raise self._status_error(response, content, call)
        return parse_completion(content, self._url, response.status_code)

    def _attempt_open_stream(self, call: Call) -> OpenStream:
        if call.guard.aborted:
            raise call.cancelled()
        call.attempts += 1
        call.retry_after = None
        client = self._client
        request = client.build_request(
            "POST",
            self._request_url,
            content=call.body,
            headers=self._request_headers,
            timeout=self._request_timeout,
        )
        local = _current
        previous, local.guard = local.guard, call.guard
        try:
            response = client.send(request, stream=True)
        except httpx.TransportError as error:
            self._transport_error(error, call)
        finally:
            local.guard = previous
        limit = self._max_response_bytes
        opened = OpenStream(
            response, self._url, call, self._timeout_seconds, limit, attach=not self._http.owned
        )
        try:
            plain = response.headers.get("content-type", "").startswith("application/json")
            if plain or not response.is_success:
                previous, local.guard = local.guard, call.guard
                try:
                    content = read_body(response, call.guard, limit, self._url)
                except httpx.TransportError as error:
                    self._transport_error(error, call)
                finally:
                    local.guard = previous
                    opened.detach()
                if not response.is_success:
                    raise self._status_error(response, content, call)
                # The server ignored stream=true and sent a whole completion: one chunk.
                opened.first = [parse_completion(content, self._url, response.status_code)]
            else:
                opened.read_first()
            return opened
        except BaseException:
            opened.close()
            raise
