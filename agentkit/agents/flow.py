"""The flow wrapper: run paths, history, and transfer between agents.

Every agent a :class:`~agentkit.Runner` runs goes through a :class:`FlowAgent`. It adds one
behaviour: the agent takes part in a multi-agent flow. It names the agent's events, records
them in the run's history, builds the agent's input from the history, and performs the
transfer the agent's last event asks for.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import attrs

from agentkit._lazy import present
from agentkit._observe import RunObservers, observe_agent
from agentkit._options import (
    AgentRunOption,
    RunOptions,
    filter_options,
    get_impl_specific_options,
)
from agentkit._persist import persisted
from agentkit._runctx import RunFrame, Session, current_frame, use_frame
from agentkit._worker import BuiltinAgent, EventSink, drive
from agentkit.agents._flow_sink import FlowSink
from agentkit.agents._history import (
    HistoryEntry,
    HistoryRewriter,
    default_history_rewriter,
    rewrite_message,
)
from agentkit.errors import (
    AgentCancelledError,
    AgentConfigError,
    ResumeError,
    TransferError,
    WillRetryError,
)
from agentkit.events import (
    Agent,
    AgentAction,
    AgentEvent,
    AgentInput,
    ResumeInfo,
    RunStep,
    new_transfer_to_agent_action,
)
from agentkit.schema import Role

_log = logging.getLogger("agentkit")

__all__ = [
    "FlowAgent",
    "HistoryEntry",
    "HistoryRewriter",
    "agent_with_options",
    "default_history_rewriter",
    "rewrite_message",
    "set_sub_agents",
]

# Defined in a private module, documented here.
present((default_history_rewriter, rewrite_message), __name__)


@persisted("agentkit.PendingTransfer")
@attrs.define
class _PendingTransfer:
    """Where a flow stopped when its run was cancelled between two agents (checkpoint state)."""

    dest_agent_name: str


class FlowAgent(BuiltinAgent):
    """An agent taking part in a multi-agent flow (see :func:`set_sub_agents`).

    You rarely make one yourself: :func:`set_sub_agents`, :func:`agent_with_options`, the
    workflow agents and the Runner wrap agents for you.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        disallow_transfer_to_parent: bool = False,
        history_rewriter: HistoryRewriter | None = None,
    ) -> None:
        if isinstance(agent, FlowAgent):
            raise TypeError("wrap the inner agent, not a FlowAgent")
        for attribute in ("name", "description", "run"):
            if not hasattr(agent, attribute):
                raise TypeError(
                    f"{agent!r} is not an agent: it needs name, description and run() "
                    "(see agentkit.Agent)"
                )
        self.agent = agent
        self.sub_agents: list[FlowAgent] = []
        self.parent: FlowAgent | None = None
        self.disallow_transfer_to_parent = disallow_transfer_to_parent
        self.history_rewriter = history_rewriter
        self.agent_type: str | None = None  # what callbacks report as the agent's type

    @property
    def name(self) -> str:
        """The wrapped agent's name."""
        return str(self.agent.name)

    @property
    def description(self) -> str:
        """The wrapped agent's description."""
        return str(self.agent.description)

    def get_type(self) -> str:
        """The agent's type as callbacks report it (see :class:`~agentkit.callbacks.RunInfo`).

        ``agent_type`` when set (the supervisor sets ``"Supervisor"``), else the wrapped
        agent's ``get_type()``, else its class name.
        """
        if self.agent_type is not None:
            return self.agent_type
        get_type = getattr(self.agent, "get_type", None)
        kind = get_type() if callable(get_type) else ""
        return str(kind) if kind else type(self.agent).__name__

    def __repr__(self) -> str:
        subs = ", ".join(sub.name for sub in self.sub_agents)
        return f"FlowAgent({self.agent!r}, sub_agents=[{subs}])"

    # --- running ---

    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        frame = _flow_frame(input, options)
        hop: tuple[FlowAgent, RunFrame] | None = (self, frame)
        while hop is not None:
            agent, at = hop
            with use_frame(at):
                hop = agent._run_once(sink, options)

    def _resume_into(
        self, info: ResumeInfo, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        frame = _flow_frame(None, options)
        with use_frame(frame):
            hop = self._resume_once(info, sink, options)
        while hop is not None:
            agent, at = hop
            with use_frame(at):
                hop = agent._run_once(sink, options)

    def _enter(self) -> RunFrame:
        return _current().at_agent(RunStep(self.name))

    def _run_once(
        self, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> tuple[FlowAgent, RunFrame] | None:
        frame = self._enter()
        with use_frame(frame):
            try:
                agent_input = self._build_input(frame, options)
            except Exception as error:
                sink.send(self._error(frame, error))
                return None
            if _passes_through(self.agent):
                # Workflows pass their children's events through; the children named and
                # recorded them. Only the workflow's own (unnamed) errors are named here.
                own = FlowSink(sink, self.name, frame.run_path, frame.log, unnamed_only=True)
                with _observed(self, frame, agent_input, own):
                    drive(self.agent, agent_input, own, options)
                return None
            hosts = _hosts_flow(self.agent)
            flow_sink = FlowSink(sink, self.name, frame.run_path, frame.log, unnamed_only=hosts)
            # A hosted flow starts agents of its own: like transfer targets, they get the
            # unfiltered options so options designated to them reach them.
            agent_options = options if hosts or not options else filter_options(options, self.name)
            # A hosted flow's wrappers report its agents; reporting here too would report
            # the same agent twice.
            with _observed(None if hosts else self, frame, agent_input, flow_sink):
                drive(self.agent, agent_input, flow_sink, agent_options)
        return self._after(flow_sink.last_action, frame, sink)

    def _resume_once(
        self, info: ResumeInfo, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> tuple[FlowAgent, RunFrame] | None:
        frame = self._enter()
        resume_state = frame.resume
        if resume_state is None:
            raise ResumeError(f"agent {self.name!r} was asked to resume outside a resumed run")
        point = resume_state.at(frame.address)
        with use_frame(frame):
            if point.was_interrupted:
                if isinstance(point.state, _PendingTransfer):
                    # Cancelled at a transfer (see _after): make the transfer now.
                    action = new_transfer_to_agent_action(point.state.dest_agent_name)
                    return self._after(action, frame, sink)
                if not _resumable(self.agent):
                    sink.send(
                        self._error(
                            frame,
                            ResumeError(
                                f"failed to resume agent: agent '{self.name}' is an interrupt "
                                "point but is not a ResumableAgent (it has no resume() method)"
                            ),
                        )
                    )
                    return None
                own_info = ResumeInfo(
                    enable_streaming=info.enable_streaming,
                    interrupt_info=info.interrupt_info,
                    was_interrupted=point.was_interrupted,
                    interrupt_state=point.state,
                    is_resume_target=point.is_resume_target,
                    resume_data=point.data,
                )
                resumed_input = AgentInput(enable_streaming=info.enable_streaming)
                if _passes_through(self.agent):
                    own = FlowSink(sink, self.name, frame.run_path, frame.log, unnamed_only=True)
                    with _observed(self, frame, resumed_input, own):
                        drive(self.agent, None, own, options, resume=own_info)
                    return None
                hosts = _hosts_flow(self.agent)
                flow_sink = FlowSink(
                    sink, self.name, frame.run_path, frame.log, unnamed_only=hosts
                )
                agent_options = options if hosts else filter_options(options, self.name)
                with _observed(None if hosts else self, frame, resumed_input, flow_sink):
                    drive(self.agent, None, flow_sink, agent_options, own_info)
                return self._after(flow_sink.last_action, frame, sink)
            hops = resume_state.next_hops(frame.address)
            if not hops:
                saved = sorted(";".join(address) for address in resume_state.addresses())
                sink.send(
                    self._error(
                        frame,
                        ResumeError(
                            "failed to get next agent leading to interruption: no child agents "
                            f"leading to interrupted agent were found: agent '{self.name}' "
                            f"(at {';'.join(frame.address)}) has none of the checkpoint's "
                            f"stopped agents below it ({', '.join(saved)}); resume with the "
                            "agent tree that made the checkpoint"
                        ),
                    )
                )
                return None
            if len(hops) > 1:
                sink.send(
                    self._error(
                        frame,
                        ResumeError(
                            f"agent '{self.name}' has multiple child agents leading to "
                            f"interruption ({', '.join(hops)}), but concurrent transfer is not "
                            "supported"
                        ),
                    )
                )
                return None
            kind, _, name = hops[0].partition(":")
            dest = self._find(name) if kind == "agent" else None
            if dest is None:
                if not self.sub_agents and _resumable(self.agent):
                    drive(self.agent, None, sink, options, resume=info)
                    return None
                known = ", ".join(repr(sub.name) for sub in self.sub_agents) or "none"
                sink.send(
                    self._error(
                        frame,
                        ResumeError(
                            f"failed to resume agent: sub-agent '{name}' not found in agent "
                            f"'{self.name}' (its sub-agents: {known}); the checkpoint was made "
                            "by another agent tree"
                        ),
                    )
                )
                return None
            nxt = dest._resume_once(info, sink, options)
        return nxt

    def _after(
        self, action: AgentAction | None, frame: RunFrame, sink: EventSink
    ) -> tuple[FlowAgent, RunFrame] | None:
        if action is None or action.interrupted is not None or action.exit:
            return None
        if action.transfer_to_agent is None:
            return None
        dest_name = action.transfer_to_agent.dest_agent_name
        dest = self._find(dest_name)
        if dest is None:
            sink.send(
                self._error(
                    frame,
                    TransferError(
                        f"transfer failed: agent '{dest_name}' not found when transferring "
                        f"from '{self.name}'"
                    ),
                )
            )
            return None
        try:
            frame.scope.check()
        except AgentCancelledError as error:
            # Cancelled between two agents: the resumed run makes the transfer.
            frame.journal.record(frame.address, _PendingTransfer(dest_name))
            sink.send(self._error(frame, error))
            return None
        _log.info("agentkit: agent %r transfers to agent %r", self.name, dest_name)
        return dest, frame

    def _error(self, frame: RunFrame, error: BaseException) -> AgentEvent:
        """An error event on behalf of this agent (its name and run path filled in)."""
        return AgentEvent(agent_name=self.name, run_path=list(frame.run_path), err=error)

    def _find(self, name: str) -> FlowAgent | None:
        for sub in self.sub_agents:
            if sub.name == name:
                return sub
        if self.parent is not None and self.parent.name == name:
            return self.parent
        return None

    def _build_input(
        self, frame: RunFrame, options: tuple[AgentRunOption, ...]
    ) -> AgentInput:
        root = frame.root_input
        entries = [
            HistoryEntry(is_user_input=True, agent_name="", message=message)
            for message in (root.messages if root is not None else ())
        ]
        skip_transfers = (
            bool(options)
            and get_impl_specific_options(RunOptions(), *options).skip_transfer_messages
        )
        for record in frame.log.visible():
            if skip_transfers and record.is_transfer:
                if record.variant is not None and record.variant.role is Role.TOOL and entries:
                    entries.pop()
                continue
            try:
                message = record.message()
            except WillRetryError:
                continue  # a streamed attempt of a model call that was made again
            if message is None:
                continue
            entries.append(HistoryEntry(False, record.agent_name, message))
        rewriter = self.history_rewriter or default_history_rewriter(self.name)
        return AgentInput(
            messages=list(rewriter(entries)),
            enable_streaming=root.enable_streaming if root is not None else False,
        )


def _current() -> RunFrame:
    frame = current_frame()
    if frame is None:
        raise RuntimeError("a FlowAgent runs inside a run context; call run(), not _run_into()")
    return frame


def _flow_frame(input: AgentInput | None, options: tuple[AgentRunOption, ...]) -> RunFrame:
    """The current frame, given a session, observers and root input if this is a bare flow run."""
    frame = _current()
    changes: dict[str, Any] = {}
    if frame.session is None:
        changes["session"] = Session()
    if frame.observers is None:
        changes["observers"] = RunObservers.from_options(options)
    if frame.root_input is None and not frame.run_path and input is not None:
        changes["root_input"] = input
    return attrs.evolve(frame, **changes) if changes else frame


def _observed(
    wrapper: FlowAgent | None, frame: RunFrame, input: AgentInput, sink: FlowSink
) -> AbstractContextManager[None]:
    """Report the agent's turn to the run's callback handlers (``wrapper=None``: do not)."""
    observers = frame.observers
    if wrapper is None or observers is None or observers.callbacks is None:
        return nullcontext()  # nobody to report to (the common case: no callback handlers)
    return observe_agent(
        frame.observers,
        wrapper.name,
        wrapper.get_type,
        tuple(str(step) for step in frame.run_path),
        input,
        lambda: sink.error,
    )


def _hosts_flow(agent: object) -> bool:
    """See :attr:`BuiltinAgent.hosts_flow`."""
    return isinstance(agent, BuiltinAgent) and agent.hosts_flow


def _passes_through(agent: object) -> bool:
    """See :attr:`BuiltinAgent.passes_events_through`."""
    return isinstance(agent, BuiltinAgent) and agent.passes_events_through


def _resumable(agent: object) -> bool:
    return isinstance(agent, BuiltinAgent) or callable(getattr(agent, "resume", None))


# --- wiring -------------------------------------------------------------------------------------


def _wrap(agent: Agent) -> FlowAgent:
    if isinstance(agent, FlowAgent):
        return _copy_tree(agent)
    return FlowAgent(agent)


def _copy_tree(agent: FlowAgent) -> FlowAgent:
    """Copy ``agent`` with its sub-agents, each copy's parent being the copy above it.

    Copying only the top wrapper would leave its sub-agents pointing at the original as
    their parent: a sub-agent transferring back would run the original, which does not know
    the parent the copy was given (Mom -> Kid -> Mom -> Grandpa failed with "not found").
    """
    wrapper = copy.copy(agent)
    wrapper.sub_agents = []
    for sub in agent.sub_agents:
        sub_copy = _copy_tree(sub)
        sub_copy.parent = wrapper
        wrapper.sub_agents.append(sub_copy)
    return wrapper


def set_sub_agents(agent: Agent, sub_agents: Sequence[Agent]) -> FlowAgent:
    """Make ``sub_agents`` transfer targets of ``agent``; return the agent to run.

    Run the returned agent, not the original. A sub-agent can transfer back to its parent
    unless it was made with ``agent_with_options(..., disallow_transfer_to_parent=True)``.

    Raises:
        AgentConfigError: sub-agents were set already, or a sub-agent already has a parent.
        AgentFrozenError: an agent has run already (agents are configured before they run).
    """
    parent = _wrap(agent)
    if parent.sub_agents:
        raise AgentConfigError("agent's sub-agents has already been set")
    subs = [_wrap(sub) for sub in sub_agents]
    hook = getattr(parent.agent, "on_set_sub_agents", None)
    if callable(hook):
        hook(subs)
    for sub in subs:
        if sub.parent is not None:
            raise AgentConfigError("agent has already been set as a sub-agent of another agent")
        sub.parent = parent
        as_sub = getattr(sub.agent, "on_set_as_sub_agent", None)
        if callable(as_sub):
            as_sub(parent)
        if sub.disallow_transfer_to_parent:
            disallow = getattr(sub.agent, "on_disallow_transfer_to_parent", None)
            if callable(disallow):
                disallow()
    parent.sub_agents = subs
    return parent


def agent_with_options(
    agent: Agent,
    *,
    disallow_transfer_to_parent: bool = False,
    history_rewriter: HistoryRewriter | None = None,
) -> FlowAgent:
    """Return ``agent`` configured for a flow.

    Args:
        disallow_transfer_to_parent: when made a sub-agent, do not offer the parent as a
            transfer target.
        history_rewriter: builds the agent's input from the run's history instead of the
            default (own messages verbatim, other agents' as ``For context:`` user messages).
    """
    wrapper = _wrap(agent)
    if disallow_transfer_to_parent:
        wrapper.disallow_transfer_to_parent = True
    if history_rewriter is not None:
        wrapper.history_rewriter = history_rewriter
    return wrapper
