"""Run limits through whole runs: each kind stops the run at the right step (nested and parallel
agents included); with a checkpoint the run pauses with a LimitReached and a resume with a larger
limit finishes it; without one it ends with a RunLimitError naming limit, usage and allowance."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from agentkit import (
    AgentTool,
    ChatModelAgent,
    LimitReached,
    Message,
    ModelPricing,
    ModelRetryConfig,
    ParallelAgent,
    Role,
    RunLimitError,
    RunLimits,
    Runner,
    RunResult,
    SequentialAgent,
    tool,
    with_checkpoint_id,
    with_limits,
)
from agentkit.checkpoint import InMemoryCheckPointStore, PickleSerializer
from agentkit.errors import ModelError
from agentkit.models import ScriptedChatModel
from agentkit.schema import ResponseMeta, TokenUsage
from agentkit.testing import call, calls_message, no_thread_leak

KEY = b"limits tests key, not a secret!!"
USAGE = TokenUsage(prompt_tokens=100, completion_tokens=10, total_tokens=110)
PRICING = ModelPricing(input_per_million=1.0, output_per_million=2.0)  # 0.00012 per call


class Counter:
    """Counts the calls of the tools made with it (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[str] = []

    def add(self, item: str) -> None:
        with self.lock:
            self.calls.append(item)


def with_usage(message: Message | str) -> Message:
    reply = message if isinstance(message, Message) else Message(Role.ASSISTANT, message)
    return attrs.evolve(reply, response_meta=ResponseMeta("stop", USAGE))


def stepper(steps: int, tool_name: str = "step", fanout: int = 1) -> Callable[[list[Message]], Message]:
    """A model that calls ``tool_name`` (``fanout`` calls per reply) until it has ``steps``
    results, then answers; every reply reports USAGE. It reads only the conversation, so it
    answers the same in a resumed run."""

    def reply(messages: list[Message]) -> Message:
        done = sum(1 for message in messages if message.role is Role.TOOL)
        if done >= steps:
            return with_usage(f"done after {done} steps")
        calls = [call(tool_name, {"n": done + i}, id=f"{tool_name}-{done + i}") for i in range(fanout)]
        return with_usage(calls_message(*calls))

    return reply


def step_tool(counter: Counter, name: str = "step", pause: float = 0.0) -> Any:
    @tool(name=name)
    def step(n: int) -> str:
        """Do one step."""
        if pause:
            time.sleep(pause)
        counter.add(f"{name}:{n}")
        return f"step {n} done"

    return step


def agent(
    name: str = "worker", steps: int = 5, *, counter: Counter, fanout: int = 1, pause: float = 0.0,
    pricing: ModelPricing | None = PRICING,
) -> tuple[ChatModelAgent, ScriptedChatModel]:
    model = ScriptedChatModel(stepper(steps, f"{name}_step", fanout), pricing=pricing)
    made = ChatModelAgent(
        name, f"{name} does steps", model,
        tools=[step_tool(counter, f"{name}_step", pause)], max_iterations=50,
    )
    return made, model


def saving_runner(root: Any, **kwargs: Any) -> Runner:
    return Runner(
        root, checkpoint_store=InMemoryCheckPointStore(), serializer=PickleSerializer(KEY), **kwargs
    )


def limit_error(result: RunResult) -> RunLimitError:
    assert isinstance(result.error, RunLimitError), result.error
    return result.error


def reached(result: RunResult) -> list[LimitReached]:
    assert result.interrupt is not None, result.error
    return [c.info for c in result.interrupt.contexts if isinstance(c.info, LimitReached)]


# --- each limit kind stops the run at the right step (no checkpoint: RunLimitError) ------------


@pytest.mark.parametrize(
    ("limits", "model_calls", "tool_calls", "used", "next_call"),
    [
        # Call limits: the counted kind stops at its own next call.
        (RunLimits(model_calls=3), 3, 3, 3, "model call"),
        (RunLimits(tool_calls=2), 3, 2, 2, "tool call"),
        # Tokens and cost: the third reply pushes them past the allowance; the run stops
        # before the tool call that reply asked for.
        (RunLimits(input_tokens=250), 3, 2, 300, "tool call"),
        (RunLimits(output_tokens=25), 3, 2, 30, "tool call"),
        (RunLimits(total_tokens=330), 3, 2, 330, "tool call"),
        (RunLimits(cost=0.0003), 3, 2, 0.00036, "tool call"),
    ],
    ids=["model_calls", "tool_calls", "input_tokens", "output_tokens", "total_tokens", "cost"],
)
def test_each_limit_ends_a_run_without_checkpoint_at_the_right_step(
    limits: RunLimits, model_calls: int, tool_calls: int, used: float, next_call: str
) -> None:
    counter = Counter()
    worker, model = agent(counter=counter)
    with no_thread_leak():
        result = Runner(worker).run([], with_limits(limits)).result(raise_errors=False)
    error = limit_error(result)
    (limit, allowed), = limits.set_limits()
    assert (error.limit, error.allowed) == (limit, allowed)
    assert error.used == pytest.approx(used)
    assert len(model.calls) == model_calls
    assert len(counter.calls) == tool_calls
    text = str(error)
    assert limit.replace("_", " ") in text and repr(limits) in text
    assert f"stopped before its next {next_call}" in text
    assert "with_checkpoint_id" in text  # how to pause instead
    # The usage so far is in the result.
    assert result.usage.total_tokens == 110 * model_calls
    assert result.cost == pytest.approx(0.00012 * model_calls)
    assert result.events[-1].err is error


@pytest.mark.parametrize(
    ("limits", "words"),
    [
        (RunLimits(model_calls=1), "it made 1 model call, so"),
        (RunLimits(model_calls=2), "it made 2 model calls, so"),
        (RunLimits(tool_calls=1), "it made 1 tool call, so"),
        (RunLimits(tool_calls=2), "it made 2 tool calls, so"),
    ],
)
def test_a_limit_error_counts_in_the_singular_and_the_plural(limits: RunLimits, words: str) -> None:
    worker, _ = agent(counter=Counter())
    error = limit_error(Runner(worker).run([], with_limits(limits)).result(raise_errors=False))
    assert words in str(error)
    assert "1 model calls" not in str(error) and "1 tool calls" not in str(error)


def test_a_wall_time_limit_stops_the_run_at_the_next_safe_point() -> None:
    counter = Counter()
    worker, model = agent(counter=counter, pause=1.2)  # the first step alone outlasts the limit
    result = Runner(worker).run([], with_limits(RunLimits(wall_time=1.0))).result(raise_errors=False)
    error = limit_error(result)
    assert error.limit == "wall_time" and error.allowed == 1.0 and error.used >= 1.2
    # The running tool call was not cut short; the run stopped before the next model call.
    assert counter.calls == ["worker_step:0"] and len(model.calls) == 1
    assert "it ran" in str(error) and "next model call" in str(error)


def test_runner_limits_are_the_default_and_with_limits_replaces_them_for_one_run() -> None:
    counter = Counter()
    worker, model = agent(counter=counter)
    runner = Runner(worker, limits=RunLimits(model_calls=2))
    assert limit_error(runner.run([]).result(raise_errors=False)).allowed == 2
    assert len(model.calls) == 2
    wider = runner.run([], with_limits(RunLimits(model_calls=4))).result(raise_errors=False)
    assert limit_error(wider).used == 4
    done = runner.invoke("go", with_limits(None))  # no limits for this run
    assert done.text == "done after 5 steps"


def test_limits_count_the_model_calls_of_retries_and_a_refused_call_is_not_retried() -> None:
    counter = Counter()
    flaky = iter([ModelError("boom")])

    def script(messages: list[Message]) -> Message:
        failure = next(flaky, None)
        if failure is not None:
            raise failure
        return stepper(5, "worker_step")(messages)

    model = ScriptedChatModel(script)
    worker = ChatModelAgent(
        "worker", "d", model, tools=[step_tool(counter, "worker_step")],
        model_retry=ModelRetryConfig(max_retries=5, backoff=lambda attempt: 0.0),
    )
    result = Runner(worker).run([], with_limits(RunLimits(model_calls=2))).result(
        raise_errors=False
    )
    # The failed attempt and its retry are the two calls; the third is refused, not retried.
    assert limit_error(result).used == 2
    assert len(model.calls) == 2 and counter.calls == ["worker_step:0"]


def test_a_streamed_run_stops_the_same_way() -> None:
    counter = Counter()
    worker, _ = agent(counter=counter)
    result = Runner(worker, enable_streaming=True).run(
        [], with_limits(RunLimits(model_calls=2))
    ).result(raise_errors=False)
    assert limit_error(result).used == 2 and len(counter.calls) == 2
    assert result.cost == pytest.approx(0.00024)


# --- with a checkpoint the run pauses; a resume with a larger limit finishes it ----------------


def test_a_run_with_a_checkpoint_pauses_and_resumes_with_a_larger_limit() -> None:
    counter = Counter()
    worker, model = agent(counter=counter)
    runner = saving_runner(worker, limits=RunLimits(model_calls=2))
    with no_thread_leak():
        paused = runner.invoke("go", with_checkpoint_id("budget-1"))
    assert paused.status == "interrupted" and paused.checkpoint_id == "budget-1"
    assert reached(paused) == [LimitReached("model_calls", 2, 2)]
    (context,) = paused.interrupt.contexts  # type: ignore[union-attr]
    assert context.address == ("agent:worker",) and context.is_root_cause
    assert str(context.info) == "the run reached its model calls limit: 2 used of 2"
    assert paused.usage.total_tokens == 220 and paused.cost == pytest.approx(0.00024)
    assert len(model.calls) == 2 and len(counter.calls) == 2

    with no_thread_leak():
        done = runner.resume("budget-1", with_limits(RunLimits(model_calls=6))).result()
    assert done.text == "done after 5 steps"
    # Every step ran once; the refused call was made once, after the resume.
    assert sorted(counter.calls) == [f"worker_step:{n}" for n in range(5)]
    assert len(model.calls) == 6
    assert done.usage.total_tokens == 4 * 110  # what the resumed run used


def test_a_resume_keeps_the_saved_limits_and_counts_on() -> None:
    counter = Counter()
    worker, model = agent(counter=counter)
    runner = saving_runner(worker)
    runner.invoke("go", with_checkpoint_id("cp"), with_limits(RunLimits(model_calls=2)))
    # Resumed without new limits: the saved ones hold, and two calls are used already.
    again = runner.resume("cp").result()
    assert reached(again) == [LimitReached("model_calls", 2, 2)]
    assert len(model.calls) == 2  # no call was made
    # A larger allowance continues the count: 2 used before, 1 more now.
    third = runner.resume("cp", with_limits(RunLimits(model_calls=3))).result()
    assert reached(third) == [LimitReached("model_calls", 3, 3)]
    assert len(model.calls) == 3
    # with_limits(None) lifts the limits.
    assert runner.resume("cp", with_limits(None)).result().text == "done after 5 steps"
    assert len(counter.calls) == 5


def test_a_tool_call_limit_pauses_inside_a_round_and_the_resume_runs_only_the_refused_calls() -> None:
    counter = Counter()
    worker, model = agent(counter=counter, steps=3, fanout=3)  # one reply, three calls at once
    runner = saving_runner(worker)
    paused = runner.invoke("go", with_checkpoint_id("cp"), with_limits(RunLimits(tool_calls=2)))
    assert reached(paused) == [LimitReached("tool_calls", 2, 2)]
    assert len(counter.calls) == 2  # exactly two of the three calls ran
    done = runner.resume("cp", with_limits(RunLimits(tool_calls=3))).result()
    assert done.text == "done after 3 steps"
    assert sorted(counter.calls) == ["worker_step:0", "worker_step:1", "worker_step:2"]
    assert len(model.calls) == 2  # the round was not asked for again


def test_a_call_that_stopped_for_an_approval_counts_once_against_the_limit() -> None:
    # The call that asked is the call that runs once approved: one call, counted once. The
    # run then has one more call under tool_calls=2.
    counter = Counter()

    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        counter.add(f"pay:{amount}")
        return "paid"

    model = ScriptedChatModel([
        calls_message(call("pay", {"amount": 5}, id="p")),
        calls_message(call("worker_step", {"n": 1}, id="w")),
        "done",
    ])
    worker = ChatModelAgent("A", "d", model, tools=[pay, step_tool(counter, "worker_step")])
    runner = saving_runner(worker, limits=RunLimits(tool_calls=2))
    asked = runner.invoke("go", with_checkpoint_id("cp"))
    assert asked.interrupt is not None
    (context,) = asked.interrupt.contexts
    done = runner.resume("cp", targets={context.id: True}).result()
    assert done.interrupt is None, reached(done)
    assert done.text == "done"
    assert counter.calls == ["pay:5", "worker_step:1"]


def test_token_and_cost_limits_pause_with_what_was_used() -> None:
    counter = Counter()
    worker, _ = agent(counter=counter)
    runner = saving_runner(worker)
    paused = runner.invoke("go", with_checkpoint_id("cp"), with_limits(RunLimits(cost=0.0003)))
    (info,) = reached(paused)
    assert info.limit == "cost" and info.allowed == 0.0003
    assert info.used == pytest.approx(0.00036)
    assert paused.cost == pytest.approx(0.00036)
    resumed = runner.resume("cp", with_limits(RunLimits(cost=0.0005))).result()
    # 0.00036 carried + the 4th and 5th calls (0.00024) reach 0.0006 >= 0.0005.
    (again,) = reached(resumed)
    assert again.used == pytest.approx(0.0006)
    assert resumed.cost == pytest.approx(0.00024)  # this resume's own calls


def test_a_paused_runs_wall_time_counts_on_after_the_resume() -> None:
    counter = Counter()
    worker, _ = agent(counter=counter, pause=0.6)
    runner = saving_runner(worker)
    paused = runner.invoke("go", with_checkpoint_id("cp"), with_limits(RunLimits(wall_time=0.5)))
    (first,) = reached(paused)
    assert first.limit == "wall_time" and first.used >= 0.6
    time.sleep(0.3)  # waiting while paused does not count
    resumed = runner.resume("cp", with_limits(RunLimits(wall_time=first.used + 0.5))).result()
    (second,) = reached(resumed)
    assert second.used >= first.used + 0.6  # the step after the resume, on top
    assert second.used < first.used + 0.6 + 0.3 + 5.0  # the paused time is not in it
    assert counter.calls == ["worker_step:0", "worker_step:1"]


# --- nested and parallel agents --------------------------------------------------------------


def test_limits_count_an_agent_used_as_a_tool_and_it_pauses_inside_it() -> None:
    counter = Counter()
    inner, inner_model = agent("inner", steps=3, counter=counter)
    boss_model = ScriptedChatModel(
        lambda messages: with_usage("boss done")
        if messages[-1].role is Role.TOOL
        else with_usage(calls_message(call("inner", {"request": "work"}, id="i1")))
    )
    boss = ChatModelAgent("boss", "d", boss_model, tools=[AgentTool(inner)])
    runner = saving_runner(boss)
    # boss 1 call, then inner: 2 calls allowed (3 - 1) before the pause.
    paused = runner.invoke("go", with_checkpoint_id("cp"), with_limits(RunLimits(model_calls=3)))
    (context,) = [c for c in paused.interrupt.contexts]  # type: ignore[union-attr]
    assert context.info == LimitReached("model_calls", 3, 3)
    assert context.address == ("agent:boss", "tool:inner:i1", "agent:inner")
    assert (len(boss_model.calls), len(inner_model.calls)) == (1, 2)
    done = runner.resume("cp", with_limits(RunLimits(model_calls=10))).result()
    assert done.text == "boss done"
    assert (len(boss_model.calls), len(inner_model.calls)) == (2, 4)
    assert sorted(counter.calls) == ["inner_step:0", "inner_step:1", "inner_step:2"]


def test_a_limit_in_an_agent_used_as_a_tool_ends_the_outer_run_without_checkpoint() -> None:
    counter = Counter()
    inner, _ = agent("inner", steps=3, counter=counter)
    boss = ChatModelAgent(
        "boss", "d",
        ScriptedChatModel(lambda m: calls_message(call("inner", {"request": "x"}, id="i1"))),
        tools=[AgentTool(inner)],
        tool_exception_handler=lambda error, call: "handled",  # does not swallow the limit
    )
    result = Runner(boss).run([], with_limits(RunLimits(model_calls=2))).result(raise_errors=False)
    assert limit_error(result).used == 2


def test_parallel_branches_share_one_exact_count_and_resume_to_the_end() -> None:
    counter = Counter()
    made = [agent(f"b{i}", steps=1, counter=counter) for i in range(3)]
    team = ParallelAgent("team", "three at once", [branch for branch, _ in made])
    # Each branch needs 2 model calls (a step, then its answer): 6 in all; 4 are allowed.
    result = Runner(team).run([], with_limits(RunLimits(model_calls=4))).result(raise_errors=False)
    assert limit_error(result).allowed == 4
    assert sum(len(model.calls) for _, model in made) == 4  # exact across threads

    counter = Counter()
    made = [agent(f"b{i}", steps=1, counter=counter) for i in range(3)]
    runner = saving_runner(ParallelAgent("team", "three at once", [b for b, _ in made]))
    with no_thread_leak():
        paused = runner.invoke("go", with_checkpoint_id("cp"), with_limits(RunLimits(model_calls=4)))
    infos = reached(paused)
    assert infos and all(info == LimitReached("model_calls", 4, 4) for info in infos)
    assert sum(len(model.calls) for _, model in made) == 4
    with no_thread_leak():
        done = runner.resume("cp", with_limits(RunLimits(model_calls=6))).result()
    assert done.error is None and done.interrupt is None
    assert sum(len(model.calls) for _, model in made) == 6
    assert sorted(counter.calls) == ["b0_step:0", "b1_step:0", "b2_step:0"]


def test_concurrent_model_calls_in_agents_used_as_tools_never_pass_a_call_limit() -> None:
    counter = Counter()
    inners = [agent(f"in{i}", steps=2, counter=counter) for i in range(8)]
    boss = ChatModelAgent(
        "boss", "d",
        ScriptedChatModel([calls_message(*(call(f"in{i}", {"request": "x"}) for i in range(8)))]),
        tools=[AgentTool(inner) for inner, _ in inners],
    )
    with no_thread_leak():
        result = Runner(boss).run([], with_limits(RunLimits(model_calls=7))).result(
            raise_errors=False
        )
    assert limit_error(result).allowed == 7
    assert 1 + sum(len(model.calls) for _, model in inners) == 7


def test_limits_count_over_a_sequence_of_agents() -> None:
    counter = Counter()
    first, _ = agent("first", steps=2, counter=counter)
    second, second_model = agent("second", steps=2, counter=counter)
    pipeline = SequentialAgent("pipeline", "one then the other", [first, second])
    result = Runner(pipeline).run([], with_limits(RunLimits(tool_calls=3))).result(
        raise_errors=False
    )
    assert limit_error(result).used == 3
    assert counter.calls == ["first_step:0", "first_step:1", "second_step:0"]
    assert len(second_model.calls) == 2


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({}, ValueError, "sets no limit"),
        ({"model_calls": 0}, ValueError, "at least 1"),
        ({"tool_calls": -3}, ValueError, "at least 1"),
        ({"total_tokens": 1.5}, TypeError, "whole number"),
        ({"model_calls": True}, TypeError, "whole number"),
        ({"cost": 0}, ValueError, "above 0"),
        ({"cost": -1.0}, ValueError, "above 0"),
        ({"cost": float("nan")}, ValueError, "above 0"),
        ({"wall_time": "10"}, TypeError, "a number"),
    ],
)
def test_bad_limits_are_refused_at_construction(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        RunLimits(**kwargs)


def test_limits_given_in_the_wrong_place_say_how_to_give_them() -> None:
    worker, _ = agent(counter=Counter())
    with pytest.raises(TypeError, match=r"with_limits\(\) takes a RunLimits"):
        with_limits({"cost": 1.0})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limits must be a RunLimits"):
        Runner(worker, limits=5)  # type: ignore[arg-type]


def test_run_limits_show_only_what_is_set() -> None:
    assert repr(RunLimits(cost=0.5, model_calls=10)) == "RunLimits(model_calls=10, cost=0.5)"
    assert RunLimits(cost=0.5).set_limits() == [("cost", 0.5)]


# --- plan-execute: the planner and the replanner pause too -------------------------------------


def plan_execute() -> tuple[Any, list[ScriptedChatModel]]:
    from agentkit.prebuilt import planexecute

    models = [
        ScriptedChatModel([calls_message(call("plan", {"steps": ["step A", "step B"]}))]),
        ScriptedChatModel(["result A", "result B"]),
        ScriptedChatModel(
            [
                calls_message(call("plan", {"steps": ["step B"]})),
                calls_message(call("respond", {"response": "all good"})),
            ]
        ),
    ]
    agent = planexecute.new(
        planexecute.new_planner(models[0]),
        planexecute.new_executor(models[1]),
        planexecute.new_replanner(models[2]),
    )
    return agent, models


@pytest.mark.parametrize("allowed", [1, 2, 3, 4])
def test_plan_execute_pauses_in_any_agent_and_resumes_to_the_same_answer(allowed: int) -> None:
    # The calls: planner, executor, replanner, executor, replanner.
    agent, models = plan_execute()
    runner = saving_runner(agent)
    paused = runner.invoke("do it", with_checkpoint_id("cp"), with_limits(RunLimits(model_calls=allowed)))
    assert reached(paused) == [LimitReached("model_calls", allowed, allowed)]
    waiting = ["planner", "executor", "replanner", "executor", "replanner"][allowed]
    (context,) = paused.interrupt.contexts  # type: ignore[union-attr]
    assert context.address[-1] == f"agent:{waiting}"
    done = runner.resume("cp", with_limits(RunLimits(model_calls=5))).result()
    assert done.text == "all good"
    assert [len(model.calls) for model in models] == [1, 2, 2]  # no call made twice
    steps = done.session_values["ExecutedSteps"]
    assert [step.step for step in steps] == ["step A", "step B"]  # recorded once each


def test_a_planner_that_a_limit_refuses_pauses_and_plans_from_its_input_when_resumed() -> None:
    def greet_then_plan() -> tuple[Any, list[ScriptedChatModel]]:
        agent, models = plan_execute()
        greeter = ChatModelAgent("greeter", "greets", ScriptedChatModel(["hello"]))
        return SequentialAgent("both", "greet, then plan", [greeter, agent]), models

    unlimited, expected = greet_then_plan()
    Runner(unlimited).invoke("do it")
    agent, models = greet_then_plan()
    runner = saving_runner(agent)
    paused = runner.invoke("do it", with_checkpoint_id("cp"), with_limits(RunLimits(model_calls=1)))
    (context,) = paused.interrupt.contexts  # type: ignore[union-attr]
    assert context.address[-1] == "agent:planner" and models[0].calls == []
    done = runner.resume("cp", with_limits(None)).result()
    assert done.text == "all good"
    # The resumed planner was sent what it would have been sent without the pause.
    assert models[0].calls[0].messages == expected[0].calls[0].messages
    assert [m.content for m in models[0].calls[0].messages][-2:] == [
        "do it", "For context: [greeter] said: hello."
    ]
