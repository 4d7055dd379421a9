"""Deterministic transfer: after an agent finishes, hand the conversation on to fixed agents.

:func:`agent_with_deterministic_transfer_to` wraps an agent so that, once its turn ends
normally, it emits the transfer messages a ``transfer_to_agent`` call would have produced.
The flow wrapper around it then performs the transfer. This is how the workers of a
supervisor always report back (see :mod:`agentkit.prebuilt.supervisor`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import attrs

from agentkit._persist import persisted
from agentkit.agents.flow import FlowAgent
from agentkit.errors import AgentCancelledError, AgentConfigError, ResumeError
from agentkit.events import (
    Agent,
    AgentAction,
    AgentEvent,
    AgentInput,
    InterruptInfo,
    ResumeInfo,
    RunStep,
    event_from_message,
    gen_transfer_messages,
    new_transfer_to_agent_action,
)
from agentkit.interrupt import SignalNode, composite_signal
from agentkit.options import AgentRunOption
from agentkit.runctx import EventLog, RecordedEvent, current_frame, use_frame
from agentkit.schema import Role
from agentkit.worker import EventSink, drive, run_in_worker

if TYPE_CHECKING:
    from agentkit.iterators import AsyncIterator

__all__ = ["DeterministicTransferState", "agent_with_deterministic_transfer_to"]

_INTERRUPT_INFO = "deterministic transfer wrapper interrupted"
_CANCEL_INFO = "deterministic transfer wrapper cancelled"


def agent_with_deterministic_transfer_to(agent: Agent, to_agent_names: Sequence[str]) -> Agent:
    """Return ``agent`` made to transfer to ``to_agent_names`` whenever its turn ends.

    When the wrapped agent's last event carries neither an interrupt, an Exit nor a
    transfer of its own, the wrapper emits, for each name in order, the pair of messages of
    :func:`~agentkit.gen_transfer_messages`: an assistant event calling ``transfer_to_agent``
    and a ``transfer_to_agent`` tool event carrying a
    :class:`~agentkit.TransferToAgentAction`. The flow wrapper around it (from
    :func:`~agentkit.set_sub_agents`) then transfers to the last one; the destination must
    be the agent's parent or one of its sub-agents. A run cancelled inside the agent does
    not transfer; a run that failed with an error does (the destination can react).

    An interrupt inside the agent passes through and the wrapper resumes with it. Name and
    description are the agent's; :class:`~agentkit.OnSubAgents` hooks are forwarded to it,
    so :func:`~agentkit.set_sub_agents` works on the wrapper as on the agent.

    When ``agent`` is itself a flow (the result of ``set_sub_agents``), the flow runs with a
    history of its own: its agents see the run's input and what happened inside the flow,
    not what happened before; everything recorded inside is added to the enclosing
    history too, so the agents transferred to afterwards see it. If it is interrupted, the
    wrapper interrupts with the info ``"deterministic transfer wrapper interrupted"`` and
    keeps that history in its interrupt state (likewise in the checkpoint taken when the run
    is cancelled inside the flow), so the resumed flow sees it again.

    Example::

        worker = agent_with_deterministic_transfer_to(researcher, ["Supervisor"])
        flow = set_sub_agents(supervisor, [worker])

    Raises:
        AgentConfigError: ``to_agent_names`` is a single string, or holds an empty name or a
            non-string.
    """
    if isinstance(to_agent_names, str):
        raise AgentConfigError(
            f"to_agent_names takes agent names, not one string (got {to_agent_names!r}); "
            f"write [{to_agent_names!r}]"
        )
    names = list(to_agent_names)
    for name in names:
        if not isinstance(name, str) or not name:
            raise AgentConfigError(f"to_agent_names holds an invalid agent name: {name!r}")
    for attribute in ("name", "description", "run"):
        if not hasattr(agent, attribute):
            raise TypeError(
                f"{agent!r} is not an agent: it needs name, description and run() "
                "(see agentkit.Agent)"
            )
    return DeterministicTransferAgent(agent, names)


@persisted("agentkit.DeterministicTransferState")
@attrs.define
class DeterministicTransferState:
    """The interrupt state of a deterministic-transfer wrapper around a flow.

    ``history`` is the flow's own history when it was interrupted; resume restores it.
    """

    history: list[RecordedEvent]


class DeterministicTransferAgent:
    """The agent :func:`agent_with_deterministic_transfer_to` returns (see there)."""

    _agentkit_push = True

    def __init__(self, agent: Agent, to_agent_names: Sequence[str]) -> None:
        self._agent = agent
        self._to_agent_names = tuple(to_agent_names)
        # Read by FlowAgent: a hosted flow names and records its own events.
        self._agentkit_hosts_flow = isinstance(agent, FlowAgent)

    @property
    def name(self) -> str:
        """The wrapped agent's name."""
        return str(self._agent.name)

    @property
    def description(self) -> str:
        """The wrapped agent's description."""
        return str(self._agent.description)

    @property
    def agent(self) -> Agent:
        """The wrapped agent."""
        return self._agent

    @property
    def to_agent_names(self) -> tuple[str, ...]:
        """The agents transferred to, in order (the flow acts on the last one)."""
        return self._to_agent_names

    def get_type(self) -> str:
        """The wrapped agent's type, or ``"DeterministicTransfer"``."""
        get_type = getattr(self._agent, "get_type", None)
        kind = get_type() if callable(get_type) else ""
        return str(kind) if kind else "DeterministicTransfer"

    def __repr__(self) -> str:
        return (
            f"DeterministicTransferAgent({self._agent!r}, "
            f"to_agent_names={list(self._to_agent_names)!r})"
        )

    # --- OnSubAgents, forwarded ---

    def on_set_sub_agents(self, sub_agents: Sequence[Agent]) -> None:
        """Forward to the wrapped agent (if it has the hook)."""
        hook = getattr(self._agent, "on_set_sub_agents", None)
        if callable(hook):
            hook(sub_agents)

    def on_set_as_sub_agent(self, parent: Agent) -> None:
        """Forward to the wrapped agent (if it has the hook)."""
        hook = getattr(self._agent, "on_set_as_sub_agent", None)
        if callable(hook):
            hook(parent)

    def on_disallow_transfer_to_parent(self) -> None:
        """Forward to the wrapped agent (if it has the hook)."""
        hook = getattr(self._agent, "on_disallow_transfer_to_parent", None)
        if callable(hook):
            hook()

    # --- running ---

    def run(self, input: AgentInput, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
        """Run the agent, then emit the transfers; returns the event iterator at once."""
        return run_in_worker(lambda sink: self._run_into(input, sink, options))

    def resume(self, info: ResumeInfo, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
        """Resume the agent, then emit the transfers; returns the event iterator at once."""
        return run_in_worker(lambda sink: self._resume_into(info, sink, options))

    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        if isinstance(self._agent, FlowAgent):
            self._run_flow(self._agent, sink, options, None)
            return
        watcher = _LastEventSink(sink)
        drive(self._agent, input, watcher, options)
        self._transfer(watcher, sink)

    def _resume_into(
        self, info: ResumeInfo, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        if isinstance(self._agent, FlowAgent):
            self._run_flow(self._agent, sink, options, info)
            return
        watcher = _LastEventSink(sink)
        drive(self._agent, None, watcher, options, resume=info)
        self._transfer(watcher, sink)

    def _run_flow(
        self,
        flow: FlowAgent,
        sink: EventSink,
        options: tuple[AgentRunOption, ...],
        resume: ResumeInfo | None,
    ) -> None:
        frame = current_frame()
        if frame is None:
            raise RuntimeError("agents run inside a run context; call run(), not _run_into()")
        history = _MirroredLog(frame.log)
        if resume is not None:
            state = resume.interrupt_state
            if not isinstance(state, DeterministicTransferState):
                raise ResumeError(
                    "invalid interrupt state for flowAgent resume in deterministic transfer"
                )
            # The enclosing history was restored with the copies already: no mirroring.
            history.restore(list(state.history))
        # The flow adds its own step; the enclosing wrapper already added the same one, so
        # it is dropped here to keep run paths from doubling ([Sup, W], not [Sup, W, W]).
        # The address keeps both, so this wrapper's interrupt state has a place of its own.
        run_path = frame.run_path
        if run_path and run_path[-1] == RunStep(flow.name):
            run_path = run_path[:-1]
        inner = attrs.evolve(frame, log=history, run_path=run_path)

        def keep_history(node: SignalNode) -> SignalNode:
            # A cancel inside the flow: save the flow's history with it, as for an
            # interrupt, so that resuming a checkpoint taken on cancel finds it again.
            state = DeterministicTransferState(history=[_checkpointable(r) for r in history.own()])
            return composite_signal(_CANCEL_INFO, state, [node], address=frame.address)

        watcher = _LastEventSink(sink, hold_interrupts=True, on_cancel=keep_history)
        with use_frame(inner):
            if resume is None:
                flow._run_into(None, watcher, options)
            else:
                flow._resume_into(resume, watcher, options)
        held = watcher.interrupt
        if held is None:
            self._transfer(watcher, sink)
            return
        action = held.action
        assert action is not None and action.interrupted is not None
        state = DeterministicTransferState(history=[_checkpointable(r) for r in history.own()])
        node = composite_signal(_INTERRUPT_INFO, state, [action._signal], address=frame.address)
        sink.send(
            AgentEvent(
                output=held.output,
                action=AgentAction(
                    interrupted=InterruptInfo(
                        data=action.interrupted.data, contexts=node.contexts()
                    ),
                    _signal=node,
                ),
            )
        )

    def _transfer(self, watcher: _LastEventSink, sink: EventSink) -> None:
        """Emit the transfer pairs unless the agent's last event says otherwise."""
        if not watcher.open:
            return
        last = watcher.last
        if last is not None:
            if isinstance(last.err, AgentCancelledError):
                return
            action = last.action
            if action is not None and (
                action.interrupted is not None
                or action.exit
                # The agent transferred by itself (it has sub-agents): let that transfer win.
                or action.transfer_to_agent is not None
            ):
                return
        for name in self._to_agent_names:
            call, result = gen_transfer_messages(name)
            if not sink.send(event_from_message(call, None, Role.ASSISTANT)):
                return
            event = event_from_message(result, None, Role.TOOL, result.tool_name)
            event.action = new_transfer_to_agent_action(name)
            if not sink.send(event):
                return


class _LastEventSink:
    """Forwards events, remembering the last one.

    If asked, it holds back an interrupt (to be re-sent wrapped) and wraps the resume point
    a cancel error carries (``on_cancel``) before the Runner saves it.
    """

    __slots__ = ("downstream", "hold_interrupts", "interrupt", "last", "on_cancel", "open")

    def __init__(
        self,
        downstream: EventSink,
        hold_interrupts: bool = False,
        on_cancel: Callable[[SignalNode], SignalNode] | None = None,
    ) -> None:
        self.downstream = downstream
        self.hold_interrupts = hold_interrupts
        self.on_cancel = on_cancel
        self.interrupt: AgentEvent | None = None
        self.last: AgentEvent | None = None
        self.open = True

    def send(self, item: AgentEvent) -> bool:
        self.last = item
        error = item.err
        if self.on_cancel is not None and isinstance(error, AgentCancelledError):
            node = getattr(error, "_signal", None)
            if isinstance(node, SignalNode):
                error._signal = self.on_cancel(node)  # type: ignore[attr-defined]
        action = item.action
        if (
            self.hold_interrupts
            and action is not None
            and action.interrupted is not None
            and action._signal is not None
        ):
            # Re-sent wrapped in this wrapper's own interrupt, which carries the history.
            self.interrupt = item
            return True
        if not self.downstream.send(item):
            self.open = False
        return self.open


class _MirroredLog(EventLog):
    """A flow's own history; what it records is added to the enclosing history as well."""

    __slots__ = ("_mirror",)

    def __init__(self, mirror: EventLog) -> None:
        super().__init__()
        self._mirror = mirror

    def append(self, entry: RecordedEvent) -> None:
        super().append(entry)
        self._mirror.append(_copy_record(entry))

    def commit(self, lanes: list[EventLog]) -> None:
        before = len(self.own())
        super().commit(lanes)
        for entry in self.own()[before:]:
            self._mirror.append(_copy_record(entry))


def _copy_record(entry: RecordedEvent) -> RecordedEvent:
    # Each history reads its own copy of a streamed message.
    variant = entry.variant.copy() if entry.variant is not None else None
    return attrs.evolve(entry, variant=variant)


def _checkpointable(entry: RecordedEvent) -> RecordedEvent:
    """A copy of ``entry`` that a checkpoint can hold: stream read, error as plain text."""
    return entry.checkpointable()
