"""ChatModelAgent: a chat model in a ReAct loop with tools.

The loop itself is in ``agentkit.agents._react``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._agent import AgentRun, BaseAgent, frame_of
from agentkit._events import (
    Agent,
    AgentInput,
    ResumeInfo,
)
from agentkit._interrupt import ResumeOnlyData, ToolRoundState
from agentkit._lazy import present
from agentkit._runctx import RunFrame
from agentkit.agents._guardrails import Guardrails
from agentkit.agents._model_retry import ModelRetryConfig, RetryContext, RetryDecision
from agentkit.agents._react import (
    ReactConfig,
    ReactRun,
    ReactState,
    apply_before_agent,
    checked_middlewares,
    tool_timeouts,
)
from agentkit.agents._structured import OUTPUT_TOOL_NAME, StructuredOutput
from agentkit.agents._tool_errors import ToolErrorPolicy, ToolExceptionHandler
from agentkit.errors import (
    AgentConfigError,
    AgentFrozenError,
    AgentKitTypeError,
    InstructionFormatError,
    ResumeError,
)
from agentkit.schema import Message, system_message
from agentkit.tools._base import BaseTool
from agentkit.tools._function import as_tool
from agentkit.tools._function_tool import checked_timeout
from agentkit.tools.transfer import TransferToAgentTool, transfer_instruction

if TYPE_CHECKING:
    from agentkit._middleware import AgentMiddleware
    from agentkit.models._base import ChatModel

__all__ = [
    "ChatModelAgent",
    "ChatModelAgentResumeData",
    "GenModelInput",
    "HistoryModifier",
    "RetryContext",
    "RetryDecision",
]

# Defined next to ModelRetryConfig, documented here: what ``decide`` sees and returns.

GenModelInput = Callable[[str, AgentInput], Sequence[Message]]
"""``gen_model_input(instruction, input) -> messages``: builds what the model is sent."""

HistoryModifier = Callable[[list[Message]], Sequence[Message]]
"""``history_modifier(history) -> history``: the conversation a resumed ChatModelAgent goes on
with (see :class:`ChatModelAgentResumeData`)."""


@attrs.frozen
class ChatModelAgentResumeData(ResumeOnlyData):
    """Resume data for a :class:`ChatModelAgent` itself (Eino's ``ChatModelAgentResumeData``).

    Give it as the resume data of the agent's own interrupt context: the parent of its tool's
    context (``InterruptContext.parent``), or the context itself when the agent paused on a
    limit. The resumed agent calls ``history_modifier`` once, with the conversation it
    stopped with (its system message first, when it has an instruction; the reply whose tool
    calls it was running last), and goes on with what it returns: the model sees the edited
    conversation, and what the agent saves from then on holds it. The checkpoint the run was
    resumed from is not rewritten: the edit is made at the resume, in the resuming process.

    The data serves one resume: it is never saved (a function cannot be), so a resumed run
    that stops again does not apply it again. Give the tool's own resume data (an approval, an
    answer) beside it, under the tool's id::

        tool_context = interrupted.contexts[0]
        runner.resume(checkpoint_id, targets={
            tool_context.id: "approved",
            tool_context.parent.id: ChatModelAgentResumeData(history_modifier=drop_old_turns),
        })

    Attributes:
        history_modifier: ``fn(history) -> history``; ``None``: the history as it was saved.
    """

    history_modifier: HistoryModifier | None = None

_MAX_CONFIGS = 64  # places kept per agent (one per tree it is in; past this, made per run)

_FORMAT_ERROR = (
    "the instruction could not be formatted with the session values: {detail}. When a run has "
    "session values, the instruction is a str.format template: {{name}} is replaced by the session "
    "value 'name'. Write literal braces doubled: {{{{ and }}}} (for JSON, "
    '\'{{{{"city": "Paris"}}}}\'). To send the instruction as it is, pass '
    "gen_model_input=... to ChatModelAgent"
)


class ChatModelAgent(BaseAgent):
    """An agent that answers with a chat model, calling tools in a ReAct loop.

    Without tools it makes one model call. With tools it calls the model, runs the tool
    calls of its reply (concurrently; events in completion order, history in call order),
    and repeats until the model answers without tool calls, a return-directly tool ran, or
    ``max_iterations`` model calls were made (then the run ends with
    :class:`~agentkit.ExceedMaxIterationsError`).

    Args:
        name: the agent's name (used in run paths, transfers and as a tool name).
        description: what the agent does (shown to other agents and models).
        model: a :class:`~agentkit.models.ChatModel`; a ``ToolCallingChatModel`` when
            tools are given.
        instruction: the system prompt. When the run's session holds values it is formatted
            with them (``{name}`` placeholders, ``str.format`` rules, ``{{``/``}}`` for braces);
            otherwise it is used verbatim.
        tools: tools, or plain functions (wrapped with :func:`~agentkit.tool`).
        return_directly: names of tools whose result ends the run as the final answer.
        exit_tool: an exit tool (:class:`~agentkit.ExitTool`); calling it ends the run with Exit.
        output_key: store the final answer's text in this session key.
        max_iterations: the most model calls one run may make (default 20).
        gen_model_input: ``(instruction, input) -> messages`` replacing the default
            ``[system(instruction)] + input.messages``.
        emit_internal_events: forward the events of agents used as tools (AgentTool).
        recover_tool_errors: send the model's mistakes back to it as tool messages and go on
            (default): a call of a tool that does not exist, arguments the tool refuses
            (:class:`~agentkit.ToolArgumentsError`), a transfer to an agent that does not
            exist. ``False`` keeps Eino's behaviour: the run ends with
            ``ToolNotFoundError`` / ``ToolArgumentsError`` / ``TransferError``.
        tool_exception_handler: ``handler(error, call) -> str`` for exceptions raised inside
            a tool (``call`` is a :class:`~agentkit.ToolCallInfo`): the text it returns is the
            tool message the model gets; raising ends the run. Without one (Eino's default)
            the run ends with a :class:`~agentkit.ToolError`. Interrupts and cancellation never
            reach it.
        max_tool_result_chars: longer tool results are cut to this many characters, with a
            note to the model and a warning on the ``agentkit`` logger (``None``: no limit).
        output_type: the type of the answer (an attrs class, dataclass, TypedDict, Enum,
            pydantic model, or ``list[...]``/``dict[str, ...]`` of those): the model is asked
            for JSON matching its schema, the reply is checked and converted as tool
            arguments are (quoted numbers accepted), and the typed value is the final
            event's ``output.customized_output`` (``RunResult.output``; ``output_key`` stores
            it). Tools work as usual alongside. See ``agentkit.agents._structured``.
        output_mode: how the model is asked: ``"response_format"`` (default; the OpenAI
            ``response_format`` json_schema field, sent with every model call) or ``"tool"``
            (a ``final_answer`` tool whose arguments are the answer, with
            ``tool_choice="required"``, for servers without structured outputs).
        max_output_corrections: how many times an invalid answer goes back to the model
            with what was wrong (default 2) before the run ends with
            :class:`~agentkit.errors.OutputValidationError`.
        tool_timeout: the most seconds a tool call may take (``@tool(timeout=...)`` sets a
            tool's own limit, which wins). A call that takes longer fails with
            :class:`~agentkit.ToolTimeoutError`: the run ends, or, with a
            ``tool_exception_handler``, the model gets the handler's text. The call is
            abandoned, not killed: its thread (a daemon thread nothing joins; the run does not
            wait for it) goes on until the tool returns, its results are dropped, and its run
            context is cancelled, so :func:`~agentkit.check_cancelled` raises in it and
            :func:`~agentkit.cancellable_sleep` wakes. An ``async def`` tool's task (or a
            wait in :func:`~agentkit.abort_on_cancel`) is cancelled, and the run goes on once
            its cleanup ran (at most 10 seconds). ``None``: no limit.
        middlewares: :class:`~agentkit.AgentMiddleware` objects, first = outermost (see
            :mod:`agentkit.middleware`).
        model_retry: a :class:`~agentkit.ModelRetryConfig` to retry model calls whose outcome
            is rejected (errors, or replies ``should_retry`` refuses).
        guardrails: objects with some of ``check_input(messages)``,
            ``check_output(message)`` and ``check_tool_call(call)``; a check that returns a
            string trips it with that reason (see :mod:`agentkit.guardrails`). The input checks
            run before the first model call of a turn (on the messages that call would be sent;
            a resumed turn is not checked again), the output checks on the agent's answer (a
            reply without tool calls, or the typed answer of ``output_type``) before it is
            delivered (a streamed answer was shown as it came); either trip ends the run with
            :class:`~agentkit.GuardrailTripped`. A tool-call check runs before each call (in
            the call's thread: parallel calls check at once): a trip does not run the tool and
            tells the model why, and the run goes on.
        share_guardrails: whether ``guardrails`` also check the agents this agent hands
            work to, as the run's limits count them: the agents it transfers to (and those
            they transfer to), the agents it runs as tools (an :class:`~agentkit.AgentTool`, a
            deep agent's sub-agents) and theirs, also after a resume. Those agents check the
            handed-down guardrails after their own; a guardrail given at several levels runs
            once. ``False`` keeps Eino's behaviour: the guardrails check this agent alone.

    An agent is a value: its settings are fixed when it is built (setting ``instruction``,
    ``max_iterations``, ``tools``... raises :class:`~agentkit.errors.AgentFrozenError`); make a
    changed copy with :meth:`replace`. Wiring it into a flow does not change it either: the
    flow running a turn tells it where it may transfer (:attr:`AgentRun.transfer_targets
    <agentkit.AgentRun.transfer_targets>`), so one instance can sit in several trees (the
    sub-agent of two parents, a step of two workflows, a tool and a sub-agent) and serve many
    runs from many threads at once.
    """

    def __init__(
        self,
        name: str,
        description: str,
        model: ChatModel,
        *,
        instruction: str = "",
        tools: Iterable[BaseTool | Callable[..., Any]] = (),
        return_directly: Iterable[str] = (),
        exit_tool: BaseTool | None = None,
        output_key: str | None = None,
        max_iterations: int = 20,
        gen_model_input: GenModelInput | None = None,
        emit_internal_events: bool = False,
        recover_tool_errors: bool = True,
        tool_exception_handler: ToolExceptionHandler | None = None,
        max_tool_result_chars: int | None = 100_000,
        output_type: Any = None,
        output_mode: str = "response_format",
        max_output_corrections: int = 2,
        tool_timeout: float | None = None,
        middlewares: Iterable[AgentMiddleware] = (),
        model_retry: ModelRetryConfig | None = None,
        guardrails: Iterable[object] = (),
        share_guardrails: bool = True,
    ) -> None:
        # Kept to make changed copies (replace); iterables are read once, here.
        tools = tuple(tools)
        middlewares = checked_middlewares(middlewares)
        checked_guardrails = Guardrails.checked(name, guardrails)
        guardrails = checked_guardrails.items if checked_guardrails is not None else ()
        if not isinstance(return_directly, str):
            return_directly = tuple(return_directly)
        self._arguments: dict[str, Any] = {
            "name": name,
            "description": description,
            "model": model,
            "instruction": instruction,
            "tools": tools,
            "return_directly": return_directly,
            "exit_tool": exit_tool,
            "output_key": output_key,
            "max_iterations": max_iterations,
            "gen_model_input": gen_model_input,
            "emit_internal_events": emit_internal_events,
            "recover_tool_errors": recover_tool_errors,
            "tool_exception_handler": tool_exception_handler,
            "max_tool_result_chars": max_tool_result_chars,
            "output_type": output_type,
            "output_mode": output_mode,
            "max_output_corrections": max_output_corrections,
            "tool_timeout": tool_timeout,
            "middlewares": middlewares,
            "model_retry": model_retry,
            "guardrails": guardrails,
            "share_guardrails": share_guardrails,
        }
        if model is None:
            raise AgentConfigError(
                f"agent {name!r} needs a model: ChatModelAgent(name, description, model, ...)"
            )
        if not isinstance(name, str):
            raise AgentConfigError(f"name must be a string (got {name!r})")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise AgentConfigError(f"max_iterations must be an int (got {max_iterations!r})")
        if max_iterations < 1:
            raise AgentConfigError(f"max_iterations must be at least 1 (got {max_iterations})")
        if isinstance(return_directly, str):
            raise AgentConfigError(
                f"return_directly takes tool names, not one string (got {return_directly!r}); "
                f"write return_directly=[{return_directly!r}]"
            )
        self._structured = (
            None
            if output_type is None
            else StructuredOutput.of(output_type, output_mode, max_output_corrections, name)
        )
        self._tool_policy = ToolErrorPolicy.checked(
            recover_tool_errors, tool_exception_handler, max_tool_result_chars
        )
        self._tool_timeout = checked_timeout(tool_timeout)
        self._middlewares = middlewares
        if model_retry is not None and not isinstance(model_retry, ModelRetryConfig):
            raise AgentConfigError(
                f"model_retry must be a ModelRetryConfig (got {model_retry!r})"
            )
        self._model_retry = model_retry
        if not isinstance(share_guardrails, bool):
            raise AgentConfigError(
                f"share_guardrails must be True or False (got {share_guardrails!r})"
            )
        self._guardrails = checked_guardrails
        self._share_guardrails = share_guardrails
        self._name = name
        self._description = description
        self._model = model
        self._instruction = instruction
        self._tools = [as_tool(item) for item in tools]
        _check_unique(name, [*self._tools, *([as_tool(exit_tool)] if exit_tool else [])])
        self._return_directly = frozenset(return_directly)
        self._exit_tool = exit_tool
        self._output_key = output_key
        self._max_iterations = max_iterations
        self._gen_model_input = gen_model_input
        self._emit_internal_events = emit_internal_events
        self._lock = threading.Lock()
        # The run configuration per set of transfer targets (one per tree the agent is in).
        self._configs: dict[tuple[tuple[str, str], ...], ReactConfig] = {}

    @property
    def name(self) -> str:  # type: ignore[override]
        """The agent's name."""
        return self._name

    @property
    def description(self) -> str:  # type: ignore[override]
        """What the agent does."""
        return self._description

    @property
    def model(self) -> ChatModel:
        """The chat model the agent calls."""
        return self._model

    @property
    def instruction(self) -> str:
        """The system prompt the agent was built with (without the transfer instruction)."""
        return str(self._instruction)

    @property
    def tools(self) -> list[BaseTool]:
        """The agent's own tools (a copy; the transfer and exit tools are added per run)."""
        return list(self._tools)

    @property
    def output_key(self) -> str | None:
        """The session key the final answer is stored under, if any."""
        return self._output_key

    @property
    def max_iterations(self) -> int:
        """The most model calls one run may make."""
        return int(self._max_iterations)

    @property
    def guardrails(self) -> tuple[object, ...]:
        """The agent's own guardrails, as given."""
        return () if self._guardrails is None else self._guardrails.items

    @property
    def share_guardrails(self) -> bool:
        """Whether the guardrails also check the agents this one hands work to."""
        return bool(self._share_guardrails)

    @property
    def emit_internal_events(self) -> bool:
        """Whether the events of agents used as tools are forwarded."""
        return bool(self._emit_internal_events)

    def replace(self, **changes: Any) -> ChatModelAgent:
        """Return a new agent with this one's settings, but ``changes``.

        ``changes`` are constructor arguments (``instruction="..."``, ``max_iterations=5``,
        ``tools=[...]``...). The new agent is a fresh value: it is not registered in any flow
        (give it sub-agents with :func:`~agentkit.set_sub_agents`), and this one is unchanged::

            brief = agent.replace(instruction="Answer in one sentence.")

        Raises:
            TypeError: a key is not an argument of ``ChatModelAgent``.
            AgentConfigError: a changed setting is invalid (as in the constructor).
        """
        unknown = sorted(set(changes) - set(self._arguments))
        if unknown:
            raise AgentKitTypeError(
                f"ChatModelAgent.replace() got unknown argument(s) {', '.join(map(repr, unknown))}"
                f"; its arguments are: {', '.join(self._arguments)}"
            )
        return ChatModelAgent(**{**self._arguments, **changes})

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):
            raise AgentFrozenError(
                f"cannot set {name!r} on agent {self._name!r}: an agent is a value once built, "
                f"so a run never sees half-changed settings. Make a changed copy with "
                f"agent.replace({name}=...), or build a new ChatModelAgent"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)

    def get_type(self) -> str:
        """The type callbacks report for this agent: ``"ChatModel"``."""
        return "ChatModel"

    def __repr__(self) -> str:
        return f"ChatModelAgent(name={self._name!r})"

    # --- sub-agent registration (OnSubAgents): nothing is written onto the agent ---

    def on_set_sub_agents(self, sub_agents: Sequence[Agent]) -> None:
        """Nothing to record: the flow running a turn gives it its transfer targets
        (:attr:`AgentRun.transfer_targets <agentkit.AgentRun.transfer_targets>`), so the
        agent can have other sub-agents in another tree."""

    def on_set_as_sub_agent(self, parent: Agent) -> None:
        """Nothing to record: the agent may be the sub-agent of several parents (each turn
        is told the parent of the tree it runs in)."""

    def on_disallow_transfer_to_parent(self) -> None:
        """Nothing to record: the flow leaves the parent out of that turn's targets."""

    # --- configuration per place ---

    def _config(self, targets: Sequence[Agent]) -> ReactConfig:
        """The run configuration of a turn that may transfer to ``targets`` (computed once
        per set of targets: an agent in two trees has two)."""
        key = tuple((str(agent.name), str(agent.description)) for agent in targets)
        config = self._configs.get(key)
        if config is not None:
            return config
        with self._lock:
            config = self._configs.get(key)
            if config is None:
                config = self._compute_config(targets)
                if len(self._configs) < _MAX_CONFIGS:
                    self._configs[key] = config
            return config

    def _compute_config(self, targets: Sequence[Agent]) -> ReactConfig:
        instruction = self._instruction
        tools = list(self._tools)
        return_directly = set(self._return_directly)
        if targets:
            text = transfer_instruction(targets)
            instruction = f"{instruction}\n\n{text}" if instruction else text
            # Told its targets, the transfer tool refuses unknown ones as a model mistake.
            names = [agent.name for agent in targets] if self._tool_policy.recover else None
            transfer = TransferToAgentTool(names)
            tools.append(transfer)
            return_directly.add(transfer.info().name)
        if self._exit_tool is not None:
            exit_tool = as_tool(self._exit_tool)
            tools.append(exit_tool)
            return_directly.add(exit_tool.info().name)
        by_name: dict[str, BaseTool] = {}
        infos = []
        for item in tools:
            info = item.info()
            if info.name in by_name:
                raise AgentConfigError(
                    f"agent {self._name!r} has two tools named {info.name!r}; tool names "
                    "must be unique"
                )
            by_name[info.name] = item
            infos.append(info)
        structured = self._structured
        if structured is not None and structured.mode == "tool":
            if OUTPUT_TOOL_NAME in by_name:
                raise AgentConfigError(
                    f"agent {self._name!r} has a tool named {OUTPUT_TOOL_NAME!r}, the name of "
                    "the structured-output tool of output_mode='tool'; rename the tool"
                )
            infos.append(structured.tool_info())
        model: Any = self._model
        if infos:
            with_tools = getattr(model, "with_tools", None)
            if with_tools is None:
                raise AgentConfigError(
                    f"agent {self._name!r} has tools but its model {model!r} cannot call tools "
                    "(it has no with_tools method); use a ToolCallingChatModel"
                )
            model = with_tools(infos)
        return ReactConfig(
            middlewares=self._middlewares,
            base_model=self._model,
            tool_timeouts=tool_timeouts(by_name, self._tool_timeout),
            tool_timeout=self._tool_timeout,
            model_retry=self._model_retry,
            guardrails=self._guardrails,
            share_guardrails=self._share_guardrails,
            name=self._name,
            instruction=instruction,
            tools=by_name,
            return_directly=frozenset(return_directly),
            model=model,
            output_key=self._output_key,
            max_iterations=self._max_iterations,
            emit_internal_events=self._emit_internal_events,
            tool_policy=self._tool_policy,
            structured=self._structured,
        )

    # --- running ---

    def execute(self, run: AgentRun) -> None:
        """Run the ReAct loop (or go on with the tool round a resumed run stopped in)."""
        frozen = self._config(run.transfer_targets)
        info = run.resume_info
        if info is not None:
            self._resume(frozen, run, info)
            return
        input = run.input
        instruction = frozen.instruction
        if frozen.middlewares:
            frozen, instruction, given = apply_before_agent(
                frozen, self._name, instruction, list(input.messages), False
            )
            input = AgentInput(messages=given, enable_streaming=input.enable_streaming)
        messages = self._model_input(instruction, input, frame_of(run))
        state = ReactState(messages=messages, remaining=frozen.max_iterations)
        ReactRun(frozen, run, input.enable_streaming).loop(state, None)

    def _resume(self, frozen: ReactConfig, run: AgentRun, info: ResumeInfo) -> None:
        frame = frame_of(run)
        saved = info.interrupt_state
        if not isinstance(saved, ToolRoundState):
            problem = (
                "no saved state"
                if saved is None
                else f"a saved state of the wrong type ({type(saved).__name__})"
            )
            raise ResumeError(
                f"cannot resume agent {self._name!r}: it has {problem}, not the "
                "ToolRoundState a ChatModelAgent saves when it stops; resume with the "
                "checkpoint this agent saved"
            )
        if saved.finished:
            # A durable run died after this agent answered: its turn is over (its events and
            # output key are in the restored history and session).
            return
        resume_state = frame.resume
        for index, call in enumerate(saved.calls):
            if index not in saved.done and resume_state is not None:
                address = (*frame.address, f"tool:{call.function.name}:{call.id}")
                saved.resume_of[index] = resume_state.at(address)
        modifier = self._history_modifier(info.resume_data)
        if modifier is not None:
            saved.messages = _modified_history(self._name, modifier, saved.messages)
        if frozen.middlewares:
            frozen, _, _ = apply_before_agent(frozen, self._name, frozen.instruction, [], True)
        state = ReactState(messages=list(saved.messages), remaining=saved.remaining)
        ReactRun(frozen, run, info.enable_streaming).loop(state, saved)

    def _history_modifier(self, data: Any) -> HistoryModifier | None:
        """The history modifier of the resume data targeted at this agent, if any (other
        data is not for the agent's history: a limit pause is resumed with any)."""
        if isinstance(data, ChatModelAgentResumeData):
            return data.history_modifier
        return None

    def _model_input(self, instruction: str, input: AgentInput, frame: RunFrame) -> list[Message]:
        if self._gen_model_input is not None:
            return list(self._gen_model_input(instruction, input))
        session = frame.session
        if instruction and session:
            instruction = _format_instruction(instruction, session.snapshot())
        messages = [system_message(instruction)] if instruction else []
        messages.extend(input.messages)
        return messages


