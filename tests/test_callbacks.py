"""Callbacks: the order they fire in over whole runs, designation, failing handlers, usage.

A recording handler logs ``(callback, name, type, run path)``; tests assert on the whole log
of runs over sequential, parallel, transfer, supervisor and agent-tool trees.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import attrs
import pytest

from agentkit import (
    AgentInput,
    AgentTool,
    ChatModelAgent,
    Message,
    ParallelAgent,
    ResponseMeta,
    RunInfo,
    Runner,
    SequentialAgent,
    TokenUsage,
    ToolCallInfo,
    UsageTracker,
    assistant_message,
    set_sub_agents,
    tool,
    with_callbacks,
)
from agentkit.callbacks import current_usage
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import supervisor
from agentkit.testing import call, calls_message, no_thread_leak, run_events
from tests.transfer_support import transfer


class Recorder:
    """Logs every callback (thread-safe: parallel branches call it concurrently)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[tuple[Any, ...]] = []

    def add(self, *entry: Any) -> None:
        with self.lock:
            self.log.append(entry)

    def on_agent_start(self, info: RunInfo, input: AgentInput) -> None:
        assert info.component == "Agent"
        self.add("agent>", info.name, info.type, "/".join(info.run_path), len(input.messages))

    def on_agent_end(self, info: RunInfo, error: BaseException | None) -> None:
        self.add("agent<", info.name, type(error).__name__ if error else None)

    def on_model_start(self, info: RunInfo, messages: list[Message]) -> None:
        assert info.component == "ChatModel"
        self.add("model>", info.agent_name, len(messages))

    def on_model_end(
        self, info: RunInfo, message: Message | None, error: BaseException | None
    ) -> None:
        self.add("model<", info.agent_name, message.content if message else type(error).__name__)

    def on_tool_start(self, info: RunInfo, call: ToolCallInfo) -> None:
        assert info.component == "Tool"
        self.add("tool>", info.name, call.call_id, info.agent_name)

    def on_tool_end(
        self,
        info: RunInfo,
        call: ToolCallInfo,
        result: str | None,
        error: BaseException | None,
    ) -> None:
        self.add("tool<", info.name, result if error is None else type(error).__name__)


def run(agent: Any, *handlers: Any, streaming: bool = False, options: Any = ()) -> list[Any]:
    runner = Runner(agent, enable_streaming=streaming)
    return run_events(lambda: runner.query("hi", with_callbacks(*handlers), *options))


def usage(prompt: int, completion: int) -> ResponseMeta:
    return ResponseMeta("stop", TokenUsage(prompt, completion, prompt + completion))


def reply(text: str, prompt: int = 0, completion: int = 0) -> Message:
    return attrs.evolve(assistant_message(text), response_meta=usage(prompt, completion))


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
def test_a_chat_model_agent_reports_agent_model_and_tool_calls_in_order(streaming: bool) -> None:
    recorder = Recorder()
    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 2}, id="c1")), "3"])
    run(ChatModelAgent("calc", "d", model, tools=[add]), recorder, streaming=streaming)
    assert recorder.log == [
        ("agent>", "calc", "ChatModel", "calc", 1),
        ("model>", "calc", 1),
        ("model<", "calc", ""),
        ("tool>", "add", "c1", "calc"),
        ("tool<", "add", "3"),
        ("model>", "calc", 3),
        ("model<", "calc", "3"),
        ("agent<", "calc", None),
    ]


def test_sequential_workflow_reports_the_workflow_around_its_children() -> None:
    recorder = Recorder()
    first = ChatModelAgent("A1", "d", ScriptedChatModel(["a"]))
    second = ChatModelAgent("B1", "d", ScriptedChatModel(["b"]))
    run(SequentialAgent("Seq", "d", [first, second]), recorder)
    assert recorder.log == [
        ("agent>", "Seq", "Sequential", "Seq", 1),
        ("agent>", "A1", "ChatModel", "Seq/A1", 1),
        ("model>", "A1", 1),
        ("model<", "A1", "a"),
        ("agent<", "A1", None),
        ("agent>", "B1", "ChatModel", "Seq/A1/B1", 2),  # the processed input: A1's answer too
        ("model>", "B1", 2),
        ("model<", "B1", "b"),
        ("agent<", "B1", None),
        ("agent<", "Seq", None),
    ]


