"""The :class:`ParallelAgent`: sub-agents at the same time, each on its own thread."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from functools import partial

import attrs

from agentkit._agent import AgentRun, at_frame
from agentkit._events import (
    Agent,
    AgentAction,
    AgentEvent,
    InterruptInfo,
    ResumeInfo,
)
from agentkit._persist import persisted
from agentkit._runctx import EventLog, RecordedEvent, RunFrame
from agentkit._spawn import run_in_copy
from agentkit.agents._workflow_base import WorkflowBase, no_state
from agentkit.errors import AgentCancelledError, AgentConfigError, ResumeError

__all__ = ["ParallelAgent", "ParallelState"]


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


class _DurableBranches:
    """A durable run's view of a Parallel: its point, each lane's history, finished branches.

    The Parallel's point (a :class:`ParallelState`) is saved when it forks, each lane's
    history kept in it (``AgentRun.keep_history``: written by the saves made in that lane); a
    branch that finishes is taken off ``unfinished`` and its points dropped in one save, so a
    resumed run does not run it again, whichever thread ran it (the calling thread's lane
    included).
    """

    __slots__ = ("kept", "lanes", "lock", "run", "unfinished")

    def __init__(self, run: AgentRun, state: ParallelState, lanes: list[AgentRun]) -> None:
        self.run = run
        self.lanes = lanes
        self.lock = threading.Lock()
        self.unfinished = list(state.unfinished)
        with contextlib.ExitStack() as kept:
            for index, lane in enumerate(lanes):
                kept.enter_context(lane.keep_history("lanes", index))
            run.save_state(state, flush=False)
            self.kept = kept.pop_all()  # kept until joined()

    def finished(
        self, index: int, lane: AgentRun, state: Callable[[list[int]], ParallelState]
    ) -> None:
        """Branch ``index`` ran to its end in ``lane`` (its child done with there): save it
        (the lane's last events with it). ``state(unfinished)``: the branches as they are
        now (the lanes are left out of the write: they are written as they grow)."""
        with self.lock:
            self.unfinished.remove(index)
            lane.save_state(state(list(self.unfinished)))

    def joined(self) -> None:
        """Every branch returned (finished or stopped): stop writing the lanes."""
        self.kept.close()

    def completed(self) -> None:
        """Every branch finished and the lanes joined the history: the Parallel is done.

        Its point stays, with no lanes and no unfinished branch (a resumed run has nothing to
        do there), until its parent moves on: an empty image would read as a run that never
        started. The joined history is written with it.
        """
        self.run.save_state(ParallelState(lanes=[[] for _ in self.lanes], unfinished=[]))


class _LockedSink:
    """Serializes sends from parallel branches into one downstream sink."""

    __slots__ = ("downstream", "lock")

    def __init__(self, downstream: Callable[[AgentEvent], object]) -> None:
        self.downstream = downstream
        self.lock = threading.Lock()

    def send(self, item: AgentEvent) -> None:
        with self.lock:
            self.downstream(item)


class _BranchSink:
    """A branch's view: interrupts and cancels are kept back, everything else is forwarded."""

    __slots__ = ("cancel", "downstream", "failed", "interrupt")

    def __init__(self, downstream: _LockedSink) -> None:
        self.downstream = downstream
        self.interrupt: AgentEvent | None = None
        self.cancel: AgentEvent | None = None
        self.failed = False

    @property
    def finished(self) -> bool:
        """Whether the branch ran to its end."""
        return self.interrupt is None and self.cancel is None and not self.failed

    def send(self, item: AgentEvent) -> None:
        if item.interrupted:
            self.interrupt = item
            return
        if isinstance(item.err, AgentCancelledError):
            # The Parallel reports one cancel for all its branches.
            self.cancel = item
            return
        if item.err is not None:
            self.failed = True
        self.downstream.send(item)


class ParallelAgent(WorkflowBase):
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
        *,
        agent_type: str | None = None,
    ) -> None:
        if max_workers is not None and (
            isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1
        ):
            raise AgentConfigError(f"max_workers must be None or >= 1 (got {max_workers!r})")
        super().__init__(name, description, sub_agents, agent_type=agent_type)
        self._max_workers = max_workers

    @property
    def max_workers(self) -> int | None:
        """How many branches run at once (``None``: all of them)."""
        return self._max_workers

    def execute(self, run: AgentRun) -> None:
        """Run the branches at once (a resumed run: the ones that did not finish)."""
        run, frame = self._placed(run)
        info = run.resume_info
        if info is None:
            lanes = [frame.log.fork() for _ in self._children]
            self._fork(run, frame, lanes, list(range(len(self._children))), [], None)
            return
        state = info.interrupt_state
        if not isinstance(state, ParallelState):
            raise ResumeError(no_state(self, state, ParallelState))
        lanes = []
        for index, saved in enumerate(state.lanes):
            lane = frame.log.fork()
            if not (index in state.unfinished and not self._leads_to(frame, self._children[index])):
                lane.restore(saved)  # a branch run again from its start gets a fresh lane
            lanes.append(lane)
        resumed = [i for i in state.unfinished if self._leads_to(frame, self._children[i])]
        fresh = [i for i in state.unfinished if i not in resumed]
        self._fork(run, frame, lanes, fresh, resumed, info)

    def _fork(
        self,
        run: AgentRun,
        frame: RunFrame,
        lanes: list[EventLog],
        fresh: list[int],
        resumed: list[int],
        resume: ResumeInfo | None,
    ) -> None:
        todo = sorted(fresh + resumed)
        state = self._state(lanes, todo)
        try:
            self._check_transition(frame)
        except AgentCancelledError:
            # Resumable: the resumed Parallel starts the branches it was about to start.
            self._stop_at(run, state)
            raise
        on_lanes = [at_frame(run, attrs.evolve(frame, log=lane)) for lane in lanes]
        durable = _DurableBranches(run, state, on_lanes) if run.durable else None
        downstream = run.forward
        shared = _LockedSink(downstream)
        branches = {index: _BranchSink(shared) for index in todo}

        def branch(index: int) -> None:
            child = self._children[index]
            on_lane = on_lanes[index]
            self._run_child(on_lane, (), child, branches[index].send,
                            resume is not None and index in resumed)
            if durable is not None and branches[index].finished:
                durable.finished(index, on_lane, partial(self._state, lanes))

        try:
            failures = self._run_branches(frame, todo, branch)
        finally:
            if durable is not None:
                durable.joined()
        for failure in failures:
            branches[failure[0]].failed = True
            shared.send(AgentEvent(agent_name=self._name, run_path=list(frame.run_path),
                                   err=failure[1]))
        unfinished = [index for index in todo if not branches[index].finished]
        cancels = [branches[i].cancel for i in unfinished if branches[i].cancel is not None]
        interrupts = [branches[i].interrupt for i in unfinished if branches[i].interrupt]
        if not unfinished:
            frame.log.commit(lanes)
            if durable is not None:
                durable.completed()
            return
        # Lanes are not committed: the resumed Parallel gets them back from its state.
        self._stop_at(run, self._state(lanes, unfinished), bool(interrupts) and not cancels)
        if cancels or interrupts:
            first = cancels[0] if cancels else interrupts[0]
            assert first is not None
            data = None
            if first.action is not None and first.action.interrupted is not None:
                data = first.action.interrupted.data
            # The branches' summary, on behalf of the Parallel (not an event of its own turn:
            # the branches' agents stopped, the Parallel only reports it once).
            downstream(
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
        self, frame: RunFrame, todo: list[int], branch: Callable[[int], None]
    ) -> list[tuple[int, BaseException]]:
        """Run ``branch(i)`` for every ``i`` of ``todo`` at once; return what escaped them.

        Branches run in lanes: at most ``max_workers`` lanes (one per branch without a
        limit), each running branches one after another, each branch in a copy of the
        context. The calling thread runs the first lane itself, the others are spawned on the
        run's threads (``RunScope.spawn``); all are joined before this returns, so no branch
        outlives the Parallel. Failures are listed in the order of ``todo``.
        """
        if not todo:
            return []
        lanes = min(self._max_workers or len(todo), len(todo))
        later = iter(todo[lanes:])
        lock = threading.Lock()
        failures: dict[int, BaseException] = {}

        def lane(first: int) -> None:
            index: int | None = first
            while index is not None:
                try:
                    run_in_copy(branch, index)  # each branch in a context of its own
                except Exception as error:
                    failures[index] = error
                with lock:
                    index = next(later, None)

        spawned = [
            frame.scope.spawn(lane, first, name=f"agentkit-parallel {self._name}")
            for first in todo[1:lanes]
        ]
        try:
            lane(todo[0])
        finally:
            frame.scope.settle()  # a Ctrl-C's cancel wakes the other lanes before the wait
            escaped = [future.exception() for future in spawned]  # waits for every lane
        for error in escaped:
            if error is not None:  # not an Exception: a lane lets it through
                raise error
        return [(index, failures[index]) for index in todo if index in failures]
