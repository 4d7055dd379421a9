"""AgentTool: an agent used as a tool."""

from __future__ import annotations

import json
import threading
import time

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentTool,
    CancelHandle,
    ChatModelAgent,
    ExitTool,
    MessageVariant,
    ModelError,
    Role,
    Runner,
    ToolError,
    add_session_value,
    get_session_value,
    get_tool_options,
    interrupt,
    tool,
    with_cancel,
    with_chat_model_options,
    with_checkpoint_id,
    with_session_values,
    with_tool_options,
)
from agentkit.agents.agenttool import AgentToolRetryConfig
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import AgentConfigError
from agentkit.models import ScriptedChatModel
from agentkit.options import with_agent_tool_run_options
from agentkit.testing import call, calls_message, run_events, summarize


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    add_session_value("looked_up", topic)
    return f"facts about {topic}"


def researcher(model: ScriptedChatModel) -> ChatModelAgent:
    return ChatModelAgent("Researcher", "researches topics", model, tools=[lookup])


def test_info_comes_from_the_agent_with_a_request_parameter() -> None:
    info = AgentTool(researcher(ScriptedChatModel([]))).info()
    assert (info.name, info.description) == ("Researcher", "researches topics")
    assert info.parameters == {
        "type": "object",
        "properties": {"request": {"type": "string", "description": "request to be processed"}},
        "required": ["request"],
    }


def test_agent_without_name_or_description_is_rejected() -> None:
    with pytest.raises(AgentConfigError, match="AgentTool needs an agent with a name"):
        AgentTool(ChatModelAgent("", "d", ScriptedChatModel([])))
    with pytest.raises(AgentConfigError, match="AgentTool needs an agent with a description"):
        AgentTool(ChatModelAgent("n", "", ScriptedChatModel([])))


def variant_of(event: AgentEvent) -> MessageVariant:
    """The message an event carries (every event of these runs carries one)."""
    assert event.output is not None and event.output.message_output is not None
    return event.output.message_output


def boss(inner_model: ScriptedChatModel, boss_model: ScriptedChatModel, **kwargs) -> ChatModelAgent:  # type: ignore[no-untyped-def]
    return ChatModelAgent(
        "Boss", "delegates", boss_model, tools=[AgentTool(researcher(inner_model))], **kwargs
    )


def inner_script() -> ScriptedChatModel:
    return ScriptedChatModel(
        [calls_message(call("lookup", {"topic": "owls"}, id="i1")), "owls are birds"]
    )


def test_result_is_the_inner_final_message_and_inner_events_stay_inside() -> None:
    inner = inner_script()
    outer = ScriptedChatModel(
        [calls_message(call("Researcher", {"request": "owls?"}, id="o1")), "summary"]
    )
    events = run_events(Runner(boss(inner, outer)).query("tell me about owls"))
    assert [summarize(e) for e in events] == [
        ("Boss", ["Boss"], "assistant", "", None),
        ("Boss", ["Boss"], "tool/Researcher", "owls are birds", None),
        ("Boss", ["Boss"], "assistant", "summary", None),
    ]
    assert inner.calls[0].messages[-1].content == "owls?"
    assert inner.calls[0].messages[-1].role is Role.USER
    assert len(inner.calls[0].messages) == 1


def test_emit_internal_events_forwards_inner_events_with_nested_run_paths() -> None:
    inner = inner_script()
    outer = ScriptedChatModel(
        [calls_message(call("Researcher", {"request": "owls?"}, id="o1")), "summary"]
    )
    events = run_events(Runner(boss(inner, outer, emit_internal_events=True)).query("owls"))
    assert [summarize(e) for e in events] == [
        ("Boss", ["Boss"], "assistant", "", None),
        ("Researcher", ["Boss", "Researcher"], "assistant", "", None),
        ("Researcher", ["Boss", "Researcher"], "tool/lookup", "facts about owls", None),
        ("Researcher", ["Boss", "Researcher"], "assistant", "owls are birds", None),
        ("Boss", ["Boss"], "tool/Researcher", "owls are birds", None),
        ("Boss", ["Boss"], "assistant", "summary", None),
    ]
    # forwarded events are not part of the outer history
    assert [m.role for m in outer.calls[1].messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]


