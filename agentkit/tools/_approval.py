"""How approval works inside a tool call: the decision, the interrupt, the wrapper tools.

Framework-internal; the public side and its documentation are in :mod:`agentkit.tools.approval`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

from agentkit._clock import SYSTEM_CLOCK
from agentkit._interrupt import interrupt
from agentkit._persist import persisted
from agentkit._runctx import current_frame, use_frame
from agentkit.errors import AgentKitTypeError, ResumeError, ToolArgumentsError
from agentkit.schema import ContentPart, ToolInfo
from agentkit.tools._base import BaseTool

if TYPE_CHECKING:
    from agentkit.streams import StreamReader

__all__ = [
    "Approve",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Reject",
    "with_approval",
]

ApprovalPolicy: TypeAlias = bool | Callable[[dict[str, Any]], bool]
"""``needs_approval``: ``True``/``False``, or ``fn(arguments) -> bool`` asked for each call."""


def _frozen_dict(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)


@persisted("agentkit.ApprovalRequest")
@attrs.frozen
class ApprovalRequest:
    """The interrupt info of a tool call waiting for approval.

    Attributes:
        tool_name: the tool the model called.
        call_id: the id of the call.
        arguments: the arguments the model sent (a JSON object, as a dict).
        asked_at: when the call first asked (seconds since the epoch; ``None`` in a request
            saved by an earlier release); not part of equality. A run resumed without a
            decision asks again with the same time, so
            :class:`~agentkit.approvals.ApprovalInbox` counts its age from the first time.
    """

    tool_name: str
    call_id: str
    arguments: dict[str, Any] = attrs.field(hash=False)
    asked_at: float | None = attrs.field(default=None, eq=False, repr=False, kw_only=True)

    def __str__(self) -> str:
        return f"approve {self.tool_name}({json.dumps(self.arguments, ensure_ascii=False)})?"


@persisted("agentkit.Approve")
@attrs.frozen
class Approve:
    """Resume data that lets a call run; with ``arguments``, run it with those instead."""

    arguments: dict[str, Any] | None = attrs.field(
        default=None, converter=_frozen_dict, hash=False
    )


@persisted("agentkit.Reject")
@attrs.frozen
class Reject:
    """Resume data that stops a call; the model is told it was rejected, and ``reason``."""

    reason: str = ""


def rejection_text(tool_name: str, reason: str) -> str:
    """The tool message a model gets for a rejected call."""
    text = f"The user rejected this call of {tool_name}; it was not run."
    return f"{text} Reason: {reason}" if reason else text


@attrs.frozen
class Decision:
    """What to do with a call after asking (framework-internal).

    ``arguments`` is the JSON text to run the call with; ``None`` means it was rejected and
    ``rejection`` is the tool message to return instead. ``resumes_tool`` is ``False`` when
    the call was just approved: the resume point was the approval's, not the tool's.
    """

    arguments: str | None
    rejection: str = ""
    resumes_tool: bool = False  # no approval was asked now: the tool sees its own resume


def ask_approval(
    tool_name: str, policy: ApprovalPolicy, arguments: str, parsed: dict[str, Any]
) -> Decision:
    """Interrupt for approval of this call if ``policy`` wants it; return the decision.

    ``parsed`` is the call's arguments as a dict (checked by the caller). Called inside the
    tool call: the first time it interrupts the run (the point's state is the request); once
    resumed with a decision it returns it. A call that was approved and then interrupted by
    the tool itself (an agent tool whose inner agent asks something) is not asked again: its
    resume point then holds the tool's own state, not an approval request.

    Raises:
        ResumeError: the resume data is not a decision (``True``, ``False``, ``Approve``,
            ``Reject``).
    """
    frame = current_frame()
    resume = frame.tool.resume if frame is not None and frame.tool is not None else None
    if (
        resume is not None
        and resume.was_interrupted
        and not isinstance(resume.state, ApprovalRequest)
    ):
        return Decision(arguments, resumes_tool=True)
    if not _wants(policy, parsed, tool_name):
        return Decision(arguments, resumes_tool=True)
    call_id = frame.tool.call_id if frame is not None and frame.tool is not None else ""
    asked_before = resume.state if resume is not None and resume.was_interrupted else None
    asked_at = (
        asked_before.asked_at
        if isinstance(asked_before, ApprovalRequest) and asked_before.asked_at is not None
        else SYSTEM_CLOCK.time()
    )
    request = ApprovalRequest(tool_name, call_id, dict(parsed), asked_at=asked_at)
    answer = _from_json(interrupt(request, state=request))
    if answer is True:
        return Decision(arguments)
    if isinstance(answer, Approve):
        if answer.arguments is None:
            return Decision(arguments)
        return Decision(json.dumps(answer.arguments, ensure_ascii=False))
    if answer is False:
        return Decision(None, rejection_text(tool_name, ""))
    if isinstance(answer, Reject):
        return Decision(None, rejection_text(tool_name, answer.reason))
    raise ResumeError(
        f"{tool_name}: the resume data for an approval must be True, False, Approve(...) or "
        f'Reject(...) (or, as JSON, {{"decision": "approve"}}, {{"decision": "edit", '
        f'"arguments": {{...}}}} or {{"decision": "reject", "reason": "..."}}), got {answer!r} '
        f"({type(answer).__name__}); resume with targets={{interrupt_id: Approve()}} or "
        "Reject(reason=...)"
    )


_JSON_KEYS = frozenset({"decision", "arguments", "reason"})


def _from_json(answer: Any) -> Any:
    """A decision sent as JSON (through a Celery queue), in the shape AG-UI, A2A and MCP
    approvals use: ``{"decision": "approve"}``, ``{"decision": "edit", "arguments": {...}}``,
    ``{"decision": "reject", "reason": "..."}``; anything else is returned as it is."""
    if type(answer) is not dict or not set(answer) <= _JSON_KEYS:
        return answer
    decision = answer.get("decision")
    arguments = answer.get("arguments")
    reason = answer.get("reason", "")
    if decision == "approve" and set(answer) == {"decision"}:
        return Approve()
    if decision == "edit" and type(arguments) is dict and "reason" not in answer:
        return Approve(arguments=arguments)
    if decision == "reject" and isinstance(reason, str) and "arguments" not in answer:
        return Reject(reason=reason)
    return answer


@contextmanager
def running(decision: Decision) -> Iterator[None]:
    """Run the approved call: after an approval, the tool starts afresh (not resumed)."""
    frame = current_frame()
    if decision.resumes_tool or frame is None or frame.tool is None:
        yield
        return
    with use_frame(attrs.evolve(frame, tool=attrs.evolve(frame.tool, resume=None))):
        yield


def _wants(policy: ApprovalPolicy, parsed: dict[str, Any], tool_name: str) -> bool:
    if isinstance(policy, bool):
        return policy
    answer = policy(dict(parsed))
    if not isinstance(answer, bool):
        raise AgentKitTypeError(
            f"{tool_name}: needs_approval({parsed!r}) returned {answer!r}; it must return "
            "True or False"
        )
    return answer


def check_policy(policy: object, where: str) -> ApprovalPolicy:
    """Return ``policy`` if it is a valid ``needs_approval`` value, else raise TypeError."""
    if isinstance(policy, bool) or callable(policy):
        return policy
    raise AgentKitTypeError(
        f"{where}: needs_approval must be True, False or a function of the arguments dict "
        f"returning a bool (got {policy!r})"
    )


def parse_object(tool_name: str, arguments: str) -> dict[str, Any]:
    """The call's arguments as a dict; raises ToolArgumentsError when they are not an object."""
    if not arguments or arguments.isspace():
        return {}
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError) as error:
        raise ToolArgumentsError(
            f"{tool_name}: arguments are not valid JSON: {error}", tool_name=tool_name
        ) from error
    if type(parsed) is not dict:
        raise ToolArgumentsError(
            f"{tool_name}: arguments must be a JSON object (got {arguments[:200]!r})",
            tool_name=tool_name,
        )
    return parsed


