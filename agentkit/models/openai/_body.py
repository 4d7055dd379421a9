"""Reading a response body within the call's deadline and the model's size limit.

A server that answers without end (a bug, a proxy gone wrong, a hostile endpoint) must not
take the process's memory with it. Every byte of a response body, a whole completion, an
error body or a Server-Sent Events stream, is counted as it is read; the first read that
passes ``max_response_bytes`` ends the call with :class:`~agentkit.errors.ResponseTooLargeError`
and closes the response, which closes its connection (a half-read connection is never
returned to the pool). A ``Content-Length`` above the limit is refused before any of the
body is read. Bytes are counted after decompression, so a compressed body is held to what
it would take in memory.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from agentkit.errors import ResponseTooLargeError
from agentkit.models.openai._transport import _Guard, guarded_bytes

__all__: list[str] = []

DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""The default of ``OpenAIChatModel(max_response_bytes=...)``: 64 MiB."""

_MiB = 1024 * 1024


def check_max_response_bytes(value: object) -> int | None:
    """Return ``value`` as a size limit, or raise a ``ValueError`` that says what is wrong."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            "max_response_bytes must be a number of bytes > 0, or None for no limit "
            f"(got {value!r})"
        )
    return value


def _size(count: int) -> str:
    if count >= _MiB and count % _MiB == 0:
        return f"{count:,} bytes ({count // _MiB} MiB)"
    return f"{count:,} bytes"


def too_large(
    url: str, limit: int, received: int, status: int, declared: int | None = None
) -> ResponseTooLargeError:
    """Return the error for a response from ``url`` that passed ``limit``."""
    if declared is not None:
        what = f"declares a body of {declared:,} bytes (Content-Length); nothing of it was read"
    else:
        what = f"passed it: reading stopped after {received:,} bytes and the connection was closed"
    return ResponseTooLargeError(
        f"the response from {url} is larger than max_response_bytes={_size(limit)}: it "
        f"{what}. If replies this large are expected, pass a larger "
        "OpenAIChatModel(..., max_response_bytes=...), or None for no limit",
        limit=limit,
        received=received,
        status_code=status,
    )


def body_chunks(
    response: httpx.Response, guard: _Guard, limit: int | None, url: str
) -> Iterator[bytes]:
    """Yield the (decoded) body of ``response`` as it arrives, within ``limit`` bytes.

    ``guard`` is made current around each read (see :func:`guarded_bytes`). Passing the
    limit closes the response and raises :class:`~agentkit.errors.ResponseTooLargeError`.
    """
    chunks = guarded_bytes(response.iter_bytes(), guard)
    if limit is None:
        yield from chunks
        return
    declared = _declared_length(response)
    if declared is not None and declared > limit:
        response.close()
        raise too_large(url, limit, 0, response.status_code, declared)
    received = 0
    for chunk in chunks:
        received += len(chunk)
        if received > limit:
            response.close()
            raise too_large(url, limit, received, response.status_code)
        yield chunk


def read_body(response: httpx.Response, guard: _Guard, limit: int | None, url: str) -> bytes:
    """Return the whole (decoded) body of ``response``, within ``limit`` bytes."""
    return b"".join(body_chunks(response, guard, limit, url))


def _declared_length(response: httpx.Response) -> int | None:
    """The ``Content-Length`` of an uncompressed body, if the server gave one."""
    headers = response.headers
    if headers.get("content-encoding", "identity").strip().lower() != "identity":
        return None  # the length of the compressed bytes; the decoded ones are counted
    value = headers.get("content-length")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None  # httpcore refuses a malformed length itself
