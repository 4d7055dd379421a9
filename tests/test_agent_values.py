"""Agents are values after construction: settings cannot change; a changed copy is a new agent."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from agentkit import (
    AgentKitError,
    ChatModelAgent,
    LoopAgent,
    ParallelAgent,
    Runner,
    SequentialAgent,
    agent_with_options,
    set_sub_agents,
    tool,
)
from agentkit.errors import AgentFrozenError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"all about {topic}"


def _agent(**kwargs: Any) -> ChatModelAgent:
    return ChatModelAgent("helper", "helps", ScriptedChatModel(["ok"] * 5), **kwargs)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("instruction", "v2"),
        ("max_iterations", 1),
        ("tools", []),
        ("output_key", "answer"),
        ("emit_internal_events", True),
        ("model", None),
        ("name", "other"),
    ],
)
def test_setting_anything_on_a_built_chat_model_agent_raises(setting: str, value: Any) -> None:
    agent = _agent(instruction="v1")
    with pytest.raises(AgentFrozenError) as caught:
        setattr(agent, setting, value)
    message = str(caught.value)
    assert f"cannot set {setting!r} on agent 'helper'" in message
    assert f"agent.replace({setting}=...)" in message
    # an AgentKitError, and an AttributeError like any read-only attribute
    assert isinstance(caught.value, AgentKitError) and isinstance(caught.value, AttributeError)
    assert agent.instruction == "v1"


def test_setting_a_limit_after_a_run_takes_no_effect_because_it_cannot_be_set() -> None:
    # Issue 26: before, `agent.max_iterations = 1` after a run took effect while
    # `agent.instruction = "v2"` did not. Now neither can be set.
    model = ScriptedChatModel([calls_message(call("lookup", {"topic": "x"})), "done"] * 2)
    agent = ChatModelAgent("a", "d", model, tools=[lookup], max_iterations=5)
    assert Runner(agent).invoke("go").text == "done"
    with pytest.raises(AgentFrozenError):
        agent.max_iterations = 1  # type: ignore[misc]
    assert Runner(agent).invoke("go").text == "done"


def test_replace_makes_a_changed_copy_and_leaves_the_agent_as_it_was() -> None:
    model = ScriptedChatModel(lambda messages: f"system: {messages[0].content}")
    agent = ChatModelAgent("a", "d", model, instruction="be brief", max_iterations=3)
    brief = agent.replace(instruction="be very brief", max_iterations=1)
    assert (brief.instruction, brief.max_iterations, brief.name) == ("be very brief", 1, "a")
    assert (agent.instruction, agent.max_iterations) == ("be brief", 3)
    assert Runner(brief).invoke("hi").text == "system: be very brief"
    assert Runner(agent).invoke("hi").text == "system: be brief"


def test_replace_refuses_an_unknown_setting_and_checks_new_values() -> None:
    agent = _agent()
    with pytest.raises(TypeError, match="unknown argument.*'instructions'"):
        agent.replace(instructions="typo")
    with pytest.raises(AgentKitError, match="max_iterations must be at least 1"):
        agent.replace(max_iterations=0)


def test_a_replaced_copy_of_a_wired_agent_can_be_wired_again() -> None:
    kid = _agent()
    set_sub_agents(ChatModelAgent("Mom", "m", ScriptedChatModel([])), [kid])
    copy = kid.replace()
    flow = set_sub_agents(ChatModelAgent("Dad", "f", ScriptedChatModel([])), [copy])
    assert [sub.name for sub in flow.sub_agents] == ["helper"]


@pytest.mark.parametrize(
    ("make", "setting"),
    [
        (lambda a: SequentialAgent("s", "d", [a]), "agent_type"),
        (lambda a: LoopAgent("l", "d", [a], max_iterations=2), "max_iterations"),
        (lambda a: ParallelAgent("p", "d", [a], max_workers=2), "max_workers"),
        (lambda a: set_sub_agents(a, []), "sub_agents"),
        (lambda a: agent_with_options(a), "history_rewriter"),
    ],
)
def test_workflows_and_flows_are_values_too(make: Any, setting: str) -> None:
    built = make(_agent())
    before = getattr(built, setting)
    with pytest.raises(AgentFrozenError, match=f"cannot set {setting!r}"):
        setattr(built, setting, None)
    assert getattr(built, setting) == before


# --- every built-in agent is a value ------------------------------------------------------------


def _model(*replies: Any) -> ScriptedChatModel:
    return ScriptedChatModel(list(replies) or ["ok"] * 5)


def _built_in_agents() -> dict[str, tuple[Any, str, dict[str, Any]]]:
    """Each built-in agent: the agent, an attribute to write, and changes ``replace`` takes."""
    from agentkit import AgentTool, agent_with_deterministic_transfer_to
    from agentkit.a2a import RemoteA2AAgent
    from agentkit.prebuilt import deep, planexecute, supervisor

    kid = _agent()
    boss = ChatModelAgent("boss", "leads", _model())
    planner = planexecute.new_planner(_model())
    executor = planexecute.new_executor(_model())
    replanner = planexecute.new_replanner(_model())
    return {
        "ChatModelAgent": (kid, "name", {"name": "other"}),
        "SequentialAgent": (SequentialAgent("s", "d", [kid]), "name", {"name": "other"}),
        "LoopAgent": (LoopAgent("l", "d", [kid], max_iterations=2), "name", {"max_iterations": 3}),
        "ParallelAgent": (ParallelAgent("p", "d", [kid]), "name", {"max_workers": 1}),
        "set_sub_agents": (set_sub_agents(boss, [kid]), "name", {"sub_agents": []}),
        "agent_with_options": (
            agent_with_options(kid),
            "history_rewriter",
            {"disallow_transfer_to_parent": True},
        ),
        "deterministic transfer": (
            agent_with_deterministic_transfer_to(kid, ["boss"]),
            "name",
            {"to_agent_names": ["other"]},
        ),
        "AgentTool": (AgentTool(kid), "agent", {"full_chat_history_as_input": True}),
        "supervisor": (supervisor.new(boss, [kid]), "name", {"sub_agents": []}),
        "plan-execute": (
            planexecute.new(planner, executor, replanner),
            "name",
            {"name": "other"},
        ),
        "planner": (planner, "name", {"model": _model()}),
        "replanner": (replanner, "name", {"model": _model()}),
        "executor": (executor, "name", {"name": "other"}),
        "deep agent": (deep.new(_model()), "name", {"name": "other"}),
        "RemoteA2AAgent": (
            RemoteA2AAgent("http://127.0.0.1:9", name="far", description="far away"),
            "url",
            {"name": "other"},
        ),
    }


BUILT_IN = sorted(_built_in_agents())


@pytest.mark.parametrize("kind", BUILT_IN)
def test_a_write_to_any_built_in_agent_raises_frozen_error_saying_to_use_replace(
    kind: str,
) -> None:
    from agentkit.errors import FrozenError

    agent, attribute, _ = _built_in_agents()[kind]
    before = getattr(agent, attribute)
    with pytest.raises(FrozenError) as caught:
        setattr(agent, attribute, None)
    assert isinstance(caught.value, AttributeError)
    assert ".replace(" in str(caught.value) and attribute in str(caught.value)
    assert getattr(agent, attribute) is before
    with pytest.raises(FrozenError):
        delattr(agent, attribute)


@pytest.mark.parametrize("kind", BUILT_IN)
def test_replace_on_any_built_in_agent_returns_a_new_agent_and_leaves_the_old_one(
    kind: str,
) -> None:
    agent, _, changes = _built_in_agents()[kind]
    copy = agent.replace(**changes)
    assert copy is not agent and type(copy) is type(agent)
    unchanged = agent.replace()
    assert type(unchanged) is type(agent) and unchanged is not agent
    for name, value in changes.items():
        if name == "sub_agents":
            assert copy.sub_agents == [] and agent.sub_agents != []
        elif name == "to_agent_names":
            assert copy.to_agent_names == tuple(value) and agent.to_agent_names == ("boss",)
        elif name == "model":
            assert copy.replace() is not copy
        elif hasattr(agent, name):
            assert getattr(copy, name) == value and getattr(agent, name) != value


def test_replace_refuses_what_a_flow_cannot_change() -> None:
    flow = set_sub_agents(_agent(), [])
    with pytest.raises(TypeError, match="unknown argument.*'name'.*it changes: sub_agents"):
        flow.replace(name="other")


# --- one agent in two trees ---------------------------------------------------------------------


def _transfer_back_to_whoever_is_offered(messages: list[Any]) -> Any:
    """The kid's model: transfer to the one parent its system prompt offers."""
    system = messages[0].content
    parents = [name for name in ("Mom", "Dad") if f"Agent name: {name}" in system]
    assert len(parents) == 1, system
    return calls_message(call("transfer_to_agent", {"agent_name": parents[0]}))


