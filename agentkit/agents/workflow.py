"""Workflow agents: :class:`SequentialAgent`, :class:`ParallelAgent` and :class:`LoopAgent`.

A workflow runs its sub-agents in a fixed pattern. It records nothing itself: each
sub-agent runs through its own flow wrapper, which names and records its events. Sub-agents
are registered with transfer to their parent disallowed.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs

from agentkit._persist import persisted
from agentkit.agents.flow import FlowAgent, agent_with_options
from agentkit.cancel import Point
from agentkit.errors import AgentCancelledError, AgentConfigError, ResumeError
from agentkit.events import (
    Agent,
    AgentAction,
    AgentEvent,
    AgentInput,
    InterruptInfo,
    ResumeInfo,
    RunStep,
)
from agentkit.options import AgentRunOption
from agentkit.runctx import EventLog, RecordedEvent, RunFrame, current_frame, use_frame
from agentkit.worker import BuiltinAgent, EventSink

__all__ = ["LoopAgent", "ParallelAgent", "SequentialAgent"]


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


@persisted("agentkit.ParallelState")
@attrs.define
class ParallelState:
    """A Parallel workflow's branches when it stopped.

    ``lanes`` holds each branch's own history; ``unfinished`` the branches that did not
    finish (interrupted, cancelled, failed or not started). A resumed Parallel resumes the
    unfinished branches that recorded where they stopped, runs the others again from their
    start, and does not run the finished ones again.
    """

    lanes: list[list[RecordedEvent]]
    unfinished: list[int]


class _HoldSink:
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


class _Workflow(BuiltinAgent):
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
        hold: _HoldSink,
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


class SequentialAgent(_Workflow):
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
            hold = _HoldSink(sink)
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


class LoopAgent(_Workflow):
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
                hold = _HoldSink(sink, loop_iteration=iteration)
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


class _LockedSink:
    """Serializes sends from parallel branches into one downstream sink."""

    __slots__ = ("downstream", "lock")

    def __init__(self, downstream: EventSink) -> None:
        self.downstream = downstream
        self.lock = threading.Lock()

    def send(self, item: AgentEvent) -> bool:
        with self.lock:
            return self.downstream.send(item)


class _BranchSink:
    """A branch's view: interrupts and cancels are kept back, everything else is forwarded."""

    __slots__ = ("cancel", "downstream", "failed", "interrupt")

    def __init__(self, downstream: EventSink) -> None:
        self.downstream = downstream
        self.interrupt: AgentEvent | None = None
        self.cancel: AgentEvent | None = None
        self.failed = False

    @property
    def finished(self) -> bool:
        """Whether the branch ran to its end."""
        return self.interrupt is None and self.cancel is None and not self.failed

    def send(self, item: AgentEvent) -> bool:
        if item.interrupted:
            self.interrupt = item
            return True
        if isinstance(item.err, AgentCancelledError):
            # The Parallel reports one cancel for all its branches.
            self.cancel = item
            return True
        if item.err is not None:
            self.failed = True
        return self.downstream.send(item)


