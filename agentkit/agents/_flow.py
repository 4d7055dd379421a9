"""The flow wrapper: run paths, history, and transfer between agents.

The definitions behind :mod:`agentkit.agents.flow`, whose docstring documents them.
"""

from __future__ import annotations

import copy
import logging
import warnings
import weakref
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from agentkit._agent import (
    AgentRun,
    BaseAgent,
    EventSink,
    Turn,
    execute_agent,
    frame_of,
    open_run,
    parts_of,
)
from agentkit._events import (
    Agent,
    AgentAction,
    AgentEvent,
    AgentInput,
    ResumeInfo,
    RunStep,
    new_transfer_to_agent_action,
)
from agentkit._lazy import present
from agentkit._observe import EventCopy, observe_agent
from agentkit._persist import persisted
from agentkit._runctx import RunFrame, Session
from agentkit.agents._chatmodel import ChatModelAgent
from agentkit.agents._history import (
    HistoryEntry,
    HistoryRewriter,
    default_history_rewriter,
    rewrite_message,
)
from agentkit.errors import (
    AgentCancelledError,
    AgentConfigError,
    AgentKitTypeError,
    ResumeError,
    TransferError,
    WillRetryError,
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

_Hop = tuple["FlowAgent", RunFrame]
"""The next agent of a flow and its place (its frame)."""


@persisted("agentkit.PendingTransfer")
@attrs.define
class _PendingTransfer:
    """A transfer a flow made or was about to make (checkpoint state): what the node declares
    when its agent's turn ends in a transfer (the destination's own points, once it has some,
    say how far it got). It shows in no interrupt's contexts: the transfer only routes a
    resumed run to the destination."""

    shown_in_contexts: ClassVar[bool] = False

    dest_agent_name: str


class FlowAgent(BaseAgent):
    """An agent taking part in a multi-agent flow (see :func:`set_sub_agents`).

    You rarely make one yourself: :func:`set_sub_agents`, :func:`agent_with_options`, the
    workflow agents and the Runner wrap agents for you. A flow is a value: the wiring
    functions return new flows and never change the ones they are given.

    Attributes:
        agent: the wrapped agent.
        sub_agents: the flows of the agents this one may transfer to.
        parent: the flow this one is a sub-agent of (it may transfer back to it, unless
            ``disallow_transfer_to_parent``).
        history_rewriter: builds the agent's input from the run's history (``None``: the
            default, see :func:`default_history_rewriter`).
    """

    def __init__(
        self,
        agent: Agent,
        *,
        disallow_transfer_to_parent: bool = False,
        history_rewriter: HistoryRewriter | None = None,
    ) -> None:
        if isinstance(agent, FlowAgent) and type(self) is FlowAgent:
            raise AgentKitTypeError("wrap the inner agent, not a FlowAgent")
        for attribute in ("name", "description", "run"):
            if not hasattr(agent, attribute):
                raise AgentKitTypeError(
                    f"{agent!r} is not an agent: it needs name, description and run() "
                    "(see agentkit.Agent)"
                )
        self._agent = agent
        self._sub_agents: tuple[FlowAgent, ...] = ()
        self._parent: FlowAgent | None = None
        self._disallow_transfer_to_parent = disallow_transfer_to_parent
        self._history_rewriter = history_rewriter
        self._agent_type: str | None = None  # what callbacks report as the agent's type

    @property
    def agent(self) -> Agent:
        """The wrapped agent."""
        return self._agent

    @property
    def sub_agents(self) -> list[FlowAgent]:
        """The flows of the agents this one may transfer to, in order."""
        return list(self._sub_agents)

    @property
    def parent(self) -> FlowAgent | None:
        """The flow this one is a sub-agent of, if any."""
        return self._parent

    @property
    def disallow_transfer_to_parent(self) -> bool:
        """Whether the parent is left out of this agent's transfer targets."""
        return self._disallow_transfer_to_parent

    @property
    def history_rewriter(self) -> HistoryRewriter | None:
        """The history rewriter of this agent (``None``: the default)."""
        return self._history_rewriter

    @property
    def name(self) -> str:  # type: ignore[override]
        """The wrapped agent's name."""
        return str(self._agent.name)

    @property
    def description(self) -> str:  # type: ignore[override]
        """The wrapped agent's description."""
        return str(self._agent.description)

    def get_type(self) -> str:
        """The agent's type as callbacks report it (see :class:`~agentkit.RunInfo`).

        The type given when the flow was made (a supervisor reports ``"Supervisor"``), else
        the wrapped agent's ``get_type()``, else its class name.
        """
        if self._agent_type is not None:
            return self._agent_type
        get_type = getattr(self._agent, "get_type", None)
        kind = get_type() if callable(get_type) else ""
        return str(kind) if kind else type(self._agent).__name__

    def __repr__(self) -> str:
        subs = ", ".join(sub.name for sub in self._sub_agents)
        return f"FlowAgent({self._agent!r}, sub_agents=[{subs}])"

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):
            from agentkit.errors import AgentFrozenError

            raise AgentFrozenError(
                f"cannot set {name!r} on the flow of agent {self.name!r}: a flow is a value. "
                f"Make a changed copy with flow.replace({name}=...)"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)

    _REPLACEABLE: tuple[str, ...] = (
        "sub_agents",
        "disallow_transfer_to_parent",
        "history_rewriter",
    )

    def replace(self, **changes: Any) -> FlowAgent:
        """Return a copy of this flow with ``changes``; this one is unchanged.

        ``changes`` may set ``sub_agents`` (the copy's sub-agents instead of these),
        ``disallow_transfer_to_parent`` and ``history_rewriter``. The copy is not anyone's
        sub-agent (give it a parent with :func:`set_sub_agents`)::

            with_helper = flow.replace(sub_agents=[*flow.sub_agents, helper])

        Raises:
            TypeError: a key is not one of those.
        """
        unknown = sorted(set(changes) - set(self._REPLACEABLE))
        if unknown:
            raise AgentKitTypeError(
                f"{type(self).__name__}.replace() got unknown argument(s) "
                f"{', '.join(map(repr, unknown))}; it changes: {', '.join(self._REPLACEABLE)}"
            )
        flow = _wrap(self)
        if "disallow_transfer_to_parent" in changes:
            flow._disallow_transfer_to_parent = bool(changes["disallow_transfer_to_parent"])
        if "history_rewriter" in changes:
            flow._history_rewriter = changes["history_rewriter"]
        if "sub_agents" in changes:
            flow._sub_agents = ()
            _wire(flow, changes["sub_agents"], disallow_transfer_to_parent=False)
        flow._replaced(changes)
        return flow

    def _replaced(self, changes: dict[str, Any]) -> None:
        """Apply the ``changes`` of :meth:`replace` a subclass adds (to a fresh copy)."""

    # --- running ---

    def execute(self, run: AgentRun) -> None:
        """Run the flow from this agent: its turn, then the turns it transfers to."""
        frame, downstream, info, named = parts_of(run)
        if frame.root_input is None:
            frame = _flow_frame(run)
        if info is None:
            hop: _Hop | None = self._take_turn(frame, downstream, named)
        elif frame.resume is None:
            # Resumed directly with a ResumeInfo (no checkpoint to walk): this agent resumes.
            turn = self._agent_turn(frame, downstream, AgentInput(
                enable_streaming=info.enable_streaming), info, named)
            hop = self._after(turn.action, frame, downstream, named)
        else:
            hop = self._resume_turn(info, frame, downstream, named)
        while hop is not None:
            node, at = hop
            hop = node._take_turn(at, downstream, named)

    def _take_turn(self, frame: RunFrame, downstream: EventSink, named: bool) -> _Hop | None:
        """One turn of this agent at ``frame``; returns the transfer it asks for, if any."""
        try:
            agent_input = self._build_input(frame)
        except Exception as error:
            downstream.send(self._error(frame, error, named))
            return None
        turn = self._agent_turn(frame, downstream, agent_input, None, named)
        return self._after(turn.action, frame, downstream, named)

    def _agent_turn(
        self,
        frame: RunFrame,
        downstream: EventSink,
        input: AgentInput,
        resume_info: ResumeInfo | None,
        named: bool,
    ) -> Turn:
        """Run the wrapped agent's turn (reported to the callbacks); return what it said."""
        callbacks = frame.observers.callbacks
        # A copy of the turn's events, only for handlers whose on_agent_end takes them.
        copy = (
            EventCopy(downstream)
            if callbacks is not None and callbacks.wants_events(self.name)
            else None
        )
        run = open_run(
            frame,
            downstream if copy is None else copy,
            input,
            resume_info,
            named=named,
            transfer_targets=self._targets(),
        )
        if callbacks is None:
            return self._play(run)  # nobody to report to (the common case)
        return observe_agent(
            frame.observers,
            self.name,
            self.get_type,
            tuple(str(step) for step in frame.run_path),
            input,
            lambda: self._play(run),
            _own_error,
            run.invocation_id,
            copy,
        )

    def _targets(self) -> tuple[FlowAgent, ...]:
        """Where this agent may transfer from its place here: its sub-agents, then its parent
        unless that is disallowed (told to each turn; the wrapped agent stores none of it)."""
        parent = self._parent
        if parent is None or self._disallow_transfer_to_parent:
            return self._sub_agents
        return (*self._sub_agents, parent)

    def _play(self, run: AgentRun) -> Turn:
        """The wrapped agent's turn in ``run`` (a subclass adds to it)."""
        return execute_agent(self._agent, run)

    def _resume_turn(
        self, info: ResumeInfo, frame: RunFrame, downstream: EventSink, named: bool
    ) -> _Hop | None:
        """Go back to where the saved run stopped, from this agent down."""
        resume_state = frame.resume
        assert resume_state is not None
        point = resume_state.at(frame.address)
        if point.was_interrupted:
            if isinstance(point.state, _PendingTransfer):
                return self._resume_transfer(point.state, info, frame, downstream, named)
            if not _resumable(self._agent):
                downstream.send(self._error(frame, ResumeError(
                    f"agent {self.name!r} stopped inside its turn, but it cannot be resumed: "
                    "it has no resume() method; give it one (see agentkit.ResumableAgent), or "
                    "subclass agentkit.BaseAgent"
                ), named))
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
            turn = self._agent_turn(frame, downstream, resumed_input, own_info, named)
            return self._after(turn.action, frame, downstream, named)
        hops = resume_state.next_hops(frame.address)
        if len(hops) != 1:
            downstream.send(self._error(frame, _no_single_hop(self, frame, hops), named))
            return None
        kind, _, name = hops[0].partition(":")
        dest = self._find(name) if kind == "agent" else None
        if dest is None:
            if not self._sub_agents and _resumable(self._agent):
                # The saved points are inside the agent (an agent tool's inner run, a custom
                # agent's nested turn): the agent finds its way there itself.
                self._agent_turn(frame, downstream, AgentInput(
                    enable_streaming=info.enable_streaming), info, named)
                return None
            known = ", ".join(repr(sub.name) for sub in self._sub_agents) or "none"
            downstream.send(self._error(frame, ResumeError(
                f"cannot resume: the checkpoint stopped in agent {name!r} under {self.name!r}, "
                f"but {self.name!r} has no such sub-agent (its sub-agents: {known}); resume "
                "with the agent tree that made the checkpoint"
            ), named))
            return None
        return dest._resume_turn(info, self._hand_over(frame, dest), downstream, named)

    def _resume_transfer(
        self,
        pending: _PendingTransfer,
        info: ResumeInfo,
        frame: RunFrame,
        downstream: EventSink,
        named: bool,
    ) -> _Hop | None:
        """Go on from a transfer this agent made (or was cancelled at): resume the destination
        where it got to, or make the transfer now if it had not started."""
        resume_state = frame.resume
        name = pending.dest_agent_name
        dest = self._find(name)
        if dest is not None and resume_state is not None and resume_state.leads_to(
            frame.address, f"agent:{dest.name}"
        ):
            return dest._resume_turn(info, self._hand_over(frame, dest), downstream, named)
        return self._after(new_transfer_to_agent_action(name), frame, downstream, named)

    def _after(
        self, action: AgentAction | None, frame: RunFrame, downstream: EventSink, named: bool
    ) -> _Hop | None:
        """The transfer ``action`` asks for: the next agent and its place, or ``None``."""
        if action is None or action.interrupted is not None or action.exit:
            return None
        if action.transfer_to_agent is None:
            return None
        dest_name = action.transfer_to_agent.dest_agent_name
        dest = self._find(dest_name)
        if dest is None and not named and self._parent is None:
            # A flow run directly (run(), no Runner) hands a transfer out of it to its caller:
            # the events say where the conversation goes.
            return None
        if dest is None:
            known = [sub.name for sub in self._sub_agents]
            if self._parent is not None and not self._disallow_transfer_to_parent:
                known.append(self._parent.name)
            downstream.send(self._error(frame, TransferError(
                f"agent {self.name!r} transferred to {dest_name!r}, which it cannot reach: an "
                "agent transfers to its sub-agents and its parent only "
                f"({', '.join(map(repr, known)) or 'it has none'}); make {dest_name!r} a "
                f"sub-agent of {self.name!r} with set_sub_agents(...)"
            ), named))
            return None
        # This agent's turn is over and the flow goes on in dest: what the agent declared as
        # it went is replaced by the transfer, in one declaration, so that a resumed run
        # neither runs this turn again nor loses the transfer (cancelled before dest starts,
        # the resumed run makes it).
        node = open_run(frame, downstream, AgentInput(), named=named)
        node.save_state(_PendingTransfer(dest_name), clear=True)
        try:
            frame.scope.check()
        except AgentCancelledError as error:
            downstream.send(self._error(frame, error, named))
            return None
        _log.info("agentkit: agent %r transfers to agent %r", self.name, dest_name)
        return dest, self._hand_over(frame, dest)

    def _hand_over(self, frame: RunFrame, dest: FlowAgent) -> RunFrame:
        """The frame of ``dest``'s turn after this agent's: one agent deeper, with this
        agent's guardrails handed down (see ``ChatModelAgent(share_guardrails=...)``)."""
        at = frame.at_agent(RunStep(dest.name))
        agent = self._agent
        if isinstance(agent, ChatModelAgent) and agent.share_guardrails:
            at = at.handing_down(agent.guardrails)
        return at

    def _error(self, frame: RunFrame, error: BaseException, named: bool = True) -> AgentEvent:
        """An error event on behalf of this agent (its name and run path filled in)."""
        if not named:
            return AgentEvent(err=error)
        return AgentEvent(agent_name=self.name, run_path=list(frame.run_path), err=error)

    def _find(self, name: str) -> FlowAgent | None:
        for sub in self._sub_agents:
            if sub.name == name:
                return sub
        if self._parent is not None and self._parent.name == name:
            return self._parent
        return None

    def _build_input(self, frame: RunFrame) -> AgentInput:
        root = frame.root_input
        rewriter = self._history_rewriter
        # Without a rewriter of its own, the default rule is applied as the entries are read
        # (the same messages default_history_rewriter gives, without an entry per message).
        name = self.name if rewriter is None else ""
        entries: list[Any] = (
            list(root.messages if root is not None else ())
            if rewriter is None
            else [
                HistoryEntry(is_user_input=True, agent_name="", message=message)
                for message in (root.messages if root is not None else ())
            ]
        )
        skip_transfers = frame.options.run.skip_transfer_messages
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
            # A user message in an agent's turn was sent to the run (RunIterator.send): the
            # user's words, for every agent.
            sent = message.role is Role.USER
            if rewriter is not None:
                entries.append(HistoryEntry(sent, "" if sent else record.agent_name, message))
            elif sent or record.agent_name == name:
                entries.append(message)
            else:
                entries.append(rewrite_message(message, record.agent_name))
        return AgentInput(
            messages=entries if rewriter is None else list(rewriter(entries)),
            enable_streaming=root.enable_streaming if root is not None else False,
        )


