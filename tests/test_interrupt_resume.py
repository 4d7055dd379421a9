"""Interrupt and resume: tools, custom agents, transfers, workflows, checkpoints."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit import (
    AgentInput,
    BaseTool,
    ChatModelAgent,
    CheckpointBusyError,
    CheckpointConsumedError,
    CheckpointError,
    CheckpointNotFoundError,
    ParallelAgent,
    ResumeInfo,
    Role,
    Runner,
    SequentialAgent,
    assistant_message,
    event_from_message,
    get_interrupt_state,
    get_session_values,
    interrupt,
    interrupt_event,
    run_in_worker,
    set_sub_agents,
    tool,
    with_checkpoint_id,
    with_session_values,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, run_events, summarize

ROOT = Path(__file__).resolve().parent.parent


def approval_tool(calls: list[str] | None = None):  # type: ignore[no-untyped-def]
    @tool
    def pay(amount: int) -> str:
        """Pay an amount after approval."""
        if calls is not None:
            calls.append("pay")
        approved = interrupt(f"approve paying {amount}?", state={"amount": amount})
        return f"paid {amount}" if approved else "payment declined"

    return pay


@tool
def lookup() -> str:
    """Look something up."""
    return "found it"


def payer(model: ScriptedChatModel, calls: list[str] | None = None) -> ChatModelAgent:
    return ChatModelAgent("Payer", "pays bills", model, tools=[approval_tool(calls), lookup])


def test_tool_interrupt_ends_run_with_context_and_saves_checkpoint() -> None:
    model = ScriptedChatModel([calls_message(call("pay", {"amount": 5}, id="p1")), "done"])
    store = InMemoryCheckPointStore()
    events = run_events(
        Runner(payer(model), checkpoint_store=store).query("pay", with_checkpoint_id("c1"))
    )
    last = events[-1]
    assert summarize(last) == ("Payer", ["Payer"], "", "", "interrupt")
    assert last.action is not None and last.action.interrupted is not None
    (context,) = last.action.interrupted.contexts
    assert context.address == ("agent:Payer", "tool:pay:p1")
    assert context.info == "approve paying 5?"
    assert context.is_root_cause
    assert context.parent is not None and context.parent.address == ("agent:Payer",)
    assert store.get("c1") is not None


def test_run_without_checkpoint_id_saves_nothing_but_still_interrupts() -> None:
    model = ScriptedChatModel([calls_message(call("pay", {"amount": 5}))])
    store = InMemoryCheckPointStore()
    events = run_events(Runner(payer(model), checkpoint_store=store).query("pay"))
    assert summarize(events[-1])[4] == "interrupt"
    assert store.get("anything") is None


def test_parallel_tool_interrupt_keeps_finished_tools_and_resumes_implicitly_then_by_id() -> None:
    calls: list[str] = []
    model = ScriptedChatModel(
        [calls_message(call("pay", {"amount": 5}, id="p1"), call("lookup", id="l1")), "all done"]
    )
    store = InMemoryCheckPointStore()
    runner = Runner(payer(model, calls), checkpoint_store=store)
    first = run_events(runner.query("go", with_checkpoint_id("c")))
    assert [summarize(e)[2:] for e in first] == [
        ("assistant", "", None),
        ("tool/lookup", "found it", None),
        ("", "", "interrupt"),
    ]
    first_id = first[-1].action.interrupted.contexts[0].id  # type: ignore[union-attr]

    # implicit resume: the tool interrupts again, with a new id; lookup does not run again
    second = run_events(runner.resume("c"))
    assert [summarize(e)[2:] for e in second] == [("", "", "interrupt")]
    (context,) = second[-1].action.interrupted.contexts  # type: ignore[union-attr]
    assert context.id != first_id
    with pytest.raises(ValueError, match="unknown interrupt id"):
        runner.resume("c", targets={first_id: True})

    third = run_events(runner.resume("c", targets={context.id: True}))
    assert [summarize(e)[2:] for e in third] == [
        ("tool/pay", "paid 5", None),
        ("assistant", "all done", None),
    ]
    assert len(model.calls) == 2  # the model is not called again for the interrupted round
    history = model.calls[1].messages
    assert [(m.tool_call_id, m.content) for m in history if m.role is Role.TOOL] == [
        ("p1", "paid 5"),
        ("l1", "found it"),
    ]
    assert calls == ["pay", "pay", "pay"]


def test_resume_data_none_is_data() -> None:
    model = ScriptedChatModel([calls_message(call("pay", {"amount": 1})), "ok"])
    store = InMemoryCheckPointStore()
    runner = Runner(payer(model), checkpoint_store=store)
    first = run_events(runner.query("go", with_checkpoint_id("c")))
    point = first[-1].action.interrupted.contexts[0].id  # type: ignore[union-attr]
    events = run_events(runner.resume("c", targets={point: None}))
    assert summarize(events[0])[3] == "payment declined"


def test_get_interrupt_state_returns_the_saved_state() -> None:
    seen: list[Any] = []

    @tool
    def stateful() -> str:
        """Interrupts with state."""
        seen.append(get_interrupt_state())
        data = interrupt("need input", state={"step": 2})
        return f"got {data}"

    model = ScriptedChatModel([calls_message(call("stateful")), "fin"])
    store = InMemoryCheckPointStore()
    runner = Runner(ChatModelAgent("s", "d", model, tools=[stateful]), checkpoint_store=store)
    first = run_events(runner.query("x", with_checkpoint_id("c")))
    point = first[-1].action.interrupted.contexts[0].id  # type: ignore[union-attr]
    run_events(runner.resume("c", targets={point: "yes"}))
    assert seen == [None, {"step": 2}]


def test_except_exception_in_a_tool_does_not_swallow_the_interrupt() -> None:
    @tool
    def careful() -> str:
        """Catches everything it can."""
        try:
            interrupt("ask")
        except Exception:
            return "swallowed"
        return "unreachable"

    model = ScriptedChatModel([calls_message(call("careful")), "x"])
    events = run_events(Runner(ChatModelAgent("c", "d", model, tools=[careful])).query("x"))
    assert summarize(events[-1])[4] == "interrupt"


def test_interrupt_outside_a_tool_raises() -> None:
    with pytest.raises(RuntimeError, match="inside a tool call"):
        interrupt("x")


class AskAgent:
    """A custom resumable agent that interrupts with state, then answers with the data."""

    name = "Ask"
    description = "asks the user"

    def __init__(self) -> None:
        self.resumes: list[ResumeInfo] = []

    def run(self, input: AgentInput, *options: object):  # type: ignore[no-untyped-def]
        return run_in_worker(
            lambda gen: gen.send(interrupt_event("what is your name?", state={"asked": 1}))
        )

    def resume(self, info: ResumeInfo, *options: object):  # type: ignore[no-untyped-def]
        self.resumes.append(info)

        def work(gen) -> None:  # type: ignore[no-untyped-def]
            if not info.is_resume_target:
                gen.send(interrupt_event("still need your name", state=info.interrupt_state))
                return
            text = f"hello {info.resume_data}"
            gen.send(event_from_message(assistant_message(text), None, Role.ASSISTANT))

        return run_in_worker(work)


def test_custom_agent_interrupt_and_targeted_resume() -> None:
    agent = AskAgent()
    store = InMemoryCheckPointStore()
    runner = Runner(agent, checkpoint_store=store, enable_streaming=True)
    first = run_events(runner.query("hi", with_checkpoint_id("a")))
    (context,) = first[-1].action.interrupted.contexts  # type: ignore[union-attr]
    assert context.address == ("agent:Ask",) and context.info == "what is your name?"
    assert first[-1].action.interrupted.data == "what is your name?"  # type: ignore[union-attr]

    second = run_events(runner.resume("a"))
    info = agent.resumes[-1]
    assert (info.was_interrupted, info.is_resume_target, info.interrupt_state) == (
        True,
        False,
        {"asked": 1},
    )
    assert info.enable_streaming is True
    (again,) = second[-1].action.interrupted.contexts  # type: ignore[union-attr]

    third = run_events(runner.resume("a", targets={again.id: "Ada"}))
    info = agent.resumes[-1]
    assert (info.is_resume_target, info.resume_data) == (True, "Ada")
    assert summarize(third[-1]) == ("Ask", ["Ask"], "assistant", "hello Ada", None)


def test_interrupt_after_transfer_resumes_in_the_child() -> None:
    child_model = ScriptedChatModel(
        [calls_message(call("pay", {"amount": 9}, id="p")), "child done"]
    )
    child = ChatModelAgent("Child", "pays", child_model, tools=[approval_tool()])
    parent_model = ScriptedChatModel(
        [calls_message(call("transfer_to_agent", {"agent_name": "Child"}))]
    )
    parent = set_sub_agents(ChatModelAgent("Parent", "routes", parent_model), [child])
    store = InMemoryCheckPointStore()
    runner = Runner(parent, checkpoint_store=store)
    first = run_events(runner.query("pay 9", with_checkpoint_id("t")))
    assert summarize(first[-1])[:2] == ("Child", ["Parent", "Child"])
    (context,) = first[-1].action.interrupted.contexts  # type: ignore[union-attr]
    assert context.address == ("agent:Parent", "agent:Child", "tool:pay:p")
    resumed = run_events(runner.resume("t", targets={context.id: True}))
    assert [summarize(e) for e in resumed] == [
        ("Child", ["Parent", "Child"], "tool/pay", "paid 9", None),
        ("Child", ["Parent", "Child"], "assistant", "child done", None),
    ]
    assert len(parent_model.calls) == 1


def reporter(model: ScriptedChatModel) -> ChatModelAgent:
    return ChatModelAgent("Reporter", "reports", model)


def test_sequential_interrupt_resumes_the_stage_and_later_agents_see_identical_history() -> None:
    def build(pay_tool: BaseTool) -> tuple[SequentialAgent, ScriptedChatModel]:
        pay_model = ScriptedChatModel(
            [calls_message(call("pay", {"amount": 3}, id="p")), "paid it"]
        )
        report_model = ScriptedChatModel(["report"])
        first = ChatModelAgent("Payer", "pays", pay_model, tools=[pay_tool])
        return SequentialAgent("S", "pipeline", [first, reporter(report_model)]), report_model

    @tool
    def pay(amount: int) -> str:
        """Pay without asking."""
        return f"paid {amount}"

    plain, plain_reporter = build(pay)
    run_events(Runner(plain).query("go"))

    flow, report_model = build(approval_tool())
    store = InMemoryCheckPointStore()
    runner = Runner(flow, checkpoint_store=store)
    first = run_events(runner.query("go", with_checkpoint_id("s")))
    assert summarize(first[-1])[:2] == ("Payer", ["S", "Payer"])
    (context,) = first[-1].action.interrupted.contexts  # type: ignore[union-attr]
    assert context.address == ("agent:S", "agent:Payer", "tool:pay:p")
    rest = run_events(runner.resume("s", targets={context.id: True}))
    assert [summarize(e)[:3] for e in rest] == [
        ("Payer", ["S", "Payer"], "tool/pay"),
        ("Payer", ["S", "Payer"], "assistant"),
        ("Reporter", ["S", "Payer", "Reporter"], "assistant"),
    ]
    assert report_model.calls[0].messages == plain_reporter.calls[0].messages


def test_parallel_branches_interrupt_together_and_resume_only_interrupted_ones() -> None:
    quick_model = ScriptedChatModel(["quick answer"])
    models = [
        ScriptedChatModel(
            [calls_message(call("pay", {"amount": i}, id=f"p{i}")), f"branch {i} done"]
        )
        for i in (1, 2)
    ]
    branches = [
        ChatModelAgent(f"B{i}", "pays", models[i - 1], tools=[approval_tool()]) for i in (1, 2)
    ]
    after_model = ScriptedChatModel(["summary"])
    par = ParallelAgent(
        "P", "fan out", [*branches, ChatModelAgent("Quick", "answers", quick_model)]
    )
    flow = SequentialAgent("S", "d", [par, ChatModelAgent("After", "sums up", after_model)])
    store = InMemoryCheckPointStore()
    runner = Runner(flow, checkpoint_store=store)
    first = run_events(runner.query("go", with_checkpoint_id("p")))
    last = first[-1]
    assert summarize(last)[:2] == ("P", ["S", "P"])
    contexts = last.action.interrupted.contexts  # type: ignore[union-attr]
    assert sorted(c.address for c in contexts) == [
        ("agent:S", "agent:P", "agent:B1", "tool:pay:p1"),
        ("agent:S", "agent:P", "agent:B2", "tool:pay:p2"),
    ]
    by_branch = {c.address[2]: c.id for c in contexts}
    second = run_events(runner.resume("p", targets={by_branch["agent:B1"]: True}))
    # B1 finishes; B2 (implicitly resumed) interrupts again; Quick is not re-run
    assert [summarize(e)[2:4] for e in second if e.output] == [
        ("tool/pay", "paid 1"),
        ("assistant", "branch 1 done"),
    ]
    assert summarize(second[-1])[4] == "interrupt"
    assert len(quick_model.calls) == 1
    (b2,) = second[-1].action.interrupted.contexts  # type: ignore[union-attr]
    third = run_events(runner.resume("p", targets={b2.id: False}))
    assert [summarize(e)[:4] for e in third] == [
        ("B2", ["S", "P", "B2"], "tool/pay", "payment declined"),
        ("B2", ["S", "P", "B2"], "assistant", "branch 2 done"),
        ("After", ["S", "P", "After"], "assistant", "summary"),
    ]
    seen = [m.content for m in after_model.calls[0].messages]
    assert any("branch 1 done" in text for text in seen)
    assert any("branch 2 done" in text for text in seen)
    assert any("quick answer" in text for text in seen)


def test_loop_interrupt_resumes_in_the_same_iteration() -> None:
    from agentkit import LoopAgent

    model = ScriptedChatModel([calls_message(call("pay", {"amount": 1}, id="x")), "paid"])
    loop = LoopAgent(
        "L",
        "d",
        [ChatModelAgent("Payer", "pays", model, tools=[approval_tool()])],
        max_iterations=1,
    )
    store = InMemoryCheckPointStore()
    runner = Runner(loop, checkpoint_store=store)
    first = run_events(runner.query("go", with_checkpoint_id("l")))
    (context,) = first[-1].action.interrupted.contexts  # type: ignore[union-attr]
    assert context.address == ("agent:L", "agent:Payer", "tool:pay:x")
    rest = run_events(runner.resume("l", targets={context.id: True}))
    assert [summarize(e)[:4] for e in rest] == [
        ("Payer", ["L", "Payer"], "tool/pay", "paid 1"),
        ("Payer", ["L", "Payer"], "assistant", "paid"),
    ]


def test_resume_errors_are_raised_at_once() -> None:
    with pytest.raises(ValueError, match="store"):
        Runner(AskAgent()).resume("x")
    runner = Runner(AskAgent(), checkpoint_store=InMemoryCheckPointStore())
    with pytest.raises(CheckpointNotFoundError, match="no checkpoint is saved under 'nope'"):
        runner.resume("nope")


def test_tampered_and_foreign_checkpoints_are_refused() -> None:
    import pickle

    store = InMemoryCheckPointStore()
    runner = Runner(AskAgent(), checkpoint_store=store)
    run_events(runner.query("hi", with_checkpoint_id("a")))
    store.set("raw", pickle.dumps({"x": 1}))
    with pytest.raises(CheckpointError):
        runner.resume("raw")
    data = bytearray(store.get("a") or b"")
    data[len(data) // 2] ^= 0xFF
    store.set("bad", bytes(data))
    with pytest.raises(CheckpointError):
        runner.resume("bad")


def test_signed_checkpoint_replayed_under_another_id_is_refused() -> None:
    from agentkit.checkpoint import PickleSerializer

    store = InMemoryCheckPointStore()
    runner = Runner(AskAgent(), checkpoint_store=store, serializer=PickleSerializer(b"k" * 32))
    run_events(runner.query("hi", with_checkpoint_id("a")))
    store.set("b", store.get("a") or b"")
    with pytest.raises(CheckpointError):
        runner.resume("b")
    run_events(runner.resume("a"))  # the original still loads


def test_two_racing_resumes_exactly_one_runs() -> None:
    release = threading.Event()
    entered = threading.Event()

    class Slow(AskAgent):
        def resume(self, info: ResumeInfo, *options: object):  # type: ignore[no-untyped-def]
            def work(gen) -> None:  # type: ignore[no-untyped-def]
                entered.set()
                assert release.wait(10)
                gen.send(event_from_message(assistant_message("resumed"), None, Role.ASSISTANT))

            return run_in_worker(work)

    store = InMemoryCheckPointStore()
    runner = Runner(Slow(), checkpoint_store=store)
    run_events(runner.query("hi", with_checkpoint_id("r")))
    with no_thread_leak():
        first = runner.resume("r")
        assert entered.wait(10)
        with pytest.raises(CheckpointBusyError):
            runner.resume("r")
        release.set()
        assert summarize(list(first)[-1])[3] == "resumed"
    # the lease is released when the resumed run ends (the checkpoint is then consumed, not busy)
    with pytest.raises(CheckpointConsumedError):
        runner.resume("r")


session_values = st.dictionaries(
    st.text(min_size=1, max_size=8),
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=8,
    ),
    max_size=5,
)


@given(session_values)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_session_values_round_trip_through_a_checkpoint(values: dict[str, Any]) -> None:
    seen: list[dict[str, Any]] = []

    class Probe(AskAgent):
        def resume(self, info: ResumeInfo, *options: object):  # type: ignore[no-untyped-def]
            def work(gen) -> None:  # type: ignore[no-untyped-def]
                seen.append(get_session_values())

            return run_in_worker(work)

    store = InMemoryCheckPointStore()
    runner = Runner(Probe(), checkpoint_store=store)
    list(runner.query("hi", with_checkpoint_id("v"), with_session_values(values)))
    list(runner.resume("v"))
    assert seen == [values]


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_resume_in_another_process(kind: str, tmp_path: Path) -> None:
    location = tmp_path / ("store" if kind == "file" else "cp.sqlite3")
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from agentkit import ChatModelAgent, Runner, interrupt, tool, with_checkpoint_id
        from agentkit.checkpoint import FileCheckPointStore, SQLiteCheckPointStore
        from agentkit.models import ScriptedChatModel
        from agentkit.testing import call, calls_message, summarize

        @tool
        def pay(amount: int) -> str:
            '''Pay after approval.'''
            return "paid" if interrupt("approve?") else "declined"

        # a new process: the scripted model answers the call it gets there
        script = [calls_message(call("pay", {{"amount": 2}}, id="p"))] if sys.argv[1] == "run" else ["finished"]
        model = ScriptedChatModel(script)
        agent = ChatModelAgent("Payer", "pays", model, tools=[pay])
        store = {"FileCheckPointStore" if kind == "file" else "SQLiteCheckPointStore"}({str(location)!r})
        runner = Runner(agent, checkpoint_store=store)
        if sys.argv[1] == "run":
            events = list(runner.query("pay", with_checkpoint_id("proc")))
            print(events[-1].action.interrupted.contexts[0].id)
        else:
            events = list(runner.resume("proc", targets={{sys.argv[2]: True}}))
            print("|".join(summarize(e)[3] for e in events))
        """
    )
    first = subprocess.run(
        [sys.executable, "-c", script, "run"], capture_output=True, text=True, timeout=60
    )
    assert first.returncode == 0, first.stderr
    point = first.stdout.strip()
    second = subprocess.run(
        [sys.executable, "-c", script, "resume", point], capture_output=True, text=True, timeout=60
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "paid|finished"


class MyError(Exception):
    """A user exception type the checkpoint serializer does not know."""


class Failing:
    name = "Failing"
    description = "raises"

    def run(self, input: AgentInput, *options: object):  # type: ignore[no-untyped-def]
        def work(gen) -> None:  # type: ignore[no-untyped-def]
            raise MyError("branch broke")

        return run_in_worker(work)


def test_checkpoint_holds_errors_of_any_type_as_text() -> None:
    model = ScriptedChatModel([calls_message(call("pay", {"amount": 1}, id="p")), "paid"])
    par = ParallelAgent("P", "d", [Failing(), ChatModelAgent("Payer", "pays", model, tools=[approval_tool()])])
    store = InMemoryCheckPointStore()
    runner = Runner(SequentialAgent("S", "d", [ChatModelAgent("Pre", "d", ScriptedChatModel([MyError("pre")])), par]),
                    checkpoint_store=store)
    events = run_events(runner.query("go", with_checkpoint_id("e")))
    assert not any("cannot save checkpoint" in str(e.err) for e in events if e.err)
    # the sequence stopped at Pre's error: the failure is saved, so the run can be retried
    assert store.get("e") is not None
    runner = Runner(par, checkpoint_store=store)
    events = run_events(runner.query("go", with_checkpoint_id("e")))
    assert [type(e.err).__name__ for e in events if e.err] == ["MyError"]
    assert summarize(events[-1])[4] == "interrupt"
    assert store.get("e") is not None
    (context,) = events[-1].action.interrupted.contexts  # type: ignore[union-attr]
    rest = run_events(runner.resume("e", targets={context.id: True}))
    # both unfinished branches go on: the payer is paid, the failed branch is tried again
    assert ("assistant", "paid") in [summarize(e)[2:4] for e in rest]
    assert [type(e.err).__name__ for e in rest if e.err] == ["MyError"]
