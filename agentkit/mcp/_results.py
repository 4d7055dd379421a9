"""Turning an MCP tool result into the text of a tool message.

agentkit messages are text, so every content block becomes text:

- ``text`` blocks: their text;
- ``image`` and ``audio`` blocks: a placeholder with the media type and decoded size, such as
  ``[image/png, 1234 bytes]``;
- ``resource`` blocks (embedded resources): their text when they have one, else
  ``[resource <uri>, <mime type>, <n> bytes]``;
- ``resource_link`` blocks: ``[resource link <uri>: <name>]``;
- a result with no content but ``structuredContent``: that object as JSON.

Blocks are joined with newlines. A result with ``isError`` becomes
``error from tool <name>: <text>``, which the model reads like any other result.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["result_text"]


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
