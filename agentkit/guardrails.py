"""Guardrails: checks a :class:`~agentkit.ChatModelAgent` runs on its input, answer and tool calls.

A guardrail is any object with some of these methods (missing ones are skipped)::

    check_input(messages: list[Message]) -> str | None
    check_output(message: Message) -> str | None
    check_tool_call(call: ToolCallInfo) -> str | None

``None`` lets the run go on; a string trips the guardrail, with that string as the reason.
Give guardrails to the agent: ``ChatModelAgent(..., guardrails=[PIIGuardrail()])``.

* **Input** checks run once per turn, before the agent's first model call, on the messages that
  call would be sent (the agent's instruction first, as a system message). They run before the
  call, not beside it: a tripped input costs no model call and no tokens, and nothing of a
  reply is shown; the price is that a slow check delays the first call. A trip ends the run
  with an error event whose ``err`` is :class:`~agentkit.GuardrailTripped` (``stage="input"``).
* **Output** checks run on the agent's answer (a model reply without tool calls, or the typed
  answer of ``output_type``) before it is delivered; with streaming the answer was shown as it
  arrived, and the trip follows it. A trip ends the run (``stage="output"``): the answer is
  not stored in ``output_key`` nor appended to a conversation.
* **Tool-call** checks run before each tool call, in the call's thread (calls of one reply run
  at once, so checks must be thread-safe). A trip does not run the tool: the model gets a tool
  message saying the call was blocked and why, and the run goes on.

Checks run in the order the guardrails were given; the first trip wins. An exception raised by
a check ends the run with that exception (a guardrail that cannot decide does not let a run
through silently). A guardrail's ``name`` attribute, if it has one, names it in errors and logs.

Ready to use: :class:`PIIGuardrail` (personal data in the input or the answer) and
:class:`ToolAllowList` (tools the model may call).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from agentkit.agents._guardrails import STAGES
from agentkit.errors import AgentKitValueError
from agentkit.schema import Message, Role
from agentkit.tools._base import ToolCallInfo

__all__ = ["Guardrail", "PIIGuardrail", "ToolAllowList"]


class Guardrail(Protocol):
    """The shape of a guardrail; each method is optional (see the module docs)."""

    def check_input(self, messages: list[Message]) -> str | None:
        """Return a reason to stop the run before its first model call, or ``None``."""

    def check_output(self, message: Message) -> str | None:
        """Return a reason to stop the run instead of delivering ``message``, or ``None``."""

    def check_tool_call(self, call: ToolCallInfo) -> str | None:
        """Return a reason not to run ``call`` (the model is told), or ``None``."""


# --- personal data ---------------------------------------------------------------------------

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_US_SSN = re.compile(r"\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b")


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card(text: str) -> bool:
    return any(_luhn(re.sub(r"[ -]", "", found.group())) for found in _CARD.finditer(text))


def _iban(text: str) -> bool:
    for found in _IBAN.finditer(text):
        compact = found.group().replace(" ", "")
        rearranged = compact[4:] + compact[:4]
        number = "".join(str(int(char, 36)) for char in rearranged)
        if int(number) % 97 == 1:
            return True
    return False


# Text is normalised before it is searched, so that the same number written with other
# separators is the same number: every whitespace character but the line break (no-break,
# thin, figure, ideographic spaces, tabs) is a space, every dash a hyphen, and the invisible
# format characters (zero-width space and joiners, word joiner, soft hyphen, BOM) are dropped.
_SPACES = re.compile(r"[^\S\n]")
_DASHES = re.compile("[\u2010-\u2015\u2212\ufe58\ufe63\uff0d]")
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200d\u2060\ufeff]")


def _normalised(text: str) -> str:
    """``text`` with Unicode spaces, dashes and invisible characters made plain (see above)."""
    if text.isascii():
        return text.replace("\t", " ").replace("\r", " ").replace("\f", " ").replace("\v", " ")
    return _INVISIBLE.sub("", _DASHES.sub("-", _SPACES.sub(" ", text)))


def _arguments_text(arguments: object) -> str:
    """A tool call's arguments as the text to search: their keys and values, one a line.

    The model's JSON text is parsed first, so that escapes (``"\\u00a0"``, ``"\\t"``) are
    searched as the characters they stand for.
    """
    parsed = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return arguments
    texts: list[str] = []
    pending = [parsed]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)
        elif item is not None:
            texts.append(str(item))
    return "\n".join(texts)


def _searcher(pattern: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda text: pattern.search(text) is not None


_DETECTORS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "email": ("an email address", _searcher(_EMAIL)),
    "card": ("a payment card number", _card),
    "iban": ("an IBAN", _iban),
    "us_ssn": ("a US social security number", _searcher(_US_SSN)),
}


class PIIGuardrail:
    """Stops a run whose input or answer holds personal data, or blocks such tool calls.

    It looks for email addresses, payment card numbers (checked with the Luhn digit), IBANs
    (checked with their mod-97 digits) and US social security numbers, plus the regular
    expressions given in ``patterns``. The reason names what was found and where, never the
    data itself (reasons end up in errors and logs). System messages (your instruction) are not
    checked. Text is normalised first: Unicode spaces (no-break, thin, figure...) and tabs are
    spaces, Unicode dashes are hyphens, zero-width characters are dropped, so
    ``4111\u00a01111\u00a01111\u00a01111`` is a card number too (your ``patterns`` see the
    normalised text as well).

    **Tool calls are not checked by default**, nor are tool results: personal data a tool
    returned (an order with a card number) can leave through another tool's arguments (an
    email, a web request) while the input and the answer stay clean. Add the ``"tool_call"``
    stage to block such calls.

    Args:
        kinds: which built-in detectors to use: any of ``"email"``, ``"card"``, ``"iban"``,
            ``"us_ssn"`` (default: all).
        patterns: more detectors: a description (``"an employee id"``) -> a regular
            expression (text or compiled).
        stages: where to look: any of ``"input"``, ``"output"``, ``"tool_call"`` (the
            arguments of a call); default the input and the answer only. A tool call that
            carries personal data is blocked (the model is told), the run goes on.

    Example::

        agent = ChatModelAgent("support", "answers customers", model,
                               guardrails=[PIIGuardrail(stages=("input", "output", "tool_call"))])

    Raises:
        ValueError: an unknown kind or stage, or nothing to look for.
    """

    name = "pii"

    def __init__(
        self,
        *,
        kinds: Iterable[str] = tuple(_DETECTORS),
        patterns: Mapping[str, str | re.Pattern[str]] | None = None,
        stages: Iterable[str] = ("input", "output"),
    ) -> None:
        if isinstance(kinds, str) or isinstance(stages, str):
            raise AgentKitValueError(
                "PIIGuardrail: kinds and stages take lists of names, not one string "
                f"(got kinds={kinds!r}, stages={stages!r})"
            )
        kinds = tuple(kinds)
        stages = tuple(stages)
        unknown = [kind for kind in kinds if kind not in _DETECTORS]
        if unknown:
            raise AgentKitValueError(
                f"PIIGuardrail: unknown kind(s) {unknown!r}; the kinds are: "
                f"{', '.join(_DETECTORS)}"
            )
        bad_stages = [stage for stage in stages if stage not in STAGES]
        if bad_stages or not stages:
            raise AgentKitValueError(
                f"PIIGuardrail: stages must be some of {', '.join(STAGES)} (got {stages!r})"
            )
        self._detectors = [_DETECTORS[kind] for kind in kinds]
        for what, pattern in (patterns or {}).items():
            compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
            self._detectors.append((what, _searcher(compiled)))
        if not self._detectors:
            raise AgentKitValueError("PIIGuardrail: give at least one kind or pattern to look for")
        self._stages = frozenset(stages)

    def __repr__(self) -> str:
        return f"PIIGuardrail(stages={sorted(self._stages)!r})"

    def _found(self, text: str) -> str | None:
        text = _normalised(text)
        for what, detect in self._detectors:
            if detect(text):
                return what
        return None

    def check_input(self, messages: list[Message]) -> str | None:
        """Trip when a non-system message of the input holds personal data."""
        if "input" not in self._stages:
            return None
        for position, message in enumerate(messages, start=1):
            if message.role is Role.SYSTEM:
                continue
            what = self._found(message.content)
            if what is not None:
                return f"the input holds {what} (message {position}, from {message.role.value})"
        return None

    def check_output(self, message: Message) -> str | None:
        """Trip when the answer holds personal data."""
        if "output" not in self._stages:
            return None
        what = self._found(message.content)
        return None if what is None else f"the answer holds {what}"

    def check_tool_call(self, call: ToolCallInfo) -> str | None:
        """Block a call whose arguments hold personal data."""
        if "tool_call" not in self._stages:
            return None
        what = self._found(_arguments_text(call.arguments))
        if what is None:
            return None
        return f"its arguments hold {what}, which must not be sent to tools"


# --- tools -----------------------------------------------------------------------------------


class ToolAllowList:
    """Lets the model call only the named tools; a call of any other is blocked (and the model
    told which tools it may call), and the run goes on.

    For agents whose tools come from elsewhere (an MCP server, a middleware that adds tools) or
    that must not use some of their tools in one deployment.

    Args:
        tools: the names of the tools the model may call.

    Example::

        agent = ChatModelAgent("reader", "reads files", model, tools=mcp_tools,
                               guardrails=[ToolAllowList("read_file", "list_directory")])

    Raises:
        ValueError: no tool name is given, or a name is not a non-empty string.
    """

    name = "tool_allow_list"

    def __init__(self, *tools: str) -> None:
        if not tools:
            raise AgentKitValueError(
                "ToolAllowList needs the names of the tools the model may call"
            )
        for tool in tools:
            if not isinstance(tool, str) or not tool:
                raise AgentKitValueError(f"ToolAllowList takes tool names (got {tool!r})")
        self.allowed = frozenset(tools)

    def __repr__(self) -> str:
        return f"ToolAllowList({', '.join(map(repr, sorted(self.allowed)))})"

    def check_tool_call(self, call: ToolCallInfo) -> str | None:
        """Block a call of a tool that is not on the list."""
        if call.name in self.allowed:
            return None
        allowed = ", ".join(sorted(self.allowed))
        return f"tool {call.name!r} may not be called here; the tools you may call are: {allowed}"
