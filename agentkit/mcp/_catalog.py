"""Resources, resource templates and prompts of an MCP server, in the wire shape.

The coroutines run on the client's connection (``MCPClient._run``); kept apart from the tool
calls and their result conversion in ``_client.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentkit.mcp import _compat

__all__ = ["get_prompt", "list_all", "read_resource"]

_MAX_PAGES = 1000  # a server that pages forever is cut off here


async def list_all(session: Any, method: str, key: str) -> list[dict[str, Any]]:
    """Every item (all pages) of a listing: ``method`` is the session's method
    (``list_resources``, ``list_resource_templates``, ``list_prompts``), ``key`` the result's
    list (``resources``, ``resourceTemplates``, ``prompts``)."""
    types = _compat._module("mcp.types")
    lister: Callable[..., Awaitable[Any]] = getattr(session, method)
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        if cursor is None:
            result = await lister()
        elif _compat.mcp_major_version() >= 2:
            result = await lister(params=types.PaginatedRequestParams(cursor=cursor))
        else:
            result = await lister(cursor)
        page = _compat.wire_shape(result)
        items.extend(page.get(key, []))
        cursor = page.get("nextCursor")
        if not cursor:
            break
    return items


async def read_resource(session: Any, uri: str) -> dict[str, Any]:
    """The ``resources/read`` result of ``uri`` (``{"contents": [...]}``)."""
    if _compat.mcp_major_version() >= 2:
        return _compat.wire_shape(await session.read_resource(uri))
    pydantic = _compat._module("pydantic")
    return _compat.wire_shape(await session.read_resource(pydantic.AnyUrl(uri)))


async def get_prompt(session: Any, name: str, arguments: dict[str, str] | None) -> dict[str, Any]:
    """The ``prompts/get`` result (``{"description": ..., "messages": [...]}``)."""
    return _compat.wire_shape(await session.get_prompt(name, arguments))
