"""The deep agent (``agentkit.prebuilt.deep``): its tools, instruction and sub-agents, whole event
sequences with scripted models, bad input, and interrupts inside a sub-agent.

Tests named after Eino's follow ``adk/prebuilt/deep/deep_test.go`` and ``task_tool_test.go``;
``test_deep_agent_event_sequence`` is the spec's P-DEEP scenario.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentkit import (
    AgentEvent,
    AgentInput,
    AgentRunOption,
    AsyncIterator,
    ChatModelAgent,
    Message,
    ModelError,
    ModelRetryConfig,
    Role,
    Runner,
    event_from_message,
    get_session_value,
    run_in_worker,
    tool,
    with_checkpoint_id,
    with_session_values,
)
from agentkit.backends import InMemoryBackend
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import AgentConfigError
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import deep
from agentkit.prebuilt._deep_prompts import TASK_PROMPT
from agentkit.prebuilt._deep_tools import TaskTool
from agentkit.schema import assistant_message, user_message
from agentkit.testing import call, calls_message, run_events, summarize


def kinds(events: list[AgentEvent]) -> list[tuple[str, list[str], str, str, str | None]]:
    return [summarize(event) for event in events]


class SpyAgent:
    """A custom agent (iterator protocol) that records what it saw and answers ``answer``."""

    def __init__(self, name: str, description: str, answer: str | None = None) -> None:
        self.name = name
        self.description = description
        self.answer = answer
        self.inputs: list[AgentInput] = []
        self.parent_values: list[Any] = []

    def run(self, input: AgentInput, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
        self.inputs.append(input)
        self.parent_values.append(get_session_value("parent_key"))
        text = self.answer if self.answer is not None else self.description

        def work(generator: Any) -> None:
            generator.send(event_from_message(assistant_message(text), None, Role.ASSISTANT))

        return run_in_worker(work)


def test_gen_model_input() -> None:
    """Eino's TestGenModelInput: the instruction as a system message, never formatted."""
    given = AgentInput([user_message("hello")])
    assert deep.model_input("You are a helpful assistant", given) == [
        Message(Role.SYSTEM, "You are a helpful assistant"),
        user_message("hello"),
    ]
    assert deep.model_input("", given) == [user_message("hello")]


def test_write_todos() -> None:
    """Eino's TestWriteTodos: the result text is the list as compact JSON; the session keeps it."""
    todos = [
        {"content": "content1", "activeForm": "", "status": "pending"},
        {"content": "content2", "activeForm": "", "status": "pending"},
    ]
    seen: list[Any] = []

    @tool
    def peek() -> str:
        """Reads the todo list from the session."""
        seen.append(get_session_value(deep.SESSION_KEY_TODOS))
        return "ok"

    model = ScriptedChatModel(
        [calls_message(call("write_todos", {"todos": todos})), calls_message(call("peek")), "done"]
    )
    agent = deep.new(model, tools=[peek], without_general_sub_agent=True)
    events = run_events(lambda: Runner(agent).query("plan"))
    listed = json.dumps(todos, separators=(",", ":"))
    assert summarize(events[1])[2:4] == ("tool/write_todos", f"Updated todo list to {listed}")
    assert listed == '[{"content":"content1","activeForm":"","status":"pending"},{"content":"content2","activeForm":"","status":"pending"}]'
    assert seen == [[deep.Todo("content1"), deep.Todo("content2")]]


def test_write_todos_refuses_a_bad_status_and_the_model_is_told() -> None:
    model = ScriptedChatModel(
        [calls_message(call("write_todos", {"todos": [{"content": "x", "status": "done"}]})), "ok"]
    )
    events = run_events(lambda: Runner(deep.new(model, without_general_sub_agent=True)).query("x"))
    assert summarize(events[1])[3] == (
        "Error: write_todos: 'todos[0].status' must be one of 'pending', 'in_progress', "
        "'completed' (got 'done'). Correct the arguments and call write_todos again."
    )
    assert summarize(events[-1])[3] == "ok"


