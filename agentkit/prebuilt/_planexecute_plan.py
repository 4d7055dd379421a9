"""Plan-execute data: the plan, the executed steps and the session values they travel in.

Part of :mod:`agentkit.prebuilt.planexecute` (framework-internal); the public names are
re-exported there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from agentkit._persist import persisted
from agentkit._runctx import current_frame, get_session_value
from agentkit.errors import AgentKitError, AgentKitTypeError, AgentKitValueError
from agentkit.schema import Message

# --- session keys -------------------------------------------------------------------------

USER_INPUT_SESSION_KEY = "UserInput"
"""Session key of the user's request: the planner's input messages (``list[Message]``)."""

PLAN_SESSION_KEY = "Plan"
"""Session key of the current plan (a :class:`PlanLike`, by default a :class:`Plan`)."""

EXECUTED_STEP_SESSION_KEY = "ExecutedStep"
"""Session key of the executor's latest answer (``str``)."""

EXECUTED_STEPS_SESSION_KEY = "ExecutedSteps"
"""Session key of every step done so far with its result (``list[ExecutedStep]``)."""

# --- data ---------------------------------------------------------------------------------


@persisted("agentkit.PlanExecuteError")
class PlanExecuteError(AgentKitError):
    """A planner or replanner could not get a usable answer from its model.

    The message says what went wrong, with the values: the model answered without calling a
    tool, called a tool it may not call, or sent a plan that could not be read; or an agent ran
    without what an earlier one should have stored in the session.
    """


@runtime_checkable
class PlanLike(Protocol):
    """What the plan-execute agents need from a plan.

    A plan class has a ``from_json(text)`` classmethod that parses what the model sent to
    the plan tool (raising on bad input), ``to_json()`` that renders it for prompts, and
    ``first_step()``, the step the executor does next (``""`` when none is left).

    Plans are session values, so they are saved in checkpoints: give your plan class to
    ``PickleSerializer(allowed_types=[...])`` when the run may be interrupted.
    """

    @classmethod
    def from_json(cls, text: str) -> PlanLike:
        """Parse a plan from the plan tool's JSON arguments."""
        ...

    def to_json(self) -> str:
        """The plan as JSON text, as shown to the models."""
        ...

    def first_step(self) -> str:
        """The step to execute next, or ``""``."""
        ...


def _steps_converter(value: Iterable[str]) -> list[str]:
    if isinstance(value, str):
        raise AgentKitTypeError(
            f"a plan's steps are a list of strings, not one string (got {value!r})"
        )
    return list(value)


@persisted("agentkit.Plan")
@attrs.define
class Plan:
    """The default plan: steps to execute in order, as JSON ``{"steps": ["...", ...]}``."""

    steps: list[str] = attrs.field(factory=list, converter=_steps_converter)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """Parse ``{"steps": [...]}``; a missing ``steps`` is an empty plan.

        Raises:
            ValueError: the text is not JSON, not an object, or ``steps`` is not a list of
                strings.
        """
        data = json.loads(text)
        if not isinstance(data, dict):
            raise AgentKitValueError(
                f'a plan must be a JSON object like {{"steps": ["..."]}} (got {text!r})'
            )
        steps = data.get("steps", [])
        if steps is None:
            steps = []
        if not isinstance(steps, list) or not all(isinstance(step, str) for step in steps):
            raise AgentKitValueError(f'a plan\'s "steps" must be a list of strings (got {steps!r})')
        return cls(steps)

    def to_json(self) -> str:
        """Return ``{"steps":[...]}`` (compact, non-ASCII kept)."""
        return json.dumps({"steps": self.steps}, ensure_ascii=False, separators=(",", ":"))

    def first_step(self) -> str:
        """The first step, or ``""`` for an empty plan."""
        return self.steps[0] if self.steps else ""


@persisted("agentkit.ExecutedStep")
@attrs.frozen
class ExecutedStep:
    """A step the executor carried out and what it answered."""

    step: str
    result: str


@persisted("agentkit.ExecutionContext")
@attrs.frozen
class ExecutionContext:
    """What the executor and the replanner build their model input from.

    Attributes:
        user_input: the user's request (the planner's input messages).
        plan: the current plan.
        executed_steps: the steps done so far with their results, oldest first.
    """

    user_input: list[Message]
    plan: PlanLike
    executed_steps: list[ExecutedStep]


PlannerInputFn = Callable[[list[Message]], Sequence[Message]]
"""``gen_input(user_input) -> messages``: the planner's model input."""

ExecutionInputFn = Callable[[ExecutionContext], Sequence[Message]]
"""``gen_input(context) -> messages``: the executor's or the replanner's model input."""


# --- session access -----------------------------------------------------------------------


def store(key: str, value: Any) -> None:
    """Set the session value ``key`` of the current run."""
    # Like output_key: skipped when the agent runs bare (no Runner, hence no session).
    frame = current_frame()
    if frame is not None and frame.session is not None:
        frame.session.set(key, value)


def require(key: str, what: str) -> Any:
    """The session value ``key``; :class:`PlanExecuteError` names ``what`` when it is missing."""
    value = get_session_value(key)
    if value is None:
        raise PlanExecuteError(
            f"the {what} is missing: session value {key!r} is not set; run this agent inside "
            "planexecute.new(...), after the planner"
        )
    return value


def execution_context() -> ExecutionContext:
    """The executor's :class:`ExecutionContext`, read from the session."""
    plan = require(PLAN_SESSION_KEY, "plan")
    user_input = require(USER_INPUT_SESSION_KEY, "user input")
    steps = get_session_value(EXECUTED_STEPS_SESSION_KEY) or []
    return ExecutionContext(list(user_input), plan, list(steps))
