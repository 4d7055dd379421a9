"""Workflow agents: Sequential, Loop and Parallel (event orders, run paths, model inputs).

Every test runs real agents on real threads with scripted models and asserts on the whole
observable sequence of events (``summarize``) and on exactly what each model was sent.
Concurrency is proven with barriers, never with sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import attrs
import pytest

from agentkit import (
    AgentAction,
    AgentCancelledError,
    AgentEvent,
    AgentInput,
    AgentRunOption,
    AsyncGenerator,
    BaseTool,
    CancelHandle,
    CancelMode,
    ChatModelAgent,
    ExitTool,
    LoopAgent,
    Message,
    ModelError,
    ParallelAgent,
    Role,
    Runner,
    SequentialAgent,
    add_session_value,
    assistant_message,
    event_from_message,
    get_session_values,
    new_break_loop_action,
    new_exit_action,
    run_in_worker,
    send_tool_gen_action,
    system_message,
    tool,
    user_message,
    with_cancel,
)
from agentkit.errors import AgentConfigError
from agentkit.iterators import AsyncIterator
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, run_events, summarize

Summary = tuple[str, list[str], str, str, "str | None"]


def run(agent: object, text: str = "hi", *, streaming: bool = False) -> list[AgentEvent]:
    """Run ``agent`` with a Runner on one user message; no thread may outlive the run."""
    return run_events(lambda: Runner(agent, enable_streaming=streaming).query(text))  # type: ignore[arg-type]


def summaries(events: Sequence[AgentEvent]) -> list[Summary]:
    return [summarize(event) for event in events]


def say(text: str, action: AgentAction | None = None) -> AgentEvent:
    """An assistant-message event, as a custom agent sends it (no name, no run path)."""
    event = event_from_message(assistant_message(text), None, Role.ASSISTANT)
    return attrs.evolve(event, action=action)


class EventAgent:
    """A custom agent (built on ``run_in_worker``) that sends the events ``make()`` returns."""

    def __init__(self, name: str, make: Callable[[], list[AgentEvent]]) -> None:
        self.name = name
        self.description = f"custom agent {name}"
        self.make = make
        self.inputs: list[AgentInput] = []

    def run(self, input: AgentInput, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
        self.inputs.append(input)

        def work(generator: AsyncGenerator[AgentEvent]) -> None:
            for event in self.make():
                generator.send(event)

        return run_in_worker(work)


def echo(name: str, text: str) -> tuple[ChatModelAgent, ScriptedChatModel]:
    """A tool-less agent answering ``text`` to every call, and its model.

    The reply is an assistant message object, returned as it is (so a later call's input
    holds a message equal to ``assistant_message(text)``).
    """
    reply = assistant_message(text)
    model = ScriptedChatModel(lambda messages: reply)
    return ChatModelAgent(name, f"agent {name}", model), model


@tool
def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: what to look up.
    """
    return f"found {q}"


@tool
def stop_loop() -> str:
    """Stop the enclosing loop."""
    send_tool_gen_action(new_break_loop_action("critic"))
    return "loop stopped"


# --- Sequential -----------------------------------------------------------------------------


def test_sequential_with_one_child_names_it_under_the_workflow() -> None:
    a, model = echo("A", "a says hi")
    events = run(SequentialAgent("seq", "one step", [a]), "hello")
    assert summaries(events) == [("A", ["seq", "A"], "assistant", "a says hi", None)]
    assert model.calls[0].messages == [user_message("hello")]


def test_sequential_second_child_sees_first_childs_messages_rewritten_as_context() -> None:
    a_model = ScriptedChatModel([calls_message(call("lookup", {"q": "x"}, id="c1")), "a done"])
    b_model = ScriptedChatModel(["b done"])
    a = ChatModelAgent("A", "looks up", a_model, tools=[lookup])
    b = ChatModelAgent("B", "answers", b_model, instruction="You are B.")
    events = run(SequentialAgent("seq", "A then B", [a, b]), "hi")
    assert summaries(events) == [
        ("A", ["seq", "A"], "assistant", "", None),
        ("A", ["seq", "A"], "tool/lookup", "found x", None),
        ("A", ["seq", "A"], "assistant", "a done", None),
        ("B", ["seq", "A", "B"], "assistant", "b done", None),
    ]
    assert b_model.calls[0].messages == [
        system_message("You are B."),
        user_message("hi"),
        user_message('For context: [A] called tool: `lookup` with arguments: {"q": "x"}.'),
        user_message("For context: [A] `lookup` tool returned result: found x."),
        user_message("For context: [A] said: a done."),
    ]
    # A's own input is the root input only.
    assert a_model.calls[0].messages == [user_message("hi")]