def _own_error(turn: Turn) -> BaseException | None:
    return turn.error


def _no_single_hop(flow: FlowAgent, frame: RunFrame, hops: list[str]) -> ResumeError:
    resume_state = frame.resume
    assert resume_state is not None
    if hops:
        return ResumeError(
            f"cannot resume: the checkpoint stopped in several agents under {flow.name!r} "
            f"({', '.join(hops)}), but one flow goes on in one agent at a time"
        )
    saved = sorted(";".join(address) for address in resume_state.addresses())
    return ResumeError(
        f"cannot resume: agent {flow.name!r} (at {';'.join(frame.address)}) has none of the "
        f"checkpoint's stopped agents below it ({', '.join(saved)}); resume with the agent "
        "tree that made the checkpoint"
    )


def _flow_frame(run: AgentRun) -> RunFrame:
    """The frame of a flow's turn (framework-internal; workflows use it too): a flow run
    directly gets a session and its input as the run's root input."""
    frame = frame_of(run)
    if frame.root_input is not None:
        return frame
    return attrs.evolve(
        frame,
        root_input=run.input,
        session=frame.session if frame.session is not None else Session(),
    )


def _resumable(agent: object) -> bool:
    return isinstance(agent, BaseAgent) or callable(getattr(agent, "resume", None))


