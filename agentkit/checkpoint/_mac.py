"""HMAC-SHA256 with the key's two padded blocks hashed once, for signing many checkpoints.

The HMAC of RFC 2104 is ``H((K ^ opad) || H((K ^ ipad) || message))``. Both padded keys fill
exactly one SHA-256 block, so the hash states after them can be computed once per key and
copied for every message: the result is the same bytes as ``hmac.digest(key, message,
"sha256")``. A durable run signs a record after every model reply and tool call, each time
after a model call's wait, when the processor's caches hold none of this code: measured on
the development machine, ``hmac.digest`` then takes about 95 us for a 1 KB record (it looks
the digest up and pads the key at every call), and copying prepared states about 40 us.

:meth:`MacKey.extended` goes one step further for a writer that signs many records under one
checkpoint id: the inner state after the fixed prefix (envelope header, namespace, id).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hashlib import _Hash

__all__ = ["MacKey"]

_BLOCK = 64  # SHA-256's block size in bytes
_INNER_PAD = bytes(byte ^ 0x36 for byte in range(256))  # translation tables: key ^ ipad ...
_OUTER_PAD = bytes(byte ^ 0x5C for byte in range(256))  # ... and key ^ opad, byte by byte


class MacKey:
    """One HMAC-SHA256 key, prepared: :meth:`digest` signs ``parts`` as one message.

    Immutable after construction, so one instance serves every thread (each call copies the
    prepared states).
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes, *, _states: tuple[_Hash, _Hash] | None = None) -> None:
        if _states is not None:
            self._inner, self._outer = _states
            return
        if len(key) > _BLOCK:
            key = hashlib.sha256(key).digest()
        key = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(key.translate(_INNER_PAD))
        self._outer = hashlib.sha256(key.translate(_OUTER_PAD))

    def digest(self, *parts: bytes) -> bytes:
        """The HMAC-SHA256 of the concatenation of ``parts`` (32 bytes)."""
        inner = self._inner.copy()
        for part in parts:
            inner.update(part)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()

    def extended(self, *prefix: bytes) -> MacKey:
        """This key with ``prefix`` already signed: ``extended(a).digest(b) == digest(a, b)``."""
        inner = self._inner.copy()
        for part in prefix:
            inner.update(part)
        return MacKey(b"", _states=(inner, self._outer))
