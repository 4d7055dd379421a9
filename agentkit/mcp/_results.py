"""Turning an MCP tool result into the content of a tool message.

A result of text only is text (:func:`result_text`); blocks become text as follows:

- ``text`` blocks: their text;
- ``image`` and ``audio`` blocks: a placeholder with the media type and decoded size, such as
  ``[image/png, 1234 bytes]``;
- ``resource`` blocks (embedded resources): their text when they have one, else
  ``[resource <uri>, <mime type>, <n> bytes]``;
- ``resource_link`` blocks: ``[resource link <uri>: <name>]`` (never fetched);
- a result with no content but ``structuredContent``: that object as JSON.

Blocks are joined with newlines. A result with ``isError`` becomes
``error from tool <name>: <text>``, which the model reads like any other result.

A result holding media (:func:`result_content`) is content parts instead: ``image`` blocks
are image parts, ``audio`` blocks audio parts, embedded
resources with a ``blob`` an image, a sound or a :class:`~agentkit.FilePart` by their MIME
type, and every other block the text above. A result of more blocks than a message may have
parts (:class:`~agentkit.schema.PartLimits`), or with media the part checks refuse (a
truncated image, bytes that are not what the MIME type says), raises a
:class:`~agentkit.ToolError` that says what and why.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from agentkit.errors import ContentPartError, ToolError
from agentkit.schema import (
    AudioPart,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    Role,
    TextPart,
    part_limits,
)

__all__ = ["result_content", "result_text"]


def _base64_size(data: Any) -> int:
    if not isinstance(data, str):
        return 0
    try:
        return len(binascii.a2b_base64(data))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        mime = block.get("mimeType") or kind
        return f"[{mime}, {_base64_size(block.get('data'))} bytes]"
    if kind == "resource":
        resource = block.get("resource") or {}
        if "text" in resource:
            return str(resource["text"])
        mime = resource.get("mimeType") or "application/octet-stream"
        size = _base64_size(resource.get("blob"))
        return f"[resource {resource.get('uri', '')}, {mime}, {size} bytes]"
    if kind == "resource_link":
        name = block.get("title") or block.get("name") or ""
        uri = block.get("uri", "")
        return f"[resource link {uri}: {name}]" if name else f"[resource link {uri}]"
    return f"[{kind} content]"


def result_text(tool_name: str, result: Mapping[str, Any]) -> str:
    """The tool-message text for an MCP ``CallToolResult`` given in its wire shape."""
    blocks = result.get("content") or []
    text = "\n".join(_block_text(block) for block in blocks if isinstance(block, Mapping))
    if not blocks and result.get("structuredContent") is not None:
        text = json.dumps(result["structuredContent"], ensure_ascii=False)
    if result.get("isError"):
        return f"error from tool {tool_name}: {text or 'the tool failed without a message'}"
    return text


def _has_media(block: Any) -> bool:
    if not isinstance(block, Mapping):
        return False
    kind = block.get("type")
    if kind in ("image", "audio"):
        return True
    resource = block.get("resource") if kind == "resource" else None
    return isinstance(resource, Mapping) and "text" not in resource and "blob" in resource


def _media_part(block: Mapping[str, Any]) -> ContentPart:
    kind = block.get("type")
    if kind == "resource":
        resource = block["resource"]
        encoded, mime = resource.get("blob"), resource.get("mimeType")
        uri = str(resource.get("uri") or "")
    else:
        encoded, mime, uri = block.get("data"), block.get("mimeType"), ""
    if not isinstance(encoded, str):
        raise ContentPartError(f"its {kind} block has no base64 data")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ContentPartError(f"its {kind} block's data is not base64 ({error})") from None
    mime = mime if isinstance(mime, str) and mime else None
    if kind == "image" or (kind == "resource" and mime and mime.startswith("image/")):
        return ImagePart(data, media_type=mime)
    if kind == "audio" or (kind == "resource" and mime and mime.startswith("audio/")):
        if mime is None:
            raise ContentPartError("its audio block has no mimeType")
        return AudioPart(data, media_type=mime)
    filename = uri.rstrip("/").rsplit("/", 1)[-1] or None
    return FilePart(data, media_type=mime, filename=filename)


def result_content(tool_name: str, result: Mapping[str, Any]) -> str | tuple[ContentPart, ...]:
    """The tool-message content of an MCP ``CallToolResult``: its text (as
    :func:`result_text`), or content parts when it holds images, sounds or binary resources.

    Raises:
        ToolError: more blocks than a message may have parts, or a media block the part
            checks refuse; the message names the tool, the block and the reason.
    """
    blocks = result.get("content") or []
    if result.get("isError") or not isinstance(blocks, list) or not any(map(_has_media, blocks)):
        return result_text(tool_name, result)
    limit = part_limits().max_parts
    if len(blocks) > limit:
        raise ToolError(
            f"MCP tool {tool_name!r} returned {len(blocks)} content blocks, over the limit of "
            f"{limit} parts per message (PartLimits.max_parts); nothing of the result was "
            "used. Ask the server for less, or raise the limit with "
            "agentkit.schema.set_part_limits(PartLimits(max_parts=...))",
            tool_name=tool_name,
        )
    parts: list[ContentPart] = []
    for number, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            continue
        if _has_media(block):
            try:
                parts.append(_media_part(block))
            except ContentPartError as error:
                raise ToolError(
                    f"MCP tool {tool_name!r}: content block {number} ({block.get('type')}) is "
                    f"refused: {error}",
                    tool_name=tool_name,
                ) from error
        else:
            text = _block_text(block)
            parts.append(TextPart(text if not parts else "\n" + text))
    return Message(Role.TOOL, parts=parts).parts
