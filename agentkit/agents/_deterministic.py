"""Deterministic transfer: after an agent finishes, hand the conversation on to fixed agents.

The definitions behind :mod:`agentkit.agents.deterministic`, whose docstring documents them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from agentkit._agent import (
    AgentRun,
    EventSink,
    Turn,
    at_frame,
    frame_of,
    open_run,
    run_agent,
    sink_of,
    turn_of,
)
from agentkit._events import (
    Agent,
    AgentAction,
    AgentEvent,
    AgentInput,
    InterruptInfo,
    ResumeInfo,
    RunStep,
    _message_event,
    event_from_message,
    gen_transfer_messages,
    new_transfer_to_agent_action,
)
from agentkit._lazy import present
from agentkit._persist import persisted
from agentkit._runctx import EventLog, RecordedEvent, RunFrame
from agentkit.agents._flow import FlowAgent
from agentkit.errors import AgentCancelledError, AgentConfigError, ResumeError
from agentkit.schema import Role

__all__ = [
    "DeterministicTransferAgent",
    "DeterministicTransferState",
    "agent_with_deterministic_transfer_to",
]


def agent_with_deterministic_transfer_to(agent: Agent, to_agent_names: Sequence[str]) -> Agent:
    """Return ``agent`` made to transfer to ``to_agent_names`` whenever its turn ends.

    When the wrapped agent's last event carries neither an interrupt, an Exit nor a
    transfer of its own, the wrapper emits, for each name in order, the pair of messages of
    :func:`~agentkit.gen_transfer_messages`: an assistant event calling ``transfer_to_agent``
    and a ``transfer_to_agent`` tool event carrying a
    :class:`~agentkit.TransferToAgentAction`. The flow then transfers to the last one; the
    destination must be the agent's parent or one of its sub-agents. A run cancelled inside
    the agent does not transfer; a run that failed with an error does (the destination can
    react).

    An interrupt inside the agent passes through and the wrapper resumes with it. Name and
    description are the agent's; :class:`~agentkit.OnSubAgents` hooks reach the agent, so
    :func:`~agentkit.set_sub_agents` works on the wrapper as on the agent.

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
    return DeterministicTransferAgent(agent, _checked_names(to_agent_names))


def _checked_names(to_agent_names: Sequence[str]) -> tuple[str, ...]:
    if isinstance(to_agent_names, str):
        raise AgentConfigError(
            f"to_agent_names takes agent names, not one string (got {to_agent_names!r}); "
            f"write [{to_agent_names!r}]"
        )
    names = tuple(to_agent_names)
    for name in names:
        if not isinstance(name, str) or not name:
            raise AgentConfigError(f"to_agent_names holds an invalid agent name: {name!r}")
    return names


@persisted("agentkit.DeterministicTransferState")
@attrs.define
class DeterministicTransferState:
    """The interrupt state of a deterministic-transfer wrapper around a flow.

    ``history`` is the flow's own history when it was interrupted; resume restores it.
    """

    history: list[RecordedEvent]


