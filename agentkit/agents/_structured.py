"""Structured output of a :class:`~agentkit.ChatModelAgent`: ``output_type=T``.

The model is asked for JSON matching the JSON Schema of ``T`` (attrs class, dataclass,
TypedDict, Enum, pydantic model, or ``list[...]``/``dict[...]`` of those), in one of two ways
(``output_mode``):

* ``"response_format"`` (default): each model call carries the OpenAI ``response_format``
  ``{"type": "json_schema", ...}`` request field (through ``ModelOptions.extra``); the answer
  is the reply's text. Servers that implement structured outputs (OpenAI, vLLM, Ollama, ...)
  constrain the reply; others ignore the field, and the check below still applies.
* ``"tool"``: the model is given one more tool, ``final_answer``, whose parameters are the
  schema, and must call a tool (``tool_choice="required"``); calling ``final_answer`` gives
  the answer. For servers without ``response_format`` (most support forced tool calls).

A schema that is not an object (a list, an enum, a dict of values) is wrapped as
``{"value": ...}``, because structured-output APIs want an object at the top.

The reply is checked and converted exactly as function tool arguments are (the same schema,
the same converter; see :mod:`agentkit.tools.function`): a number or boolean the model
quoted (``"12.5"``, ``"true"``) is accepted, an attrs class or dataclass is built from its
object, a pydantic model is validated by pydantic. An invalid reply goes back to the model
with what was wrong (as a user message), up to ``max_corrections`` times; after that the run
ends with :class:`~agentkit.errors.OutputValidationError`. The typed value is the final
event's ``output.customized_output``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._events import AgentEvent, AgentOutput, MessageVariant, event_from_message
from agentkit.errors import AgentConfigError, OutputValidationError
from agentkit.schema import Message, Role, ToolInfo, assistant_message, tool_message, user_message
from agentkit.tools._convert import Hook, explain, get_converter, scalar_hook, show
from agentkit.tools._schema import Unsupported, schema_of, type_name

if TYPE_CHECKING:
    from agentkit.models._base import ModelOptions

__all__ = ["OUTPUT_MODES", "OUTPUT_TOOL_NAME", "Settled", "StructuredOutput"]

OUTPUT_MODES = ("response_format", "tool")
OUTPUT_TOOL_NAME = "final_answer"
_WRAP_KEY = "value"


@attrs.frozen
class StructuredOutput:
    """How one agent asks for, checks and converts its structured output (fixed at freeze)."""

    type: Any
    schema: dict[str, Any]
    wrapped: bool
    hook: Hook
    mode: str
    max_corrections: int

    @classmethod
    def of(cls, output_type: Any, mode: str, max_corrections: int, agent: str) -> StructuredOutput:
        """Work out the schema and conversion of ``output_type``.

        Raises:
            AgentConfigError: the type has no JSON form, or the mode is unknown.
        """
        if mode not in OUTPUT_MODES:
            raise AgentConfigError(
                f"agent {agent!r}: output_mode must be one of {', '.join(map(repr, OUTPUT_MODES))}"
                f" (got {mode!r})"
            )
        if isinstance(max_corrections, bool) or not isinstance(max_corrections, int):
            raise AgentConfigError(
                f"max_output_corrections must be an int (got {max_corrections!r})"
            )
        if max_corrections < 0:
            raise AgentConfigError(
                f"max_output_corrections must be 0 or more (got {max_corrections})"
            )
        try:
            schema = schema_of(output_type, None, ())
        except Unsupported as error:
            raise AgentConfigError(
                f"agent {agent!r}: output_type {type_name(output_type)} has no JSON schema: "
                f"{error}. Use an attrs class, a dataclass, a TypedDict, an Enum, a pydantic "
                "model, or list[...] / dict[str, ...] of those"
            ) from None
        wrapped = schema.get("type") != "object" or "properties" not in schema
        if wrapped:
            schema = {
                "type": "object",
                "properties": {_WRAP_KEY: schema},
                "required": [_WRAP_KEY],
            }
        # The converter of tools (lax): what a tool accepts as an argument, an answer may be.
        hook = scalar_hook(output_type, False) or get_converter(False).get_structure_hook(
            output_type
        )
        return cls(output_type, schema, wrapped, hook, mode, max_corrections)

    @property
    def name(self) -> str:
        """The schema's name, as sent in ``response_format`` (the type's name)."""
        text = type_name(self.type)
        cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in text).strip("_")
        return cleaned[:64] or "output"

    def tool_info(self) -> ToolInfo:
        """The ``final_answer`` tool of the ``"tool"`` mode."""
        return ToolInfo(
            OUTPUT_TOOL_NAME,
            "Give the final answer. Call this tool once, when you have the answer; its "
            "arguments are the answer.",
            json.loads(json.dumps(self.schema)),
        )

    def model_options(self, options: ModelOptions | None) -> ModelOptions | None:
        """The options of every model call, the run's own winning over these.

        ``response_format`` mode adds the ``response_format`` field; ``tool`` mode sets
        ``tool_choice="required"``, so the model answers with a tool call, ``final_answer``
        in the end, never with plain text.
        """
        from agentkit.models._base import ModelOptions

        if self.mode == "tool":
            return ModelOptions(tool_choice="required").merge(options)
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": self.schema, "strict": False},
        }
        return ModelOptions(extra={"response_format": response_format}).merge(options)

    def answer_of(self, reply: Message) -> Message | None:
        """The answer a reply gives: itself in ``response_format`` mode (without tool calls),
        its ``final_answer`` call as a message in ``tool`` mode; ``None`` when it gives none."""
        if self.mode == "response_format":
            return None if reply.tool_calls else reply
        for call in reply.tool_calls:
            if call.function.name == OUTPUT_TOOL_NAME:
                return attrs.evolve(
                    assistant_message(call.function.arguments or "{}"),
                    response_meta=reply.response_meta,
                )
        return None if reply.tool_calls else reply

    def convert(self, text: str) -> tuple[Any, str | None]:
        """``(value, None)`` for a valid answer, else ``(None, what is wrong)``."""
        try:
            data = json.loads(_strip_fence(text))
        except (ValueError, RecursionError) as error:
            return None, f"the answer is not valid JSON ({error}); got {show(text)}"
        if self.wrapped:
            if type(data) is not dict or _WRAP_KEY not in data:
                return None, (
                    f'the answer must be a JSON object {{"{_WRAP_KEY}": ...}}; got {show(text)}'
                )
            data = data[_WRAP_KEY]
        try:
            return self.hook(data, self.type), None
        except Exception as error:
            problems: list[str] = []
            explain(error, [("attr", "answer")], {"answer": data}, problems)
            return None, "; ".join(problems)

    def settle(
        self, reply: Message, messages: list[Message], streaming: bool, corrections: int
    ) -> Settled:
        """Check the answer ``reply`` (the last of ``messages``) gives.

        Valid: the answer message (in tool mode, the ``final_answer`` arguments as text,
        replacing the reply in ``messages``) and the event that delivers it with the typed
        value (a whole reply waited for this check; a streamed answer was delivered already
        and is followed by an event with the value alone; a streamed ``final_answer`` call is
        followed by the answer message with the value). Invalid: the reply is delivered as it
        is and, with ``corrections`` left, the correction is appended to ``messages``.
        """
        answer = self.answer_of(reply)
        assert answer is not None
        value, problem = self.convert(answer.content)
        if problem is not None:
            events = [] if streaming else [event_from_message(reply, None, Role.ASSISTANT)]
            if corrections > 0:
                if reply.tool_calls:
                    # tool mode: the history keeps the final_answer call alone, answered,
                    # so it stays valid for model APIs (the reply's other calls never run).
                    call = next(c for c in reply.tool_calls if c.function.name == OUTPUT_TOOL_NAME)
                    messages[-1] = attrs.evolve(reply, tool_calls=[call])
                    messages.append(tool_message(f"invalid: {problem}", call.id, OUTPUT_TOOL_NAME))
                messages.append(self.correction(problem))
            return Settled(None, None, problem, events)
        if reply.tool_calls:
            messages[-1] = answer
        if streaming and not reply.tool_calls:
            # the streamed reply was the answer: the value follows it alone
            event = AgentEvent(output=AgentOutput(customized_output=value))
        else:
            variant = MessageVariant(False, answer, None, Role.ASSISTANT)
            event = AgentEvent(output=AgentOutput(variant, customized_output=value))
        return Settled(answer, value, "", [event])

    def correction(self, problem: str) -> Message:
        """The message that sends an invalid answer back to the model."""
        how = (
            f"Call the {OUTPUT_TOOL_NAME} tool again, with arguments that match"
            if self.mode == "tool"
            else "Reply again with only a JSON object that matches"
        )
        return user_message(
            f"Your answer does not match the required format: {problem}. {how} this JSON "
            f"schema: {json.dumps(self.schema, ensure_ascii=False)}"
        )

    def give_up(self, agent: str, problem: str) -> OutputValidationError:
        """The error of a run whose model never gave a valid answer."""
        return OutputValidationError(
            f"agent {agent!r}: the model's answer does not match output_type "
            f"{type_name(self.type)} after {self.max_corrections} correction(s): {problem}. "
            "Raise max_output_corrections, simplify the type, or use a model that supports "
            "structured outputs",
            agent_name=agent,
        )


@attrs.frozen
class Settled:
    """The outcome of :meth:`StructuredOutput.settle`: ``answer`` is ``None`` when invalid."""

    answer: Message | None
    value: Any
    problem: str
    events: list[AgentEvent]


def _strip_fence(text: str) -> str:
    """Models without structured outputs often wrap JSON in a Markdown code fence."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```"):
        body = stripped[3:-3]
        newline = body.find("\n")
        return body[newline + 1 :] if newline >= 0 else body
    return stripped
