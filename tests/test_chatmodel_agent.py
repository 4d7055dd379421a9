"""ChatModelAgent: single call, ReAct loop, tool rounds, streaming, errors, concurrency."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentInput,
    AgentRunOption,
    ChatModelAgent,
    ExceedMaxIterationsError,
    ExitTool,
    Message,
    Role,
    Runner,
    ToolError,
    ToolNotFoundError,
    add_session_value,
    get_session_value,
    get_tool_options,
    new_break_loop_action,
    send_tool_gen_action,
    set_sub_agents,
    system_message,
    tool,
    user_message,
    with_chat_model_options,
    with_session_values,
    with_tool_options,
)
from agentkit.errors import AgentConfigError, InstructionFormatError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, run_events, summarize


@tool
def get_weather(city: str) -> str:
    """Get the weather of a city.

    Args:
        city: the city name.
    """
    return f"sunny in {city}"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def run(
    agent: ChatModelAgent, text: str = "hi", *options: AgentRunOption, streaming: bool = False
) -> list[AgentEvent]:
    return run_events(lambda: Runner(agent, enable_streaming=streaming).query(text, *options))


def test_single_call_mode_sends_system_and_user_and_offers_no_tools() -> None:
    model = ScriptedChatModel(["Hello!"])
    agent = ChatModelAgent("bot", "says hello", model, instruction="Be kind.")
    events = run(agent, "hi")
    assert [summarize(e) for e in events] == [("bot", ["bot"], "assistant", "Hello!", None)]
    assert model.calls[0].messages == [system_message("Be kind."), user_message("hi")]
    assert model.calls[0].tools == []


def test_empty_instruction_sends_no_system_message() -> None:
    model = ScriptedChatModel(["ok"])
    run(ChatModelAgent("bot", "d", model), "hi")
    assert model.calls[0].messages == [user_message("hi")]


def test_react_loop_runs_tools_and_feeds_results_back() -> None:
    first = calls_message(call("get_weather", {"city": "Paris"}, id="c1"))
    model = ScriptedChatModel([first, "It is sunny in Paris."])
    agent = ChatModelAgent("w", "weather", model, tools=[get_weather])
    events = run(agent, "weather in Paris?")
    assert [summarize(e) for e in events] == [
        ("w", ["w"], "assistant", "", None),
        ("w", ["w"], "tool/get_weather", "sunny in Paris", None),
        ("w", ["w"], "assistant", "It is sunny in Paris.", None),
    ]
    assert [t.name for t in model.calls[0].tools] == ["get_weather"]
    second = model.calls[1].messages
    assert second[:2] == [user_message("weather in Paris?"), first]
    assert (second[2].role, second[2].tool_call_id, second[2].content) == (
        Role.TOOL,
        "c1",
        "sunny in Paris",
    )
    assert second[2].tool_name == "get_weather"


def test_tool_events_in_completion_order_history_in_call_order() -> None:
    b_done = threading.Event()

    @tool
    def slow() -> str:
        """Waits for fast."""
        assert b_done.wait(10)
        return "slow result"

    @tool
    def fast() -> str:
        """Finishes first."""
        return "fast result"

    def finish_fast(messages: list[Message]) -> Message:
        return calls_message(call("slow", id="a"), call("fast", id="b"))

    class Signal:
        def __init__(self) -> None:
            self.events: list[str] = []

    model = ScriptedChatModel([finish_fast, "done"])
    agent = ChatModelAgent("t", "d", model, tools=[slow, fast])
    runner = Runner(agent)
    seen = []
    with no_thread_leak():
        for event in runner.query("go"):
            seen.append(summarize(event))
            if seen[-1][2] == "tool/fast":
                b_done.set()
    assert [s[2] for s in seen] == ["assistant", "tool/fast", "tool/slow", "assistant"]
    history = model.calls[1].messages
    assert [m.tool_call_id for m in history if m.role is Role.TOOL] == ["a", "b"]


def test_tool_calls_of_one_message_run_concurrently() -> None:
    barrier = threading.Barrier(3, timeout=10)

    @tool
    def meet(n: int) -> str:
        """Waits until all three calls are running."""
        barrier.wait()
        return f"met {n}"

    model = ScriptedChatModel([calls_message(*(call("meet", {"n": i}) for i in range(3))), "ok"])
    events = run(ChatModelAgent("m", "d", model, tools=[meet]))
    assert sorted(s[3] for s in map(summarize, events) if s[2] == "tool/meet") == [
        "met 0",
        "met 1",
        "met 2",
    ]


def test_return_directly_event_is_held_back_and_last_matching_call_wins() -> None:
    first_done = threading.Event()

    @tool
    def answer(text: str) -> str:
        """Final answer."""
        return text

    @tool
    def other() -> str:
        """Slow other tool."""
        return "other"

    model = ScriptedChatModel(
        [
            calls_message(
                call("answer", {"text": "A"}, id="1"),
                call("other", id="2"),
                call("answer", {"text": "B"}, id="3"),
            )
        ]
    )
    agent = ChatModelAgent(
        "r", "d", model, tools=[answer, other], return_directly=["answer"], output_key="out"
    )
    events = run(agent)
    kinds = [summarize(e)[2:4] for e in events]
    assert kinds[0] == ("assistant", "")
    assert kinds[-1] == ("tool/answer", "B")
    assert sorted(kinds[1:-1]) == [("tool/answer", "A"), ("tool/other", "other")]
    assert len(model.calls) == 1
    first_done.set()


def test_output_key_stores_final_text_in_session() -> None:
    seen: list[object] = []

    class Reader:
        name = "reader"
        description = "reads the session"

    model = ScriptedChatModel(["the answer"])
    agent = ChatModelAgent("a", "d", model, output_key="result")

    @tool
    def peek() -> str:
        """Peek."""
        seen.append(get_session_value("result"))
        return "x"

    second = ChatModelAgent(
        "b", "d", ScriptedChatModel([calls_message(call("peek")), "ok"]), tools=[peek]
    )
    from agentkit import SequentialAgent

    run(SequentialAgent("s", "d", [agent, second]))  # type: ignore[arg-type]
    assert seen == ["the answer"]


def test_exit_tool_ends_run_with_exit_action_on_last_event() -> None:
    model = ScriptedChatModel(
        [
            calls_message(
                call("get_weather", {"city": "X"}, id="w"),
                call("exit", {"final_result": "FINAL"}, id="e"),
            )
        ]
    )
    agent = ChatModelAgent(
        "x", "d", model, tools=[get_weather], exit_tool=ExitTool(), output_key="k"
    )
    events = run(agent)
    assert summarize(events[-1]) == ("x", ["x"], "tool/exit", "FINAL", "exit")
    assert [t.name for t in model.calls[0].tools] == ["get_weather", "exit"]


def test_max_iterations_allows_exactly_n_model_calls() -> None:
    model = ScriptedChatModel(lambda messages: calls_message(call("add", {"a": 1, "b": 2})))
    events = run(ChatModelAgent("loop", "d", model, tools=[add], max_iterations=3))
    assert len(model.calls) == 3
    assert isinstance(events[-1].err, ExceedMaxIterationsError)
    assert "exceeds max iterations" in str(events[-1].err)
    assert events[-1].agent_name == "loop"


def test_instruction_is_formatted_only_when_session_has_values() -> None:
    model = ScriptedChatModel(["a", "b"])
    agent = ChatModelAgent("f", "d", model, instruction="Hello {User}, JSON: {{x}}")
    run(agent, "hi", with_session_values({"User": "Ada"}))
    assert model.calls[0].messages[0].content == "Hello Ada, JSON: {x}"
    run(agent, "hi")
    assert model.calls[1].messages[0].content == "Hello {User}, JSON: {{x}}"


def test_missing_instruction_key_names_the_key_and_the_fix() -> None:
    agent = ChatModelAgent("f", "d", ScriptedChatModel(["a"]), instruction="Hi {User}")
    events = run(agent, "hi", with_session_values({"Other": 1}))
    assert isinstance(events[-1].err, InstructionFormatError)
    text = str(events[-1].err)
    assert "the instruction could not be formatted" in text
    assert "could not find key: User" in text
    assert "gen_model_input" in text


def test_custom_gen_model_input_replaces_default() -> None:
    model = ScriptedChatModel(["a"])

    def build(instruction: str, input: AgentInput) -> list[Message]:
        return [user_message(f"{instruction}|{input.messages[-1].content}")]

    run(
        ChatModelAgent("g", "d", model, instruction="I {x}", gen_model_input=build),
        "q",
        with_session_values({"y": 1}),
    )
    assert model.calls[0].messages == [user_message("I {x}|q")]


def test_streaming_mode_streams_model_events_not_invokable_tool_events() -> None:
    model = ScriptedChatModel(
        [calls_message(call("get_weather", {"city": "Rome"})), "It is sunny."]
    )
    events = run(ChatModelAgent("s", "d", model, tools=[get_weather]), streaming=True)
    flags = [(e.output.message_output.role, e.output.message_output.is_streaming) for e in events]  # type: ignore[union-attr]
    assert flags == [(Role.ASSISTANT, True), (Role.TOOL, False), (Role.ASSISTANT, True)]
    assert events[-1].get_message().content == "It is sunny."  # type: ignore[union-attr]
    assert model.calls[0].streaming and model.calls[1].streaming


@tool
def count_up(n: int) -> Iterator[str]:
    """Stream numbers."""
    for i in range(n):
        yield str(i)


@pytest.mark.parametrize("streaming", [False, True])
def test_generator_tools_stream_their_result(streaming: bool) -> None:
    model = ScriptedChatModel([calls_message(call("count_up", {"n": 3}, id="c")), "done"])
    events = run(ChatModelAgent("g", "d", model, tools=[count_up]), streaming=streaming)
    tool_event = events[1]
    # A generator tool can stream and invoke: it streams only when the run streams.
    assert tool_event.output.message_output.is_streaming is streaming  # type: ignore[union-attr]
    assert tool_event.get_message().content == "012"  # type: ignore[union-attr]
    assert model.calls[1].messages[-1].content == "012"


def test_send_tool_gen_action_attaches_action_to_the_tool_event() -> None:
    @tool
    def stop_loop() -> str:
        """Ask the loop to stop."""
        send_tool_gen_action(new_break_loop_action("a"))
        return "stopping"

    model = ScriptedChatModel([calls_message(call("stop_loop")), "ok"])
    events = run(ChatModelAgent("a", "d", model, tools=[stop_loop]))
    assert events[1].action is not None and events[1].action.break_loop is not None


def test_tool_exception_ends_run_with_tool_error_naming_tool_and_call() -> None:
    @tool
    def broken() -> str:
        """Fails."""
        raise KeyError("missing")

    model = ScriptedChatModel([calls_message(call("broken", id="c9")), "never"])
    events = run(ChatModelAgent("e", "d", model, tools=[broken]))
    err = events[-1].err
    assert isinstance(err, ToolError)
    assert "tool 'broken' (call c9) raised " in str(err)
    assert isinstance(err.__cause__, KeyError)
    assert err.__traceback__ is not None
    assert len(model.calls) == 1


def test_unknown_tool_is_tool_not_found_error() -> None:
    # Eino's behaviour; the default (recover_tool_errors=True) is in test_tool_errors.py.
    model = ScriptedChatModel([calls_message(call("nope")), "never"])
    events = run(ChatModelAgent("e", "d", model, tools=[add], recover_tool_errors=False))
    assert isinstance(events[-1].err, ToolNotFoundError)
    assert "the model called tool 'nope' (call " in str(events[-1].err)


def test_bad_tool_arguments_surface_as_tool_error() -> None:
    model = ScriptedChatModel([calls_message(call("add", {"a": 1}))])
    events = run(ChatModelAgent("e", "d", model, tools=[add], recover_tool_errors=False))
    assert isinstance(events[-1].err, ToolError)
    assert "'b' is required" in str(events[-1].err)


def test_model_error_ends_run_with_that_error() -> None:
    events = run(ChatModelAgent("e", "d", ScriptedChatModel([ConnectionError("down")])))
    assert isinstance(events[-1].err, ConnectionError)


def test_an_agent_that_ran_can_be_wired_and_is_unchanged_by_it() -> None:
    agent = ChatModelAgent("p", "d", ScriptedChatModel(["a", "b"]))
    run(agent)
    child = ChatModelAgent("c", "d", ScriptedChatModel([]))
    flow = set_sub_agents(agent, [child])
    assert flow.agent is agent and [sub.name for sub in flow.sub_agents] == ["c"]
    # the agent itself has no transfer tool: only its place in the flow does
    model = agent.model
    assert isinstance(model, ScriptedChatModel)
    run(agent)
    assert model.calls[-1].tools == []


def test_constructor_validates_its_arguments() -> None:
    with pytest.raises(AgentConfigError, match="agent 'a' needs a model"):
        ChatModelAgent("a", "d", None)  # type: ignore[arg-type]
    with pytest.raises(AgentConfigError, match="max_iterations"):
        ChatModelAgent("a", "d", ScriptedChatModel([]), max_iterations=0)
    with pytest.raises(AgentConfigError, match="return_directly"):
        ChatModelAgent("a", "d", ScriptedChatModel([]), return_directly="x")
    with pytest.raises(AgentConfigError, match="two tools named"):
        list(ChatModelAgent("a", "d", ScriptedChatModel(["x"]), tools=[add, add]).run(AgentInput()))


def test_model_and_tool_options_reach_model_and_tools() -> None:
    seen: list[dict[str, object]] = []

    @tool
    def opts() -> str:
        """Report options."""
        seen.append(get_tool_options())
        return "ok"

    model = ScriptedChatModel([calls_message(call("opts")), "done"])
    agent = ChatModelAgent("o", "d", model, tools=[opts])
    run(
        agent,
        "x",
        with_chat_model_options(temperature=0.5),
        with_tool_options(user="ada"),
        with_chat_model_options(max_tokens=9).designate_agent("someone-else"),
    )
    assert model.calls[0].options is not None and model.calls[0].options.temperature == 0.5
    assert model.calls[0].options.max_tokens is None
    assert seen == [{"user": "ada"}]


def test_unknown_chat_model_option_is_rejected_at_once() -> None:
    with pytest.raises(ValueError, match="temprature"):
        with_chat_model_options(temprature=0.1)


def test_bare_run_has_no_session_and_skips_output_key() -> None:
    @tool
    def write() -> str:
        """Write."""
        try:
            add_session_value("k", 1)
        except RuntimeError as error:
            return str(error)
        return "wrote"

    model = ScriptedChatModel([calls_message(call("write")), "done"])
    agent = ChatModelAgent("bare", "d", model, tools=[write], output_key="out")
    with no_thread_leak():
        events = list(agent.run(AgentInput([user_message("hi")])))
    assert events[0].agent_name == "" and events[0].run_path == ()
    assert "needs an agent run" in events[1].get_message().content  # type: ignore[union-attr]
    assert events[-1].get_message().content == "done"  # type: ignore[union-attr]


def test_fifty_concurrent_runs_of_one_agent_do_not_mix() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return f"echo:{text}"

    def script(messages: list[Message]) -> Message:
        last = messages[-1]
        if last.role is Role.USER:
            return calls_message(call("echo", {"text": last.content}))
        return Message(Role.ASSISTANT, f"final:{last.content}")

    agent = ChatModelAgent("c", "d", ScriptedChatModel(script), tools=[echo])
    runner = Runner(agent)
    results: dict[int, str] = {}
    barrier = threading.Barrier(50, timeout=30)

    def one(i: int) -> None:
        barrier.wait()
        events = list(runner.query(f"q{i}"))
        results[i] = events[-1].get_message().content  # type: ignore[union-attr]

    with no_thread_leak(timeout=30):
        threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == {i: f"final:echo:q{i}" for i in range(50)}


def test_closing_the_iterator_during_a_tool_call_stops_before_the_next_model_call() -> None:
    holder: dict[str, object] = {}
    ready = threading.Event()
    tool_calls: list[int] = []

    @tool
    def work() -> str:
        """Closes the consumer's iterator while running."""
        tool_calls.append(1)
        assert ready.wait(10)
        holder["events"].close()  # type: ignore[attr-defined]
        return "worked"

    model = ScriptedChatModel(lambda messages: calls_message(call("work")))
    agent = ChatModelAgent("c", "d", model, tools=[work])
    with no_thread_leak():
        events = Runner(agent).query("go")
        holder["events"] = events
        ready.set()
        received = list(events)
    assert len(model.calls) == 1
    assert tool_calls == [1]
    assert len(received) <= 2
    errors = [e.err for e in received if e.err is not None]
    assert all(isinstance(err, AgentCancelledError) for err in errors), errors


def test_one_agent_json_arguments_are_passed_verbatim_to_tools() -> None:
    got: list[str] = []

    class RawTool:
        def info(self):  # type: ignore[no-untyped-def]
            from agentkit import ToolInfo

            return ToolInfo("raw", "raw tool")

        def invoke(self, arguments: str, **options: object) -> str:
            got.append(arguments)
            return json.dumps({"ok": True})

    model = ScriptedChatModel([calls_message(call("raw", '{"x": [1, 2]}')), "done"])
    run(ChatModelAgent("r", "d", model, tools=[RawTool()]))
    assert got == ['{"x": [1, 2]}']
