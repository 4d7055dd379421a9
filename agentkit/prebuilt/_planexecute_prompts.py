"""Plan-execute prompts: the plan and respond tools, the prompts and the default model inputs.

Part of :mod:`agentkit.prebuilt.planexecute` (framework-internal); the public names are
re-exported there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentkit import _prompts_zh as zh
from agentkit.prebuilt._planexecute_plan import ExecutedStep, ExecutionContext
from agentkit.schema import Message, ToolInfo, system_message, user_message

# --- tools ----------------------------------------------------------------------------------

PLAN_TOOL_INFO = ToolInfo(
    name="plan",
    description=(
        "Plan with a list of steps to execute in order. Each step should be clear, actionable, "
        "and arranged in a logical sequence. The output will be used to guide the execution "
        "process."
    ),
    parameters={
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "items": {"type": "string"},
                "description": "different steps to follow, should be in sorted order",
            }
        },
        "required": ["steps"],
    },
)
"""The ``plan`` tool: the model submits a plan as ``{"steps": [...]}``."""

RESPOND_TOOL_INFO = ToolInfo(
    name="respond",
    description=(
        "Generate a direct response to the user. Use this tool when you have all the "
        "information needed to provide a final answer."
    ),
    parameters={
        "type": "object",
        "properties": {
            "response": {
                "type": "string",
                "description": "The complete response to provide to the user",
            }
        },
        "required": ["response"],
    },
)
"""The ``respond`` tool: the replanner gives the final answer as ``{"response": "..."}``."""

# --- prompts (agentkit's own wording) ----------------------------------------------------

PLANNER_PROMPT = """\
You are a planning expert. Read the user's objective and work out a plan for reaching it: \
a short, ordered list of steps that another agent, one with tools, will carry out one at a time.

Make every step:
- specific and actionable: name exactly what to do and what to produce;
- self-contained: include the details (names, dates, places, figures) needed to do it \
without seeing the other steps;
- executable on its own, by a single agent, in one go;
- placed in a sensible order, after the steps whose results it needs;
- aimed at the objective: leave out anything redundant or merely nice to have.

The last step must put everything together into the complete answer to the objective."""
"""The planner's default system prompt; the user's messages follow it."""

EXECUTOR_SYSTEM_PROMPT = """\
You are a careful executor agent. You are given an objective, the plan for it and what has \
been done so far; carry out the step you are assigned, thoroughly, using your tools where \
they help, and report its result in full."""
"""The executor's default system prompt."""

EXECUTOR_PROMPT = """\
## OBJECTIVE
{input}
## PLAN
{plan}
## COMPLETED STEPS & RESULTS
{executed_steps}
## YOUR STEP (the first step of the plan)
{step}"""
"""The executor's default user message; ``str.format`` fields ``input``, ``plan``,
``executed_steps`` and ``step`` (see :func:`default_executor_input`)."""

REPLANNER_SYSTEM_PROMPT = """\
You review the progress of a plan. You are given the objective, the current plan and the \
steps completed so far with their results. Decide what happens next and act by calling \
exactly one tool:

- `{respond_tool}`: the objective is met, or the results already answer it. Give the user \
the complete final answer, built from the results; do not just say that you are done.
- `{plan_tool}`: work remains. Give only the steps still to do, never the completed ones. \
Revise them with what the results taught you: drop steps that are no longer needed, add \
steps for gaps the results revealed, and keep each step specific and self-contained. The \
last step must produce the complete answer."""
"""The replanner's default system prompt; ``str.format`` fields ``plan_tool`` and
``respond_tool`` are the two tools' names."""

REPLANNER_PROMPT = """\
## OBJECTIVE
{input}

## CURRENT PLAN
{plan}

## COMPLETED STEPS & RESULTS
{executed_steps}"""
"""The replanner's default user message; ``str.format`` fields ``input``, ``plan`` and
``executed_steps`` (see :func:`default_replanner_input`)."""


