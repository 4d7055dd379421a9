"""The agent protocol: a custom ``BaseAgent`` subclass runs like a built-in agent.

A subclass implements ``execute(run)`` and pushes its events with ``run.emit``. These tests
hold it to what the built-in agents do: no thread of its own under ``Runner.invoke``, transfer
to and from it, interrupt and resume, cancel, options parsed once, workflows.
"""

from __future__ import annotations

import threading
from typing import Any

import attrs
import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentRun,
    BaseAgent,
    CancelHandle,
    ChatModelAgent,
    Role,
    Runner,
    SequentialAgent,
    assistant_message,
    cancellable_sleep,
    event_from_message,
    gen_transfer_messages,
    get_impl_specific_options,
    get_session_value,
    interrupt_event,
    new_transfer_to_agent_action,
    set_sub_agents,
    with_cancel,
    with_checkpoint_id,
    with_session_values,
    wrap_impl_specific_opt_fn,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import no_thread_leak, summarize

GUARD = 30.0  # a failure guard for waits, never a pace


def said(text: str) -> AgentEvent:
    return event_from_message(assistant_message(text), None, Role.ASSISTANT)


class Echo(BaseAgent):
    """Answers with the last message, and the thread it ran in."""

    name = "Echo"
    description = "repeats the last message"

    def __init__(self) -> None:
        self.threads: list[int] = []

    def execute(self, run: AgentRun) -> None:
        self.threads.append(threading.get_ident())
        run.emit(said(f"echo: {run.input.messages[-1].content}"))


class Router(BaseAgent):
    """Hands every conversation to ``dest`` with the transfer messages a model would make."""

    name = "Router"
    description = "routes"

    def __init__(self, dest: str) -> None:
        self.dest = dest

    def execute(self, run: AgentRun) -> None:
        call, result = gen_transfer_messages(self.dest)
        run.emit(event_from_message(call, None, Role.ASSISTANT))
        tool_event = event_from_message(result, None, Role.TOOL, result.tool_name)
        run.emit(attrs.evolve(tool_event, action=new_transfer_to_agent_action(self.dest)))


class Asker(BaseAgent):
    """Asks a human, then answers with the reply (an interrupt point of its own)."""

    name = "Asker"
    description = "asks a human"

    def execute(self, run: AgentRun) -> None:
        info = run.resume_info
        if info is None:
            run.emit(interrupt_event("what is your name?", state={"asked": 1}))
            return
        run.emit(said(f"hello {info.resume_data} ({info.interrupt_state})"))


