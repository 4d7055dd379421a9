"""Chat messages: the data exchanged with models, tools and agents.

All types are frozen attrs classes: values that never change once made (a message an event
carries is a fact no reader can rewrite). A message's ``tool_calls`` is a tuple and its
``extra`` (and a tool call's) a read-only dict; make a changed copy with ``attrs.evolve``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from agentkit._jsonable import UNENCODABLE, jsonable
from agentkit._persist import persisted
from agentkit._values import NO_EXTRA, ReadOnlyDict, read_only, refuse_writes
from agentkit.errors import AgentKitValueError

__all__ = [
    "FunctionCall",
    "Message",
    "ResponseMeta",
    "Role",
    "TokenUsage",
    "ToolCall",
    "ToolInfo",
    "assistant_message",
    "concat_messages",
    "system_message",
    "tool_message",
    "user_message",
]


@persisted("agentkit.Role")
class Role(str, enum.Enum):
    """The author of a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"

    def __str__(self) -> str:
        return self.value


@persisted("agentkit.FunctionCall")
@refuse_writes("attrs.evolve(call.function, {name}=...)")
@attrs.frozen(init=False)
class FunctionCall:
    """The function a tool call invokes; ``arguments`` is JSON text exactly as the model sent it."""

    name: str = ""
    arguments: str = ""

    def __init__(self, name: str = "", arguments: str = "") -> None:
        # Written out (as the two below): attrs' __init__ of a frozen class sets each field
        # through a bound object.__setattr__, the slots' own setters cost about half.
        _F_NAME(self, name)
        _F_ARGUMENTS(self, arguments)


@persisted("agentkit.ToolCall")
@refuse_writes("attrs.evolve(call, {name}=...)")
@attrs.frozen(init=False)
class ToolCall:
    """One tool call requested by a model.

    ``index`` is the position of the call in a streamed response: fragments of the same call
    share an index and are merged by :func:`concat_messages`. ``extra`` holds fields of the
    call that a model server sent and wants back unchanged on the next request (such as
    Gemini's ``extra_content`` with its thought signature); it must be JSON-safe.
    """

    id: str = ""
    function: FunctionCall = attrs.Factory(FunctionCall)
    type: str = "function"
    index: int | None = None
    extra: dict[str, Any] = attrs.field(default=NO_EXTRA, converter=read_only)

    def __init__(
        self,
        id: str = "",
        function: FunctionCall | None = None,
        type: str = "function",
        index: int | None = None,
        extra: dict[str, Any] = NO_EXTRA,
    ) -> None:
        _C_ID(self, id)
        _C_FUNCTION(self, FunctionCall() if function is None else function)
        _C_TYPE(self, type)
        _C_INDEX(self, index)
        _C_EXTRA(self, extra if extra.__class__ is ReadOnlyDict else ReadOnlyDict(extra))

    def __getstate__(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "function": self.function,
            "type": self.type,
            "index": self.index,
            "extra": dict(self.extra),
        }

    def __setstate__(self, state: Any) -> None:
        # Checkpoints written before ``extra`` existed hold four values.
        names = ("id", "function", "type", "index", "extra")
        values = dict(zip(names, state, strict=False)) if isinstance(state, tuple) else state
        for name in names:
            object.__setattr__(self, name, values.get(name, {} if name == "extra" else None))
        object.__setattr__(self, "extra", read_only(self.extra))


_F_NAME, _F_ARGUMENTS = (vars(FunctionCall)[name].__set__ for name in ("name", "arguments"))
_C_ID, _C_FUNCTION, _C_TYPE, _C_INDEX, _C_EXTRA = (
    vars(ToolCall)[name].__set__ for name in ("id", "function", "type", "index", "extra")
)


@persisted("agentkit.TokenUsage")
@refuse_writes("attrs.evolve(usage, {name}=...)")
@attrs.frozen
class TokenUsage:
    """Token counts reported by the model server.

    ``cached_tokens`` is the part of ``prompt_tokens`` the server read from its prompt cache
    (OpenAI's ``prompt_tokens_details.cached_tokens``; ``0`` when it says nothing).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0

    def __getstate__(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cached_tokens": self.cached_tokens,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Checkpoints written before ``cached_tokens`` existed hold three values.
        object.__setattr__(self, "cached_tokens", 0)
        for key, value in state.items():
            object.__setattr__(self, key, value)


@persisted("agentkit.ResponseMeta")
@refuse_writes("attrs.evolve(meta, {name}=...)")
@attrs.frozen
class ResponseMeta:
    """Metadata of a model response: why it finished and what it cost.

    ``cost`` is the price of the response's token usage, set by a model that has a
    :class:`~agentkit.limits.ModelPricing` (``None`` otherwise).
    """

    finish_reason: str = ""
    usage: TokenUsage | None = None
    cost: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"finish_reason": self.finish_reason, "usage": self.usage, "cost": self.cost}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Checkpoints written before ``cost`` existed hold two values.
        object.__setattr__(self, "cost", None)
        for key, value in state.items():
            object.__setattr__(self, key, value)


@persisted("agentkit.ToolInfo")
@attrs.define
class ToolInfo:
    """What a model is told about a tool: its name, description and JSON Schema parameters.

    ``parameters`` is a JSON Schema object such as
    ``{"type": "object", "properties": {...}, "required": [...]}``.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = attrs.Factory(lambda: {"type": "object", "properties": {}})


def _to_role(role: Role | str) -> Role:
    # Most messages are built with a Role already; skip the enum lookup for them.
    return role if type(role) is Role else Role(role)


def _to_calls(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return calls if type(calls) is tuple else tuple(calls)


@persisted("agentkit.Message")
@refuse_writes("attrs.evolve({var}, {name}=...)")
@attrs.frozen(getstate_setstate=False)
class Message:
    """A chat message: a value, never changed once made (make a changed copy with
    ``attrs.evolve(message, content=...)``).

    Args:
        role: who wrote it (a :class:`Role`, or its string value).
        content: the text.
        tool_calls: tool calls requested by an assistant message (any iterable; kept as a
            tuple).
        tool_call_id: for a tool message, the id of the call it answers.
        tool_name: for a tool message, the name of the tool that produced it.
        name: an optional participant name.
        response_meta: finish reason and token usage of a model response.
        extra: anything else; must be JSON-safe for :meth:`to_dict` (kept as a read-only
            dict).
    """

    role: Role = attrs.field(converter=_to_role)
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_to_calls)
    tool_call_id: str = ""
    tool_name: str = ""
    name: str = ""
    response_meta: ResponseMeta | None = None
    extra: dict[str, Any] = attrs.field(default=NO_EXTRA, converter=read_only)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "tool_calls": self.tool_calls,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "name": self.name,
            "response_meta": self.response_meta,
            "extra": dict(self.extra),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        setter = object.__setattr__
        for key, item in state.items():
            setter(self, key, item)
        role = self.role
        if type(role) is not Role:  # a plain str from an older pickle; a Role is kept as is
            setter(self, "role", Role(role))
        # Older pickles hold lists and plain dicts: made values here.
        setter(self, "tool_calls", _to_calls(self.tool_calls))
        setter(self, "extra", read_only(self.extra))

    # --- notebook display (see agentkit.display) ---
    def _repr_html_(self) -> str:
        """HTML for Jupyter: who wrote it, the text and the tool calls."""
        from agentkit import _html

        who = self.name or self.role.value
        return _html.render(_message_html_lines(self, who), who)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe dict in the OpenAI message shape (empty fields left out)."""
        data: dict[str, Any] = {"role": self.role.value, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [_tool_call_to_dict(call) for call in self.tool_calls]
        if self.tool_call_id:
            data["tool_call_id"] = self.tool_call_id
        if self.tool_name:
            data["tool_name"] = self.tool_name
        if self.name:
            data["name"] = self.name
        if self.response_meta is not None:
            meta: dict[str, Any] = {"finish_reason": self.response_meta.finish_reason}
            usage = self.response_meta.usage
            if usage is not None:
                meta["usage"] = {
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "total_tokens": usage.total_tokens,
                }
                if usage.cached_tokens:
                    meta["usage"]["cached_tokens"] = usage.cached_tokens
            if self.response_meta.cost is not None:
                meta["cost"] = self.response_meta.cost
            data["response_meta"] = meta
        if self.extra:
            data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        """Build a message from :meth:`to_dict` output (or an OpenAI-style message dict)."""
        if "role" not in data:
            raise AgentKitValueError(f"a message dict needs a 'role' key (got keys {sorted(data)})")
        meta = data.get("response_meta")
        response_meta = None
        if meta is not None:
            usage = meta.get("usage")
            response_meta = ResponseMeta(
                finish_reason=meta.get("finish_reason") or "",
                usage=None if usage is None else TokenUsage(**usage),
                cost=meta.get("cost"),
            )
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=[_tool_call_from_dict(call) for call in data.get("tool_calls") or ()],
            tool_call_id=data.get("tool_call_id") or "",
            tool_name=data.get("tool_name") or "",
            name=data.get("name") or "",
            response_meta=response_meta,
            extra=dict(data.get("extra") or {}),
        )


def _tool_call_to_dict(call: ToolCall) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": call.id,
        "type": call.type,
        "function": {"name": call.function.name, "arguments": call.function.arguments},
    }
    if call.index is not None:
        data["index"] = call.index
    if call.extra:
        data["extra"] = dict(call.extra)
    return data


def _tool_call_from_dict(data: dict[str, Any]) -> ToolCall:
    function = data.get("function") or {}
    return ToolCall(
        id=data.get("id") or "",
        function=FunctionCall(
            name=function.get("name") or "", arguments=function.get("arguments") or ""
        ),
        type=data.get("type") or "function",
        index=data.get("index"),
        extra=dict(data.get("extra") or {}),
    )


def user_message(content: str) -> Message:
    """Return a user message."""
    return Message(Role.USER, content)


def system_message(content: str) -> Message:
    """Return a system message."""
    return Message(Role.SYSTEM, content)


def assistant_message(content: str, tool_calls: Sequence[ToolCall] | None = None) -> Message:
    """Return an assistant message, optionally requesting tool calls."""
    return Message(Role.ASSISTANT, content, tuple(tool_calls or ()))


def tool_message(content: str, tool_call_id: str, tool_name: str = "") -> Message:
    """Return the result of a tool call."""
    return Message(Role.TOOL, content, tool_call_id=tool_call_id, tool_name=tool_name)


def concat_messages(chunks: Sequence[Message]) -> Message:
    """Merge the chunks of a streamed message into one message.

    Contents are concatenated. Tool calls are merged by ``index``: the id, type and name come
    from the first fragment that has them and the ``arguments`` are concatenated; merged calls
    are ordered by index, followed by calls without an index in the order they came. The last
    non-empty finish reason and the usage (and cost) of the last chunk that has one are kept.
    ``extra`` dicts are merged (string values concatenated, other values: last one wins).

    Raises:
        ValueError: no chunks, or chunks with different roles.
    """
    if not chunks:
        raise AgentKitValueError("concat_messages() needs at least one chunk")
    first = chunks[0]
    if len(chunks) == 1:
        return first  # a value: the one chunk is the whole message
    role = first.role
    contents: list[str] = []
    name = tool_call_id = tool_name = ""
    finish_reason = ""
    usage: TokenUsage | None = None
    cost: float | None = None
    extra: dict[str, Any] = {}
    indexed: dict[int, list[ToolCall]] = {}
    unindexed: list[ToolCall] = []
    for chunk in chunks:
        if chunk.role != role:
            raise AgentKitValueError(
                f"cannot concatenate messages of different roles: {role.value!r} and "
                f"{chunk.role.value!r}"
            )
        if chunk.content:
            contents.append(chunk.content)
        name = name or chunk.name
        tool_call_id = tool_call_id or chunk.tool_call_id
        tool_name = tool_name or chunk.tool_name
        for call in chunk.tool_calls:
            if call.index is None:
                unindexed.append(call)
            else:
                indexed.setdefault(call.index, []).append(call)
        meta = chunk.response_meta
        if meta is not None:
            finish_reason = meta.finish_reason or finish_reason
            usage = meta.usage if meta.usage is not None else usage
            cost = meta.cost if meta.cost is not None else cost
        for key, value in chunk.extra.items():
            previous = extra.get(key)
            if isinstance(previous, str) and isinstance(value, str):
                extra[key] = previous + value
            else:
                extra[key] = value
    tool_calls = [_merge_fragments(index, indexed[index]) for index in sorted(indexed)]
    tool_calls.extend(unindexed)  # values: kept as they came
    response_meta = None
    if finish_reason or usage is not None or any(c.response_meta for c in chunks):
        response_meta = ResponseMeta(finish_reason=finish_reason, usage=usage, cost=cost)
    return Message(
        role,
        "".join(contents),
        tool_calls,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        name=name,
        response_meta=response_meta,
        extra=extra,
    )


def _merge_fragments(index: int, fragments: list[ToolCall]) -> ToolCall:
    call_id = call_type = function_name = ""
    extra: dict[str, Any] = {}
    for fragment in fragments:
        call_id = call_id or fragment.id
        call_type = call_type or fragment.type
        function_name = function_name or fragment.function.name
        if fragment.extra:
            extra.update(fragment.extra)
    arguments = "".join([fragment.function.arguments for fragment in fragments])
    return ToolCall(
        call_id, FunctionCall(function_name, arguments), call_type or "function", index, extra
    )


def _message_html_lines(message: Message, who: str) -> list[tuple[str, str]]:
    """The ``(kind, text)`` transcript lines of a message: its content, then its tool calls.

    Framework-internal, for the notebook display (see ``agentkit._html``).
    """
    if message.role is Role.TOOL:
        return [("result", f"{message.tool_name or 'tool'} returned: {message.content}")]
    lines = [("speech", message.content)] if message.content else []
    for call in message.tool_calls:
        lines.append(("call", f"{who} calls {call.function.name}({call.function.arguments})"))
    return lines


def _json_safe(value: Any) -> Any:
    """``value`` as JSON-safe data (for ``to_dict``): containers walked, messages as their
    dicts, the values tool results may hold as JSON (see ``agentkit._jsonable``: records and
    pydantic models as objects, enums as values, dates as ISO strings...), anything else as
    its ``repr``."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value.value if isinstance(value, enum.Enum) else value
    if isinstance(value, dict):
        return {str(_json_safe(key)): _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    if isinstance(value, Message):
        return value.to_dict()
    converted = jsonable(value)
    if converted is UNENCODABLE:
        return repr(value)
    return _json_safe(converted)
