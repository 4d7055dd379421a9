"""The JSON helpers the native wires share: compact encoding, decoding that explains itself."""

from __future__ import annotations

import json
from typing import Any

from agentkit.errors import ModelError

__all__ = ["count", "decode_json", "encode_json"]

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_decode = json.JSONDecoder().decode


def encode_json(value: Any) -> bytes:
    """Return compact JSON bytes of ``value`` (UTF-8, no escapes for non-ASCII text)."""
    return _encode(value).encode()


def decode_json(content: bytes, what: str, url: str, status: int, api: str, root: str) -> Any:
    """Decode JSON bytes, raising a :class:`ModelError` that shows them when they are not.

    ``api`` names the API (``"the Anthropic API"``) and ``root`` is an example of its root URL,
    for the hint that ``base_url`` may be wrong.
    """
    try:
        # Decoding the UTF-8 first is faster than json.loads(bytes), which sniffs the encoding.
        return _decode(content.decode())
    except ValueError as error:  # UnicodeDecodeError included
        text = content[:200].decode("utf-8", "replace")
        raise ModelError(
            f"{api} at {url} sent {what} that is not valid JSON: {text!r} (is base_url the API "
            f"root, such as {root}?)",
            status_code=status,
            body=content.decode("utf-8", "replace"),
        ) from error


def count(data: Any, key: str) -> int:
    """The integer at ``data[key]``, or 0 (absent, null, or not an integer)."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