def test_streaming_caller_streams_the_inner_run() -> None:
    inner = inner_script()
    outer = ScriptedChatModel([calls_message(call("Researcher", {"request": "q"})), "done"])
    events = run_events(
        Runner(boss(inner, outer, emit_internal_events=True), enable_streaming=True).query("x")
    )
    assert inner.calls[0].streaming
    forwarded = [
        e
        for e in events
        if e.agent_name == "Researcher" and variant_of(e).role is Role.ASSISTANT
    ]
    assert all(variant_of(e).is_streaming for e in forwarded)
    assert forwarded[-1].get_message().content == "owls are birds"  # type: ignore[union-attr]


def test_session_values_are_shared_both_ways() -> None:
    seen: list[object] = []

    @tool
    def check() -> str:
        """Read what the inner agent wrote."""
        seen.append(get_session_value("looked_up"))
        return "checked"

    inner = ScriptedChatModel(
        [
            lambda messages: calls_message(
                call("lookup", {"topic": str(get_session_value("who"))})
            ),
            "inner done",
        ]
    )
    outer = ScriptedChatModel(
        [
            calls_message(call("Researcher", {"request": "go"})),
            calls_message(call("check")),
            "end",
        ]
    )
    agent = ChatModelAgent("Boss", "d", outer, tools=[AgentTool(researcher(inner)), check])
    run_events(Runner(agent).query("x", with_session_values({"who": "ada"})))
    assert seen == ["ada"]


def test_inner_exit_does_not_end_the_outer_run() -> None:
    inner = ScriptedChatModel([calls_message(call("exit", {"final_result": "inner final"}))])
    inner_agent = ChatModelAgent("Quitter", "quits", inner, exit_tool=ExitTool())
    outer = ScriptedChatModel([calls_message(call("Quitter", {"request": "q"})), "outer continues"])
    events = run_events(
        Runner(ChatModelAgent("Boss", "d", outer, tools=[AgentTool(inner_agent)])).query("x")
    )
    assert [summarize(e)[2:] for e in events] == [
        ("assistant", "", None),
        ("tool/Quitter", "inner final", None),
        ("assistant", "outer continues", None),
    ]


def test_inner_error_becomes_the_tool_error() -> None:
    inner = ScriptedChatModel([ValueError("inner broke")])
    outer = ScriptedChatModel([calls_message(call("Researcher", {"request": "q"}, id="o"))])
    events = run_events(Runner(boss(inner, outer)).query("x"))
    assert "tool 'Researcher' (call o) raised " in str(events[-1].err)
    assert "inner broke" in str(events[-1].err)


def test_custom_input_schema_passes_raw_arguments() -> None:
    inner = ScriptedChatModel(["ok"])
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    agent_tool = AgentTool(ChatModelAgent("Geo", "geography", inner), input_schema=schema)
    assert agent_tool.info().parameters == schema
    outer = ScriptedChatModel([calls_message(call("Geo", {"city": "Oslo"})), "done"])
    run_events(Runner(ChatModelAgent("Boss", "d", outer, tools=[agent_tool])).query("x"))
    assert json.loads(inner.calls[0].messages[-1].content) == {"city": "Oslo"}


def test_full_chat_history_as_input_rewrites_the_callers_conversation() -> None:
    inner = ScriptedChatModel(["inner answer"])
    agent_tool = AgentTool(
        ChatModelAgent("Helper", "helps", inner), full_chat_history_as_input=True
    )
    outer = ScriptedChatModel(
        [
            calls_message(
                call("Helper", {"request": "ignored"}), content="first assistant response"
            ),
            "done",
        ]
    )
    run_events(
        Runner(ChatModelAgent("Boss", "d", outer, instruction="sys", tools=[agent_tool])).query(
            "question"
        )
    )
    texts = [m.content for m in inner.calls[0].messages]
    assert texts[0] == "question"
    assert texts[1].startswith(
        "For context: [Boss] called tool: `transfer_to_agent` with arguments:"
    )
    assert (
        texts[2]
        == "For context: [Boss] `transfer_to_agent` tool returned result: successfully transferred to agent [Helper]."
    )
    assert all(m.role is Role.USER for m in inner.calls[0].messages)