# --- the wrapper ----------------------------------------------------------------------------


class ApprovalTool:
    """A tool whose calls wait for approval; made by :func:`with_approval`."""

    def __init__(self, tool: BaseTool, needs_approval: ApprovalPolicy) -> None:
        self._tool = tool
        self._policy = needs_approval
        self._name = tool.info().name

    @property
    def wrapped(self) -> BaseTool:
        """The tool that runs once a call is approved."""
        return self._tool

    @property
    def idempotent(self) -> bool:
        """``False``: a call that waits for approval is not run again unasked after a crash."""
        return False

    def info(self) -> ToolInfo:
        """The wrapped tool's name, description and parameters."""
        return self._tool.info()

    def _decide(self, arguments: str) -> Decision:
        parsed = parse_object(self._name, arguments)
        return ask_approval(self._name, self._policy, arguments, parsed)

    def __repr__(self) -> str:
        return f"with_approval({self._tool!r})"


class _Invokes(ApprovalTool):
    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Ask for approval, then run the wrapped tool (or return the rejection)."""
        decision = self._decide(arguments)
        if decision.arguments is None:
            return decision.rejection
        with running(decision):
            result: str = self._tool.invoke(decision.arguments, **tool_options)  # type: ignore[attr-defined]
        return result


class _InvokesContent(ApprovalTool):
    def invoke_content(self, arguments: str, **tool_options: Any) -> str | tuple[ContentPart, ...]:
        """Ask for approval, then run the wrapped tool with its media (or return the
        rejection)."""
        decision = self._decide(arguments)
        if decision.arguments is None:
            return decision.rejection
        with running(decision):
            result: str | tuple[ContentPart, ...] = self._tool.invoke_content(  # type: ignore[attr-defined]
                decision.arguments, **tool_options
            )
        return result


class _Streams(ApprovalTool):
    def stream(self, arguments: str, **tool_options: Any) -> StreamReader[str]:
        """Ask for approval, then stream the wrapped tool (or the rejection)."""
        from agentkit.streams import stream_from_list

        decision = self._decide(arguments)
        if decision.arguments is None:
            return stream_from_list([decision.rejection])
        with running(decision):
            reader: StreamReader[str] = self._tool.stream(decision.arguments, **tool_options)  # type: ignore[attr-defined]
        return reader


class _StreamsContent(ApprovalTool):
    def stream_content(self, arguments: str, **tool_options: Any) -> StreamReader[ContentPart]:
        """Ask for approval, then stream the wrapped tool's parts (or the rejection, as one
        text part)."""
        from agentkit.schema import TextPart
        from agentkit.streams import stream_from_list

        decision = self._decide(arguments)
        if decision.arguments is None:
            return stream_from_list([TextPart(decision.rejection)])
        with running(decision):
            reader: StreamReader[ContentPart] = self._tool.stream_content(  # type: ignore[attr-defined]
                decision.arguments, **tool_options
            )
        return reader


_CAPABILITIES: tuple[tuple[str, type[ApprovalTool]], ...] = (
    ("invoke", _Invokes),
    ("invoke_content", _InvokesContent),
    ("stream", _Streams),
    ("stream_content", _StreamsContent),
)
"""The ways a tool runs, each with the layer that asks for approval before it."""


def _wrapper_class(names: tuple[str, ...]) -> type[ApprovalTool]:
    bases = tuple(layer for name, layer in _CAPABILITIES if name in names)
    cls = type("_ApprovalTool_" + "_".join(names), bases, {"__module__": __name__})
    globals()[cls.__name__] = cls  # found by name, as pickle looks classes up
    return cls


_WRAPPERS: dict[tuple[str, ...], type[ApprovalTool]] = {
    names: _wrapper_class(names)
    for count in range(1, len(_CAPABILITIES) + 1)
    for names in itertools.combinations([name for name, _ in _CAPABILITIES], count)
}
"""An approval wrapper class for each set of ways a tool runs: a wrapper has exactly the
methods of its tool, so the protocol checks (``isinstance(tool, StreamableContentTool)``) and
the agent's choice of how to run it are the same as for the tool itself."""


