"""The record format every conversation store shares, and the checks on ids and records.

A record is one message as UTF-8 JSON text (``Message.to_dict``), with no line break in it,
so a file can hold one record per line and a torn last line (an append that never finished)
is one without its newline. A message holding a lone surrogate (a model's JSON may carry
``"\\ud83d"`` alone) is written with that character escaped, so every record is valid UTF-8.

Every store reads records through :func:`decode_records`, so a bad record is reported in the
same words whatever the store: a :class:`~agentkit.errors.ConversationRecordError` naming the
conversation, the record's position and what is wrong with it, and how to repair it.

Framework-internal; custom stores may use these, but only :mod:`agentkit.conversation._base`
is API.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from agentkit.conversation._base import MAX_CONVERSATION_ID_BYTES
from agentkit.errors import AgentKitTypeError, AgentKitValueError, ConversationRecordError
from agentkit.schema import Message, Role

__all__ = [
    "ROLLBACK_MARK",
    "TURN_MARK",
    "ThreadLocks",
    "bad_record",
    "check_id",
    "check_index",
    "check_max_record_bytes",
    "decode_records",
    "encode_records",
    "fold_rollbacks",
    "out_of_range",
    "split_turns",
]

TURN_MARK = "agentkit_turn"
"""The ``Message.extra`` key of a turn's record, on the turn's first message: how many records
the turn appended (``records``), how many it brought (``new``), who said the rest (``said``)
and, for a keyed turn, its key."""

ROLLBACK_MARK = "agentkit_rollback"
"""The ``Message.extra`` key of a rollback marker: a record (never shown as a message) saying
that the conversation keeps only its first ``turns`` turns from there on."""

_ROLES = tuple(role.value for role in Role)


def check_id(conversation_id: object) -> str:
    """Return ``conversation_id`` if every store can keep it, else raise ``ValueError``.

    An id is a non-empty ``str`` of at most :data:`MAX_CONVERSATION_ID_BYTES` bytes in UTF-8,
    without lone surrogates (they have no UTF-8 form, so SQLite and JSON cannot hold them) and
    without NUL (PostgreSQL text, C strings). Any other character is fine, ``:`` and ``/``
    included: no store gives them a meaning (the Redis store separates its lock keys with a
    byte that UTF-8 never contains).
    """
    if not isinstance(conversation_id, str) or not conversation_id:
        raise AgentKitValueError(
            f"a conversation id must be a non-empty string (got {conversation_id!r})"
        )
    try:
        size = len(conversation_id.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise AgentKitValueError(
            f"conversation id {conversation_id!r} holds a lone surrogate "
            f"({conversation_id[error.start]!r} at position {error.start}), which has no UTF-8 "
            "form; pass an id of valid text (decode bytes with errors='strict', or use a hash)"
        ) from None
    if "\x00" in conversation_id:
        raise AgentKitValueError(
            f"conversation id {conversation_id!r} holds a NUL character, which many databases "
            "cannot store in text; pass an id without it"
        )
    if size > MAX_CONVERSATION_ID_BYTES:
        raise AgentKitValueError(
            f"conversation id {conversation_id[:40]!r}... is {size} bytes in UTF-8, over "
            f"{MAX_CONVERSATION_ID_BYTES} bytes; use a shorter id (a hash of a long one, say)"
        )
    return conversation_id


def check_max_record_bytes(max_record_bytes: object) -> int:
    """Return a valid ``max_record_bytes`` or raise ``ValueError``."""
    if (
        isinstance(max_record_bytes, bool)
        or not isinstance(max_record_bytes, int)
        or max_record_bytes < 1
    ):
        raise AgentKitValueError(
            f"max_record_bytes must be a positive int (got {max_record_bytes!r})"
        )
    return max_record_bytes


def check_index(index: object) -> int:
    """Return a record position, or raise ``TypeError`` for anything but an ``int``."""
    if isinstance(index, bool) or not isinstance(index, int):
        raise AgentKitTypeError(f"a record position must be an int (got {index!r})")
    return index


def out_of_range(conversation_id: str, index: int, count: int) -> IndexError:
    """The error for dropping a record that is not there."""
    if count == 0:
        held = f"{conversation_id!r} has 0 records"
    else:
        records = "record" if count == 1 else "records"
        held = f"{conversation_id!r} has {count} {records}, at positions 0 to {count - 1}"
    return IndexError(f"cannot drop record {index} of conversation {conversation_id!r}: {held}")


def encode_records(
    conversation_id: str, messages: Sequence[Message], max_record_bytes: int
) -> list[bytes]:
    """The records of ``messages``, or an error naming the first that cannot be stored.

    Raises:
        TypeError: an item is not a :class:`~agentkit.Message`, or its ``extra`` holds a
            value JSON cannot encode.
        ConversationRecordError: a record would be over ``max_record_bytes``.
    """
    records = []
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise AgentKitTypeError(
                f"conversations hold Message objects, not {type(message).__name__}"
            )
        record = _encode(conversation_id, index, len(messages), message)
        if len(record) > max_record_bytes:
            raise ConversationRecordError(
                f"conversation {conversation_id!r}: the message at position {index} of the "
                f"{len(messages)} to append is a record of {len(record)} bytes, over "
                f"max_record_bytes={max_record_bytes}; nothing was appended. Keep less in one "
                "message (cap tool results with ChatModelAgent(max_tool_result_chars=...)) or "
                "create the store with a larger max_record_bytes",
                conversation_id=conversation_id,
                index=index,
            )
        records.append(record)
    return records


def _encode(conversation_id: str, index: int, count: int, message: Message) -> bytes:
    data = message.to_dict()
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: escape it, so the record stays UTF-8
            return json.dumps(data, separators=(",", ":")).encode("ascii")
    except (TypeError, ValueError) as error:
        raise AgentKitTypeError(
            f"conversation {conversation_id!r}: the message at position {index} of the {count} "
            f"to append cannot be stored as JSON: {error} (a message's extra must hold JSON "
            "values only)"
        ) from error


def decode_records(
    conversation_id: str, records: Iterable[bytes | str], max_record_bytes: int
) -> list[Message]:
    """The messages of a conversation's records, oldest first.

    Raises:
        ConversationRecordError: a record is bad; it names the conversation, the record's
            position and the repair.
    """
    messages = []
    for index, record in enumerate(records):
        raw = record.encode("utf-8", "surrogatepass") if isinstance(record, str) else record
        message, problem = _decode(raw, max_record_bytes)
        if message is None:
            raise bad_record(conversation_id, index, problem)
        messages.append(message)
    return fold_rollbacks(messages)


def split_turns(messages: Sequence[Message]) -> list[list[Message]]:
    """The turns of a conversation's messages, oldest first.

    A turn recorded by this release starts with a message whose :data:`TURN_MARK` says how
    many records it appended. A conversation written by an earlier release has no marks: there
    a user message that follows another role's message starts a turn.
    """
    turns: list[list[Message]] = []
    left = 0  # records of the current recorded turn still to come
    unmarked_open = False
    for message in messages:
        if left > 0:
            turns[-1].append(message)
            left -= 1
            continue
        mark = message.extra.get(TURN_MARK)
        size = mark.get("records") if isinstance(mark, dict) else None
        if isinstance(size, int) and not isinstance(size, bool) and size >= 1:
            turns.append([message])
            left = size - 1
            unmarked_open = False
            continue
        starts = (
            not unmarked_open
            or (message.role is Role.USER and turns[-1][-1].role is not Role.USER)
        )
        if starts:
            turns.append([message])
            unmarked_open = True
        else:
            turns[-1].append(message)
    return turns


def fold_rollbacks(messages: list[Message]) -> list[Message]:
    """``messages`` as the rollback markers among them leave them: each marker keeps the
    first turns of what came before it and is itself dropped (a list without markers is
    returned as it is)."""
    if not any(ROLLBACK_MARK in message.extra for message in messages):
        return messages
    visible: list[Message] = []
    for message in messages:
        mark = message.extra.get(ROLLBACK_MARK)
        if mark is None:
            visible.append(message)
            continue
        keep = mark.get("turns") if isinstance(mark, dict) else None
        if isinstance(keep, int) and not isinstance(keep, bool) and keep >= 0:
            visible = [kept for turn in split_turns(visible)[:keep] for kept in turn]
    return visible


def bad_record(conversation_id: str, index: int, problem: str) -> ConversationRecordError:
    """The error for the unreadable record at ``index``."""
    return ConversationRecordError(
        f"conversation {conversation_id!r}: record {index} cannot be read: {problem}. The "
        f"conversation is left as it is; to repair it, drop that record with "
        f"store.drop_record({conversation_id!r}, {index}) (the records after it move up by "
        "one)",
        conversation_id=conversation_id,
        index=index,
    )


def _decode(raw: bytes, max_record_bytes: int) -> tuple[Message | None, str]:
    if len(raw) > max_record_bytes:
        return None, (
            f"it is {len(raw)} bytes, over max_record_bytes={max_record_bytes} (create the "
            "store with a larger max_record_bytes if records this large are expected)"
        )
    if not raw:
        return None, "it is empty"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, f"it is not valid UTF-8 ({error.reason} at byte {error.start})"
    try:
        data = json.loads(text)
    except RecursionError:
        return None, "it is not a message: its JSON is nested too deeply"
    except ValueError as error:
        return None, f"it is not JSON ({error})"
    problem = _shape_problem(data)
    if problem:
        return None, f"it is not a message: {problem}"
    try:
        return Message.from_dict(data), ""
    except Exception as error:  # a field this version checks only in the constructor
        return None, f"it is not a message: {type(error).__name__}: {error}"


def _shape_problem(data: Any) -> str:
    """What makes ``data`` something other than ``Message.to_dict`` output ("" if nothing)."""
    if type(data) is not dict:
        return f"it is a JSON {_json_type(data)}, not an object"
    role = data.get("role")
    if role not in _ROLES:
        known = ", ".join(repr(name) for name in _ROLES)
        return f"'role' is {role!r}, not one of {known}"
    for key in ("content", "tool_call_id", "tool_name", "name"):
        if key in data and type(data[key]) is not str:
            return _wrong(repr(key), data[key], "a string")
    if "extra" in data and type(data["extra"]) is not dict:
        return _wrong("'extra'", data["extra"], "an object")
    if "parts" in data and type(data["parts"]) is not list:
        return _wrong("'parts'", data["parts"], "an array")
    calls = data.get("tool_calls", [])
    if type(calls) is not list:
        return _wrong("'tool_calls'", calls, "an array")
    for number, call in enumerate(calls):
        problem = _tool_call_problem(call, f"'tool_calls'[{number}]")
        if problem:
            return problem
    return _meta_problem(data.get("response_meta"))


def _tool_call_problem(call: Any, where: str) -> str:
    if type(call) is not dict:
        return _wrong(where, call, "an object")
    for key in ("id", "type"):
        if key in call and type(call[key]) is not str:
            return _wrong(f"{where}[{key!r}]", call[key], "a string")
    function = call.get("function", {})
    if type(function) is not dict:
        return _wrong(f"{where}['function']", function, "an object")
    for key in ("name", "arguments"):
        if key in function and type(function[key]) is not str:
            return _wrong(f"{where}['function'][{key!r}]", function[key], "a string")
    if call.get("index") is not None and type(call["index"]) is not int:
        return _wrong(f"{where}['index']", call["index"], "an integer")
    if "extra" in call and type(call["extra"]) is not dict:
        return _wrong(f"{where}['extra']", call["extra"], "an object")
    return ""


def _meta_problem(meta: Any) -> str:
    if meta is None:
        return ""
    if type(meta) is not dict:
        return _wrong("'response_meta'", meta, "an object")
    if "finish_reason" in meta and type(meta["finish_reason"]) not in (str, type(None)):
        return _wrong("'response_meta'['finish_reason']", meta["finish_reason"], "a string")
    usage = meta.get("usage")
    if usage is None:
        return ""
    if type(usage) is not dict:
        return _wrong("'response_meta'['usage']", usage, "an object")
    for key, count in usage.items():
        if type(count) is not int:
            return _wrong(f"'response_meta'['usage'][{key!r}]", count, "an integer")
    return ""


def _wrong(where: str, value: Any, expected: str) -> str:
    return f"{where} is a JSON {_json_type(value)}, not {expected}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class ThreadLocks:
    """Per-id locks inside one process (what every store adds to its cross-process lock)."""

    __slots__ = ("_held", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[str] = set()

    def take(self, conversation_id: str) -> bool:
        with self._lock:
            if conversation_id in self._held:
                return False
            self._held.add(conversation_id)
            return True

    def give_back(self, conversation_id: str) -> None:
        with self._lock:
            self._held.discard(conversation_id)
