"""Middleware: hook order, state rewriting, tool-call wrapping, run-local values, custom events.

Every test drives a whole run (a ``Runner`` over a ``ChatModelAgent`` with a scripted model)
and looks at what the model was sent, what the tools got, and the events of the run.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs
import pytest

from agentkit import (
    AgentContext,
    AgentEvent,
    AgentMiddleware,
    AgentOutput,
    ChatModelAgent,
    Message,
    ModelState,
    Role,
    Runner,
    ToolCallInfo,
    ToolError,
    assistant_message,
    get_run_local_value,
    send_event,
    set_run_local_value,
    tool,
    user_message,
)
from agentkit.errors import AgentConfigError
from agentkit.middleware import ModelCallable, ToolInvoke
from agentkit.models import ModelOptions, ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, run_events, summarize

BOTH_MODES = pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def run(agent: ChatModelAgent, *, streaming: bool = False, text: str = "hi") -> list[AgentEvent]:
    return run_events(lambda: Runner(agent, enable_streaming=streaming).query(text))


class Recorder(AgentMiddleware):
    """Records every hook it sees in a shared list, tagged with its name."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    def before_agent(self, context: AgentContext) -> None:
        self.log.append(f"{self.name}.before_agent")

    def before_model(self, state: ModelState) -> None:
        self.log.append(f"{self.name}.before_model")

    def after_model(self, state: ModelState, message: Message) -> Message:
        self.log.append(f"{self.name}.after_model")
        return message

    def wrap_model(self, call: ModelCallable) -> ModelCallable:
        def wrapped(messages: list[Message], options: ModelOptions | None) -> Message:
            self.log.append(f"{self.name}.model>")
            reply = call(messages, options)
            self.log.append(f"{self.name}.model<")
            return reply

        return wrapped

    def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
        self.log.append(f"{self.name}.tool>")
        result = invoke(call)
        self.log.append(f"{self.name}.tool<")
        return result


@BOTH_MODES
def test_middlewares_compose_in_list_order_first_outermost(streaming: bool) -> None:
    log: list[str] = []
    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 2}, id="c1")), "3"])
    agent = ChatModelAgent(
        "calc", "d", model, tools=[add],
        middlewares=[Recorder("A", log), Recorder("B", log), Recorder("C", log)],
    )
    events = run(agent, streaming=streaming)
    one_model_call = [
        "A.before_model", "B.before_model", "C.before_model",
        "A.model>", "B.model>", "C.model>", "C.model<", "B.model<", "A.model<",
        "C.after_model", "B.after_model", "A.after_model",
    ]
    assert log == [
        "A.before_agent", "B.before_agent", "C.before_agent",
        *one_model_call,
        "A.tool>", "B.tool>", "C.tool>", "C.tool<", "B.tool<", "A.tool<",
        *one_model_call,
    ]
    assert [summarize(e)[2:4] for e in events] == [
        ("assistant", ""), ("tool/add", "3"), ("assistant", "3"),
    ]


def test_before_agent_rewrites_instruction_tools_and_input() -> None:
    @tool
    def secret() -> str:
        """Tell the secret."""
        return "42"

    class Setup(AgentMiddleware):
        def before_agent(self, context: AgentContext) -> None:
            assert context.agent_name == "calc"
            assert [t.info().name for t in context.tools] == ["add"]
            context.instruction = f"{context.instruction} Be brief."
            context.tools = [secret]
            context.messages.append(user_message("and tell the secret"))

    model = ScriptedChatModel([calls_message(call("secret", {}, id="c1")), "done"])
    agent = ChatModelAgent(
        "calc", "d", model, instruction="You add.", tools=[add], middlewares=[Setup()]
    )
    events = run(agent)
    first = model.calls[0]
    assert [(m.role, m.content) for m in first.messages] == [
        (Role.SYSTEM, "You add. Be brief."),
        (Role.USER, "hi"),
        (Role.USER, "and tell the secret"),
    ]
    assert [info.name for info in first.tools] == ["secret"]
    assert summarize(events[1])[2:4] == ("tool/secret", "42")
    # the agent itself is unchanged: the next run starts from its own configuration
    model2 = ScriptedChatModel(["plain"])
    plain = ChatModelAgent("calc", "d", model2, instruction="You add.", tools=[add])
    run(plain)
    assert [info.name for info in model2.calls[0].tools] == ["add"]


