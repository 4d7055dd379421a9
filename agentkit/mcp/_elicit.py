"""Elicitation: an MCP server's question during a tool call, as an agentkit interrupt.

The first time a server asks (``elicitation/create``) during a call made by an agent, the
client cancels the question at the server, lets the call end, and interrupts the run with an
:class:`MCPElicitation`. Resumed with the answer, the tool calls the server again and gives
the answer when the server asks again: a ``dict`` accepts (it must fit the schema), ``False``
declines, ``None`` cancels.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from agentkit._persist import persisted
from agentkit.errors import ToolError

__all__ = ["ElicitationRouter", "MCPElicitation", "MCPElicitationError", "check_answer"]

NO_ANSWER = object()
"""A call that has no answer yet: a question ends it with an interrupt."""

_STATE_KIND = "agentkit.mcp.elicitation"
_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}


@persisted("agentkit.mcp.MCPElicitation")
@attrs.frozen
class MCPElicitation:
    """The interrupt info of an MCP server's question during a tool call (an elicitation).

    Resume the run with a ``dict`` that fits ``schema`` (the answer: the server's call goes
    on with it), ``False`` (the user declines to answer) or ``None`` (cancel the question).

    Attributes:
        message: what the server asks.
        schema: the JSON Schema of the answer (an object of primitive properties).
    """

    message: str
    schema: dict[str, Any] = attrs.field(factory=dict, hash=False)

    def __str__(self) -> str:
        return self.message


class MCPElicitationError(ToolError, ValueError):
    """An answer to an :class:`MCPElicitation` that does not fit its schema."""


def check_answer(answer: Any, schema: Mapping[str, Any], tool_name: str) -> None:
    """Raise :class:`MCPElicitationError` unless ``answer`` is ``None``, ``False`` or a dict
    whose properties fit ``schema`` (required ones present, primitive types, enums)."""
    if answer is None or answer is False:
        return
    if not isinstance(answer, dict):
        raise MCPElicitationError(
            f"{tool_name}: answer the server's question with a dict of its fields, False to "
            f"decline or None to cancel (got {type(answer).__name__})",
            tool_name=tool_name,
        )
    properties = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
    for name in schema.get("required", []) if isinstance(schema, Mapping) else []:
        if name not in answer:
            raise MCPElicitationError(
                f"{tool_name}: the answer lacks the required field {name!r}", tool_name=tool_name
            )
    for name, value in answer.items():
        spec = properties.get(name)
        if spec is None:
            raise MCPElicitationError(
                f"{tool_name}: the question has no field {name!r} (fields: "
                f"{', '.join(sorted(properties)) or 'none'})",
                tool_name=tool_name,
            )
        expected = _TYPES.get(str(spec.get("type")))
        wrong_bool = isinstance(value, bool) and spec.get("type") in ("integer", "number")
        if expected is not None and (not isinstance(value, expected) or wrong_bool):
            raise MCPElicitationError(
                f"{tool_name}: field {name!r} must be a {spec.get('type')} (got {value!r})",
                tool_name=tool_name,
            )
        if "enum" in spec and value not in spec["enum"]:
            raise MCPElicitationError(
                f"{tool_name}: field {name!r} must be one of {spec['enum']} (got {value!r})",
                tool_name=tool_name,
            )


def interrupt_state(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    """What an elicitation interrupt saves, to find its question again when resumed."""
    return {"kind": _STATE_KIND, "message": message, "schema": schema}


def asked_before(state: Any) -> MCPElicitation | None:
    """The question a resumed call was interrupted with, if it was an elicitation."""
    if isinstance(state, dict) and state.get("kind") == _STATE_KIND:
        return MCPElicitation(str(state.get("message", "")), dict(state.get("schema") or {}))
    return None


@attrs.define
class _Slot:
    answer: Any
    asked: tuple[str, dict[str, Any]] | None = None


class ElicitationRouter:
    """Routes a server's questions to the one tool call in flight that can take them.

    A question while no call, or more than one call, is in flight is declined (the client
    cannot tell which call it belongs to).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: list[_Slot] = []

    @contextlib.contextmanager
    def call(self, answer: Any) -> Iterator[_Slot]:
        """A tool call in flight for the block; ``answer`` is its answer or ``NO_ANSWER``."""
        slot = _Slot(answer)
        with self._lock:
            self._slots.append(slot)
        try:
            yield slot
        finally:
            with self._lock:
                self._slots.remove(slot)

    def answer(self, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        """The ``ElicitResult`` (wire shape) for a question: runs in the loop thread."""
        with self._lock:
            slots = list(self._slots)
        if len(slots) != 1:
            return {"action": "decline"}
        slot = slots[0]
        if slot.answer is NO_ANSWER:
            slot.asked = (message, schema)
            return {"action": "cancel"}
        if slot.answer is None:
            return {"action": "cancel"}
        if slot.answer is False:
            return {"action": "decline"}
        return {"action": "accept", "content": dict(slot.answer)}
