"""Sealed values: JSON that only holders of the key can write (Celery task messages, run records).

Whoever can write the Celery broker or Redis must not be able to start, resume, approve or
cancel a run. Everything a worker acts on is therefore *sealed*: a JSON body and an
HMAC-SHA256 over it, written as ``{"body": "<json text>", "mac": "<64 hex digits>"}``. The MAC
covers a purpose (``task``, ``record``, ``cancel``: a value sealed for one use is refused for
another), the namespace (the Redis prefix and database of the runs: a value copied to another
deployment is refused) and the body text, and is checked before the body is parsed.

The MAC key is derived from each configured key (``HMAC(key, "agentkit run seal v1")``), so
the key can be the checkpoint key without a checkpoint MAC ever passing for a sealed value.
Several keys may be given for rotation: the first seals, all are accepted when opening.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from agentkit.errors import AgentKitTypeError, AgentKitValueError
from agentkit.integrations._errors import TaskMessageError

__all__ = ["MAX_SEALED_BYTES", "Sealer", "SealError", "as_keys"]

MAX_SEALED_BYTES = 64 * 2**20
"""The largest sealed text opened (a run's input travels in its task message)."""
_LABEL = b"agentkit run seal v1"
_MAC_HEX = 64


class SealError(TaskMessageError):
    """A sealed value failed to open: not sealed, altered, or sealed with another key."""


def as_keys(value: bytes | str | Sequence[bytes | str]) -> list[bytes]:
    """One key or several (the first seals) as a list of bytes; text keys are UTF-8 encoded.

    Surrounding whitespace of a text key is dropped (a key pasted with its newline is the
    same key). Every key must have at least 16 bytes.
    """
    items = [value] if isinstance(value, (bytes, str)) else list(value)
    if not items:
        raise AgentKitValueError("signing_key needs at least one key")
    keys: list[bytes] = []
    for item in items:
        if isinstance(item, str):
            item = item.strip().encode("utf-8")
        if not isinstance(item, bytes):
            raise AgentKitTypeError(f"a signing key is bytes or str (got {type(item).__name__})")
        if len(item) < 16:
            raise AgentKitValueError(
                f"a signing key is {len(item)} bytes long; use at least 16 (generate one "
                "with: python -c \"import secrets; print(secrets.token_hex(32))\")"
            )
        keys.append(item)
    return keys


class Sealer:
    """Seals and opens JSON values for one namespace; keys come from ``keys()`` on first use."""

    def __init__(self, keys: Callable[[], Sequence[bytes]], namespace: str) -> None:
        self._load_keys = keys
        self._namespace = namespace.encode("utf-8")
        self._lock = threading.Lock()
        self._macs: list[hmac.HMAC] | None = None

    def seal(self, purpose: str, body: dict[str, Any]) -> str:
        """``body`` as sealed text for ``purpose``."""
        # ASCII text: a lone surrogate in a run's input still encodes (as an escape).
        text = json.dumps(body, separators=(",", ":"), sort_keys=True)
        macs = self._keys()
        return json.dumps({"body": text, "mac": self._mac(macs[0], purpose, text)})

    def open(self, purpose: str, sealed: object) -> dict[str, Any]:
        """The body of sealed text, checked before it is parsed.

        Raises:
            SealError: not sealed text, sealed for another purpose or namespace, altered, or
                sealed with a key that is not configured.
        """
        if not isinstance(sealed, (str, bytes)):
            raise SealError(f"expected sealed text, got {type(sealed).__name__}")
        if len(sealed) > MAX_SEALED_BYTES:
            raise SealError(f"sealed text of {len(sealed)} bytes is over {MAX_SEALED_BYTES}")
        try:
            outer = json.loads(sealed)
        except ValueError:
            raise SealError("not sealed text (it is not JSON)") from None
        if (
            not isinstance(outer, dict)
            or set(outer) != {"body", "mac"}
            or not isinstance(outer["body"], str)
            or not isinstance(outer["mac"], str)
            or len(outer["mac"]) != _MAC_HEX
        ):
            raise SealError("not sealed text (it needs exactly a 'body' text and a 'mac')")
        text, mac = outer["body"], outer["mac"]
        if not any(hmac.compare_digest(self._mac(key, purpose, text), mac) for key in self._keys()):
            raise SealError(
                f"the {purpose} fails verification: it was written without this deployment's "
                "key, altered, or copied from another Redis prefix or database"
            )
        try:
            body = json.loads(text)
        except ValueError:
            raise SealError(f"the {purpose} holds no JSON") from None
        if not isinstance(body, dict):
            raise SealError(f"the {purpose} holds no JSON object")
        return body

    def _keys(self) -> list[hmac.HMAC]:
        with self._lock:
            if self._macs is None:
                self._macs = [
                    hmac.new(hmac.new(key, _LABEL, hashlib.sha256).digest(), None, hashlib.sha256)
                    for key in self._load_keys()
                ]
            return self._macs

    def _mac(self, base: hmac.HMAC, purpose: str, text: str) -> str:
        mac = base.copy()
        for part in (purpose.encode("ascii"), self._namespace, text.encode("utf-8")):
            mac.update(len(part).to_bytes(8, "big"))
            mac.update(part)
        return mac.hexdigest()