class DeterministicTransferAgent(FlowAgent):
    """The agent :func:`agent_with_deterministic_transfer_to` returns (see there).

    A flow node whose agent's turn ends with a transfer to fixed agents. Its agent may be a
    whole flow: that flow then runs as a flow of its own (with its own history and its own
    agents' turns), and the transfer follows its end.
    """

    def __init__(self, agent: Agent, to_agent_names: Sequence[str]) -> None:
        super().__init__(agent)
        self._to_agent_names = tuple(to_agent_names)

    _REPLACEABLE = (
        "sub_agents",
        "disallow_transfer_to_parent",
        "history_rewriter",
        "to_agent_names",
    )

    def _replaced(self, changes: dict[str, Any]) -> None:
        if "to_agent_names" in changes:
            self._to_agent_names = _checked_names(changes["to_agent_names"])

    @property
    def to_agent_names(self) -> tuple[str, ...]:
        """The agents transferred to, in order (the flow acts on the last one)."""
        return self._to_agent_names

    def get_type(self) -> str:
        """The wrapped agent's type, or ``"DeterministicTransfer"``."""
        kind = super().get_type()
        return "DeterministicTransfer" if kind == type(self._agent).__name__ else kind

    def __repr__(self) -> str:
        return (
            f"DeterministicTransferAgent({self._agent!r}, "
            f"to_agent_names={list(self._to_agent_names)!r})"
        )

    # --- running ---

    def _agent_turn(
        self,
        frame: RunFrame,
        downstream: EventSink,
        input: AgentInput,
        resume_info: ResumeInfo | None,
        named: bool,
    ) -> Turn:
        agent = self._agent
        if isinstance(agent, FlowAgent):
            # The hosted flow's own turns report its agents (this one included).
            run = open_run(frame, downstream, input, resume_info, named=named)
            try:
                self._run_flow(agent, run)
            except Exception as error:
                run.emit(AgentEvent(err=error))
            return turn_of(run)
        return super()._agent_turn(frame, downstream, input, resume_info, named)

    def _play(self, run: AgentRun) -> Turn:
        turn = super()._play(run)
        error = turn.error
        self._transfer(run, turn.last, error is not None, isinstance(error, AgentCancelledError))
        return turn

    def _run_flow(self, flow: FlowAgent, run: AgentRun) -> None:
        """Run the hosted ``flow`` in a history of its own, then transfer (or stop)."""
        frame = frame_of(run)
        history = _MirroredLog(frame.log)
        info = run.resume_info
        if info is not None:
            state = info.interrupt_state
            if not isinstance(state, DeterministicTransferState):
                raise ResumeError(
                    f"cannot resume agent {self.name!r}: it runs a flow of its own, whose "
                    "saved history is missing (its interrupt state is "
                    f"{type(state).__name__}, not a DeterministicTransferState); resume "
                    "with the checkpoint the run saved"
                )
            # The enclosing history was restored with the copies already: no mirroring.
            history.restore(list(state.history))
        # The flow adds its own step; this node's place has the same one, so it is dropped to
        # keep run paths from doubling ([Sup, W], not [Sup, W, W]). The address keeps both, so
        # this node's interrupt state has a place of its own.
        run_path = frame.run_path
        if run_path and run_path[-1] == RunStep(flow.name):
            run_path = run_path[:-1]
        inner = attrs.evolve(frame, log=history, run_path=run_path).at_agent(RunStep(flow.name))
        watcher = _Watcher(sink_of(run), hold_interrupts=True)
        hosting = at_frame(run, attrs.evolve(frame, log=history))
        with hosting.keep_history("history"):
            if run.durable:
                # The hosted flow's own history is this node's point, written as the flow saves.
                own = [record.checkpointable() for record in history.own()]
                hosting.save_state(DeterministicTransferState(history=own), flush=False)
            run_agent(flow, inner, watcher, AgentInput(enable_streaming=run.streaming), info,
                      named=bool(run.run_path))
        held = watcher.interrupt
        if held is None and not watcher.cancelled:
            self._transfer(run, watcher.last, watcher.stopped, False)
            return
        # Interrupted or cancelled inside the flow: keep the flow's own history, so that the
        # resumed flow sees it again.
        state = DeterministicTransferState(history=[r.checkpointable() for r in history.own()])
        shown = "deterministic transfer wrapper interrupted" if held is not None else None
        run.save_state(state, info=shown, flush=False)
        if held is None:
            return
        action = held.action
        assert action is not None and action.interrupted is not None
        run.emit(
            AgentEvent(
                output=held.output,
                action=AgentAction(interrupted=InterruptInfo(data=action.interrupted.data)),
            )
        )

    def _transfer(
        self, run: AgentRun, last: AgentEvent | None, failed: bool, cancelled: bool
    ) -> None:
        """Emit the transfer pairs unless the agent's last event says otherwise."""
        if cancelled:
            return
        if last is not None:
            action = last.action
            if action is not None and (
                action.interrupted is not None
                or action.exit
                # The agent transferred by itself (it has sub-agents): let that transfer win.
                or action.transfer_to_agent is not None
            ):
                return
        if failed:
            # The agent failed; its turn passes on all the same, so its failure is handled.
            run.discard_state()
        for name in self._to_agent_names:
            call, result = gen_transfer_messages(name)
            run.emit(event_from_message(call, None, Role.ASSISTANT))
            run.emit(_message_event(result, None, Role.TOOL, result.tool_name,
                                    new_transfer_to_agent_action(name)))


class _Watcher:
    """Passes a turn's events on, noting the last one and whether an error stopped it.

    If asked, it holds back an interrupt (to be sent again as the wrapper's own).
    """

    __slots__ = ("cancelled", "downstream", "hold_interrupts", "interrupt", "last", "stopped")

    def __init__(self, downstream: EventSink, hold_interrupts: bool = False) -> None:
        self.downstream = downstream
        self.hold_interrupts = hold_interrupts
        self.interrupt: AgentEvent | None = None
        self.last: AgentEvent | None = None
        self.stopped = False  # an error event came
        self.cancelled = False  # ... and it was a cancel

    def send(self, item: AgentEvent) -> None:
        self.last = item
        if item.err is not None:
            self.stopped = True
            self.cancelled = isinstance(item.err, AgentCancelledError)
        if self.hold_interrupts and item.interrupted:
            # Sent again wrapped in the wrapper's own interrupt, which carries the history.
            self.interrupt = item
            return
        self.downstream.send(item)


class _MirroredLog(EventLog):
    """A flow's own history; what it records is added to the enclosing history as well."""

    __slots__ = ("_mirror",)

    def __init__(self, mirror: EventLog) -> None:
        super().__init__()
        self._mirror = mirror

    def append(self, entry: RecordedEvent) -> None:
        super().append(entry)
        self._mirror.append(entry)

    def commit(self, lanes: list[EventLog]) -> None:
        before = len(self.own())
        super().commit(lanes)
        for entry in self.own()[before:]:
            self._mirror.append(entry)

    def chain(self) -> tuple[EventLog, ...]:
        """This history and the enclosing ones its entries are mirrored into."""
        return (self, *self._mirror.chain())

present(
    (
        agent_with_deterministic_transfer_to,
    ),
    "agentkit",
)

present(
    (
        DeterministicTransferAgent,
        DeterministicTransferState,
    ),
    "agentkit.agents.deterministic",
)
