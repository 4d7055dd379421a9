"""Workflow agents: :class:`SequentialAgent`, :class:`ParallelAgent` and :class:`LoopAgent`.

A workflow runs its sub-agents in a fixed pattern. It records nothing itself: each
sub-agent runs through its own flow wrapper, which names and records its events. Sub-agents
are registered with transfer to their parent disallowed.
"""
from __future__ import annotations

from collections.abc import Sequence

import attrs

from agentkit._lazy import present
from agentkit._options import AgentRunOption
from agentkit._persist import persisted
from agentkit._worker import EventSink
from agentkit.agents._parallel import ParallelAgent, ParallelState
from agentkit.agents._workflow_base import HoldSink, WorkflowBase
from agentkit.errors import AgentConfigError, ResumeError
from agentkit.events import (
    Agent,
    AgentInput,
    ResumeInfo,
)

__all__ = [
    "LoopAgent",
    "LoopState",
    "ParallelAgent",
    "ParallelState",
    "SequentialAgent",
    "SequentialState",
]

# Defined in a private module, documented here.
present((ParallelAgent, ParallelState), __name__)


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

    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        self._sequence(sink, options, 0, None)

    def _resume_into(
        self, info: ResumeInfo, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        state = info.interrupt_state
        if not isinstance(state, SequentialState):
            raise ResumeError(
                f"workflowAgent.Resume: agent '{self._name}' was asked to resume but has no state"
            )
        self._sequence(sink, options, state.index, info)

    def _sequence(
        self,
        sink: EventSink,
        options: tuple[AgentRunOption, ...],
        start: int,
        resume: ResumeInfo | None,
    ) -> None:
        frame = self._frame()
        for index in range(start, len(self._children)):
            state = SequentialState(index)
            self._check_transition(frame, state)
            hold = HoldSink(sink)
            child = self._children[index]
            child_resume = resume if index == start and self._leads_to(frame, child) else None
            self._run_child(
                frame, self._steps(index), self._children[index], hold, options, child_resume
            )
            last = hold.held
            if hold.error or (last is not None and last.interrupted):
                self._stop_at(frame, state, last is not None and last.interrupted)
                if last is not None:
                    sink.send(last)
                return
            if last is None:
                continue
            sink.send(last)
            if last.action is not None and last.action.exit:
                return


class LoopAgent(WorkflowBase):
    """Runs its sub-agents in order, again and again.

    Stops after ``max_iterations`` rounds (0 = no limit), on an Exit action on a sub-agent's
    last event, on an error, or when a sub-agent sends a :class:`~agentkit.BreakLoopAction`
    (the loop marks it ``done`` and records the iteration, so enclosing loops go on).
    Run paths keep growing across iterations: ``[loop, a, b, a]`` in the second round.
    """

    _kind = "Loop"

    def __init__(
        self, name: str, description: str, sub_agents: Sequence[Agent], max_iterations: int = 0
    ) -> None:
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise AgentConfigError(f"max_iterations must be an int (got {max_iterations!r})")
        if max_iterations < 0:
            raise AgentConfigError(
                f"max_iterations must be >= 0, 0 meaning no limit (got {max_iterations})"
            )
        super().__init__(name, description, sub_agents)
        self.max_iterations = max_iterations

    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        self._loop(sink, options, 0, 0, None)

    def _resume_into(
        self, info: ResumeInfo, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        state = info.interrupt_state
        if not isinstance(state, LoopState):
            raise ResumeError(
                f"workflowAgent.Resume: agent '{self._name}' was asked to resume but has no state"
            )
        self._loop(sink, options, state.iteration, state.index, info)

    def _loop(
        self,
        sink: EventSink,
        options: tuple[AgentRunOption, ...],
        first_iteration: int,
        first_index: int,
        resume: ResumeInfo | None,
    ) -> None:
        frame = self._frame()
        count = len(self._children)
        if count == 0:
            return
        all_steps = self._steps(count)
        iteration = first_iteration
        index = first_index
        while self.max_iterations == 0 or iteration < self.max_iterations:
            while index < count:
                state = LoopState(iteration, index)
                self._check_transition(frame, state)
                prefix = all_steps * iteration + all_steps[:index]
                hold = HoldSink(sink, loop_iteration=iteration)
                child = self._children[index]
                if resume is not None and not self._leads_to(frame, child):
                    resume = None
                self._run_child(frame, prefix, child, hold, options, resume)
                resume = None
                last = hold.held
                if hold.error or (last is not None and last.interrupted):
                    self._stop_at(frame, state, last is not None and last.interrupted)
                    if last is not None:
                        sink.send(last)
                    return
                if last is not None:
                    sink.send(last)
                    if last.action is not None and last.action.exit:
                        return
                if hold.broke:
                    return
                index += 1
            index = 0
            iteration += 1