def test_nested_agent_tools_compose_run_paths() -> None:
    innermost = ScriptedChatModel(["deep answer"])
    middle = ScriptedChatModel([calls_message(call("Deep", {"request": "q2"})), "middle answer"])
    middle_agent = ChatModelAgent(
        "Middle",
        "m",
        middle,
        tools=[AgentTool(ChatModelAgent("Deep", "d", innermost))],
        emit_internal_events=True,
    )
    outer = ScriptedChatModel([calls_message(call("Middle", {"request": "q1"})), "top answer"])
    top = ChatModelAgent(
        "Top", "t", outer, tools=[AgentTool(middle_agent)], emit_internal_events=True
    )
    events = run_events(Runner(top).query("x"))
    paths = [summarize(e)[1] for e in events]
    assert ["Top", "Middle", "Deep"] in paths
    assert summarize(events[-1]) == ("Top", ["Top"], "assistant", "top answer", None)


def test_interrupt_inside_an_agent_tool_surfaces_and_resumes_through_the_caller() -> None:
    @tool
    def pay(amount: int) -> str:
        """Pay after approval."""
        return f"paid {amount}" if interrupt("approve?") else "declined"

    inner = ScriptedChatModel([calls_message(call("pay", {"amount": 4}, id="i1")), "inner paid"])
    payer = ChatModelAgent("Payer", "pays", inner, tools=[pay])
    outer = ScriptedChatModel(
        [calls_message(call("Payer", {"request": "pay 4"}, id="o1")), "boss done"]
    )
    agent = ChatModelAgent("Boss", "d", outer, tools=[AgentTool(payer)], emit_internal_events=True)
    store = InMemoryCheckPointStore()
    runner = Runner(agent, checkpoint_store=store)
    first = run_events(runner.query("x", with_checkpoint_id("n")))
    last = first[-1]
    assert summarize(last)[4] == "interrupt"
    (context,) = last.action.interrupted.contexts  # type: ignore[union-attr]
    assert ";".join(context.address) == "agent:Boss;tool:Payer:o1;agent:Payer;tool:pay:i1"
    chain = []
    node = context.parent
    while node is not None:
        chain.append((";".join(node.address), node.info))
        node = node.parent
    assert chain == [
        ("agent:Boss;tool:Payer:o1;agent:Payer", None),
        ("agent:Boss;tool:Payer:o1", "agent tool interrupt"),
        ("agent:Boss", None),
    ]
    rest = run_events(runner.resume("n", targets={context.id: True}))
    assert [summarize(e) for e in rest] == [
        ("Payer", ["Boss", "Payer"], "tool/pay", "paid 4", None),
        ("Payer", ["Boss", "Payer"], "assistant", "inner paid", None),
        ("Boss", ["Boss"], "tool/Payer", "inner paid", None),
        ("Boss", ["Boss"], "assistant", "boss done", None),
    ]


# --- run options reach the inner agent (Eino: WithAgentToolRunOptions) -----------------------


def owl_runner(inner: ScriptedChatModel, outer: ScriptedChatModel) -> Runner:
    return Runner(boss(inner, outer))


def owl_outer() -> ScriptedChatModel:
    return ScriptedChatModel(
        [calls_message(call("Researcher", {"request": "owls?"}, id="o1")), "summary"]
    )


def test_option_designated_to_the_inner_agent_reaches_its_model() -> None:
    # The regression: the inner agent of an AgentTool saw no run option at all.
    inner, outer = inner_script(), owl_outer()
    run_events(
        owl_runner(inner, outer).query(
            "owls", with_chat_model_options(temperature=0.1).designate_agent("Researcher")
        )
    )
    assert [c.options.temperature for c in inner.calls if c.options] == [0.1, 0.1]
    assert all(c.options is None for c in outer.calls)


def test_undesignated_model_options_reach_every_model_of_the_run() -> None:
    inner, outer = inner_script(), owl_outer()
    run_events(owl_runner(inner, outer).query("owls", with_chat_model_options(max_tokens=64)))
    assert {c.options.max_tokens for c in inner.calls + outer.calls if c.options} == {64}
    assert all(c.options is not None for c in inner.calls + outer.calls)


