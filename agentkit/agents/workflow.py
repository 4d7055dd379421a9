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
from typing import TYPE_CHECKING, Any

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
from agentkit.interrupt import SignalNode, composite_signal
from agentkit.options import AgentRunOption
from agentkit.runctx import EventLog, RecordedEvent, RunFrame, current_frame, use_frame
from agentkit.worker import EventSink, run_in_worker

if TYPE_CHECKING:
    from agentkit.iterators import AsyncIterator

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
    """A Parallel workflow's branches when it stopped: each branch's own history."""

    lanes: list[list[RecordedEvent]]
    interrupted: list[int]


class _HoldSink:
    """Forwards a child's events, holding one with an action until the next one arrives."""

    __slots__ = ("broke", "downstream", "error", "held", "loop_iteration", "on_cancel")

    def __init__(
        self,
        downstream: EventSink,
        loop_iteration: int | None = None,
        on_cancel: Callable[[SignalNode], SignalNode] | None = None,
    ) -> None:
        self.downstream = downstream
        self.held: AgentEvent | None = None
        self.error = False
        self.loop_iteration = loop_iteration
        self.broke = False
        # Wraps the resume point of a cancelled child in the workflow's own position.
        self.on_cancel = on_cancel

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
            node = getattr(item.err, "_signal", None)
            if (
                self.on_cancel is not None
                and isinstance(item.err, AgentCancelledError)
                and isinstance(node, SignalNode)
            ):
                item.err._signal = self.on_cancel(node)  # type: ignore[attr-defined]
            return self.downstream.send(item) and ok
        if action is not None:
            self.held = item
            return ok
        return self.downstream.send(item) and ok


