"""Log messages and progress notifications of an MCP server, handed to the client's callbacks.

``MCPClient.on_log`` gets each ``notifications/message`` (``{"level", "logger", "data"}``);
``MCPClient.on_progress`` gets each progress notification of a tool call
(``{"tool", "progress", "total", "message"}``). They run in agentkit's event loop thread:
they must be quick and must not wait on the client. An exception they raise is logged and
dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

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
    client: _HasProgress, tool_name: str
) -> Callable[[float, float | None, str | None], Coroutine[Any, Any, None]] | None:
    """The progress callback of one call (``None``, asking for no progress, without a handler)."""
    if client.on_progress is None:
        return None

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notice = {"tool": tool_name, "progress": progress, "total": total, "message": message}
        deliver(client.on_progress, notice)

    return on_progress
