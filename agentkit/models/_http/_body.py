"""Reading a response body within the call's deadline and the model's size limit.

A server that answers without end (a bug, a proxy gone wrong, a hostile endpoint) must not
take the process's memory with it. Every byte of a response body, a whole completion, an
error body or a Server-Sent Events stream, is counted as it is read; the first read that
passes ``max_response_bytes`` ends the call with :class:`~agentkit.errors.ResponseTooLargeError`
and closes the response, which closes its connection (a half-read connection is never
returned to the pool). A whole body whose ``Content-Length`` is above the limit is refused
as soon as it takes a second read. Bytes are counted after decompression, so a compressed
body is held to what it would take in memory.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx

from agentkit.errors import AgentKitValueError, ResponseTooLargeError
from agentkit.models._http._transport import _current, _Guard

__all__: list[str] = []

DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""The default ``max_response_bytes`` of the HTTP models: 64 MiB."""

_MiB = 1024 * 1024


def check_max_response_bytes(value: object) -> int | None:
    """Return ``value`` as a size limit, or raise a ``ValueError`` that says what is wrong."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise AgentKitValueError(
            "max_response_bytes must be a number of bytes > 0, or None for no limit "
            f"(got {value!r})"
        )
    return value


def _size(count: int) -> str:
    if count >= _MiB and count % _MiB == 0:
        return f"{count:,} bytes ({count // _MiB} MiB)"
    return f"{count:,} bytes"


def too_large(
    url: str,
    limit: int,
    received: int,
    status: int,
    declared: int = -1,
    owner: str = "OpenAIChatModel",
) -> ResponseTooLargeError:
    """Return the error for a response from ``url`` that passed ``limit``."""
    what = f"declares {declared:,} bytes (Content-Length); " if declared > limit else ""
    return ResponseTooLargeError(
        f"the response from {url} is larger than max_response_bytes={_size(limit)}: it "
        f"{what}reading stopped after {received:,} bytes and the connection was closed. "
        "If replies this large are expected, pass a larger "
        f"{owner}(..., max_response_bytes=...), or None for no limit",
        limit=limit,
        received=received,
        status_code=status,
    )


def body_chunks(
    response: httpx.Response,
    guard: _Guard,
    limit: int | None,
    url: str,
    owner: str = "OpenAIChatModel",
) -> Iterator[bytes]:
    """Yield the (decoded) body of ``response`` as it arrives, within ``limit`` bytes.

    ``guard`` is current around each read, so that the socket layer obeys its deadline and
    abort (see ``_transport``); the deadline is also checked between reads, which is
    what bounds the reads of a caller's client. Passing the limit closes the response and
    raises :class:`~agentkit.errors.ResponseTooLargeError` (an event stream has no
    ``Content-Length`` worth reading: its bytes are counted).
    """
    chunks = response.iter_bytes()
    local = _current
    monotonic = time.monotonic
    received = 0
    while True:
        previous = local.guard
        local.guard = guard
        try:
            chunk = next(chunks, None)
        finally:
            local.guard = previous
        if chunk is None:
            return
        if guard.deadline < monotonic():
            raise httpx.ReadTimeout("the model call's deadline passed")
        if limit is not None:
            received += len(chunk)
            if received > limit:
                response.close()
                raise too_large(url, limit, received, response.status_code, owner=owner)
        yield chunk


def read_body(
    response: httpx.Response,
    guard: _Guard,
    limit: int | None,
    url: str,
    owner: str = "OpenAIChatModel",
) -> bytes:
    """Return the whole (decoded) body of ``response``, within ``limit`` bytes.

    Like :func:`body_chunks`, but the caller makes ``guard`` current (it is for the whole
    request); one plain loop, since most bodies arrive in one read.
    """
    chunks: list[bytes] = []
    received = 0
    monotonic = time.monotonic
    for chunk in response.iter_bytes():
        if guard.deadline < monotonic():
            raise httpx.ReadTimeout("the model call's deadline passed")
        if limit is not None:
            received += len(chunk)
            declared = _declared_length(response) if len(chunks) == 1 else -1
            if received > limit or declared > limit:
                response.close()
                raise too_large(url, limit, received, response.status_code, declared, owner)
        chunks.append(chunk)
    return b"".join(chunks)


def _declared_length(response: httpx.Response) -> int:
    """The ``Content-Length`` the server gave (-1 if none).

    For a compressed body it is the length of the compressed bytes; one larger than the
    limit is refused all the same (no honest reply is that large, compressed or not).
    """
    value = response.headers.get("content-length")
    try:
        return -1 if value is None else int(value)
    except ValueError:
        return -1  # httpcore refuses a malformed length itself
