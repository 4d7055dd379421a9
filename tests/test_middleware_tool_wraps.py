"""``wrap_stream_tool_call`` and ``wrap_content_tool_call``: middleware around streamed calls and
calls whose results hold parts (Eino's ``WrapStreamableToolCall`` and
``WrapEnhancedInvokableToolCall``)."""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from agentkit import (
    AgentEvent,
    AgentMiddleware,
    ChatModelAgent,
    ImagePart,
    Role,
    Runner,
    TextPart,
    ToolCallInfo,
    stream_from_iterator,
    tool,
)
from agentkit.middleware import (
    ContentToolInvoke,
    StreamToolInvoke,
    ToolEventSender,
    ToolInvoke,
)
from agentkit.models import ScriptedChatModel
from agentkit.schema import ContentPart
from agentkit.streams import StreamReader
from agentkit.testing import call, calls_message, run_events
from tests.media_samples import png

SECRET = "hunter2"


@tool
def read_log(lines: int) -> Iterator[str]:
    """Stream the log, a line at a time."""
    for number in range(lines):
        yield f"line {number}: password={SECRET}\n"


class Mask(AgentMiddleware):
    """Masks the secret in every chunk of a streamed call."""

    def __init__(self) -> None:
        self.seen: list[ToolCallInfo] = []

    def wrap_stream_tool_call(
        self, call: ToolCallInfo, invoke: StreamToolInvoke
    ) -> StreamReader[str]:
        self.seen.append(call)
        chunks = invoke(call)
        return stream_from_iterator(
            (chunk.replace(SECRET, "***") for chunk in chunks), on_close=chunks.close
        )


def tool_events(events: list[AgentEvent]) -> list[AgentEvent]:
    return [
        e
        for e in events
        if e.output is not None
        and e.output.message_output is not None
        and e.output.message_output.role is Role.TOOL
    ]


def log_agent(*middlewares: AgentMiddleware) -> tuple[ChatModelAgent, ScriptedChatModel]:
    model = ScriptedChatModel([calls_message(call("read_log", {"lines": 2}, id="c1")), "done"])
    agent = ChatModelAgent("Ops", "d", model, tools=[read_log], middlewares=list(middlewares))
    return agent, model


def test_wrap_streamable_tool_call_changes_the_chunks_the_stream_and_history_see() -> None:
    mask = Mask()
    agent, model = log_agent(mask)
    events = run_events(Runner(agent, enable_streaming=True).query("logs?"))
    (event,) = tool_events(events)
    variant = event.output.message_output  # type: ignore[union-attr]
    assert variant is not None and variant.is_streaming
    chunks = [m.content for m in variant.open_stream()]
    assert chunks == ["line 0: password=***\n", "line 1: password=***\n"]
    assert model.calls[1].messages[-1].content == "".join(chunks)
    assert [(c.name, c.call_id, c.arguments) for c in mask.seen] == [
        ("read_log", "c1", {"lines": 2})
    ]


def test_wrap_streamable_tool_call_can_change_the_arguments() -> None:
    class OneLine(AgentMiddleware):
        def wrap_stream_tool_call(
            self, call: ToolCallInfo, invoke: StreamToolInvoke
        ) -> StreamReader[str]:
            return invoke(attrs.evolve(call, arguments={"lines": 1}))

    agent, model = log_agent(OneLine(), Mask())
    run_events(Runner(agent, enable_streaming=True).query("logs?"))
    assert model.calls[1].messages[-1].content == "line 0: password=***\n"


def test_wrap_streamable_tool_call_runs_inside_wrap_tool_call() -> None:
    order: list[str] = []

    class Outer(AgentMiddleware):
        def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
            order.append("wrap_tool_call")
            text = invoke(call)
            order.append(f"whole: {text.count('***')} masked")
            return text

    class Inner(Mask):
        def wrap_stream_tool_call(
            self, call: ToolCallInfo, invoke: StreamToolInvoke
        ) -> StreamReader[str]:
            order.append("wrap_stream_tool_call")
            return super().wrap_stream_tool_call(call, invoke)

    agent, _ = log_agent(Outer(), Inner())
    run_events(Runner(agent, enable_streaming=True).query("logs?"))
    assert order == ["wrap_tool_call", "wrap_stream_tool_call", "whole: 2 masked"]


def test_wrap_streamable_tool_call_is_not_used_for_calls_that_do_not_stream() -> None:
    mask = Mask()
    agent, model = log_agent(mask)
    run_events(Runner(agent).query("logs?"))  # not streamed: the tool's invoke runs
    assert mask.seen == []
    assert SECRET in model.calls[1].messages[-1].content


