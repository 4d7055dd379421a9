"""Plan-execute-replan: events, run paths, prompts, session values, errors, custom plans."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import attrs
import pytest

from agentkit import (
    AgentEvent,
    AgentInput,
    Message,
    Role,
    Runner,
    SequentialAgent,
    ToolInfo,
    get_session_values,
    interrupt,
    run_in_worker,
    system_message,
    tool,
    user_message,
    with_chat_model_options,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import AgentConfigError
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import planexecute
from agentkit.prebuilt.planexecute import (
    EXECUTOR_SYSTEM_PROMPT,
    PLAN_TOOL_INFO,
    PLANNER_PROMPT,
    RESPOND_TOOL_INFO,
    ExecutedStep,
    ExecutionContext,
    Plan,
    PlanExecuteError,
)
from agentkit.testing import call, calls_message, no_thread_leak, run_events, summarize

ROOT = "plan_execute_replan"
PLANNER = [ROOT, "planner"]
LOOP = [ROOT, "planner", "execute_replan"]


NO_PLAN_CALL = (
    "the planner's model answered without calling a tool; it must call 'plan' (it is asked "
    "to with tool_choice='required': use a model that supports forced tool calls)"
)


def plan_reply(*steps: str) -> Message:
    return calls_message(call("plan", {"steps": list(steps)}))


def respond_reply(text: str) -> Message:
    return calls_message(call("respond", {"response": text}))


@attrs.define
class Models:
    planner: ScriptedChatModel
    executor: ScriptedChatModel
    replanner: ScriptedChatModel


def standard_models() -> Models:
    """The run of the spec: plan [A, B], execute A, replan [B], execute B, respond."""
    return Models(
        planner=ScriptedChatModel([plan_reply("step A", "step B")]),
        executor=ScriptedChatModel(["result A", "result B"]),
        replanner=ScriptedChatModel([plan_reply("step B"), respond_reply("all good")]),
    )


def build(models: Models, max_iterations: int = 10, **executor_kwargs: Any) -> SequentialAgent:
    return planexecute.new(
        planexecute.new_planner(models.planner),
        planexecute.new_executor(models.executor, **executor_kwargs),
        planexecute.new_replanner(models.replanner),
        max_iterations=max_iterations,
    )


def run(agent: Any, text: str = "do the thing", *options: Any, streaming: bool = False) -> list[AgentEvent]:
    return run_events(lambda: Runner(agent, enable_streaming=streaming).query(text, *options))


class SessionProbe:
    """A custom agent that records the session values it sees."""

    name = "probe"
    description = "records the session"

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def run(self, input: AgentInput, *options: Any) -> Any:
        def work(sink: Any) -> None:
            self.seen = get_session_values()

        return run_in_worker(work)


# --- the whole run ----------------------------------------------------------------------------


FULL_RUN = [
    ("planner", PLANNER, "assistant", '{"steps": ["step A", "step B"]}', None),
    ("executor", [*LOOP, "executor"], "assistant", "result A", None),
    ("replanner", [*LOOP, "executor", "replanner"], "assistant", '{"steps": ["step B"]}', None),
    ("executor", [*LOOP, "executor", "replanner", "executor"], "assistant", "result B", None),
    ("replanner", [*LOOP, "executor", "replanner", "executor", "replanner"], "assistant",
     "all good", None),
    ("replanner", [*LOOP, "executor", "replanner", "executor", "replanner"], "", "", "break_loop"),
]

# Streamed, the respond call's JSON arguments are shown as they come, then the answer.
STREAMED_RUN = [
    *FULL_RUN[:4],
    ("replanner", [*LOOP, "executor", "replanner", "executor", "replanner"], "assistant",
     '{"response": "all good"}', None),
    *FULL_RUN[4:],
]


def test_full_run_plans_executes_replans_and_responds() -> None:
    events = run(build(standard_models()))
    assert [summarize(e) for e in events] == FULL_RUN
    assert all(e.err is None for e in events)


def test_respond_ends_the_loop_with_a_break_loop_action_only_event() -> None:
    events = run(build(standard_models()))
    last = events[-1]
    assert last.output is None
    assert last.action is not None and last.action.break_loop is not None
    brk = last.action.break_loop
    assert (brk.from_agent, brk.done, brk.current_iterations) == ("replanner", True, 1)
    assert last.action.exit is False


def test_planner_model_gets_its_prompt_the_plan_tool_and_a_forced_tool_choice() -> None:
    models = standard_models()
    run(build(models))
    (first,) = models.planner.calls
    assert first.messages == [system_message(PLANNER_PROMPT), user_message("do the thing")]
    assert first.tools == [PLAN_TOOL_INFO]
    assert first.options is not None and first.options.tool_choice == "required"
    assert first.streaming is False


def test_plan_and_respond_tools_have_eino_names_and_parameters() -> None:
    assert PLAN_TOOL_INFO.name == "plan"
    assert PLAN_TOOL_INFO.parameters["required"] == ["steps"]
    assert PLAN_TOOL_INFO.parameters["properties"]["steps"]["type"] == "array"
    assert PLAN_TOOL_INFO.description.startswith("Plan with a list of steps to execute in order.")
    assert RESPOND_TOOL_INFO.name == "respond"
    assert RESPOND_TOOL_INFO.parameters["required"] == ["response"]
    assert RESPOND_TOOL_INFO.description.startswith("Generate a direct response to the user.")


def test_executor_gets_objective_plan_completed_steps_and_first_step() -> None:
    models = standard_models()
    run(build(models))
    first, second = models.executor.calls
    assert first.tools == [] and first.options is None
    # The executor's input ignores the conversation: one system and one user message.
    assert [m.role for m in second.messages] == [Role.SYSTEM, Role.USER]
    assert second.messages[0] == system_message(EXECUTOR_SYSTEM_PROMPT)
    text = second.messages[1].content
    objective, rest = text.split("## OBJECTIVE\n")[1].split("\n\n", 1)
    assert objective == "do the thing"
    assert '\n{"steps":["step B"]}\n' in rest
    assert "Step: step A\nResult: result A\n\n" in rest
    assert "result B" not in rest
    assert text.endswith("\nstep B")
    # Order: objective, plan, completed steps, the step to execute.
    positions = [text.index(part) for part in ("do the thing", '{"steps"', "Step: step A", "\nstep B")]
    assert positions == sorted(positions)
    assert "Step:" not in first.messages[1].content
    assert first.messages[1].content.endswith("\nstep A")
    assert '{"steps":["step A","step B"]}' in first.messages[1].content


def test_replanner_gets_both_tools_forced_and_every_completed_step() -> None:
    models = standard_models()
    run(build(models))
    first, second = models.replanner.calls
    for made in (first, second):
        assert made.tools == [PLAN_TOOL_INFO, RESPOND_TOOL_INFO]
        assert made.options is not None and made.options.tool_choice == "required"
        assert [m.role for m in made.messages] == [Role.SYSTEM, Role.USER]
        system = made.messages[0].content
        assert "`plan`" in system and "`respond`" in system
    text = second.messages[1].content
    assert text.startswith("## OBJECTIVE\ndo the thing\n")
    assert '\n{"steps":["step B"]}\n' in text  # the current plan, not the first one
    assert "step A\",\"step B" not in text
    assert text.endswith("Step: step A\nResult: result A\n\nStep: step B\nResult: result B\n\n")
    assert first.messages[1].content.endswith("Step: step A\nResult: result A\n\n")
    assert '{"steps":["step A","step B"]}' in first.messages[1].content


def test_session_holds_user_input_plan_and_executed_steps() -> None:
    models = Models(
        planner=ScriptedChatModel([plan_reply("step A", "step B")]),
        executor=ScriptedChatModel(["result A", "result B"]),
        replanner=ScriptedChatModel([plan_reply("step B", "step C"), respond_reply("done")]),
    )
    probe = SessionProbe()
    outer = SequentialAgent("outer", "plan, then look", [build(models), probe])
    events = run(outer)
    assert summarize(events[0])[:2] == ("planner", ["outer", *PLANNER])
    assert probe.seen == {
        "UserInput": [user_message("do the thing")],
        "Plan": Plan(["step B", "step C"]),
        "ExecutedStep": "result B",
        "ExecutedSteps": [ExecutedStep("step A", "result A"), ExecutedStep("step B", "result B")],
    }


def test_executor_runs_tools_and_its_final_answer_is_the_step_result() -> None:
    @tool
    def lookup(topic: str) -> str:
        """Look a topic up.

        Args:
            topic: what to look up.
        """
        return f"facts about {topic}"

    models = Models(
        planner=ScriptedChatModel([plan_reply("look up owls")]),
        executor=ScriptedChatModel(
            [calls_message(call("lookup", {"topic": "owls"}, id="t1")), "Owls hunt at night."]
        ),
        replanner=ScriptedChatModel([respond_reply("Owls are nocturnal.")]),
    )
    events = run(build(models, tools=[lookup]))
    executor_path = [*LOOP, "executor"]
    assert [summarize(e) for e in events][1:4] == [
        ("executor", executor_path, "assistant", "", None),
        ("executor", executor_path, "tool/lookup", "facts about owls", None),
        ("executor", executor_path, "assistant", "Owls hunt at night.", None),
    ]
    assert [t.name for t in models.executor.calls[0].tools] == ["lookup"]
    assert "Step: look up owls\nResult: Owls hunt at night.\n\n" in (
        models.replanner.calls[0].messages[1].content
    )


def test_executor_max_iterations_is_passed_to_the_chat_model_agent() -> None:
    executor = planexecute.new_executor(ScriptedChatModel([]), max_iterations=3)
    assert (executor.name, executor.description, executor.max_iterations) == (
        "executor", "an executor agent", 3,
    )
    assert executor.output_key == "ExecutedStep"


def test_agent_names_and_descriptions() -> None:
    planner = planexecute.new_planner(ScriptedChatModel([]))
    replanner = planexecute.new_replanner(ScriptedChatModel([]))
    assert (planner.name, planner.description) == ("planner", "a planner agent")
    assert (replanner.name, replanner.description) == ("replanner", "a replanner agent")
    agent = build(standard_models())
    assert agent.name == "plan_execute_replan"
    loop = agent.sub_agents[1]
    assert loop.name == "execute_replan"
    assert [a.name for a in loop.sub_agents] == ["executor", "replanner"]  # type: ignore[attr-defined]


# --- streaming ---------------------------------------------------------------------------------


def test_streaming_run_streams_every_output_with_the_same_content() -> None:
    models = standard_models()
    events = run(build(models), streaming=True)
    assert [summarize(e) for e in events] == STREAMED_RUN
    outputs = [e for e in events if e.output is not None][:-1]
    assert all(e.output.message_output.is_streaming for e in outputs)  # type: ignore[union-attr]
    assert all(c.streaming for m in attrs.astuple(models, recurse=False) for c in m.calls)
    assert events[-1].action.break_loop.current_iterations == 1  # type: ignore[union-attr]


def test_the_final_answer_is_the_runs_final_message() -> None:
    result = Runner(build(standard_models())).invoke("do the thing")
    assert result.text == "all good"
    streamed = Runner(build(standard_models()), enable_streaming=True).invoke("do the thing")
    assert streamed.text == "all good"


def test_streamed_plan_arrives_in_several_chunks_of_the_tool_arguments() -> None:
    planner = planexecute.new_planner(ScriptedChatModel([plan_reply("a", "b")]))
    with no_thread_leak():
        events = list(Runner(planner, enable_streaming=True).query("go"))
    (event,) = events
    stream = event.output.message_output.message_stream  # type: ignore[union-attr]
    assert stream is not None
    chunks = list(stream)
    assert len(chunks) > 1
    assert all(c.role is Role.ASSISTANT and not c.tool_calls for c in chunks)
    assert "".join(c.content for c in chunks) == '{"steps": ["a", "b"]}'


def test_streamed_planner_reply_without_tool_call_fails_the_stream_and_the_run() -> None:
    planner = planexecute.new_planner(ScriptedChatModel(["I'd rather chat."]))
    with no_thread_leak():
        events = list(Runner(planner, enable_streaming=True).query("go"))
    output, failure = events
    with pytest.raises(PlanExecuteError, match="answered without calling a tool"):
        output.get_message()
    assert isinstance(failure.err, PlanExecuteError)
    assert str(failure.err) == NO_PLAN_CALL


# --- errors ----------------------------------------------------------------------------------


def error_run(models: Models, streaming: bool = False) -> list[tuple[str, list[str], str, str, str | None]]:
    events = run(build(models), streaming=streaming)
    assert isinstance(events[-1].err, PlanExecuteError)
    return [summarize(e) for e in events]


def test_planner_reply_without_tool_call_ends_the_run_with_no_tool_call() -> None:
    models = Models(ScriptedChatModel(["Sure, here is a plan: ..."]), ScriptedChatModel([]), ScriptedChatModel([]))
    assert error_run(models) == [("planner", PLANNER, "error", NO_PLAN_CALL, None)]
    assert models.executor.calls == []


def test_planner_calling_another_tool_is_an_unexpected_tool_call() -> None:
    models = Models(ScriptedChatModel([calls_message(call("x", {}))]), ScriptedChatModel([]), ScriptedChatModel([]))
    assert error_run(models) == [
        ("planner", PLANNER, "error", "the planner's model called tool 'x', but it may only call 'plan'", None)
    ]


def test_planner_bad_plan_json_sends_the_output_then_unmarshal_plan_error() -> None:
    bad = calls_message(call("plan", '{"steps": ["a", '))
    models = Models(ScriptedChatModel([bad]), ScriptedChatModel([]), ScriptedChatModel([]))
    summaries = error_run(models)
    assert summaries[0] == ("planner", PLANNER, "assistant", '{"steps": ["a", ', None)
    assert summaries[1][:3] == ("planner", PLANNER, "error")
    assert summaries[1][3].startswith("the planner's plan could not be read: ")
    assert len(summaries) == 2


def test_plan_with_wrong_shape_is_an_unmarshal_plan_error() -> None:
    models = Models(
        ScriptedChatModel([calls_message(call("plan", {"steps": "a then b"}))]),
        ScriptedChatModel([]),
        ScriptedChatModel([]),
    )
    assert "the planner's plan could not be read: " in error_run(models)[-1][3]


@pytest.mark.parametrize("streaming", [False, True])
def test_replanner_without_tool_call_ends_the_run_with_no_tool_call(streaming: bool) -> None:
    models = Models(
        ScriptedChatModel([plan_reply("a")]), ScriptedChatModel(["did a"]), ScriptedChatModel(["All done!"])
    )
    events = run(build(models), streaming=streaming)
    last = events[-1]
    assert isinstance(last.err, PlanExecuteError)
    assert str(last.err).startswith(
        "the replanner's model answered without calling a tool; it must call 'plan' or 'respond'"
    )
    assert (last.agent_name, [str(s) for s in last.run_path]) == ("replanner", [*LOOP, "executor", "replanner"])
    assert not any(e.action is not None and e.action.break_loop for e in events)


def test_replanner_calling_another_tool_is_an_unexpected_tool_call() -> None:
    models = Models(
        ScriptedChatModel([plan_reply("a")]),
        ScriptedChatModel(["did a"]),
        ScriptedChatModel([calls_message(call("search", {"q": "x"}))]),
    )
    summaries = error_run(models)
    assert summaries[-1] == (
        "replanner",
        [*LOOP, "executor", "replanner"],
        "error",
        "the replanner's model called tool 'search', but it may only call 'plan' or 'respond'",
        None,
    )
    assert [s[0] for s in summaries] == ["planner", "executor", "replanner"]


def test_replanner_bad_plan_json_is_an_unmarshal_plan_error_and_stops_the_loop() -> None:
    models = Models(
        ScriptedChatModel([plan_reply("a", "b")]),
        ScriptedChatModel(["did a"]),
        ScriptedChatModel([calls_message(call("plan", "not json"))]),
    )
    summaries = error_run(models)
    assert summaries[-2] == ("replanner", [*LOOP, "executor", "replanner"], "assistant", "not json", None)
    assert summaries[-1][3].startswith("the replanner's plan could not be read: ")
    assert len(models.executor.calls) == 1


def test_executor_or_replanner_without_a_planner_fails_with_impossible_errors() -> None:
    executor = planexecute.new_executor(ScriptedChatModel(["x"]))
    events = run(executor)
    assert isinstance(events[-1].err, PlanExecuteError)
    assert str(events[-1].err).startswith("the plan is missing: session value 'Plan' is not set")
    replanner = planexecute.new_replanner(ScriptedChatModel([]))
    events = run(replanner)
    assert str(events[-1].err).startswith("the plan is missing: session value 'Plan' is not set")


def test_model_errors_reach_the_consumer_as_the_final_event() -> None:
    models = Models(ScriptedChatModel([RuntimeError("boom")]), ScriptedChatModel([]), ScriptedChatModel([]))
    events = run(build(models))
    assert [summarize(e) for e in events] == [("planner", PLANNER, "error", "boom", None)]


def test_models_that_cannot_call_tools_are_refused_at_construction() -> None:
    class PlainModel:
        def generate(self, messages: Sequence[Message], options: Any = None) -> Message:
            raise AssertionError

        def stream(self, messages: Sequence[Message], options: Any = None) -> Any:
            raise AssertionError

    with pytest.raises(AgentConfigError, match="cannot call tools"):
        planexecute.new_planner(PlainModel())
    with pytest.raises(AgentConfigError, match="cannot call tools"):
        planexecute.new_replanner(PlainModel())


# --- max_iterations -----------------------------------------------------------------------------


def test_loop_stops_after_max_iterations_without_a_response() -> None:
    models = Models(
        ScriptedChatModel([plan_reply("a", "b", "c")]),
        ScriptedChatModel(["did a", "did b"]),
        ScriptedChatModel([plan_reply("b", "c"), plan_reply("c")]),
    )
    events = run(build(models, max_iterations=2))
    assert [summarize(e)[0] for e in events] == ["planner", "executor", "replanner", "executor", "replanner"]
    assert all(e.err is None and e.action is None for e in events)
    assert len(models.replanner.calls) == 2


def test_max_iterations_one_runs_a_single_round() -> None:
    models = Models(
        ScriptedChatModel([plan_reply("a", "b")]),
        ScriptedChatModel(["did a"]),
        ScriptedChatModel([plan_reply("b")]),
    )
    events = run(build(models, max_iterations=1))
    assert [summarize(e)[0] for e in events] == ["planner", "executor", "replanner"]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3"])
def test_max_iterations_must_be_an_int_of_at_least_one(bad: Any) -> None:
    with pytest.raises(AgentConfigError, match="max_iterations"):
        build(standard_models(), max_iterations=bad)


def test_default_max_iterations_is_ten() -> None:
    agent = build(standard_models())
    assert agent.sub_agents[1].max_iterations == 10  # type: ignore[attr-defined]


# --- custom plans and inputs ---------------------------------------------------------------------


@attrs.define
class Task:
    id: int
    action: str


@attrs.define
class TaskPlan:
    """A plan of numbered tasks, as ``{"tasks": [{"id": 1, "action": "..."}]}``."""

    tasks: list[Task]

    @classmethod
    def from_json(cls, text: str) -> TaskPlan:
        data = json.loads(text)
        return cls([Task(int(item["id"]), str(item["action"])) for item in data["tasks"]])

    def to_json(self) -> str:
        return json.dumps({"tasks": [attrs.asdict(t) for t in self.tasks]})

    def first_step(self) -> str:
        return f"#{self.tasks[0].id}: {self.tasks[0].action}" if self.tasks else ""


TASK_TOOL = ToolInfo(
    name="submit_tasks",
    description="Submit the numbered tasks.",
    parameters={
        "type": "object",
        "properties": {"tasks": {"type": "array", "items": {"type": "object"}}},
        "required": ["tasks"],
    },
)


def test_custom_plan_type_and_plan_tool() -> None:
    def tasks(*items: tuple[int, str]) -> Message:
        return calls_message(call("submit_tasks", {"tasks": [{"id": i, "action": a} for i, a in items]}))

    models = Models(
        planner=ScriptedChatModel([tasks((1, "book"), (2, "pack"))]),
        executor=ScriptedChatModel(["booked", "packed"]),
        replanner=ScriptedChatModel([tasks((2, "pack")), respond_reply("ready")]),
    )
    probe = SessionProbe()
    agent = planexecute.new(
        planexecute.new_planner(models.planner, plan_tool=TASK_TOOL, plan_type=TaskPlan),
        planexecute.new_executor(models.executor),
        planexecute.new_replanner(models.replanner, plan_tool=TASK_TOOL, plan_type=TaskPlan),
    )
    events = run(SequentialAgent("outer", "d", [agent, probe]))
    assert events[-1].action.break_loop is not None  # type: ignore[union-attr]
    assert models.planner.calls[0].tools == [TASK_TOOL]
    assert models.replanner.calls[0].tools == [TASK_TOOL, RESPOND_TOOL_INFO]
    assert "`submit_tasks`" in models.replanner.calls[0].messages[0].content
    second = models.executor.calls[1].messages[1].content
    assert TaskPlan([Task(2, "pack")]).to_json() in second
    assert second.endswith("\n#2: pack")
    assert "Step: #1: book\nResult: booked\n\n" in second
    assert probe.seen["Plan"] == TaskPlan([Task(2, "pack")])
    assert probe.seen["ExecutedSteps"] == [ExecutedStep("#1: book", "booked"), ExecutedStep("#2: pack", "packed")]


def test_plan_and_respond_tools_must_have_different_names() -> None:
    with pytest.raises(AgentConfigError, match="different names"):
        planexecute.new_replanner(ScriptedChatModel([]), plan_tool=RESPOND_TOOL_INFO)


def test_custom_gen_input_functions_build_each_model_input() -> None:
    seen: dict[str, Any] = {}

    def planner_input(user_input: list[Message]) -> list[Message]:
        seen["planner"] = user_input
        return [system_message("Plan tersely."), *user_input]

    def executor_input(context: ExecutionContext) -> list[Message]:
        seen.setdefault("executor", []).append(context)
        return [user_message(f"Do: {context.plan.first_step()} (done: {len(context.executed_steps)})")]

    def replanner_input(context: ExecutionContext) -> list[Message]:
        seen.setdefault("replanner", []).append(context)
        return [user_message(f"Review {len(context.executed_steps)} step(s)")]

    models = standard_models()
    agent = planexecute.new(
        planexecute.new_planner(models.planner, gen_input=planner_input),
        planexecute.new_executor(models.executor, gen_input=executor_input),
        planexecute.new_replanner(models.replanner, gen_input=replanner_input),
    )
    events = run(agent)
    assert [summarize(e) for e in events] == FULL_RUN
    assert models.planner.calls[0].messages == [system_message("Plan tersely."), user_message("do the thing")]
    assert [c.messages for c in models.executor.calls] == [
        [user_message("Do: step A (done: 0)")],
        [user_message("Do: step B (done: 1)")],
    ]
    assert [c.messages for c in models.replanner.calls] == [
        [user_message("Review 1 step(s)")],
        [user_message("Review 2 step(s)")],
    ]
    assert seen["planner"] == [user_message("do the thing")]
    first, second = seen["replanner"]
    assert first == ExecutionContext([user_message("do the thing")], Plan(["step A", "step B"]), [ExecutedStep("step A", "result A")])
    assert second.plan == Plan(["step B"])
    assert second.executed_steps == [ExecutedStep("step A", "result A"), ExecutedStep("step B", "result B")]
    assert seen["executor"][1].executed_steps == [ExecutedStep("step A", "result A")]


def test_planner_without_plan_tool_parses_the_reply_content() -> None:
    model = ScriptedChatModel(['{"steps": ["only step"]}'])
    models = Models(model, ScriptedChatModel(["did it"]), ScriptedChatModel([respond_reply("ok")]))
    agent = planexecute.new(
        planexecute.new_planner(model, plan_tool=None),
        planexecute.new_executor(models.executor),
        planexecute.new_replanner(models.replanner),
    )
    events = run(agent)
    assert summarize(events[0]) == ("planner", PLANNER, "assistant", '{"steps": ["only step"]}', None)
    assert model.calls[0].tools == [] and model.calls[0].options is None
    assert models.executor.calls[0].messages[1].content.endswith("\nonly step")


def test_run_options_reach_planner_and_replanner_but_tool_choice_stays_forced() -> None:
    models = standard_models()
    run(build(models), "do the thing", with_chat_model_options(temperature=0.1, tool_choice="none"))
    for made in (*models.planner.calls, *models.replanner.calls):
        assert made.options is not None
        assert (made.options.temperature, made.options.tool_choice) == (0.1, "required")
    assert models.executor.calls[0].options is not None
    assert models.executor.calls[0].options.temperature == 0.1


def test_planner_run_bare_without_a_runner_still_emits_its_plan() -> None:
    planner = planexecute.new_planner(ScriptedChatModel([plan_reply("a")]))
    with no_thread_leak():
        events = list(planner.run(AgentInput([user_message("go")])))
    assert [summarize(e) for e in events] == [("", [], "assistant", '{"steps": ["a"]}', None)]


# --- interrupts and cancellation ------------------------------------------------------------------


def test_executor_tool_interrupt_resumes_and_the_plan_goes_on() -> None:
    @tool
    def book(what: str) -> str:
        """Book something (needs approval).

        Args:
            what: what to book.
        """
        approved = interrupt(f"book {what}?")
        return f"booked {what}" if approved else "not booked"

    models = Models(
        planner=ScriptedChatModel([plan_reply("book a hotel", "summarize")]),
        executor=ScriptedChatModel(
            [calls_message(call("book", {"what": "hotel"}, id="b1")), "Hotel booked.", "Summary: hotel booked."]
        ),
        replanner=ScriptedChatModel([plan_reply("summarize"), respond_reply("Your hotel is booked.")]),
    )
    runner = Runner(build(models, tools=[book]), checkpoint_store=InMemoryCheckPointStore())
    with no_thread_leak():
        first = list(runner.query("book me a hotel", with_checkpoint_id("trip")))
        interrupted = first[-1]
        assert interrupted.action is not None and interrupted.action.interrupted is not None
        (point,) = interrupted.action.interrupted.contexts
        assert point.info == "book hotel?"
        resumed = list(runner.resume("trip", targets={point.id: True}))
    assert [summarize(e) for e in resumed] == [
        ("executor", [*LOOP, "executor"], "tool/book", "booked hotel", None),
        ("executor", [*LOOP, "executor"], "assistant", "Hotel booked.", None),
        ("replanner", [*LOOP, "executor", "replanner"], "assistant", '{"steps": ["summarize"]}', None),
        ("executor", [*LOOP, "executor", "replanner", "executor"], "assistant", "Summary: hotel booked.", None),
        ("replanner", [*LOOP, "executor", "replanner", "executor", "replanner"], "assistant",
         "Your hotel is booked.", None),
        ("replanner", [*LOOP, "executor", "replanner", "executor", "replanner"], "", "", "break_loop"),
    ]
    # Session values survived the checkpoint: the replanner saw the user input and the steps.
    text = models.replanner.calls[1].messages[1].content
    assert text.startswith("## OBJECTIVE\nbook me a hotel\n")
    assert "Step: book a hotel\nResult: Hotel booked.\n\nStep: summarize\nResult: Summary: hotel booked.\n\n" in text


def test_closing_the_iterator_early_stops_the_run_without_leaking_threads() -> None:
    closed = threading.Event()

    def slow_executor(messages: list[Message]) -> str:
        assert closed.wait(10)
        return "result A"

    models = Models(
        planner=ScriptedChatModel([plan_reply("step A", "step B")]),
        executor=ScriptedChatModel([slow_executor]),
        replanner=ScriptedChatModel([]),
    )
    with no_thread_leak():
        events = Runner(build(models)).query("do the thing")
        first = next(iter(events))
        events.close(timeout=0)  # cancels the run; the executor's model call is still blocked
        closed.set()
    assert first.agent_name == "planner"
    assert models.replanner.calls == []


# --- the default plan ---------------------------------------------------------------------------


def test_plan_json_round_trip_and_first_step() -> None:
    plan = Plan.from_json('{"steps": ["a", "b"]}')
    assert plan == Plan(["a", "b"])
    assert plan.to_json() == '{"steps":["a","b"]}'
    assert plan.first_step() == "a"
    assert Plan().first_step() == ""
    assert Plan.from_json("{}") == Plan([])
    assert Plan.from_json('{"steps": ["café"]}').to_json() == '{"steps":["café"]}'
    assert isinstance(plan, planexecute.PlanLike)
    with pytest.raises(TypeError, match="not one string"):
        Plan("a then b")


@pytest.mark.parametrize("text", ["", "[1]", '{"steps": "a"}', '{"steps": [1, 2]}', "nope"])
def test_plan_from_json_rejects_what_is_not_a_list_of_steps(text: str) -> None:
    with pytest.raises(ValueError):
        Plan.from_json(text)
