"""Steering a running run: ``RunIterator.send`` adds a user message before the next model call.

Real threads: the run goes on in its worker while the test's thread sends; tools and models
block on events the test sets, so every ordering below is forced, never a matter of timing.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    AgentInput,
    AgentTool,
    ChatModelAgent,
    CheckpointBusyError,
    Message,
    ParallelAgent,
    Role,
    Runner,
    assistant_message,
    interrupt,
    set_sub_agents,
    tool,
    user_message,
    with_checkpoint_id,
)
from agentkit._options import steer_through
from agentkit._steering import Steering
from agentkit.checkpoint import FileCheckPointStore, InMemoryCheckPointStore
from agentkit.errors import AgentKitRuntimeError, AgentKitTypeError, AgentKitValueError
from agentkit.integrations.runs import LocalRuns, RunNotFoundError, RunOwnerError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak
from tests.durable_support import copy_of
from tests.steering_support import LEASE_TTL, clerk

GUARD = 30.0  # a failure guard for waits, never a pace


def _texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(message.role.value, message.content) for message in messages]


class Gate:
    """A tool that says it started, then waits until the test lets it finish."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def tool(self) -> Any:
        gate = self

        @tool
        def lookup(month: str) -> str:
            """Look up a month's invoices."""
            gate.started.set()
            assert gate.release.wait(GUARD)
            return f"{month}: 3 invoices"

        return lookup


def test_sent_message_joins_after_the_tool_result_before_the_next_model_call() -> None:
    gate = Gate()
    model = ScriptedChatModel(
        [calls_message(call("lookup", {"month": "February"}, id="c1")), "done"]
    )
    runner = Runner(ChatModelAgent("clerk", "d", model, tools=[gate.tool()]))
    with no_thread_leak():
        run = runner.query("check February")
        assert gate.started.wait(GUARD)
        assert run.send("also check March") is True
        gate.release.set()
        result = run.result()
    assert _texts(model.calls[1].messages) == [
        ("user", "check February"),
        ("assistant", ""),
        ("tool", "February: 3 invoices"),
        ("user", "also check March"),
    ]
    assert result.unused_messages == ()
    sent = [e for e in result.events if e.output is not None
            and e.output.message_output is not None and e.output.message_output.role is Role.USER]
    assert len(sent) == 1  # the acknowledgement: the message, as an event of the agent using it
    assert sent[0].agent_name == "clerk"
    assert sent[0].output is not None
    assert sent[0].output.message_output is not None
    assert sent[0].output.message_output.get_message().content == "also check March"
    assert "agentkit.steering" not in result.session_values


def test_messages_sent_from_several_threads_all_arrive_in_one_call() -> None:
    gate = Gate()
    model = ScriptedChatModel([calls_message(call("lookup", {"month": "May"})), "done"])
    runner = Runner(ChatModelAgent("clerk", "d", model, tools=[gate.tool()]))
    run = runner.query("go")
    assert gate.started.wait(GUARD)
    barrier = threading.Barrier(8)
    answers: list[bool] = []

    def sender(index: int) -> None:
        barrier.wait(GUARD)
        answers.append(run.send(f"note {index}"))

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD)
    gate.release.set()
    run.result()
    assert answers == [True] * 8
    sent = [m.content for m in model.calls[1].messages if m.role is Role.USER][1:]
    assert sorted(sent) == sorted(f"note {i}" for i in range(8))
    assert model.calls[1].messages[2].role is Role.TOOL  # after the result, not inside the pair


def test_send_after_the_run_ended_returns_false() -> None:
    run = Runner(ChatModelAgent("a", "d", ScriptedChatModel(["hi"]))).query("x")
    run.result()
    assert run.send("too late") is False


def test_message_sent_during_the_last_model_call_is_reported_unused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    asked = threading.Event()
    answer = threading.Event()

    def reply(messages: list[Message]) -> Message:
        asked.set()
        assert answer.wait(GUARD)
        return assistant_message("final")

    run = Runner(ChatModelAgent("a", "d", ScriptedChatModel(reply))).query("x")
    assert asked.wait(GUARD)
    assert run.send("one more thing") is True
    answer.set()
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        result = run.result()
    assert result.text == "final"
    assert [m.content for m in result.unused_messages] == ["one more thing"]
    assert "ended before it used 1 message" in caplog.text
    assert run.send("after") is False


def test_send_refuses_bad_messages_and_a_full_queue() -> None:
    gate = Gate()
    model = ScriptedChatModel([calls_message(call("lookup", {"month": "May"})), "done"])
    run = Runner(ChatModelAgent("a", "d", model, tools=[gate.tool()])).query("x")
    try:
        assert gate.started.wait(GUARD)
        with pytest.raises(AgentKitValueError, match="at most 100000"):
            run.send("x" * 100_001)
        with pytest.raises(AgentKitValueError, match="empty"):
            run.send("")
        with pytest.raises(AgentKitValueError, match="user message"):
            run.send(assistant_message("I am the model"))
        with pytest.raises(AgentKitTypeError, match="str or a user Message"):
            run.send(42)  # type: ignore[arg-type]
        for index in range(32):
            assert run.send(user_message(f"m{index}")) is True
        with pytest.raises(AgentKitRuntimeError, match="32 messages wait"):
            run.send("one too many")
    finally:
        gate.release.set()
        run.result()
    assert len([m for m in model.calls[1].messages if m.role is Role.USER]) == 33


