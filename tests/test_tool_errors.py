"""Runs that survive model mistakes: recovered tool errors, the tool-exception policy, Eino's mode.

Every test drives a whole run (a ``Runner`` over a ``ChatModelAgent`` with a scripted model) and
looks at what the model's next call was sent and how the run ended.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentRunOption,
    CancelHandle,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    ToolArgumentsError,
    ToolCallInfo,
    ToolError,
    ToolNotFoundError,
    TransferError,
    check_cancelled,
    interrupt,
    new_break_loop_action,
    send_tool_gen_action,
    set_sub_agents,
    tool,
    tool_message,
    with_cancel,
    with_checkpoint_id,
)
from agentkit.agents.flow import FlowAgent
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, run_events, summarize
from tests.transfer_support import transfer


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def get_weather(city: str) -> str:
    """Get the weather of a city."""
    return f"sunny in {city}"


def run(
    agent: ChatModelAgent | FlowAgent,
    *options: AgentRunOption,
    streaming: bool = False,
    runner: Runner | None = None,
) -> list[AgentEvent]:
    chosen = runner or Runner(agent, enable_streaming=streaming)
    return run_events(lambda: chosen.query("hi", *options))


def tool_results(messages: list[Message]) -> list[tuple[str, str, str]]:
    """``(call id, tool name, content)`` of the tool messages the model was sent."""
    return [(m.tool_call_id, m.tool_name, m.content) for m in messages if m.role is Role.TOOL]


BOTH_MODES = pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])

# --- model mistakes go back to the model ----------------------------------------------------------


@BOTH_MODES
def test_invalid_arguments_go_back_to_the_model_and_the_run_finishes(streaming: bool) -> None:
    model = ScriptedChatModel(
        [
            calls_message(call("add", {"a": 1, "c": "x"}, id="c1")),
            calls_message(call("add", {"a": 1, "b": 2}, id="c2")),
            "1 + 2 = 3",
        ]
    )
    events = run(ChatModelAgent("calc", "d", model, tools=[add]), streaming=streaming)
    mistake = (
        "Error: add: 'b' is required (got {'a': 1, 'c': 'x'}). Correct the arguments and call "
        "add again."
    )
    assert tool_results(model.calls[1].messages) == [("c1", "add", mistake)]
    assert tool_results(model.calls[2].messages) == [("c1", "add", mistake), ("c2", "add", "3")]
    assert [summarize(e) for e in events] == [
        ("calc", ["calc"], "assistant", "", None),
        ("calc", ["calc"], "tool/add", mistake, None),
        ("calc", ["calc"], "assistant", "", None),
        ("calc", ["calc"], "tool/add", "3", None),
        ("calc", ["calc"], "assistant", "1 + 2 = 3", None),
    ]
    assert all(e.err is None for e in events)


@BOTH_MODES
def test_a_wrong_type_names_the_field_and_what_was_expected(streaming: bool) -> None:
    model = ScriptedChatModel([calls_message(call("add", {"a": "one", "b": [2]}, id="c1")), "ok"])
    events = run(ChatModelAgent("calc", "d", model, tools=[add]), streaming=streaming)
    assert tool_results(model.calls[1].messages) == [
        (
            "c1",
            "add",
            "Error: add: 'a' must be an integer (got 'one'); 'b' must be an integer (got [2]). "
            "Correct the arguments and call add again.",
        )
    ]
    assert summarize(events[-1])[2:] == ("assistant", "ok", None)


@BOTH_MODES
def test_arguments_that_are_not_json_go_back_to_the_model(streaming: bool) -> None:
    model = ScriptedChatModel([calls_message(call("add", '{"a": 1, "b": ', id="c1")), "ok"])
    events = run(ChatModelAgent("calc", "d", model, tools=[add]), streaming=streaming)
    [(_, _, text)] = tool_results(model.calls[1].messages)
    assert text.startswith("Error: add: arguments are not valid JSON: ")
    assert """(got '{"a": 1, "b": ')""" in text
    assert text.endswith("Correct the arguments and call add again.")
    assert events[-1].err is None


@BOTH_MODES
def test_an_unknown_tool_is_answered_with_the_tools_that_exist(streaming: bool) -> None:
    model = ScriptedChatModel(
        [
            calls_message(call("booking", {"date": "today"}, id="c1")),
            calls_message(call("get_weather", {"city": "Rome"}, id="c2")),
            "Sunny in Rome.",
        ]
    )
    events = run(ChatModelAgent("a", "d", model, tools=[get_weather, add]), streaming=streaming)
    unknown = (
        "Error: there is no tool named 'booking'. The tools you can call are: 'add', "
        "'get_weather'."
    )
    assert tool_results(model.calls[1].messages) == [("c1", "booking", unknown)]
    assert [summarize(e)[2:] for e in events] == [
        ("assistant", "", None),
        ("tool/booking", unknown, None),
        ("assistant", "", None),
        ("tool/get_weather", "sunny in Rome", None),
        ("assistant", "Sunny in Rome.", None),
    ]


@BOTH_MODES
def test_one_bad_call_loses_none_of_the_other_calls_of_its_round(streaming: bool) -> None:
    # Both calls run at once on the round's pool; the barrier proves it and orders nothing.
    both_running = threading.Barrier(2, timeout=30)

    @tool
    def slow_weather(city: str) -> str:
        """Weather, slowly."""
        both_running.wait()
        return f"rain in {city}"

    @tool
    def strict_add(a: int, b: int) -> int:
        """Adds after the other call started."""
        both_running.wait()
        return a + b

    model = ScriptedChatModel(
        [
            calls_message(
                call("slow_weather", {"city": "Oslo"}, id="c1"),
                call("nope", id="c2"),
                call("add", {"a": "x"}, id="c3"),
                call("strict_add", {"a": 2, "b": 3}, id="c4"),
            ),
            "done",
        ]
    )
    agent = ChatModelAgent("a", "d", model, tools=[slow_weather, add, strict_add])
    events = run(agent, streaming=streaming)
    assert tool_results(model.calls[1].messages) == [
        ("c1", "slow_weather", "rain in Oslo"),
        (
            "c2",
            "nope",
            "Error: there is no tool named 'nope'. The tools you can call are: 'add', "
            "'slow_weather', 'strict_add'.",
        ),
        (
            "c3",
            "add",
            "Error: add: 'a' must be an integer (got 'x'); 'b' is required (got {'a': 'x'}). "
            "Correct the arguments and call add again.",
        ),
        ("c4", "strict_add", "5"),
    ]
    tool_events = sorted(summarize(e)[2] for e in events if summarize(e)[2].startswith("tool/"))
    assert tool_events == ["tool/add", "tool/nope", "tool/slow_weather", "tool/strict_add"]
    assert summarize(events[-1])[2:] == ("assistant", "done", None)


def test_a_mistaken_call_of_a_return_directly_tool_does_not_end_the_run() -> None:
    model = ScriptedChatModel(
        [calls_message(call("add", {"a": 1}, id="c1")), calls_message(call("add", {"a": 1, "b": 1})), "x"]
    )
    events = run(ChatModelAgent("a", "d", model, tools=[add], return_directly=["add"]))
    assert len(model.calls) == 2
    assert summarize(events[-1])[2:] == ("tool/add", "2", None)


def test_a_mistaken_exit_goes_back_to_the_model_and_exits_nothing() -> None:
    from agentkit import ExitTool

    model = ScriptedChatModel(
        [
            calls_message(call("exit", {"result": "42"}, id="c1")),
            calls_message(call("exit", {"final_result": "42"}, id="c2")),
        ]
    )
    events = run(ChatModelAgent("a", "d", model, exit_tool=ExitTool()))
    assert [summarize(e)[2:] for e in events] == [
        ("assistant", "", None),
        (
            "tool/exit",
            "Error: exit: 'final_result' is required and must be a string (got {'result': '42'}). "
            "Correct the arguments and call exit again.",
            None,
        ),
        ("assistant", "", None),
        ("tool/exit", "42", "exit"),
    ]


def test_mistakes_count_towards_max_iterations() -> None:
    model = ScriptedChatModel(lambda messages: calls_message(call("add", {"a": 1})))
    events = run(ChatModelAgent("loop", "d", model, tools=[add], max_iterations=3))
    assert len(model.calls) == 3
    # The error quotes what the model was told each time (issue 28).
    assert str(events[-1].err) == (
        "exceeds max iterations: agent 'loop' called its model 3 times (max_iterations=3) and "
        "the model still asked for tools instead of answering. The last tool calls failed, and "
        "the model was told: \"Error: add: 'b' is required (got {'a': 1}). Correct the "
        "arguments and call add again.\" (3 times). Fix what the model keeps getting wrong (a "
        "tool or agent name, the arguments, the instruction), or raise the limit with "
        "ChatModelAgent(..., max_iterations=N)"
    )
    assert events[-1].err.tool_errors == (  # type: ignore[union-attr]
        "Error: add: 'b' is required (got {'a': 1}). Correct the arguments and call add again.",
    )


def test_without_failed_tool_calls_the_error_says_where_to_look() -> None:
    model = ScriptedChatModel(lambda messages: calls_message(call("add", {"a": 1, "b": 2})))
    events = run(ChatModelAgent("loop", "d", model, tools=[add], max_iterations=2))
    assert str(events[-1].err) == (
        "exceeds max iterations: agent 'loop' called its model 2 times (max_iterations=2) and "
        "the model still asked for tools instead of answering. Raise the limit with "
        "ChatModelAgent(..., max_iterations=N), or look at the tool results in the events: a "
        "model that keeps retrying a failing tool never finishes"
    )


@BOTH_MODES
def test_quoted_numbers_are_accepted_unless_the_tool_is_strict(streaming: bool) -> None:
    @tool(strict=True)
    def exact_add(a: int, b: int) -> int:
        """Adds exactly."""
        return a + b

    model = ScriptedChatModel(
        [
            calls_message(
                call("add", {"a": "2", "b": 3}, id="c1"),
                call("exact_add", {"a": "2", "b": 3}, id="c2"),
            ),
            "ok",
        ]
    )
    run(ChatModelAgent("a", "d", model, tools=[add, exact_add]), streaming=streaming)
    assert tool_results(model.calls[1].messages) == [
        ("c1", "add", "5"),
        (
            "c2",
            "exact_add",
            "Error: exact_add: 'a' must be an integer (got '2'). Correct the arguments and call "
            "exact_add again.",
        ),
    ]


# --- transfers to agents that do not exist ----------------------------------------------------


@BOTH_MODES
def test_a_transfer_to_an_unknown_agent_lists_the_agents_and_transfers_nowhere(
    streaming: bool,
) -> None:
    mom_model = ScriptedChatModel([transfer("Nobody", "m1"), transfer("Kid", "m2")])
    kid_model = ScriptedChatModel(["Kid here."])
    mom = ChatModelAgent("Mom", "mother", mom_model)
    flow = set_sub_agents(
        mom, [ChatModelAgent("Kid", "a kid", kid_model), ChatModelAgent("Aunt", "an aunt", ScriptedChatModel([]))]
    )
    events = run(flow, streaming=streaming)
    refused = (
        "Error: transfer_to_agent: there is no agent named 'Nobody' to transfer to; the agents "
        "you can transfer to are: 'Kid', 'Aunt'. Correct the arguments and call "
        "transfer_to_agent again."
    )
    assert tool_results(mom_model.calls[1].messages) == [("m1", "transfer_to_agent", refused)]
    assert [summarize(e) for e in events] == [
        ("Mom", ["Mom"], "assistant", "", None),
        ("Mom", ["Mom"], "tool/transfer_to_agent", refused, None),
        ("Mom", ["Mom"], "assistant", "", None),
        (
            "Mom",
            ["Mom"],
            "tool/transfer_to_agent",
            "successfully transferred to agent [Kid]",
            "transfer:Kid",
        ),
        ("Kid", ["Mom", "Kid"], "assistant", "Kid here.", None),
    ]


def test_a_sub_agent_may_transfer_back_to_its_parent_but_not_to_a_sibling() -> None:
    kid_model = ScriptedChatModel([transfer("Aunt", "k1"), transfer("Mom", "k2")])
    mom_model = ScriptedChatModel([transfer("Kid", "m1"), "Mom answers."])
    flow = set_sub_agents(
        ChatModelAgent("Mom", "mother", mom_model),
        [ChatModelAgent("Kid", "a kid", kid_model), ChatModelAgent("Aunt", "aunt", ScriptedChatModel([]))],
    )
    events = run(flow)
    assert tool_results(kid_model.calls[1].messages)[-1] == (
        "k1",
        "transfer_to_agent",
        "Error: transfer_to_agent: there is no agent named 'Aunt' to transfer to; the agents you "
        "can transfer to are: 'Mom'. Correct the arguments and call transfer_to_agent again.",
    )
    assert summarize(events[-1]) == ("Mom", ["Mom", "Kid", "Mom"], "assistant", "Mom answers.", None)


# --- exceptions raised inside a tool ----------------------------------------------------------


@tool
def book(room: str) -> str:
    """Book a room."""
    raise RuntimeError(f"room {room} is taken")


@BOTH_MODES
def test_without_a_handler_a_tool_exception_ends_the_run_with_tool_error(streaming: bool) -> None:
    model = ScriptedChatModel([calls_message(call("book", {"room": "A"}, id="c1")), "never"])
    events = run(ChatModelAgent("a", "d", model, tools=[book]), streaming=streaming)
    err = events[-1].err
    assert type(err) is ToolError
    assert str(err) == (
        "tool 'book' (call c1) raised RuntimeError: room A is taken; give the agent a "
        "tool_exception_handler to send tool errors to the model instead of ending the run"
    )
    assert isinstance(err.__cause__, RuntimeError)
    assert len(model.calls) == 1


@BOTH_MODES
def test_a_handler_turns_a_tool_exception_into_the_tool_message(streaming: bool) -> None:
    seen: list[tuple[BaseException, ToolCallInfo]] = []

    def handler(error: Exception, call: ToolCallInfo) -> str:
        seen.append((error, call))
        return f"{call.name} failed: {error}; try another room"

    model = ScriptedChatModel(
        [
            calls_message(call("book", {"room": "A"}, id="c1"), call("add", {"a": 1, "b": 1}, id="c2")),
            "Room A is taken.",
        ]
    )
    agent = ChatModelAgent("a", "d", model, tools=[book, add], tool_exception_handler=handler)
    events = run(agent, streaming=streaming)
    assert tool_results(model.calls[1].messages) == [
        ("c1", "book", "book failed: room A is taken; try another room"),
        ("c2", "add", "2"),
    ]
    [(error, info)] = seen
    assert isinstance(error, RuntimeError)
    assert info == ToolCallInfo(name="book", call_id="c1", arguments={"room": "A"})
    assert summarize(events[-1])[2:] == ("assistant", "Room A is taken.", None)
    assert all(e.err is None for e in events)


def test_a_handler_that_reraises_ends_the_run_as_without_handler() -> None:
    def handler(error: Exception, call: ToolCallInfo) -> str:
        raise error

    model = ScriptedChatModel([calls_message(call("book", {"room": "B"}, id="c1")), "never"])
    events = run(ChatModelAgent("a", "d", model, tools=[book], tool_exception_handler=handler))
    err = events[-1].err
    assert type(err) is ToolError
    assert str(err) == (
        "tool 'book' (call c1) raised RuntimeError: room B is taken; give the agent a "
        "tool_exception_handler to send tool errors to the model instead of ending the run"
    )
    assert isinstance(err.__cause__, RuntimeError)


def test_a_handler_may_end_the_run_with_its_own_error() -> None:
    class Fatal(Exception):
        pass

    def handler(error: Exception, call: ToolCallInfo) -> str:
        raise Fatal(f"cannot go on after {call.name}")

    model = ScriptedChatModel([calls_message(call("book", {"room": "B"})), "never"])
    events = run(ChatModelAgent("a", "d", model, tools=[book], tool_exception_handler=handler))
    assert isinstance(events[-1].err, Fatal)
    assert str(events[-1].err) == "cannot go on after book"


def test_a_handler_that_returns_no_text_ends_the_run_saying_so() -> None:
    model = ScriptedChatModel([calls_message(call("book", {"room": "B"})), "never"])
    agent = ChatModelAgent(
        "a", "d", model, tools=[book], tool_exception_handler=lambda error, call: None  # type: ignore[arg-type,return-value]
    )
    events = run(agent)
    assert isinstance(events[-1].err, ToolError)
    assert str(events[-1].err).startswith(
        "tool_exception_handler returned NoneType for the error of tool 'book', not str"
    )


def test_the_handler_is_not_given_argument_errors() -> None:
    seen: list[BaseException] = []

    def handler(error: Exception, call: ToolCallInfo) -> str:
        seen.append(error)
        return "handled"

    model = ScriptedChatModel([calls_message(call("add", {"a": 1}, id="c1")), "ok"])
    run(ChatModelAgent("a", "d", model, tools=[add], tool_exception_handler=handler))
    assert seen == []
    assert tool_results(model.calls[1].messages)[0][2].startswith("Error: add: 'b' is required")


def test_the_handler_never_sees_an_interrupt() -> None:
    seen: list[BaseException] = []

    @tool
    def approve(amount: int) -> str:
        """Ask a human."""
        interrupt(f"approve {amount}?")
        return "approved"

    def handler(error: Exception, call: ToolCallInfo) -> str:
        seen.append(error)
        return "handled"

    model = ScriptedChatModel([calls_message(call("approve", {"amount": 5}))])
    agent = ChatModelAgent("a", "d", model, tools=[approve], tool_exception_handler=handler)
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    events = run(agent, with_checkpoint_id("k"), runner=runner)
    assert summarize(events[-1])[4] == "interrupt"
    assert seen == []


@pytest.mark.parametrize("how", ["check_cancelled", "error after cancel"])
def test_the_handler_never_sees_a_cancel(how: str) -> None:
    seen: list[BaseException] = []
    handle = CancelHandle()

    @tool
    def work() -> str:
        """Cancels the run, then stops (or fails because of the cancel)."""
        handle.cancel()
        if how == "check_cancelled":
            check_cancelled()
        raise OSError("connection closed")

    def handler(error: Exception, call: ToolCallInfo) -> str:
        seen.append(error)
        return "handled"

    model = ScriptedChatModel(lambda messages: calls_message(call("work")))
    agent = ChatModelAgent("a", "d", model, tools=[work], tool_exception_handler=handler)
    events = run(agent, with_cancel(handle))
    assert isinstance(events[-1].err, AgentCancelledError)
    assert len(model.calls) == 1
    assert seen == []


@BOTH_MODES
def test_a_streaming_tool_that_fails_midway_is_handled(streaming: bool) -> None:
    @tool
    def lines(n: int) -> Iterator[str]:
        """Stream lines, then fail."""
        yield "line 1\n"
        raise RuntimeError("disk gone")

    model = ScriptedChatModel([calls_message(call("lines", {"n": 2}, id="c1")), "ok"])
    agent = ChatModelAgent(
        "a", "d", model, tools=[lines], tool_exception_handler=lambda e, c: f"partial: {e}"
    )
    events = run(agent, streaming=streaming)
    assert tool_results(model.calls[1].messages) == [("c1", "lines", "partial: disk gone")]
    assert summarize(events[-1])[2:] == ("assistant", "ok", None)


def test_a_handled_failure_of_a_return_directly_tool_goes_to_the_model_without_its_action() -> None:
    @tool
    def finish(answer: str) -> str:
        """Finish, but fail after asking to break the loop."""
        send_tool_gen_action(new_break_loop_action("a"))
        raise RuntimeError("storage is down")

    model = ScriptedChatModel(
        [calls_message(call("finish", {"answer": "42"}, id="c1")), "I could not save it."]
    )
    agent = ChatModelAgent(
        "a",
        "d",
        model,
        tools=[finish],
        return_directly=["finish"],
        tool_exception_handler=lambda error, call: f"failed: {error}",
    )
    events = run(agent)
    assert [summarize(e)[2:] for e in events] == [
        ("assistant", "", None),
        ("tool/finish", "failed: storage is down", None),
        ("assistant", "I could not save it.", None),
    ]


def test_a_return_directly_stream_that_breaks_is_shown_then_its_handled_text() -> None:
    @tool
    def lines() -> Iterator[str]:
        """Stream lines, then fail."""
        yield "line 1\n"
        raise RuntimeError("disk gone")

    model = ScriptedChatModel([calls_message(call("lines", id="c1")), "ok"])
    agent = ChatModelAgent(
        "a",
        "d",
        model,
        tools=[lines],
        return_directly=["lines"],
        tool_exception_handler=lambda error, call: f"partial: {error}",
    )
    events = run(agent, streaming=True)
    kinds = [
        (e.output.message_output.role, e.output.message_output.is_streaming)  # type: ignore[union-attr]
        for e in events
    ]
    assert kinds == [
        (Role.ASSISTANT, True),
        (Role.TOOL, True),
        (Role.TOOL, False),
        (Role.ASSISTANT, True),
    ]
    stream = events[1].output.message_output.message_stream  # type: ignore[union-attr]
    assert stream is not None and stream.recv().content == "line 1\n"
    with pytest.raises(RuntimeError, match="disk gone"):
        stream.recv()
    assert summarize(events[2])[2:] == ("tool/lines", "partial: disk gone", None)
    assert summarize(events[3])[2:] == ("assistant", "ok", None)


# --- recover_tool_errors=False: Eino's behaviour, today's exact errors ------------------------


@BOTH_MODES
def test_without_recovery_invalid_arguments_end_the_run(streaming: bool) -> None:
    model = ScriptedChatModel([calls_message(call("add", {"a": 1}, id="c1")), "never"])
    agent = ChatModelAgent("a", "d", model, tools=[add], recover_tool_errors=False)
    events = run(agent, streaming=streaming)
    err = events[-1].err
    assert isinstance(err, ToolArgumentsError)
    assert str(err) == (
        "tool 'add' (call c1) was called with arguments it refuses: add: 'b' is required "
        "(got {'a': 1}); with recover_tool_errors=True the model is told and can call it again"
    )
    assert (err.tool_name, err.call_id) == ("add", "c1")
    assert isinstance(err.__cause__, ToolArgumentsError)
    assert len(model.calls) == 1


@BOTH_MODES
def test_without_recovery_an_unknown_tool_ends_the_run(streaming: bool) -> None:
    model = ScriptedChatModel([calls_message(call("booking", id="c1")), "never"])
    agent = ChatModelAgent("a", "d", model, tools=[add], recover_tool_errors=False)
    events = run(agent, streaming=streaming)
    err = events[-1].err
    assert isinstance(err, ToolNotFoundError)
    assert str(err) == (
        "the model called tool 'booking' (call c1), which the agent does not have (its tools: "
        "'add'); with recover_tool_errors=True the model is told and the run goes on"
    )
    assert (err.tool_name, err.call_id) == ("booking", "c1")


def test_without_recovery_a_transfer_to_nobody_ends_the_run_with_transfer_error() -> None:
    mom = ChatModelAgent(
        "Mom", "mother", ScriptedChatModel([transfer("Nobody", "m1")]), recover_tool_errors=False
    )
    events = run(set_sub_agents(mom, [ChatModelAgent("Kid", "a kid", ScriptedChatModel([]))]))
    assert [summarize(e)[2:] for e in events] == [
        ("assistant", "", None),
        ("tool/transfer_to_agent", "successfully transferred to agent [Nobody]", "transfer:Nobody"),
        (
            "error",
            "agent 'Mom' transferred to 'Nobody', which it cannot reach: an agent transfers to "
            "its sub-agents and its parent only ('Kid'); make 'Nobody' a sub-agent of 'Mom' "
            "with set_sub_agents(...)",
            None,
        ),
    ]
    assert isinstance(events[-1].err, TransferError)


def test_without_recovery_other_calls_of_the_round_still_finish() -> None:
    ran = threading.Event()

    @tool
    def note(text: str) -> str:
        """Take a note."""
        ran.set()
        return "noted"

    model = ScriptedChatModel(
        [calls_message(call("note", {"text": "x"}), call("add", {"a": 1})), "never"]
    )
    agent = ChatModelAgent("a", "d", model, tools=[note, add], recover_tool_errors=False)
    events = run(agent)
    assert isinstance(events[-1].err, ToolArgumentsError)
    assert ran.is_set()


# --- long results -----------------------------------------------------------------------------


@BOTH_MODES
def test_a_long_result_is_cut_with_a_note_and_a_warning(
    streaming: bool, caplog: pytest.LogCaptureFixture
) -> None:
    @tool
    def dump() -> str:
        """A lot of text."""
        return "x" * 25

    @tool
    def dump_stream() -> Iterator[str]:
        """A lot of streamed text."""
        for _ in range(5):
            yield "y" * 5

    model = ScriptedChatModel(
        [calls_message(call("dump", id="c1"), call("dump_stream", id="c2")), "ok"]
    )
    agent = ChatModelAgent("big", "d", model, tools=[dump, dump_stream], max_tool_result_chars=10)
    with caplog.at_level("WARNING", logger="agentkit"):
        run(agent, streaming=streaming)
    note = "\n\n[truncated: the tool returned 25 characters; only the first 10 are shown]"
    assert tool_results(model.calls[1].messages) == [
        ("c1", "dump", "x" * 10 + note),
        ("c2", "dump_stream", "y" * 10 + note),
    ]
    warnings = sorted(r.getMessage() for r in caplog.records if r.name == "agentkit")
    assert warnings == [
        f"agent 'big': tool '{name}' (call {id}) returned 25 characters; only the first 10 are "
        "sent to the model (ChatModelAgent(max_tool_result_chars=...) sets the limit, None for "
        "none)"
        for name, id in (("dump", "c1"), ("dump_stream", "c2"))
    ]


def test_the_default_limit_is_100_000_characters_and_none_means_no_limit() -> None:
    @tool
    def dump(n: int) -> str:
        """Text of length n."""
        return "z" * n

    model = ScriptedChatModel(
        [calls_message(call("dump", {"n": 100_000}, id="c1"), call("dump", {"n": 100_001}, id="c2")), "ok"]
    )
    run(ChatModelAgent("a", "d", model, tools=[dump]))
    first, second = tool_results(model.calls[1].messages)
    assert first[2] == "z" * 100_000
    assert second[2].startswith("z" * 100_000 + "\n\n[truncated: the tool returned 100,001 ")

    model = ScriptedChatModel([calls_message(call("dump", {"n": 300_000})), "ok"])
    run(ChatModelAgent("a", "d", model, tools=[dump], max_tool_result_chars=None))
    assert tool_results(model.calls[1].messages)[0][2] == "z" * 300_000


# --- configuration, ToolCallInfo ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("keyword", "value", "message"),
    [
        ("recover_tool_errors", "yes", "recover_tool_errors must be True or False (got 'yes')"),
        ("tool_exception_handler", "log", "tool_exception_handler must be a function"),
        ("max_tool_result_chars", 0, "max_tool_result_chars must be a positive int, or None"),
        ("max_tool_result_chars", True, "max_tool_result_chars must be a positive int, or None"),
    ],
)
def test_bad_settings_are_refused_when_the_agent_is_made(keyword: str, value: Any, message: str) -> None:
    from agentkit.errors import AgentConfigError

    with pytest.raises(AgentConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ChatModelAgent("a", "d", ScriptedChatModel([]), **{keyword: value})


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        ('{"room": "A"}', {"room": "A"}),
        ("", {}),
        ("  ", {}),
        ('{"room": ', '{"room": '),
        ("[1, 2]", "[1, 2]"),
        ('"A"', '"A"'),
    ],
)
def test_tool_call_info_has_the_arguments_as_a_dict_when_they_are_a_json_object(
    text: str, arguments: dict[str, Any] | str
) -> None:
    info = ToolCallInfo.from_tool_call(call("book", text, id="c7"))
    assert info == ToolCallInfo(name="book", call_id="c7", arguments=arguments)


def test_an_instruction_with_literal_braces_says_how_to_escape_them() -> None:
    from agentkit import with_session_values
    from agentkit.errors import InstructionFormatError

    agent = ChatModelAgent("a", "d", ScriptedChatModel(["x"]), instruction='Reply as {"ok": true}')
    events = run(agent, with_session_values({"user": "Ada"}))
    err = events[-1].err
    assert isinstance(err, InstructionFormatError)
    assert str(err) == (
        "the instruction could not be formatted with the session values: could not find key: "
        "\"ok\". When a run has session values, the instruction is a str.format template: {name} is replaced "
        "by the session value 'name'. Write literal braces doubled: {{ and }} (for JSON, "
        "'{{\"city\": \"Paris\"}}'). To send the instruction as it is, pass gen_model_input=... "
        "to ChatModelAgent"
    )


def test_recovered_results_survive_an_interrupt_and_resume() -> None:
    @tool
    def approve(amount: int) -> str:
        """Ask a human."""
        interrupt("approve?")
        return "approved"

    model = ScriptedChatModel(
        [calls_message(call("nope", id="c1"), call("approve", {"amount": 5}, id="c2")), "done"]
    )
    agent = ChatModelAgent("a", "d", model, tools=[approve])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    first = run(agent, with_checkpoint_id("k"), runner=runner)
    assert summarize(first[-1])[4] == "interrupt"
    with no_thread_leak():
        point = first[-1].action.interrupted.contexts[0].id  # type: ignore[union-attr]
        resumed = list(runner.resume("k", targets={point: True}))
    assert summarize(resumed[-1])[2:] == ("assistant", "done", None)
    assert [r[:2] for r in tool_results(model.calls[1].messages)] == [
        ("c1", "nope"),
        ("c2", "approve"),
    ]
    assert tool_results(model.calls[1].messages)[0][2].startswith("Error: there is no tool named")


def test_tool_message_helper_is_what_the_model_gets() -> None:
    # The recovered message is an ordinary tool message: role, call id and tool name.
    model = ScriptedChatModel([calls_message(call("nope", id="c1")), "ok"])
    run(ChatModelAgent("a", "d", model, tools=[add]))
    sent = model.calls[1].messages[-1]
    assert sent == tool_message(sent.content, "c1", "nope")


def test_exceed_max_iterations_error_survives_pickling_with_its_details() -> None:
    import pickle

    from agentkit import ExceedMaxIterationsError

    error = ExceedMaxIterationsError(
        max_iterations=4, agent_name="loop", tool_errors=[("Error: no tool", 2)]
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.max_iterations, copy.agent_name) == (str(error), 4, "loop")
    assert copy.tool_errors == ("Error: no tool",)
    assert str(ExceedMaxIterationsError()) == "exceeds max iterations"


def test_a_router_that_keeps_asking_for_a_wrong_agent_name_is_quoted_when_it_gives_up() -> None:
    # Issue 28: a router asked for 'weather' instead of 'Weather' until max_iterations, and the
    # error never said so.
    from agentkit import ExceedMaxIterationsError, Runner, set_sub_agents

    router_model = ScriptedChatModel(
        lambda messages: calls_message(call("transfer_to_agent", {"agent_name": "weather"}))
    )
    router = ChatModelAgent("Router", "routes questions", router_model, max_iterations=4)
    weather = ChatModelAgent("Weather", "knows the weather", ScriptedChatModel(["sunny"]))
    team = set_sub_agents(router, [weather])  # the agent to run
    result = Runner(team).query("weather in Paris?").result(raise_errors=False)
    error = result.error
    assert isinstance(error, ExceedMaxIterationsError)
    assert len(router_model.calls) == 4
    text = str(error)
    assert "there is no agent named 'weather' to transfer to" in text
    assert "the agents you can transfer to are: 'Weather'" in text
    assert "(4 times)" in text
    assert error.tool_errors == (
        "Error: transfer_to_agent: there is no agent named 'weather' to transfer to; the agents "
        "you can transfer to are: 'Weather'. Correct the arguments and call transfer_to_agent "
        "again.",
    )
