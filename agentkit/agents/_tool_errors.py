"""What a ChatModelAgent does when a tool call goes wrong: :class:`ToolErrorPolicy`.

Two kinds of failure are told apart:

* **model mistakes**: the model called a tool that does not exist, or sent arguments the tool
  refuses (a :class:`~agentkit.ToolArgumentsError`, which function tools and the transfer tool
  raise before doing anything). With ``recover_tool_errors`` (the default) the model gets a tool
  message saying what was wrong, and the run goes on; without, the run ends as in Eino.
* **exceptions raised inside a tool**: the run ends with a :class:`~agentkit.ToolError` (Eino's
  default), unless a ``tool_exception_handler`` turns them into a tool message.

Interrupts and cancellation are neither: they always pass through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import attrs

from agentkit.errors import (
    AgentConfigError,
    ToolArgumentsError,
    ToolError,
    ToolNotFoundError,
    ToolTimeoutError,
)
from agentkit.schema import Message, TextPart, ToolCall
from agentkit.tools._base import ToolCallInfo

__all__ = ["ToolErrorPolicy", "ToolExceptionHandler"]

ToolExceptionHandler = Callable[[Exception, ToolCallInfo], str]
"""``handler(error, call) -> text``: the tool message the model gets instead of the run ending."""

_logger = logging.getLogger("agentkit")

# A run that ends keeps the class of the tool's own error where agentkit defines it, so
# `except ToolArgumentsError` works on the run's error as on the tool's.
_KEPT_CLASSES: tuple[type[ToolError], ...] = (
    ToolArgumentsError,
    ToolNotFoundError,
    ToolTimeoutError,
)


@attrs.frozen
class ToolErrorPolicy:
    """How one agent treats failed tool calls (built from its constructor arguments)."""

    recover: bool = True
    handler: ToolExceptionHandler | None = None
    max_result_chars: int | None = 100_000

    @classmethod
    def checked(
        cls,
        recover: object,
        handler: object,
        max_result_chars: object,
    ) -> ToolErrorPolicy:
        """Validate the ``ChatModelAgent`` arguments and build the policy."""
        if not isinstance(recover, bool):
            raise AgentConfigError(f"recover_tool_errors must be True or False (got {recover!r})")
        if handler is not None and not callable(handler):
            raise AgentConfigError(
                f"tool_exception_handler must be a function (error, call) -> str, or None "
                f"(got {handler!r})"
            )
        if max_result_chars is not None and (
            isinstance(max_result_chars, bool)
            or not isinstance(max_result_chars, int)
            or max_result_chars < 1
        ):
            raise AgentConfigError(
                f"max_tool_result_chars must be a positive int, or None for no limit "
                f"(got {max_result_chars!r})"
            )
        return cls(recover, handler, max_result_chars)

    def unknown_tool(self, call: ToolCall, tools: Iterable[str]) -> str:
        """The tool message for a call of a tool the agent does not have.

        Raises:
            ToolNotFoundError: the policy does not recover.
        """
        name = call.function.name
        known = ", ".join(repr(tool) for tool in sorted(tools))
        if not self.recover:
            raise ToolNotFoundError(
                f"the model called tool {name!r} (call {call.id or '-'}), which the agent does "
                f"not have (its tools: {known or 'none'}); with recover_tool_errors=True the "
                "model is told and the run goes on",
                tool_name=name,
                call_id=call.id,
            )
        return f"Error: there is no tool named {name!r}. The tools you can call are: {known}."

    def failed(self, error: Exception, call: ToolCall) -> str:
        """The tool message for a call whose tool raised ``error``: what was wrong with the
        arguments (a ``ToolArgumentsError``, when recovering), or the handler's text.

        Raises:
            ToolError: the run ends: the message names the tool, the call and what went wrong,
                the tool's error is the cause; a ``ToolArgumentsError``, ``ToolNotFoundError`` or
                ``ToolTimeoutError`` keeps its class.
            BaseException: whatever the handler raised, when it is not ``error`` itself.
        """
        if isinstance(error, ToolArgumentsError):
            if not self.recover:
                raise _ending_error(error, call) from error
            return _mistake_text(error, call)
        handler = self.handler
        if handler is None:
            raise _ending_error(error, call) from error
        try:
            text = handler(error, ToolCallInfo.from_tool_call(call))
        except Exception as raised:
            if raised is error:
                raise _ending_error(error, call) from error
            raise
        if not isinstance(text, str):
            raise ToolError(
                f"tool_exception_handler returned {type(text).__name__} for the error of tool "
                f"{call.function.name!r}, not str: return the text the model should get, or "
                "raise to end the run",
                tool_name=call.function.name,
                call_id=call.id,
            ) from error
        return text

    def limit(self, message: Message, agent_name: str) -> Message:
        """``message`` with its content cut to ``max_result_chars``, and a note saying so."""
        limit = self.max_result_chars
        content = message.content
        if limit is None or len(content) <= limit:
            return message
        _logger.warning(
            "agent %r: tool %r (call %s) returned %d characters; only the first %d are sent to "
            "the model (ChatModelAgent(max_tool_result_chars=...) sets the limit, None for none)",
            agent_name,
            message.tool_name,
            message.tool_call_id,
            len(content),
            limit,
        )
        note = (
            f"\n\n[truncated: the tool returned {len(content):,} characters; only the first "
            f"{limit:,} are shown]"
        )
        if message.parts:  # the text parts are cut, the media kept (they are not characters)
            return attrs.evolve(
                message,
                content="",
                parts=(
                    TextPart(content[:limit] + note),
                    *(part for part in message.parts if type(part) is not TextPart),
                ),
            )
        return attrs.evolve(message, content=content[:limit] + note)


def _mistake_text(error: ToolArgumentsError, call: ToolCall) -> str:
    name = call.function.name
    return f"Error: {error}. Correct the arguments and call {name} again."


def _ending_error(error: Exception, call: ToolCall) -> ToolError:
    name = call.function.name
    where = f"tool {name!r} (call {call.id or '-'})"
    cls = next((kept for kept in _KEPT_CLASSES if isinstance(error, kept)), ToolError)
    if isinstance(error, ToolArgumentsError):
        text = (
            f"{where} was called with arguments it refuses: {error}; with "
            "recover_tool_errors=True the model is told and can call it again"
        )
    elif cls is not ToolError:
        text = f"{where} failed: {error}"
    else:
        text = (
            f"{where} raised {type(error).__name__}: {error}; give the agent a "
            "tool_exception_handler to send tool errors to the model instead of ending the run"
        )
    return cls(text, tool_name=name, call_id=call.id)
