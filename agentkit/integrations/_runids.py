"""What a run backend accepts from its callers: run ids, owners and event ids.

Run ids end up in Redis keys (``prefix + run_id + ":events"``), URL paths and response headers,
so a caller-chosen id is held to a small alphabet: ``X:cancel`` would otherwise name another
run's cancel key. Event ids come from browsers (``Last-Event-ID``): anything but the ids a log
hands out is refused here, before it reaches Redis, with a message a 400 can carry.
"""

from __future__ import annotations

import re

from agentkit.errors import AgentKitTypeError, AgentKitValueError
from agentkit.integrations._errors import EventIdError, RunIdError

__all__ = [
    "MAX_OWNER_LENGTH",
    "MAX_RUN_ID_LENGTH",
    "check_owner",
    "check_run_id",
    "log_position",
    "stream_position",
]

MAX_RUN_ID_LENGTH = 128
MAX_OWNER_LENGTH = 256
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*", re.ASCII)
_ID_PART = re.compile(r"[0-9]{1,20}", re.ASCII)
_MAX_PART = 2**64 - 1
_MAX_EVENT_ID_LENGTH = 41  # two 20-digit parts and the dash


def check_run_id(run_id: object) -> str:
    """``run_id`` if it is a valid run id; a :class:`RunIdError` saying why otherwise."""
    if not isinstance(run_id, str):
        raise RunIdError(f"a run id is a str (got {type(run_id).__name__})")
    if len(run_id) > MAX_RUN_ID_LENGTH or not _RUN_ID.fullmatch(run_id):
        shown = run_id if len(run_id) <= 80 else run_id[:80] + "..."
        raise RunIdError(
            f"run id {shown!r} is not valid: use 1 to {MAX_RUN_ID_LENGTH} letters, digits, "
            "'.', '_' or '-', starting with a letter or digit (':' and other separators "
            "are reserved for the keys of a run); leave checkpoint_id out to get a fresh id"
        )
    return run_id


def check_owner(owner: object) -> str | None:
    """``owner`` if it is ``None`` or a valid owner id; ``TypeError``/``ValueError`` otherwise."""
    if owner is None:
        return None
    if not isinstance(owner, str):
        raise AgentKitTypeError(
            f"owner must be a str (a user or tenant id) or None (got {type(owner).__name__})"
        )
    if not owner or len(owner) > MAX_OWNER_LENGTH:
        raise AgentKitValueError(
            f"owner must be 1 to {MAX_OWNER_LENGTH} characters long (got {len(owner)}); pass "
            "owner=None for runs that anyone who knows the run id may use"
        )
    if not owner.isprintable() or any("\ud800" <= char <= "\udfff" for char in owner):
        raise AgentKitValueError(
            f"owner {owner[:40]!r} holds a control character or a lone surrogate; use the "
            "user's or tenant's id as text"
        )
    return owner


def stream_position(event_id: str | None) -> tuple[int, int]:
    """A Redis stream id (``"<ms>-<seq>"`` or ``"<ms>"``) as two numbers; ``(0, 0)`` for none.

    Raises:
        EventIdError: anything else, including digits other than 0-9 and parts of 2**64 or more.
    """
    if event_id is None or event_id == "":
        return (0, 0)
    parts = _split(event_id, "'1700000000000-0' or '0-12'")
    if len(parts) > 2:
        raise _not_an_id(event_id, "'1700000000000-0' or '0-12'")
    return (parts[0], parts[1] if len(parts) == 2 else 0)


def log_position(event_id: str | None) -> int:
    """An in-memory log's entry id (a whole number); ``0`` for none.

    Raises:
        EventIdError: anything but a whole number written in the digits 0-9, below 2**64.
    """
    if event_id is None or event_id == "":
        return 0
    parts = _split(event_id, "whole numbers such as '12'")
    if len(parts) != 1:
        raise _not_an_id(event_id, "whole numbers such as '12'")
    return parts[0]


def _split(event_id: str, looks_like: str) -> list[int]:
    if not isinstance(event_id, str) or len(event_id) > _MAX_EVENT_ID_LENGTH:
        raise _not_an_id(event_id, looks_like)
    pieces = event_id.split("-")
    if not all(_ID_PART.fullmatch(piece) for piece in pieces):
        raise _not_an_id(event_id, looks_like)
    numbers = [int(piece) for piece in pieces]
    if any(number > _MAX_PART for number in numbers):
        raise _not_an_id(event_id, looks_like)
    return numbers


def _not_an_id(event_id: object, looks_like: str) -> EventIdError:
    shown = event_id if not isinstance(event_id, str) or len(event_id) <= 60 else event_id[:60]
    return EventIdError(
        f"Last-Event-ID {shown!r} is not an event id of this service (ids are {looks_like}); "
        "reconnect without it to read the run from the start"
    )
