"""The HTTP client of an HTTP MCP connection, holding every answer to ``max_message_bytes``.

The ``mcp`` package reads a JSON answer whole and (in 1.x) an event stream without a limit.
agentkit gives its transports an HTTP client whose responses count their bytes as they
arrive: a JSON body, or one event of an event stream, that grows past the connection's
``max_message_bytes`` is cut off there and reported as a protocol error, so memory stays
bounded and the call fails at once. Compressed bodies are refused (the client asks for
none), since their size on the wire says nothing about their size once decoded.

Both lines of the ``mcp`` package are served: 1.x uses ``httpx``, 2.x ``httpx2``, which
share this API; the module is passed in.
"""

from __future__ import annotations

import functools
from typing import Any

from agentkit.mcp._wire import Wire, too_large

__all__ = ["BodySize", "EventSize", "capped_client"]


class BodySize:
    """The size of a response body so far."""

    def __init__(self) -> None:
        self.size = 0

    def add(self, chunk: bytes) -> int:
        """Count ``chunk``; returns the size so far."""
        self.size += len(chunk)
        return self.size


class EventSize:
    """The size of the current event of an event stream: counting restarts at every blank line.

    A blank line is two line ends in a row (``\\n``, ``\\r`` or ``\\r\\n``), which always shows
    as ``\\n\\n``, ``\\n\\r`` or ``\\r\\r`` in the bytes.
    """

    def __init__(self) -> None:
        self.size = 0
        self._last = b""

    def add(self, chunk: bytes) -> int:
        """Count ``chunk``; returns the size of the event it leaves unfinished."""
        data = self._last + chunk  # the byte kept from the last chunk is counted already
        end = max(data.rfind(b"\n\n"), data.rfind(b"\n\r"), data.rfind(b"\r\r"))
        if end >= 0:
            self.size = len(data) - (end + 2)
        else:
            self.size += len(chunk)
        if chunk:
            self._last = chunk[-1:]
        return self.size


def capped_client(httpx: Any, wire: Wire, headers: dict[str, str], **options: Any) -> Any:
    """An ``AsyncClient`` of ``httpx`` (the module) whose responses are held to ``wire``'s limit.

    ``headers`` go with every request, and ``Accept-Encoding: identity``; ``options`` are
    passed on to the client (timeouts, auth).
    """
    stream_class = _capped_stream_class(httpx)

    async def hold_to_limit(response: Any) -> None:
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            reason = (
                f"it answered with a body compressed as {encoding!r}, which agentkit cannot "
                "hold to max_message_bytes (it asks for uncompressed answers)"
            )
            wire.protocol_error(reason)
            raise httpx.DecodingError(reason)
        per_event = response.headers.get("content-type", "").lower().startswith("text/event-stream")
        # Replaces the body stream httpx handed out (the public ``Response.stream``) before
        # anything reads it; the wrapper reads through to it.
        response.stream = stream_class(response.stream, wire, per_event)

    merged = httpx.Headers(headers)
    merged["accept-encoding"] = "identity"
    return httpx.AsyncClient(headers=merged, event_hooks={"response": [hold_to_limit]}, **options)


@functools.cache
def _capped_stream_class(httpx: Any) -> Any:
    # httpx checks that a response stream is its own AsyncByteStream: one subclass per module.
    class CappedStream(httpx.AsyncByteStream):  # type: ignore[misc] # the module is Any
        """A response body that stops with a protocol error past ``max_message_bytes``."""

        def __init__(self, inner: Any, wire: Wire, per_event: bool) -> None:
            self._inner = inner
            self._wire = wire
            self._per_event = per_event

        async def __aiter__(self) -> Any:
            limit = self._wire.max_message_bytes
            counter = EventSize() if self._per_event else BodySize()
            async for chunk in self._inner:
                if counter.add(chunk) > limit:
                    reason = too_large(limit)
                    self._wire.protocol_error(reason)
                    raise httpx.ReadError(reason)
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedStream
