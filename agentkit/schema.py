"""Chat messages: the data exchanged with models, tools and agents.

All types are frozen attrs classes: values that never change once made (a message an event
carries is a fact no reader can rewrite). A message's ``tool_calls`` is a tuple and its
``extra`` (and a tool call's) a read-only dict; make a changed copy with ``attrs.evolve``.
"""

from __future__ import annotations

import base64
import binascii
import enum
import threading
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

import attrs

from agentkit import _media
from agentkit._ids import new_id
from agentkit._jsonable import UNENCODABLE, jsonable
from agentkit._persist import persisted
from agentkit._values import NO_EXTRA, ReadOnlyDict, read_only, refuse_writes
from agentkit.errors import AgentKitTypeError, AgentKitValueError, ContentPartError

__all__ = [
    "AudioPart",
    "ContentPart",
    "EVENT_INLINE_BYTES",
    "FilePart",
    "FunctionCall",
    "INLINE_IMAGE_BYTES",
    "ImagePart",
    "MESSAGE_ID_KEY",
    "Message",
    "PartLimits",
    "ResponseMeta",
    "Role",
    "TextPart",
    "TokenUsage",
    "ToolCall",
    "ToolInfo",
    "assistant_message",
    "concat_messages",
    "describe_part",
    "ensure_message_id",
    "media_tokens",
    "message_id",
    "part_limits",
    "set_part_limits",
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

    ``prompt_tokens`` counts every input token. ``cached_tokens`` is the part of it the server
    read from its prompt cache (OpenAI's ``prompt_tokens_details.cached_tokens``, Anthropic's
    ``cache_read_input_tokens``, Gemini's ``cachedContentTokenCount``) and
    ``cache_write_tokens`` the part it wrote to the cache (Anthropic's
    ``cache_creation_input_tokens``); both are ``0`` when the server says nothing.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    def __getstate__(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Checkpoints written before ``cached_tokens`` existed hold three values, those
        # written before ``cache_write_tokens`` four.
        object.__setattr__(self, "cached_tokens", 0)
        object.__setattr__(self, "cache_write_tokens", 0)
        for key, value in state.items():
            object.__setattr__(self, key, value)


@persisted("agentkit.ResponseMeta")
@refuse_writes("attrs.evolve(meta, {name}=...)")
@attrs.frozen
class ResponseMeta:
    """Metadata of a model response: why it finished and what it cost.

    ``cost`` is the price of the response's token usage, set by a model that has a
    :class:`~agentkit.ModelPricing` (``None`` otherwise).
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

    ``deferred`` (keyword-only) marks a tool for the model's own tool search (Eino's
    ``DeferredToolInfos``): a model with a server-side tool search
    (:class:`~agentkit.models.AnthropicChatModel`,
    :class:`~agentkit.models.OpenAIResponsesModel`) sends it with ``defer_loading`` and its
    search tool, so the tool's schema enters the model's context only once the model's
    search finds it. The other HTTP models (:class:`~agentkit.models.OpenAIChatModel`,
    :class:`~agentkit.models.GeminiChatModel`) refuse deferred tools with
    :class:`~agentkit.models.ToolSearchUnsupportedError`; a
    :class:`~agentkit.models.ScriptedChatModel` records them as offered. A deferred tool
    runs like any other when the model calls it.
    :class:`~agentkit.middlewares.ToolSearchMiddleware` with ``use_model_tool_search=True``
    defers its tools this way.
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = attrs.Factory(lambda: {"type": "object", "properties": {}})
    deferred: bool = attrs.field(default=False, kw_only=True)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "deferred": self.deferred,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Checkpoints written before ``deferred`` existed hold three values.
        object.__setattr__(self, "deferred", False)
        for key, value in state.items():
            object.__setattr__(self, key, value)


# --- content parts ----------------------------------------------------------------------


@attrs.frozen
class PartLimits:
    """How much content parts may hold: checked when a part or a message's parts are built.

    Args:
        max_part_bytes: the most bytes one part's data may have (50 MiB by default: above
            every provider's own limit for one image, below what would be a mistake).
        max_parts: the most parts one message may have.

    Set the process's limits with :func:`set_part_limits`.
    """

    max_part_bytes: int = 50 * 1024 * 1024
    max_parts: int = 100

    def __attrs_post_init__(self) -> None:
        for name in ("max_part_bytes", "max_parts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AgentKitValueError(
                    f"PartLimits.{name} must be a positive int (got {value!r})"
                )


_limits = PartLimits()
_limits_lock = threading.Lock()


def part_limits() -> PartLimits:
    """The :class:`PartLimits` in force in this process."""
    return _limits


def set_part_limits(limits: PartLimits) -> PartLimits:
    """Put ``limits`` in force for every part built from now on; return the previous ones.

    Parts built before keep what they hold (they are values). For example, to accept files of
    up to 200 MiB::

        from agentkit.schema import PartLimits, set_part_limits

        previous = set_part_limits(PartLimits(max_part_bytes=200 * 1024 * 1024))
        set_part_limits(previous)  # back to what it was
    """
    global _limits
    if not isinstance(limits, PartLimits):
        raise AgentKitTypeError(
            f"set_part_limits() takes a PartLimits (got {type(limits).__name__})"
        )
    with _limits_lock:
        previous, _limits = _limits, limits
    return previous


def _bytes_repr(data: bytes | None) -> str:
    # A part's bytes can be megabytes: its repr shows their size, never the bytes.
    return "None" if data is None else f"<{len(data)} bytes>"


def _to_bytes(data: Any) -> Any:
    # bytearray and memoryview are copied once into bytes: a part's data never changes.
    return bytes(data) if isinstance(data, (bytearray, memoryview)) else data


def _check_source(part: ImagePart | FilePart | AudioPart, family: str) -> None:
    """Check that ``part`` has exactly one of data/url, within the limits and of its type;
    decode a ``data:`` URL into data. Called by the parts' ``__attrs_post_init__``."""
    kind = type(part).__name__
    data, url = part.data, getattr(part, "url", None)
    if (data is None) == (url is None):
        given = "both" if data is not None else "neither"
        raise ContentPartError(f"{kind} needs exactly one of data (bytes) and url (got {given})")
    if url is not None:
        if not isinstance(url, str):
            raise ContentPartError(f"{kind}: url must be a str (got {type(url).__name__})")
        if url.startswith("data:"):
            data, media_type = _decode_data_url(url, kind)
            object.__setattr__(part, "data", data)
            object.__setattr__(part, "url", None)
            if part.media_type is None:
                object.__setattr__(part, "media_type", media_type)
        else:
            try:
                _media.check_url(url, kind)
            except ValueError as error:
                raise ContentPartError(str(error)) from None
            if part.media_type is not None:
                object.__setattr__(part, "media_type", _media.normalize(part.media_type))
            return
    data = part.data
    if not isinstance(data, bytes):
        raise ContentPartError(
            f"{kind}: data must be bytes (got {type(data).__name__}); read a file with "
            "Path(...).read_bytes()"
        )
    limit = _limits.max_part_bytes
    if len(data) > limit:
        raise ContentPartError(
            f"{kind} of {len(data)} bytes is over the limit of {limit} bytes per part "
            f"(PartLimits.max_part_bytes); send a smaller {family}, or raise the limit with "
            "agentkit.schema.set_part_limits(PartLimits(max_part_bytes=...))"
        )
    if not data:
        raise ContentPartError(f"{kind}: data is empty")
    try:
        media_type = _media.check_bytes(family, data, part.media_type, kind)
    except ValueError as error:
        raise ContentPartError(str(error)) from None
    object.__setattr__(part, "media_type", media_type)


def _decode_data_url(url: str, kind: str) -> tuple[bytes, str | None]:
    header, comma, payload = url.partition(",")
    if not comma or not header.endswith(";base64"):
        raise ContentPartError(
            f"{kind}: a data: URL must be base64 (data:<media type>;base64,<data>); got "
            f"{url[:40]!r}..."
        )
    # Four base64 characters are three bytes: refuse an oversized URL before decoding it.
    if len(payload) // 4 * 3 > _limits.max_part_bytes + 3:
        raise ContentPartError(
            f"{kind} data: URL of about {len(payload) // 4 * 3} bytes is over the limit of "
            f"{_limits.max_part_bytes} bytes per part (PartLimits.max_part_bytes)"
        )
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ContentPartError(f"{kind}: the data: URL is not valid base64 ({error})") from None
    media_type = header[len("data:") : -len(";base64")] or None
    return data, media_type


@persisted("agentkit.TextPart")
@attrs.frozen
class TextPart:
    """Text in a message made of parts.

    ``Message(..., parts=[TextPart("a"), ...]).content`` is the text of its text parts.
    """

    text: str = attrs.field(validator=attrs.validators.instance_of(str))


@persisted("agentkit.ImagePart")
@attrs.frozen
class ImagePart:
    """An image: its bytes or an ``http(s)`` URL the model server fetches.

    Args:
        data: the image file's bytes (PNG, JPEG, GIF, WebP...); ``media_type`` is read from
            them when not given, and checked against them when given. A ``data:`` URL given
            as ``url`` is decoded into ``data``.
        url: where the model server fetches the image; agentkit never fetches it, and refuses
            ``file://`` and hosts of this machine or a private network.
        media_type: such as ``"image/png"``.
        detail: how closely the model looks (OpenAI's ``"low"``, ``"high"``, ``"auto"``);
            ``None`` leaves it to the server.

    Exactly one of ``data`` and ``url``. Parts are values: immutable, equal by content,
    shared (never copied) by every event, store and reader that holds the message.

    Raises:
        ContentPartError: both or neither of data/url, data over
            ``PartLimits.max_part_bytes``, bytes that are not an image of that type (a
            truncated PNG, an executable), or a refused URL.
    """

    data: bytes | None = attrs.field(default=None, converter=_to_bytes, repr=_bytes_repr)
    url: str | None = attrs.field(default=None, kw_only=True)
    media_type: str | None = attrs.field(default=None, kw_only=True)
    detail: str | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        _check_source(self, "image")

    def _repr_html_(self) -> str:
        """The image itself in a notebook (a placeholder when it is too large to inline)."""
        from agentkit import _html

        return _html.render(_part_html_lines(self), "image")


@persisted("agentkit.FilePart")
@attrs.frozen
class FilePart:
    """A document (a PDF, a text file...) for the model to read: its bytes or a URL.

    Args:
        data: the file's bytes; ``media_type`` is read from them when not given (PDF) and
            checked against them when given.
        url: where the model server fetches the file (the same rules as
            :class:`ImagePart`'s).
        media_type: such as ``"application/pdf"``; ``application/octet-stream`` when not
            given and not recognised.
        filename: the name the model is told.

    Raises:
        ContentPartError: as for :class:`ImagePart`.
    """

    data: bytes | None = attrs.field(default=None, converter=_to_bytes, repr=_bytes_repr)
    url: str | None = attrs.field(default=None, kw_only=True)
    media_type: str | None = attrs.field(default=None, kw_only=True)
    filename: str | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        _check_source(self, "file")


@persisted("agentkit.AudioPart")
@attrs.frozen
class AudioPart:
    """A sound: its bytes and media type (``"audio/wav"``, ``"audio/mpeg"``...).

    Raises:
        ContentPartError: as for :class:`ImagePart` (audio has no URL form).
    """

    data: bytes = attrs.field(converter=_to_bytes, repr=_bytes_repr)
    media_type: str = attrs.field(kw_only=True)

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.media_type, str):
            raise ContentPartError(
                f"AudioPart: media_type must be a str such as 'audio/wav' (got {self.media_type!r})"
            )
        _check_source(self, "audio")


ContentPart: TypeAlias = TextPart | ImagePart | FilePart | AudioPart
"""Any content part: :class:`TextPart`, :class:`ImagePart`, :class:`FilePart` or
:class:`AudioPart`.

A union of the classes themselves (not a string), so an annotation naming it resolves in the
module that imports it: ``@tool`` on a generator annotated ``-> Iterator[ContentPart]``
streams parts, with or without ``from __future__ import annotations``."""

_PART_TYPES = (TextPart, ImagePart, FilePart, AudioPart)
_PART_NAMES = ", ".join(cls.__name__ for cls in _PART_TYPES)


def _to_parts(value: Any) -> tuple[ContentPart, ...]:
    """A message's parts as a tuple, each checked (a ``str`` is a :class:`TextPart`, an
    OpenAI content-part dict is read as such)."""
    if type(value) is tuple and not value:
        return value
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Sequence):
        raise ContentPartError(
            f"Message.parts must be a sequence of parts (got {type(value).__name__}); pass "
            "[TextPart(...), ImagePart(...)], or use user_message([...])"
        )
    limit = _limits.max_parts
    if len(value) > limit:
        raise ContentPartError(
            f"a message of {len(value)} parts is over the limit of {limit} parts per message "
            "(PartLimits.max_parts); send fewer parts, or raise the limit with "
            "agentkit.schema.set_part_limits(PartLimits(max_parts=...))"
        )
    parts: list[ContentPart] = []
    for index, item in enumerate(value):
        if isinstance(item, _PART_TYPES):
            parts.append(item)
        elif isinstance(item, str):
            parts.append(TextPart(item))
        elif isinstance(item, dict):
            parts.append(_part_from_openai(item, index))
        else:
            raise ContentPartError(
                f"part {index} of a message is a {type(item).__name__}; a part is a str or one "
                f"of {_PART_NAMES}"
            )
    return tuple(parts)


def _part_from_openai(item: dict[str, Any], index: int) -> ContentPart:
    """A part from one item of an OpenAI content array (``{"type": "image_url", ...}``)."""
    kind = item.get("type")
    try:
        if kind == "text" and isinstance(item.get("text"), str):
            return TextPart(item["text"])
        if kind == "image_url":
            image = item.get("image_url")
            image = {"url": image} if isinstance(image, str) else image
            if isinstance(image, dict) and isinstance(image.get("url"), str):
                return ImagePart(url=image["url"], detail=image.get("detail"))
        if kind == "input_audio":
            audio = item.get("input_audio")
            if isinstance(audio, dict) and isinstance(audio.get("data"), str):
                fmt = str(audio.get("format") or "wav")
                return AudioPart(
                    base64.b64decode(audio["data"], validate=True),
                    media_type=f"audio/{'mpeg' if fmt == 'mp3' else fmt}",
                )
        if kind == "file":
            file = item.get("file")
            if isinstance(file, dict) and isinstance(file.get("file_data"), str):
                data = file["file_data"]
                filename = file.get("filename")
                if data.startswith("data:"):
                    return FilePart(url=data, filename=filename)
                return FilePart(base64.b64decode(data, validate=True), filename=filename)
    except (binascii.Error, ValueError) as error:
        if isinstance(error, ContentPartError):
            raise
        raise ContentPartError(
            f"part {index} of a message ({kind!r}) holds data that is not base64 ({error})"
        ) from None
    raise ContentPartError(
        f"part {index} of a message is a dict agentkit cannot read as a content part "
        f"(type {kind!r}, keys {sorted(item)[:6]}); pass {_PART_NAMES} objects, or OpenAI's "
        "text, image_url, input_audio and file parts"
    )


def _text_of(parts: tuple[ContentPart, ...]) -> str:
    return "".join([part.text for part in parts if type(part) is TextPart])


def _part_to_dict(part: ContentPart, *, max_inline_bytes: int | None = None) -> dict[str, Any]:
    """The JSON-safe dict of a part (``Message.to_dict``'s ``"parts"`` items); bytes as
    base64 text, or (over ``max_inline_bytes``) a reference: ``"omitted": true``, ``size``
    and ``sha256``."""
    if type(part) is TextPart:
        return {"type": "text", "text": part.text}
    assert not isinstance(part, TextPart)
    kind = {ImagePart: "image", FilePart: "file", AudioPart: "audio"}[type(part)]
    data: dict[str, Any] = {"type": kind}
    if part.data is not None:
        if max_inline_bytes is not None and len(part.data) > max_inline_bytes:
            data["omitted"] = True
            data["size"] = len(part.data)
            import hashlib  # not at import: ``import agentkit`` stays light

            data["sha256"] = hashlib.sha256(part.data).hexdigest()
        else:
            data["data"] = base64.b64encode(part.data).decode("ascii")
    url = getattr(part, "url", None)
    if url is not None:
        data["url"] = url
    if part.media_type is not None:
        data["media_type"] = part.media_type
    for name in ("detail", "filename"):
        value = getattr(part, name, None)
        if value is not None:
            data[name] = value
    return data


def _part_from_dict(data: Any, index: int = 0) -> ContentPart:
    """The part of a :func:`_part_to_dict` dict."""
    if not isinstance(data, dict):
        raise ContentPartError(f"part {index} is a {type(data).__name__}, not a dict")
    kind = data.get("type")
    if kind == "text":
        return TextPart(data.get("text", ""))
    if data.get("omitted"):
        raise ContentPartError(
            f"part {index} ({kind}) is a reference to {data.get('size')} bytes that were left "
            "out (an event's dict); it has no data to build a part from"
        )
    classes: dict[Any, type[ImagePart | FilePart | AudioPart]] = {
        "image": ImagePart,
        "file": FilePart,
        "audio": AudioPart,
    }
    cls = classes.get(kind)
    if cls is None:
        return _part_from_openai(data, index)  # an OpenAI content part, or an error
    encoded = data.get("data")
    try:
        raw = None if encoded is None else base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError, TypeError) as error:
        raise ContentPartError(f"part {index} ({kind}): 'data' is not base64 ({error})") from None
    options = {
        name: data[name]
        for name in ("url", "media_type", "detail", "filename")
        if data.get(name) is not None and (name != "url" or cls is not AudioPart)
    }
    if cls is ImagePart:
        options.pop("filename", None)
    elif cls is FilePart:
        options.pop("detail", None)
    else:
        options.pop("detail", None)
        options.pop("filename", None)
        options.pop("url", None)
    part: ContentPart = cls(raw, **options)
    return part