def with_approval(tool: BaseTool, needs_approval: ApprovalPolicy = True) -> BaseTool:
    """Return ``tool`` with its calls waiting for approval (see :mod:`agentkit.tools.approval`).

    Works with any tool (MCP tools, agent tools, your own classes): the returned tool has
    the same ``info()`` and the same ways to run as ``tool``, each asking first: ``invoke``,
    ``stream``, ``invoke_content`` (a :class:`~agentkit.tools.ContentTool`'s media) and
    ``stream_content`` (a :class:`~agentkit.tools.StreamableContentTool`'s parts), whichever
    ``tool`` has, and no other. The arguments must be a JSON object; the approval request
    shows them as a dict.

    Args:
        tool: the tool to guard.
        needs_approval: ``True`` (every call), ``False`` (none), or ``fn(arguments) -> bool``
            deciding per call, e.g. ``lambda args: args["amount"] > 100``.
    """
    policy = check_policy(needs_approval, "with_approval")
    names = tuple(name for name, _ in _CAPABILITIES if callable(getattr(tool, name, None)))
    if not names:
        raise AgentKitTypeError(
            f"with_approval() needs a tool with invoke(), stream(), invoke_content() or "
            f"stream_content(), got {tool!r} ({type(tool).__name__})"
        )
    return _WRAPPERS[names](tool, policy)