def test_sequential_three_children_accumulate_run_paths_and_context() -> None:
    a, _ = echo("A", "one")
    b, _ = echo("B", "two")
    c, c_model = echo("C", "three")
    events = run(SequentialAgent("seq", "d", [a, b, c]))
    assert [s[1] for s in summaries(events)] == [
        ["seq", "A"],
        ["seq", "A", "B"],
        ["seq", "A", "B", "C"],
    ]
    assert c_model.calls[0].messages == [
        user_message("hi"),
        user_message("For context: [A] said: one."),
        user_message("For context: [B] said: two."),
    ]


def test_sequential_streams_events_and_later_children_see_the_concatenated_text() -> None:
    a, _ = echo("A", "streamed answer")
    b, b_model = echo("B", "ok")
    events = run(SequentialAgent("seq", "d", [a, b]), streaming=True)
    assert all(e.output is not None and e.output.message_output.is_streaming for e in events)  # type: ignore[union-attr]
    assert summaries(events) == [
        ("A", ["seq", "A"], "assistant", "streamed answer", None),
        ("B", ["seq", "A", "B"], "assistant", "ok", None),
    ]
    assert b_model.calls[0].messages[-1] == user_message("For context: [A] said: streamed answer.")


def test_exit_on_a_childs_last_event_stops_the_sequence() -> None:
    a = EventAgent("A", lambda: [say("working"), say("finished", new_exit_action())])
    b, b_model = echo("B", "never")
    events = run(SequentialAgent("seq", "d", [a, b]))
    assert summaries(events) == [
        ("A", ["seq", "A"], "assistant", "working", None),
        ("A", ["seq", "A"], "assistant", "finished", "exit"),
    ]
    assert b_model.calls == []


def test_exit_on_a_non_last_event_of_a_child_is_ignored() -> None:
    a = EventAgent("A", lambda: [say("early exit?", new_exit_action()), say("still going")])
    b, b_model = echo("B", "b ran")
    events = run(SequentialAgent("seq", "d", [a, b]))
    assert summaries(events) == [
        ("A", ["seq", "A"], "assistant", "early exit?", "exit"),
        ("A", ["seq", "A"], "assistant", "still going", None),
        ("B", ["seq", "A", "B"], "assistant", "b ran", None),
    ]
    assert len(b_model.calls) == 1


def test_exit_tool_of_a_chat_model_child_stops_the_sequence() -> None:
    a_model = ScriptedChatModel([calls_message(call("exit", {"final_result": "all done"}, id="e"))])
    a = ChatModelAgent("A", "exits", a_model, exit_tool=ExitTool())
    b, b_model = echo("B", "never")
    events = run(SequentialAgent("seq", "d", [a, b]))
    assert summaries(events) == [
        ("A", ["seq", "A"], "assistant", "", None),
        ("A", ["seq", "A"], "tool/exit", "all done", "exit"),
    ]
    assert b_model.calls == []


def test_custom_child_input_is_rebuilt_from_history() -> None:
    a, _ = echo("A", "from A")
    b = EventAgent("B", lambda: [say("from B")])
    run(SequentialAgent("seq", "d", [a, b]), "question")
    assert b.inputs[0].messages == [
        user_message("question"),
        user_message("For context: [A] said: from A."),
    ]


def test_break_loop_action_has_no_effect_in_a_sequence() -> None:
    a = EventAgent("A", lambda: [say("break?", new_break_loop_action("A"))])
    b, b_model = echo("B", "b ran")
    events = run(SequentialAgent("seq", "d", [a, b]))
    assert summaries(events) == [
        ("A", ["seq", "A"], "assistant", "break?", "break_loop"),
        ("B", ["seq", "A", "B"], "assistant", "b ran", None),
    ]
    brk = events[0].action.break_loop  # type: ignore[union-attr]
    assert brk is not None and (brk.done, brk.current_iterations) == (False, 0)
    assert len(b_model.calls) == 1


