"""An eval case (:class:`Case`), what a check is (:data:`Check`) and sees (:class:`CaseRun`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

import attrs

from agentkit._results import RunResult
from agentkit.errors import AgentKitTypeError, AgentKitValueError
from agentkit.schema import Message, TokenUsage
from agentkit.tools._base import ToolCallInfo

CheckOutcome: TypeAlias = "str | bool | None"
"""What a check returns: ``None`` or ``True`` when the case passes it; a reason (``str``) or
``False`` when it fails."""

Check: TypeAlias = "Callable[[CaseRun], CheckOutcome]"
"""A check: any function of a :class:`CaseRun` returning ``None``/``True`` (passed) or a
failure reason (``str``) or ``False``. The built-in ones are classes (``Contains("Paris")``)."""


def _input(value: str | Iterable[Message | Mapping[str, Any]]) -> str | tuple[Message, ...]:
    if isinstance(value, str):
        return value
    if isinstance(value, Message):
        raise AgentKitTypeError("a Case input is a str or a list of messages (got one Message)")
    messages = tuple(
        item if isinstance(item, Message) else Message.from_dict(dict(item)) for item in value
    )
    if not messages:
        raise AgentKitValueError("a Case input needs at least one message")
    return messages


def _checks(value: Check | Iterable[Check]) -> tuple[Check, ...]:
    checks = (value,) if callable(value) else tuple(value)
    for check in checks:
        if not callable(check):
            raise AgentKitTypeError(
                f"a check is a function of a CaseRun, or a check object such as Contains(...) "
                f"(got {check!r})"
            )
    return checks


def _metadata(value: Mapping[str, Any] | None) -> dict[str, Any]:
    return {} if value is None else dict(value)


@attrs.frozen
class Case:
    """One input to run the agent on, with what to check of the answer.

    Args:
        input: the user's message, or a list of messages (``Message`` objects or
            ``Message.to_dict()``-style dicts).
        expected: the expected answer, if there is one: checked with :class:`Equals` unless
            an :class:`Equals` or a :class:`Judge` check (of the case or the dataset) is
            there to look at it (``Equals()`` without a value compares with it; the judge is
            shown it).
        checks: checks of this case (the dataset's checks apply as well).
        name: a name unique in the dataset; by default the input text (shortened), or
            ``case <n>`` for a list of messages.
        metadata: anything to keep with the case (difficulty, source, tags); written in the
            report.

    Example::

        Case("What is 2 + 2?", expected="4")
        Case("Weather in Paris?", checks=[ToolCalled("get_weather", {"city": "Paris"}),
                                          Contains("Paris")], name="weather-paris")
    """

    input: str | tuple[Message, ...] = attrs.field(converter=_input)
    expected: Any = attrs.field(default=None, kw_only=True)
    checks: tuple[Check, ...] = attrs.field(default=(), converter=_checks, kw_only=True)
    name: str | None = attrs.field(default=None, kw_only=True)
    metadata: dict[str, Any] = attrs.field(
        default=None, converter=_metadata, kw_only=True, hash=False
    )

    @name.validator
    def _check_name(self, _: attrs.Attribute[Any], value: str | None) -> None:
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise AgentKitValueError(f"a Case name must be a non-empty str (got {value!r})")

    @property
    def messages(self) -> list[Message]:
        """The input as the list of messages the agent is run on."""
        if isinstance(self.input, str):
            return [Message("user", self.input)]
        return list(self.input)

    def default_name(self, number: int) -> str:
        """The name of this case when it has none: its input text, or ``case <number>``."""
        if isinstance(self.input, str):
            text = " ".join(self.input.split())
            if text:
                return text if len(text) <= 60 else text[:59] + "…"
        return f"case {number}"


@attrs.frozen
class CaseRun:
    """One run of a case, as checks see it.

    Attributes:
        case: the case.
        result: the run's result (its events, final message, output, usage, error).
        duration: the run's wall time, in seconds.
        model_calls: how many model calls the run made (its steps), sub-agents included.
        tool_calls: the tool calls the model asked for, in order, sub-agents included.
        attempt: 1 for the first run of the case, 2 for its first retry, ...
    """

    case: Case
    result: RunResult
    duration: float
    model_calls: int = 0
    tool_calls: tuple[ToolCallInfo, ...] = ()
    attempt: int = 1

    @property
    def text(self) -> str:
        """The final answer's text (``result.text``)."""
        return self.result.text

    @property
    def output(self) -> Any:
        """The structured output when the agent has an ``output_type``, else the answer text."""
        output = self.result.output
        return self.result.text if output is None else output

    @property
    def usage(self) -> TokenUsage:
        """The tokens the run used (``result.usage``)."""
        return self.result.usage

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools the model called, in order."""
        return [call.name for call in self.tool_calls]
