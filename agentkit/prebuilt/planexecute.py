"""The plan-execute-replan pattern: plan the task, run it step by step, revise as you go.

Three agents share the work through session values:

- the **planner** turns the user's request into a plan (a forced call of the ``plan`` tool)
  and stores the request under ``UserInput`` and the plan under ``Plan``;
- the **executor** (a :class:`~agentkit.ChatModelAgent`, tools allowed) carries out the
  plan's first step and stores its answer under ``ExecutedStep``;
- the **replanner** appends ``(step, result)`` to ``ExecutedSteps`` and makes a forced
  choice: the ``plan`` tool with the steps still to do (the loop goes on with a new
  ``Plan``), or the ``respond`` tool with the final answer (it sends the answer's text as
  the run's final message, then a :class:`~agentkit.BreakLoopAction`, which ends the loop).

:func:`new` wires them as ``SequentialAgent("plan_execute_replan", [planner,
LoopAgent("execute_replan", [executor, replanner])])``::

    from agentkit.prebuilt import planexecute

    agent = planexecute.new(
        planexecute.new_planner(model),
        planexecute.new_executor(model, tools=[search_flights, get_weather]),
        planexecute.new_replanner(model),
    )
    events = list(Runner(agent).query("Plan a weekend in Lisbon"))

A plan is any object with ``first_step()`` and ``to_json()`` whose class has a
``from_json(text)`` classmethod (:class:`PlanLike`); :class:`Plan`, a list of steps, is the
default. Every model input can be replaced with a ``gen_input`` function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from agentkit._events import Agent, AgentInput
from agentkit._language import resolve
from agentkit._lazy import present
from agentkit.agents._chatmodel import ChatModelAgent
from agentkit.agents._workflow import LoopAgent, SequentialAgent
from agentkit.errors import AgentConfigError
from agentkit.models._base import ChatModel
from agentkit.prebuilt._planexecute_agents import Planner, Replanner
from agentkit.prebuilt._planexecute_plan import (
    EXECUTED_STEP_SESSION_KEY,
    EXECUTED_STEPS_SESSION_KEY,
    PLAN_SESSION_KEY,
    USER_INPUT_SESSION_KEY,
    ExecutedStep,
    ExecutionContext,
    ExecutionInputFn,
    Plan,
    PlanExecuteError,
    PlanLike,
    PlannerInputFn,
    execution_context,
)
from agentkit.prebuilt._planexecute_prompts import (
    EXECUTOR_PROMPT,
    EXECUTOR_SYSTEM_PROMPT,
    PLAN_TOOL_INFO,
    PLANNER_PROMPT,
    REPLANNER_PROMPT,
    REPLANNER_SYSTEM_PROMPT,
    RESPOND_TOOL_INFO,
    default_executor_input,
    default_planner_input,
    default_replanner_input,
    executor_input_for,
    planner_input_for,
    replanner_input_for,
)
from agentkit.schema import Message, ToolInfo
from agentkit.tools._base import BaseTool

__all__ = [
    "EXECUTED_STEPS_SESSION_KEY",
    "EXECUTED_STEP_SESSION_KEY",
    "EXECUTOR_PROMPT",
    "EXECUTOR_SYSTEM_PROMPT",
    "PLANNER_PROMPT",
    "PLAN_SESSION_KEY",
    "PLAN_TOOL_INFO",
    "REPLANNER_PROMPT",
    "REPLANNER_SYSTEM_PROMPT",
    "RESPOND_TOOL_INFO",
    "USER_INPUT_SESSION_KEY",
    "ExecutedStep",
    "ExecutionContext",
    "ExecutionInputFn",
    "Plan",
    "PlanExecuteError",
    "PlanLike",
    "PlannerInputFn",
    "default_executor_input",
    "default_planner_input",
    "default_replanner_input",
    "new",
    "new_executor",
    "new_planner",
    "new_replanner",
]

# The public classes and functions present themselves as ``agentkit.prebuilt.planexecute.X``,
# where they are documented (checkpoints name them by their persisted names, not by module).
present(
    (
        ExecutedStep,
        ExecutionContext,
        Plan,
        PlanExecuteError,
        PlanLike,
        default_executor_input,
        default_planner_input,
        default_replanner_input,
    ),
    __name__,
)


# --- constructors -----------------------------------------------------------------------------


def new_planner(
    model: ChatModel,
    *,
    gen_input: PlannerInputFn | None = None,
    plan_tool: ToolInfo | None = PLAN_TOOL_INFO,
    plan_type: type[PlanLike] = Plan,
    language: str | None = None,
) -> Agent:
    """Return the ``planner`` agent: it turns the user's request into a plan.

    It stores its input messages under ``UserInput``, calls ``model`` once with the plan tool
    and ``tool_choice="required"``, sends an assistant event whose content is the tool
    call's JSON arguments (streamed when the run streams), and stores the parsed plan under
    ``Plan``. Other options given with ``with_chat_model_options`` apply too.

    Args:
        model: a ``ToolCallingChatModel`` (any ``ChatModel`` when ``plan_tool`` is ``None``).
        gen_input: ``gen_input(user_input) -> messages``, replacing
            :func:`default_planner_input`.
        plan_tool: the tool the model submits the plan with (default :data:`PLAN_TOOL_INFO`);
            its arguments must parse with ``plan_type.from_json``. ``None``: the model is
            called without tools and its reply's content is the plan's JSON (for models
            with a JSON output mode).
        plan_type: the plan class (see :class:`PlanLike`); default :class:`Plan`.
        language: the language of the default input, ``"en"`` or ``"zh"`` (``None``: the
            process's, :func:`agentkit.language.set_language`).

    The run fails with :class:`PlanExecuteError` when the reply calls no tool, calls another
    tool, or sends a plan that cannot be read (after the output event).

    Raises:
        AgentConfigError: ``model`` cannot call tools.
    """
    build = gen_input or planner_input_for(resolve(language))
    return Planner(model, build, plan_tool, plan_type)


def new_executor(
    model: ChatModel,
    *,
    tools: Iterable[BaseTool | Callable[..., Any]] = (),
    max_iterations: int = 20,
    gen_input: ExecutionInputFn | None = None,
    language: str | None = None,
) -> ChatModelAgent:
    """Return the ``executor`` agent: a :class:`~agentkit.ChatModelAgent` doing one step.

    Its model input ignores the conversation: it is built from the session
    (:class:`ExecutionContext`: the user's request, the plan, the completed steps) by
    ``gen_input`` (default :func:`default_executor_input`, which asks for the plan's first
    step). With ``tools`` it works in a ReAct loop of at most ``max_iterations`` model
    calls. Its final answer is stored under ``ExecutedStep``.

    ``language``: the language of the default input, ``"en"`` or ``"zh"`` (``None``: the
    process's, :func:`agentkit.language.set_language`).

    The run fails with :class:`PlanExecuteError` (``the plan is missing``, ``the user input is
    missing``) when no planner ran before it.
    """
    build = gen_input or executor_input_for(resolve(language))

    def model_input(instruction: str, input: AgentInput) -> list[Message]:
        return list(build(execution_context()))

    return ChatModelAgent(
        "executor",
        "an executor agent",
        model,
        tools=tools,
        output_key=EXECUTED_STEP_SESSION_KEY,
        max_iterations=max_iterations,
        gen_model_input=model_input,
    )


def new_replanner(
    model: ChatModel,
    *,
    gen_input: ExecutionInputFn | None = None,
    plan_tool: ToolInfo = PLAN_TOOL_INFO,
    respond_tool: ToolInfo = RESPOND_TOOL_INFO,
    plan_type: type[PlanLike] = Plan,
    language: str | None = None,
) -> Agent:
    """Return the ``replanner`` agent: it revises the plan or gives the final answer.

    It appends ``ExecutedStep(plan.first_step(), <executor's answer>)`` to
    ``ExecutedSteps``, then calls ``model`` once with both tools and
    ``tool_choice="required"``; a streaming run shows the tool call's JSON arguments as they
    come (an assistant event). Then:

    - ``respond``: it sends the final answer as an assistant message whose content is the
      ``response`` text (so it is the run's final message: ``RunResult.text``), then an
      action-only event with a :class:`~agentkit.BreakLoopAction` (from ``replanner``),
      which ends the enclosing loop;
    - ``plan``: it sends (when not streaming) an assistant event whose content is the plan's
      JSON, and stores the parsed plan (the remaining steps) under ``Plan``; the loop goes on
      with the executor.

    Args:
        model: a ``ToolCallingChatModel``.
        gen_input: ``gen_input(context) -> messages`` replacing the default input (the
            context's ``executed_steps`` include the step just done).
        plan_tool: the tool for a revised plan (default :data:`PLAN_TOOL_INFO`).
        respond_tool: the tool for the final answer (default :data:`RESPOND_TOOL_INFO`).
        plan_type: the plan class (see :class:`PlanLike`); default :class:`Plan`.
        language: the language of the default input, ``"en"`` or ``"zh"`` (``None``: the
            process's, :func:`agentkit.language.set_language`).

    The run fails with :class:`PlanExecuteError` when the reply calls no tool, calls another
    tool (no output event is sent), sends a plan that cannot be read, or when the planner and
    the executor did not run before it.

    Raises:
        AgentConfigError: ``model`` cannot call tools, or both tools have the same name.
    """
    build = gen_input or replanner_input_for(plan_tool.name, respond_tool.name, resolve(language))
    return Replanner(model, build, plan_tool, respond_tool, plan_type)


def new(
    planner: Agent, executor: Agent, replanner: Agent, max_iterations: int = 10
) -> SequentialAgent:
    """Return the plan-execute-replan agent.

    Its structure is ``SequentialAgent("plan_execute_replan", [planner,
    LoopAgent("execute_replan", [executor, replanner], max_iterations)])``: the planner
    plans once, then the executor and the replanner take turns until the replanner responds
    (its break-loop action ends the loop) or ``max_iterations`` rounds are done (the run
    then simply ends, without a final response).

    Run paths follow the workflow rules: ``[plan_execute_replan, planner]``, then
    ``[plan_execute_replan, planner, execute_replan, executor]``, ``[..., executor,
    replanner]``, and in round two ``[..., executor, replanner, executor]`` and so on.

    Example::

        agent = planexecute.new(
            planexecute.new_planner(model),
            planexecute.new_executor(model, tools=[search]),
            planexecute.new_replanner(model),
        )
        for event in Runner(agent).query("Compare three flights to Rome"):
            ...

    Raises:
        AgentConfigError: ``max_iterations`` is not an int >= 1, or an agent is already
            part of another workflow or flow.
    """
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
        raise AgentConfigError(f"max_iterations must be an int (got {max_iterations!r})")
    if max_iterations < 1:
        raise AgentConfigError(f"max_iterations must be at least 1 (got {max_iterations})")
    loop = LoopAgent(
        "execute_replan",
        "executes the plan's next step and revises the plan, until the objective is met",
        [executor, replanner],
        max_iterations=max_iterations,
    )
    return SequentialAgent(
        "plan_execute_replan",
        "plans a task, then executes and replans it step by step",
        [planner, loop],
        agent_type="PlanExecute",
    )