def test_deep_sub_agent_shares_session_values() -> None:
    """Eino's TestDeepSubAgentSharesSessionValues."""
    spy = SpyAgent("spy-subagent", "spy", "ok")
    model = ScriptedChatModel(
        [
            calls_message(
                call("task", {"subagent_type": "spy-subagent", "description": "from_parent"}, id="id-1")
            ),
            "done",
        ]
    )
    agent = deep.new(
        model, name="deep", instruction="you are deep agent", sub_agents=[spy],
        max_iterations=2, without_write_todos=True, without_general_sub_agent=True,
    )
    events = run_events(
        lambda: Runner(agent).query("hi", with_session_values({"parent_key": "parent_val"}))
    )
    assert kinds(events)[1][2:4] == ("tool/task", "ok")
    assert spy.parent_values == ["parent_val"]
    assert [m.content for m in spy.inputs[0].messages] == ["from_parent"]


@pytest.mark.parametrize("streaming", [True, False])
def test_deep_sub_agent_follows_streaming_mode(streaming: bool) -> None:
    """Eino's TestDeepSubAgentFollowsStreamingMode."""
    spy = SpyAgent("spy-streaming-subagent", "spy", "ok")
    model = ScriptedChatModel(
        [
            calls_message(
                call("task", {"subagent_type": "spy-streaming-subagent", "description": "x"})
            ),
            "done",
        ]
    )
    agent = deep.new(
        model, sub_agents=[spy], without_write_todos=True, without_general_sub_agent=True
    )
    events = run_events(lambda: Runner(agent, enable_streaming=streaming).query("hi"))
    assert kinds(events)[1][2:4] == ("tool/task", "ok")
    assert [input.enable_streaming for input in spy.inputs] == [streaming]


def test_task_tool() -> None:
    """Eino's TestTaskTool: the description lists the sub-agents; a call returns the answer."""
    task = TaskTool([SpyAgent("1", "desc of my agent 1"), SpyAgent("2", "desc of my agent 2")])
    info = task.info()
    assert "- 1: desc of my agent 1\n- 2: desc of my agent 2\n" in info.description
    assert info.parameters["required"] == ["subagent_type", "description"]
    assert task.invoke(json.dumps({"subagent_type": "1", "description": ""})) == "desc of my agent 1"
    assert task.invoke(json.dumps({"subagent_type": "2", "description": ""})) == "desc of my agent 2"


def test_deep_agent_event_sequence() -> None:
    """The spec's P-DEEP: write_todos and task in one reply; tools [write_todos, task];
    the system prompt is the instruction followed by the task section."""
    researcher = ChatModelAgent(
        "researcher", "researches topics",
        ScriptedChatModel(lambda messages: f"research result for: {messages[-1].content}"),
    )
    todos = [{"content": "look into X", "activeForm": "Looking into X", "status": "in_progress"}]
    model = ScriptedChatModel(
        [
            calls_message(
                call("write_todos", {"todos": todos}, id="c1"),
                call("task", {"subagent_type": "researcher", "description": "look into X"}, id="c2"),
            ),
            "final",
        ]
    )
    agent = deep.new(
        model, instruction="be deep", sub_agents=[researcher], without_general_sub_agent=True
    )
    events = run_events(lambda: Runner(agent).query("research X"))
    path = ["deep_agent"]
    seen = kinds(events)
    assert seen[0] == ("deep_agent", path, "assistant", "", None)
    assert sorted(seen[1:3]) == [  # the two calls ran at once: completion order
        ("deep_agent", path, "tool/task", "research result for: look into X", None),
        ("deep_agent", path, "tool/write_todos",
         f"Updated todo list to {json.dumps(todos, separators=(',', ':'))}", None),
    ]
    assert seen[3] == ("deep_agent", path, "assistant", "final", None)
    assert len(seen) == 4
    assert [info.name for info in model.calls[0].tools] == ["write_todos", "task"]
    assert model.calls[0].messages[0] == Message(Role.SYSTEM, "be deep" + TASK_PROMPT)
    assert TASK_PROMPT.startswith("\n")
    # The history the model gets next holds the results in call order.
    assert [m.tool_name for m in model.calls[1].messages if m.role is Role.TOOL] == ["write_todos", "task"]