def test_before_model_rewrites_are_kept_for_the_rest_of_the_run() -> None:
    class Note(AgentMiddleware):
        def before_model(self, state: ModelState) -> None:
            state.messages.append(user_message(f"note {len(state.messages)}"))

    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 2}, id="c1")), "3"])
    run(ChatModelAgent("calc", "d", model, tools=[add], middlewares=[Note()]))
    first, second = model.calls
    assert [m.content for m in first.messages] == ["hi", "note 1"]
    # the note of the first call is still there: the rewritten conversation was kept
    assert [m.content for m in second.messages] == ["hi", "note 1", "", "3", "note 4"]


def test_before_model_can_take_tools_away() -> None:
    class NoTools(AgentMiddleware):
        def before_model(self, state: ModelState) -> None:
            state.tools = []

    model = ScriptedChatModel(["no tools today"])
    run(ChatModelAgent("calc", "d", model, tools=[add], middlewares=[NoTools()]))
    assert model.calls[0].tools == []


def test_after_model_changes_what_the_agent_does_not_the_event() -> None:
    class AddCall(AgentMiddleware):
        def after_model(self, state: ModelState, message: Message) -> Message:
            if message.content == "let me add":
                return attrs.evolve(message, tool_calls=[call("add", {"a": 2, "b": 2}, id="x")])
            return message

    model = ScriptedChatModel(["let me add", "4"])
    events = run(ChatModelAgent("calc", "d", model, tools=[add], middlewares=[AddCall()]))
    assert [summarize(e)[2:4] for e in events] == [
        ("assistant", "let me add"), ("tool/add", "4"), ("assistant", "4"),
    ]
    assert events[0].output is not None and events[0].output.message_output is not None
    assert events[0].output.message_output.get_message().tool_calls == ()
    assert [m.tool_call_id for m in model.calls[1].messages if m.role is Role.TOOL] == ["x"]


def test_wrap_model_can_answer_by_itself_and_the_event_shows_its_answer() -> None:
    class Cache(AgentMiddleware):
        def wrap_model(self, call: ModelCallable) -> ModelCallable:
            return lambda messages, options: assistant_message("cached answer")

    model = ScriptedChatModel([])
    events = run(ChatModelAgent("calc", "d", model, middlewares=[Cache()]))
    assert model.calls == []
    assert [summarize(e)[2:4] for e in events] == [("assistant", "cached answer")]


def test_streamed_wrap_model_sees_the_whole_message_and_the_stream_is_the_models() -> None:
    seen: list[str] = []

    class Upper(AgentMiddleware):
        def wrap_model(self, call: ModelCallable) -> ModelCallable:
            def wrapped(messages: list[Message], options: ModelOptions | None) -> Message:
                reply = call(messages, options)
                seen.append(reply.content)
                return attrs.evolve(reply, content=reply.content.upper())

            return wrapped

    class Keep(AgentMiddleware):
        def after_model(self, state: ModelState, message: Message) -> Message:
            seen.append(message.content)
            return message

    model = ScriptedChatModel(["hello there world"])
    events = run(
        ChatModelAgent("a", "d", model, middlewares=[Keep(), Upper()]), streaming=True
    )
    assert seen == ["hello there world", "HELLO THERE WORLD"]
    assert [summarize(e)[2:4] for e in events] == [("assistant", "hello there world")]


# --- tool calls ------------------------------------------------------------------------------