def test_an_agent_used_as_a_tool_takes_the_message_while_it_runs() -> None:
    gate = Gate()
    inner_model = ScriptedChatModel(
        [calls_message(call("lookup", {"month": "June"})), "inner done"]
    )
    inner = ChatModelAgent("researcher", "researches", inner_model, tools=[gate.tool()])
    outer_model = ScriptedChatModel([calls_message(call("researcher", {"request": "June"})),
                                     "outer done"])
    outer = ChatModelAgent("lead", "d", outer_model, tools=[AgentTool(inner)])
    run = Runner(outer).query("go")
    assert gate.started.wait(GUARD)
    assert run.send("and July") is True
    gate.release.set()
    result = run.result()
    assert ("user", "and July") in _texts(inner_model.calls[1].messages)
    assert ("user", "and July") not in _texts(outer_model.calls[1].messages)
    assert result.unused_messages == ()


def test_iterator_of_a_run_without_a_runner_takes_no_messages() -> None:
    agent = ChatModelAgent("a", "d", ScriptedChatModel(["hi"]))
    events = agent.run(AgentInput(messages=[user_message("x")]))
    with pytest.raises(AgentKitRuntimeError, match="takes no messages"):
        events.send("x")
    list(events)


def test_message_sent_before_an_interrupt_reaches_the_resumed_run() -> None:
    asked = threading.Event()
    go_on = threading.Event()

    @tool
    def approve() -> str:
        """Asks a human."""
        asked.set()
        assert go_on.wait(GUARD)
        return str(interrupt("ok?"))

    model = ScriptedChatModel([calls_message(call("approve")), "done"])
    store = InMemoryCheckPointStore()
    runner = Runner(ChatModelAgent("a", "d", model, tools=[approve]), checkpoint_store=store,
                    durability="stop")
    run = runner.query("x", with_checkpoint_id("steer-1"))
    assert asked.wait(GUARD)
    assert run.send("use EUR") is True
    go_on.set()
    first = run.result()
    assert first.interrupted
    assert [m.content for m in first.unused_messages] == ["use EUR"]  # kept in the checkpoint
    ids = [context.id for context in first.interrupt.contexts]  # type: ignore[union-attr]
    resumed = runner.resume("steer-1", targets={ids[0]: "yes"}).result()
    assert resumed.text == "done"
    assert _texts(model.calls[1].messages)[-2:] == [("tool", "yes"), ("user", "use EUR")]


def test_durable_run_has_the_message_in_the_store_when_send_returns() -> None:
    gate = Gate()

    def reply(messages: list[Message]) -> Message:
        if messages[-1].role is Role.USER and messages[-1].content == "check February":
            return calls_message(call("lookup", {"month": "February"}, id="c1"))
        return assistant_message("saw: " + " | ".join(m.content for m in messages))

    store = InMemoryCheckPointStore()
    agent = ChatModelAgent("clerk", "d", ScriptedChatModel(reply), tools=[gate.tool()])
    run = Runner(agent, checkpoint_store=store).query("check February",
                                                      with_checkpoint_id("steer-d"))
    assert gate.started.wait(GUARD)
    assert run.send("also check March") is True
    left = copy_of(store, "steer-d")  # all a process killed now leaves behind
    gate.release.set()
    run.result()

    # The "crashed" run, resumed from what the store held: the tool runs again, and the
    # message sent before the crash reaches the model after it.
    gate.release.set()
    resumed = Runner(agent, checkpoint_store=left).resume("steer-d").result()
    assert resumed.text.endswith("February: 3 invoices | also check March")


# --- LocalRuns.send: across threads, owner-checked ------------------------------------------


def test_local_runs_send_reaches_the_owners_running_run_only() -> None:
    gate = Gate()
    model = ScriptedChatModel(
        [calls_message(call("lookup", {"month": "February"}, id="c1")), "done"]
    )
    agent = ChatModelAgent("clerk", "d", model, tools=[gate.tool()])
    with LocalRuns({"clerk": Runner(agent, checkpoint_store=InMemoryCheckPointStore())}) as runs:
        run_id = runs.submit("clerk", "check February", owner="ann")
        assert gate.started.wait(GUARD)
        with pytest.raises(RunOwnerError):
            runs.send(run_id, "from bob", owner="bob")
        with pytest.raises(RunNotFoundError, match="no run with id 'nope'"):
            runs.send("nope", "x", owner="ann")
        assert runs.send(run_id, "also check March", owner="ann") is True
        gate.release.set()
        entries = list(runs.events(run_id, owner="ann"))
        assert entries[-1].data["status"] == "completed"
        assert runs.send(run_id, "too late", owner="ann") is False
    assert _texts(model.calls[1].messages)[-2:] == [
        ("tool", "February: 3 invoices"), ("user", "also check March")
    ]
    used = [entry.data["output"]["message"]["content"] for entry in entries
            if entry.kind == "agent" and entry.data.get("output", {}).get("message", {})
            .get("role") == "user"]
    assert used == ["also check March"]


