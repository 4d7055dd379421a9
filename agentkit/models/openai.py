"""An OpenAI-compatible Chat Completions client: :class:`OpenAIChatModel`.

It speaks the ``POST {base_url}/chat/completions`` protocol that OpenAI, Ollama, vLLM,
DeepSeek, llama.cpp's server, LiteLLM and many other servers implement, over one shared,
thread-safe :class:`httpx.Client`.

Per-call cost is kept flat as a conversation grows: each message is encoded to JSON once
and the bytes are cached on the message (in its private ``_wire`` slot, which the message
drops whenever one of its fields is set), so a request body is a join of cached pieces.
The tool list is encoded once per bound model and the retry policy once per model.
"""

from __future__ import annotations

import copy
import datetime
import email.utils
import itertools
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, NoReturn, TypeVar

import httpx
import tenacity

from agentkit.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    IncompleteStreamError,
    ModelError,
    PermissionDeniedError,
    RateLimitError,
)
from agentkit.models.base import ModelOptions, ToolCallingChatModel
from agentkit.schema import (
    FunctionCall,
    Message,
    ResponseMeta,
    Role,
    TokenUsage,
    ToolCall,
    ToolInfo,
)
from agentkit.streams import StreamReader, stream_from_iterator

__all__ = ["DEFAULT_BASE_URL", "OpenAIChatModel", "iter_sse_data", "parse_retry_after"]

