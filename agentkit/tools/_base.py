"""What a tool is: the protocols :class:`BaseTool`, :class:`InvokableTool`, :class:`StreamableTool`.

A tool describes itself with :meth:`BaseTool.info` (name, description, JSON Schema of its
parameters) and runs with the JSON arguments a model sent, either in one piece
(:meth:`.InvokableTool.invoke`) or as a stream of text chunks (:meth:`StreamableTool.stream`);
a :class:`ContentTool` returns images, files and sounds too (:meth:`ContentTool.invoke_content`),
and a :class:`StreamableContentTool` streams them (:meth:`StreamableContentTool.stream_content`).
A tool may implement both; the agent uses whichever suits the way it runs.

Any object with these methods is a tool (structural typing); :func:`~agentkit.tool` turns a
plain Python function into one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from agentkit._lazy import present

if TYPE_CHECKING:
    from agentkit.schema import ContentPart, ToolCall, ToolInfo
    from agentkit.streams import StreamReader

__all__ = [
    "BaseTool",
    "ContentTool",
    "DeclaresIdempotency",
    "InvokableTool",
    "StreamableContentTool",
    "StreamableTool",
    "ToolCallInfo",
    "is_idempotent",
]


@attrs.frozen
class ToolCallInfo:
    """One tool call as a model made it, for code that handles tool calls and their errors.

    Args:
        name: the tool the model called.
        call_id: the id of the call (``""`` when the model sent none).
        arguments: the arguments as a dict when the model sent a JSON object (``{}`` for no
            arguments), else the text it sent, as it is (not JSON, or JSON that is not an
            object).
    """

    name: str
    call_id: str
    arguments: dict[str, Any] | str

    @classmethod
    def from_tool_call(cls, call: ToolCall) -> ToolCallInfo:
        """Describe ``call`` (a :class:`~agentkit.ToolCall` from a model reply)."""
        text = call.function.arguments
        arguments: dict[str, Any] | str = text
        if not text or text.isspace():
            arguments = {}
        else:
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                parsed = None
            if type(parsed) is dict:
                arguments = parsed
        return cls(name=call.function.name, call_id=call.id, arguments=arguments)


@runtime_checkable
class BaseTool(Protocol):
    """Anything that can describe itself to a model as a tool."""

    def info(self) -> ToolInfo:
        """Return the tool's name, description and JSON Schema parameters."""
        ...


@runtime_checkable
class InvokableTool(BaseTool, Protocol):
    """A tool that runs with the model's JSON arguments and returns its whole result as text."""

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the tool.

        Args:
            arguments: the JSON object text the model sent (``""`` means no arguments).
            **tool_options: implementation-specific options passed through by the agent.
        """
        ...


@runtime_checkable
class ContentTool(InvokableTool, Protocol):
    """An invokable tool whose result may hold images, files or sounds.

    An agent runs it with :meth:`invoke_content` and puts what it returns in the tool
    message (its ``parts`` for a tuple); :meth:`~.InvokableTool.invoke` stays the text form,
    for code that wants text. Function tools, MCP tools and agent tools are content tools.
    """

    def invoke_content(
        self, arguments: str, **tool_options: Any
    ) -> str | tuple[ContentPart, ...]:
        """Run the tool; return its result as text, or as a tuple of
        :class:`~agentkit.TextPart`, :class:`~agentkit.ImagePart`,
        :class:`~agentkit.FilePart` and :class:`~agentkit.AudioPart` (see the media guide
        for how a model whose wire cannot carry media in a tool result still sees them).

        Args:
            arguments: the JSON object text the model sent (``""`` means no arguments).
            **tool_options: implementation-specific options passed through by the agent.
        """
        ...


@runtime_checkable
class StreamableTool(BaseTool, Protocol):
    """A tool that runs with the model's JSON arguments and streams its result as text chunks."""

    def stream(self, arguments: str, **tool_options: Any) -> StreamReader[str]:
        """Run the tool; the concatenated chunks are its result.

        Args:
            arguments: the JSON object text the model sent (``""`` means no arguments).
            **tool_options: implementation-specific options passed through by the agent.
        """
        ...


@runtime_checkable
class StreamableContentTool(BaseTool, Protocol):
    """A tool that streams its result as content parts: text, images, files, sounds (Eino's
    ``EnhancedStreamableTool``).

    Each chunk is one :class:`~agentkit.TextPart`, :class:`~agentkit.ImagePart`,
    :class:`~agentkit.FilePart` or :class:`~agentkit.AudioPart`. An agent that streams runs it
    with :meth:`stream_content`: the run's event streams the chunks as tool-message chunks (a
    text chunk as the message's text, any other as its one part), and the agent keeps one
    tool message whose parts are the chunks joined (adjacent texts merged; an image, file
    or sound kept as the object the tool gave, never copied). Between the two,
    :meth:`~agentkit.AgentMiddleware.wrap_stream_content_tool_call` layers see the stream.
    An agent that does not stream runs it as a :class:`ContentTool` when it is one (a tool
    usually has :meth:`~ContentTool.invoke_content` too, returning the joined parts),
    otherwise with :meth:`stream_content` as well.
    """

    def stream_content(self, arguments: str, **tool_options: Any) -> StreamReader[ContentPart]:
        """Run the tool; the chunks, joined, are its result.

        Args:
            arguments: the JSON object text the model sent (``""`` means no arguments).
            **tool_options: implementation-specific options passed through by the agent.
        """
        ...


@runtime_checkable
class DeclaresIdempotency(Protocol):
    """A tool that says whether a call of it may run twice (``idempotent``).

    :class:`~agentkit.tools.FunctionTool` has it (``@tool(idempotent=...)``), so do
    :class:`~agentkit.AgentTool` (``True``: a resumed agent tool goes on inside its agent) and
    the tools :func:`~agentkit.with_approval` returns (``False``). Give your own tool classes
    an ``idempotent`` property to say it.
    """

    @property
    def idempotent(self) -> bool:
        """Whether running a call twice does no harm."""
        ...


def is_idempotent(tool: object) -> bool:
    """Whether a call of ``tool`` that a crash cut short may simply run again.

    The tool's own ``idempotent`` (see :class:`DeclaresIdempotency`), else ``True``: a tool
    that says nothing (an MCP tool, a tool class of yours) runs again. Tools with effects that
    must not happen twice say ``idempotent=False`` (or need approval, which implies it): the
    recovered run then asks a human (:class:`~agentkit.UnfinishedToolCall`).
    """
    declares = _DECLARED_BY_CLASS.get(type(tool))
    if declares is None:
        # The protocol check walks the protocol's members; a durable run asks at every tool
        # call, so a class that declares it (property or class attribute) is remembered.
        declares = isinstance(tool, DeclaresIdempotency)
        if declares and _class_declares(type(tool)) and len(_DECLARED_BY_CLASS) < 1024:
            _DECLARED_BY_CLASS[type(tool)] = True
    if declares:
        return bool(tool.idempotent)  # type: ignore[attr-defined]
    return True


_DECLARED_BY_CLASS: dict[type, bool] = {}
"""Tool classes whose instances all declare ``idempotent`` (it is on the class)."""


def _class_declares(cls: type) -> bool:
    return any("idempotent" in vars(klass) for klass in cls.__mro__)

present(
    (
        BaseTool,
        InvokableTool,
        StreamableTool,
        ToolCallInfo,
    ),
    "agentkit",
)

present(
    (
        ContentTool,
        DeclaresIdempotency,
        StreamableContentTool,
        is_idempotent,
    ),
    "agentkit.tools",
)