def test_parallel_workflow_reports_every_branch_between_its_start_and_end() -> None:
    recorder = Recorder()
    barrier = threading.Barrier(3, timeout=30)

    @tool
    def meet() -> str:
        """Wait for the other branches."""
        barrier.wait()
        return "met"

    branches = [
        ChatModelAgent(
            name, "d", ScriptedChatModel([calls_message(call("meet", {}, id=name)), name]),
            tools=[meet],
        )
        for name in ("P1", "P2", "P3")
    ]
    run(ParallelAgent("Par", "d", branches), recorder)
    log = recorder.log
    assert log[0] == ("agent>", "Par", "Parallel", "Par", 1)
    assert log[-1] == ("agent<", "Par", None)
    for name in ("P1", "P2", "P3"):
        mine = [entry for entry in log if name in entry]
        assert mine == [
            ("agent>", name, "ChatModel", f"Par/{name}", 1),
            ("model>", name, 1),
            ("model<", name, ""),
            ("tool>", "meet", name, name),
            ("model>", name, 3),
            ("model<", name, name),
            ("agent<", name, None),
        ]
    assert log.count(("tool<", "meet", "met")) == 3


def test_a_transfer_reports_each_agent_once_in_turn() -> None:
    recorder = Recorder()
    router = ChatModelAgent("Router", "routes", ScriptedChatModel([transfer("Math", "t1")]))
    math = ChatModelAgent("Math", "does math", ScriptedChatModel(["42"]))
    run(set_sub_agents(router, [math]), recorder)
    assert recorder.log == [
        ("agent>", "Router", "ChatModel", "Router", 1),
        ("model>", "Router", 2),
        ("model<", "Router", ""),
        ("tool>", "transfer_to_agent", "t1", "Router"),
        ("tool<", "transfer_to_agent", "successfully transferred to agent [Math]"),
        ("agent<", "Router", None),
        ("agent>", "Math", "ChatModel", "Router/Math", 3),
        ("model>", "Math", 4),
        ("model<", "Math", "42"),
        ("agent<", "Math", None),
    ]


def test_a_supervisor_reports_itself_as_supervisor_and_each_worker_once() -> None:
    recorder = Recorder()
    boss = ChatModelAgent("Boss", "d", ScriptedChatModel([transfer("Worker", "t1"), "done"]))
    worker = ChatModelAgent("Worker", "works", ScriptedChatModel(["worked"]))
    run(supervisor.new(boss, [worker]), recorder)
    starts = [entry[:4] for entry in recorder.log if entry[0] == "agent>"]
    assert starts == [
        ("agent>", "Boss", "Supervisor", "Boss"),
        ("agent>", "Worker", "ChatModel", "Boss/Worker"),
        ("agent>", "Boss", "Supervisor", "Boss/Worker/Boss"),
    ]
    assert [entry for entry in recorder.log if entry[0] == "agent<"] == [
        ("agent<", "Boss", None), ("agent<", "Worker", None), ("agent<", "Boss", None),
    ]


def test_an_agent_used_as_a_tool_is_reported_inside_the_tool_call() -> None:
    recorder = Recorder()
    inner = ChatModelAgent("Helper", "helps", ScriptedChatModel(["helped"]))
    outer = ChatModelAgent(
        "Main",
        "d",
        ScriptedChatModel([calls_message(call("Helper", {"request": "help"}, id="c1")), "ok"]),
        tools=[AgentTool(inner)],
    )
    run(outer, recorder)
    assert recorder.log == [
        ("agent>", "Main", "ChatModel", "Main", 1),
        ("model>", "Main", 1),
        ("model<", "Main", ""),
        ("tool>", "Helper", "c1", "Main"),
        ("agent>", "Helper", "ChatModel", "Helper", 1),
        ("model>", "Helper", 1),
        ("model<", "Helper", "helped"),
        ("agent<", "Helper", None),
        ("tool<", "Helper", "helped"),
        ("model>", "Main", 3),
        ("model<", "Main", "ok"),
        ("agent<", "Main", None),
    ]