MESSAGE_ID_KEY = "_agentkit_msg_id"
"""The ``Message.extra`` key that holds a message's stable id (see :func:`message_id`)."""


def message_id(message: Message) -> str | None:
    """The stable id of ``message``, or ``None`` when it has none (Eino's ``GetMessageID``).

    The id lives in ``message.extra`` under :data:`MESSAGE_ID_KEY`, so it travels wherever
    the message does: events, checkpoints, conversation stores, ``to_dict``.
    """
    value = message.extra.get(MESSAGE_ID_KEY) if message.extra else None
    return value if isinstance(value, str) and value else None


def ensure_message_id(message: Message) -> Message:
    """``message`` itself when it has an id, else a copy of it with a new one (a UUID4 hex)
    (Eino's ``EnsureMessageID``).

    The message given is never changed (messages are values once sent): keep the one
    returned::

        from agentkit.schema import ensure_message_id, message_id, user_message

        message = ensure_message_id(user_message("hi"))
        assert message_id(message) == message_id(ensure_message_id(message))
    """
    if message_id(message) is not None:
        return message
    return attrs.evolve(message, extra={**message.extra, MESSAGE_ID_KEY: new_id()})


_NO_PARTS: tuple[ContentPart, ...] = ()


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
        parts: the content as parts (text, images, files, sounds); ``()`` for a plain-text
            message. A ``str`` in it is a :class:`TextPart`. When a message has parts its
            ``content`` is the text of its :class:`TextPart` s joined in order (``"".join``);
            a ``content`` given beside parts must be that text or empty.

    A raw OpenAI content array given as ``content`` (``[{"type": "text", ...},
    {"type": "image_url", ...}]``) is read into ``parts``; any other non-text content is
    refused with a :class:`~agentkit.errors.ContentPartError`, so a message always holds what a
    conversation store can keep.
    """

    role: Role = attrs.field(converter=_to_role)
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_to_calls)
    tool_call_id: str = ""
    tool_name: str = ""
    name: str = ""
    response_meta: ResponseMeta | None = None
    extra: dict[str, Any] = attrs.field(default=NO_EXTRA, converter=read_only)
    parts: tuple[ContentPart, ...] = attrs.field(default=(), converter=_to_parts)

    def __repr__(self) -> str:
        # As attrs writes it, but ``parts`` only when there are some: a plain-text message
        # reads as it did before parts existed.
        fields = ", ".join(
            f"{field.name}={getattr(self, field.name)!r}"
            for field in _MESSAGE_FIELDS
            if field.name != "parts" or self.parts
        )
        return f"Message({fields})"

    def __attrs_post_init__(self) -> None:
        # The default (the empty tuple, a singleton) and text content: nothing to do.
        if self.parts is not _NO_PARTS or type(self.content) is not str:
            self._settle_parts()

    def _settle_parts(self) -> None:
        content: Any = self.content
        parts = self.parts
        if type(content) is not str:
            if isinstance(content, str):  # a str subclass (an enum's value, say)
                content = str(content)
            elif isinstance(content, (list, tuple)) and not parts:
                parts = _to_parts(content)
                content = ""
            else:
                raise ContentPartError(
                    f"Message content must be a str (got {type(content).__name__}); pass "
                    "images, files and sounds as parts: user_message(['text', ImagePart(...)])"
                )
        if parts:
            text = _text_of(parts)
            if content and content != text:
                raise ContentPartError(
                    "a message with parts takes its content from its text parts; content="
                    f"{content[:40]!r} differs from their text {text[:40]!r} (leave content "
                    "empty, or put the text in a TextPart)"
                )
            content = text
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "content", content)

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "role": self.role,
            "content": self.content,
            "tool_calls": self.tool_calls,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "name": self.name,
            "response_meta": self.response_meta,
            "extra": dict(self.extra),
        }
        if self.parts:  # a plain-text message pickles exactly as before parts existed
            state["parts"] = self.parts
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        setter = object.__setattr__
        setter(self, "parts", ())
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

    def to_dict(self, *, max_inline_bytes: int | None = None) -> dict[str, Any]:
        """Return a JSON-safe dict in the OpenAI message shape (empty fields left out).

        ``content`` is the text; a message with parts also has ``"parts"``: one dict per part,
        ``{"type": "text", "text": ...}`` or ``{"type": "image" | "file" | "audio", "data":
        <base64>, "url": ..., "media_type": ..., "detail": ..., "filename": ...}`` (the fields
        it has). With ``max_inline_bytes``, media larger than that leave their ``data`` out
        and carry ``"omitted": true``, their ``size`` and ``sha256`` instead: a reference for
        event streams, which :meth:`from_dict` cannot build a part from.
        """
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
                if usage.cache_write_tokens:
                    meta["usage"]["cache_write_tokens"] = usage.cache_write_tokens
            if self.response_meta.cost is not None:
                meta["cost"] = self.response_meta.cost
            data["response_meta"] = meta
        if self.extra:
            data["extra"] = dict(self.extra)
        if self.parts:
            data["parts"] = [
                _part_to_dict(part, max_inline_bytes=max_inline_bytes) for part in self.parts
            ]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        """Build a message from :meth:`to_dict` output (or an OpenAI-style message dict).

        An OpenAI content array as ``content`` is read into parts.
        """
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
            content="" if data.get("parts") else data.get("content") or "",
            tool_calls=[_tool_call_from_dict(call) for call in data.get("tool_calls") or ()],
            tool_call_id=data.get("tool_call_id") or "",
            tool_name=data.get("tool_name") or "",
            name=data.get("name") or "",
            response_meta=response_meta,
            extra=dict(data.get("extra") or {}),
            parts=tuple(
                _part_from_dict(part, index) for index, part in enumerate(data.get("parts") or ())
            ),
        )


_MESSAGE_FIELDS = attrs.fields(Message)


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


def user_message(content: str | Sequence[str | ContentPart]) -> Message:
    """Return a user message: of text, or of text and parts.

    ``content`` is the text, or a sequence of ``str`` and parts (a ``str`` is a
    :class:`TextPart`)::

        from agentkit import ImagePart, user_message

        png = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                            "0000000d4944415478da63f8cfc0f01f0005000201e2d6e1c10000000049454e44ae426082")
        message = user_message(["What is in this picture?", ImagePart(png)])
        assert message.content == "What is in this picture?"

    Raises:
        ContentPartError: an item that is not text or a part, or a part the limits refuse.
    """
    if isinstance(content, str):
        return Message(Role.USER, content)
    return Message(Role.USER, parts=_to_parts(content))


def _input_messages(value: Any, where: str) -> list[Message]:
    """What a run is given, as its input messages: a ``str``, a :class:`Message`, a sequence
    of messages, or a part or a sequence of ``str`` and parts (one user message).

    ``where`` names the entry point in the errors (``"Runner.invoke"``).

    Raises:
        TypeError: anything else (a dict, a number, messages mixed with parts).
        ContentPartError: a part the limits or the checks refuse.
    """
    if isinstance(value, str):
        return [user_message(value)]
    if isinstance(value, Message):
        return [value]
    if isinstance(value, _PART_TYPES):
        return [user_message([value])]
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        items = list(value)
        if all(isinstance(item, Message) for item in items):
            return items
        if not any(isinstance(item, Message) for item in items):
            for item in items:
                if isinstance(item, dict) and "role" in item:
                    raise AgentKitTypeError(
                        f"{where}: got a message dict ({sorted(item)[:4]}...); build messages "
                        "with Message.from_dict(d), or pass the user's text or parts"
                    )
            return [user_message(items)]
        raise AgentKitTypeError(
            f"{where}: got Message objects mixed with other items; pass a list of messages, "
            "or a list of str and parts (one user message)"
        )
    raise AgentKitTypeError(
        f"{where} takes the user's text (a str), a Message, a list of messages, or a list of "
        f"str and parts (TextPart, ImagePart, FilePart, AudioPart); got {type(value).__name__}"
    )


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
    parts = _concat_parts(chunks) if any(chunk.parts for chunk in chunks) else ()
    return Message(
        role,
        "" if parts else "".join(contents),
        tool_calls,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        name=name,
        response_meta=response_meta,
        extra=extra,
        parts=parts,
    )


def _concat_parts(chunks: Sequence[Message]) -> tuple[ContentPart, ...]:
    """The parts of streamed chunks, in order: a chunk without parts is its text; adjacent
    text parts are joined, and so are adjacent sounds of the same media type (a streamed
    audio reply arrives as pieces of one sound)."""
    merged: list[ContentPart] = []
    for chunk in chunks:
        for part in chunk.parts or ((TextPart(chunk.content),) if chunk.content else ()):
            last = merged[-1] if merged else None
            if type(part) is TextPart and type(last) is TextPart:
                merged[-1] = TextPart(last.text + part.text)
            elif (
                type(part) is AudioPart
                and type(last) is AudioPart
                and last.media_type == part.media_type
            ):
                merged[-1] = AudioPart(last.data + part.data, media_type=part.media_type)
            else:
                merged.append(part)
    return tuple(merged)


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


INLINE_IMAGE_BYTES = 5 * 1024 * 1024
"""The largest image (or sound) a notebook view shows inline (a larger one is a
placeholder)."""

EVENT_INLINE_BYTES = 256 * 1024
"""The largest media an event's dict carries inline (:meth:`~agentkit.AgentEvent.to_dict`,
so SSE frames and run logs): larger media are references (size and SHA-256)."""


def media_tokens(message: Message) -> int:
    """A rough count of the tokens a model spends on a message's images, files and sounds.

    Media are not counted by their bytes (a 1 MB PNG is not 350,000 tokens): an image is
    85 tokens at ``detail="low"`` and 765 otherwise (OpenAI's figure for a 1024 x 1024
    image), a sound about 10 tokens a second (guessed from 16 kHz 16-bit), a file about one
    token per 40 bytes (a PDF's text and page images). Text parts count nothing here: they
    are the message's ``content``.
    """
    tokens = 0
    for part in message.parts:
        if type(part) is ImagePart:
            tokens += 85 if part.detail == "low" else 765
        elif type(part) is AudioPart:
            tokens += max(1, len(part.data) // 3200)
        elif type(part) is FilePart:
            tokens += max(85, len(part.data) // 40) if part.data is not None else 85
    return tokens


def describe_part(part: ContentPart) -> str:
    """A one-line placeholder for a part that is not text, with its kind, type and size
    (``"[image image/png, 70 bytes]"``): what a terminal, a log or a trace shows instead of
    the bytes."""
    if type(part) is TextPart:
        return part.text
    kind = {ImagePart: "image", FilePart: "file", AudioPart: "audio"}[type(part)]
    assert not isinstance(part, TextPart)
    fields = [part.media_type or "unknown type"]
    filename = getattr(part, "filename", None)
    if filename:
        fields.insert(0, repr(filename))
    data = part.data
    fields.append(f"{len(data)} bytes" if data is not None else str(getattr(part, "url", "")))
    return f"[{kind} {', '.join(fields)}]"


def _part_html_lines(part: ContentPart) -> list[tuple[str, str]]:
    """A ``media`` line saying what the part is, then (an image, a sound) an ``image`` or
    ``audio`` line holding the URL the notebook shows or plays it from."""
    lines = [("media", describe_part(part))]
    if type(part) is ImagePart:
        if part.url is not None:
            lines.append(("image", part.url))
        elif part.data is not None and len(part.data) <= INLINE_IMAGE_BYTES:
            encoded = base64.b64encode(part.data).decode("ascii")
            lines.append(("image", f"data:{part.media_type};base64,{encoded}"))
    elif type(part) is AudioPart and len(part.data) <= INLINE_IMAGE_BYTES:
        encoded = base64.b64encode(part.data).decode("ascii")
        lines.append(("audio", f"data:{part.media_type};base64,{encoded}"))
    return lines


def _message_html_lines(message: Message, who: str) -> list[tuple[str, str]]:
    """The ``(kind, text)`` transcript lines of a message: its content (text and parts),
    then its tool calls.

    Framework-internal, for the notebook display (see ``agentkit._html``).
    """
    if message.role is Role.TOOL and not message.parts:
        return [("result", f"{message.tool_name or 'tool'} returned: {message.content}")]
    if message.parts:
        lines: list[tuple[str, str]] = []
        if message.role is Role.TOOL:
            lines.append(("result", f"{message.tool_name or 'tool'} returned:"))
        for part in message.parts:
            if type(part) is TextPart:
                if part.text:
                    lines.append(("speech", part.text))
            else:
                lines.extend(_part_html_lines(part))
    else:
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
