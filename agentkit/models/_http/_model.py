"""The base of the HTTP chat models: :class:`HTTPChatModel`.

One call is one :class:`~agentkit.models._http._stream.Call`: its attempts share a deadline
and a guard a cancel can abort, retries wait (cancellably) for the server's ``retry-after``
or a backoff, and each attempt takes its turn under the model's limits. A subclass says what
its wire is: where a request goes, its headers, how messages become a body
(:meth:`HTTPChatModel._body`), how a whole reply is read (:meth:`HTTPChatModel._parse_reply`)
and which :class:`~agentkit.models._http._stream.EventStream` reads a streamed one.
"""

from __future__ import annotations

import abc
import copy
import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar

import attrs
import httpx

from agentkit._runctx import abort_on_cancel, cancellable_sleep, current_frame
from agentkit._throttle import ConcurrencyLimiter, RateLimiter
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
from agentkit.models._base import ModelOptions, ToolCallingChatModel, ToolSearchUnsupportedError
from agentkit.models._http._body import check_max_response_bytes, read_body
from agentkit.models._http._limits import CallLimits, check_limits
from agentkit.models._http._retry import (
    STATUS_ERRORS,
    is_retryable,
    parse_retry_after,
    server_message,
    status_hint,
)
from agentkit.models._http._stream import Call, EventStream, Target
from agentkit.models._http._transport import _current, make_client
from agentkit.schema import Message, ToolInfo
from agentkit.streams import StreamReader, stream_from_batches

if TYPE_CHECKING:
    from agentkit._limits import ModelPricing

__all__ = ["HTTPChatModel", "Target"]

_T = TypeVar("_T")

# tenacity computes the backoff (imported on the first retry: a run that never retries never
# imports it). The retry loop itself is HTTPChatModel._with_retries.
_retry_state_owner: Any = None


def add_note(error: BaseException, note: str) -> None:
    """Add ``note`` to ``error`` where Python has notes (3.11+)."""
    add = getattr(error, "add_note", None)
    if add is not None:
        add(note)


def checked_pricing(pricing: object) -> ModelPricing | None:
    """Return ``pricing``, refusing anything but a ``ModelPricing`` (or ``None``)."""
    from agentkit._limits import ModelPricing

    if pricing is not None and not isinstance(pricing, ModelPricing):
        raise AgentKitTypeError(
            f"pricing must be a ModelPricing (got {pricing!r}); write "
            "pricing=ModelPricing(input_per_million=..., output_per_million=...)"
        )
    return pricing


def priced(message: Message, pricing: ModelPricing) -> Message:
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
        yield [priced(chunk, pricing) for chunk in batch]


class Shared:
    """What a model shares with its tool-bound copies: the httpx client and a wire's cache."""

    __slots__ = ("cache", "client", "owned")

    def __init__(self, client: httpx.Client, owned: bool, cache: Any = None) -> None:
        self.client = client
        self.owned = owned
        self.cache = cache  # an object with clear(), or None


