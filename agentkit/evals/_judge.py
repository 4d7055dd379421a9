"""An LLM judge: :class:`Judge` asks any chat model whether an answer meets a rubric."""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from agentkit.errors import AgentKitTypeError, AgentKitValueError
from agentkit.evals._case import CaseRun
from agentkit.models._base import ChatModel, ModelOptions
from agentkit.schema import Message, system_message, user_message

_INSTRUCTION = """You grade the answer of an AI assistant against a rubric.

Rubric:
{rubric}

Reply with only a JSON object: {{"pass": true or false, "reason": "<one or two sentences>"}}.
"pass" is true only when the answer meets the rubric."""

_VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["pass", "reason"],
    "additionalProperties": False,
}
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_SHOWN = 200


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


@attrs.frozen(repr=False)
class Judge:
    """A check made by a model: does the answer meet ``rubric``?

    The judge ``model`` (any :class:`~agentkit.models.ChatModel`; a cheaper or stronger one than the
    agent's, or a :class:`~agentkit.models.ScriptedChatModel` in tests) gets the rubric, the
    case's input, its ``expected`` answer when it has one, and the agent's answer, and is
    asked for ``{"pass": bool, "reason": str}`` (as a JSON-schema ``response_format`` for
    servers that support structured outputs; plain JSON in the text, or in a code fence, is
    read too). A failed verdict fails the case with the judge's reason; a reply that is no
    verdict fails it saying so. A judge model that raises fails the case with the error
    (``evaluate(retries=...)`` runs it again).

    Args:
        model: the judging model.
        rubric: what a good answer is ("answers in French and names the capital").
        include_input: show the judge the case's input.
        include_expected: show the judge the case's expected answer, when there is one.

    Example::

        Judge(OpenAIChatModel("gpt-4o"), "The answer is polite and gives a concrete date.")
    """

    model: ChatModel = attrs.field()
    rubric: str = attrs.field()
    include_input: bool = attrs.field(default=True, kw_only=True)
    include_expected: bool = attrs.field(default=True, kw_only=True)

    @rubric.validator
    def _check_rubric(self, _: attrs.Attribute[Any], value: str) -> None:
        if not isinstance(value, str) or not value.strip():
            raise AgentKitValueError("Judge needs a rubric: a non-empty text saying what passes")

    @model.validator
    def _check_model(self, _: attrs.Attribute[Any], value: Any) -> None:
        if not isinstance(value, ChatModel):
            raise AgentKitTypeError(
                f"Judge(model, ...) takes a ChatModel (generate and stream), got "
                f"{type(value).__name__}"
            )

    def messages(self, run: CaseRun) -> list[Message]:
        """The messages the judge is sent for ``run``."""
        parts: list[str] = []
        if self.include_input:
            case_input = run.case.input
            shown = (
                case_input
                if isinstance(case_input, str)
                else "\n".join(f"{m.role.value}: {m.content}" for m in case_input)
            )
            parts.append(f"<input>\n{shown}\n</input>")
        if self.include_expected and run.case.expected is not None:
            parts.append(f"<expected>\n{_as_text(run.case.expected)}\n</expected>")
        parts.append(f"<answer>\n{_as_text(run.output)}\n</answer>")
        return [
            system_message(_INSTRUCTION.format(rubric=self.rubric.strip())),
            user_message("\n\n".join(parts)),
        ]

    def __call__(self, run: CaseRun) -> str | None:
        options = ModelOptions(
            extra={
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "verdict", "schema": _VERDICT_SCHEMA, "strict": True},
                }
            }
        )
        reply = self.model.generate(self.messages(run), options)
        verdict = _verdict(reply.content)
        if verdict is None:
            return (
                f"{self!r}: the judge's reply is not a verdict "
                f'({{"pass": true|false, "reason": "..."}}): {_short(reply.content)!r}'
            )
        passed, reason = verdict
        return None if passed else f"{self!r}: {reason or 'failed (no reason given)'}"

    def __repr__(self) -> str:
        rubric = " ".join(self.rubric.split())
        return f"Judge({rubric if len(rubric) <= 50 else rubric[:49] + '…'!r})"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        from agentkit._jsonable import dumps as json_dumps

        return json_dumps(value, ensure_ascii=False, indent=2)
    except (TypeError, ValueError):
        return repr(value)


def _verdict(text: str) -> tuple[bool, str] | None:
    """``(passed, reason)`` from a judge's reply, or ``None`` when it gives no verdict."""
    found = _OBJECT.search(text)
    if found is None:
        return None
    try:
        data = json.loads(found.group(0))
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pass"), bool):
        return None
    reason = data.get("reason")
    return data["pass"], reason.strip() if isinstance(reason, str) else ""
