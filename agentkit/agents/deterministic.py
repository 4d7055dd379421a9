"""Deterministic transfer: after an agent finishes, hand the conversation on to fixed agents.

:func:`agent_with_deterministic_transfer_to` wraps an agent so that, once its turn ends
normally, it emits the transfer messages a ``transfer_to_agent`` call would have produced.
The flow wrapper around it then performs the transfer. This is how the workers of a
supervisor always report back (see :mod:`agentkit.prebuilt.supervisor`).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from agentkit._options import AgentRunOption
from agentkit._persist import persisted
from agentkit._runctx import EventLog, RecordedEvent, current_frame, use_frame
from agentkit._worker import BuiltinAgent, EventSink, drive
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
from agentkit.schema import Role

__all__ = [
    "DeterministicTransferState",
    "agent_with_deterministic_transfer_to",
    "DeterministicTransferAgent",
]



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


class DeterministicTransferAgent(BuiltinAgent):
    """The agent :func:`agent_with_deterministic_transfer_to` returns (see there)."""

    def __init__(self, agent: Agent, to_agent_names: Sequence[str]) -> None:
        self._agent = agent
        self._to_agent_names = tuple(to_agent_names)

    @property
    def hosts_flow(self) -> bool:
        """``True`` around a flow: the hosted flow names and records its own events."""
        return isinstance(self._agent, FlowAgent)

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
        watcher = _LastEventSink(sink, hold_interrupts=True)
        with use_frame(inner):
            if resume is None:
                flow._run_into(None, watcher, options)
            else:
                flow._resume_into(resume, watcher, options)
        held = watcher.interrupt
        if held is None and not watcher.cancelled:
            self._transfer(watcher, sink)
            return
        # Interrupted or cancelled inside the flow: keep the flow's own history, so that the
        # resumed flow sees it again.
        state = DeterministicTransferState(history=[_checkpointable(r) for r in history.own()])
        info = "deterministic transfer wrapper interrupted" if held is not None else None
        frame.journal.record(frame.address, state, info)
        if held is None:
            return
        action = held.action
        assert action is not None and action.interrupted is not None
        sink.send(
            AgentEvent(
                output=held.output,
                action=AgentAction(interrupted=InterruptInfo(data=action.interrupted.data)),
            )
        )

    def _transfer(self, watcher: _LastEventSink, sink: EventSink) -> None:
        """Emit the transfer pairs unless the agent's last event says otherwise."""
        if not watcher.open or watcher.cancelled:
            return
        last = watcher.last
        if last is not None:
            action = last.action
            if action is not None and (
                action.interrupted is not None
                or action.exit
                # The agent transferred by itself (it has sub-agents): let that transfer win.
                or action.transfer_to_agent is not None
            ):
                return
        frame = current_frame()
        if frame is not None and watcher.stopped:
            # The agent failed; its turn passes on all the same, so its failure is handled.
            frame.journal.discard_under(frame.address)
        for name in self._to_agent_names:
            call, result = gen_transfer_messages(name)
            if not sink.send(event_from_message(call, None, Role.ASSISTANT)):
                return
            event = event_from_message(result, None, Role.TOOL, result.tool_name)
            event.action = new_transfer_to_agent_action(name)
            if not sink.send(event):
                return


class _LastEventSink:
    """Forwards events, remembering the last one and whether an error stopped the agent.

    If asked, it holds back an interrupt (to be re-sent as this wrapper's own).
    """

    __slots__ = (
        "cancelled", "downstream", "hold_interrupts", "interrupt", "last", "open", "stopped"
    )

    def __init__(self, downstream: EventSink, hold_interrupts: bool = False) -> None:
        self.downstream = downstream
        self.hold_interrupts = hold_interrupts
        self.interrupt: AgentEvent | None = None
        self.last: AgentEvent | None = None
        self.open = True
        self.stopped = False  # an error event came
        self.cancelled = False  # ... and it was a cancel

    def send(self, item: AgentEvent) -> bool:
        self.last = item
        if item.err is not None:
            self.stopped = True
            self.cancelled = isinstance(item.err, AgentCancelledError)
        if self.hold_interrupts and item.interrupted:
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