class HTTPChatModel(BuiltValue, abc.ABC):
    """A chat model over HTTP: the shared machinery of every wire (see the module docstring).

    A value once built (see :class:`~agentkit._values.BuiltValue`): a write to a public
    attribute raises; :meth:`replace` makes a changed copy.

    Subclasses set the class attributes and implement :meth:`_body` and :meth:`_parse_reply`
    (and :meth:`_headers` or :meth:`_target` where their wire differs from the defaults).
    """

    retry_initial_delay: ClassVar[float] = 0.5
    """Backoff before the first retry, in seconds, when the server sends no ``Retry-After``."""
    retry_max_delay: ClassVar[float] = 8.0
    """The longest backoff between two attempts, in seconds."""

    _key_env: ClassVar[str] = ""
    _base_url_env: ClassVar[str] = ""
    _default_base_url: ClassVar[str] = ""
    _example_model: ClassVar[str] = ""
    _path: ClassVar[str] = ""  # where requests go, under the base URL
    _stream_type: ClassVar[type[EventStream]]  # each wire names its own
    _tool_search: ClassVar[bool] = False  # whether the API searches deferred tools itself

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        timeout: float,
        max_retries: int,
        http_client: httpx.Client | None,
        max_response_bytes: int | None,
        pricing: ModelPricing | None,
        concurrency: ConcurrencyLimiter | None,
        rate_limit: RateLimiter | None,
        defaults: ModelOptions,
        cache: Any = None,
    ) -> None:
        self._check_arguments(model, timeout, max_retries)
        check_limits(concurrency, rate_limit)
        self._pricing = checked_pricing(pricing)
        self._defaults = defaults
        self._model = model
        api_key = api_key if api_key is not None else os.environ.get(self._key_env)
        self._base_url = (
            base_url or os.environ.get(self._base_url_env) or self._default_base_url
        ).rstrip("/")
        self._destination = Target(self._base_url + self._path)
        self._timeout_seconds = float(timeout)
        self._timeout = httpx.Timeout(timeout)
        self._max_retries = max_retries
        self._max_response_bytes = check_max_response_bytes(max_response_bytes)
        headers = self._headers(api_key)
        # An owned client carries the headers and the timeout itself, which spares httpx a
        # merge per request; a client passed in gets them with every request instead.
        self._request_headers: dict[str, str] | None
        self._request_timeout: httpx.Timeout | Any
        if http_client is None:
            self._http = Shared(make_client(self._timeout, headers), True, cache)
            self._request_headers = None
            self._request_timeout = httpx.USE_CLIENT_DEFAULT
        else:
            self._http = Shared(http_client, False, cache)
            self._request_headers = headers
            self._request_timeout = self._timeout
        self._client = self._http.client
        self._backoff: Any = None  # made on the first retry, see _delay
        self._limits: CallLimits | None = None  # None: the calls do no work for limits
        if concurrency is not None or rate_limit is not None:
            site = CallSite("ChatModel", model, type(self).__name__)
            self._limits = CallLimits(concurrency, rate_limit, site)
        self._tools: tuple[ToolInfo, ...] = ()

    # -- what a subclass provides ---------------------------------------------------------

    def _headers(self, api_key: str | None) -> dict[str, str]:
        """Return the headers of every request (by default, the key as a bearer token)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        return headers

    def _target(self, options: ModelOptions | None, stream: bool) -> Target:
        """Return where a call with ``options`` goes (by default ``base_url`` + ``_path``)."""
        return self._destination

    @abc.abstractmethod
    def _body(
        self, messages: Sequence[Message], options: ModelOptions | None, stream: bool
    ) -> bytes:
        """Return the request body of a call."""

    @abc.abstractmethod
    def _parse_reply(self, content: bytes, url: str, status: int) -> Message:
        """Return the reply of a whole (non-streamed) response body."""

    def _tools_changed(self) -> None:
        """Recompute what depends on the bound tools (called by :meth:`with_tools`)."""

    def _retry_after(self, headers: httpx.Headers, body: Any) -> float | None:
        """The delay an error response asks for before a retry (``None``: none asked)."""
        return parse_retry_after(headers)

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
        """Return a model bound to ``tools`` sharing these connections; this one is unchanged.

        Raises:
            ToolSearchUnsupportedError: a tool is deferred and this model's API has no
                server-side tool search.
        """
        if not self._tool_search:
            deferred = [tool.name for tool in tools if tool.deferred]
            if deferred:
                raise ToolSearchUnsupportedError(
                    f"{type(self).__name__} has no server-side tool search, so it cannot "
                    f"take deferred tools ({', '.join(map(repr, deferred))}); use "
                    "ToolSearchMiddleware(tools) without use_model_tool_search=True (its "
                    "tool_search tool works with every model), or a model that searches "
                    "its tools itself (AnthropicChatModel, OpenAIResponsesModel)"
                )
        bound = copy.copy(self)
        bound._tools = tuple(tools)
        bound._tools_changed()
        return bound

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        """Send ``messages`` and return the assistant's reply.

        Raises:
            ModelError: the request failed after its retries, or the response was malformed.
            AgentCancelledError: inside a run, the run was cancelled immediately.
        """
        return self._send(self._body(messages, options, stream=False), options)

    def _send(self, body: bytes, options: ModelOptions | None) -> Message:
        """Send one request body of :meth:`generate` and return the (priced) reply."""
        call = Call(body, self._timeout_seconds, None)
        call.target = self._target(options, False)
        if self._limits is None:
            reply = self._call(self._attempt_generate, call)
        else:
            reply = self._call(self._limited_generate, call)
        if self._pricing is not None:
            return priced(reply, self._pricing)
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
        call = self._stream_call(self._body(messages, options, stream=True), options)
        opened = self._open_stream(call)
        batches: Iterator[list[Message]] = opened.chunks()
        if self._pricing is not None:
            batches = _priced_batches(batches, self._pricing)
        return stream_from_batches(batches, on_close=opened.close, abort=call.guard.abort)

    def _stream_call(self, body: bytes, options: ModelOptions | None) -> Call:
        """The call of one request body of :meth:`stream` (made, not sent)."""
        call = Call(body, self._timeout_seconds, None)
        call.target = self._target(options, True)
        return call

    def _open_stream(self, call: Call) -> EventStream:
        """Send ``call`` (with its retries) and return its stream once the first chunks came;
        its chunks are not priced."""
        attempt = self._attempt_open_stream if self._limits is None else self._limited_open_stream
        return self._call(attempt, call)

    def close(self) -> None:
        """Close the connection pool if this model made it (shared with its tool-bound copies).

        Also drops what the model kept for the next calls (encoded messages).
        """
        if self._http.cache is not None:
            self._http.cache.clear()
        if self._http.owned:
            self._http.client.close()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self._model!r}, base_url={self._base_url!r}, "
            f"tools={[tool.name for tool in self._tools]!r})"
        )

    # -- arguments -------------------------------------------------------------------------

    def _check_arguments(self, model: object, timeout: object, max_retries: object) -> None:
        """Raise a ``ValueError`` that says which argument of the model is wrong."""
        owner = type(self).__name__
        if not isinstance(model, str) or not model:
            raise AgentKitValueError(
                f"{owner} needs a model name as its first argument (got {model!r}), "
                f"such as {owner}({self._example_model!r})"
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise AgentKitValueError(
                f"max_retries must be an int >= 0, the retries after a failed attempt "
                f"(got {max_retries!r})"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise AgentKitValueError(f"timeout must be a number of seconds > 0 (got {timeout!r})")

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
                    add_note(
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
            add_note(error, f"gave up after {call.attempts} attempts")

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
        url = call.target.url
        if isinstance(error, httpx.TimeoutException):
            raise APITimeoutError(
                f"no answer from {url} within {self._timeout_seconds} s, the call's "
                f"timeout ({type(error).__name__}); if the model needs longer, pass a "
                f"larger {type(self).__name__}(..., timeout=...)"
            ) from error
        raise APIConnectionError(
            f"could not talk to {url} ({type(error).__name__}: {error}); check "
            f"base_url (or {self._base_url_env}) and that the server is running and reachable"
        ) from error

    def _status_error(self, response: httpx.Response, content: bytes, call: Call) -> APIStatusError:
        status = response.status_code
        body: Any
        try:
            body = json.loads(content)
        except ValueError:
            body = content.decode("utf-8", "replace")
        message = server_message(body) or response.reason_phrase or "no error message"
        call.retry_after = self._retry_after(response.headers, body)
        error_type = STATUS_ERRORS.get(status, APIStatusError)
        return error_type(
            f"HTTP {status} from {call.target.url}: {message}{status_hint(status, self._key_env)}",
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

    def _limited_open_stream(self, call: Call) -> EventStream:
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
        target = call.target
        request = client.build_request(
            "POST",
            target.request_url,
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
                content = read_body(
                    response,
                    call.guard,
                    self._max_response_bytes,
                    target.url,
                    type(self).__name__,
                )
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
        return self._parse_reply(content, target.url, response.status_code)

    def _attempt_open_stream(self, call: Call) -> EventStream:
        if call.guard.aborted:
            raise call.cancelled()
        call.attempts += 1
        call.retry_after = None
        client = self._client
        target = call.target
        request = client.build_request(
            "POST",
            target.request_url,
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
        opened = self._stream_type(
            response,
            target.url,
            call,
            self._timeout_seconds,
            limit,
            attach=not self._http.owned,
        )
        try:
            plain = response.headers.get("content-type", "").startswith("application/json")
            if plain or not response.is_success:
                previous, local.guard = local.guard, call.guard
                try:
                    content = read_body(
                        response, call.guard, limit, target.url, type(self).__name__
                    )
                except httpx.TransportError as error:
                    self._transport_error(error, call)
                finally:
                    local.guard = previous
                    opened.detach()
                if not response.is_success:
                    raise self._status_error(response, content, call)
                # The server ignored the stream request and sent a whole reply: one chunk.
                opened.first = [self._parse_reply(content, target.url, response.status_code)]
            else:
                opened.read_first()
            return opened
        except BaseException:
            opened.close()
            raise


_Self = TypeVar("_Self", bound=HTTPChatModel)