_T = TypeVar("_T")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where requests go when neither ``base_url`` nor ``OPENAI_BASE_URL`` is given."""

_MAX_RETRY_AFTER = 60.0
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_STATUS_ERRORS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    429: RateLimitError,
}
_STATUS_HINTS = {
    401: " (check api_key= or the OPENAI_API_KEY environment variable)",
    403: " (the API key may not use this model or endpoint)",
    404: " (check the model name and base_url)",
}
_TOOL_CHOICE_KEYWORDS = frozenset({"auto", "none", "required"})

# Marks the bytes cached in Message._wire as this module's encoding (another client's
# cached form, keyed differently, is never sent by mistake).
_WIRE_FORMAT = "agentkit.openai.chat/1"
_encode_json = json.JSONEncoder(separators=(",", ":")).encode
_decode = json.JSONDecoder().decode


# --- request encoding ---------------------------------------------------------------------


def _message_bytes(message: Message) -> bytes:
    """Return the request JSON of ``message``, from its cache when it has one."""
    cached = message._wire
    if cached is not None and cached[0] is _WIRE_FORMAT:
        return cached[1]  # type: ignore[no-any-return]
    data: dict[str, Any] = {"role": message.role.value}
    if message.tool_calls:
        # OpenAI wants null, not "", as the content of a tool-calling assistant message.
        data["content"] = message.content or None
        data["tool_calls"] = [
            {
                "id": call.id,
                "type": call.type or "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
        ]
    else:
        data["content"] = message.content
    if message.role is Role.TOOL:
        data["tool_call_id"] = message.tool_call_id
    if message.name:
        data["name"] = message.name
    encoded = _encode_json(data).encode()
    object.__setattr__(message, "_wire", (_WIRE_FORMAT, encoded))
    return encoded


def _tools_bytes(tools: Sequence[ToolInfo]) -> bytes:
    return _encode_json(
        [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in tools
        ]
    ).encode()


def _request_fields(model: str, options: ModelOptions, stream: bool) -> dict[str, Any]:
    """Return the request fields other than ``messages`` and ``tools``."""
    fields: dict[str, Any] = {"model": options.model or model}
    if options.temperature is not None:
        fields["temperature"] = options.temperature
    if options.max_tokens is not None:
        fields["max_tokens"] = options.max_tokens
    if options.top_p is not None:
        fields["top_p"] = options.top_p
    if options.stop is not None:
        fields["stop"] = options.stop if isinstance(options.stop, str) else list(options.stop)
    choice = options.tool_choice
    if choice is not None:
        fields["tool_choice"] = (
            choice
            if choice in _TOOL_CHOICE_KEYWORDS
            else {"type": "function", "function": {"name": choice}}
        )
    if options.extra:
        if "messages" in options.extra:
            raise ValueError("ModelOptions.extra may not set 'messages'; pass them to the call")
        fields.update(options.extra)
    if stream:
        fields["stream"] = True
        fields.setdefault("stream_options", {"include_usage": True})
    # extra={"stream_options": None} drops the field, for servers that reject it.
    if "stream_options" in fields and fields["stream_options"] is None:
        del fields["stream_options"]
    return fields


# --- response decoding --------------------------------------------------------------------

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def iter_sse_data(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Yield the ``data`` of each Server-Sent Event in a byte stream cut at arbitrary points.

    Follows the SSE format: lines end with LF, CRLF or CR; a blank line ends an event; the
    ``data:`` lines of an event are joined with LF (one space after the colon is dropped);
    lines starting with ``:`` are comments (keep-alives) and other fields are ignored. An
    event left unfinished when the bytes end is dropped, as the format requires. Events
    without data are skipped.
    """
    parts: list[bytes] = []  # the unfinished last line, in pieces
    data: list[bytes] = []
    at_end = False
    chunks = iter(chunks)
    while not at_end:
        chunk = next(chunks, None)
        if chunk is None:
            if not parts:
                return
            # At the end a held-back CR is a line break after all; text after the last
            # line break is an unfinished line and is dropped.
            at_end = True
            lines = _LINE_BREAK.split(b"".join(parts))
            lines.pop()
        elif b"\n" not in chunk and b"\r" not in chunk:
            if chunk:
                parts.append(chunk)
            continue
        else:
            if parts:
                parts.append(chunk)
                chunk = b"".join(parts)
                parts = []
            if b"\r" in chunk:
                held = chunk.endswith(b"\r")  # may be the first half of a CRLF: decide later
                lines = _LINE_BREAK.split(chunk[:-1] if held else chunk)
                rest = lines.pop() + (b"\r" if held else b"")
            else:
                lines = chunk.split(b"\n")
                rest = lines.pop()
            if rest:
                parts.append(rest)
        for line in lines:
            if not line:
                if data:
                    payload = data[0] if len(data) == 1 else b"\n".join(data)
                    data = []
                    if payload:
                        yield payload
            elif line.startswith(b"data:"):
                data.append(line[6:] if line[5:6] == b" " else line[5:])
            elif line == b"data":
                data.append(b"")


def _usage(data: Any) -> TokenUsage | None:
    if not isinstance(data, dict):
        return None
    return TokenUsage(
        prompt_tokens=data.get("prompt_tokens") or 0,
        completion_tokens=data.get("completion_tokens") or 0,
        total_tokens=data.get("total_tokens") or 0,
    )


def _arguments(value: Any) -> str:
    # Some compatible servers send the arguments as an object instead of JSON text.
    if value is None:
        return ""
    return value if isinstance(value, str) else _encode_json(value)


