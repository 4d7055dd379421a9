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

import abc
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from agentkit._persist import persisted
from agentkit.agents.chatmodel import ChatModelAgent
from agentkit.agents.workflow import LoopAgent, SequentialAgent
from agentkit.cancel import CancelMode
from agentkit.errors import AgentCancelledError, AgentConfigError, AgentKitError
from agentkit.events import (
    Agent,
    AgentEvent,
    AgentInput,
    event_from_message,
    new_break_loop_action,
)
from agentkit.models.base import ChatModel, ModelOptions
from agentkit.options import AgentRunOption, ChatModelAgentOptions, get_impl_specific_options
from agentkit.runctx import current_frame, get_session_value
from agentkit.schema import Message, Role, ToolCall, ToolInfo, system_message, user_message
from agentkit.streams import StreamReader, concat_message_stream, stream_from_iterator
from agentkit.tools.base import BaseTool
from agentkit.worker import BuiltinAgent, EventSink

if TYPE_CHECKING:
    pass

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

# --- session keys -------------------------------------------------------------------------

USER_INPUT_SESSION_KEY = "UserInput"
"""Session key of the user's request: the planner's input messages (``list[Message]``)."""

PLAN_SESSION_KEY = "Plan"
"""Session key of the current plan (a :class:`PlanLike`, by default a :class:`Plan`)."""

EXECUTED_STEP_SESSION_KEY = "ExecutedStep"
"""Session key of the executor's latest answer (``str``)."""

EXECUTED_STEPS_SESSION_KEY = "ExecutedSteps"
"""Session key of every step done so far with its result (``list[ExecutedStep]``)."""

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


# --- data ---------------------------------------------------------------------------------