def _paths(result: Any) -> list[list[str]]:
    return [[str(step) for step in event.run_path] for event in result.events]


def test_one_sub_agent_under_two_parents_transfers_back_to_the_parent_of_its_tree() -> None:
    kid = ChatModelAgent("Kid", "a kid", ScriptedChatModel(_transfer_back_to_whoever_is_offered))
    trees = {}
    for parent in ("Mom", "Dad"):
        model = ScriptedChatModel(
            [calls_message(call("transfer_to_agent", {"agent_name": "Kid"})), f"bye from {parent}"]
        )
        trees[parent] = set_sub_agents(ChatModelAgent(parent, "a parent", model), [kid])
    for parent, flow in trees.items():
        result = Runner(flow).invoke("hi")
        assert result.text == f"bye from {parent}"
        assert _paths(result)[-1] == [parent, "Kid", parent]
        assert [parent, "Kid"] in _paths(result)


def test_wiring_writes_nothing_onto_the_agents_it_is_given() -> None:
    kid = _agent()
    inner = SequentialAgent("inner", "d", [_agent().replace(name="other")])
    before = {id(agent): dict(vars(agent)) for agent in (kid, inner)}
    set_sub_agents(ChatModelAgent("Mom", "m", _model()), [kid, inner])
    set_sub_agents(ChatModelAgent("Dad", "d", _model()), [kid, inner])
    SequentialAgent("one", "d", [kid, inner])
    ParallelAgent("two", "d", [kid, inner])
    LoopAgent("three", "d", [kid, inner], max_iterations=1)
    for agent in (kid, inner):
        after = dict(vars(agent))
        assert after.keys() == before[id(agent)].keys()
        assert all(after[key] is value for key, value in before[id(agent)].items())