def _server_message(body: Any) -> str:
    """Return the error text of an error body in the OpenAI shape or a common variant."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str) and error:
            return error
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    if isinstance(body, str):
        return body.strip()[:500]
    return ""


def _decode_json(content: bytes, what: str, url: str, status: int) -> Any:
    try:
        # Decoding the UTF-8 first is faster than json.loads(bytes), which sniffs the encoding.
        return _decode(content.decode())
    except ValueError as error:  # UnicodeDecodeError included
        text = content[:200].decode("utf-8", "replace")
        raise ModelError(
            f"the model server at {url} sent {what} that is not valid JSON: {text!r}",
            status_code=status,
            body=content.decode("utf-8", "replace"),
        ) from error


def _parse_completion(content: bytes, url: str, status: int) -> Message:
    data = _decode_json(content, "a response", url, status)
    if isinstance(data, dict) and "error" in data:
        raise ModelError(
            f"the model server at {url} answered with an error: {_server_message(data)}",
            status_code=status,
            body=data,
        )
    try:
        choice = data["choices"][0]
        message = choice["message"]
        tool_calls = [
            ToolCall(
                call.get("id") or "",
                FunctionCall(
                    call["function"].get("name") or "",
                    _arguments(call["function"].get("arguments")),
                ),
                call.get("type") or "function",
            )
            for call in message.get("tool_calls") or ()
        ]
        extra: dict[str, Any] = {}
        if message.get("reasoning_content"):
            extra["reasoning_content"] = message["reasoning_content"]
        return Message(
            Role.ASSISTANT,
            message.get("content") or "",
            tool_calls,
            response_meta=ResponseMeta(
                choice.get("finish_reason") or "", _usage(data.get("usage"))
            ),
            extra=extra,
        )
    except (KeyError, IndexError, TypeError, AttributeError) as error:
        raise ModelError(
            f"the model server at {url} sent a response without choices[0].message "
            f"({type(error).__name__}: {error})",
            status_code=status,
            body=data,
        ) from error


def _parse_chunk(payload: bytes, url: str) -> Message | None:
    """Turn one ``chat.completion.chunk`` into a message chunk (``None`` if it carries nothing)."""
    try:
        data = _decode(payload.decode())
    except ValueError:
        data = _decode_json(payload, "a stream chunk", url, 200)  # raises the explanation
    try:
        if "error" in data:
            raise ModelError(
                f"the model server at {url} sent an error in the stream: {_server_message(data)}",
                status_code=200,
                body=data,
            )
        usage_data = data.get("usage")
        usage = _usage(usage_data) if usage_data else None
        choices = data.get("choices")
        if not choices:
            if usage is None:
                return None
            return Message(Role.ASSISTANT, "", [], response_meta=ResponseMeta("", usage))
        content = ""
        finish_reason = ""
        tool_calls: list[ToolCall] = []
        extra: dict[str, Any] = {}
        for choice in choices:
            if choice.get("index", 0) != 0:
                continue  # only the first choice (n=1) is read
            delta = choice.get("delta")
            if delta:
                content = delta.get("content") or ""
                if delta.get("reasoning_content"):
                    extra["reasoning_content"] = delta["reasoning_content"]
                for call in delta.get("tool_calls") or ():
                    function = call.get("function") or {}
                    tool_calls.append(
                        ToolCall(
                            call.get("id") or "",
                            FunctionCall(
                                function.get("name") or "", _arguments(function.get("arguments"))
                            ),
                            call.get("type") or "function",
                            call.get("index"),
                        )
                    )
            finish_reason = choice.get("finish_reason") or ""
            break
    except (TypeError, AttributeError) as error:
        raise ModelError(
            f"the model server at {url} sent a stream chunk of an unexpected shape: "
            f"{payload[:200].decode('utf-8', 'replace')!r}",
            status_code=200,
            body=data,
        ) from error
    meta = ResponseMeta(finish_reason, usage) if finish_reason or usage is not None else None
    return Message(Role.ASSISTANT, content, tool_calls, response_meta=meta, extra=extra)


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Return the delay a response asks for before a retry, in seconds (at most 60).

    Reads ``retry-after-ms``, then ``Retry-After`` as seconds or as an HTTP date.
    ``None`` when there is no usable header.
    """
    seconds: float | None = None
    value = headers.get("retry-after-ms")
    if value:
        try:
            seconds = float(value) / 1000.0
        except ValueError:
            seconds = None
    if seconds is None:
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            seconds = float(value)
        except ValueError:
            try:
                date = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError):
                return None
            if date.tzinfo is None:
                date = date.replace(tzinfo=datetime.timezone.utc)
            seconds = (date - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER)