def test_error_in_a_sequence_child_stops_the_sequence() -> None:
    a = ChatModelAgent("A", "fails", ScriptedChatModel([ModelError("model is down")]))
    b, b_model = echo("B", "never")
    events = run(SequentialAgent("seq", "d", [a, b]))
    assert summaries(events) == [("A", ["seq", "A"], "error", "model is down", None)]
    assert isinstance(events[0].err, ModelError)
    assert b_model.calls == []


def test_workflow_run_directly_without_runner() -> None:
    a, _ = echo("A", "one")
    b, b_model = echo("B", "two")
    seq = SequentialAgent("seq", "d", [a, b])
    with no_thread_leak():
        events = list(seq.run(AgentInput([user_message("hi")])))
    assert summaries(events) == [
        ("A", ["seq", "A"], "assistant", "one", None),
        ("B", ["seq", "A", "B"], "assistant", "two", None),
    ]
    assert b_model.calls[0].messages == [
        user_message("hi"),
        user_message("For context: [A] said: one."),
    ]


# --- Loop -----------------------------------------------------------------------------------


def test_loop_run_paths_accumulate_across_iterations() -> None:
    a_model = ScriptedChatModel(["a1", "a2"])
    b_model = ScriptedChatModel(["b1", "b2"])
    loop = LoopAgent(
        "loop",
        "d",
        [ChatModelAgent("A", "d", a_model), ChatModelAgent("B", "d", b_model)],
        max_iterations=2,
    )
    events = run(loop)
    assert summaries(events) == [
        ("A", ["loop", "A"], "assistant", "a1", None),
        ("B", ["loop", "A", "B"], "assistant", "b1", None),
        ("A", ["loop", "A", "B", "A"], "assistant", "a2", None),
        ("B", ["loop", "A", "B", "A", "B"], "assistant", "b2", None),
    ]


def test_loop_child_sees_its_own_earlier_messages_verbatim_and_others_rewritten() -> None:
    # Replies are Message objects, returned as they are, so "verbatim" means equal to them.
    a_model = ScriptedChatModel(
        [calls_message(call("lookup", {"q": "k"}, id="c1")), assistant_message("a1"), "a2"]
    )
    b_model = ScriptedChatModel([assistant_message("b1"), "b2"])
    a = ChatModelAgent("A", "d", a_model, tools=[lookup])
    b = ChatModelAgent("B", "d", b_model)
    run(LoopAgent("loop", "d", [a, b], max_iterations=2), "go")
    own_call = calls_message(call("lookup", {"q": "k"}, id="c1"))
    second_iteration = a_model.calls[2].messages
    assert second_iteration[0] == user_message("go")
    assert second_iteration[1] == own_call
    assert (second_iteration[2].role, second_iteration[2].content) == (Role.TOOL, "found k")
    assert second_iteration[2].tool_call_id == "c1"
    assert second_iteration[3:] == [
        assistant_message("a1"),
        user_message("For context: [B] said: b1."),
    ]
    assert b_model.calls[1].messages == [
        user_message("go"),
        user_message('For context: [A] called tool: `lookup` with arguments: {"q": "k"}.'),
        user_message("For context: [A] `lookup` tool returned result: found k."),
        user_message("For context: [A] said: a1."),
        assistant_message("b1"),
        user_message("For context: [A] said: a2."),
    ]


def test_loop_ends_quietly_after_max_iterations() -> None:
    a, model = echo("A", "again")
    events = run(LoopAgent("loop", "d", [a], max_iterations=3))
    assert summaries(events) == [
        ("A", ["loop", "A"], "assistant", "again", None),
        ("A", ["loop", "A", "A"], "assistant", "again", None),
        ("A", ["loop", "A", "A", "A"], "assistant", "again", None),
    ]
    assert len(model.calls) == 3


def test_break_loop_from_a_tool_stops_the_loop_after_the_breaking_child() -> None:
    writer, writer_model = echo("writer", "draft")
    # Iteration 0: the critic asks for changes; iteration 1: it calls the break tool and then
    # still answers (its later events are forwarded); the reporter never runs in iteration 1.
    critic_model = ScriptedChatModel(
        ["needs work", calls_message(call("stop_loop", id="s1")), "approved"]
    )
    critic = ChatModelAgent("critic", "d", critic_model, tools=[stop_loop])
    reporter, reporter_model = echo("reporter", "report")
    events = run(LoopAgent("loop", "d", [writer, critic, reporter]))
    path0 = ["loop", "writer", "critic", "reporter"]
    assert summaries(events) == [
        ("writer", ["loop", "writer"], "assistant", "draft", None),
        ("critic", ["loop", "writer", "critic"], "assistant", "needs work", None),
        ("reporter", path0, "assistant", "report", None),
        ("writer", [*path0, "writer"], "assistant", "draft", None),
        ("critic", [*path0, "writer", "critic"], "assistant", "", None),
        ("critic", [*path0, "writer", "critic"], "tool/stop_loop", "loop stopped", "break_loop"),
        ("critic", [*path0, "writer", "critic"], "assistant", "approved", None),
    ]
    brk = events[5].action.break_loop  # type: ignore[union-attr]
    assert brk is not None
    assert (brk.from_agent, brk.done, brk.current_iterations) == ("critic", True, 1)
    assert len(writer_model.calls) == 2
    assert len(reporter_model.calls) == 1


