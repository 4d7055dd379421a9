"""``AgentMiddleware.after_agent`` and the events ``on_agent_end`` handlers may take.

``after_agent`` runs once when a ChatModelAgent's run ends well (not on an error, a cancel or
an interrupt: then when the resumed run ends), innermost middleware first, with the run's
conversation; what it writes into the session the next agents see. An ``on_agent_end`` with a
third parameter gets the events of the agent's turn; the classic form gets none, and then no
agent keeps a copy of its events.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentkit import (
    AgentContext,
    AgentEvent,
    AgentInput,
    AgentMiddleware,
    ChatModelAgent,
    Message,
    RunInfo,
    Runner,
    SequentialAgent,
    add_session_values,
    get_session_value,
    interrupt,
    tool,
    with_callbacks,
    with_checkpoint_id,
)
from agentkit._observe import CallbackSet
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, run_events, summarize

BOTH_MODES = pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Ending(AgentMiddleware):
    """Records each after_agent call: its name, the context's agent and the conversation."""

    def __init__(self, name: str, log: list[Any]) -> None:
        self.name = name
        self.log = log

    def after_agent(self, context: AgentContext, messages: list[Message]) -> None:
        self.log.append(
            (self.name, context.agent_name, context.resumed,
             [(m.role.value, m.content) for m in messages])
        )


@BOTH_MODES
def test_after_agent_runs_once_innermost_first_with_the_whole_conversation(
    streaming: bool,
) -> None:
    log: list[Any] = []
    model = ScriptedChatModel([calls_message(call("add", {"a": 2, "b": 3}, id="c1")), "5"])
    agent = ChatModelAgent(
        "calc", "adds", model, instruction="You add.", tools=[add],
        middlewares=[Ending("outer", log), Ending("inner", log)],
    )
    events = run_events(lambda: Runner(agent, enable_streaming=streaming).query("2+3?"))
    assert summarize(events[-1])[3] == "5"
    conversation = [("user", "2+3?"), ("assistant", ""), ("tool", "5"), ("assistant", "5")]
    assert log == [
        ("inner", "calc", False, conversation),
        ("outer", "calc", False, conversation),
    ]


def test_after_agent_sees_the_answer_of_an_agent_without_tools() -> None:
    log: list[Any] = []
    agent = ChatModelAgent(
        "a", "d", ScriptedChatModel(["hello"]), instruction="Be brief.",
        middlewares=[Ending("m", log)],
    )
    run_events(lambda: Runner(agent).query("hi"))
    assert log == [("m", "a", False, [("user", "hi"), ("assistant", "hello")])]


def test_session_values_written_after_an_agent_reach_the_next_agent() -> None:
    class Note(AgentMiddleware):
        def after_agent(self, context: AgentContext, messages: list[Message]) -> None:
            add_session_values({"summary": f"{context.agent_name} said {messages[-1].content}"})

    seen: list[Any] = []

    @tool
    def read_summary() -> str:
        """Read the summary."""
        seen.append(get_session_value("summary"))
        return "read"

    first = ChatModelAgent("first", "d", ScriptedChatModel(["blue"]), middlewares=[Note()])
    second = ChatModelAgent(
        "second", "d",
        ScriptedChatModel([calls_message(call("read_summary", {})), "ok"]),
        tools=[read_summary],
    )
    flow = SequentialAgent("seq", "d", [first, second])
    events = run_events(lambda: Runner(flow).query("colour?"))
    assert summarize(events[-1])[3] == "ok"
    assert seen == ["first said blue"]


def test_after_agent_is_not_called_when_the_run_fails() -> None:
    log: list[Any] = []
    model = ScriptedChatModel([RuntimeError("model down")])
    agent = ChatModelAgent("a", "d", model, middlewares=[Ending("m", log)])
    events = run_events(lambda: Runner(agent).query("hi"))
    assert isinstance(events[-1].err, RuntimeError)
    assert log == []