class ParallelAgent(_Workflow):
    """Runs its sub-agents at the same time, each on its own thread.

    Each branch sees the history from before the fork plus its own events, not its
    siblings'; session values are shared. Events are forwarded as they come. An error in one
    branch does not stop the others. When all branches are done their events join the
    history in the order they were made, so an agent after the Parallel sees them all.

    Args:
        max_workers: how many branches run at once; ``None`` runs every branch at once.
    """

    _kind = "Parallel"

    def __init__(
        self,
        name: str,
        description: str,
        sub_agents: Sequence[Agent],
        max_workers: int | None = None,
    ) -> None:
        if max_workers is not None and (
            isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1
        ):
            raise AgentConfigError(f"max_workers must be None or >= 1 (got {max_workers!r})")
        super().__init__(name, description, sub_agents)
        self.max_workers = max_workers

    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        frame = self._frame()
        lanes = [frame.log.fork() for _ in self._children]
        self._fork(frame, sink, options, lanes, list(range(len(self._children))), [], None)

    def _resume_into(
        self, info: ResumeInfo, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        state = info.interrupt_state
        if not isinstance(state, ParallelState):
            raise ResumeError(
                f"workflowAgent.Resume: agent '{self._name}' was asked to resume but has no state"
            )
        frame = self._frame()
        lanes = []
        for index, saved in enumerate(state.lanes):
            lane = frame.log.fork()
            if not (index in state.unfinished and not self._leads_to(frame, self._children[index])):
                lane.restore(saved)  # a branch run again from its start gets a fresh lane
            lanes.append(lane)
        resumed = [i for i in state.unfinished if self._leads_to(frame, self._children[i])]
        fresh = [i for i in state.unfinished if i not in resumed]
        self._fork(frame, sink, options, lanes, fresh, resumed, info)

    def _fork(
        self,
        frame: RunFrame,
        sink: EventSink,
        options: tuple[AgentRunOption, ...],
        lanes: list[EventLog],
        fresh: list[int],
        resumed: list[int],
        resume: ResumeInfo | None,
    ) -> None:
        todo = sorted(fresh + resumed)
        self._check_transition(frame, self._state(lanes, todo), "before spawn")
        shared = _LockedSink(sink)
        branches = {index: _BranchSink(shared) for index in todo}

        def branch(index: int) -> None:
            child_frame = attrs.evolve(frame, log=lanes[index])
            with use_frame(child_frame):
                child = self._children[index]
                if index in resumed and resume is not None:
                    child._resume_into(resume, branches[index], options)
                else:
                    child._run_into(None, branches[index], options)

        for failure in self._run_branches(todo, branch):
            branches[failure[0]].failed = True
            shared.send(AgentEvent(agent_name=self._name, run_path=frame.run_path, err=failure[1]))
        unfinished = [index for index in todo if not branches[index].finished]
        cancels = [branches[i].cancel for i in unfinished if branches[i].cancel is not None]
        interrupts = [branches[i].interrupt for i in unfinished if branches[i].interrupt]
        if not unfinished:
            frame.log.commit(lanes)
            return
        # Lanes are not committed: the resumed Parallel gets them back from its state.
        self._stop_at(frame, self._state(lanes, unfinished), bool(interrupts) and not cancels)
        if cancels or interrupts:
            first = cancels[0] if cancels else interrupts[0]
            assert first is not None
            data = None
            if first.action is not None and first.action.interrupted is not None:
                data = first.action.interrupted.data
            sink.send(
                AgentEvent(
                    agent_name=self._name,
                    run_path=list(frame.run_path),
                    action=None if cancels else AgentAction(interrupted=InterruptInfo(data=data)),
                    err=first.err if cancels else None,
                )
            )

    def _state(self, lanes: list[EventLog], unfinished: list[int]) -> ParallelState:
        return ParallelState(
            lanes=[[record.checkpointable() for record in lane.own()] for lane in lanes],
            unfinished=list(unfinished),
        )

    def _run_branches(
        self, todo: list[int], branch: Callable[[int], None]
    ) -> list[tuple[int, BaseException]]:
        """Run ``branch(i)`` for every ``i`` of ``todo`` at once; return what escaped them.

        Without a limit the calling thread runs the first branch itself and a pool sized to
        the rest runs the others: every branch starts at once. All are joined before this
        returns, so no branch outlives the Parallel.
        """
        if not todo:
            return []
        inline = todo[0] if self.max_workers is None else None
        pooled = [index for index in todo if index != inline]
        failures: list[tuple[int, BaseException]] = []
        futures = []
        pool = None
        if pooled:
            workers = min(self.max_workers or len(pooled), len(pooled))
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agentkit-parallel")
            futures = [
                (index, pool.submit(contextvars.copy_context().run, branch, index))
                for index in pooled
            ]
        try:
            if inline is not None:
                try:
                    contextvars.copy_context().run(branch, inline)
                except Exception as error:
                    failures.append((inline, error))
        finally:
            if pool is not None:
                for index, future in futures:
                    escaped = future.exception()
                    if escaped is not None:
                        failures.append((index, escaped))
                pool.shutdown(wait=True)
        return failures