def test_break_loop_on_the_last_event_of_the_first_iteration() -> None:
    a = EventAgent("A", lambda: [say("thinking"), say("stop", new_break_loop_action("A"))])
    b, b_model = echo("B", "never")
    events = run(LoopAgent("loop", "d", [a, b]))
    assert summaries(events) == [
        ("A", ["loop", "A"], "assistant", "thinking", None),
        ("A", ["loop", "A"], "assistant", "stop", "break_loop"),
    ]
    brk = events[1].action.break_loop  # type: ignore[union-attr]
    assert brk is not None and (brk.done, brk.current_iterations) == (True, 0)
    assert b_model.calls == []


def test_break_in_an_inner_loop_stops_only_the_inner_loop() -> None:
    x = EventAgent("X", lambda: [say("x breaks", new_break_loop_action("X"))])
    y, y_model = echo("Y", "y runs")
    inner = LoopAgent("inner", "d", [x])
    outer = LoopAgent("outer", "d", [inner, y], max_iterations=2)
    events = run(outer)
    assert summaries(events) == [
        ("X", ["outer", "inner", "X"], "assistant", "x breaks", "break_loop"),
        ("Y", ["outer", "inner", "Y"], "assistant", "y runs", None),
        ("X", ["outer", "inner", "Y", "inner", "X"], "assistant", "x breaks", "break_loop"),
        ("Y", ["outer", "inner", "Y", "inner", "Y"], "assistant", "y runs", None),
    ]
    for event in (events[0], events[2]):
        brk = event.action.break_loop  # type: ignore[union-attr]
        # Marked done (at the inner loop's iteration 0), so the outer loop ignores it.
        assert brk is not None and (brk.done, brk.current_iterations) == (True, 0)
    assert len(y_model.calls) == 2


def test_exit_on_a_childs_last_event_stops_the_loop() -> None:
    a = EventAgent("A", lambda: [say("done", new_exit_action())])
    b, b_model = echo("B", "never")
    events = run(LoopAgent("loop", "d", [a, b]))
    assert summaries(events) == [("A", ["loop", "A"], "assistant", "done", "exit")]
    assert b_model.calls == []


def test_error_in_a_loop_child_stops_the_loop() -> None:
    replies: list[object] = ["a1", ModelError("quota exceeded")]
    a = ChatModelAgent("A", "d", ScriptedChatModel(replies))  # type: ignore[arg-type]
    b, b_model = echo("B", "b")
    events = run(LoopAgent("loop", "d", [a, b], max_iterations=5))
    assert summaries(events) == [
        ("A", ["loop", "A"], "assistant", "a1", None),
        ("B", ["loop", "A", "B"], "assistant", "b", None),
        ("A", ["loop", "A", "B", "A"], "error", "quota exceeded", None),
    ]
    assert len(b_model.calls) == 1


# --- Parallel -------------------------------------------------------------------------------


def _waiting_tool(barrier: threading.Barrier, name: str = "wait_for_all") -> BaseTool:
    @tool(name=name)
    def wait_for_all(branch: str) -> str:
        """Wait until every branch is inside this tool.

        Args:
            branch: the calling branch.
        """
        barrier.wait()
        return f"{branch} met the others"

    return wait_for_all


def _branch(name: str, barrier: threading.Barrier) -> tuple[ChatModelAgent, ScriptedChatModel]:
    model = ScriptedChatModel(
        [calls_message(call("wait_for_all", {"branch": name}, id=f"w-{name}")), f"{name} result"]
    )
    return ChatModelAgent(name, f"branch {name}", model, tools=[_waiting_tool(barrier)]), model