def test_a_custom_agent_runs_in_the_calling_thread_under_invoke(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []
    original = threading.Thread.start

    def counting(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", counting)
    echo = Echo()
    result = Runner(echo).invoke("hi")
    assert result.text == "echo: hi"
    assert started == []  # no thread at all: not the run's, not the agent's
    assert echo.threads == [threading.get_ident()]
    assert [summarize(event) for event in result.events] == [
        ("Echo", ["Echo"], "assistant", "echo: hi", None)
    ]


def test_a_custom_agent_transfers_to_a_built_in_one() -> None:
    kid_model = ScriptedChatModel(["the kid answers"])
    flow = set_sub_agents(Router("Kid"), [ChatModelAgent("Kid", "a kid", kid_model)])
    with no_thread_leak():
        result = Runner(flow).invoke("hi")
    assert [summarize(e)[:3] for e in result.events] == [
        ("Router", ["Router"], "assistant"),
        ("Router", ["Router"], "tool/transfer_to_agent"),
        ("Kid", ["Router", "Kid"], "assistant"),
    ]
    assert result.text == "the kid answers"
    # the kid saw the router's turn in its history, as with a model that transferred
    assert [m.content[:40] for m in kid_model.calls[0].messages[-2:]] == [
        "For context: [Router] called tool: `tran",
        "For context: [Router] `transfer_to_agent",
    ]


def test_a_built_in_agent_transfers_to_a_custom_one() -> None:
    mom_model = ScriptedChatModel(
        [assistant_message("", [_transfer_call("Echo")])]
    )
    flow = set_sub_agents(ChatModelAgent("Mom", "mother", mom_model), [Echo()])
    result = Runner(flow).invoke("hi")
    assert summarize(result.events[-1]) == ("Echo", ["Mom", "Echo"], "assistant", result.text, None)
    assert result.text.startswith("echo: For context: [Mom]")


def _transfer_call(dest: str) -> Any:
    from agentkit.testing import call

    return call("transfer_to_agent", {"agent_name": dest}, id="t1")


@pytest.mark.parametrize("nested", [False, True])
def test_a_custom_agent_interrupts_and_is_resumed_with_its_state_and_data(nested: bool) -> None:
    agent: Any = Asker()
    if nested:
        agent = SequentialAgent("S", "d", [Echo(), agent])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    with no_thread_leak():
        first = runner.invoke("hi", with_checkpoint_id("ask"))
        assert first.interrupt is not None
        [point] = first.interrupt.contexts
        assert point.info == "what is your name?"
        assert point.address[-1] == "agent:Asker"
        resumed = runner.resume("ask", targets={point.id: "Ada"}).result()
    assert resumed.text == "hello Ada ({'asked': 1})"
    expected_path = ["S", "Echo", "Asker"] if nested else ["Asker"]
    assert summarize(resumed.events[-1])[:2] == ("Asker", expected_path)


def test_a_custom_agent_is_cancelled_at_its_own_checks() -> None:
    started = threading.Event()
    handle = CancelHandle()

    class Waiter(BaseAgent):
        name = "Waiter"
        description = "waits"

        def execute(self, run: AgentRun) -> None:
            run.emit(said("waiting"))
            started.set()
            while True:
                cancellable_sleep(0.05)
                run.check_cancelled()

    with no_thread_leak():
        events = Runner(Waiter()).query("hi", with_cancel(handle))
        assert started.wait(GUARD)
        handle.cancel()
        assert handle.wait(GUARD) is True
        got = list(events)
    assert [summarize(e)[2] for e in got] == ["assistant", "error"]
    assert isinstance(got[-1].err, AgentCancelledError)


@attrs.define
class Loud:
    volume: int = 1


def test_a_custom_agent_reads_its_options_and_the_session() -> None:
    seen: list[Any] = []

    class Reader(BaseAgent):
        name = "Reader"
        description = "reads its options"

        def execute(self, run: AgentRun) -> None:
            seen.append(get_impl_specific_options(Loud(), *run.options))
            seen.append(run.options.custom(Loud()))
            seen.append(get_session_value("who"))
            run.emit(said("read"))

    louder = wrap_impl_specific_opt_fn(Loud, lambda o: setattr(o, "volume", 11))
    other = wrap_impl_specific_opt_fn(Loud, lambda o: setattr(o, "volume", 99)).designate_agent("Someone")
    Runner(Reader()).invoke("hi", louder, other, with_session_values({"who": "me"}))
    assert seen == [Loud(11), Loud(11), "me"]


def test_an_exception_in_execute_ends_the_turn_with_an_error_event() -> None:
    class Broken(BaseAgent):
        name = "Broken"
        description = "fails"

        def execute(self, run: AgentRun) -> None:
            run.emit(said("about to fail"))
            raise ValueError("broken on purpose")

    result = Runner(Broken()).run([]).result(raise_errors=False)
    assert [summarize(e)[2:] for e in result.events] == [
        ("assistant", "about to fail", None),
        ("error", "broken on purpose", None),
    ]
    assert isinstance(result.error, ValueError)


def test_run_called_directly_returns_an_iterator_of_unnamed_events() -> None:
    with no_thread_leak():
        events = list(Echo().run(_input("hey")))
    assert [summarize(e) for e in events] == [("", [], "assistant", "echo: hey", None)]


def _input(text: str) -> Any:
    from agentkit import AgentInput, user_message

    return AgentInput([user_message(text)])
