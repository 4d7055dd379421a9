"""Idempotency keys of run submissions (``submit(..., idempotency_key=...)``).

A client that may send the same submission twice (a double click, a POST retried after a
timeout) names it with a key of its own. The first submission with a key starts a run; any
later one with the same key, by the same owner, gets that run's id and starts nothing, for
as long as the run's record is kept. A key names one request: the same key with another
agent, input, session values or run id is refused (a bug in the client, not a retry).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from agentkit.errors import AgentKitTypeError, AgentKitValueError
from agentkit.integrations._errors import RunStateError
from agentkit.schema import Message

__all__ = ["MAX_KEY_LENGTH", "check_key", "conflict", "key_digest", "request_digest"]

MAX_KEY_LENGTH = 256


def check_key(key: object) -> str | None:
    """``key`` if it is ``None`` or a valid idempotency key; ``TypeError``/``ValueError`` if not."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise AgentKitTypeError(
            f"idempotency_key must be a str (such as a request id) or None "
            f"(got {type(key).__name__})"
        )
    if not key or len(key) > MAX_KEY_LENGTH:
        raise AgentKitValueError(
            f"idempotency_key must be 1 to {MAX_KEY_LENGTH} characters long (got {len(key)})"
        )
    return key


def key_digest(owner: str | None, key: str) -> str:
    """The key as stored: bound to ``owner``, so two owners' equal keys never meet."""
    text = json.dumps([owner, key], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def request_digest(
    agent_name: str,
    messages: Sequence[Message],
    session_values: Mapping[str, Any] | None,
    checkpoint_id: str | None,
) -> str:
    """What a submission asked for, as a digest: a key's later uses must ask the same."""
    request = {
        "agent": agent_name,
        "messages": [message.to_dict() for message in messages],
        # Session values need not be JSON in one process (LocalRuns): repr stands in.
        "session_values": dict(session_values or {}),
        "checkpoint_id": checkpoint_id,
    }
    text = json.dumps(request, sort_keys=True, ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def conflict(key: str, run_id: str) -> RunStateError:
    """The error for a key used again for another request."""
    return RunStateError(
        f"idempotency key {key!r} was used before for another request (run {run_id!r}, "
        "with another agent, input, session values or run id); a key names one request: use "
        "a new key for a new request"
    )