def test_one_agent_in_two_sequential_workflows_runs_in_each_with_its_own_run_path() -> None:
    kid = ChatModelAgent("Kid", "a kid", ScriptedChatModel(lambda messages: "done"))
    first = SequentialAgent("first", "d", [kid])
    second = SequentialAgent("second", "d", [_agent().replace(name="lead"), kid])
    assert _paths(Runner(first).invoke("go")) == [["first", "Kid"]]
    # a sequential step's run path shows the steps before it (Eino's rule)
    assert _paths(Runner(second).invoke("go")) == [["second", "lead"], ["second", "lead", "Kid"]]
    assert _paths(Runner(first).invoke("again")) == [["first", "Kid"]]


def test_one_agent_as_a_tool_and_as_a_sub_agent() -> None:
    from agentkit import AgentTool

    kid = ChatModelAgent("Kid", "a kid", ScriptedChatModel(lambda messages: "kid says hi"))
    caller = ChatModelAgent(
        "Caller",
        "calls the kid as a tool",
        ScriptedChatModel([calls_message(call("Kid", {"request": "hello"})), "the kid said hi"]),
        tools=[AgentTool(kid)],
    )
    mom = set_sub_agents(
        ChatModelAgent(
            "Mom",
            "transfers to the kid",
            ScriptedChatModel([calls_message(call("transfer_to_agent", {"agent_name": "Kid"}))]),
        ),
        [kid],
    )
    as_tool = Runner(caller).invoke("go")
    assert as_tool.text == "the kid said hi"
    tool_results = [e for e in as_tool.events if e.output and e.output.message_output
                    and e.output.message_output.role.value == "tool"]
    assert [e.output.message_output.get_message().content for e in tool_results
            if e.output and e.output.message_output] == ["kid says hi"]
    as_sub_agent = Runner(mom).invoke("go")
    assert as_sub_agent.text == "kid says hi"
    assert _paths(as_sub_agent)[-1] == ["Mom", "Kid"]
    # the kid as a tool offers no transfer: it is not the sub-agent of its caller
    kid_model = kid.model
    assert isinstance(kid_model, ScriptedChatModel)
    offered = [[tool.name for tool in c.tools] for c in kid_model.calls]
    assert offered == [[], ["transfer_to_agent"]]


def test_two_trees_run_the_same_agent_at_once() -> None:
    import threading

    kid = ChatModelAgent("Kid", "a kid", ScriptedChatModel(_transfer_back_to_whoever_is_offered))
    flows = [
        set_sub_agents(
            ChatModelAgent(
                parent,
                "a parent",
                ScriptedChatModel(
                    [calls_message(call("transfer_to_agent", {"agent_name": "Kid"})), parent] * 10
                ),
            ),
            [kid],
        )
        for parent in ("Mom", "Dad")
    ]
    results: dict[str, list[str]] = {"Mom": [], "Dad": []}
    start = threading.Barrier(2)

    def play(flow: Any) -> None:
        start.wait(timeout=30)
        for _ in range(10):
            results[flow.name].append(Runner(flow).invoke("hi").text)

    threads = [threading.Thread(target=play, args=(flow,)) for flow in flows]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {"Mom": ["Mom"] * 10, "Dad": ["Dad"] * 10}