def test_agent_tool_run_options_reach_only_that_tools_agent() -> None:
    inner, outer = inner_script(), owl_outer()
    option = with_agent_tool_run_options(
        {"Researcher": [with_chat_model_options(temperature=0.3), with_tool_options(depth=2)]}
    )
    seen: list[object] = []

    @tool
    def lookup_depth(topic: str) -> str:
        """Look a topic up."""
        seen.append(get_tool_options().get("depth"))
        return "deep facts"

    inner = ScriptedChatModel(
        [calls_message(call("lookup_depth", {"topic": "owls"}, id="i1")), "owls are birds"]
    )
    agent = ChatModelAgent(
        "Boss",
        "delegates",
        outer,
        tools=[AgentTool(ChatModelAgent("Researcher", "r", inner, tools=[lookup_depth]))],
    )
    run_events(Runner(agent).query("owls", option, with_chat_model_options(temperature=0.9)))
    # The per-tool options come after the run's own, so they win for the inner agent.
    assert [c.options.temperature for c in inner.calls if c.options] == [0.3, 0.3]
    assert [c.options.temperature for c in outer.calls if c.options] == [0.9, 0.9]
    assert seen == [2]


def test_agent_tool_run_options_for_another_tool_are_not_seen() -> None:
    inner, outer = inner_script(), owl_outer()
    option = with_agent_tool_run_options({"Writer": [with_chat_model_options(temperature=0.3)]})
    run_events(owl_runner(inner, outer).query("owls", option))
    assert all(c.options is None for c in inner.calls)


def test_agent_tool_run_options_reach_the_inner_agent_on_resume() -> None:
    @tool
    def pay(amount: int) -> str:
        """Pay after approval."""
        return f"paid {amount}" if interrupt("approve?") else "declined"

    inner = ScriptedChatModel([calls_message(call("pay", {"amount": 5}, id="i1")), "inner paid"])
    outer = ScriptedChatModel(
        [calls_message(call("Payer", {"request": "pay 5"}, id="o1")), "boss done"]
    )
    payer = ChatModelAgent("Payer", "pays", inner, tools=[pay])
    agent = ChatModelAgent("Boss", "d", outer, tools=[AgentTool(payer)])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    first = with_agent_tool_run_options({"Payer": [with_chat_model_options(temperature=0.5)]})
    last = run_events(runner.query("go", with_checkpoint_id("pay-1"), first))[-1]
    (context,) = last.action.interrupted.contexts  # type: ignore[union-attr]
    # Options are per run: the resumed run gets its own (here another temperature).
    again = with_agent_tool_run_options({"Payer": [with_chat_model_options(temperature=0.7)]})
    run_events(runner.resume("pay-1", again, targets={context.id: True}))
    assert [c.options.temperature for c in inner.calls if c.options] == [0.5, 0.7]


def test_agent_tool_run_options_need_a_mapping_of_option_lists() -> None:
    with pytest.raises(TypeError, match="with_agent_tool_run_options"):
        with_agent_tool_run_options({"Researcher": [42]})  # type: ignore[list-item]
    with pytest.raises(TypeError, match="with_agent_tool_run_options"):
        with_agent_tool_run_options([("Researcher", [])])  # type: ignore[arg-type]


# --- retries of the whole call (Eino PR #1162: WithAgentToolRetry) ----------------------------


GUARD = 30.0


def no_wait(attempt: int) -> float:
    return 0.0


def flaky_boss(
    inner: ScriptedChatModel, outer: ScriptedChatModel, retry: AgentToolRetryConfig
) -> ChatModelAgent:
    return ChatModelAgent(
        "Boss", "delegates", outer, tools=[AgentTool(researcher(inner), retry=retry)]
    )


def test_agent_tool_retry_success_after_retry() -> None:
    inner = ScriptedChatModel(
        [
            calls_message(call("lookup", {"topic": "owls"}, id="i1")),
            ModelError("overloaded"),
            "owls are birds",
        ]
    )
    events = run_events(
        Runner(flaky_boss(inner, owl_outer(), AgentToolRetryConfig(backoff=no_wait))).query("q")
    )
    assert summarize(events[1]) == ("Boss", ["Boss"], "tool/Researcher", "owls are birds", None)
    # The second attempt is a fresh run of the agent: its input only, not the failed history.
    assert [m.content for m in inner.calls[2].messages] == ["owls?"]


def test_agent_tool_retry_exhausted_fails_with_the_last_original_error() -> None:
    inner = ScriptedChatModel([ModelError("one"), ModelError("two"), ModelError("three")])
    agent = flaky_boss(inner, owl_outer(), AgentToolRetryConfig(max_retries=2, backoff=no_wait))
    events = run_events(Runner(agent).query("q"))
    assert len(inner.calls) == 3
    err = events[-1].err
    assert isinstance(err, ToolError)
    assert type(err.__cause__) is ModelError and str(err.__cause__) == "three"