@BOTH_MODES
def test_wrap_tool_call_can_short_circuit_so_the_tool_never_runs(streaming: bool) -> None:
    ran: list[str] = []

    @tool
    def delete_all() -> str:
        """Delete everything."""
        ran.append("delete_all")
        return "deleted"

    class Guard(AgentMiddleware):
        def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
            if call.name == "delete_all":
                return "Error: this tool is disabled."
            return invoke(call)

    model = ScriptedChatModel([calls_message(call("delete_all", {}, id="c1")), "ok"])
    events = run(
        ChatModelAgent("a", "d", model, tools=[delete_all], middlewares=[Guard()]),
        streaming=streaming,
    )
    assert ran == []
    assert [summarize(e)[2:4] for e in events] == [
        ("assistant", ""), ("tool/delete_all", "Error: this tool is disabled."), ("assistant", "ok"),
    ]
    tool_messages = [m for m in model.calls[1].messages if m.role is Role.TOOL]
    assert [(m.tool_call_id, m.content) for m in tool_messages] == [
        ("c1", "Error: this tool is disabled.")
    ]


def test_wrap_tool_call_can_change_arguments_and_result() -> None:
    class Doubler(AgentMiddleware):
        def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
            assert call == ToolCallInfo("add", "c1", {"a": 1, "b": 2})
            assert isinstance(call.arguments, dict)
            doubled = {key: value * 2 for key, value in call.arguments.items()}
            return f"result: {invoke(attrs.evolve(call, arguments=doubled))}"

    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 2}, id="c1")), "6"])
    events = run(ChatModelAgent("a", "d", model, tools=[add], middlewares=[Doubler()]))
    assert summarize(events[1])[2:4] == ("tool/add", "result: 6")


def test_wrap_tool_call_can_retry_a_failing_tool() -> None:
    attempts: list[int] = []

    @tool
    def flaky() -> str:
        """Fails the first time."""
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise ConnectionError("first try fails")
        return "worked"

    class Retry(AgentMiddleware):
        def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
            try:
                return invoke(call)
            except ConnectionError:
                return invoke(call)

    model = ScriptedChatModel([calls_message(call("flaky", {}, id="c1")), "ok"])
    events = run(ChatModelAgent("a", "d", model, tools=[flaky], middlewares=[Retry()]))
    assert attempts == [0, 1]
    assert summarize(events[1])[2:4] == ("tool/flaky", "worked")


def test_an_error_escaping_the_middlewares_goes_through_the_tool_error_policy() -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    seen: list[str] = []

    class Watch(AgentMiddleware):
        def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
            try:
                return invoke(call)
            except RuntimeError as error:
                seen.append(str(error))
                raise

    def handler(error: Exception, call: ToolCallInfo) -> str:
        return f"{call.name} failed: {error}"

    model = ScriptedChatModel([calls_message(call("broken", {}, id="c1")), "sorry"])
    agent = ChatModelAgent(
        "a", "d", model, tools=[broken], middlewares=[Watch()], tool_exception_handler=handler
    )
    events = run(agent)
    assert seen == ["disk on fire"]
    assert summarize(events[1])[2:4] == ("tool/broken", "broken failed: disk on fire")

    model = ScriptedChatModel([calls_message(call("broken", {}, id="c1")), "sorry"])
    events = run(ChatModelAgent("a", "d", model, tools=[broken], middlewares=[Watch()]))
    assert isinstance(events[-1].err, ToolError)
    assert "disk on fire" in str(events[-1].err)


def test_concurrent_tool_calls_each_go_through_the_middleware() -> None:
    lock = threading.Lock()
    calls: list[str] = []

    class Count(AgentMiddleware):
        def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
            with lock:
                calls.append(call.call_id)
            return invoke(call)

    model = ScriptedChatModel(
        [
            calls_message(
                call("add", {"a": 1, "b": 1}, id="c1"),
                call("add", {"a": 2, "b": 2}, id="c2"),
                call("add", {"a": 3, "b": 3}, id="c3"),
            ),
            "done",
        ]
    )
    run(ChatModelAgent("a", "d", model, tools=[add], middlewares=[Count()]))
    assert sorted(calls) == ["c1", "c2", "c3"]
    results = [m.content for m in model.calls[1].messages if m.role is Role.TOOL]
    assert results == ["2", "4", "6"]


# --- run-local values and custom events ----------------------------------------------------------


