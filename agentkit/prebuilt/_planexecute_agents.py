"""Plan-execute agents: the planner and the replanner, one forced model call each.

Part of :mod:`agentkit.prebuilt.planexecute` (framework-internal): build them with
``planexecute.new_planner`` and ``planexecute.new_replanner``.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Iterator

from agentkit._agent import AgentRun, BaseAgent
from agentkit._events import AgentEvent, event_from_message, new_break_loop_action
from agentkit._runctx import get_session_value
from agentkit._values import BuiltValue
from agentkit.agents._react import ModelCaller, limit_pause
from agentkit.errors import AgentConfigError, RunLimitError
from agentkit.models._base import ChatModel, ModelOptions
from agentkit.prebuilt._planexecute_plan import (
    EXECUTED_STEP_SESSION_KEY,
    EXECUTED_STEPS_SESSION_KEY,
    PLAN_SESSION_KEY,
    USER_INPUT_SESSION_KEY,
    ExecutedStep,
    ExecutionContext,
    ExecutionInputFn,
    PlanExecuteError,
    PlanLike,
    PlannerInputFn,
    require,
    store,
)
from agentkit.prebuilt._planexecute_prompts import replanner_input_for
from agentkit.schema import Message, Role, ToolCall, ToolInfo
from agentkit.streams import StreamReader, stream_from_iterator

__all__ = ["Planner", "Replanner"]


def _bind(model: ChatModel, tools: list[ToolInfo], role: str) -> ChatModel:
    with_tools = getattr(model, "with_tools", None)
    if not callable(with_tools):
        raise AgentConfigError(
            f"the {role}'s model {model!r} cannot call tools (it has no with_tools method); "
            "use a ToolCallingChatModel"
        )
    bound: ChatModel = with_tools(tools)
    return bound


def _no_tool_call(role: str, tools: list[str]) -> PlanExecuteError:
    return PlanExecuteError(
        f"the {role}'s model answered without calling a tool; it must call "
        f"{' or '.join(map(repr, tools))} (it is asked to with tool_choice='required': use a "
        "model that supports forced tool calls)"
    )


def _unexpected_call(role: str, name: str, tools: list[str]) -> PlanExecuteError:
    return PlanExecuteError(
        f"the {role}'s model called tool {name!r}, but it may only call "
        f"{' or '.join(map(repr, tools))}"
    )


def _showing_arguments(
    role: str, tools: list[str]
) -> Callable[[StreamReader[Message]], StreamReader[Message]]:
    """What a streamed run shows of the reply: its first tool call's arguments, as text."""
    return lambda reader: _first_call_arguments(reader, role, tools)


def _first_call_arguments(
    reader: StreamReader[Message], role: str, tools: list[str]
) -> StreamReader[Message]:
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
            raise _no_tool_call(role, tools)
        if not sent:
            yield Message(Role.ASSISTANT, "")

    return stream_from_iterator(chunks(), on_close=reader.close)


def _first_call(reply: Message, role: str, tools: list[str]) -> ToolCall:
    if not reply.tool_calls:
        raise _no_tool_call(role, tools)
    return reply.tool_calls[0]


def _parse_plan(plan_type: type[PlanLike], text: str, role: str) -> PlanLike:
    try:
        return plan_type.from_json(text)
    except Exception as error:
        raise PlanExecuteError(
            f"the {role}'s plan could not be read: {type(error).__name__}: {error} (the model "
            f"sent {text[:200]!r}); {plan_type.__name__}.from_json() must accept what the "
            "model sends to the plan tool"
        ) from error


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