def _modified_history(
    agent_name: str, modifier: HistoryModifier, history: list[Message]
) -> list[Message]:
    """What ``modifier`` makes of ``history`` (given a copy), checked to be messages."""
    modified: object = modifier(list(history))
    if isinstance(modified, str | bytes) or not isinstance(modified, Sequence):
        raise ResumeError(
            f"cannot resume agent {agent_name!r}: its history_modifier returned "
            f"{type(modified).__name__}; return the list of messages to go on with"
        )
    wrong = [item for item in modified if not isinstance(item, Message)]
    if wrong:
        raise ResumeError(
            f"cannot resume agent {agent_name!r}: its history_modifier returned "
            f"{type(wrong[0]).__name__} {wrong[0]!r} among the messages; return Message "
            "values only"
        )
    return list(modified)


def _check_unique(agent_name: str, tools: Iterable[BaseTool]) -> None:
    """Refuse two tools with one name (the model calls tools by name)."""
    seen: set[str] = set()
    for item in tools:
        tool_name = item.info().name
        if tool_name in seen:
            raise AgentConfigError(
                f"agent {agent_name!r} has two tools named {tool_name!r}; tool names "
                "must be unique"
            )
        seen.add(tool_name)


def _format_instruction(instruction: str, values: dict[str, Any]) -> str:
    try:
        return instruction.format_map(values)
    except KeyError as error:
        detail = f"could not find key: {error.args[0]}"
        raise InstructionFormatError(_FORMAT_ERROR.format(detail=detail)) from error
    except (ValueError, IndexError, AttributeError) as error:
        raise InstructionFormatError(_FORMAT_ERROR.format(detail=str(error))) from error

present(
    (
        ChatModelAgent,
        GenModelInput,
    ),
    "agentkit",
)

present(
    (
        ChatModelAgentResumeData,
        HistoryModifier,
        RetryContext,
        RetryDecision,
    ),
    "agentkit.agents.chatmodel",
)
