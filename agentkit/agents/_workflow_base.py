"""What the workflow agents share: registration of sub-agents, running a child, stopping.

:class:`WorkflowBase` is the base of :class:`~agentkit.SequentialAgent`,
:class:`~agentkit.LoopAgent` and :class:`~agentkit.ParallelAgent`; :class:`HoldSink` forwards a
child's events, holding back the one with an action until the next arrives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from agentkit._options import AgentRunOption
from agentkit._runctx import RunFrame, current_frame, use_frame
from agentkit._scope import Point
from agentkit._worker import BuiltinAgent, EventSink
from agentkit.agents.flow import FlowAgent, agent_with_options
from agentkit.errors import AgentCancelledError, AgentConfigError
from agentkit.events import (
    Agent,
    AgentEvent,
    ResumeInfo,
    RunStep,
)

__all__ = ["HoldSink", "WorkflowBase"]


class HoldSink:
    """Forwards a child's events, holding one with an action until the next one arrives."""

    __slots__ = ("broke", "downstream", "error", "held", "loop_iteration")

    def __init__(self, downstream: EventSink, loop_iteration: int | None = None) -> None:
        self.downstream = downstream
        self.held: AgentEvent | None = None
        self.error = False
        self.loop_iteration = loop_iteration
        self.broke = False

    def send(self, item: AgentEvent) -> bool:
        ok = True
        if self.held is not None:
            ok = self.downstream.send(self.held)
            self.held = None
        action = item.action
        if (
            action is not None
            and action.break_loop is not None
            and self.loop_iteration is not None
            and not action.break_loop.done
        ):
            action.break_loop.done = True
            action.break_loop.current_iterations = self.loop_iteration
            self.broke = True
        if item.err is not None:
            self.error = True
            return self.downstream.send(item) and ok
        if action is not None:
            self.held = item
            return ok
        return self.downstream.send(item) and ok


class WorkflowBase(BuiltinAgent):
    """What the three workflow agents share."""

    passes_events_through = True
    _kind = "Workflow"

    def __init__(self, name: str, description: str, sub_agents: Sequence[Agent]) -> None:
        if not isinstance(name, str) or not name:
            raise AgentConfigError(f"a {type(self).__name__} needs a non-empty name (got {name!r})")
        self._name = name
        self._description = description
        self.agent_type: str = self._kind  # what callbacks report as the workflow's type
        self._parent_flow = FlowAgent(self)
        children: list[FlowAgent] = []
        for agent in sub_agents:
            child = agent_with_options(agent, disallow_transfer_to_parent=True)
            if child.parent is not None:
                raise AgentConfigError(
                    "agent has already been set as a sub-agent of another agent"
                )
            child.parent = self._parent_flow
            hook = getattr(child.agent, "on_set_as_sub_agent", None)
            if callable(hook):
                hook(self._parent_flow)
            disallow = getattr(child.agent, "on_disallow_transfer_to_parent", None)
            if callable(disallow):
                disallow()
            children.append(child)
        self._parent_flow.sub_agents = children
        self._children = children
        self._parent: Agent | None = None

    # --- sub-agent registration (OnSubAgents) ---
    # A workflow is a FlowAgent-like node: like Eino's workflow constructors (which return the
    # flow wrapper), it refuses a second parent and a second set of sub-agents. Without these
    # hooks the same workflow instance could silently be nested in two parents.

    def on_set_sub_agents(self, sub_agents: Sequence[Agent]) -> None:
        """Refuse new sub-agents: a workflow's sub-agents are fixed when it is made."""
        if self._children:
            raise AgentConfigError("agent's sub-agents has already been set")

    def on_set_as_sub_agent(self, parent: Agent) -> None:
        """Record the parent; a workflow can be nested in one parent only."""
        if self._parent is not None:
            raise AgentConfigError("agent has already been set as a sub-agent of another agent")
        self._parent = parent

    def on_disallow_transfer_to_parent(self) -> None:
        """Nothing to do: a workflow never transfers by itself."""

    @property
    def name(self) -> str:
        """The workflow's name."""
        return self._name

    @property
    def description(self) -> str:
        """What the workflow does."""
        return self._description

    @property
    def sub_agents(self) -> list[Agent]:
        """The sub-agents, in order."""
        return [child.agent for child in self._children]

    def get_type(self) -> str:
        """The type callbacks report: ``"Sequential"``, ``"Parallel"``, ``"Loop"`` (or
        ``agent_type`` when set, e.g. ``"PlanExecute"``)."""
        return self.agent_type

    def __repr__(self) -> str:
        names = ", ".join(child.name for child in self._children)
        return f"{type(self).__name__}(name={self._name!r}, sub_agents=[{names}])"

    def _entry(self) -> BuiltinAgent:
        # Run bare, a workflow runs as its own flow wrapper (which names its events).
        return self._parent_flow

    def _frame(self) -> RunFrame:
        frame = current_frame()
        if frame is None:
            raise RuntimeError(f"{self._kind} workflows run inside a run context; call run()")
        return frame

    def _steps(self, count: int) -> tuple[RunStep, ...]:
        return tuple(RunStep(child.name) for child in self._children[:count])

    def _run_child(
        self,
        frame: RunFrame,
        prefix: tuple[RunStep, ...],
        child: FlowAgent,
        hold: HoldSink,
        options: tuple[AgentRunOption, ...],
        resume: ResumeInfo | None,
    ) -> None:
        child_frame = attrs.evolve(frame, run_path=frame.run_path + prefix)
        with use_frame(child_frame):
            if resume is None:
                child._run_into(None, hold, options)
            else:
                child._resume_into(resume, hold, options)

    def _leads_to(self, frame: RunFrame, child: FlowAgent) -> bool:
        """Whether the saved resume points of a resumed run lie inside ``child``."""
        resume_state = frame.resume
        return resume_state is not None and resume_state.leads_to(
            frame.address, f"agent:{child.name}"
        )

    def _stop_at(self, frame: RunFrame, state: Any, interrupted: bool = False) -> None:
        """Record that the workflow stopped at ``state`` (a child interrupted, failed or was
        cancelled, or the run was cancelled before a child): a resumed run goes on there."""
        info = f"{self._kind} workflow interrupted" if interrupted else None
        frame.journal.record(frame.address, state, info)

    def _check_transition(self, frame: RunFrame, state: Any, when: str = "at transition") -> None:
        try:
            frame.scope.check(Point.TRANSITION)
        except AgentCancelledError:
            # Resumable: the resumed workflow starts with the child it was about to run.
            frame.journal.record(frame.address, state, f"{self._kind} workflow cancel {when}")
            raise
