"""Run-local values across a stop: Eino keeps them in the ChatModelAgent's state
(``State.Extra``), so a resumed run sees what the stopped one set, and deleted ones stay
deleted (``SetRunLocalValue`` / ``GetRunLocalValue`` / ``DeleteRunLocalValue``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agentkit import (
    AgentMiddleware,
    ChatModelAgent,
    ModelState,
    Role,
    Runner,
    delete_run_local_value,
    get_run_local_value,
    interrupt,
    set_run_local_value,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore, PickleSerializer
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak
from tests.durable_support import Crash, copy_of

SERIALIZER = PickleSerializer(b"run-local values tests key of 32")


class CountModelCalls(AgentMiddleware):
    """Counts the run's model calls in a run-local value; drops ``scratch`` at the second."""

    def before_model(self, state: ModelState) -> None:
        calls = get_run_local_value("model_calls", 0) + 1
        set_run_local_value("model_calls", calls)
        if calls == 1:
            set_run_local_value("scratch", "first call only")
        else:
            delete_run_local_value("scratch")


@tool
def peek() -> str:
    """Read the run-local values."""
    return f"{get_run_local_value('model_calls')}/{get_run_local_value('scratch', '-')}"


def test_delete_run_local_value_forgets_the_value() -> None:
    model = ScriptedChatModel([
        calls_message(call("peek", {}, id="c1")),
        calls_message(call("peek", {}, id="c2")),
        "done",
    ])
    agent = ChatModelAgent("a", "d", model, tools=[peek], middlewares=[CountModelCalls()])
    with no_thread_leak():
        Runner(agent).invoke("hi")
    results = [m.content for m in model.calls[-1].messages if m.role is Role.TOOL]
    assert results == ["1/first call only", "2/-"]


def test_delete_run_local_value_needs_an_agent_run() -> None:
    with pytest.raises(RuntimeError, match="delete_run_local_value.*within a ChatModelAgent run"):
        delete_run_local_value("k")


def test_a_resumed_run_sees_the_run_local_values_of_the_interrupted_one() -> None:
    @tool
    def approve() -> str:
        """Ask for approval, then read the run-local values."""
        answer = interrupt("ok?")
        return f"{answer}: {get_run_local_value('model_calls')}/{get_run_local_value('scratch')}"

    model = ScriptedChatModel([calls_message(call("approve", {}, id="c1")), "done"])
    agent = ChatModelAgent("a", "d", model, tools=[approve], middlewares=[CountModelCalls()])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore(), serializer=SERIALIZER)
    with no_thread_leak():
        stopped = list(runner.query("hi", with_checkpoint_id("cp")))
        interrupted = stopped[-1].action.interrupted  # type: ignore[union-attr]
        assert interrupted is not None
        # the resuming process has none of the stopped run's objects: only the checkpoint
        runner = Runner(agent, checkpoint_store=runner.checkpoint_store, serializer=SERIALIZER)
        result = runner.resume("cp", targets={interrupted.contexts[0].id: "yes"}).result()
    assert result.text == "done"
    results = [m.content for m in model.calls[-1].messages if m.role is Role.TOOL]
    assert results == ["yes: 1/first call only"]


def test_a_durable_runs_step_records_carry_its_run_local_values() -> None:
    # The process dies in the second tool call: what the store holds then is the durable
    # image and its step records (no stop's save), and the recovered run counts on from them.
    store = InMemoryCheckPointStore()
    left: list[InMemoryCheckPointStore] = []
    crashed = threading.Event()

    @tool
    def work(n: int) -> str:
        """Work, reading the run-local values; the second call kills the process once."""
        if n == 2 and not crashed.is_set():
            crashed.set()
            left.append(copy_of(store, "d"))
            raise Crash("killed")
        return f"{n}: {get_run_local_value('model_calls')}/{get_run_local_value('scratch', '-')}"

    def reply(messages: list[Any]) -> Any:
        done = sum(1 for message in messages if message.role is Role.TOOL)
        return calls_message(call("work", {"n": done + 1}, id=f"c{done}")) if done < 2 else "ok"

    model = ScriptedChatModel(reply)
    agent = ChatModelAgent("a", "d", model, tools=[work], middlewares=[CountModelCalls()])
    with pytest.raises(Crash):
        Runner(agent, checkpoint_store=store, serializer=SERIALIZER).invoke(
            "go", with_checkpoint_id("d", save_input=False)
        )
    recovered = Runner(agent, checkpoint_store=left[0], serializer=SERIALIZER)
    with no_thread_leak():
        result = recovered.resume("d").result()
    assert result.text == "ok"
    results = [m.content for m in model.calls[-1].messages if m.role is Role.TOOL]
    # the second call ran again after the recovery, with the values its step wrote (two
    # model calls, the scratch value deleted): the first run never reached the second result
    assert results == ["1: 1/first call only", "2: 2/-"]
    assert len(model.calls) == 3


def test_a_run_local_value_a_checkpoint_cannot_hold_is_named_when_the_save_fails() -> None:
    class Remember(AgentMiddleware):
        def before_model(self, state: ModelState) -> None:
            set_run_local_value("lock", threading.Lock())

    @tool
    def approve() -> str:
        """Ask for approval."""
        return str(interrupt("ok?"))

    model = ScriptedChatModel([calls_message(call("approve", {}, id="c1")), "done"])
    agent = ChatModelAgent("a", "d", model, tools=[approve], middlewares=[Remember()])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore(), serializer=SERIALIZER)
    with no_thread_leak():
        events = list(runner.query("hi", with_checkpoint_id("cp")))
    assert events[-1].err is not None
    assert "run-local value 'lock' (lock) at agent:a cannot be saved" in str(events[-1].err)
