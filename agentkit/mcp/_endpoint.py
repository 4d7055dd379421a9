"""Where an MCP server is: the transports to try, and what error texts must not repeat."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import attrs

from agentkit.mcp import _compat
from agentkit.mcp._wire import Wire

__all__ = ["Endpoint", "redacted", "session_ended"]


@attrs.frozen
class Endpoint:
    """How to reach the server: a label for messages and the transports to try, in order."""

    label: str
    openers: tuple[Callable[[Wire], AbstractAsyncContextManager[_compat.Streams]], ...]
    """The transports to try, in order; each is given the connection it serves."""
    sessions: bool = False
    """``True`` for HTTP, where the server may forget a session and refuse its requests."""
    secrets: tuple[str, ...] = ()
    """Parts of the URL that error texts must not repeat (password, query string)."""

    def scrub(self, text: str) -> str:
        """``text`` with the secrets replaced by ``***``."""
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


def redacted(url: str) -> str:
    # Error texts can reach the model and logs: leave out credentials and query parameters.
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def session_ended(message: str) -> bool:
    # An HTTP server forgot the session (restart, idle expiry): the request never ran there.
    text = message.lower()
    return "session" in text and any(
        word in text for word in ("terminated", "not found", "expired", "invalid", "unknown")
    )