def test_agent_tool_retry_predicate_rejection() -> None:
    inner = ScriptedChatModel([ModelError("bad request"), "never"])
    retry = AgentToolRetryConfig(should_retry=lambda e: "overloaded" in str(e), backoff=no_wait)
    events = run_events(Runner(flaky_boss(inner, owl_outer(), retry)).query("q"))
    assert len(inner.calls) == 1
    assert str(events[-1].err.__cause__) == "bad request"  # type: ignore[union-attr]


def test_agent_tool_retry_never_retries_bad_arguments() -> None:
    inner = ScriptedChatModel(["never"])
    outer = ScriptedChatModel(
        [calls_message(call("Researcher", {"topic": "owls"}, id="o1")), "done"]
    )
    agent = flaky_boss(inner, outer, AgentToolRetryConfig(backoff=no_wait))
    run_events(Runner(agent).query("q"))
    assert inner.calls == []


def test_agent_tool_retry_interrupt_is_not_retried_and_resume_runs_once() -> None:
    @tool
    def pay(amount: int) -> str:
        """Pay after approval."""
        if not interrupt("approve?"):
            raise ModelError("declined upstream")
        return f"paid {amount}"

    inner = ScriptedChatModel([calls_message(call("pay", {"amount": 4}, id="i1")), "unused"])
    payer = ChatModelAgent("Payer", "pays", inner, tools=[pay])
    outer = ScriptedChatModel([calls_message(call("Payer", {"request": "pay"}, id="o1")), "x"])
    tool_ = AgentTool(payer, retry=AgentToolRetryConfig(max_retries=3, backoff=no_wait))
    runner = Runner(ChatModelAgent("Boss", "d", outer, tools=[tool_]),
                    checkpoint_store=InMemoryCheckPointStore())
    last = run_events(runner.query("x", with_checkpoint_id("r")))[-1]
    assert summarize(last)[4] == "interrupt" and len(inner.calls) == 1
    (context,) = last.action.interrupted.contexts  # type: ignore[union-attr]
    resumed = run_events(runner.resume("r", targets={context.id: False}))
    # The resumed call failed inside the run it resumed: it is not run again from the start.
    assert len(inner.calls) == 1
    assert "raised ModelError: declined upstream" in str(resumed[-1].err)


def test_agent_tool_retry_cancel_wakes_the_backoff() -> None:
    waiting = threading.Event()
    handle = CancelHandle()

    def backoff(attempt: int) -> float:
        waiting.set()
        return 60.0

    inner = ScriptedChatModel([ModelError("overloaded"), "never"])
    agent = flaky_boss(inner, owl_outer(), AgentToolRetryConfig(backoff=backoff))
    events = Runner(agent).query("q", with_cancel(handle))
    started = time.monotonic()
    assert waiting.wait(GUARD)
    handle.cancel()
    rest = run_events(events)
    assert time.monotonic() - started < GUARD
    assert isinstance(rest[-1].err, AgentCancelledError)
    assert len(inner.calls) == 1


def test_agent_tool_retry_config_is_checked() -> None:
    with pytest.raises(AgentConfigError, match="max_retries must be an int >= 0"):
        AgentToolRetryConfig(max_retries=-1)
    with pytest.raises(AgentConfigError, match="should_retry must be a function"):
        AgentToolRetryConfig(should_retry="yes")  # type: ignore[arg-type]
    with pytest.raises(AgentConfigError, match="retry must be an AgentToolRetryConfig"):
        AgentTool(researcher(ScriptedChatModel([])), retry=2)  # type: ignore[arg-type]


def test_agent_tool_run_options_reach_a_deep_agents_sub_agent_by_its_name() -> None:
    from agentkit.prebuilt import deep

    inner = ScriptedChatModel(["found it"])
    helper = ChatModelAgent("helper", "helps", inner)
    outer = ScriptedChatModel(
        [calls_message(call("task", {"subagent_type": "helper", "description": "look"})), "ok"]
    )
    agent = deep.new(outer, sub_agents=[helper], without_general_sub_agent=True)
    option = with_agent_tool_run_options({"helper": [with_chat_model_options(temperature=0.2)]})
    run_events(Runner(agent).query("go", option))
    assert [c.options.temperature for c in inner.calls if c.options] == [0.2]