def test_a_stream_layer_that_returns_no_stream_is_a_tool_error() -> None:
    class Broken(AgentMiddleware):
        def wrap_stream_tool_call(self, call, invoke):  # type: ignore[no-untyped-def]
            return "".join(invoke(call))

    agent, _ = log_agent(Broken())
    events = run_events(Runner(agent, enable_streaming=True).query("logs?"))
    assert "not a StreamReader" in str(events[-1].err)


@tool
def snapshot(label: str) -> tuple[TextPart, ImagePart]:
    """Take a picture."""
    return (TextPart(f"picture of {label}"), ImagePart(png(), media_type="image/png"))


def test_wrap_enhanced_invokable_tool_call_sees_and_returns_parts() -> None:
    class Caption(AgentMiddleware):
        def wrap_content_tool_call(
            self, call: ToolCallInfo, invoke: ContentToolInvoke
        ) -> str | tuple[ContentPart, ...]:
            result = invoke(call)
            assert isinstance(result, tuple)
            return (TextPart("[captioned]"), *result)

    model = ScriptedChatModel([calls_message(call("snapshot", {"label": "cat"})), "nice"])
    agent = ChatModelAgent("Cam", "d", model, tools=[snapshot], middlewares=[Caption()])
    events = run_events(Runner(agent).query("photo"))
    message = tool_events(events)[0].get_message()
    assert message is not None
    assert [type(p).__name__ for p in message.parts] == ["TextPart", "TextPart", "ImagePart"]
    assert message.parts[0] == TextPart("[captioned]")
    sent = model.calls[1].messages
    assert any(
        isinstance(p, ImagePart) for m in sent if m.role is Role.TOOL for p in m.parts
    )


def test_wrap_enhanced_invokable_tool_call_keeps_parts_under_wrap_tool_call() -> None:
    seen: list[str] = []

    class Text(AgentMiddleware):
        def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
            text = invoke(call)
            seen.append(text)
            return text  # the same text: the parts are kept

    class Drop(AgentMiddleware):
        def wrap_content_tool_call(
            self, call: ToolCallInfo, invoke: ContentToolInvoke
        ) -> str | tuple[ContentPart, ...]:
            result = invoke(call)
            assert isinstance(result, tuple)
            return tuple(p for p in result if not isinstance(p, TextPart))

    model = ScriptedChatModel([calls_message(call("snapshot", {"label": "dog"})), "ok"])
    agent = ChatModelAgent("Cam", "d", model, tools=[snapshot], middlewares=[Text(), Drop()])
    events = run_events(Runner(agent).query("photo"))
    message = tool_events(events)[0].get_message()
    assert message is not None
    assert [type(p).__name__ for p in message.parts] == ["ImagePart"]
    assert len(seen) == 1


# --- where the tool event is sent (Eino: NewEventSenderToolWrapper) --------------------------


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key} (secret={SECRET})"


class Sanitize(AgentMiddleware):
    def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
        return invoke(call).replace(SECRET, "***")


def lookup_run(*middlewares: AgentMiddleware) -> tuple[str, str]:
    """The tool event's text, and the tool result the model saw next."""
    model = ScriptedChatModel([calls_message(call("lookup", {"key": "k"}, id="c1")), "ok"])
    agent = ChatModelAgent("A", "d", model, tools=[lookup], middlewares=list(middlewares))
    events = run_events(Runner(agent).query("go"))
    (event,) = tool_events(events)
    message = event.get_message()
    assert message is not None
    return message.content, model.calls[1].messages[-1].content


def test_event_sender_tool_wrapper_default_shows_the_outermost_result() -> None:
    shown, kept = lookup_run(Sanitize())
    assert shown == kept == "value of k (secret=***)"


def test_event_sender_tool_wrapper_innermost_shows_the_tools_own_result() -> None:
    shown, kept = lookup_run(Sanitize(), ToolEventSender())
    assert shown == f"value of k (secret={SECRET})"
    assert kept == "value of k (secret=***)"


def test_event_sender_tool_wrapper_outermost_is_the_default() -> None:
    shown, kept = lookup_run(ToolEventSender(), Sanitize())
    assert shown == kept == "value of k (secret=***)"


def test_event_sender_tool_wrapper_keeps_the_tools_action() -> None:
    from agentkit import ExitTool

    model = ScriptedChatModel([calls_message(call("exit", {"final_result": "bye"}, id="e1"))])
    agent = ChatModelAgent(
        "A", "d", model, exit_tool=ExitTool(), middlewares=[Sanitize(), ToolEventSender()]
    )
    events = run_events(Runner(agent).query("go"))
    assert events[-1].action is not None and events[-1].action.exit
    assert len(tool_events(events)) == 1


def test_event_sender_tool_wrapper_in_a_streamed_call_sends_the_stream_once() -> None:
    agent, _ = log_agent(ToolEventSender(), Mask())
    events = run_events(Runner(agent, enable_streaming=True).query("logs?"))
    (event,) = tool_events(events)
    assert event.output.message_output.is_streaming  # type: ignore[union-attr]