def test_an_agent_in_two_trees_resumes_in_the_tree_it_stopped_in() -> None:
    from agentkit import interrupt, tool, with_checkpoint_id
    from agentkit.checkpoint import InMemoryCheckPointStore

    @tool
    def ask(question: str) -> str:
        """Ask the user."""
        return str(interrupt(question))

    def kid_model(messages: list[Any]) -> Any:
        if messages[-1].role.value == "tool":  # the user answered: back to this tree's parent
            return _transfer_back_to_whoever_is_offered(messages)
        return calls_message(call("ask", {"question": "which colour?"}))

    kid = ChatModelAgent("Kid", "a kid", ScriptedChatModel(kid_model), tools=[ask])
    store = InMemoryCheckPointStore()
    for parent in ("Mom", "Dad"):
        model = ScriptedChatModel(
            [calls_message(call("transfer_to_agent", {"agent_name": "Kid"})), f"{parent}: ok"]
        )
        runner = Runner(
            set_sub_agents(ChatModelAgent(parent, "a parent", model), [kid]),
            checkpoint_store=store,
        )
        stopped = runner.invoke("hi", with_checkpoint_id(parent))
        assert stopped.interrupt is not None
        (point,) = stopped.interrupt.contexts
        assert point.address[:2] == (f"agent:{parent}", "agent:Kid")
        resumed = runner.resume(parent, targets={point.id: "blue"}).result()
        assert resumed.text == f"{parent}: ok"
        assert _paths(resumed)[-1] == [parent, "Kid", parent]


def test_the_on_sub_agents_hooks_of_a_chat_model_agent_change_nothing() -> None:
    from agentkit import OnSubAgents

    kid = _agent()
    before = dict(vars(kid))
    assert isinstance(kid, OnSubAgents)  # still an OnSubAgents, as Eino's ChatModelAgent
    kid.on_set_sub_agents([_agent().replace(name="x")])
    kid.on_set_as_sub_agent(_agent().replace(name="parent"))
    kid.on_disallow_transfer_to_parent()
    assert dict(vars(kid)) == before


def test_one_worker_under_two_supervisors_reports_back_to_each() -> None:
    from agentkit.prebuilt import supervisor

    worker = ChatModelAgent("worker", "does the work", ScriptedChatModel(lambda messages: "done"))
    for boss_name in ("boss_a", "boss_b"):
        boss = ChatModelAgent(
            boss_name,
            "delegates",
            ScriptedChatModel(
                [
                    calls_message(call("transfer_to_agent", {"agent_name": "worker"})),
                    f"{boss_name}: finished",
                ]
            ),
        )
        result = Runner(supervisor.new(boss, [worker])).invoke("go")
        assert result.text == f"{boss_name}: finished"
        assert _paths(result)[-1] == [boss_name, "worker", boss_name]


def test_an_agent_run_itself_after_set_sub_agents_runs_alone_and_says_so() -> None:
    # 0.2's set_sub_agents changed the agent it was given, so code ran that agent; now the
    # call returns the agent to run and the agent is unchanged. Running the original must not
    # drop its sub-agents silently (the router answered nothing): the Runner warns.
    from agentkit import Runner, set_sub_agents

    router_model = ScriptedChatModel(["no one to ask"])
    router = ChatModelAgent("Router", "routes", router_model)
    weather = ChatModelAgent("Weather", "knows", ScriptedChatModel(["sunny"]))
    transfer = calls_message(call("transfer_to_agent", {"agent_name": "Weather"}))
    team = set_sub_agents(
        ChatModelAgent("Router", "routes", ScriptedChatModel([transfer])), [weather]
    )
    set_sub_agents(router, [weather])
    with pytest.warns(UserWarning, match=r"Run the agent set_sub_agents returned"):
        runner = Runner(router)
    assert runner.invoke("weather in Paris?").text == "no one to ask"
    assert router_model.calls[0].tools == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Runner(team).invoke("weather in Paris?").text == "sunny"
        Runner(weather)  # a sub-agent run alone is no mistake
