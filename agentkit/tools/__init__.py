"""Tools: the protocols a tool implements, and tools made from Python functions.

``cattrs`` and ``docstring-parser`` are imported when the first function tool is made, not when
this package is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach, present
from agentkit.tools._composite import CompositeInterrupt
from agentkit.tools.approval import (
    ApprovalRequest,
    Approve,
    Reject,
    UnfinishedToolCall,
    with_approval,
)
from agentkit.tools.base import (
    BaseTool,
    ContentTool,
    DeclaresIdempotency,
    InvokableTool,
    StreamableTool,
    ToolCallInfo,
    is_idempotent,
)
from agentkit.tools.function import FunctionTool, StreamingFunctionTool, as_tool, tool

__all__ = [
    "ApprovalRequest",
    "Approve",
    "BaseTool",
    "CompositeInterrupt",
    "ContentTool",
    "DeclaresIdempotency",
    "FunctionTool",
    "InvokableTool",
    "Reject",
    "StreamableTool",
    "StreamingFunctionTool",
    "ToolCallInfo",
    "UnfinishedToolCall",
    "as_tool",
    "is_idempotent",
    "tool",
    "with_approval",
]

# Defined in a private module, documented here.
present((CompositeInterrupt,), __name__)

if not TYPE_CHECKING:  # mypy resolves submodules itself, and keeps typos errors
    # The submodules load when asked for as attributes (``agentkit.tools.exit``).
    __getattr__, __dir__ = attach(
        __name__, submodules=("approval", "base", "exit", "function", "transfer")
    )