def test_after_agent_waits_for_the_resumed_run_to_end() -> None:
    @tool
    def approve() -> str:
        """Ask for approval."""
        return f"approved: {interrupt('ok?')}"

    log: list[Any] = []
    model = ScriptedChatModel([calls_message(call("approve", {}, id="c1")), "done"])
    agent = ChatModelAgent("a", "d", model, tools=[approve], middlewares=[Ending("m", log)])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    with no_thread_leak():
        stopped = list(runner.query("hi", with_checkpoint_id("cp")))
        interrupted = stopped[-1].action.interrupted  # type: ignore[union-attr]
        assert interrupted is not None
        assert log == []  # an interrupt is no end
        list(runner.resume("cp", targets={interrupted.contexts[0].id: "yes"}))
    assert log == [
        ("m", "a", True,
         [("user", "hi"), ("assistant", ""), ("tool", "approved: yes"), ("assistant", "done")]),
    ]


def test_an_after_agent_that_raises_ends_the_run_with_its_error() -> None:
    class Broken(AgentMiddleware):
        def after_agent(self, context: AgentContext, messages: list[Message]) -> None:
            raise LookupError("memory store unreachable")

    agent = ChatModelAgent("a", "d", ScriptedChatModel(["hello"]), middlewares=[Broken()])
    events = run_events(lambda: Runner(agent).query("hi"))
    assert isinstance(events[-1].err, LookupError)


class EventTaker:
    """An on_agent_end in its three-parameter form: keeps the events it is given."""

    def __init__(self) -> None:
        self.ends: list[tuple[str, BaseException | None, tuple[AgentEvent, ...]]] = []

    def on_agent_end(
        self, info: RunInfo, error: BaseException | None, events: tuple[AgentEvent, ...]
    ) -> None:
        self.ends.append((info.name, error, events))


class ClassicEnd:
    def __init__(self) -> None:
        self.ends: list[tuple[str, BaseException | None]] = []

    def on_agent_start(self, info: RunInfo, input: AgentInput) -> None:
        pass

    def on_agent_end(self, info: RunInfo, error: BaseException | None) -> None:
        self.ends.append((info.name, error))


@BOTH_MODES
def test_on_agent_end_with_three_parameters_gets_the_turns_events(streaming: bool) -> None:
    taker, classic = EventTaker(), ClassicEnd()
    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 1}, id="c1")), "2"])
    agent = ChatModelAgent("calc", "adds", model, tools=[add])
    events = run_events(
        lambda: Runner(agent, enable_streaming=streaming).query(
            "1+1?", with_callbacks(taker, classic)
        )
    )
    assert classic.ends == [("calc", None)]
    [(name, error, given)] = taker.ends
    assert (name, error) == ("calc", None)
    assert list(given) == events  # the same events, in order
    assert given[-1].get_message().content == "2"  # type: ignore[union-attr]


def test_each_agent_of_a_workflow_gets_its_own_turns_events() -> None:
    taker = EventTaker()
    first = ChatModelAgent("first", "d", ScriptedChatModel(["one"]))
    second = ChatModelAgent("second", "d", ScriptedChatModel(["two"]))
    run_events(lambda: Runner(SequentialAgent("seq", "d", [first, second])).query(
        "go", with_callbacks(taker)))
    by_agent = {name: [summarize(e)[3] for e in given] for name, _, given in taker.ends}
    assert by_agent == {"first": ["one"], "second": ["two"], "seq": ["one", "two"]}


def test_a_failing_turn_gives_its_error_and_its_events() -> None:
    taker = EventTaker()
    agent = ChatModelAgent("a", "d", ScriptedChatModel([RuntimeError("down")]))
    events = run_events(lambda: Runner(agent).query("hi", with_callbacks(taker)))
    [(_, error, given)] = taker.ends
    assert isinstance(error, RuntimeError)
    assert list(given) == events


def test_only_handlers_that_take_events_make_agents_keep_them() -> None:
    taker, classic = EventTaker(), ClassicEnd()
    assert not CallbackSet([(classic, ())]).wants_events("a")
    assert CallbackSet([(taker, ())]).wants_events("a")
    designated = CallbackSet([(taker, ("b",)), (classic, ())])
    assert not designated.wants_events("a")
    assert designated.wants_events("b")