def test_parallel_branches_run_at_the_same_time() -> None:
    # The barrier only opens when all four branches are inside their tool at once.
    barrier = threading.Barrier(4, timeout=10)
    branches = [_branch(f"P{i}", barrier) for i in range(4)]
    events = run(ParallelAgent("par", "d", [agent for agent, _ in branches]))
    assert not [e for e in events if e.err is not None]
    finals = sorted(s for s in summaries(events) if s[2] == "assistant" and s[3])
    assert finals == [
        (f"P{i}", ["par", f"P{i}"], "assistant", f"P{i} result", None) for i in range(4)
    ]
    assert len(events) == 12


def test_parallel_events_of_each_branch_keep_their_order() -> None:
    barrier = threading.Barrier(3, timeout=10)
    events = run(ParallelAgent("par", "d", [_branch(f"P{i}", barrier)[0] for i in range(3)]))
    for i in range(3):
        own = [s for s in summaries(events) if s[0] == f"P{i}"]
        assert own == [
            (f"P{i}", ["par", f"P{i}"], "assistant", "", None),
            (f"P{i}", ["par", f"P{i}"], "tool/wait_for_all", f"P{i} met the others", None),
            (f"P{i}", ["par", f"P{i}"], "assistant", f"P{i} result", None),
        ]


def test_parallel_branches_do_not_see_each_other() -> None:
    # Every branch is past its first model call (the barrier) before any makes its second,
    # so a shared history would show up in the second calls.
    barrier = threading.Barrier(3, timeout=10)
    branches = [_branch(f"P{i}", barrier) for i in range(3)]
    run(ParallelAgent("par", "d", [agent for agent, _ in branches]), "research")
    for i, (_, model) in enumerate(branches):
        name = f"P{i}"
        assert model.calls[0].messages == [user_message("research")]
        second = model.calls[1].messages
        assert second[0] == user_message("research")
        assert second[1] == calls_message(call("wait_for_all", {"branch": name}, id=f"w-{name}"))
        assert (second[2].role, second[2].content) == (Role.TOOL, f"{name} met the others")
        assert len(second) == 3


def test_parallel_with_max_workers_runs_that_many_branches_at_a_time() -> None:
    # Pairs meet at a 2-party barrier: the first two branches, then the other two.
    barrier = threading.Barrier(2, timeout=10)
    lock = threading.Lock()
    running = [0]
    peak = [0]

    @tool
    def wait_for_all(branch: str) -> str:
        """Wait for the other branch of the pair."""
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        barrier.wait()
        with lock:
            running[0] -= 1
        return f"{branch} met the others"

    agents = []
    for i in range(4):
        model = ScriptedChatModel(
            [calls_message(call("wait_for_all", {"branch": f"P{i}"})), f"P{i} result"]
        )
        agents.append(ChatModelAgent(f"P{i}", "d", model, tools=[wait_for_all]))
    events = run(ParallelAgent("par", "d", agents, max_workers=2))
    assert not [e for e in events if e.err is not None]
    assert sorted(s[3] for s in summaries(events) if s[3].endswith("result")) == [
        f"P{i} result" for i in range(4)
    ]
    assert peak[0] == 2


def test_error_in_a_parallel_branch_does_not_stop_its_siblings() -> None:
    barrier = threading.Barrier(2, timeout=10)
    failing = ChatModelAgent("P0", "d", ScriptedChatModel([ModelError("branch failed")]))
    others = [_branch(f"P{i}", barrier) for i in (1, 2)]
    events = run(ParallelAgent("par", "d", [failing, *(agent for agent, _ in others)]))
    errors = [s for s in summaries(events) if s[2] == "error"]
    assert errors == [("P0", ["par", "P0"], "error", "branch failed", None)]
    finals = sorted(s[3] for s in summaries(events) if s[3].endswith("result"))
    assert finals == ["P1 result", "P2 result"]


