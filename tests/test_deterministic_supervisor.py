"""Deterministic transfer and the supervisor: event sequences, run paths, model inputs, resume."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from agentkit import (
    Agent,
    AgentCancelledError,
    AgentEvent,
    AgentInput,
    AgentRunOption,
    AsyncGenerator,
    AsyncIterator,
    CancelHandle,
    CancelMode,
    ChatModelAgent,
    ExitTool,
    Message,
    ModelError,
    ResumeInfo,
    Role,
    Runner,
    SequentialAgent,
    ToolInfo,
    agent_with_deterministic_transfer_to,
    assistant_message,
    event_from_message,
    get_session_value,
    interrupt,
    run_in_worker,
    set_sub_agents,
    system_message,
    tool,
    tool_message,
    user_message,
    with_cancel,
    with_chat_model_options,
    with_checkpoint_id,
    with_session_values,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import AgentConfigError
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import supervisor
from agentkit.testing import call, calls_message, run_events, summarize
from tests.transfer_support import context, transfer, transfer_instruction

TRANSFER_TOOL_NAME = "transfer_to_agent"

def done(dest: str) -> str:
    return f"successfully transferred to agent [{dest}]"


def run(agent: Agent, text: str, *options: AgentRunOption, streaming: bool = False) -> list[AgentEvent]:
    return run_events(lambda: Runner(agent, enable_streaming=streaming).query(text, *options))


def back_to(agent: str, dest: str, path: list[str]) -> list[tuple[str, list[str], str, str, str | None]]:
    """The two events of a deterministic transfer from ``agent`` to ``dest``."""
    return [
        (agent, path, "assistant", "", None),
        (agent, path, "tool/transfer_to_agent", done(dest), f"transfer:{dest}"),
    ]


@tool
def search(topic: str) -> str:
    """Search notes on a topic."""
    return f"notes on {topic}"


# --- agent_with_deterministic_transfer_to --------------------------------------------------------


def test_deterministic_transfer_emits_transfer_pair_after_the_agent_ends() -> None:
    mom_model = ScriptedChatModel([transfer("Kid", "m1"), "Thanks, Kid."])
    kid_model = ScriptedChatModel(["Kid's answer"])
    mom = ChatModelAgent("Mom", "mother", mom_model)
    kid = agent_with_deterministic_transfer_to(
        ChatModelAgent("Kid", "a kid", kid_model, instruction="Kid."), ["Mom"]
    )
    events = run(set_sub_agents(mom, [kid]), "hi")
    assert [summarize(e) for e in events] == [
        ("Mom", ["Mom"], "assistant", "", None),
        ("Mom", ["Mom"], "tool/transfer_to_agent", done("Kid"), "transfer:Kid"),
        ("Kid", ["Mom", "Kid"], "assistant", "Kid's answer", None),
        *back_to("Kid", "Mom", ["Mom", "Kid"]),
        ("Mom", ["Mom", "Kid", "Mom"], "assistant", "Thanks, Kid.", None),
    ]
    call_message = events[3].get_message()
    result = events[4].get_message()
    assert call_message is not None and result is not None
    [tool_call] = call_message.tool_calls
    assert tool_call.function.name == TRANSFER_TOOL_NAME
    assert json.loads(tool_call.function.arguments) == {"agent_name": "Mom"}
    assert result == tool_message(done("Mom"), tool_call.id, TRANSFER_TOOL_NAME)
    assert events[3].output is not None and events[3].output.message_output is not None
    assert events[3].output.message_output.role is Role.ASSISTANT
    # The hooks reach the wrapped agent: it is offered its parent like any sub-agent.
    assert kid_model.calls[0].messages[0] == system_message(
        "Kid.\n\n" + transfer_instruction(("Mom", "mother"))
    )
    assert mom_model.calls[1].messages[-3:] == [
        context("[Kid] said: Kid's answer."),
        context('[Kid] called tool: `transfer_to_agent` with arguments: {"agent_name": "Mom"}.'),
        context(f"[Kid] `transfer_to_agent` tool returned result: {done('Mom')}."),
    ]


def test_several_destinations_emit_pairs_in_order_and_the_flow_takes_the_last() -> None:
    a_model = ScriptedChatModel([])
    b_model = ScriptedChatModel(["B speaking."])
    mom = ChatModelAgent("Mom", "mother", ScriptedChatModel([transfer("Kid", "m1")]))
    kid = agent_with_deterministic_transfer_to(
        ChatModelAgent("Kid", "a kid", ScriptedChatModel(["done"])), ["A", "B"]
    )
    kid_flow = set_sub_agents(
        kid, [ChatModelAgent("A", "a", a_model), ChatModelAgent("B", "b", b_model)]
    )
    events = run(set_sub_agents(mom, [kid_flow]), "hi")
    assert [summarize(e) for e in events][2:] == [
        ("Kid", ["Mom", "Kid"], "assistant", "done", None),
        *back_to("Kid", "A", ["Mom", "Kid"]),
        *back_to("Kid", "B", ["Mom", "Kid"]),
        ("B", ["Mom", "Kid", "B"], "assistant", "B speaking.", None),
    ]
    assert a_model.calls == []


def test_an_agent_that_transfers_by_itself_is_not_overridden() -> None:
    helper_model = ScriptedChatModel(["Helper answers."])
    kid = agent_with_deterministic_transfer_to(
        ChatModelAgent("Kid", "a kid", ScriptedChatModel([transfer("Helper", "k1")])), ["Mom"]
    )
    flow = set_sub_agents(kid, [ChatModelAgent("Helper", "helps", helper_model)])
    events = run(flow, "hi")
    assert [summarize(e) for e in events] == [
        ("Kid", ["Kid"], "assistant", "", None),
        ("Kid", ["Kid"], "tool/transfer_to_agent", done("Helper"), "transfer:Helper"),
        ("Helper", ["Kid", "Helper"], "assistant", "Helper answers.", None),
    ]


def test_no_transfer_after_exit() -> None:
    mom_model = ScriptedChatModel([transfer("Kid", "m1")])
    kid_model = ScriptedChatModel([calls_message(call("exit", {"final_result": "bye"}, id="e1"))])
    mom = ChatModelAgent("Mom", "mother", mom_model)
    kid = agent_with_deterministic_transfer_to(
        ChatModelAgent("Kid", "a kid", kid_model, exit_tool=ExitTool()), ["Mom"]
    )
    events = run(set_sub_agents(mom, [kid]), "hi")
    assert [summarize(e) for e in events][2:] == [
        ("Kid", ["Mom", "Kid"], "assistant", "", None),
        ("Kid", ["Mom", "Kid"], "tool/exit", "bye", "exit"),
    ]
    assert len(mom_model.calls) == 1


def test_bare_run_emits_unnamed_transfer_pair() -> None:
    agent = agent_with_deterministic_transfer_to(
        ChatModelAgent("Kid", "a kid", ScriptedChatModel(["hello"])), ["Mom"]
    )
    events = run_events(agent.run(AgentInput(messages=[user_message("hi")])))
    assert [summarize(e) for e in events] == [
        ("", [], "assistant", "hello", None),
        ("", [], "assistant", "", None),
        ("", [], "tool/transfer_to_agent", done("Mom"), "transfer:Mom"),
    ]


def test_wrapper_delegates_name_description_and_type() -> None:
    inner = ChatModelAgent("Kid", "a kid", ScriptedChatModel([]))
    agent = agent_with_deterministic_transfer_to(inner, ["Mom"])
    assert (agent.name, agent.description) == ("Kid", "a kid")
    assert agent.get_type() == "ChatModel"  # type: ignore[attr-defined]
    assert "to_agent_names=['Mom']" in repr(agent)

    class Custom:
        name = "Custom"
        description = "no get_type"

        def run(self, input: AgentInput, *options: object) -> None:
            raise NotImplementedError

    untyped = agent_with_deterministic_transfer_to(Custom(), ["Mom"])  # type: ignore[arg-type]
    assert untyped.get_type() == "DeterministicTransfer"  # type: ignore[attr-defined]


def test_to_agent_names_must_be_a_list_of_names() -> None:
    inner = ChatModelAgent("Kid", "a kid", ScriptedChatModel([]))
    with pytest.raises(AgentConfigError, match=r"write \['Mom'\]"):
        agent_with_deterministic_transfer_to(inner, "Mom")
    with pytest.raises(AgentConfigError, match="invalid agent name"):
        agent_with_deterministic_transfer_to(inner, [""])


class Reporter:
    """A custom (non-built-in) agent that answers with what it was told."""

    name = "Reporter"
    description = "reports"

    def __init__(self) -> None:
        self.inputs: list[list[Message]] = []

    def run(self, input: AgentInput, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
        self.inputs.append(list(input.messages))

        def work(generator: AsyncGenerator[AgentEvent]) -> None:
            text = f"I saw {len(input.messages)} messages"
            generator.send(event_from_message(assistant_message(text), None, Role.ASSISTANT))

        return run_in_worker(work)


def test_custom_agent_is_wrapped_and_transfers_back() -> None:
    reporter = Reporter()
    boss_model = ScriptedChatModel([transfer("Reporter", "b1"), "Noted."])
    team = supervisor.new(ChatModelAgent("Boss", "boss", boss_model), [reporter])
    events = run(team, "report please")
    assert [summarize(e) for e in events][2:] == [
        ("Reporter", ["Boss", "Reporter"], "assistant", "I saw 3 messages", None),
        *back_to("Reporter", "Boss", ["Boss", "Reporter"]),
        ("Boss", ["Boss", "Reporter", "Boss"], "assistant", "Noted.", None),
    ]


def test_interrupt_passes_through_and_resume_then_transfers() -> None:
    @tool
    def approve(item: str) -> str:
        """Ask a human to approve an item."""
        return "approved" if interrupt(f"approve {item}?") else "rejected"

    mom_model = ScriptedChatModel([transfer("Kid", "m1"), "Mom wraps up."])
    kid_model = ScriptedChatModel([calls_message(call("approve", {"item": "cake"}, id="a1")), "Cake approved"])
    kid = agent_with_deterministic_transfer_to(
        ChatModelAgent("Kid", "a kid", kid_model, tools=[approve]), ["Mom"]
    )
    runner = Runner(
        set_sub_agents(ChatModelAgent("Mom", "mother", mom_model), [kid]),
        checkpoint_store=InMemoryCheckPointStore(),
    )
    first = run_events(runner.query("cake?", with_checkpoint_id("cp")))
    assert [summarize(e) for e in first][2:] == [
        ("Kid", ["Mom", "Kid"], "assistant", "", None),
        ("Kid", ["Mom", "Kid"], "", "", "interrupt"),
    ]
    assert first[-1].action is not None and first[-1].action.interrupted is not None
    [point] = first[-1].action.interrupted.contexts
    assert point.info == "approve cake?"
    assert point.address == ("agent:Mom", "agent:Kid", "tool:approve:a1")

    resumed = run_events(runner.resume("cp", targets={point.id: True}))
    assert [summarize(e) for e in resumed] == [
        ("Kid", ["Mom", "Kid"], "tool/approve", "approved", None),
        ("Kid", ["Mom", "Kid"], "assistant", "Cake approved", None),
        *back_to("Kid", "Mom", ["Mom", "Kid"]),
        ("Mom", ["Mom", "Kid", "Mom"], "assistant", "Mom wraps up.", None),
    ]
    assert mom_model.calls[1].messages[-4:-2] == [
        context("[Kid] `approve` tool returned result: approved."),
        context("[Kid] said: Cake approved."),
    ]


def test_error_in_the_agent_still_transfers_back() -> None:
    # Eino behaviour (spec 3.10, issue #782): only an interrupt or Exit suppresses the transfer.
    boss_model = ScriptedChatModel([transfer("Worker", "b1"), "I will handle it myself."])
    worker = ChatModelAgent("Worker", "works", ScriptedChatModel([ModelError("model down")]))
    events = run(supervisor.new(ChatModelAgent("Boss", "boss", boss_model), [worker]), "task")
    assert [summarize(e) for e in events][2:] == [
        ("Worker", ["Boss", "Worker"], "error", "model down", None),
        *back_to("Worker", "Boss", ["Boss", "Worker"]),
        ("Boss", ["Boss", "Worker", "Boss"], "assistant", "I will handle it myself.", None),
    ]


def test_cancelled_run_does_not_transfer_back() -> None:
    handle = CancelHandle()

    @tool
    def stop_everything() -> str:
        """Cancels the run (as a user would, from another thread)."""
        handle.cancel()
        return "stopping"

    boss_model = ScriptedChatModel([transfer("Worker", "b1")])
    worker_model = ScriptedChatModel([calls_message(call("stop_everything", id="s1"))])
    worker = ChatModelAgent("Worker", "works", worker_model, tools=[stop_everything])
    team = supervisor.new(ChatModelAgent("Boss", "boss", boss_model), [worker])
    events = run(team, "task", with_cancel(handle))
    # the cancel arrived while the tool ran: its result is discarded, not delivered
    assert [summarize(e)[:3] for e in events][2:] == [
        ("Worker", ["Boss", "Worker"], "assistant"),
        ("Worker", ["Boss", "Worker"], "error"),
    ]
    assert isinstance(events[-1].err, AgentCancelledError)
    assert len(boss_model.calls) == 1


# --- supervisor ---------------------------------------------------------------------------------


def test_supervisor_round_trip_events_run_paths_and_model_inputs() -> None:
    sup_model = ScriptedChatModel([transfer("Worker", "s1"), "all done"])
    worker_model = ScriptedChatModel(["worker result"])
    sup = ChatModelAgent("Sup", "supervises", sup_model, instruction="You supervise.")
    worker = ChatModelAgent("Worker", "does the work", worker_model, instruction="You work.")
    team = supervisor.new(sup, [worker])
    assert (team.name, team.description) == ("Sup", "supervises")
    events = run(team, "task")
    assert [summarize(e) for e in events] == [
        ("Sup", ["Sup"], "assistant", "", None),
        ("Sup", ["Sup"], "tool/transfer_to_agent", done("Worker"), "transfer:Worker"),
        ("Worker", ["Sup", "Worker"], "assistant", "worker result", None),
        *back_to("Worker", "Sup", ["Sup", "Worker"]),
        ("Sup", ["Sup", "Worker", "Sup"], "assistant", "all done", None),
    ]
    sup_prompt = system_message(
        "You supervise.\n\n" + transfer_instruction(("Worker", "does the work"))
    )
    assert sup_model.calls[0].messages == [sup_prompt, user_message("task")]
    assert [t.name for t in sup_model.calls[0].tools] == [TRANSFER_TOOL_NAME]
    # The worker is offered no transfer tool: going back is deterministic.
    assert worker_model.calls[0].messages == [
        system_message("You work."),
        user_message("task"),
        context('[Sup] called tool: `transfer_to_agent` with arguments: {"agent_name": "Worker"}.'),
        context(f"[Sup] `transfer_to_agent` tool returned result: {done('Worker')}."),
    ]
    assert worker_model.calls[0].tools == []
    assert sup_model.calls[1].messages == [
        sup_prompt,
        user_message("task"),
        transfer("Worker", "s1"),
        tool_message(done("Worker"), "s1", TRANSFER_TOOL_NAME),
        context("[Worker] said: worker result."),
        context('[Worker] called tool: `transfer_to_agent` with arguments: {"agent_name": "Sup"}.'),
        context(f"[Worker] `transfer_to_agent` tool returned result: {done('Sup')}."),
    ]


def test_supervisor_with_two_workers_in_streaming_mode() -> None:
    sup_model = ScriptedChatModel([transfer("Research", "s1"), transfer("Writer", "s2"), "Report ready."])
    research_model = ScriptedChatModel(
        [calls_message(call("search", {"topic": "tides"}, id="r1")), "Tides follow the moon"]
    )
    writer_model = ScriptedChatModel(["# Tides\nThey follow the moon."])
    team = supervisor.new(
        ChatModelAgent("Sup", "supervises", sup_model),
        [
            ChatModelAgent("Research", "finds facts", research_model, tools=[search]),
            ChatModelAgent("Writer", "writes", writer_model),
        ],
    )
    events = run(team, "Write about tides.", streaming=True)
    assert [summarize(e) for e in events] == [
        ("Sup", ["Sup"], "assistant", "", None),
        ("Sup", ["Sup"], "tool/transfer_to_agent", done("Research"), "transfer:Research"),
        ("Research", ["Sup", "Research"], "assistant", "", None),
        ("Research", ["Sup", "Research"], "tool/search", "notes on tides", None),
        ("Research", ["Sup", "Research"], "assistant", "Tides follow the moon", None),
        *back_to("Research", "Sup", ["Sup", "Research"]),
        ("Sup", ["Sup", "Research", "Sup"], "assistant", "", None),
        ("Sup", ["Sup", "Research", "Sup"], "tool/transfer_to_agent", done("Writer"), "transfer:Writer"),
        ("Writer", ["Sup", "Research", "Sup", "Writer"], "assistant", "# Tides\nThey follow the moon.", None),
        *back_to("Writer", "Sup", ["Sup", "Research", "Sup", "Writer"]),
        ("Sup", ["Sup", "Research", "Sup", "Writer", "Sup"], "assistant", "Report ready.", None),
    ]
    assert sup_model.calls[0].messages[0].content == transfer_instruction(
        ("Research", "finds facts"), ("Writer", "writes")
    )
    assert [t.name for t in research_model.calls[0].tools] == ["search"]
    # The writer sees the research, rewritten as context.
    assert context("[Research] said: Tides follow the moon.") in writer_model.calls[0].messages


def test_worker_exit_ends_the_whole_run() -> None:
    sup_model = ScriptedChatModel([transfer("Worker", "s1")])
    worker_model = ScriptedChatModel([calls_message(call("exit", {"final_result": "final!"}, id="e1"))])
    team = supervisor.new(
        ChatModelAgent("Sup", "supervises", sup_model),
        [ChatModelAgent("Worker", "works", worker_model, exit_tool=ExitTool())],
    )
    events = run(team, "task")
    assert [summarize(e) for e in events] == [
        ("Sup", ["Sup"], "assistant", "", None),
        ("Sup", ["Sup"], "tool/transfer_to_agent", done("Worker"), "transfer:Worker"),
        ("Worker", ["Sup", "Worker"], "assistant", "", None),
        ("Worker", ["Sup", "Worker"], "tool/exit", "final!", "exit"),
    ]
    assert len(sup_model.calls) == 1


def test_supervisor_rejects_ambiguous_worker_names() -> None:
    def agent(name: str) -> ChatModelAgent:
        return ChatModelAgent(name, "d", ScriptedChatModel([]))

    with pytest.raises(AgentConfigError, match="named like the supervisor"):
        supervisor.new(agent("Sup"), [agent("Sup")])
    with pytest.raises(AgentConfigError, match="two workers are named 'W'"):
        supervisor.new(agent("Sup"), [agent("W"), agent("W")])


def test_a_workflow_can_be_a_worker() -> None:
    sup_model = ScriptedChatModel([transfer("Pipeline", "s1"), "ok"])
    pipeline = SequentialAgent(
        "Pipeline",
        "two steps",
        [
            ChatModelAgent("Step1", "first", ScriptedChatModel(["one"])),
            ChatModelAgent("Step2", "second", ScriptedChatModel(["two"])),
        ],
    )
    events = run(supervisor.new(ChatModelAgent("Sup", "s", sup_model), [pipeline]), "go")
    assert [summarize(e) for e in events][2:] == [
        ("Step1", ["Sup", "Pipeline", "Step1"], "assistant", "one", None),
        ("Step2", ["Sup", "Pipeline", "Step1", "Step2"], "assistant", "two", None),
        *back_to("Pipeline", "Sup", ["Sup", "Pipeline"]),
        ("Sup", ["Sup", "Pipeline", "Sup"], "assistant", "ok", None),
    ]
    assert sup_model.calls[1].messages[4:6] == [
        context("[Step1] said: one."),
        context("[Step2] said: two."),
    ]


# --- nested supervisors (a flow inside a deterministic-transfer wrapper) ---------------------------


def nested_team(
    top_script: Sequence[object], mid_script: Sequence[object], leaf: ChatModelAgent
) -> tuple[Agent, ScriptedChatModel, ScriptedChatModel]:
    top_model = ScriptedChatModel(list(top_script))  # type: ignore[arg-type]
    mid_model = ScriptedChatModel(list(mid_script))  # type: ignore[arg-type]
    mid = supervisor.new(ChatModelAgent("Mid", "middle manager", mid_model), [leaf])
    top = supervisor.new(ChatModelAgent("Top", "boss", top_model), [mid])
    return top, top_model, mid_model


def test_nested_supervisor_runs_with_its_own_history_and_reports_back() -> None:
    leaf_model = ScriptedChatModel(["leaf work"])
    team, top_model, mid_model = nested_team(
        [transfer("Mid", "t1"), "top done"],
        [transfer("Leaf", "m1"), "mid done"],
        ChatModelAgent("Leaf", "does things", leaf_model),
    )
    events = run(team, "go", with_session_values({"team": "blue"}))
    assert [summarize(e) for e in events] == [
        ("Top", ["Top"], "assistant", "", None),
        ("Top", ["Top"], "tool/transfer_to_agent", done("Mid"), "transfer:Mid"),
        ("Mid", ["Top", "Mid"], "assistant", "", None),
        ("Mid", ["Top", "Mid"], "tool/transfer_to_agent", done("Leaf"), "transfer:Leaf"),
        ("Leaf", ["Top", "Mid", "Leaf"], "assistant", "leaf work", None),
        *back_to("Leaf", "Mid", ["Top", "Mid", "Leaf"]),
        ("Mid", ["Top", "Mid", "Leaf", "Mid"], "assistant", "mid done", None),
        *back_to("Mid", "Top", ["Top", "Mid"]),
        ("Top", ["Top", "Mid", "Top"], "assistant", "top done", None),
    ]
    # The nested flow starts from the run's input only, not from Top's turn.
    assert mid_model.calls[0].messages[1:] == [user_message("go")]
    # Everything that happened inside is in the history Top sees afterwards.
    assert [m.content for m in top_model.calls[1].messages[4:]] == [
        'For context: [Mid] called tool: `transfer_to_agent` with arguments: {"agent_name": "Leaf"}.',
        f"For context: [Mid] `transfer_to_agent` tool returned result: {done('Leaf')}.",
        "For context: [Leaf] said: leaf work.",
        'For context: [Leaf] called tool: `transfer_to_agent` with arguments: {"agent_name": "Mid"}.',
        f"For context: [Leaf] `transfer_to_agent` tool returned result: {done('Mid')}.",
        "For context: [Mid] said: mid done.",
        'For context: [Mid] called tool: `transfer_to_agent` with arguments: {"agent_name": "Top"}.',
        f"For context: [Mid] `transfer_to_agent` tool returned result: {done('Top')}.",
    ]


def test_options_designated_to_an_agent_inside_a_nested_supervisor_reach_it() -> None:
    leaf_model = ScriptedChatModel(["leaf work"])
    team, top_model, mid_model = nested_team(
        [transfer("Mid", "t1"), "top done"],
        [transfer("Leaf", "m1"), "mid done"],
        ChatModelAgent("Leaf", "does things", leaf_model),
    )
    run(team, "go", with_chat_model_options(max_tokens=7).designate_agent("Leaf"))
    assert leaf_model.calls[0].options is not None
    assert leaf_model.calls[0].options.max_tokens == 7
    assert [c.options for c in top_model.calls + mid_model.calls] == [None] * 4


def test_nested_supervisor_exit_ends_the_whole_run() -> None:
    leaf_model = ScriptedChatModel([calls_message(call("exit", {"final_result": "stop"}, id="x1"))])
    team, top_model, mid_model = nested_team(
        [transfer("Mid", "t1")],
        [transfer("Leaf", "m1")],
        ChatModelAgent("Leaf", "does things", leaf_model, exit_tool=ExitTool()),
    )
    events = run(team, "go")
    assert [summarize(e) for e in events][-2:] == [
        ("Leaf", ["Top", "Mid", "Leaf"], "assistant", "", None),
        ("Leaf", ["Top", "Mid", "Leaf"], "tool/exit", "stop", "exit"),
    ]
    assert (len(top_model.calls), len(mid_model.calls)) == (1, 1)


def test_nested_supervisor_interrupt_is_wrapped_and_resumes() -> None:
    @tool
    def pay(amount: int) -> str:
        """Pay after approval."""
        return "paid" if interrupt(f"pay {amount}?") else "declined"

    @tool
    def remember() -> str:
        """Reads a session value set before the interrupt."""
        return str(get_session_value("budget"))

    leaf_model = ScriptedChatModel(
        [calls_message(call("pay", {"amount": 3}, id="p1")), calls_message(call("remember", id="r1")), "paid 3"]
    )
    team, top_model, mid_model = nested_team(
        [transfer("Mid", "t1"), "top done"],
        [transfer("Leaf", "m1"), "mid done"],
        ChatModelAgent("Leaf", "pays", leaf_model, tools=[pay, remember]),
    )
    runner = Runner(team, checkpoint_store=InMemoryCheckPointStore())
    first = run_events(runner.query("pay 3", with_checkpoint_id("n1"), with_session_values({"budget": 10})))
    last = first[-1]
    assert summarize(last) == ("Mid", ["Top", "Mid"], "", "", "interrupt")
    assert last.action is not None and last.action.interrupted is not None
    [point] = last.action.interrupted.contexts
    assert point.info == "pay 3?"
    chain = []
    node = point.parent
    while node is not None:
        chain.append((node.address, node.info))
        node = node.parent
    assert chain[-1] == (("agent:Top", "agent:Mid"), "deterministic transfer wrapper interrupted")
    assert point.address[:2] == ("agent:Top", "agent:Mid")
    assert point.address[-2:] == ("agent:Leaf", "tool:pay:p1")

    resumed = run_events(runner.resume("n1", targets={point.id: True}))
    assert [summarize(e) for e in resumed] == [
        ("Leaf", ["Top", "Mid", "Leaf"], "tool/pay", "paid", None),
        ("Leaf", ["Top", "Mid", "Leaf"], "assistant", "", None),
        ("Leaf", ["Top", "Mid", "Leaf"], "tool/remember", "10", None),
        ("Leaf", ["Top", "Mid", "Leaf"], "assistant", "paid 3", None),
        *back_to("Leaf", "Mid", ["Top", "Mid", "Leaf"]),
        ("Mid", ["Top", "Mid", "Leaf", "Mid"], "assistant", "mid done", None),
        *back_to("Mid", "Top", ["Top", "Mid"]),
        ("Top", ["Top", "Mid", "Top"], "assistant", "top done", None),
    ]
    # The nested flow's history came back from the checkpoint: Mid sees its first turn.
    assert mid_model.calls[1].messages[2] == transfer("Leaf", "m1")
    assert context('[Leaf] called tool: `pay` with arguments: {"amount": 3}.') in top_model.calls[1].messages


@pytest.mark.parametrize("nested", [False, True], ids=["worker", "nested-supervisor"])
def test_cancel_inside_a_worker_saves_a_checkpoint_and_resume_reports_back(nested: bool) -> None:
    handle = CancelHandle()

    @tool
    def act() -> str:
        """Runs after the resume."""
        return "acted"

    def reply(messages: list[Message]) -> Message:
        handle.cancel(CancelMode.AFTER_CHAT_MODEL)  # the user cancels while the model answers
        return calls_message(call("act", id="a1"))

    leaf = ChatModelAgent("Leaf", "acts", ScriptedChatModel([reply, "leaf finished"]), tools=[act])
    if nested:
        team, _, _ = nested_team([transfer("Mid", "t1"), "top done"], [transfer("Leaf", "m1"), "mid done"], leaf)
        leaf_path = ["Top", "Mid", "Leaf"]
        rest = [
            *back_to("Leaf", "Mid", leaf_path),
            ("Mid", [*leaf_path, "Mid"], "assistant", "mid done", None),
            *back_to("Mid", "Top", ["Top", "Mid"]),
            ("Top", ["Top", "Mid", "Top"], "assistant", "top done", None),
        ]
    else:
        top = ChatModelAgent("Top", "boss", ScriptedChatModel([transfer("Leaf", "t1"), "top done"]))
        team = supervisor.new(top, [leaf])
        leaf_path = ["Top", "Leaf"]
        rest = [
            *back_to("Leaf", "Top", leaf_path),
            ("Top", [*leaf_path, "Top"], "assistant", "top done", None),
        ]
    runner = Runner(team, checkpoint_store=InMemoryCheckPointStore())
    first = run_events(runner.query("go", with_cancel(handle), with_checkpoint_id("k")))
    assert summarize(first[-1])[:3] == ("Leaf", leaf_path, "error")
    assert isinstance(first[-1].err, AgentCancelledError)
    resumed = run_events(runner.resume("k"))
    assert [summarize(e) for e in resumed] == [
        ("Leaf", leaf_path, "tool/act", "acted", None),
        ("Leaf", leaf_path, "assistant", "leaf finished", None),
        *rest,
    ]


def test_resuming_a_flow_wrapper_without_its_state_is_an_error_event() -> None:
    flow = set_sub_agents(
        ChatModelAgent("Mid", "m", ScriptedChatModel([])),
        [ChatModelAgent("Leaf", "l", ScriptedChatModel([]))],
    )
    agent = agent_with_deterministic_transfer_to(flow, ["Top"])
    events = run_events(agent.resume(ResumeInfo(was_interrupted=True, interrupt_state="junk")))  # type: ignore[attr-defined]
    assert [summarize(e) for e in events] == [
        (
            "",
            [],
            "error",
            "cannot resume agent 'Mid': it runs a flow of its own, whose saved history is "
            "missing (its interrupt state is str, not a DeterministicTransferState); resume with "
            "the checkpoint the run saved",
            None,
        )
    ]


def test_transfer_tool_info_is_offered_to_the_supervisor_only() -> None:
    sup_model = ScriptedChatModel(["I can answer that myself."])
    worker_model = ScriptedChatModel([])
    team = supervisor.new(
        ChatModelAgent("Sup", "s", sup_model),
        [ChatModelAgent("Worker", "w", worker_model, tools=[search])],
    )
    events = run(team, "simple question")
    assert [summarize(e) for e in events] == [
        ("Sup", ["Sup"], "assistant", "I can answer that myself.", None)
    ]
    [info] = sup_model.calls[0].tools
    assert info == ToolInfo(
        name="transfer_to_agent",
        description="Transfer the question to another agent.",
        parameters={
            "type": "object",
            "properties": {
                "agent_name": {"type": "string", "description": "the name of the agent to transfer to"}
            },
            "required": ["agent_name"],
        },
    )
