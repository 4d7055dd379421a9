"""Tools: what a tool is made of, beyond what a first program needs.

The names a first program uses are at the top level: ``agentkit.tool``, ``agentkit.BaseTool``,
``agentkit.InvokableTool``, ``agentkit.StreamableTool``, ``agentkit.ToolCallInfo`` and the
approval values (``agentkit.Approve``...). Their old spellings here (``agentkit.tools.tool``)
still work until agentkit 0.4, with a :class:`DeprecationWarning`.

``cattrs`` and ``docstring-parser`` are imported when the first function tool is made, not when
this package is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach, present
from agentkit.tools._base import (
    ContentTool,
    DeclaresIdempotency,
    StreamableContentTool,
    is_idempotent,
)
from agentkit.tools._composite import CompositeInterrupt
from agentkit.tools._function import (
    FunctionTool,
    StreamingContentFunctionTool,
    StreamingFunctionTool,
    as_tool,
)

__all__ = [
    "CompositeInterrupt",
    "ContentTool",
    "DeclaresIdempotency",
    "FunctionTool",
    "StreamableContentTool",
    "StreamingContentFunctionTool",
    "StreamingFunctionTool",
    "as_tool",
    "is_idempotent",
]

# Defined in a private module, documented here.
present((CompositeInterrupt,), __name__)

#: Names that moved to the top level (deprecated here; removed in agentkit 0.4).
_MOVED = {
    name: f"agentkit.{name}"
    for name in (
        "ApprovalRequest",
        "Approve",
        "BaseTool",
        "InvokableTool",
        "Reject",
        "StreamableTool",
        "ToolCallInfo",
        "UnfinishedToolCall",
        "tool",
        "with_approval",
    )
}

if not TYPE_CHECKING:  # mypy resolves submodules itself, and keeps typos errors
    # The submodules load when asked for as attributes (``agentkit.tools.exit``).
    __getattr__, __dir__ = attach(
        __name__,
        submodules=("approval", "base", "exit", "function", "transfer"),
        deprecated=_MOVED,
    )