def test_designated_callbacks_fire_only_for_the_named_agent() -> None:
    everywhere, only_b = Recorder(), Recorder()
    first = ChatModelAgent("A1", "d", ScriptedChatModel(["a"]))
    second = ChatModelAgent("B1", "d", ScriptedChatModel(["b"]))
    with no_thread_leak():
        list(
            Runner(SequentialAgent("Seq", "d", [first, second])).query(
                "hi", with_callbacks(everywhere), with_callbacks(only_b).designate_agent("B1")
            )
        )
    assert {entry[1] for entry in everywhere.log} == {"Seq", "A1", "B1"}
    assert only_b.log == [
        ("agent>", "B1", "ChatModel", "Seq/A1/B1", 2),
        ("model>", "B1", 2),
        ("model<", "B1", "b"),
        ("agent<", "B1", None),
    ]


def test_a_failing_agent_reports_its_error_at_its_end() -> None:
    recorder = Recorder()
    failing = ChatModelAgent("F", "d", ScriptedChatModel([ConnectionError("model down")]))
    events = run(failing, recorder)
    assert isinstance(events[-1].err, ConnectionError)
    assert recorder.log == [
        ("agent>", "F", "ChatModel", "F", 1),
        ("model>", "F", 1),
        ("model<", "F", "ConnectionError"),
        ("agent<", "F", "ConnectionError"),
    ]


def test_a_raising_handler_is_logged_and_never_breaks_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def on_agent_start(self, info: RunInfo, input: AgentInput) -> None:
            raise ValueError("handler bug")

        def on_model_end(self, info: RunInfo, message: Any, error: Any) -> None:
            raise ValueError("handler bug")

    recorder = Recorder()
    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 2}, id="c1")), "3"])
    with caplog.at_level(logging.ERROR, logger="agentkit"):
        events = run(ChatModelAgent("calc", "d", model, tools=[add]), Broken(), recorder)
    assert [e.err for e in events] == [None, None, None]
    assert len(recorder.log) == 8  # the handler after the broken one still ran every time
    broken = [r for r in caplog.records if "raised in" in r.getMessage()]
    assert [r.getMessage().split(" raised in ")[1] for r in broken] == [
        "on_agent_start; the run goes on",
        "on_model_end; the run goes on",
        "on_model_end; the run goes on",
    ]


def test_an_object_without_callbacks_is_refused() -> None:
    with pytest.raises(TypeError, match="not a callback handler"):
        with_callbacks(object())


# --- usage -----------------------------------------------------------------------------------


def test_usage_is_summed_per_run_and_per_agent() -> None:
    tracker = UsageTracker()
    seen: list[Any] = []

    @tool
    def look() -> str:
        """Read the run's usage so far."""
        ledger = current_usage()
        assert ledger is not None
        seen.append(ledger.total)
        return "ok"

    first = ChatModelAgent(
        "A1",
        "d",
        ScriptedChatModel(
            [
                attrs.evolve(calls_message(call("look", {}, id="c1")), response_meta=usage(10, 2)),
                reply("a", 20, 3),
            ]
        ),
        tools=[look],
    )
    second = ChatModelAgent("B1", "d", ScriptedChatModel([reply("b", 5, 1)]))
    run(SequentialAgent("Seq", "d", [first, second]), tracker)
    run(ChatModelAgent("C1", "d", ScriptedChatModel([reply("c", 1, 1)])), tracker)
    assert seen == [TokenUsage(10, 2, 12)]
    assert tracker.total == TokenUsage(36, 7, 43)
    assert tracker.by_agent == {
        "A1": TokenUsage(30, 5, 35),
        "B1": TokenUsage(5, 1, 6),
        "C1": TokenUsage(1, 1, 2),
    }
    assert tracker.model_calls == 4
    assert set(tracker.model_seconds_by_agent) == {"A1", "B1", "C1"}
    assert tracker.model_seconds == pytest.approx(sum(tracker.model_seconds_by_agent.values()))
    assert current_usage() is None  # outside a run


