"""Interrupts: pausing a run for outside input.

A tool pauses the run with :func:`interrupt`; a custom agent sends :func:`interrupt_event`.
Each interrupting point gets a fresh id and an address (``agent:<name>`` and
``tool:<tool name>:<call id>`` segments) and enters the run as every resume point does, through
the writer's one door (:func:`agentkit._progress.save_point`): kept in the run's journal of
resume points (:mod:`agentkit._points`) and, in a durable run, handed to the writer. The
components around it declare their own points as the stop travels up, and the Runner saves
them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from agentkit._events import AgentAction, AgentEvent, InterruptInfo
from agentkit._persist import persisted
from agentkit._points import PointResume
from agentkit._progress import save_point
from agentkit._runctx import current_frame
from agentkit.errors import AgentKitRuntimeError, AgentKitValueError
from agentkit.schema import Message, ToolCall

__all__ = ["get_interrupt_state", "interrupt", "interrupt_event"]


class InterruptSignal(BaseException):
    """Raised by :func:`interrupt` to stop a tool call (derives from ``BaseException``).

    ``except Exception`` in user code does not catch it, so an interrupt cannot be
    swallowed by accident. The framework turns it into an interrupt event.

    Attributes:
        address: where the interrupt's resume point was saved.
    """

    def __init__(self, address: tuple[str, ...]) -> None:
        super().__init__(f"interrupted at {';'.join(address)}")
        self.address = address


# --- tools ------------------------------------------------------------------------------------


def interrupt(info: Any = None, *, state: Any = None) -> Any:
    """Inside a tool: pause the run here, or return the resume data once resumed.

    The first call stops the run: its last event carries ``action.interrupted`` with an
    :class:`~agentkit.InterruptContext` for this point (``info`` is shown to the user;
    ``state`` is saved and given back by :func:`get_interrupt_state`). When the run is
    resumed with data for this point's id, the call returns that data (``None`` is data);
    resumed without data for it, it interrupts again under a new id.

    Example::

        @tool
        def pay(amount: float) -> str:
            approved = interrupt(f"approve paying {amount}?")
            return "paid" if approved else "cancelled"

    Raises:
        RuntimeError: called outside a tool call.
    """
    frame = current_frame()
    if frame is None or frame.tool is None:
        raise AgentKitRuntimeError("interrupt() works only inside a tool call of an agent run")
    resume = frame.tool.resume
    if resume is not None and resume.is_resume_target and resume.has_data:
        resume.has_data = False  # delivered once
        return resume.data
    save_point(frame, state, info=info, root_cause=True, flush=False)
    raise InterruptSignal(frame.address)


def get_interrupt_state() -> Any:
    """Inside a resumed tool call: the ``state`` its latest interrupt saved, else ``None``."""
    frame = current_frame()
    if frame is None or frame.tool is None:
        return None
    resume = frame.tool.resume
    if resume is not None and resume.was_interrupted:
        return resume.state
    return None


def interrupt_event(
    info: Any = None, state: Any = None, *, children: Sequence[AgentEvent] = ()
) -> AgentEvent:
    """For custom agents: an event that interrupts the run at the agent's position.

    Send it as the agent's last event. ``info`` is shown to the user (it becomes the
    interrupt's ``InterruptContext.info`` and ``InterruptInfo.data``); ``state`` comes back as
    ``ResumeInfo.interrupt_state`` when the agent is resumed.

    ``children``: the interrupt events of children this agent ran (``run.run_child(child,
    sink=held.append)``) and held back, to pause once for all of them (Eino's
    ``adk.CompositeInterrupt``). The agent is then not a root cause itself: each child's
    interrupt is, with the agent's context (``info``) as its parent, and each is resumed by
    its own id (a resumed turn's ``run_child`` resumes each child that stopped).

    Raises:
        ValueError: a child event is not an interrupt.
    """
    for child in children:
        action = child.action if isinstance(child, AgentEvent) else None
        if action is None or action.interrupted is None:
            raise AgentKitValueError(
                f"interrupt_event(children=...) takes the interrupt events of children that "
                f"paused (got {child!r}); pass only events whose action.interrupted is set"
            )
    frame = current_frame()
    if frame is not None:
        save_point(frame, state, info=info, root_cause=not children, flush=False)
    return AgentEvent(action=AgentAction(interrupted=InterruptInfo(data=info)))


# --- ChatModelAgent tool rounds ------------------------------------------------------------------


@persisted("agentkit.ToolRoundState")
@attrs.define(eq=False, getstate_setstate=False)
class ToolRoundState:
    """Where a ChatModelAgent stopped: its conversation, model calls left and the tool round.

    ``calls`` are the tool calls of the round in progress (empty between rounds), ``done`` the
    results of the calls that finished and ``actions`` the actions those calls attached to
    their events (an exit, a transfer), so a resumed round delivers them as it would have.

    A durable run (``durability="step"``) also keeps ``started``, the indexes of the calls
    that were running (a call not in ``done`` that is in ``started`` may have had its effect
    when the process died), and ``finished``: the agent's turn is over (its answer given), so a
    resumed run does not ask the model again.

    ``run_locals`` are the agent's run-local values (:func:`~agentkit.set_run_local_value`):
    the resumed run starts with them.
    """

    messages: list[Message]
    remaining: int
    calls: list[ToolCall]
    done: dict[int, Message] = attrs.Factory(dict)
    actions: dict[int, AgentAction] = attrs.Factory(dict)
    resume_of: dict[int, PointResume] = attrs.field(factory=dict, eq=False)
    started: set[int] = attrs.Factory(set)
    finished: bool = False
    run_locals: dict[str, Any] = attrs.Factory(dict)

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "messages": self.messages,
            "remaining": self.remaining,
            "calls": self.calls,
            "done": self.done,
            "actions": self.actions,
        }
        # Written only when set, so that checkpoints of runs that do not use them stay
        # readable by the releases before them.
        if self.started:
            state["started"] = self.started
        if self.finished:
            state["finished"] = True
        if self.run_locals:
            state["run_locals"] = self.run_locals
        return state

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        object.__setattr__(self, "actions", {})
        object.__setattr__(self, "started", set())
        object.__setattr__(self, "finished", False)
        object.__setattr__(self, "run_locals", {})
        for key, value in state.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "resume_of", {})

    def snapshot(self) -> ToolRoundState:
        """A copy to save (the resume bookkeeping is per run, not saved)."""
        return ToolRoundState(
            messages=list(self.messages),
            remaining=self.remaining,
            calls=list(self.calls),
            done=dict(self.done),
            actions=dict(self.actions),
            started=self.started.copy(),  # one step: tool threads add to it meanwhile
            finished=self.finished,
            run_locals=self.run_locals,
        )


class ResumeOnlyData:
    """Base of resume data that serves the resume it is given to and is never saved.

    Resume data a resumed run did not use is kept in the checkpoint when the run stops again,
    so that it applies again; data of a subclass is not (it may hold functions, which a
    checkpoint cannot), see :class:`~agentkit.agents.chatmodel.ChatModelAgentResumeData`.
    """

    __slots__ = ()
