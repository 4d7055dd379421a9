"""Tools: the protocols a tool implements, and tools made from Python functions.

``cattrs`` and ``docstring-parser`` are imported when the first function tool is made, not when
this package is imported.
"""

from __future__ import annotations

from agentkit.tools.approval import ApprovalRequest, Approve, Reject, with_approval
from agentkit.tools.base import BaseTool, InvokableTool, StreamableTool, ToolCallInfo
from agentkit.tools.function import FunctionTool, StreamingFunctionTool, as_tool, tool

__all__ = [
    "ApprovalRequest",
    "Approve",
    "BaseTool",
    "FunctionTool",
    "InvokableTool",
    "Reject",
    "StreamableTool",
    "StreamingFunctionTool",
    "ToolCallInfo",
    "as_tool",
    "tool",
    "with_approval",
]