# --- wiring -------------------------------------------------------------------------------------


def _wrap(agent: Agent) -> FlowAgent:
    """``agent``'s node for a new place: a new wrapper, or a copy of a flow's tree without its
    parent. Nothing is written onto ``agent``, so it can take any number of places."""
    if isinstance(agent, FlowAgent):
        tree = _copy_tree(agent)
        tree._parent = None
        return tree
    return FlowAgent(agent)


def _copy_tree(agent: FlowAgent) -> FlowAgent:
    """Copy ``agent`` with its sub-agents, each copy's parent being the copy above it.

    Copying only the top wrapper would leave its sub-agents pointing at the original as
    their parent: a sub-agent transferring back would run the original, which does not know
    the parent the copy was given (Mom -> Kid -> Mom -> Grandpa failed with "not found").
    """
    wrapper = copy.copy(agent)
    subs = []
    for sub in agent._sub_agents:
        sub_copy = _copy_tree(sub)
        sub_copy._parent = wrapper
        subs.append(sub_copy)
    wrapper._sub_agents = tuple(subs)
    return wrapper


def _wire(parent: FlowAgent, children: Sequence[Agent], *, disallow_transfer_to_parent: bool
         ) -> list[FlowAgent]:
    """Make ``children`` the sub-agents of ``parent`` (framework-internal; the one place).

    Each child is wrapped (a new node; a flow is copied), told its parent through the
    :class:`~agentkit.OnSubAgents` hooks, and its node is given ``parent`` as its parent: the
    child itself is not changed, so it may be a child of other parents too. With
    ``disallow_transfer_to_parent`` (workflow children) no child may transfer back.
    """
    subs = [_wrap(child) for child in children]
    hook = getattr(parent._agent, "on_set_sub_agents", None)
    if callable(hook):
        hook(subs)
    for sub in subs:
        if disallow_transfer_to_parent:
            sub._disallow_transfer_to_parent = True
        sub._parent = parent
        as_sub = getattr(sub._agent, "on_set_as_sub_agent", None)
        if callable(as_sub):
            as_sub(parent)
        if sub._disallow_transfer_to_parent:
            disallow = getattr(sub._agent, "on_disallow_transfer_to_parent", None)
            if callable(disallow):
                disallow()
    parent._sub_agents = tuple(subs)
    return subs


