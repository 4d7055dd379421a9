"""Resources, resource templates and prompts of an MCP server, in the wire shape.

The coroutines run on the client's connection (``MCPClient._run``); kept apart from the tool
calls and their result conversion in ``_client.py``. A read or a prompt asks for progress
when given a ``progress`` callback: the session's own ``read_resource`` and ``get_prompt``
take none, so the request is then sent with the session's ``send_request``, which does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentkit.mcp import _compat

__all__ = ["get_prompt", "list_all", "read_resource", "subscribe", "unsubscribe"]

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
"""A progress callback of one request: ``(progress, total, message)``."""

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


async def read_resource(
    session: Any, uri: str, progress: Progress | None = None
) -> dict[str, Any]:
    """The ``resources/read`` result of ``uri`` (``{"contents": [...]}``)."""
    types = _compat._module("mcp.types")
    if _compat.mcp_major_version() >= 2:
        if progress is None:
            return _compat.wire_shape(await session.read_resource(uri))
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))
    else:
        pydantic = _compat._module("pydantic")
        if progress is None:
            return _compat.wire_shape(await session.read_resource(pydantic.AnyUrl(uri)))
        request = types.ClientRequest(
            types.ReadResourceRequest(
                method="resources/read",
                params=types.ReadResourceRequestParams(uri=pydantic.AnyUrl(uri)),
            )
        )
    result = await session.send_request(
        request, types.ReadResourceResult, progress_callback=progress
    )
    return _compat.wire_shape(result)


async def get_prompt(
    session: Any,
    name: str,
    arguments: dict[str, str] | None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The ``prompts/get`` result (``{"description": ..., "messages": [...]}``)."""
    if progress is None:
        return _compat.wire_shape(await session.get_prompt(name, arguments))
    types = _compat._module("mcp.types")
    params = types.GetPromptRequestParams(name=name, arguments=arguments)
    if _compat.mcp_major_version() >= 2:
        request = types.GetPromptRequest(params=params)
    else:
        request = types.ClientRequest(types.GetPromptRequest(method="prompts/get", params=params))
    result = await session.send_request(request, types.GetPromptResult, progress_callback=progress)
    return _compat.wire_shape(result)


async def subscribe(session: Any, uri: str) -> None:
    """Ask for ``notifications/resources/updated`` of ``uri`` (``resources/subscribe``)."""
    await _subscription(session, "resources/subscribe", uri)


async def unsubscribe(session: Any, uri: str) -> None:
    """Stop the updates of ``uri`` (``resources/unsubscribe``)."""
    await _subscription(session, "resources/unsubscribe", uri)


async def _subscription(session: Any, method: str, uri: str) -> None:
    # Sent with send_request: mcp 2.x marks its subscribe_resource as deprecated (the 2026
    # protocol drafts replace subscriptions), and its warning would reach the user's code.
    types = _compat._module("mcp.types")
    subscribing = method == "resources/subscribe"
    request_type = types.SubscribeRequest if subscribing else types.UnsubscribeRequest
    params_type = types.SubscribeRequestParams if subscribing else types.UnsubscribeRequestParams
    if _compat.mcp_major_version() >= 2:
        request = request_type(params=params_type(uri=uri))
    else:
        pydantic = _compat._module("pydantic")
        request = types.ClientRequest(
            request_type(method=method, params=params_type(uri=pydantic.AnyUrl(uri)))
        )
    await session.send_request(request, types.EmptyResult)