@persisted("agentkit.PlanExecuteError")
class PlanExecuteError(AgentKitError):
    """A planner or replanner could not get a usable answer from its model.

    The message says what went wrong: ``no tool call``, ``unexpected tool call: <name>``,
    ``unmarshal plan error: <why>``, or ``impossible: ... not found`` when an agent runs
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
        raise TypeError(f"a plan's steps are a list of strings, not one string (got {value!r})")
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
            raise ValueError(
                f'a plan must be a JSON object like {{"steps": ["..."]}} (got {text!r})'
            )
        steps = data.get("steps", [])
        if steps is None:
            steps = []
        if not isinstance(steps, list) or not all(isinstance(step, str) for step in steps):
            raise ValueError(f'a plan\'s "steps" must be a list of strings (got {steps!r})')
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


# --- default model inputs -------------------------------------------------------------------


def _format_input(user_input: Sequence[Message]) -> str:
    return "".join(f"{message.content}\n" for message in user_input)


def _format_steps(steps: Sequence[ExecutedStep]) -> str:
    return "".join(f"Step: {item.step}\nResult: {item.result}\n\n" for item in steps)


def default_planner_input(user_input: list[Message]) -> list[Message]:
    """The planner's default model input: :data:`PLANNER_PROMPT`, then the user's messages."""
    return [system_message(PLANNER_PROMPT), *user_input]


def default_executor_input(context: ExecutionContext) -> list[Message]:
    """The executor's default model input: :data:`EXECUTOR_SYSTEM_PROMPT` and a user message.

    The user message (:data:`EXECUTOR_PROMPT`) holds the user's request (each message's text
    followed by a newline), the plan's JSON, the completed steps (``Step: ...`` /
    ``Result: ...`` blocks) and the plan's first step.
    """
    text = EXECUTOR_PROMPT.format(
        input=_format_input(context.user_input),
        plan=context.plan.to_json(),
        executed_steps=_format_steps(context.executed_steps),
        step=context.plan.first_step(),
    )
    return [system_message(EXECUTOR_SYSTEM_PROMPT), user_message(text)]


def _replanner_input_for(
    plan_tool: str, respond_tool: str
) -> Callable[[ExecutionContext], list[Message]]:
    def build(context: ExecutionContext) -> list[Message]:
        system = REPLANNER_SYSTEM_PROMPT.format(plan_tool=plan_tool, respond_tool=respond_tool)
        text = REPLANNER_PROMPT.format(
            input=_format_input(context.user_input),
            plan=context.plan.to_json(),
            executed_steps=_format_steps(context.executed_steps),
        )
        return [system_message(system), user_message(text)]

    return build


def default_replanner_input(context: ExecutionContext) -> list[Message]:
    """The replanner's default model input, for the default ``plan`` and ``respond`` tools.

    A system message (:data:`REPLANNER_SYSTEM_PROMPT`) and a user message
    (:data:`REPLANNER_PROMPT`) with the user's request, the current plan's JSON and the
    completed steps, the one just executed included.
    """
    return _replanner_input_for(PLAN_TOOL_INFO.name, RESPOND_TOOL_INFO.name)(context)


# --- session access -----------------------------------------------------------------------


def _store(key: str, value: Any) -> None:
    # Like output_key: skipped when the agent runs bare (no Runner, hence no session).
    frame = current_frame()
    if frame is not None and frame.session is not None:
        frame.session.set(key, value)


def _require(key: str, what: str) -> Any:
    value = get_session_value(key)
    if value is None:
        raise PlanExecuteError(
            f"impossible: {what} not found (session value {key!r} is missing; run this agent "
            "inside planexecute.new(...), after the planner)"
        )
    return value


def _execution_context() -> ExecutionContext:
    plan = _require(PLAN_SESSION_KEY, "plan")
    user_input = _require(USER_INPUT_SESSION_KEY, "user input")
    steps = get_session_value(EXECUTED_STEPS_SESSION_KEY) or []
    return ExecutionContext(list(user_input), plan, list(steps))


# --- the planner and the replanner ------------------------------------------------------------


def _bind(model: ChatModel, tools: list[ToolInfo], role: str) -> ChatModel:
    with_tools = getattr(model, "with_tools", None)
    if not callable(with_tools):
        raise AgentConfigError(
            f"the {role}'s model {model!r} cannot call tools (it has no with_tools method); "
            "use a ToolCallingChatModel"
        )
    bound: ChatModel = with_tools(tools)
    return bound


def _first_call_arguments(reader: StreamReader[Message]) -> StreamReader[Message]:
    """The stream of the first tool call's argument fragments, as assistant chunks."""

    def chunks() -> Iterator[Message]:
        first: int | None = None
        sent = False
        for chunk in reader:
            for position, call in enumerate(chunk.tool_calls):
                index = call.index if call.index is not None else position
                if first is None:
                    first = index
                if index == first and call.function.arguments:
                    sent = True
                    yield Message(Role.ASSISTANT, call.function.arguments)
        if first is None:
            raise PlanExecuteError("no tool call")
        if not sent:
            yield Message(Role.ASSISTANT, "")

    return stream_from_iterator(chunks(), on_close=reader.close)


def _first_call(reply: Message) -> ToolCall:
    if not reply.tool_calls:
        raise PlanExecuteError("no tool call")
    return reply.tool_calls[0]


def _parse_plan(plan_type: type[PlanLike], text: str) -> PlanLike:
    try:
        return plan_type.from_json(text)
    except Exception as error:
        raise PlanExecuteError(f"unmarshal plan error: {error}") from error


def _response_text(arguments: str) -> str:
    """The answer in the respond tool's arguments: ``response``, else the only string value.

    Arguments that are not such an object are the answer as they are.
    """
    try:
        data = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    if isinstance(data, dict):
        response = data.get("response")
        if isinstance(response, str):
            return response
        texts = [value for value in data.values() if isinstance(value, str)]
        if len(texts) == 1:
            return texts[0]
    return arguments


def _output(reply: Message, content: str) -> Message:
    return Message(Role.ASSISTANT, content, response_meta=reply.response_meta)