def test_a_task_for_an_unknown_sub_agent_is_told_to_the_model_and_the_run_goes_on() -> None:
    model = ScriptedChatModel(
        [
            calls_message(call("task", {"subagent_type": "oracle", "description": "predict"})),
            calls_message(call("task", '{"subagent_type": ')),
            "I will do it myself.",
        ]
    )
    events = run_events(lambda: Runner(deep.new(model, without_write_todos=True)).query("go"))
    assert kinds(events)[1][2:4] == (
        "tool/task",
        "Error: subagent type oracle not found; the sub-agent types are: 'general-purpose'. "
        "Correct the arguments and call task again.",
    )
    assert kinds(events)[3][3].startswith("Error: task: the arguments are not valid JSON")
    assert kinds(events)[-1][2:4] == ("assistant", "I will do it myself.")
    assert all(event.err is None for event in events)


def test_the_general_purpose_sub_agent_has_the_same_tools_and_instruction_but_no_task() -> None:
    @tool
    def search(query: str) -> str:
        """Searches the news."""
        return f"news about {query}"

    model = ScriptedChatModel(
        [
            calls_message(call("task", {"subagent_type": "general-purpose", "description": "dig"})),
            calls_message(call("search", {"query": "dig"})),  # the general-purpose agent
            "dug up: news about dig",  # its answer
            "summary",
        ]
    )
    backend = InMemoryBackend()
    agent = deep.new(model, instruction="be deep", tools=[search], backend=backend)
    events = run_events(lambda: Runner(agent).query("go"))
    assert kinds(events)[1][2:4] == ("tool/task", "dug up: news about dig")
    assert kinds(events)[-1][3] == "summary"
    main, sub = model.calls[0], model.calls[1]
    assert [i.name for i in main.tools] == [
        "search", "write_todos", "ls", "read_file", "write_file", "edit_file", "glob", "grep", "task"
    ]
    assert [i.name for i in sub.tools] == [
        "search", "write_todos", "ls", "read_file", "write_file", "edit_file", "glob", "grep"
    ]
    assert sub.messages[0] == Message(Role.SYSTEM, "be deep")
    assert sub.messages[1] == user_message("dig")
    task_info = next(i for i in main.tools if i.name == "task")
    assert "- general-purpose: general-purpose agent for researching" in task_info.description


def test_without_sub_agents_there_is_no_task_tool_and_the_built_in_instruction_is_used() -> None:
    model = ScriptedChatModel(["hi"])
    agent = deep.new(model, without_general_sub_agent=True, without_write_todos=True)
    run_events(lambda: Runner(agent).query("hello"))
    assert model.calls[0].tools == []
    assert model.calls[0].messages[0] == Message(Role.SYSTEM, deep.BASE_INSTRUCTION)


def test_the_instruction_is_never_formatted_with_session_values() -> None:
    model = ScriptedChatModel(["ok"])
    agent = deep.new(model, instruction='Answer as JSON: {"a": 1}', without_general_sub_agent=True)
    events = run_events(lambda: Runner(agent).query("x", with_session_values({"a": 2})))
    assert events[-1].err is None
    assert model.calls[0].messages[0].content == 'Answer as JSON: {"a": 1}'


def test_max_iterations_applies_to_the_agent_and_the_general_purpose_sub_agent() -> None:
    agent = deep.new(ScriptedChatModel(["x"]), max_iterations=3)
    assert agent.max_iterations == 3
    assert deep.new(ScriptedChatModel(["x"])).max_iterations == 20


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tools": ["task"]}, "built-in tool named 'task'"),
        ({"tools": ["write_todos"]}, "built-in tool named 'write_todos'"),
        ({"tools": ["grep"], "backend": InMemoryBackend()}, "built-in tool named 'grep'"),
        ({"sub_agents": [SpyAgent("general-purpose", "x")]}, "the name of the general-purpose"),
        ({"sub_agents": [SpyAgent("a", "x"), SpyAgent("a", "y")]}, "two sub-agents are named 'a'"),
    ],
)
def test_bad_settings_are_refused_when_the_agent_is_built(kwargs: dict[str, Any], message: str) -> None:
    if kwargs.get("tools"):
        name = kwargs["tools"][0]
        kwargs["tools"] = [tool(lambda: "x", name=name, description="clashes")]
    with pytest.raises(AgentConfigError, match=message):
        deep.new(ScriptedChatModel(["x"]), **kwargs)