def test_agent_after_a_parallel_sees_every_branch_and_has_the_parallel_in_its_path() -> None:
    barrier = threading.Barrier(3, timeout=10)
    branches = [_branch(f"P{i}", barrier) for i in range(3)]
    after, after_model = echo("After", "summary")
    par = ParallelAgent("par", "d", [agent for agent, _ in branches])
    events = run(SequentialAgent("seq", "d", [par, after]), "topic")
    parallel_part, last = summaries(events)[:-1], summaries(events)[-1]
    assert last == ("After", ["seq", "par", "After"], "assistant", "summary", None)
    assert {s[1][-1] for s in parallel_part} == {"P0", "P1", "P2"}
    assert all(s[1] == ["seq", "par", s[0]] for s in parallel_part)
    seen = after_model.calls[0].messages
    assert seen[0] == user_message("topic")
    expected = set()
    for i in range(3):
        name = f"P{i}"
        expected |= {
            f'For context: [{name}] called tool: `wait_for_all` with arguments: {{"branch": "{name}"}}.',
            f"For context: [{name}] `wait_for_all` tool returned result: {name} met the others.",
            f"For context: [{name}] said: {name} result.",
        }
    assert {m.content for m in seen[1:]} == expected
    assert len(seen) == 1 + 9
    assert all(m.role is Role.USER for m in seen)
    # Each branch's own messages keep their order in the merged history.
    for i in range(3):
        own = [m.content for m in seen if f"[P{i}]" in m.content]
        assert "called tool" in own[0] and "returned result" in own[1] and "said" in own[2]


def test_session_values_are_shared_by_parallel_branches() -> None:
    barrier = threading.Barrier(3, timeout=10)

    @tool
    def record(branch: str) -> str:
        """Record a finding in the session.

        Args:
            branch: the calling branch.
        """
        barrier.wait()  # all three write at the same moment
        for n in range(50):
            add_session_value(f"{branch}-{n}", n)
        add_session_value(f"finding:{branch}", f"{branch} found something")
        return "recorded"

    seen: list[dict[str, object]] = []

    @tool
    def read_findings() -> str:
        """Read all findings."""
        seen.append(get_session_values())
        return "read"

    agents = []
    for i in range(3):
        model = ScriptedChatModel([calls_message(call("record", {"branch": f"P{i}"})), "stored"])
        agents.append(ChatModelAgent(f"P{i}", "d", model, tools=[record]))
    reader_model = ScriptedChatModel([calls_message(call("read_findings")), "all read"])
    reader = ChatModelAgent("reader", "d", reader_model, tools=[read_findings])
    events = run(SequentialAgent("seq", "d", [ParallelAgent("par", "d", agents), reader]))
    assert not [e for e in events if e.err is not None]
    values = seen[0]
    assert {k: v for k, v in values.items() if k.startswith("finding:")} == {
        f"finding:P{i}": f"P{i} found something" for i in range(3)
    }
    assert len(values) == 3 * 51


def test_pipeline_passes_data_through_output_key_and_instruction_templates() -> None:
    outline_model = ScriptedChatModel(["1. intro 2. body"])
    writer_model = ScriptedChatModel(["A short essay."])
    outliner = ChatModelAgent("outliner", "d", outline_model, output_key="outline")
    writer = ChatModelAgent(
        "writer",
        "d",
        writer_model,
        instruction="Write an essay following this outline: {outline}",
        output_key="essay",
    )
    captured: list[dict[str, object]] = []

    @tool
    def publish() -> str:
        """Publish the essay."""
        captured.append(get_session_values())
        return "published"

    publisher_model = ScriptedChatModel([calls_message(call("publish")), "Published: {essay}"])
    publisher = ChatModelAgent(
        "publisher", "d", publisher_model, instruction="Publish: {essay}", tools=[publish]
    )
    run(SequentialAgent("pipeline", "d", [outliner, writer, publisher]), "essay on tea")
    assert writer_model.calls[0].messages[0] == system_message(
        "Write an essay following this outline: 1. intro 2. body"
    )
    assert publisher_model.calls[0].messages[0] == system_message("Publish: A short essay.")
    assert captured == [{"outline": "1. intro 2. body", "essay": "A short essay."}]
    # Without session values the instruction is used verbatim, braces included.
    assert outline_model.calls[0].messages == [user_message("essay on tea")]


@pytest.mark.parametrize("kind", ["sequential", "loop", "parallel"])
def test_workflow_children_get_no_transfer_tool_or_instruction(kind: str) -> None:
    with_tool_model = ScriptedChatModel([calls_message(call("lookup", {"q": "x"})), "done"])
    plain_model = ScriptedChatModel(["plain"])
    children = [
        ChatModelAgent("tooled", "d", with_tool_model, instruction="Use tools.", tools=[lookup]),
        ChatModelAgent("plain", "d", plain_model, instruction="Be plain."),
    ]
    workflow: object
    if kind == "sequential":
        workflow = SequentialAgent("wf", "d", children)
    elif kind == "loop":
        workflow = LoopAgent("wf", "d", children, max_iterations=1)
    else:
        workflow = ParallelAgent("wf", "d", children)
    events = run(workflow)
    assert not [e for e in events if e.err is not None]
    assert [t.name for t in with_tool_model.calls[0].tools] == ["lookup"]
    assert plain_model.calls[0].tools == []
    assert with_tool_model.calls[0].messages[0] == system_message("Use tools.")
    assert plain_model.calls[0].messages[0] == system_message("Be plain.")