def _with_type(flow: FlowAgent, agent_type: str) -> FlowAgent:
    """``flow`` reporting ``agent_type`` to callbacks (framework-internal: ``"Supervisor"``)."""
    flow._agent_type = agent_type
    return flow


def set_sub_agents(agent: Agent, sub_agents: Sequence[Agent]) -> FlowAgent:
    """Make ``sub_agents`` transfer targets of ``agent``; return the agent to run.

    Run the returned agent, not the original. A sub-agent can transfer back to its parent
    unless it was made with ``agent_with_options(..., disallow_transfer_to_parent=True)``.

    Neither ``agent`` nor the sub-agents change: the same agent may be given other sub-agents
    in another call (another tree), and a sub-agent may be the sub-agent of other parents too.

    Raises:
        AgentConfigError: ``agent`` is a flow that has its sub-agents already.
    """
    parent = _wrap(agent)
    if parent._sub_agents:
        names = ", ".join(repr(sub.name) for sub in parent._sub_agents)
        raise AgentConfigError(
            f"agent {parent.name!r} has its sub-agents already ({names}); give an agent all its "
            "sub-agents in one set_sub_agents(...) call"
        )
    _wire(parent, sub_agents, disallow_transfer_to_parent=False)
    if not isinstance(agent, FlowAgent):
        _remember_wiring(agent)
    return parent