def test_sub_agent_events_are_forwarded_with_emit_internal_events() -> None:
    helper = ChatModelAgent("helper", "helps", ScriptedChatModel(["helped"]))
    model = ScriptedChatModel(
        [calls_message(call("task", {"subagent_type": "helper", "description": "help"})), "done"]
    )
    agent = deep.new(
        model, sub_agents=[helper], without_general_sub_agent=True, emit_internal_events=True
    )
    events = run_events(lambda: Runner(agent).query("go"))
    assert kinds(events) == [
        ("deep_agent", ["deep_agent"], "assistant", "", None),
        ("helper", ["deep_agent", "helper"], "assistant", "helped", None),
        ("deep_agent", ["deep_agent"], "tool/task", "helped", None),
        ("deep_agent", ["deep_agent"], "assistant", "done", None),
    ]


def test_an_interrupt_inside_a_sub_agent_resumes_through_the_task_call() -> None:
    paid: list[int] = []

    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pays an amount."""
        paid.append(amount)
        return f"paid {amount}"

    payer = ChatModelAgent(
        "payer", "pays bills",
        ScriptedChatModel([calls_message(call("pay", {"amount": 5}, id="p1")), "bill paid"]),
        tools=[pay],
    )
    todos = [{"content": "pay the bill", "activeForm": "Paying", "status": "in_progress"}]
    model = ScriptedChatModel(
        [
            calls_message(call("write_todos", {"todos": todos}, id="w1")),
            calls_message(call("task", {"subagent_type": "payer", "description": "pay"}, id="t1")),
            lambda messages: f"all done ({messages[-1].content})",
        ]
    )
    agent = deep.new(model, sub_agents=[payer], without_general_sub_agent=True)
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    first = runner.invoke("pay my bill", with_checkpoint_id("cp"))
    assert first.interrupt is not None
    [context] = first.interrupt.contexts
    assert context.address[-3:] == ("tool:task:t1", "agent:payer", "tool:pay:p1")
    assert paid == []
    resumed = runner.resume("cp", targets={context.id: True}).result()
    assert paid == [5]
    assert resumed.text == "all done (bill paid)"
    assert resumed.session_values[deep.SESSION_KEY_TODOS] == [deep.Todo("pay the bill", "Paying", "in_progress")]



def test_return_directly_output_key_and_a_task_description_generator() -> None:
    @tool
    def lookup(key: str) -> str:
        """Looks a key up."""
        return f"value of {key}"

    model = ScriptedChatModel([calls_message(call("lookup", {"key": "k"})), "never asked"])
    seen: list[list[str]] = []

    def describe(agents: Any) -> str:
        seen.append([agent.name for agent in agents])
        return "Start one of: " + ", ".join(agent.name for agent in agents)

    agent = deep.new(
        model,
        tools=[lookup],
        sub_agents=[SpyAgent("helper", "helps")],
        return_directly=["lookup"],
        output_key="answer",
        task_tool_description=describe,
    )
    result = Runner(agent).invoke("go")
    assert result.error is None
    assert kinds(result.events)[-1][2:4] == ("tool/lookup", "value of k")  # ended the run
    assert len(model.calls) == 1
    assert result.session_values["answer"] == "value of k"
    assert seen == [["helper", "general-purpose"]]
    task_info = next(i for i in model.calls[0].tools if i.name == "task")
    assert task_info.description == "Start one of: helper, general-purpose"
    assert agent.description == deep.new(ScriptedChatModel(["x"])).description  # its own


def test_model_retry_applies_to_the_agent_and_the_general_purpose_sub_agent() -> None:
    retry = ModelRetryConfig(max_retries=1, backoff=lambda attempt: 0.0)
    script: list[Any] = [
        ModelError("flaky"),  # the deep agent's first call: retried
        calls_message(call("task", {"subagent_type": "general-purpose", "description": "dig"})),
        ModelError("flaky"),  # the general-purpose sub-agent's first call: retried
        "dug",
        "done",
    ]
    result = Runner(deep.new(ScriptedChatModel(script), model_retry=retry)).invoke("go")
    assert result.error is None and result.text == "done"
    assert kinds(result.events)[-2][2:4] == ("tool/task", "dug")
    failing = deep.new(ScriptedChatModel([ModelError("flaky"), "never"]))
    assert isinstance(Runner(failing).invoke("go", raise_errors=False).error, ModelError)


def test_a_task_description_generator_must_return_text() -> None:
    with pytest.raises(AgentConfigError, match="task_tool_description must return"):
        deep.new(ScriptedChatModel(["x"]), task_tool_description=lambda agents: None)  # type: ignore[arg-type,return-value]
