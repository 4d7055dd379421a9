"""Log messages and progress notifications of an MCP server, handed to the client's callbacks.

``MCPClient.on_log`` gets each ``notifications/message`` (``{"level", "logger", "data"}``);
``MCPClient.on_progress`` gets each progress notification of a tool call, a resource read or a
prompt (``{"tool" | "resource" | "prompt", "progress", "total", "message"}``);
``MCPClient.on_resource_updated`` gets each ``notifications/resources/updated`` (``{"uri"}``).
They run in agentkit's event loop thread: they must be quick and must not wait on the
client. An exception they raise is logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal, Protocol

__all__ = ["deliver", "progress_of"]

_log = logging.getLogger("agentkit.mcp")


class _HasProgress(Protocol):
    on_progress: Callable[[dict[str, Any]], None] | None


def deliver(handler: Callable[[dict[str, Any]], None] | None, notice: dict[str, Any]) -> None:
    """Call ``handler(notice)`` when there is one; its errors are logged, never raised."""
    if handler is None:
        return
    try:
        handler(notice)
    except Exception:
        _log.warning("an MCP notification callback raised", exc_info=True)


def progress_of(
    client: _HasProgress, kind: Literal["tool", "resource", "prompt"], name: str
) -> Callable[[float, float | None, str | None], Coroutine[Any, Any, None]] | None:
    """The progress callback of one request (``None``, asking for no progress, without a
    handler); its notices name what they are the progress of: ``{kind: name, ...}``."""
    if client.on_progress is None:
        return None

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notice = {kind: name, "progress": progress, "total": total, "message": message}
        deliver(client.on_progress, notice)

    return on_progress