# --- the client ---------------------------------------------------------------------------


class _Call:
    """The state of one model call across its attempts."""

    __slots__ = ("attempts", "body", "retry_after")

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.attempts = 0
        self.retry_after: float | None = None


def _is_retryable(error: BaseException) -> bool:
    if isinstance(error, APIConnectionError):
        return True
    if isinstance(error, APIStatusError):
        status = error.status_code or 0
        return status in _RETRYABLE_STATUS or status >= 500
    return False


class _HTTP:
    """The httpx client shared by a model and its tool-bound copies."""

    __slots__ = ("client", "owned")

    def __init__(self, client: httpx.Client, owned: bool) -> None:
        self.client = client
        self.owned = owned


class _OpenStream:
    """A streamed response whose first chunk has been read."""

    __slots__ = ("count", "done", "finished", "first", "iterator", "response", "url")

    def __init__(self, response: httpx.Response, url: str) -> None:
        self.response = response
        self.url = url
        self.count = 0
        self.done = False  # [DONE] seen
        self.finished = False  # a finish_reason seen
        self.first: Message | None = None
        self.iterator: Iterator[Message] = iter(())

    def read_first(self) -> None:
        """Read up to the first chunk, so that errors before it are raised by ``stream()``."""
        events = self.events()
        try:
            self.first = next(events)
        except StopIteration:
            return  # a complete stream without a single chunk
        self.iterator = events

    def events(self) -> Iterator[Message]:
        """Yield the message chunks, reading the response to its end (even after ``[DONE]``)."""
        url = self.url
        try:
            for payload in iter_sse_data(self.response.iter_bytes()):
                if self.done:
                    continue  # drain, so the connection goes back to the pool
                if payload == b"[DONE]":
                    self.done = True
                    continue
                chunk = _parse_chunk(payload, url)
                if chunk is None:
                    continue
                meta = chunk.response_meta
                if meta is not None and meta.finish_reason:
                    self.finished = True
                self.count += 1
                yield chunk
        except httpx.TimeoutException as error:
            if self.done:
                return
            raise APITimeoutError(
                f"the stream from {url} stalled after {self.count} chunks "
                f"({type(error).__name__}: {error})"
            ) from error
        except httpx.TransportError as error:
            if self.done:
                return
            raise IncompleteStreamError(
                f"the stream from {url} broke after {self.count} chunks, before the server "
                f"finished it ({type(error).__name__}: {error})"
            ) from error
        if not self.done and not self.finished:
            raise IncompleteStreamError(
                f"the stream from {url} ended after {self.count} chunks without [DONE] or a "
                "finish reason; the reply is incomplete"
            )

    def chunks(self) -> Iterator[Message]:
        """Return an iterator of the first chunk, then the rest as they arrive."""
        first, self.first = self.first, None
        return self.iterator if first is None else itertools.chain((first,), self.iterator)