class _OneCallAgent(BuiltinAgent):
    """What the planner and the replanner share: one model call per run, in a push agent."""

    def __init__(self, name: str, description: str, model: ChatModel, forced: bool) -> None:
        self._name = name
        self._description = description
        self._model = model
        self._forced = forced

    @property
    def name(self) -> str:
        """The agent's name."""
        return self._name

    @property
    def description(self) -> str:
        """What the agent does."""
        return self._description

    def __repr__(self) -> str:
        return f"{type(self).__name__.lstrip('_')}(name={self._name!r}, model={self._model!r})"

    @abc.abstractmethod
    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        """Run the agent inline, sending its events into ``sink`` (planner or replanner)."""

    def _call(
        self,
        messages: list[Message],
        options: tuple[AgentRunOption, ...],
        streaming: bool,
        sink: EventSink,
        convert: Callable[[StreamReader[Message]], StreamReader[Message]] | None,
    ) -> Message:
        """Call the model; when streaming, send the (converted) stream as an event at once."""
        frame = current_frame()
        scope = frame.scope if frame is not None else None
        if scope is not None:
            scope.check()
        values = get_impl_specific_options(ChatModelAgentOptions(), *options).model_options
        model_options: ModelOptions | None = ModelOptions.from_kwargs(**values) if values else None
        if self._forced:
            # The model must answer with a tool call: "required" is OpenAI's forced choice.
            model_options = (model_options or ModelOptions()).merge(
                ModelOptions(tool_choice="required")
            )
        if not streaming:
            # Eino always streams here; generate() gives the same reply with one request
            # shape per mode, like ChatModelAgent.
            reply = self._model.generate(list(messages), model_options)
            if scope is not None and scope.stopping:
                scope.check()  # cancelled meanwhile: the reply is not delivered
            return reply
        stream = self._model.stream(list(messages), model_options)
        if scope is not None:
            scope.open(stream)
        try:
            for_user, for_self = stream.copy(2)
            shown = convert(for_user) if convert is not None else for_user
            self._emit(sink, event_from_message(None, shown, Role.ASSISTANT))
            try:
                reply = concat_message_stream(for_self)
                if scope is not None and scope.stopping:
                    scope.check()  # cut short by the cancel: not an answer
                return reply
            except Exception as error:
                if scope is not None and scope.mode is CancelMode.IMMEDIATE:
                    scope.fired = True
                    if isinstance(error, AgentCancelledError):
                        raise
                    raise AgentCancelledError(scope.mode, scope.escalated) from error
                raise
        finally:
            if scope is not None:
                scope.closed(stream)

    def _emit(self, sink: EventSink, event: AgentEvent) -> None:
        if not sink.send(event):
            frame = current_frame()
            if frame is not None:
                # Nobody reads the events any more: stop the run at the next step boundary.
                frame.scope.request_cancel(CancelMode.IMMEDIATE)


class _Planner(_OneCallAgent):
    """Turns the user's request into a plan and stores both in the session."""

    def __init__(
        self,
        model: ChatModel,
        gen_input: PlannerInputFn,
        plan_tool: ToolInfo | None,
        plan_type: type[PlanLike],
    ) -> None:
        forced = plan_tool is not None
        if plan_tool is not None:
            model = _bind(model, [plan_tool], "planner")
        super().__init__("planner", "a planner agent", model, forced)
        self._gen_input = gen_input
        self._plan_tool = plan_tool
        self._plan_type = plan_type

    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        if input is None:
            input = AgentInput()
        user_input = list(input.messages)
        _store(USER_INPUT_SESSION_KEY, user_input)
        messages = list(self._gen_input(list(user_input)))
        tool = self._plan_tool
        streaming = input.enable_streaming
        convert = _first_call_arguments if tool is not None else None
        reply = self._call(messages, options, streaming, sink, convert)
        if tool is None:
            text = reply.content
        else:
            call = _first_call(reply)
            if call.function.name != tool.name:
                raise PlanExecuteError(f"unexpected tool call: {call.function.name}")
            text = call.function.arguments
        if not streaming:
            self._emit(sink, event_from_message(_output(reply, text), None, Role.ASSISTANT))
        _store(PLAN_SESSION_KEY, _parse_plan(self._plan_type, text))


