"""Which failures are retried, and how long a server asks the client to wait."""

from __future__ import annotations

import datetime
import email.utils
import math
from typing import Any

import httpx

from agentkit.errors import (
    APIConnectionError,
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    PermissionDeniedError,
    RateLimitError,
)

__all__ = ["parse_retry_after", "server_message"]

MAX_RETRY_AFTER = 60.0
"""The longest ``Retry-After`` delay honoured, in seconds."""

_RETRYABLE_STATUS = frozenset({408, 409, 429})  # and every 5xx (Anthropic's 529 included)
STATUS_ERRORS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    429: RateLimitError,
}
STATUS_HINTS = {
    400: " (the server refused the request as sent: check the options and the messages)",
    401: " (check api_key= or the {key_env} environment variable)",
    403: " (the API key may not use this model or endpoint)",
    404: " (check the model name and base_url)",
    413: " (the request is too large for the server: shorten the conversation)",
    429: " (rate limited: send fewer requests, or raise max_retries= to wait longer)",
    529: " (the provider is overloaded: try again later, or fail over to another model)",
}
"""What to do about an error status, appended to its message."""


def status_hint(status: int, key_env: str = "OPENAI_API_KEY") -> str:
    """Return what to do about an error ``status``, to append to its message ("" if nothing).

    ``key_env`` is the environment variable the model reads its API key from.
    """
    hint = STATUS_HINTS.get(status)
    if hint is not None:
        return hint.replace("{key_env}", key_env)
    if status >= 500:
        return " (an error on the server's side; it may pass: try again later)"
    return ""


def is_retryable(error: BaseException) -> bool:
    """``True`` for connection errors, timeouts and HTTP 408, 409, 429 and 5xx."""
    if isinstance(error, APIConnectionError):
        return True
    if isinstance(error, APIStatusError):
        status = error.status_code or 0
        return status in _RETRYABLE_STATUS or status >= 500
    return False


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
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def server_message(body: Any) -> str:
    """Return the error text of an error body in the OpenAI shape or a common variant."""
    if isinstance(body, list) and body:
        body = body[0]  # Gemini wraps its error object in a list
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