def test_a_message_sent_before_the_run_started_is_used_by_its_first_model_call() -> None:
    # A run backend's run that is queued: its inbox exists before the Runner starts it.
    steering = Steering()
    assert steering.send("early note") is True
    model = ScriptedChatModel(["done"])
    Runner(ChatModelAgent("a", "d", model)).query("hello", steer_through(steering)).result()
    assert _texts(model.calls[0].messages) == [("user", "hello"), ("user", "early note")]


# --- kill -9 -----------------------------------------------------------------------------------


def test_a_message_send_accepted_survives_a_sigkill_of_the_durable_run(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.steering_crash_child", str(tmp_path), "killed-run"],
        cwd=Path(__file__).parent.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # blocks until the child said so (or died)
        assert line.strip() == "sent", child.stderr.read() if child.stderr else ""
    finally:
        child.kill()  # SIGKILL: nothing of the child runs after send returned
        child.wait(GUARD)
    started, release = threading.Event(), threading.Event()
    release.set()
    runner = Runner(clerk(started, release), checkpoint_store=FileCheckPointStore(tmp_path),
                    lease_ttl=LEASE_TTL)
    deadline = time.monotonic() + GUARD
    while True:
        try:
            result = runner.resume("killed-run").result()
            break
        except CheckpointBusyError:  # the dead run's lease has not expired yet
            assert time.monotonic() < deadline
            threading.Event().wait(0.1)
    assert result.text == "saw: check February |  | February: 3 invoices | also check March"


def test_a_message_one_agent_took_is_the_users_words_for_the_agent_it_transfers_to() -> None:
    gate = Gate()
    parent_model = ScriptedChatModel([
        calls_message(call("lookup", {"month": "May"})),
        calls_message(call("transfer_to_agent", {"agent_name": "child"})),
    ])
    child_model = ScriptedChatModel(["child done"])
    parent = ChatModelAgent("parent", "p", parent_model, tools=[gate.tool()])
    child = ChatModelAgent("child", "c", child_model)
    run = Runner(set_sub_agents(parent, [child])).query("go")
    assert gate.started.wait(GUARD)
    assert run.send("use EUR") is True
    gate.release.set()
    assert run.result().text == "child done"
    assert ("user", "use EUR") in _texts(child_model.calls[0].messages)


def test_in_a_parallel_agent_the_branch_that_calls_its_model_first_takes_the_message() -> None:
    first, second = Gate(), Gate()
    answered = threading.Event()

    def branch(name: str, gate: Gate, then: threading.Event | None) -> ChatModelAgent:
        def reply(messages: list[Message]) -> Message:
            if len(messages) == 1:
                return calls_message(call("lookup", {"month": name}))
            if then is not None:
                then.set()
            return assistant_message(" | ".join(m.content for m in messages))

        return ChatModelAgent(name, "d", ScriptedChatModel(reply), tools=[gate.tool()])

    both = ParallelAgent("both", "d", [branch("June", first, answered),
                                       branch("July", second, None)])
    run = Runner(both).query("go")
    assert first.started.wait(GUARD) and second.started.wait(GUARD)
    assert run.send("use EUR") is True
    first.release.set()
    assert answered.wait(GUARD)  # June's branch made its next model call
    second.release.set()
    result = run.result()
    texts = sorted(e.output.message_output.get_message().content for e in result.events
                   if e.output is not None and e.output.message_output is not None
                   and e.output.message_output.role is Role.ASSISTANT
                   and not e.output.message_output.get_message().tool_calls)
    assert texts == ["go |  | July: 3 invoices", "go |  | June: 3 invoices | use EUR"]


def test_a_durable_run_resumed_after_it_took_the_message_sees_it_once() -> None:
    first, second = Gate(), Gate()

    @tool
    def file_report(month: str) -> str:
        """File a month's report."""
        second.started.set()
        assert second.release.wait(GUARD)
        return f"{month} filed"

    def reply(messages: list[Message]) -> Message:
        tools = [m for m in messages if m.role is Role.TOOL]
        if not tools:
            return calls_message(call("lookup", {"month": "March"}, id="c1"))
        if len(tools) == 1:
            return calls_message(call("file_report", {"month": "March"}, id="c2"))
        return assistant_message(" | ".join(m.content for m in messages if m.role is Role.USER))

    store = InMemoryCheckPointStore()
    agent = ChatModelAgent("clerk", "d", ScriptedChatModel(reply),
                           tools=[first.tool(), file_report])
    run = Runner(agent, checkpoint_store=store).query("go", with_checkpoint_id("steer-once"))
    assert first.started.wait(GUARD)
    assert run.send("in EUR") is True
    first.release.set()
    assert second.started.wait(GUARD)  # the message was taken, and the step after it saved
    left = copy_of(store, "steer-once")
    second.release.set()
    assert run.result().text == "go | in EUR"
    resumed = Runner(agent, checkpoint_store=left).resume("steer-once").result()
    assert resumed.text == "go | in EUR"  # once: from the saved conversation, not again