# The agents set_sub_agents gave sub-agents to (the agents themselves are not changed). Code
# written for agentkit 0.2, whose set_sub_agents changed the agent it was given, ran that agent
# rather than the one returned, and so ran it without its sub-agents: the Runner says so.
_WIRED: weakref.WeakSet[Any] = weakref.WeakSet()


def _remember_wiring(agent: Agent) -> None:
    try:
        _WIRED.add(agent)
    except TypeError:  # an agent that cannot be weakly referenced or hashed: not kept
        pass


def _flow_node(agent: Agent) -> FlowAgent:
    """The flow node a :class:`~agentkit.Runner` runs for ``agent`` (``agent`` itself if it
    is one).

    An agent that was given sub-agents with :func:`set_sub_agents` and is passed itself, not
    the agent that call returned, runs alone, with a :class:`UserWarning` saying so (in
    agentkit 0.2 ``set_sub_agents`` changed the agent it was given).
    """
    if isinstance(agent, FlowAgent):
        return agent
    try:
        wired = agent in _WIRED
    except TypeError:
        wired = False
    if wired:
        name = agent.name
        warnings.warn(
            f"agent {name!r} was given sub-agents with set_sub_agents(), which returns the "
            f"agent to run and leaves {name!r} unchanged: this runs {name!r} without them. "
            "Run the agent set_sub_agents returned (`team = set_sub_agents(agent, [...])`, "
            "then `Runner(team)`)",
            UserWarning,
            stacklevel=3,
        )
    return FlowAgent(agent)


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
        wrapper._disallow_transfer_to_parent = True
    if history_rewriter is not None:
        wrapper._history_rewriter = history_rewriter
    return wrapper

present(
    (
        HistoryEntry,
        HistoryRewriter,
        agent_with_options,
        set_sub_agents,
    ),
    "agentkit",
)

present(
    (
        FlowAgent,
        default_history_rewriter,
        rewrite_message,
    ),
    "agentkit.agents.flow",
)