class _Replanner(_OneCallAgent):
    """Records the executed step, then either revises the plan or responds and ends the loop."""

    def __init__(
        self,
        model: ChatModel,
        gen_input: ExecutionInputFn | None,
        plan_tool: ToolInfo,
        respond_tool: ToolInfo,
        plan_type: type[PlanLike],
    ) -> None:
        if plan_tool.name == respond_tool.name:
            raise AgentConfigError(
                f"the replanner's plan and respond tools are both named {plan_tool.name!r}; "
                "give them different names"
            )
        model = _bind(model, [plan_tool, respond_tool], "replanner")
        super().__init__("replanner", "a replanner agent", model, True)
        self._gen_input = gen_input or _replanner_input_for(plan_tool.name, respond_tool.name)
        self._plan_tool = plan_tool
        self._respond_tool = respond_tool
        self._plan_type = plan_type

    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        plan: PlanLike = _require(PLAN_SESSION_KEY, "plan")
        result = _require(EXECUTED_STEP_SESSION_KEY, "execute result")
        steps = list(get_session_value(EXECUTED_STEPS_SESSION_KEY) or [])
        steps.append(ExecutedStep(plan.first_step(), str(result)))
        _store(EXECUTED_STEPS_SESSION_KEY, steps)
        user_input = _require(USER_INPUT_SESSION_KEY, "user input")
        context = ExecutionContext(list(user_input), plan, list(steps))
        messages = list(self._gen_input(context))
        streaming = input.enable_streaming if input is not None else False
        reply = self._call(messages, options, streaming, sink, _first_call_arguments)
        call = _first_call(reply)
        name = call.function.name
        if name not in (self._respond_tool.name, self._plan_tool.name):
            raise PlanExecuteError(f"unexpected tool call: {name}")
        if name == self._respond_tool.name:
            # The final answer is the run's last message, as text (a streamed reply showed
            # the tool call's JSON arguments as they came; the answer follows them).
            answer = _output(reply, _response_text(call.function.arguments))
            self._emit(sink, event_from_message(answer, None, Role.ASSISTANT))
            self._emit(sink, AgentEvent(action=new_break_loop_action(self.name)))
            return
        if not streaming:
            output = _output(reply, call.function.arguments)
            self._emit(sink, event_from_message(output, None, Role.ASSISTANT))
        _store(PLAN_SESSION_KEY, _parse_plan(self._plan_type, call.function.arguments))


# --- constructors -----------------------------------------------------------------------------


def new_planner(
    model: ChatModel,
    *,
    gen_input: PlannerInputFn | None = None,
    plan_tool: ToolInfo | None = PLAN_TOOL_INFO,
    plan_type: type[PlanLike] = Plan,
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

    The run fails with :class:`PlanExecuteError`: ``no tool call`` (the reply calls no tool),
    ``unexpected tool call: <name>``, or ``unmarshal plan error: ...`` (sent after the
    output event).

    Raises:
        AgentConfigError: ``model`` cannot call tools.
    """
    return _Planner(model, gen_input or default_planner_input, plan_tool, plan_type)


def new_executor(
    model: ChatModel,
    *,
    tools: Iterable[BaseTool | Callable[..., Any]] = (),
    max_iterations: int = 20,
    gen_input: ExecutionInputFn | None = None,
) -> ChatModelAgent:
    """Return the ``executor`` agent: a :class:`~agentkit.ChatModelAgent` doing one step.

    Its model input ignores the conversation: it is built from the session
    (:class:`ExecutionContext`: the user's request, the plan, the completed steps) by
    ``gen_input`` (default :func:`default_executor_input`, which asks for the plan's first
    step). With ``tools`` it works in a ReAct loop of at most ``max_iterations`` model
    calls. Its final answer is stored under ``ExecutedStep``.

    The run fails with :class:`PlanExecuteError` (``impossible: plan not found`` /
    ``impossible: user input not found``) when no planner ran before it.
    """
    build = gen_input or default_executor_input

    def model_input(instruction: str, input: AgentInput) -> list[Message]:
        return list(build(_execution_context()))

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

    The run fails with :class:`PlanExecuteError`: ``no tool call``,
    ``unexpected tool call: <name>`` (no output event is sent), ``unmarshal plan error: ...``,
    or ``impossible: ... not found`` when the planner and the executor did not run before it.

    Raises:
        AgentConfigError: ``model`` cannot call tools, or both tools have the same name.
    """
    return _Replanner(model, gen_input, plan_tool, respond_tool, plan_type)


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
    agent = SequentialAgent(
        "plan_execute_replan",
        "plans a task, then executes and replans it step by step",
        [planner, loop],
    )
    agent.agent_type = "PlanExecute"
    return agent