def test_run_local_values_are_shared_by_hooks_and_tools_of_one_run_only() -> None:
    @tool
    def peek() -> str:
        """Read the run-local counter."""
        return str(get_run_local_value("model_calls"))

    class Counter(AgentMiddleware):
        def before_model(self, state: ModelState) -> None:
            set_run_local_value("model_calls", get_run_local_value("model_calls", 0) + 1)

    middleware = Counter()
    for _ in range(2):  # a second run starts from nothing
        model = ScriptedChatModel([calls_message(call("peek", {}, id="c1")), "ok"])
        events = run(ChatModelAgent("a", "d", model, tools=[peek], middlewares=[middleware]))
        assert summarize(events[1])[2:4] == ("tool/peek", "1")


def test_run_local_values_and_send_event_need_an_agent_run() -> None:
    with pytest.raises(RuntimeError, match="within a ChatModelAgent run"):
        set_run_local_value("k", 1)
    with pytest.raises(RuntimeError, match="within a ChatModelAgent run"):
        get_run_local_value("k")
    with pytest.raises(RuntimeError, match="within a ChatModelAgent run"):
        send_event(AgentEvent())


@BOTH_MODES
def test_custom_events_from_middleware_and_tools_reach_the_stream(streaming: bool) -> None:
    @tool
    def work() -> str:
        """Do some work, reporting progress."""
        send_event(AgentEvent(output=AgentOutput(customized_output={"progress": 50})))
        return "done"

    class Announce(AgentMiddleware):
        def before_model(self, state: ModelState) -> None:
            send_event(AgentEvent(output=AgentOutput(customized_output="thinking")))

    model = ScriptedChatModel([calls_message(call("work", {}, id="c1")), "finished"])
    events = run(
        ChatModelAgent("a", "d", model, tools=[work], middlewares=[Announce()]),
        streaming=streaming,
    )

    def describe(event: AgentEvent) -> Any:
        assert event.output is not None
        if event.output.customized_output is not None:
            return event.output.customized_output
        return summarize(event)[2]

    assert [describe(e) for e in events] == [
        "thinking", "assistant", {"progress": 50}, "tool/work", "thinking", "assistant",
    ]
    assert all((e.agent_name, [str(s) for s in e.run_path]) == ("a", ["a"]) for e in events)


def test_middlewares_must_be_agent_middlewares() -> None:
    model = ScriptedChatModel([])
    with pytest.raises(AgentConfigError, match="not one; write middlewares"):
        ChatModelAgent("a", "d", model, middlewares=Recorder("A", []))  # type: ignore[arg-type]
    with pytest.raises(AgentConfigError, match="subclass agentkit.AgentMiddleware"):
        ChatModelAgent("a", "d", model, middlewares=[object()])  # type: ignore[list-item]


def test_a_raising_hook_ends_the_run_with_its_error() -> None:
    class Refuse(AgentMiddleware):
        def before_model(self, state: ModelState) -> None:
            raise PermissionError("no model calls after hours")

    model = ScriptedChatModel(["never"])
    events = run(ChatModelAgent("a", "d", model, middlewares=[Refuse()]))
    assert isinstance(events[-1].err, PermissionError)
    assert model.calls == []


def test_before_agent_runs_again_on_resume_and_may_change_tools_only() -> None:
    from agentkit import interrupt, with_checkpoint_id
    from agentkit.checkpoint import InMemoryCheckPointStore

    @tool
    def approve() -> str:
        """Ask for approval."""
        return f"approved: {interrupt('ok?')}"

    seen: list[tuple[bool, list[str]]] = []

    class Watch(AgentMiddleware):
        def before_agent(self, context: AgentContext) -> None:
            seen.append((context.resumed, [m.content for m in context.messages]))

    model = ScriptedChatModel([calls_message(call("approve", {}, id="c1")), "done"])
    agent = ChatModelAgent("a", "d", model, tools=[approve], middlewares=[Watch()])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    with no_thread_leak():
        stopped = list(runner.query("hi", with_checkpoint_id("cp")))
        interrupted = stopped[-1].action.interrupted  # type: ignore[union-attr]
        assert interrupted is not None
        events = list(runner.resume("cp", targets={interrupted.contexts[0].id: "yes"}))
    assert seen == [(False, ["hi"]), (True, [])]
    assert [summarize(e)[2:4] for e in events] == [
        ("tool/approve", "approved: yes"), ("assistant", "done"),
    ]