class _Workflow:
    """What the three workflow agents share."""

    _agentkit_push = True
    _agentkit_workflow = True
    _kind = "Workflow"

    def __init__(self, name: str, description: str, sub_agents: Sequence[Agent]) -> None:
        if not isinstance(name, str) or not name:
            raise AgentConfigError(f"a {type(self).__name__} needs a non-empty name (got {name!r})")
        self._name = name
        self._description = description
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

    def __repr__(self) -> str:
        names = ", ".join(child.name for child in self._children)
        return f"{type(self).__name__}(name={self._name!r}, sub_agents=[{names}])"

    def run(self, input: AgentInput, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
        """Run the workflow in a worker thread; returns the event iterator at once."""
        flow = self._parent_flow
        return run_in_worker(lambda sink: flow._run_into(input, sink, options))

    def resume(self, info: ResumeInfo, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
        """Resume the workflow inside a run restored by the Runner."""
        flow = self._parent_flow
        return run_in_worker(lambda sink: flow._resume_into(info, sink, options))

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
        """Whether the saved interrupt points of a resumed run lie inside ``child``."""
        resume_state = frame.resume
        if resume_state is None:
            return False
        return f"agent:{child.name}" in resume_state.next_hops(frame.address)

    def _wrapper(self, frame: RunFrame, state: Any) -> Callable[[SignalNode], SignalNode]:
        info = f"{self._kind} workflow cancelled"

        def wrap(node: SignalNode) -> SignalNode:
            return composite_signal(info, state, [node], address=frame.address)

        return wrap

    def _check_transition(self, frame: RunFrame, info: str, state: Any) -> None:
        try:
            frame.scope.check(Point.TRANSITION)
        except AgentCancelledError as error:
            # Resumable: the resumed workflow starts with the child it was about to run.
            error._signal = composite_signal(  # type: ignore[attr-defined]
                info, state, [], address=frame.address
            )
            raise

    def _interrupt(
        self, sink: EventSink, child_event: AgentEvent, info: str, state: Any, frame: RunFrame
    ) -> None:
        action = child_event.action
        assert action is not None and action.interrupted is not None
        child_node: SignalNode = action._signal
        node = composite_signal(info, state, [child_node], address=frame.address)
        sink.send(
            AgentEvent(
                agent_name=child_event.agent_name,
                run_path=child_event.run_path,
                output=child_event.output,
                action=AgentAction(
                    interrupted=InterruptInfo(
                        data=action.interrupted.data, contexts=node.contexts()
                    ),
                    _signal=node,
                ),
            )
        )


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
            self._check_transition(frame, "Sequential workflow cancel at transition", state)
            hold = _HoldSink(sink, on_cancel=self._wrapper(frame, state))
            child = self._children[index]
            child_resume = resume if index == start and self._leads_to(frame, child) else None
            self._run_child(
                frame, self._steps(index), self._children[index], hold, options, child_resume
            )
            if hold.error:
                return
            last = hold.held
            if last is None:
                continue
            action = last.action
            assert action is not None
            if action.interrupted is not None and action._signal is not None:
                self._interrupt(
                    sink, last, "Sequential workflow interrupted", SequentialState(index), frame
                )
                return
            sink.send(last)
            if action.exit:
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
                self._check_transition(frame, "Loop workflow cancel at transition", state)
                prefix = all_steps * iteration + all_steps[:index]
                hold = _HoldSink(
                    sink, loop_iteration=iteration, on_cancel=self._wrapper(frame, state)
                )
                child = self._children[index]
                if resume is not None and not self._leads_to(frame, child):
                    resume = None
                self._run_child(frame, prefix, child, hold, options, resume)
                resume = None
                if hold.error:
                    return
                last = hold.held
                if last is not None:
                    action = last.action
                    assert action is not None
                    if action.interrupted is not None and action._signal is not None:
                        self._interrupt(
                            sink, last, "Loop workflow interrupted",
                            LoopState(iteration, index), frame,
                        )
                        return
                    sink.send(last)
                    if action.exit:
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
    """A branch's view: interrupts are kept back, everything else is forwarded."""

    __slots__ = ("downstream", "interrupt")

    def __init__(self, downstream: EventSink) -> None:
        self.downstream = downstream
        self.interrupt: AgentEvent | None = None

    def send(self, item: AgentEvent) -> bool:
        action = item.action
        if action is not None and action.interrupted is not None and action._signal is not None:
            self.interrupt = item
            return True
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
        self._fork(frame, sink, options, lanes, list(range(len(self._children))), None)

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
        for saved in state.lanes:
            lane = frame.log.fork()
            lane.restore(saved)
            lanes.append(lane)
        resume_state = frame.resume
        hops = resume_state.next_hops(frame.address) if resume_state is not None else []
        todo = [
            index
            for index in state.interrupted
            if f"agent:{self._children[index].name}" in hops
        ]
        self._fork(frame, sink, options, lanes, todo, info)

    def _fork(
        self,
        frame: RunFrame,
        sink: EventSink,
        options: tuple[AgentRunOption, ...],
        lanes: list[EventLog],
        todo: list[int],
        resume: ResumeInfo | None,
    ) -> None:
        frame.scope.check(Point.TRANSITION)
        shared = _LockedSink(sink)
        branches = {index: _BranchSink(shared) for index in todo}

        def branch(index: int) -> None:
            child_frame = attrs.evolve(frame, log=lanes[index])
            with use_frame(child_frame):
                child = self._children[index]
                if resume is None:
                    child._run_into(None, branches[index], options)
                else:
                    child._resume_into(resume, branches[index], options)

        if todo:
            # Without a limit the calling thread runs the first branch itself and a pool
            # sized to the rest runs the others: every branch starts at once.
            inline = todo[0] if self.max_workers is None else None
            pooled = [index for index in todo if index != inline]
            errors: list[BaseException | None] = []
            futures = []
            pool = None
            if pooled:
                workers = min(self.max_workers or len(pooled), len(pooled))
                pool = ThreadPoolExecutor(
                    max_workers=workers, thread_name_prefix="agentkit-parallel"
                )
                futures = [
                    pool.submit(contextvars.copy_context().run, branch, index)
                    for index in pooled
                ]
            try:
                if inline is not None:
                    try:
                        contextvars.copy_context().run(branch, inline)
                    except Exception as error:
                        errors.append(error)
            finally:
                if pool is not None:
                    errors.extend(future.exception() for future in futures)
                    pool.shutdown(wait=True)
            for failure in errors:
                if failure is not None:
                    shared.send(AgentEvent(err=failure))
        interrupted = [index for index in todo if branches[index].interrupt is not None]
        if not interrupted:
            frame.log.commit(lanes)
            return
        children = []
        for index in interrupted:
            event = branches[index].interrupt
            assert event is not None and event.action is not None
            children.append(event.action._signal)
        state = ParallelState(
            lanes=[[record.checkpointable() for record in lane.own()] for lane in lanes],
            interrupted=interrupted,
        )
        node = composite_signal(
            "Parallel workflow interrupted", state, children, address=frame.address
        )
        first = branches[interrupted[0]].interrupt
        assert first is not None and first.action is not None and first.action.interrupted
        sink.send(
            AgentEvent(
                agent_name=self._name,
                run_path=list(frame.run_path),
                action=AgentAction(
                    interrupted=InterruptInfo(
                        data=first.action.interrupted.data, contexts=node.contexts()
                    ),
                    _signal=node,
                ),
            )
        )
