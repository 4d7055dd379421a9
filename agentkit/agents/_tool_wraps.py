"""The stream and content layers of a tool call: a tool seen through its middlewares.

``AgentMiddleware.wrap_stream_tool_call``, ``wrap_content_tool_call`` and
``wrap_stream_content_tool_call`` wrap one kind of call each. The ReAct loop runs a wrapped call
as it runs any tool: it hands the loop a :class:`WrappedTool` whose ``stream`` (or
``invoke_content``, or ``stream_content``) goes through the layers, the first
middleware outermost, so the loop's own path (events, time limits, the tool-error policy) is the
same for a wrapped tool as for a bare one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentkit.errors import AgentKitTypeError
from agentkit.schema import FunctionCall, ToolCall
from agentkit.streams import StreamReader
from agentkit.tools._base import BaseTool, ToolCallInfo

if TYPE_CHECKING:
    from agentkit._middleware import AgentMiddleware
    from agentkit.schema import ContentPart, ToolInfo

__all__ = ["WrappedTool"]


def _arguments(info: ToolCallInfo) -> str:
    """The JSON text of ``info``'s arguments (a layer may have changed them)."""
    if isinstance(info.arguments, str):
        return info.arguments
    return json.dumps(info.arguments, ensure_ascii=False)


class WrappedTool:
    """``tool`` for one call, its ``stream`` and ``invoke_content`` run through ``layers``."""

    __slots__ = (
        "_call_id", "_content_layers", "_stream_content_layers", "_stream_layers", "_tool",
    )

    def __init__(
        self,
        tool: BaseTool,
        call: ToolCall,
        stream_layers: Sequence[AgentMiddleware],
        content_layers: Sequence[AgentMiddleware],
        stream_content_layers: Sequence[AgentMiddleware] = (),
    ) -> None:
        self._tool = tool
        self._call_id = call.id
        self._stream_layers = stream_layers
        self._content_layers = content_layers
        self._stream_content_layers = stream_content_layers

    @property
    def tool(self) -> BaseTool:
        """The tool seen through the layers."""
        return self._tool

    def info(self) -> ToolInfo:
        """The wrapped tool's."""
        return self._tool.info()

    def _call_info(self, arguments: str) -> ToolCallInfo:
        name = self._tool.info().name
        return ToolCallInfo.from_tool_call(
            ToolCall(self._call_id, FunctionCall(name, arguments))
        )

    def stream(self, arguments: str, **tool_options: Any) -> StreamReader[str]:
        """The tool's stream, through the ``wrap_stream_tool_call`` layers."""
        tool: Any = self._tool
        name = tool.info().name

        def innermost(info: ToolCallInfo) -> StreamReader[str]:
            result: StreamReader[str] = tool.stream(_arguments(info), **tool_options)
            return result

        invoke: Callable[[ToolCallInfo], StreamReader[str]] = innermost
        for middleware in reversed(self._stream_layers):
            invoke = _stream_layer(middleware, invoke)
        chunks = invoke(self._call_info(arguments))
        if not isinstance(chunks, StreamReader):
            raise AgentKitTypeError(
                f"a wrap_stream_tool_call layer returned {type(chunks).__name__} for tool "
                f"{name!r}, not a StreamReader; return invoke(call), or "
                "stream_from_iterator(...) over its chunks"
            )
        return chunks

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """The tool's text (not through the content layers: the loop asks for the content)."""
        result: str = self._tool.invoke(arguments, **tool_options)  # type: ignore[attr-defined]
        return result

    def invoke_content(
        self, arguments: str, **tool_options: Any
    ) -> str | tuple[ContentPart, ...]:
        """The tool's result, through the ``wrap_content_tool_call`` layers."""
        tool: Any = self._tool
        name = tool.info().name

        def innermost(info: ToolCallInfo) -> str | tuple[ContentPart, ...]:
            result: str | tuple[ContentPart, ...] = tool.invoke_content(
                _arguments(info), **tool_options
            )
            return result

        invoke: Callable[[ToolCallInfo], str | tuple[ContentPart, ...]] = innermost
        for middleware in reversed(self._content_layers):
            invoke = _content_layer(middleware, invoke)
        result = invoke(self._call_info(arguments))
        if not isinstance(result, (str, tuple)):
            raise AgentKitTypeError(
                f"a wrap_content_tool_call layer returned {type(result).__name__} for tool "
                f"{name!r}, not str or a tuple of parts"
            )
        return result


    def stream_content(self, arguments: str, **tool_options: Any) -> StreamReader[ContentPart]:
        """The tool's content stream, through the ``wrap_stream_content_tool_call`` layers."""
        tool: Any = self._tool
        name = tool.info().name

        def innermost(info: ToolCallInfo) -> StreamReader[ContentPart]:
            result: StreamReader[ContentPart] = tool.stream_content(
                _arguments(info), **tool_options
            )
            return result

        invoke: Callable[[ToolCallInfo], StreamReader[ContentPart]] = innermost
        for middleware in reversed(self._stream_content_layers):
            invoke = _stream_content_layer(middleware, invoke)
        chunks = invoke(self._call_info(arguments))
        if not isinstance(chunks, StreamReader):
            raise AgentKitTypeError(
                f"a wrap_stream_content_tool_call layer returned {type(chunks).__name__} for "
                f"tool {name!r}, not a StreamReader; return invoke(call), or "
                "stream_from_iterator(...) over its parts"
            )
        return chunks


def _stream_content_layer(
    middleware: AgentMiddleware, inner: Callable[[ToolCallInfo], StreamReader[ContentPart]]
) -> Callable[[ToolCallInfo], StreamReader[ContentPart]]:
    def invoke(info: ToolCallInfo) -> StreamReader[ContentPart]:
        return middleware.wrap_stream_content_tool_call(info, inner)

    return invoke


def _stream_layer(
    middleware: AgentMiddleware, inner: Callable[[ToolCallInfo], StreamReader[str]]
) -> Callable[[ToolCallInfo], StreamReader[str]]:
    def invoke(info: ToolCallInfo) -> StreamReader[str]:
        return middleware.wrap_stream_tool_call(info, inner)

    return invoke


def _content_layer(
    middleware: AgentMiddleware,
    inner: Callable[[ToolCallInfo], str | tuple[ContentPart, ...]],
) -> Callable[[ToolCallInfo], str | tuple[ContentPart, ...]]:
    def invoke(info: ToolCallInfo) -> str | tuple[ContentPart, ...]:
        return middleware.wrap_content_tool_call(info, inner)

    return invoke
