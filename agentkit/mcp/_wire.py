"""What the transport of one connection enforces, and whom it tells when the server breaks it.

A transport reads the server's messages. When one is not a valid MCP message (not UTF-8, not
JSON, not a JSON-RPC message) or is larger than the client's ``max_message_bytes``, the
transport reports it with :meth:`Wire.protocol_error` and stops reading that server: the
connection fails the calls waiting on it and is replaced by the next call. Nothing of an
oversized message is held beyond the limit.
"""

from __future__ import annotations

from typing import Protocol

from agentkit.errors import AgentKitValueError

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "Wire",
    "check_max_message_bytes",
    "excerpt",
    "too_large",
    "unparsable",
]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 2**20
"""16 MiB: the largest message (a tool result, a tool listing) a server may send by default."""

_EXCERPT_BYTES = 60
_DETAIL_CHARS = 300


class Wire(Protocol):
    """The connection a transport serves, as the transport sees it (framework-internal)."""

    @property
    def max_message_bytes(self) -> int:
        """The largest message the server may send, in bytes (a stdio line, HTTP body or event)."""

    @property
    def graceful(self) -> bool:
        """``True`` when a stdio server gets the MCP spec's grace period to exit at shutdown.

        ``False`` for an attempt given up before the handshake finished (a cancel, the
        connect timeout) and after a protocol error: the server is then killed at once.
        """

    def protocol_error(self, reason: str) -> None:
        """The server broke the protocol (``reason`` says how): fail the calls, stop the connection.

        Called in the connection's event loop; must not block.
        """


def check_max_message_bytes(value: object) -> int:
    """``value`` if it is a valid ``max_message_bytes``, else a ``ValueError`` saying why."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1024:
        raise AgentKitValueError(
            f"max_message_bytes must be an int of at least 1024 bytes (got {value!r}); the "
            f"default is {DEFAULT_MAX_MESSAGE_BYTES} (16 MiB)"
        )
    return value


def too_large(limit: int) -> str:
    """The reason text for a message over ``limit`` bytes."""
    return (
        f"it sent a message larger than max_message_bytes={limit} bytes (stopped reading it "
        "there); raise the client's max_message_bytes if results this large are expected"
    )


def excerpt(data: bytes) -> str:
    """The start of a bad message, for an error text: ``b'...'`` of at most 60 bytes."""
    if len(data) <= _EXCERPT_BYTES:
        return repr(data)
    return f"{data[:_EXCERPT_BYTES]!r}... ({len(data)} bytes)"


def unparsable(detail: str) -> str:
    """The reason text for a message the transport could not parse, ``detail`` saying why.

    The detail (often a pydantic error) is put on one line, without pydantic's trailer.
    """
    text = " ".join(detail.split()).split(" [type=")[0]
    return f"it sent a message that could not be parsed ({text[:_DETAIL_CHARS]})"
