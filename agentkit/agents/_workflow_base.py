"""What the workflow agents share: registration of sub-agents, running a child, stopping.

:class:`WorkflowBase` is the base of :class:`~agentkit.SequentialAgent`,
:class:`~agentkit.LoopAgent` and :class:`~agentkit.ParallelAgent`; :class:`HoldSink` passes a
child's events on, holding back the one with an action until the next arrives.

A workflow's children run through their own flow wrappers, which name and record their
events; the workflow passes those events on (they are not its own) and emits only its own
(an error, the Parallel's summary of its branches).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from agentkit._agent import AgentRun, BaseAgent, at_frame
from agentkit._events import (
    Agent,
    AgentEvent,
)
from agentkit._runctx import RunFrame
from agentkit._scope import Point
from agentkit._values import BuiltValue
from agentkit.agents._flow import FlowAgent, _flow_frame, _wire
from agentkit.errors import AgentConfigError, AgentFrozenError

__all__ = ["HoldSink", "WorkflowBase", "no_state"]


class HoldSink:
    """Passes a child's events on, holding one with an action until the next one arrives.

    In a loop (``loop_iteration`` given) a child's :class:`~agentkit.BreakLoopAction` is acted
    on: the event is passed on as a copy whose action is marked ``done`` at this iteration.
    """

    __slots__ = ("broke", "downstream", "error", "held", "loop_iteration")

    def __init__(
        self, downstream: Callable[[AgentEvent], object], loop_iteration: int | None = None
    ) -> None:
        self.downstream = downstream
        self.held: AgentEvent | None = None
        self.error = False
        self.loop_iteration = loop_iteration
        self.broke = False

    def send(self, item: AgentEvent) -> None:
        if self.held is not None:
            self.downstream(self.held)
            self.held = None
        action = item.action
        if action is not None:
            brk = action.break_loop
            if brk is not None and self.loop_iteration is not None and not brk.done:
                done = attrs.evolve(brk, done=True, current_iterations=self.loop_iteration)
                action = attrs.evolve(action, break_loop=done)
                item = attrs.evolve(item, action=action)
                self.broke = True
        if item.err is not None:
            self.error = True
            self.downstream(item)
        elif action is not None:
            self.held = item
        else:
            self.downstream(item)


class WorkflowBase(BuiltValue, BaseAgent):
    """What the three workflow agents share."""

    _kind = "Workflow"

    def __init__(
        self,
        name: str,
        description: str,
        sub_agents: Sequence[Agent],
        *,
        agent_type: str | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise AgentConfigError(f"a {type(self).__name__} needs a non-empty name (got {name!r})")
        self._name = name
        self._description = description
        self._agent_type = agent_type if agent_type is not None else self._kind
        # The children's parent: a flow around this workflow (no child may transfer to it).
        self._parent_flow = FlowAgent(self)
        self._children: tuple[FlowAgent, ...] = ()
        children = _wire(self._parent_flow, sub_agents, disallow_transfer_to_parent=True)
        self._children = tuple(children)

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):
            raise AgentFrozenError(
                f"cannot set {name!r} on {type(self).__name__} {self._name!r}: agents are "
                f"values once built. Make a changed copy with workflow.replace({name}=...)"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)

    # --- sub-agent registration (OnSubAgents) ---
    # A workflow's sub-agents are fixed when it is made (like Eino's workflow constructors,
    # which return the flow wrapper). Its place in a tree is its node's business: the same
    # workflow may be nested in several parents.

    def on_set_sub_agents(self, sub_agents: Sequence[Agent]) -> None:
        """Refuse new sub-agents: a workflow's sub-agents are fixed when it is made."""
        if self._children:
            raise AgentConfigError(
                f"{type(self).__name__} {self._name!r} has its sub-agents already (given when it "
                "was made); make a new workflow with the sub-agents you want"
            )

    def on_set_as_sub_agent(self, parent: Agent) -> None:
        """Nothing to record: a workflow never transfers to its parent, and it may be the
        sub-agent of several parents."""

    def on_disallow_transfer_to_parent(self) -> None:
        """Nothing to do: a workflow never transfers by itself."""

    @property
    def name(self) -> str:  # type: ignore[override]
        """The workflow's name."""
        return self._name

    @property
    def description(self) -> str:  # type: ignore[override]
        """What the workflow does."""
        return self._description

    @property
    def sub_agents(self) -> list[Agent]:
        """The sub-agents, in order."""
        return [child.agent for child in self._children]

    @property
    def agent_type(self) -> str:
        """What callbacks report as the workflow's type."""
        return self._agent_type

    def get_type(self) -> str:
        """The type callbacks report: ``"Sequential"``, ``"Parallel"``, ``"Loop"`` (or the
        ``agent_type`` it was made with, e.g. ``"PlanExecute"``)."""
        return self._agent_type

    def __repr__(self) -> str:
        names = ", ".join(child.name for child in self._children)
        return f"{type(self).__name__}(name={self._name!r}, sub_agents=[{names}])"

    def _steps(self, count: int) -> tuple[str, ...]:
        """The names of the first ``count`` children."""
        return tuple(child.name for child in self._children[:count])

    def _run_child(
        self,
        run: AgentRun,
        prefix: tuple[str, ...],
        child: FlowAgent,
        sink: Callable[[AgentEvent], object],
        resume: bool,
    ) -> None:
        """Run ``child``'s turn after the children named in ``prefix`` (its run path shows
        them)."""
        run.run_child(child, sink=sink, resume=resume, after=prefix)

    def _placed(self, run: AgentRun) -> tuple[AgentRun, RunFrame]:
        """``run`` where the workflow's children run (a workflow run directly gets a session
        and a root input), and its run context."""
        frame = _flow_frame(run)
        return at_frame(run, frame), frame

    def _leads_to(self, frame: RunFrame, child: FlowAgent) -> bool:
        """Whether the saved resume points of a resumed run lie inside ``child``."""
        resume_state = frame.resume
        return resume_state is not None and resume_state.leads_to(
            frame.address, f"agent:{child.name}"
        )

    def _stop_at(self, run: AgentRun, state: Any, interrupted: bool = False) -> None:
        """Save that the workflow stopped at ``state`` (a Parallel's branches stopped): a
        resumed run goes on there."""
        info = f"{self._kind} workflow interrupted" if interrupted else None
        run.save_state(state, info=info, flush=False)

    def _interrupted_at(self, run: AgentRun, state: Any) -> None:
        """A child paused the run at ``state`` (declared with ``save_state`` already): say so
        in the interrupt's contexts."""
        run.save_state(state, info=f"{self._kind} workflow interrupted", flush=False)

    def _check_transition(self, frame: RunFrame) -> None:
        """Stop at a transition if the run is cancelled; the declared state is where a
        resumed workflow starts (with the child it was about to run)."""
        frame.scope.check(Point.TRANSITION)


def no_state(workflow: WorkflowBase, state: object, expected: type) -> str:
    """The message of a workflow resumed with a saved state that is not its own."""
    return (
        f"cannot resume {type(workflow).__name__} {workflow.name!r}: its saved state is "
        f"{type(state).__name__}, not a {expected.__name__}; resume with the checkpoint this "
        "workflow saved"
    )