# --- default model inputs -------------------------------------------------------------------


_TEXTS = {
    "en": {
        "planner": PLANNER_PROMPT,
        "executor_system": EXECUTOR_SYSTEM_PROMPT,
        "executor": EXECUTOR_PROMPT,
        "replanner_system": REPLANNER_SYSTEM_PROMPT,
        "replanner": REPLANNER_PROMPT,
        "step": "Step: {step}\nResult: {result}\n\n",
    },
    "zh": {
        "planner": zh.PLANNER_PROMPT,
        "executor_system": zh.EXECUTOR_SYSTEM_PROMPT,
        "executor": zh.EXECUTOR_PROMPT,
        "replanner_system": zh.REPLANNER_SYSTEM_PROMPT,
        "replanner": zh.REPLANNER_PROMPT,
        "step": zh.STEP_LINES,
    },
}
"""The prompts by language (see :mod:`agentkit.language`)."""


def _format_input(user_input: Sequence[Message]) -> str:
    return "".join(f"{message.content}\n" for message in user_input)


def _format_steps(steps: Sequence[ExecutedStep], language: str = "en") -> str:
    line = _TEXTS[language]["step"]
    return "".join(line.format(step=item.step, result=item.result) for item in steps)


def planner_input_for(language: str) -> Callable[[list[Message]], list[Message]]:
    """The planner's default input, in ``language``."""
    prompt = _TEXTS[language]["planner"]

    def build(user_input: list[Message]) -> list[Message]:
        return [system_message(prompt), *user_input]

    return build


def executor_input_for(language: str) -> Callable[[ExecutionContext], list[Message]]:
    """The executor's default input, in ``language``."""
    texts = _TEXTS[language]

    def build(context: ExecutionContext) -> list[Message]:
        text = texts["executor"].format(
            input=_format_input(context.user_input),
            plan=context.plan.to_json(),
            executed_steps=_format_steps(context.executed_steps, language),
            step=context.plan.first_step(),
        )
        return [system_message(texts["executor_system"]), user_message(text)]

    return build


def default_planner_input(user_input: list[Message]) -> list[Message]:
    """The planner's default model input: :data:`PLANNER_PROMPT`, then the user's messages."""
    return [system_message(PLANNER_PROMPT), *user_input]


def default_executor_input(context: ExecutionContext) -> list[Message]:
    """The executor's default model input: :data:`EXECUTOR_SYSTEM_PROMPT` and a user message.

    The user message (:data:`EXECUTOR_PROMPT`) holds the user's request (each message's text
    followed by a newline), the plan's JSON, the completed steps (``Step: ...`` /
    ``Result: ...`` blocks) and the plan's first step.
    """
    return _english_executor_input(context)


_english_executor_input = executor_input_for("en")


def replanner_input_for(
    plan_tool: str, respond_tool: str, language: str = "en"
) -> Callable[[ExecutionContext], list[Message]]:
    """The replanner's default input, for tools named ``plan_tool`` and ``respond_tool``."""
    texts = _TEXTS[language]

    def build(context: ExecutionContext) -> list[Message]:
        system = texts["replanner_system"].format(plan_tool=plan_tool, respond_tool=respond_tool)
        text = texts["replanner"].format(
            input=_format_input(context.user_input),
            plan=context.plan.to_json(),
            executed_steps=_format_steps(context.executed_steps, language),
        )
        return [system_message(system), user_message(text)]

    return build


def default_replanner_input(context: ExecutionContext) -> list[Message]:
    """The replanner's default model input, for the default ``plan`` and ``respond`` tools.

    A system message (:data:`REPLANNER_SYSTEM_PROMPT`) and a user message
    (:data:`REPLANNER_PROMPT`) with the user's request, the current plan's JSON and the
    completed steps, the one just executed included.
    """
    return replanner_input_for(PLAN_TOOL_INFO.name, RESPOND_TOOL_INFO.name)(context)