# --- combinations and edge cases -------------------------------------------------------------


def test_an_event_held_for_its_action_is_forwarded_before_a_following_error() -> None:
    # Eino drops the held event when an error follows; agentkit delivers both, in order.
    def make() -> list[AgentEvent]:
        acted = say("acting", AgentAction(customized_action={"step": 1}))
        return [acted, AgentEvent(err=ValueError("failed after acting"))]

    b, b_model = echo("B", "never")
    events = run(SequentialAgent("seq", "d", [EventAgent("A", make), b]))
    assert summaries(events) == [
        ("A", ["seq", "A"], "assistant", "acting", "custom"),
        ("A", ["seq", "A"], "error", "failed after acting", None),
    ]
    assert b_model.calls == []


def test_error_in_a_parallel_branch_stops_the_enclosing_sequence_after_the_parallel() -> None:
    barrier = threading.Barrier(2, timeout=10)
    failing = ChatModelAgent("P0", "d", ScriptedChatModel([ModelError("branch failed")]))
    others = [_branch(f"P{i}", barrier)[0] for i in (1, 2)]
    after, after_model = echo("After", "never")
    par = ParallelAgent("par", "d", [failing, *others])
    events = run(SequentialAgent("seq", "d", [par, after]))
    assert [s for s in summaries(events) if s[2] == "error"] == [
        ("P0", ["seq", "par", "P0"], "error", "branch failed", None)
    ]
    # The siblings still finish (their events are delivered); the agent after them does not run.
    finals = sorted(s[3] for s in summaries(events) if s[3].endswith("result"))
    assert finals == ["P1 result", "P2 result"]
    assert after_model.calls == []


def test_exit_in_a_parallel_branch_does_not_stop_its_siblings() -> None:
    gate = threading.Event()

    def make() -> list[AgentEvent]:
        gate.set()
        return [say("leaving", new_exit_action())]

    def after_exit(messages: list[Message]) -> str:
        assert gate.wait(10)  # the exit has been sent before this branch answers
        return "still here"

    sibling_model = ScriptedChatModel(after_exit)
    sibling = ChatModelAgent("S", "d", sibling_model)
    events = run(ParallelAgent("par", "d", [EventAgent("E", make), sibling]))
    assert sorted(summaries(events)) == [
        ("E", ["par", "E"], "assistant", "leaving", "exit"),
        ("S", ["par", "S"], "assistant", "still here", None),
    ]


def test_loop_over_a_parallel_accumulates_the_parallel_in_run_paths() -> None:
    a, a_model = echo("A", "a")
    b, _ = echo("B", "b")
    c, _ = echo("C", "c")
    loop = LoopAgent("loop", "d", [ParallelAgent("par", "d", [a, b]), c], max_iterations=2)
    events = run(loop)
    paths = summaries(events)
    assert sorted(paths[:2]) == [
        ("A", ["loop", "par", "A"], "assistant", "a", None),
        ("B", ["loop", "par", "B"], "assistant", "b", None),
    ]
    assert paths[2] == ("C", ["loop", "par", "C"], "assistant", "c", None)
    assert sorted(paths[3:5]) == [
        ("A", ["loop", "par", "C", "par", "A"], "assistant", "a", None),
        ("B", ["loop", "par", "C", "par", "B"], "assistant", "b", None),
    ]
    assert paths[5] == ("C", ["loop", "par", "C", "par", "C"], "assistant", "c", None)
    # In the second round A sees its own answer verbatim and B's and C's as context. The two
    # branches join the history in the order their events were made, which is a race.
    seen = a_model.calls[1].messages
    assert seen[0] == user_message("hi")
    assert sorted(seen[1:3], key=lambda m: m.content) == [
        user_message("For context: [B] said: b."),
        assistant_message("a"),
    ]
    assert seen[3] == user_message("For context: [C] said: c.")