class _OneCallAgent(BuiltValue, BaseAgent):
    """What the planner and the replanner share: one model call per run, in a push agent."""

    def __init__(self, name: str, description: str, model: ChatModel, forced: bool) -> None:
        self._name = name
        self._description = description
        self._model = model
        self._forced = forced

    @property
    def name(self) -> str:  # type: ignore[override]
        """The agent's name."""
        return self._name

    @property
    def description(self) -> str:  # type: ignore[override]
        """What the agent does."""
        return self._description

    def __repr__(self) -> str:
        return f"{type(self).__name__.lstrip('_')}(name={self._name!r}, model={self._model!r})"

    @abc.abstractmethod
    def execute(self, run: AgentRun) -> None:
        """Run the agent's one model call (planner or replanner)."""

    @staticmethod
    def _paused_call(run: AgentRun) -> list[Message] | None:
        """The messages of the call a run limit refused, when this turn resumes it."""
        info = run.resume_info
        if info is not None and isinstance(info.interrupt_state, list):
            return list(info.interrupt_state)
        return None

    def _call(
        self,
        messages: list[Message],
        run: AgentRun,
        convert: Callable[[StreamReader[Message]], StreamReader[Message]] | None,
    ) -> Message | None:
        """Call the model (the ReAct agent's model call: streamed, cancellable, counted and
        reported to the callbacks); a streamed run shows the (converted) stream at once.

        ``None`` when a run limit refused the call and the run paused: the turn ends, and the
        resumed turn makes the call with the same ``messages`` (:meth:`_paused_call`).
        """
        run.check_cancelled()
        model_options: ModelOptions | None = run.options.model_options
        if self._forced:
            # The model must answer with a tool call: "required" is OpenAI's forced choice.
            model_options = (model_options or ModelOptions()).merge(
                ModelOptions(tool_choice="required")
            )
        # Eino always streams here; generate() gives the same reply with one request shape
        # per mode, like ChatModelAgent.
        caller = ModelCaller(run, self._name, self._model, show=convert)
        try:
            return caller.call(self._model, list(messages), model_options)
        except RunLimitError as reached:
            pause = limit_pause(run, reached, list(messages))
            if pause is None:
                raise
            run.emit(pause)
            return None


class Planner(_OneCallAgent):
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

    def execute(self, run: AgentRun) -> None:
        """Make the plan: one model call, the plan stored in the session."""
        messages = self._paused_call(run)
        if messages is None:
            user_input = list(run.input.messages)
            store(USER_INPUT_SESSION_KEY, user_input)
            messages = list(self._gen_input(list(user_input)))
        tool = self._plan_tool
        streaming = run.streaming
        tools = [tool.name] if tool is not None else []
        convert = _showing_arguments("planner", tools) if tool is not None else None
        reply = self._call(messages, run, convert)
        if reply is None:
            return  # paused by a run limit
        if tool is None:
            text = reply.content
        else:
            call = _first_call(reply, "planner", tools)
            if call.function.name != tool.name:
                raise _unexpected_call("planner", call.function.name, tools)
            text = call.function.arguments
        if not streaming:
            run.emit(event_from_message(_output(reply, text), None, Role.ASSISTANT))
        store(PLAN_SESSION_KEY, _parse_plan(self._plan_type, text, "planner"))


class Replanner(_OneCallAgent):
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
        self._gen_input = gen_input or replanner_input_for(plan_tool.name, respond_tool.name)
        self._plan_tool = plan_tool
        self._respond_tool = respond_tool
        self._plan_type = plan_type

    def execute(self, run: AgentRun) -> None:
        """Record the executed step, then revise the plan or respond."""
        messages = self._paused_call(run)
        if messages is None:  # a resumed turn recorded the step before it paused
            plan: PlanLike = require(PLAN_SESSION_KEY, "plan")
            result = require(EXECUTED_STEP_SESSION_KEY, "execute result")
            steps = list(get_session_value(EXECUTED_STEPS_SESSION_KEY) or [])
            steps.append(ExecutedStep(plan.first_step(), str(result)))
            store(EXECUTED_STEPS_SESSION_KEY, steps)
            user_input = require(USER_INPUT_SESSION_KEY, "user input")
            context = ExecutionContext(list(user_input), plan, list(steps))
            messages = list(self._gen_input(context))
        streaming = run.streaming
        tools = [self._plan_tool.name, self._respond_tool.name]
        reply = self._call(messages, run, _showing_arguments("replanner", tools))
        if reply is None:
            return  # paused by a run limit
        call = _first_call(reply, "replanner", tools)
        name = call.function.name
        if name not in tools:
            raise _unexpected_call("replanner", name, tools)
        if name == self._respond_tool.name:
            # The final answer is the run's last message, as text (a streamed reply showed
            # the tool call's JSON arguments as they came; the answer follows them).
            answer = _output(reply, _response_text(call.function.arguments))
            run.emit(event_from_message(answer, None, Role.ASSISTANT))
            run.emit(AgentEvent(action=new_break_loop_action(self.name)))
            return
        if not streaming:
            output = _output(reply, call.function.arguments)
            run.emit(event_from_message(output, None, Role.ASSISTANT))
        store(PLAN_SESSION_KEY, _parse_plan(self._plan_type, call.function.arguments, "replanner"))