def test_usage_of_an_agent_used_as_a_tool_counts_in_the_callers_run() -> None:
    totals: list[Any] = []

    class Capture:
        def on_agent_end(self, info: RunInfo, error: BaseException | None) -> None:
            if info.name == "Main":
                ledger = current_usage()
                assert ledger is not None
                totals.append((ledger.total, ledger.by_agent))

    inner = ChatModelAgent("Helper", "helps", ScriptedChatModel([reply("helped", 7, 3)]))
    outer = ChatModelAgent(
        "Main",
        "d",
        ScriptedChatModel(
            [
                attrs.evolve(
                    calls_message(call("Helper", {"request": "x"}, id="c1")),
                    response_meta=usage(1, 1),
                ),
                reply("ok", 2, 2),
            ]
        ),
        tools=[AgentTool(inner)],
    )
    run(outer, Capture())
    assert totals == [
        (
            TokenUsage(10, 6, 16),
            {"Main": TokenUsage(3, 3, 6), "Helper": TokenUsage(7, 3, 10)},
        )
    ]


def test_a_resumed_run_reports_the_agents_it_runs_again() -> None:
    from agentkit import interrupt, with_checkpoint_id
    from agentkit.checkpoint import InMemoryCheckPointStore

    @tool
    def approve() -> str:
        """Ask for approval."""
        return f"approved: {interrupt('ok?')}"

    first = ChatModelAgent("A1", "d", ScriptedChatModel(["a"]))
    second = ChatModelAgent(
        "B1", "d", ScriptedChatModel([calls_message(call("approve", {}, id="c1")), "b"]),
        tools=[approve],
    )
    store = InMemoryCheckPointStore()
    runner = Runner(SequentialAgent("Seq", "d", [first, second]), checkpoint_store=store)
    before, after = Recorder(), Recorder()
    with no_thread_leak():
        stopped = list(runner.query("hi", with_checkpoint_id("cp"), with_callbacks(before)))
        interrupted = stopped[-1].action.interrupted  # type: ignore[union-attr]
        assert interrupted is not None
        targets = {interrupted.contexts[0].id: "yes"}
        events = list(runner.resume("cp", with_callbacks(after), targets=targets))
    assert events[-1].err is None
    # an interrupt ends the tool call with the interrupt signal, and the agents without error
    assert before.log[-3:] == [
        ("tool<", "approve", "InterruptSignal"), ("agent<", "B1", None), ("agent<", "Seq", None),
    ]
    # the resumed run: the workflow and the agent that stopped, with no new input
    assert after.log == [
        ("agent>", "Seq", "Sequential", "Seq", 0),
        ("agent>", "B1", "ChatModel", "Seq/A1/B1", 0),
        ("tool>", "approve", "c1", "B1"),
        ("tool<", "approve", "approved: yes"),
        ("model>", "B1", 4),
        ("model<", "B1", "b"),
        ("agent<", "B1", None),
        ("agent<", "Seq", None),
    ]


def test_a_worker_that_is_a_flow_of_its_own_is_reported_once_per_agent() -> None:
    recorder = Recorder()
    boss = ChatModelAgent("Boss", "d", ScriptedChatModel([transfer("Team", "t1"), "done"]))
    lead = ChatModelAgent("Team", "a team", ScriptedChatModel([transfer("Member", "t2")]))
    member = ChatModelAgent("Member", "works", ScriptedChatModel(["worked"]))
    team = set_sub_agents(lead, [member])
    events = run(supervisor.new(boss, [team]), recorder)
    assert events[-1].err is None
    starts = [entry[1:4] for entry in recorder.log if entry[0] == "agent>"]
    assert starts == [
        ("Boss", "Supervisor", "Boss"),
        ("Team", "ChatModel", "Boss/Team"),
        ("Member", "ChatModel", "Boss/Team/Member"),
        ("Boss", "Supervisor", "Boss/Team/Boss"),  # the hosted flow reports back as Team
    ]
    ends = [entry[1] for entry in recorder.log if entry[0] == "agent<"]
    assert ends == ["Boss", "Team", "Member", "Boss"]