class OpenAIChatModel:
    """A chat model served over the OpenAI Chat Completions API, or any compatible server.

    Args:
        model: the model name sent with every request (``ModelOptions.model`` overrides it).
        api_key: the bearer token; defaults to ``OPENAI_API_KEY``. With neither, no
            ``Authorization`` header is sent (local servers such as Ollama need none).
        base_url: the API root, such as ``http://localhost:11434/v1``; defaults to
            ``OPENAI_BASE_URL``, then ``https://api.openai.com/v1``.
        timeout: httpx's per-request timeout in seconds (connect, and each read of a stream).
        max_retries: how many times a failed request is retried (attempts = ``max_retries + 1``).
        http_client: an :class:`httpx.Client` to use; it stays yours to close. By default the
            model makes one and :meth:`close` closes it.
        **defaults: default :class:`~agentkit.models.ModelOptions` fields for every call
            (``temperature=0.2``, ``max_tokens=512``, ...); options given to a call win.

    Connection errors, timeouts and HTTP 408, 409, 429 and 5xx are retried with exponential
    backoff and jitter (from :attr:`retry_initial_delay` up to :attr:`retry_max_delay`), or after
    the delay the server asks for in ``Retry-After`` (capped at 60 s). A stream is never retried
    once it has delivered a chunk. Errors are :class:`~agentkit.ModelError` subclasses carrying
    the status code, the server's message and the decoded body.

    The model is thread-safe: one instance, and the models :meth:`with_tools` derives from it,
    share one connection pool; use it from any number of threads. Use it as a context
    manager, or call :meth:`close`, to release the connections.

    Each message is encoded to JSON once; the bytes are kept on the message and dropped
    when one of its fields is set (``message.content = ...``). A change made inside a nested
    object in place (``message.tool_calls.append(...)``) is not noticed: assign the field.

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
        **defaults: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"OpenAIChatModel needs a model name (got {model!r})")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0 (got {max_retries})")
        self._defaults = ModelOptions.from_kwargs(**defaults)
        self._model = model
        api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip(
            "/"
        )
        self._url = self._base_url + "/chat/completions"
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = httpx.Timeout(timeout)
        self._max_retries = max_retries
        # An owned client carries the headers and the timeout itself, which spares httpx a
        # merge per request; a client passed in gets them with every request instead.
        self._request_headers: dict[str, str] | None
        self._request_timeout: httpx.Timeout | Any
        if http_client is None:
            self._http = _HTTP(httpx.Client(timeout=self._timeout, headers=headers), owned=True)
            self._request_headers = None
            self._request_timeout = httpx.USE_CLIENT_DEFAULT
        else:
            self._http = _HTTP(http_client, owned=False)
            self._request_headers = headers
            self._request_timeout = self._timeout
        self._client = self._http.client
        # Doubling delays plus up to half the first one at random, so that clients that failed
        # together do not retry together.
        self._backoff = tenacity.wait_exponential(
            multiplier=self.retry_initial_delay, max=self.retry_max_delay
        ) + tenacity.wait_random(0, self.retry_initial_delay / 2)
        # The first attempt runs without tenacity (its bookkeeping costs ~13 us a call);
        # only a retryable failure enters this policy, for the retries that are left.
        self._retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(max(max_retries, 1)),
            wait=self._wait,
            retry=tenacity.retry_if_exception(_is_retryable),
            reraise=True,
        )
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

    def with_tools(self, tools: Sequence[ToolInfo]) -> ToolCallingChatModel:
        """Return a model bound to ``tools`` sharing these connections; this one is unchanged."""
        bound = copy.copy(self)
        bound._tools = tuple(tools)
        bound._tools_json = _tools_bytes(bound._tools) if bound._tools else b""
        bound._envelopes = bound._make_envelopes()
        return bound

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        """Send ``messages`` and return the assistant's reply.

        Raises:
            ModelError: the request failed after its retries, or the response was malformed.
        """
        call = _Call(self._body(messages, options, stream=False))
        return self._with_retries(self._attempt_generate, call)

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        """Send ``messages`` and return the reply as a stream of message chunks.

        This call returns once the first chunk has arrived: an error before it (retries
        included) is raised here. Chunks are then read from the connection as the reader
        asks for them; an error later on (a broken or stalled stream) is raised by the
        reader, and a stream that ends before the server finished it raises
        :class:`~agentkit.errors.IncompleteStreamError`. Closing the reader early closes
        the response. Chunks carry tool-call fragments with ``index`` set, and the last ones
        the finish reason and token usage: merge them with ``concat_messages``.
        """
        call = _Call(self._body(messages, options, stream=True))
        opened: _OpenStream = self._with_retries(self._attempt_open_stream, call)
        return stream_from_iterator(opened.chunks(), on_close=opened.response.close)

    def close(self) -> None:
        """Close the connection pool if this model made it (shared with its tool-bound copies)."""
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
        fields = _request_fields(self._model, options, stream)
        head = b"{" + _encode_json(fields)[1:-1].encode() + b',"messages":['
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
        wire = _WIRE_FORMAT
        parts = [
            cached[1]
            if (cached := message._wire) is not None and cached[0] is wire
            else _message_bytes(message)
            for message in messages
        ]
        return head + b",".join(parts) + tail

    # -- attempts --------------------------------------------------------------------------

    def _wait(self, retry_state: tenacity.RetryCallState) -> float:
        # The retry policy counts the retries only: its attempt n is the call's attempt n + 1.
        return self._delay(retry_state.args[0], retry_state.attempt_number + 1)

    def _delay(self, call: _Call, failed_attempts: int) -> float:
        """Seconds to wait after ``failed_attempts`` failed attempts of ``call``."""
        if call.retry_after is not None:
            return call.retry_after
        state = tenacity.RetryCallState(self._retrying, None, (), {})
        state.attempt_number = failed_attempts
        return float(self._backoff(state))

    def _with_retries(self, attempt: Callable[[_Call], _T], call: _Call) -> _T:
        try:
            try:
                return attempt(call)
            except Exception as error:
                if self._max_retries == 0 or not _is_retryable(error):
                    raise
            time.sleep(self._delay(call, 1))
            return self._retrying(attempt, call)
        except ModelError as error:
            if call.attempts > 1:
                note = getattr(error, "add_note", None)
                if note is not None:
                    note(f"gave up after {call.attempts} attempts")
            raise

    def _transport_error(self, error: httpx.TransportError) -> NoReturn:
        if isinstance(error, httpx.TimeoutException):
            raise APITimeoutError(
                f"no answer from {self._url} within {self._timeout.read} s ({type(error).__name__})"
            ) from error
        raise APIConnectionError(
            f"could not talk to {self._url} ({type(error).__name__}: {error})"
        ) from error

    def _status_error(self, response: httpx.Response, call: _Call) -> APIStatusError:
        status = response.status_code
        content = response.content
        body: Any
        try:
            body = json.loads(content)
        except ValueError:
            body = content.decode("utf-8", "replace")
        message = _server_message(body) or response.reason_phrase or "no error message"
        call.retry_after = parse_retry_after(response.headers)
        error_type = _STATUS_ERRORS.get(status, APIStatusError)
        return error_type(
            f"HTTP {status} from {self._url}: {message}{_STATUS_HINTS.get(status, '')}",
            status_code=status,
            body=body,
        )

    def _attempt_generate(self, call: _Call) -> Message:
        call.attempts += 1
        call.retry_after = None
        try:
            response = self._client.post(
                self._url,
                content=call.body,
                headers=self._request_headers,
                timeout=self._request_timeout,
            )
        except httpx.TransportError as error:
            self._transport_error(error)
        if not response.is_success:
            raise self._status_error(response, call)
        return _parse_completion(response.content, self._url, response.status_code)

    def _attempt_open_stream(self, call: _Call) -> _OpenStream:
        call.attempts += 1
        call.retry_after = None
        client = self._client
        request = client.build_request(
            "POST",
            self._url,
            content=call.body,
            headers=self._request_headers,
            timeout=self._request_timeout,
        )
        try:
            response = client.send(request, stream=True)
        except httpx.TransportError as error:
            self._transport_error(error)
        try:
            opened = _OpenStream(response, self._url)
            plain = response.headers.get("content-type", "").startswith("application/json")
            if plain or not response.is_success:
                try:
                    response.read()
                except httpx.TransportError as error:
                    self._transport_error(error)
                if not response.is_success:
                    raise self._status_error(response, call)
                # The server ignored stream=true and sent a whole completion: one chunk.
                opened.first = _parse_completion(response.content, self._url, response.status_code)
            else:
                opened.read_first()
            return opened
        except BaseException:
            response.close()
            raise
