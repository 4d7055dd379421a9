"""The guardrails of a :class:`~agentkit.ChatModelAgent`: :class:`Guardrails` (framework-internal).

A guardrail is any object with some of ``check_input(messages)``, ``check_output(message)`` and
``check_tool_call(call)`` (see :mod:`agentkit.guardrails`); a check that returns a string trips
it. :class:`Guardrails` sorts an agent's guardrails by stage once, when the agent is built, so
a run pays only for the stages that have checks (an agent without guardrails has none at all).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from agentkit.errors import AgentConfigError, AgentKitTypeError, GuardrailTripped
from agentkit.schema import Message, ToolCall
from agentkit.tools._base import ToolCallInfo

__all__ = ["STAGES", "Guardrails", "guardrail_name"]

_log = logging.getLogger("agentkit")

STAGES = ("input", "output", "tool_call")
"""The stages a guardrail can check, each by its ``check_<stage>`` method."""

_Check = tuple[str, Callable[[Any], object]]  # (guardrail name, bound check method)


def guardrail_name(guardrail: object) -> str:
    """What errors and logs call ``guardrail``: its ``name`` attribute if a non-empty string,
    else its class name."""
    name = getattr(guardrail, "name", None)
    return name if isinstance(name, str) and name else type(guardrail).__name__


class Guardrails:
    """One agent's guardrails, sorted by stage; :meth:`checked` builds it from the argument."""

    __slots__ = ("agent_name", "handed_down", "input", "items", "output", "tool_call")

    def __init__(
        self,
        agent_name: str,
        guardrails: Iterable[object],
        handed_down: Iterable[object] = (),
    ) -> None:
        self.agent_name = agent_name
        self.items = tuple(guardrails)  # as given
        # The names of the items only the agents above gave (errors and logs say so).
        above = tuple(handed_down)
        own = {guardrail_name(g) for g in self.items if not any(g is h for h in above)}
        self.handed_down = frozenset(guardrail_name(g) for g in above) - own
        found: dict[str, list[_Check]] = {stage: [] for stage in STAGES}
        for guardrail in self.items:
            for stage in STAGES:
                check = getattr(guardrail, f"check_{stage}", None)
                if callable(check):
                    found[stage].append((guardrail_name(guardrail), check))
        self.input = tuple(found["input"])
        self.output = tuple(found["output"])
        self.tool_call = tuple(found["tool_call"])

    @classmethod
    def checked(cls, agent_name: str, guardrails: object) -> Guardrails | None:
        """Validate ``ChatModelAgent(guardrails=...)``; ``None`` when there are none.

        Raises:
            AgentConfigError: ``guardrails`` is one guardrail rather than a list of them, not a
                list, or holds an object with none of the check methods.
        """
        if _is_guardrail(guardrails):
            raise AgentConfigError(
                f"guardrails takes a list of guardrails, not one; write guardrails=[{guardrails!r}]"
            )
        if isinstance(guardrails, (str, bytes)) or not isinstance(guardrails, Iterable):
            raise AgentConfigError(
                f"guardrails must be a list of guardrail objects (got {guardrails!r})"
            )
        items = tuple(guardrails)
        for item in items:
            if not _is_guardrail(item):
                raise AgentConfigError(
                    f"{item!r} is not a guardrail: give it at least one of check_input(messages), "
                    "check_output(message), check_tool_call(call), each returning a reason (str) "
                    "to trip it or None to let the run go on (see agentkit.guardrails)"
                )
        return cls(agent_name, items) if items else None

    @classmethod
    def inheriting(
        cls, agent_name: str, own: Guardrails | None, handed_down: tuple[object, ...]
    ) -> Guardrails | None:
        """``own`` followed by the guardrails ``handed_down`` by the agents above (each once);
        ``None`` when there are none."""
        if not handed_down:
            return own
        mine = () if own is None else own.items
        added = tuple(g for g in handed_down if not any(g is had for had in mine))
        return cls(agent_name, (*mine, *added), added) if added else own

    def check_input(self, messages: list[Message]) -> None:
        """Run the input checks on the first model call's messages.

        Raises:
            GuardrailTripped: a check returned a reason.
        """
        for name, check in self.input:
            reason = _verdict(check(list(messages)), name, "input")
            if reason is not None:
                raise self._tripped("input", name, reason)

    def check_output(self, message: Message) -> None:
        """Run the output checks on the agent's answer.

        Raises:
            GuardrailTripped: a check returned a reason.
        """
        for name, check in self.output:
            reason = _verdict(check(message), name, "output")
            if reason is not None:
                raise self._tripped("output", name, reason)

    def refusal(self, call: ToolCall) -> str | None:
        """Run the tool-call checks on ``call``; the tool message for the model when one
        tripped (the call is not run), else ``None``."""
        if not self.tool_call:
            return None
        info = ToolCallInfo.from_tool_call(call)
        for name, check in self.tool_call:
            reason = _verdict(check(info), name, "tool_call")
            if reason is not None:
                _log.info(
                    "agentkit: guardrail %r %s blocked tool call %s (%s): %s",
                    name,
                    self._whose(name),
                    call.id or "-",
                    call.function.name,
                    reason,
                )
                return (
                    f"Error: the call of {call.function.name} was blocked by guardrail {name!r} "
                    f"and did not run: {reason}"
                )
        return None

    def _whose(self, name: str) -> str:
        """Whose guardrail ``name`` is, for errors and logs: the agent's, or handed down to it."""
        if name in self.handed_down:
            return f"(handed down by an agent above) of agent {self.agent_name!r}"
        return f"of agent {self.agent_name!r}"

    def _tripped(self, stage: str, name: str, reason: str) -> GuardrailTripped:
        where = "input" if stage == "input" else "answer"
        return GuardrailTripped(
            f"guardrail {name!r} {self._whose(name)} stopped the run on the agent's {where}: "
            f"{reason}",
            stage=stage,
            reason=reason,
            guardrail=name,
            agent_name=self.agent_name,
        )


def _is_guardrail(item: object) -> bool:
    return any(callable(getattr(item, f"check_{stage}", None)) for stage in STAGES)


def _verdict(result: object, name: str, stage: str) -> str | None:
    """A check's result as a reason to trip (a string), or ``None`` to go on."""
    if result is None:
        return None
    if isinstance(result, str):
        return result or "(the guardrail gave no reason)"
    raise AgentKitTypeError(
        f"guardrail {name!r}: check_{stage} returned {type(result).__name__} {result!r}; return a "
        "str (the reason) to trip the guardrail, or None to let the run go on"
    )
