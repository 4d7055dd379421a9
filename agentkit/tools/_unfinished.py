"""Tool calls a crash cut short: the interrupt that asks what to do, and the decision.

Framework-internal; :class:`UnfinishedToolCall` is public (``agentkit.UnfinishedToolCall``,
documented in :mod:`agentkit.tools.approval` beside the approval types it shares decisions
with).

A durable run (``Runner(durability="step")``) notes when a call of a tool that is not
idempotent starts. If the process dies before the call finishes, nobody knows whether it had
its effect: the recovered run does not run it again by itself but interrupts, with an
:class:`UnfinishedToolCall` as the interrupt info, and goes on with the decision given as
resume data (:func:`unfinished_decision`).
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from agentkit._persist import persisted
from agentkit.errors import ResumeError
from agentkit.tools._approval import Approve, Reject

__all__ = ["UnfinishedToolCall", "unfinished_decision", "unfinished_text"]


@persisted("agentkit.UnfinishedToolCall")
@attrs.frozen
class UnfinishedToolCall:
    """The interrupt info of a tool call that started but did not finish before a crash.

    The run's process died (SIGKILL, OOM, a lost machine) while the call ran, and its tool is
    not idempotent (``@tool(idempotent=False)``, or a tool that needs approval), so the call
    may or may not have had its effect. Resume the run with the decision as the resume data
    of this interrupt:

    * ``True`` or ``Approve()``: run the call again (``Approve(arguments={...})``: with these
      arguments instead). Its :func:`~agentkit.tool_call_key` is the one the first attempt
      had, so a service that got the first attempt can tell.
    * ``False`` or ``Reject(reason="...")``: do not run it; the model is told the call did not
      finish and was not run again (and why).
    * a ``str``: the call's result, as if the tool had returned it (what you found out about
      the first attempt, for example).

    Attributes:
        tool_name: the tool the model called.
        call_id: the id of the call.
        arguments: the arguments the model sent (a JSON object, as a dict; ``{}`` if they
            were not an object).
        key: the call's :func:`~agentkit.tool_call_key`: look the first attempt up with it.
    """

    tool_name: str
    call_id: str
    arguments: dict[str, Any] = attrs.field(hash=False)
    key: str

    def __str__(self) -> str:
        arguments = json.dumps(self.arguments, ensure_ascii=False)
        return (
            f"{self.tool_name}({arguments}) did not finish before the run stopped; run it "
            "again?"
        )


def unfinished_text(tool_name: str, reason: str) -> str:
    """The tool message a model gets for an unfinished call that was not run again."""
    text = (
        f"This call of {tool_name} did not finish before the run was interrupted by a crash, "
        "and it was not run again; it may or may not have had its effect."
    )
    return f"{text} Reason: {reason}" if reason else text


def unfinished_decision(info: UnfinishedToolCall, arguments: str, answer: Any) -> tuple[
    str | None, str
]:
    """What to do with an unfinished call given the resume data ``answer``.

    Returns ``(arguments, "")`` to run the call with ``arguments`` (JSON text), or
    ``(None, text)`` to give the model ``text`` as the call's result instead.

    Raises:
        ResumeError: ``answer`` is not a decision.
    """
    if answer is True:
        return arguments, ""
    if isinstance(answer, Approve):
        if answer.arguments is None:
            return arguments, ""
        return json.dumps(answer.arguments, ensure_ascii=False), ""
    if answer is False:
        return None, unfinished_text(info.tool_name, "")
    if isinstance(answer, Reject):
        return None, unfinished_text(info.tool_name, answer.reason)
    if isinstance(answer, str):
        return None, answer
    raise ResumeError(
        f"{info.tool_name}: the resume data for an unfinished call must be True, False, "
        f"Approve(...), Reject(...) or the call's result as a str, got {answer!r} "
        f"({type(answer).__name__})"
    )