def test_nested_parallel_branches_join_the_history_of_the_agent_after_them() -> None:
    a, _ = echo("A", "a")
    b, _ = echo("B", "b")
    c, _ = echo("C", "c")
    after, after_model = echo("After", "z")
    inner = ParallelAgent("inner", "d", [a, b])
    outer = ParallelAgent("outer", "d", [inner, c])
    events = run(SequentialAgent("seq", "d", [outer, after]))
    assert sorted(summaries(events)[:3]) == [
        ("A", ["seq", "outer", "inner", "A"], "assistant", "a", None),
        ("B", ["seq", "outer", "inner", "B"], "assistant", "b", None),
        ("C", ["seq", "outer", "C"], "assistant", "c", None),
    ]
    assert summaries(events)[3] == ("After", ["seq", "outer", "After"], "assistant", "z", None)
    seen = after_model.calls[0].messages
    assert seen[0] == user_message("hi")
    assert sorted(m.content for m in seen[1:]) == [
        "For context: [A] said: a.",
        "For context: [B] said: b.",
        "For context: [C] said: c.",
    ]


def test_a_pending_cancel_is_honoured_between_sequence_children() -> None:
    handle = CancelHandle()

    def answer_and_cancel(messages: list[Message]) -> str:
        # A safe-point mode that never comes inside A (it has no tools): the sequence's
        # transition to B honours it.
        handle.cancel(CancelMode.AFTER_CHAT_MODEL)
        return "a"

    a = ChatModelAgent("A", "d", ScriptedChatModel(answer_and_cancel))
    b, b_model = echo("B", "never")
    with no_thread_leak():
        events = list(Runner(SequentialAgent("seq", "d", [a, b])).query("hi", with_cancel(handle)))
    assert summaries(events) == [
        ("A", ["seq", "A"], "assistant", "a", None),
        (
            "seq",
            ["seq"],
            "error",
            "the run was cancelled (CancelMode.AFTER_CHAT_MODEL: after a model call, before its "
            "tools ran)",
            None,
        ),
    ]
    assert isinstance(events[-1].err, AgentCancelledError)
    assert b_model.calls == []
    assert handle.wait(10) is True


# --- construction ---------------------------------------------------------------------------


def test_an_agent_can_be_a_child_of_two_workflows() -> None:
    a, model = echo("A", "x")
    first = SequentialAgent("first", "d", [a])
    second = ParallelAgent("second", "d", [a])
    for workflow in (first, second):
        events = Runner(workflow).invoke("go").events
        assert [[str(step) for step in e.run_path] for e in events] == [[workflow.name, "A"]]
    assert len(model.calls) == 2


def test_a_workflow_can_be_a_child_of_two_workflows() -> None:
    a, _ = echo("A", "x")
    inner = LoopAgent("inner", "d", [a], max_iterations=1)
    for outer in (SequentialAgent("first", "d", [inner]), SequentialAgent("second", "d", [inner])):
        (event,) = Runner(outer).invoke("go").events
        assert [str(step) for step in event.run_path] == [outer.name, "inner", "A"]


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_loop_rejects_a_bad_max_iterations(bad: object) -> None:
    a, _ = echo("A", "x")
    with pytest.raises(AgentConfigError, match="max_iterations"):
        LoopAgent("loop", "d", [a], max_iterations=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -2, 2.0, "4", True])
def test_parallel_rejects_a_bad_max_workers(bad: object) -> None:
    a, _ = echo("A", "x")
    with pytest.raises(AgentConfigError, match="max_workers"):
        ParallelAgent("par", "d", [a], max_workers=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", [SequentialAgent, ParallelAgent, LoopAgent])
def test_workflows_need_a_name(cls: type) -> None:
    with pytest.raises(AgentConfigError, match="non-empty name"):
        cls("", "d", [])


def test_workflow_exposes_its_sub_agents_in_order() -> None:
    a, _ = echo("A", "x")
    b, _ = echo("B", "y")
    seq = SequentialAgent("seq", "runs A then B", [a, b])
    assert (seq.name, seq.description) == ("seq", "runs A then B")
    assert seq.sub_agents == [a, b]
    assert repr(seq) == "SequentialAgent(name='seq', sub_agents=[A, B])"


def test_empty_workflows_finish_without_events() -> None:
    for workflow in (
        SequentialAgent("s", "d", []),
        ParallelAgent("p", "d", []),
        LoopAgent("l", "d", []),
    ):
        assert run(workflow) == []
