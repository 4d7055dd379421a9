"""Workflow agents: :class:`SequentialAgent`, :class:`ParallelAgent` and :class:`LoopAgent`.

The definitions behind :mod:`agentkit.agents.workflow`, whose docstring documents them.
"""
from __future__ import annotations

from collections.abc import Sequence

import attrs

from agentkit._agent import AgentRun
from agentkit._events import Agent
from agentkit._lazy import present
from agentkit._persist import persisted
from agentkit.agents._parallel import ParallelAgent, ParallelState
from agentkit.agents._workflow_base import HoldSink, WorkflowBase, no_state
from agentkit.errors import AgentConfigError, ResumeError

__all__ = [
    "LoopAgent",
    "LoopState",
    "ParallelAgent",
    "ParallelState",
    "SequentialAgent",
    "SequentialState",
]

# Defined in a private module, documented here.


@persisted("agentkit.SequentialState")
@attrs.define
class SequentialState:
    """Where a Sequential workflow stopped: the index of the interrupted sub-agent."""

    index: int


@persisted("agentkit.LoopState")
@attrs.define
class LoopState:
    """Where a Loop workflow stopped: the iteration and the sub-agent index."""

    iteration: int
    index: int


class SequentialAgent(WorkflowBase):
    """Runs its sub-agents one after another; each sees what the earlier ones said.

    An error stops the sequence; so does an Exit action on a sub-agent's last event. A
    sub-agent's run path includes the sub-agents before it: ``[seq, a, b]`` for ``b``.
    """

    _kind = "Sequential"

    def execute(self, run: AgentRun) -> None:
        """Run the sub-agents in order (from where a resumed run stopped)."""
        info = run.resume_info
        start = 0
        if info is not None:
            state = info.interrupt_state
            if not isinstance(state, SequentialState):
                raise ResumeError(no_state(self, state, SequentialState))
            start = state.index
        run, frame = self._placed(run)
        downstream = run.forward
        for index in range(start, len(self._children)):
            state = SequentialState(index)
            run.save_state(state)  # the child before it is done with in the same write
            self._check_transition(frame)
            hold = HoldSink(downstream)
            child = self._children[index]
            child_resume = info is not None and index == start and self._leads_to(frame, child)
            self._run_child(run, self._steps(index), child, hold.send, child_resume)
            last = hold.held
            if hold.error or (last is not None and last.interrupted):
                if last is not None and last.interrupted:
                    self._interrupted_at(run, state)
                if last is not None:
                    downstream(last)
                return
            if last is None:
                continue
            downstream(last)
            if last.action is not None and last.action.exit:
                return


class LoopAgent(WorkflowBase):
    """Runs its sub-agents in order, again and again.

    Stops after ``max_iterations`` rounds (0 = no limit), on an Exit action on a sub-agent's
    last event, on an error, or when a sub-agent sends a :class:`~agentkit.BreakLoopAction`
    (the loop passes it on marked ``done`` at the iteration, so enclosing loops go on).
    Run paths keep growing across iterations: ``[loop, a, b, a]`` in the second round.
    """

    _kind = "Loop"

    def __init__(
        self,
        name: str,
        description: str,
        sub_agents: Sequence[Agent],
        max_iterations: int = 0,
        *,
        agent_type: str | None = None,
    ) -> None:
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise AgentConfigError(f"max_iterations must be an int (got {max_iterations!r})")
        if max_iterations < 0:
            raise AgentConfigError(
                f"max_iterations must be >= 0, 0 meaning no limit (got {max_iterations})"
            )
        super().__init__(name, description, sub_agents, agent_type=agent_type)
        self._max_iterations = max_iterations

    @property
    def max_iterations(self) -> int:
        """The most rounds the loop makes (0: no limit)."""
        return self._max_iterations

    def execute(self, run: AgentRun) -> None:
        """Run the rounds (from where a resumed run stopped)."""
        info = run.resume_info
        first_iteration = first_index = 0
        if info is not None:
            state = info.interrupt_state
            if not isinstance(state, LoopState):
                raise ResumeError(no_state(self, state, LoopState))
            first_iteration, first_index = state.iteration, state.index
        run, frame = self._placed(run)
        count = len(self._children)
        if count == 0:
            return
        downstream = run.forward
        all_steps = self._steps(count)
        iteration, index, resume = first_iteration, first_index, info
        limit = self._max_iterations
        while limit == 0 or iteration < limit:
            while index < count:
                state = LoopState(iteration, index)
                run.save_state(state)  # the child before it is done with in the same write
                self._check_transition(frame)
                prefix = all_steps * iteration + all_steps[:index]
                hold = HoldSink(downstream, loop_iteration=iteration)
                child = self._children[index]
                if resume is not None and not self._leads_to(frame, child):
                    resume = None
                self._run_child(run, prefix, child, hold.send, resume is not None)
                resume = None
                last = hold.held
                if hold.error or (last is not None and last.interrupted):
                    if last is not None and last.interrupted:
                        self._interrupted_at(run, state)
                    if last is not None:
                        downstream(last)
                    return
                if last is not None:
                    downstream(last)
                    if last.action is not None and last.action.exit:
                        return
                if hold.broke:
                    return
                index += 1
            index = 0
            iteration += 1

present(
    (
        LoopAgent,
        ParallelAgent,
        SequentialAgent,
    ),
    "agentkit",
)

present(
    (
        LoopState,
        ParallelState,
        SequentialState,
    ),
    "agentkit.agents.workflow",
)
