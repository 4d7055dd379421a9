"""Plan-execute agents: the planner and the replanner, one forced model call each.

Part of :mod:`agentkit.prebuilt.planexecute` (framework-internal): build them with
``planexecute.new_planner`` and ``planexecute.new_replanner``.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Iterator

from agentkit._options import AgentRunOption, ChatModelAgentOptions, get_impl_specific_options
from agentkit._runctx import current_frame, get_session_value
from agentkit._worker import BuiltinAgent, EventSink
from agentkit.cancel import CancelMode
from agentkit.errors import AgentCancelledError, AgentConfigError
from agentkit.events import AgentEvent, AgentInput, event_from_message, new_break_loop_action
from agentkit.models.base import ChatModel, ModelOptions
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
from agentkit.streams import StreamReader, concat_message_stream, stream_from_iterator

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

    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        if input is None:
            input = AgentInput()
        user_input = list(input.messages)
        store(USER_INPUT_SESSION_KEY, user_input)
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
        store(PLAN_SESSION_KEY, _parse_plan(self._plan_type, text))


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

    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        plan: PlanLike = require(PLAN_SESSION_KEY, "plan")
        result = require(EXECUTED_STEP_SESSION_KEY, "execute result")
        steps = list(get_session_value(EXECUTED_STEPS_SESSION_KEY) or [])
        steps.append(ExecutedStep(plan.first_step(), str(result)))
        store(EXECUTED_STEPS_SESSION_KEY, steps)
        user_input = require(USER_INPUT_SESSION_KEY, "user input")
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
        store(PLAN_SESSION_KEY, _parse_plan(self._plan_type, call.function.arguments))
