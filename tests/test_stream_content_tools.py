"""Tools that stream content parts and ``wrap_stream_content_tool_call`` (Eino's
``EnhancedStreamableTool`` and ``WrapEnhancedStreamableToolCall``).

A streamed run streams the tool's parts as tool-message chunks; the agent keeps one tool message
whose parts are the chunks joined; middleware sees and may change the stream; an image part is
one object for every reader, never copied.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
import pytest

from agentkit import (
    AgentEvent,
    AgentMiddleware,
    Approve,
    ChatModelAgent,
    ImagePart,
    InvokableTool,
    Message,
    Reject,
    Role,
    Runner,
    StreamableTool,
    TextPart,
    ToolCallInfo,
    stream_from_iterator,
    tool,
    with_approval,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.middleware import (
    ContentToolInvoke,
    StreamContentToolInvoke,
    StreamToolInvoke,
    ToolInvoke,
)
from agentkit.models import ScriptedChatModel
from agentkit.schema import ContentPart, ToolInfo
from agentkit.streams import StreamReader
from agentkit.testing import call, calls_message, run_events
from agentkit.tools import (
    ContentTool,
    StreamableContentTool,
    StreamingContentFunctionTool,
    StreamingFunctionTool,
)
from tests.media_samples import png

IMAGE = ImagePart(png(64, 64), media_type="image/png")


class Camera:
    """A tool that streams a caption, a picture and a note (Eino's EnhancedStreamableTool)."""

    def __init__(self) -> None:
        self.closed = threading.Event()
        self.arguments: list[dict[str, Any]] = []

    def info(self) -> ToolInfo:
        return ToolInfo(
            "camera",
            "Take a picture.",
            {"type": "object", "properties": {"label": {"type": "string"}}},
        )

    def _label(self, arguments: str) -> str:
        given = json.loads(arguments or "{}")
        self.arguments.append(given)
        return str(given.get("label", "?"))

    def _parts(self, arguments: str) -> list[ContentPart]:
        label = self._label(arguments)
        return [TextPart("picture "), TextPart(f"of {label}:"), IMAGE, TextPart(" taken")]

    def stream_content(self, arguments: str, **tool_options: Any) -> StreamReader[ContentPart]:
        return stream_from_iterator(iter(self._parts(arguments)), on_close=self.closed.set)

    def invoke_content(self, arguments: str, **tool_options: Any) -> tuple[ContentPart, ...]:
        return (TextPart(f"still of {self._label(arguments)}:"), IMAGE)

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        return "a picture"


def camera_agent(
    camera: Camera, *middlewares: AgentMiddleware
) -> tuple[ChatModelAgent, ScriptedChatModel]:
    model = ScriptedChatModel(
        [calls_message(call("camera", {"label": "cat"}, id="c1")), "a nice cat"]
    )
    agent = ChatModelAgent("Cam", "d", model, tools=[camera], middlewares=list(middlewares))
    return agent, model


def tool_events(events: list[AgentEvent]) -> list[AgentEvent]:
    return [
        e
        for e in events
        if e.output is not None
        and e.output.message_output is not None
        and e.output.message_output.role is Role.TOOL
    ]


def kept_result(model: ScriptedChatModel) -> Message:
    (result,) = [m for m in model.calls[1].messages if m.role is Role.TOOL]
    return result


def test_the_protocol_is_structural() -> None:
    assert isinstance(Camera(), StreamableContentTool)
    assert isinstance(Camera(), ContentTool)


def test_enhanced_streamable_tool_streams_parts_and_the_agent_keeps_one_message_with_parts() -> None:
    camera = Camera()
    agent, model = camera_agent(camera)
    events = list(Runner(agent, enable_streaming=True).query("photo"))
    assert events[-1].get_message().content == "a nice cat"  # type: ignore[union-attr]
    (event,) = tool_events(events)
    variant = event.output.message_output  # type: ignore[union-attr]
    assert variant is not None and variant.is_streaming
    chunks = list(variant.open_stream())
    assert [(c.content, c.parts) for c in chunks] == [
        ("picture ", ()), ("of cat:", ()), ("", (IMAGE,)), (" taken", ()),
    ]
    assert all(c.role is Role.TOOL and c.tool_call_id == "c1" for c in chunks)
    result = kept_result(model)
    assert result.parts == (TextPart("picture of cat:"), IMAGE, TextPart(" taken"))
    assert result.tool_name == "camera" and result.tool_call_id == "c1"
    # One image object for the tool, the event's readers and the history: never copied.
    assert chunks[2].parts[0] is IMAGE
    assert result.parts[1] is IMAGE
    assert next(iter(variant.open_stream())).content == "picture "  # a second reader
    assert camera.closed.wait(5.0)


def test_a_run_that_does_not_stream_calls_the_content_form() -> None:
    agent, model = camera_agent(Camera())
    run_events(Runner(agent).query("photo"))
    assert kept_result(model).parts == (TextPart("still of cat:"), IMAGE)


class Watch(AgentMiddleware):
    """Records which layer saw which call."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
        self.seen.append("tool")
        return invoke(call)

    def wrap_stream_tool_call(
        self, call: ToolCallInfo, invoke: StreamToolInvoke
    ) -> StreamReader[str]:
        self.seen.append("stream")
        return invoke(call)

    def wrap_content_tool_call(
        self, call: ToolCallInfo, invoke: ContentToolInvoke
    ) -> str | tuple[ContentPart, ...]:
        self.seen.append("content")
        return invoke(call)

    def wrap_stream_content_tool_call(
        self, call: ToolCallInfo, invoke: StreamContentToolInvoke
    ) -> StreamReader[ContentPart]:
        self.seen.append(f"stream_content:{call.name}:{call.call_id}")
        return invoke(call)


def test_wrap_enhanced_streamable_tool_call_wraps_only_streamed_content_calls() -> None:
    watch = Watch()
    agent, _ = camera_agent(Camera(), watch)
    run_events(Runner(agent, enable_streaming=True).query("photo"))
    assert watch.seen == ["tool", "stream_content:camera:c1"]
    watch.seen.clear()
    agent, _ = camera_agent(Camera(), watch)
    run_events(Runner(agent).query("photo"))
    assert watch.seen == ["tool", "content"]


def test_wrap_enhanced_streamable_tool_call_changes_what_the_stream_and_history_see() -> None:
    class Redact(AgentMiddleware):
        """Replaces each image by a note and changes the call's arguments."""

        def wrap_stream_content_tool_call(
            self, call: ToolCallInfo, invoke: StreamContentToolInvoke
        ) -> StreamReader[ContentPart]:
            parts = invoke(attrs.evolve(call, arguments={"label": "dog"}))
            redacted = (
                TextPart("[image removed]") if isinstance(p, ImagePart) else p for p in parts
            )
            return stream_from_iterator(redacted, on_close=parts.close)

    camera = Camera()
    agent, model = camera_agent(camera, Redact())
    events = run_events(Runner(agent, enable_streaming=True).query("photo"))
    (event,) = tool_events(events)
    assert event.get_message().content == "picture of dog:[image removed] taken"  # type: ignore[union-attr]
    assert camera.arguments == [{"label": "dog"}]
    result = kept_result(model)
    assert (result.content, result.parts) == ("picture of dog:[image removed] taken", ())
    assert camera.closed.wait(5.0)


def test_the_layers_run_first_outermost_and_inside_wrap_tool_call() -> None:
    order: list[str] = []

    class Tag(AgentMiddleware):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
            order.append(f"tool {self.tag}")
            return invoke(call)

        def wrap_stream_content_tool_call(
            self, call: ToolCallInfo, invoke: StreamContentToolInvoke
        ) -> StreamReader[ContentPart]:
            order.append(f"content {self.tag}")
            parts = invoke(call)
            tagged = (TextPart(self.tag), *parts)
            return stream_from_iterator(iter(tagged), on_close=parts.close)

    agent, model = camera_agent(Camera(), Tag("A"), Tag("B"))
    run_events(Runner(agent, enable_streaming=True).query("photo"))
    assert order == ["tool A", "tool B", "content A", "content B"]
    assert kept_result(model).parts[0] == TextPart("ABpicture of cat:")


def test_a_stream_content_layer_that_returns_no_stream_is_a_clear_error() -> None:
    class Broken(AgentMiddleware):
        def wrap_stream_content_tool_call(
            self, call: ToolCallInfo, invoke: StreamContentToolInvoke
        ) -> StreamReader[ContentPart]:
            return list(invoke(call))  # type: ignore[return-value]

    agent, _ = camera_agent(Camera(), Broken())
    events = run_events(Runner(agent, enable_streaming=True).query("photo"))
    assert "wrap_stream_content_tool_call layer returned list" in str(events[-1].err)


def test_a_chunk_that_is_not_a_part_is_a_clear_error() -> None:
    class Sloppy(Camera):
        def stream_content(
            self, arguments: str, **tool_options: Any
        ) -> StreamReader[ContentPart]:
            return stream_from_iterator(iter(["plain text"]))  # type: ignore[arg-type]

    agent, _ = camera_agent(Sloppy())
    events = run_events(Runner(agent, enable_streaming=True).query("photo"))
    assert "tool 'camera' streamed str, not a content part" in str(events[-1].err)



# --- @tool on a generator annotated to yield parts ---


@tool
def screenshots(count: int) -> Iterator[str | ImagePart | dict[str, int]]:
    """Take screenshots, each after a caption."""
    for number in range(count):
        yield f"screen {number}: "
        yield IMAGE
    yield {"taken": count}


def test_a_generator_annotated_to_yield_parts_is_a_streamable_content_tool() -> None:
    assert isinstance(screenshots, StreamingContentFunctionTool)
    assert isinstance(screenshots, StreamableContentTool)
    chunks = list(screenshots.stream_content('{"count": 2}'))
    assert chunks == [
        TextPart("screen 0: "), IMAGE, TextPart("screen 1: "), IMAGE, TextPart('{"taken": 2}'),
    ]
    assert chunks[1] is IMAGE and chunks[3] is IMAGE
    assert screenshots.invoke_content('{"count": 1}') == (
        TextPart("screen 0: "), IMAGE, TextPart('{"taken": 1}'),
    )
    # The text form, as for every content tool: the texts, then a line per image.
    text = screenshots.invoke('{"count": 1}')
    assert text.startswith('screen 0: {"taken": 1}\n[image image/png, ')


def test_a_text_generator_stays_a_text_streaming_tool() -> None:
    @tool
    def lines(count: int) -> Iterator[str]:
        """Stream lines."""
        yield from (f"{n}\n" for n in range(count))

    assert type(lines) is StreamingFunctionTool
    assert not isinstance(lines, StreamableContentTool)


def test_an_async_generator_of_parts_streams_them() -> None:
    @tool
    async def pictures(count: int) -> AsyncIterator[ImagePart]:
        """Stream pictures."""
        for _ in range(count):
            yield IMAGE

    assert isinstance(pictures, StreamingContentFunctionTool)
    assert list(pictures.stream_content('{"count": 2}')) == [IMAGE, IMAGE]


def test_a_function_tool_that_streams_parts_in_a_streamed_run() -> None:
    model = ScriptedChatModel([calls_message(call("screenshots", {"count": 1})), "seen"])
    agent = ChatModelAgent("Cam", "d", model, tools=[screenshots])
    events = run_events(Runner(agent, enable_streaming=True).query("screens"))
    (event,) = tool_events(events)
    assert event.get_message().parts == (  # type: ignore[union-attr]
        TextPart("screen 0: "), IMAGE, TextPart('{"taken": 1}'),
    )
    result = kept_result(model)
    assert result.parts[1] is IMAGE


# --- annotations naming ContentPart ---

_PARTS_TOOLS = '''
from collections.abc import AsyncIterator, Iterator

from agentkit import tool
from agentkit.schema import ContentPart


@tool
def parts(count: int) -> Iterator[ContentPart]:
    """Yield parts."""
    for _ in range(count):
        yield IMAGE


@tool
def mixed(count: int) -> Iterator[str | ContentPart]:
    """Yield text and parts."""
    yield "shots:"
    for _ in range(count):
        yield IMAGE


@tool
async def later(count: int) -> AsyncIterator[ContentPart]:
    """Yield parts from an async generator."""
    for _ in range(count):
        yield IMAGE
'''


@pytest.mark.parametrize("future", [False, True], ids=["evaluated", "postponed"])
def test_a_generator_annotated_with_the_content_part_alias_streams_parts(future: bool) -> None:
    # In a module of the user's own: agentkit's part classes are not names there.
    source = ("from __future__ import annotations\n" if future else "") + _PARTS_TOOLS
    namespace: dict[str, Any] = {"IMAGE": IMAGE, "__name__": "users_tools"}
    exec(compile(source, "users_tools.py", "exec"), namespace)
    for name in ("parts", "mixed", "later"):
        assert isinstance(namespace[name], StreamingContentFunctionTool), name
    assert list(namespace["parts"].stream_content('{"count": 2}')) == [IMAGE, IMAGE]
    assert list(namespace["mixed"].stream_content('{"count": 1}')) == [TextPart("shots:"), IMAGE]
    assert list(namespace["later"].stream_content('{"count": 1}')) == [IMAGE]


# --- with_approval keeps what the tool can do ---


class Ticker:
    """A text tool that can only be invoked."""

    def info(self) -> ToolInfo:
        return ToolInfo("ticker", "Tick.", {"type": "object", "properties": {}})

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        return "tick"


class Projector:
    """A tool that can only stream parts."""

    def info(self) -> ToolInfo:
        return ToolInfo("projector", "Project.", {"type": "object", "properties": {}})

    def stream_content(self, arguments: str, **tool_options: Any) -> StreamReader[ContentPart]:
        slide: list[ContentPart] = [TextPart("slide:"), IMAGE]
        return stream_from_iterator(iter(slide))


@pytest.mark.parametrize(
    "inner",
    [Camera(), Ticker(), Projector(), screenshots],
    ids=["all-four", "invoke-only", "stream-content-only", "function-tool"],
)
def test_with_approval_has_exactly_the_capabilities_of_its_tool(inner: Any) -> None:
    guarded = with_approval(inner)
    for protocol in (InvokableTool, ContentTool, StreamableTool, StreamableContentTool):
        assert isinstance(guarded, protocol) == isinstance(inner, protocol), protocol
    assert guarded.info() == inner.info()


def approval_runner(camera: Camera, model: ScriptedChatModel) -> Runner:
    agent = ChatModelAgent("Cam", "d", model, tools=[with_approval(camera)])
    return Runner(agent, enable_streaming=True, checkpoint_store=InMemoryCheckPointStore())


def test_an_approved_streamed_content_tool_streams_its_parts() -> None:
    camera = Camera()
    agent_model = ScriptedChatModel(
        [calls_message(call("camera", {"label": "cat"}, id="c1")), "a nice cat"]
    )
    runner = approval_runner(camera, agent_model)
    asked = runner.invoke("photo", with_checkpoint_id("cam"))
    assert asked.interrupt is not None and camera.arguments == []
    [context] = asked.interrupt.contexts
    events = run_events(
        runner.resume("cam", targets={context.id: Approve(arguments={"label": "dog"})})
    )
    (event,) = tool_events(events)
    variant = event.output.message_output  # type: ignore[union-attr]
    assert variant is not None and variant.is_streaming
    chunks = list(variant.open_stream())
    assert [(c.content, c.parts) for c in chunks] == [
        ("picture ", ()), ("of dog:", ()), ("", (IMAGE,)), (" taken", ()),
    ]
    assert kept_result(agent_model).parts == (TextPart("picture of dog:"), IMAGE, TextPart(" taken"))
    assert camera.arguments == [{"label": "dog"}]


def test_a_rejected_streamed_content_tool_streams_the_rejection() -> None:
    camera = Camera()
    model = ScriptedChatModel(
        [calls_message(call("camera", {"label": "cat"}, id="c1")), "no picture then"]
    )
    runner = approval_runner(camera, model)
    asked = runner.invoke("photo", with_checkpoint_id("cam"))
    assert asked.interrupt is not None
    [context] = asked.interrupt.contexts
    run_events(runner.resume("cam", targets={context.id: Reject("private")}))
    assert kept_result(model).content == (
        "The user rejected this call of camera; it was not run. Reason: private"
    )
    assert camera.arguments == []
