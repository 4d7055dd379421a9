"""The agent protocol: :class:`BaseAgent`, the :class:`AgentRun` it is given, and running a turn.

Every agent of agentkit, built-in or custom, is written one way: a :class:`BaseAgent` subclass
implements :meth:`BaseAgent.execute`, which runs one turn of the agent in the calling thread and
pushes the agent's events into the run with :meth:`AgentRun.emit`. ``run()`` and ``resume()``,
returning the Eino event iterator, are derived from it here, once. Agents written to the
iterator protocol instead (any object with ``name``, ``description`` and ``run``) keep working
through one adapter (:func:`run_agent` pulls their iterator).

Framework-internal: :func:`run_agent` runs one turn of any agent at a position of a run;
:func:`start_worker` starts the thread of a run, or runs it in the calling thread.
"""

from __future__ import annotations

import abc
import contextvars
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import attrs

from agentkit._cancel import CancelMode
from agentkit._ctrlc import InvokeGuard, ctrl_c_interrupt, exit_stops
from agentkit._events import (
    Agent,
    AgentAction,
    AgentEvent,
    AgentInput,
    InterruptInfo,
    ResumeInfo,
    RunStep,
    _named,
)
from agentkit._ids import new_id
from agentkit._observe import RunObservers, UsageLedger
from agentkit._options import AgentOptions, AgentRunOption, RunOptionSet
from agentkit._points import Journal, interrupt_contexts
from agentkit._progress import forget_points, save_point
from agentkit._results import RunIterator, RunOutcome
from agentkit._runctx import (
    EventLog,
    RecordedEvent,
    RunFrame,
    call_in_frame,
    current_frame,
    use_frame,
)
from agentkit._scope import RunScope
from agentkit.errors import AgentKitRuntimeError, ResumeError
from agentkit.iterators import (
    AsyncGenerator,
    _attach_producer,
    _end_refused,
    _Pair,
    _put_last,
)

__all__ = [
    "AgentRun",
    "at_frame",
    "BaseAgent",
    "call_run",
    "EventSink",
    "Turn",
    "execute_agent",
    "frame_of",
    "open_run",
    "parts_of",
    "record_event",
    "run_agent",
    "run_in_worker",
    "send_recorded",
    "sink_of",
    "start_worker",
    "turn_of",
]


class EventSink(Protocol):
    """Where the events of a run go next (framework-internal).

    What ``send`` returns is not the framework's business (an agent's iterator-style worker
    reads ``AsyncGenerator.send``'s answer); a run stops through its scope alone.
    """

    def send(self, item: AgentEvent) -> object: ...


class Turn:
    """What one agent turn's own events said (framework-internal): read by the code that ran it.

    ``last`` is the agent's last own event (a flow acts on its action: a transfer, an exit),
    ``error`` the error of its own error event, if it sent one.
    """

    __slots__ = ("error", "last")

    def __init__(self) -> None:
        self.last: AgentEvent | None = None
        self.error: BaseException | None = None

    @property
    def action(self) -> AgentAction | None:
        """The action of the agent's last own event."""
        last = self.last
        return None if last is None else last.action


class AgentRun:
    """One turn of one agent: what it runs with, and where its events go.

    :meth:`BaseAgent.execute` is given one. It is made by the framework (the Runner, a flow, a
    workflow, ``run()``), never changed afterwards (its attributes are read-only), and used in
    the thread that runs the turn (and the threads that thread starts).

    Attributes:
        input: the input of the turn (for a resumed turn, no messages: the agent goes on from
            the state it saved).
        resume_info: ``None`` for a fresh turn; for a resumed one, what the agent saved when it
            stopped and the resume data targeted at it (see :class:`~agentkit.ResumeInfo`).
        options: the run's options as this agent sees them, parsed once per run
            (:class:`~agentkit.options.AgentOptions`;
            ``get_impl_specific_options(S(), *run.options)``
            reads a custom agent's own options).
        run_path: where the agent runs: the agents from the run's root to this one (empty for
            an agent run directly with ``run()``, whose events are named by whoever reads them).
        transfer_targets: the agents this turn may transfer to, as the flow running it was
            wired (see :attr:`transfer_targets`).
    """

    __slots__ = (
        "_children",
        "_downstream",
        "_finished",
        "_frame",
        "_input",
        "_invocation_id",
        "_options",
        "_path",
        "_resume",
        "_targets",
        "_turn",
    )

    def __init__(
        self,
        input: AgentInput,
        resume_info: ResumeInfo | None,
        options: AgentOptions,
        run_path: tuple[RunStep, ...],
        *,
        frame: RunFrame,
        downstream: EventSink,
        transfer_targets: tuple[Agent, ...] = (),
    ) -> None:
        self._input = input
        self._resume = resume_info
        self._options = options
        self._path = run_path
        self._frame = frame
        self._downstream = downstream
        self._targets = transfer_targets
        self._turn = Turn()
        self._children: set[str] | None = None  # the children run so far (run_child)
        self._finished: list[tuple[str, ...]] | None = None  # completed since save_state
        self._invocation_id = new_id()

    @property
    def input(self) -> AgentInput:
        """The input of the turn."""
        return self._input

    @property
    def resume_info(self) -> ResumeInfo | None:
        """``None`` for a fresh turn; what the agent saved, for a resumed one."""
        return self._resume

    @property
    def options(self) -> AgentOptions:
        """The run's options as this agent sees them (parsed once per run)."""
        return self._options

    @property
    def run_path(self) -> tuple[RunStep, ...]:
        """The agents from the run's root to this one (empty for an agent run directly)."""
        return self._path

    @property
    def invocation_id(self) -> str:
        """This turn's id: every event the turn emits carries it, and so do the callbacks
        about the turn (Eino's ``InvocationID``). Each turn has its own, a resumed one too."""
        return self._invocation_id

    @property
    def transfer_targets(self) -> tuple[Agent, ...]:
        """The agents this turn may transfer to: the sub-agents of the agent's place in the
        flow, then its parent unless transfer to it is disallowed; empty outside a flow.

        The flow running the turn says so per turn, and the agent stores none of it: the same
        agent placed in two trees gets each tree's targets. A :class:`~agentkit.ChatModelAgent`
        offers them to its model with the transfer tool; a custom agent may do the same
        (``new_transfer_to_agent_action(name)`` moves the flow to one of them).
        """
        return self._targets

    @property
    def agent_name(self) -> str:
        """The name the agent's events carry (``""`` for an agent run directly)."""
        path = self._path
        return path[-1].agent_name if path else ""

    @property
    def streaming(self) -> bool:
        """Whether the run streams model output (``input.enable_streaming``)."""
        return self._input.enable_streaming

    def __repr__(self) -> str:
        path = "/".join(step.agent_name for step in self._path) or "-"
        resumed = ", resumed" if self._resume is not None else ""
        return f"AgentRun(run_path={path!r}{resumed})"

    def emit(self, event: AgentEvent) -> None:
        """Send one of the agent's own events into the run.

        The event is named here, once: an event without a run path gets this turn's agent name
        and run path (as a new event: nothing writes to an event once it is made). The agent's
        own message events join the run's history, so the next agents see them. An event that
        arrives named with another run path (one an inner run of the agent made) is passed on
        as it is, neither recorded nor counted as the agent's own.
        """
        recorded = self._record(event)
        if recorded is not None:
            self._downstream.send(recorded)

    def _record(self, event: AgentEvent) -> AgentEvent | None:
        """Name and record ``event`` as :meth:`emit` does, without sending it; return the
        event to send (``None``: an inner run's event, passed on at once)."""
        path = self._path
        own_path = event.run_path
        if not own_path:
            if path:
                event = _named(event, path[-1].agent_name, path, self._invocation_id)
        elif len(own_path) != len(path) or tuple(own_path) != path:
            self._downstream.send(event)
            return None
        if path:
            action = event.action
            if action is None or action.interrupted is None:
                self._frame.log.append(RecordedEvent.of(event, path))
        turn = self._turn
        turn.last = event
        if event.err is not None:
            turn.error = event.err
        return event

    def check_cancelled(self) -> None:
        """Raise :class:`~agentkit.AgentCancelledError` if the run is being cancelled now.

        Call it between steps of the agent's own (before a long call, between chunks of work);
        the framework checks before each model call, each tool call and each sub-agent.
        """
        self._frame.scope.check()

    @property
    def cancelled(self) -> bool:
        """``True`` once a cancel of the run was requested (any mode)."""
        return self._frame.scope.cancelled

    # --- composition and persistence: what built-in composites use, users can use too ---

    def forward(self, event: AgentEvent) -> None:
        """Pass ``event`` on into the run as it is: not named, not recorded, not this turn's.

        For a composite agent that holds a child's event back (see :meth:`run_child`'s
        ``sink``) and sends it on later, or that reports on behalf of its children.
        """
        self._downstream.send(event)

    def run_child(
        self,
        agent: Any,
        input: AgentInput | None = None,
        *,
        sink: Callable[[AgentEvent], object] | None = None,
        resume: bool | None = None,
        after: Sequence[str] = (),
    ) -> AgentEvent | None:
        """Run one turn of ``agent`` inside this turn, in this thread; return its last event.

        The child runs one level below this agent: its events are named with its own run path
        (this turn's, then ``after``, then the child's name), its messages join the run's
        history, it is cancelled with the run, counted in the run's usage and reported to the
        callbacks, and it saves and resumes at its own address (``agent:<name>`` under this
        agent's). Its events go on into the run as they come, or to ``sink`` when one is given
        (a composite that holds an event back passes it on later with :meth:`forward`).

        Returns the last event of the child's turn (``None`` if it sent none): its ``err`` says
        it failed or was cancelled, ``interrupted`` that it paused the run (a composite then
        returns too, having saved where it is with :meth:`save_state`), ``action`` an exit or a
        transfer it asked for.

        Args:
            agent: any agent (a :class:`BaseAgent`, a built-in agent, an iterator-protocol
                agent). Wrapped as a flow node (``agent_with_options(agent)``) it builds its
                input from the run's history, as a workflow's children do.
            input: the child's input (default: this turn's :attr:`input`).
            sink: where the child's events go instead of into the run.
            resume: whether the child goes on from where it stopped. ``None`` (the default)
                decides: in a resumed turn, the first turn of a child under which the saved run
                stopped resumes it; every other turn is fresh.
            after: names shown between this agent and the child in the child's run path (a
                Sequential shows the children that ran before).
        """
        frame = self._frame
        if after:
            frame = attrs.evolve(
                frame, run_path=frame.run_path + tuple(RunStep(name) for name in after)
            )
        name = agent.name
        place = frame.at_agent(RunStep(name))
        info = (
            None
            if resume is False or self._resume is None or place.resume is None
            else self._child_resume(place, name, resume)
        )
        children = self._children
        if children is None:
            children = self._children = set()
        children.add(name)
        watch = _ChildWatch(self._downstream.send if sink is None else sink)
        run_agent(agent, place, watch, self._input if input is None else input, info)
        if not watch.stopped:
            # Completed: nothing of it is to be resumed. In memory now; in a durable run with
            # this agent's next declared state (one commit: see save_state).
            forget_points(place, by_parent=False)
            finished = self._finished
            if finished is None:
                finished = self._finished = []
            finished.append(place.address)
        return watch.last

    def _child_resume(self, place: RunFrame, name: str, resume: bool | None) -> ResumeInfo | None:
        """The :class:`ResumeInfo` of a child's turn at ``place`` (``None``: a fresh turn)."""
        mine = self._resume
        resume_state = place.resume
        assert mine is not None and resume_state is not None
        if resume is None:
            ran = self._children
            if (ran is not None and name in ran) or not resume_state.leads_to(
                self._frame.address, f"agent:{name}"
            ):
                return None
        point = resume_state.at(place.address)
        return ResumeInfo(
            enable_streaming=mine.enable_streaming,
            interrupt_info=mine.interrupt_info,
            was_interrupted=point.was_interrupted,
            interrupt_state=point.state,
            is_resume_target=point.is_resume_target,
            resume_data=point.data,
        )

    @property
    def durable(self) -> bool:
        """Whether :meth:`save_state` writes to the checkpoint store before it returns
        (``Runner(durability="step")`` with a checkpoint id).

        A composite that must not show a result before the step that made it is durable
        (a crash would make it again, differently) records the event at once and sends it
        (:meth:`forward`) after its next :meth:`save_state`, as a ChatModelAgent does with
        its model replies.
        """
        return self._frame.progress is not None

    def save_state(
        self,
        state: Any,
        *,
        info: Any = None,
        root_cause: bool = False,
        completed: Iterable[str] = (),
        clear: bool = False,
        flush: bool = True,
        sync: bool = False,
    ) -> None:
        """Declare where this agent is: the state a resumed turn goes on from.

        Call it at the agent's step boundaries (before each child, after each piece of work
        that must not be done twice, and where it stops) with a value the checkpoint
        serializer accepts (builtins, or your own classes given to
        ``PickleSerializer(allowed_types=...)``). The Runner keeps the latest one: with
        ``durability="stop"`` in memory, saved in the checkpoint if the run stops (interrupt,
        cancel, failure); with ``durability="step"`` it is written to the store, with the
        run's history so far, before this call returns, so a run whose process died goes on
        from it. Without a checkpoint id it is kept in memory only. A write holds what changed
        since the agent's previous declaration (a list that grew is written as its new items):
        the Runner keeps a shallow copy of what it wrote, so the agent may change its value in
        place between two calls; items are compared by identity (replace an item of a list
        rather than change it).

        A resumed turn gets the state back as ``run.resume_info.interrupt_state``. The children
        that completed since the last call (:meth:`run_child`, and the ones named in
        ``completed``) are done with in the same write: a resumed run neither runs them again
        nor loses the step. The state of an agent whose turn completes is dropped by whoever
        ran it.

        Args:
            state: where the agent is.
            info: what an interrupt shows for this agent (``InterruptContext.info``), when the
                run stops here.
            root_cause: this agent itself pauses the run (it emits an interrupt event next):
                its point is the interrupt's root cause, with ``info``.
            completed: address segments below this agent (``"tool:<name>:<call id>"``,
                ``"agent:<name>"``) of work that completed: what was saved there is dropped.
            clear: what was saved at and below this agent is dropped first, whatever it was
                (a flow node whose agent's turn ended in a transfer: only the transfer is
                left to resume).
            flush: ``False`` keeps the state for the next write (the next ``save_state`` or
                the stop's save) instead of writing now: for a declaration made where the
                agent stops, which the stop's save holds anyway.
            sync: the write must survive a power loss too, not only the process (before
                work that must not run twice unnoticed).
        """
        frame = self._frame
        address = frame.address
        done = self._finished or ()
        self._finished = None
        dropped = [(*address, segment) for segment in completed]
        if clear:
            dropped.insert(0, address)
        save_point(
            frame, state, info=info, root_cause=root_cause, dropped=dropped, done=done,
            flush=flush, sync=sync,
        )

    def keep_history(self, field: str, index: int | None = None) -> AbstractContextManager[None]:
        """Within the ``with`` block, have the writer keep this run's history in ``field`` of
        this agent's saved state, for a composite whose children record into a history of
        their own rather than the run's (a Parallel's branch, an agent tool's inner run).

        In a durable run (:attr:`durable`), each write made in the block (the agent's
        :meth:`save_state`, its children's) carries the entries recorded in this run's
        history since the previous write, appended to the list ``field`` of the state saved
        here (with ``index``, to the list at that position of it), so the saved history
        never runs behind the saved points. The field is the writer's in the block: the
        block's first :meth:`save_state` writes the value given in it whole (make it the
        history as it is when the block starts), later ones leave the field out. After the
        block the next :meth:`save_state` writes the state whole. Outside a durable run the
        block does nothing: save the history in the state at a stop.

        Raises:
            AgentKitRuntimeError: this run's history is kept already (the history of the
                run itself is, in the checkpoint's own history field).

        Args:
            field: the name of a list field of the state this agent saves.
            index: the position, in that field, of the list the entries go to.
        """
        return _KeptHistory(self._frame, field, index)

    def discard_state(self) -> None:
        """Forget what was saved at and below this agent: it handled its stop and went on
        (a failure turned into a message, a call that is made again), so a stop of the run
        does not resume it there.

        A durable run's store keeps what was written there until the agent above saves next
        (or a save is made here again, or the run stops): a process that dies in between goes
        on here, from the last step written.
        """
        forget_points(self._frame)


class _KeptHistory:
    """The ``with`` block of :meth:`AgentRun.keep_history`."""

    __slots__ = ("field", "frame", "index")

    def __init__(self, frame: RunFrame, field: str, index: int | None) -> None:
        self.frame = frame
        self.field = field
        self.index = index

    def __enter__(self) -> None:
        frame = self.frame
        progress = frame.progress
        if progress is not None and not progress.track(
            frame.log, frame.address, self.field, self.index
        ):
            raise AgentKitRuntimeError(
                f"keep_history({self.field!r}): this run's history is kept already (it is "
                "the run's own history, or a keep_history block on it is open); keep a "
                "history only for a run whose children record into a history of its own"
            )

    def __exit__(self, *exc_info: object) -> None:
        frame = self.frame
        if frame.progress is not None:
            frame.progress.untrack(frame.log)


class _ChildWatch:
    """Passes a child's events on, noting its last one and whether it stopped the run."""

    __slots__ = ("last", "send_on", "stopped")

    def __init__(self, send_on: Callable[[AgentEvent], object]) -> None:
        self.send_on = send_on
        self.last: AgentEvent | None = None
        self.stopped = False

    def send(self, item: AgentEvent) -> None:
        self.last = item
        if item.err is not None or (
            item.action is not None and item.action.interrupted is not None
        ):
            self.stopped = True
        self.send_on(item)


class BaseAgent(abc.ABC):
    """The base class of agents: implement :meth:`execute`, get ``run()`` and ``resume()``.

    Subclasses give the agent a ``name`` and a ``description`` (attributes or properties) and
    implement one method, :meth:`execute`, which runs one turn in the calling thread and pushes
    the agent's events with :meth:`AgentRun.emit`::

        class Echo(BaseAgent):
            name = "echo"
            description = "repeats the last message"

            def execute(self, run: AgentRun) -> None:
                text = run.input.messages[-1].content
                run.emit(event_from_message(assistant_message(text), None, Role.ASSISTANT))

    Such an agent behaves like a built-in one wherever it runs: as the Runner's agent (under
    ``Runner.invoke`` it runs in the calling thread: no thread is started), as a sub-agent that
    transfers (emit ``new_transfer_to_agent_action(name)``), inside workflows and agent tools; it is
    cancelled at the framework's checks and its own :meth:`AgentRun.check_cancelled`; it
    interrupts by emitting :func:`~agentkit.interrupt_event` as its last event and is resumed
    with ``run.resume_info`` set. It composes other agents as the built-in workflows do, with
    :meth:`AgentRun.run_child` and :meth:`AgentRun.save_state`. An exception raised by
    :meth:`execute` ends the turn with an error event.
    """

    name: str
    description: str

    @abc.abstractmethod
    def execute(self, run: AgentRun) -> None:
        """Run one turn of the agent, sending its events with ``run.emit(event)``.

        ``run.resume_info`` is ``None`` for a fresh turn. When it is set, the run is resumed
        here: the agent (or something inside it) stopped at its last turn, and
        ``run.resume_info.interrupt_state`` is the state it saved (``interrupt_event(...,
        state=...)``, or the last one declared with :meth:`AgentRun.save_state`); an agent
        that cannot go on raises :class:`~agentkit.errors.ResumeError`.
        """

    def run(self, input: AgentInput, *options: AgentRunOption) -> RunIterator:
        """Start a turn of the agent in a worker thread; returns the event iterator at once.

        Called inside a run (by another agent), the turn is part of that run (same session,
        cancellation and history); its own events come unnamed, for the caller to name. Use
        :class:`~agentkit.Runner` to run an agent as a run of its own.
        """
        return _run_directly(self, input, None, options)

    def resume(self, info: ResumeInfo, *options: AgentRunOption) -> RunIterator:
        """Resume the agent inside a run restored by the Runner; returns the event iterator."""
        return _run_directly(self, AgentInput(enable_streaming=info.enable_streaming), info,
                             options)

    def get_type(self) -> str:
        """The agent's type as callbacks report it (default: the class name)."""
        return type(self).__name__


# --- running one turn -------------------------------------------------------------------------


def frame_of(run: AgentRun) -> RunFrame:
    """The run context of ``run``'s turn (framework-internal: the ReAct loop reads its scope,
    usage ledger and history there; a flow and a Parallel place turns in it)."""
    return run._frame


def sink_of(run: AgentRun) -> EventSink:
    """Where ``run``'s events go (framework-internal: a flow runs its wrapped agent's turns
    and the turns it transfers to into the same sink; :meth:`AgentRun.forward` is the
    public way to send an event there)."""
    return run._downstream


def at_frame(run: AgentRun, frame: RunFrame) -> AgentRun:
    """``run`` in the run context ``frame`` (framework-internal: a workflow run directly gets a
    session and a root input; a Parallel's branch keeps its history in a lane of its own)."""
    if frame is run._frame:
        return run
    return AgentRun(
        run._input,
        run._resume,
        run._options,
        run._path,
        frame=frame,
        downstream=run._downstream,
        transfer_targets=run._targets,
    )


class _NoEvents:
    """The sink of a run that saves and sends nothing (:func:`call_run`)."""

    __slots__ = ()

    def send(self, item: AgentEvent) -> None:
        raise AssertionError(f"a tool call's run sends no events (got {item!r})")


def call_run(frame: RunFrame) -> AgentRun:
    """The run of the tool call at ``frame`` (framework-internal): what the code around a
    tool call (the ReAct loop, an agent tool) saves and drops its state at the call's
    address with. It sends no events."""
    return AgentRun(AgentInput(), None, frame.options.for_agent(""), (), frame=frame,
                    downstream=_NoEvents())


def parts_of(run: AgentRun) -> tuple[RunFrame, EventSink, ResumeInfo | None, bool]:
    """``run``'s frame, sink and resume info, and whether its events are named, in one call
    (framework-internal: the flow wrapper reads them on every turn)."""
    return run._frame, run._downstream, run._resume, bool(run._path)


def turn_of(run: AgentRun) -> Turn:
    """What ``run``'s own events said so far (framework-internal: a flow acts on it)."""
    return run._turn


def record_event(run: AgentRun, event: AgentEvent) -> AgentEvent | None:
    """Record ``event`` in ``run`` (its history, its turn) without sending it yet; return the
    event to pass to :func:`send_recorded` (``None``: nothing left to send).

    A durable run records a step's event, commits the step, and only then sends the event, so
    that no reader sees a step a crash could still undo.
    """
    return run._record(event)


def send_recorded(run: AgentRun, event: AgentEvent) -> None:
    """Send an event :func:`record_event` recorded."""
    run._downstream.send(event)


def open_run(
    frame: RunFrame,
    downstream: EventSink,
    input: AgentInput,
    resume_info: ResumeInfo | None = None,
    *,
    named: bool = True,
    transfer_targets: tuple[Agent, ...] = (),
) -> AgentRun:
    """The :class:`AgentRun` of a turn at ``frame`` (the agent's place: its run path and address
    end with it) whose events go to ``downstream``. With ``named=False`` (an agent run
    directly) its events stay unnamed and out of the history: whoever reads them does that.
    ``transfer_targets``: where the turn may transfer (a flow's place in its tree)."""
    path = frame.run_path
    return AgentRun(
        input,
        resume_info,
        frame.options.for_agent(path[-1].agent_name if path else ""),
        path if named else (),
        frame=frame,
        downstream=downstream,
        transfer_targets=transfer_targets,
    )


def execute_agent(agent: Any, run: AgentRun) -> Turn:
    """Run ``agent``'s turn in ``run``, in this thread; an exception becomes its error event.
    Returns what the turn's own events said.

    A :class:`BaseAgent` runs through :meth:`BaseAgent.execute`; any other agent through its
    ``run()``/``resume()`` iterator, pulled here: the one adapter for the iterator protocol.
    """
    call_in_frame(run._frame, _execute, agent, run)
    return run._turn


# Whether agents of a class are BaseAgents, by class: isinstance() against an ABC runs Python
# code of its own on every turn. Bounded: classes made at run time (a notebook cell run again)
# are not kept alive by it.
_base_agent_classes: dict[type, bool] = {}
_MAX_REMEMBERED_CLASSES = 256


def _execute(agent: Any, run: AgentRun) -> None:
    try:
        kind = agent.__class__
        is_base = _base_agent_classes.get(kind)
        if is_base is None:
            is_base = isinstance(agent, BaseAgent)
            if len(_base_agent_classes) < _MAX_REMEMBERED_CLASSES:
                _base_agent_classes[kind] = is_base
        if is_base:
            agent.execute(run)
        else:
            _pull(agent, run)
    except Exception as error:
        run.emit(AgentEvent(err=error))


def run_agent(
    agent: Any,
    frame: RunFrame,
    downstream: EventSink,
    input: AgentInput,
    resume_info: ResumeInfo | None = None,
    *,
    named: bool = True,
) -> Turn:
    """Run one turn of ``agent`` at ``frame`` in this thread; return what its events said."""
    return execute_agent(agent, open_run(frame, downstream, input, resume_info, named=named))


def _pull(agent: Any, run: AgentRun) -> None:
    """The iterator-protocol adapter: emit what ``agent.run()``/``resume()`` yields.

    When the run is cancelled while the agent runs, its worker (:func:`run_in_worker`) is
    refused further events, stops, and ends its events with the cancel error.
    """
    info = run.resume_info
    if info is None:
        events = agent.run(run.input, *run.options)
    else:
        resume = getattr(agent, "resume", None)
        if not callable(resume):
            raise ResumeError(
                f"agent {agent.name!r} stopped inside its turn but cannot be resumed: it has "
                "no resume() method; give it one (see agentkit.ResumableAgent), or subclass "
                "agentkit.BaseAgent"
            )
        events = resume(info, *run.options)
    try:
        for event in events:
            run.emit(event)
    finally:
        events.close()


# --- starting a run's thread ----------------------------------------------------------------------


def run_in_worker(work: Callable[[Any], None]) -> RunIterator:
    """Run ``work(generator)`` in a new thread and return the iterator of what it sends.

    The way to write an agent to the iterator protocol (``run()`` returning an iterator); a
    :class:`BaseAgent` subclass needs no thread of its own. The iterator is a
    :class:`~agentkit.results.RunIterator`: ``result()`` waits for the end.

    The thread runs with the caller's run context (session values, run path, interrupt
    address). An exception raised by ``work`` becomes a final event whose ``err`` is that
    exception (its traceback kept); the generator is always closed. Once the run is cancelled
    (``CancelHandle.cancel()``, or the consumer closed the iterator), ``generator.send``
    returns ``False``: stop then. Long-running work can also call
    :func:`~agentkit.check_cancelled` between steps of its own.

    Example, a custom agent::

        class Echo:
            name = "echo"
            description = "repeats the last message"

            def run(self, input, *options):
                def work(gen):
                    text = input.messages[-1].content
                    gen.send(event_from_message(assistant_message(text), None, Role.ASSISTANT))
                return run_in_worker(work)
    """
    frame = current_frame()
    if frame is None:
        # A run of its own (no Runner): its own scope, no session.
        frame = RunFrame(scope=RunScope(), log=EventLog())
        return start_worker(work, frame, owns_scope=True, fill_interrupts=True)
    return start_worker(work, frame, owns_scope=False)


def _run_directly(
    agent: BaseAgent,
    input: AgentInput,
    resume_info: ResumeInfo | None,
    options: tuple[AgentRunOption, ...],
) -> RunIterator:
    """``agent.run()``/``resume()``: a turn at the caller's place, or a run of its own."""
    caller = current_frame()
    if caller is None:
        parsed = RunOptionSet(options)
        limits = parsed.run.limits
        base = RunFrame(
            scope=RunScope(),
            log=EventLog(),
            # No checkpoint without a Runner: a limit that is reached ends the run.
            observers=RunObservers.from_options(
                options, None if limits is None else UsageLedger(limits)
            ),
            options=parsed,
        )
    else:
        base = caller
    frame = base.at_agent(RunStep(agent.name))

    def work(sink: EventSink) -> None:
        run_agent(agent, frame, sink, input, resume_info, named=False)

    if caller is None:
        return start_worker(work, frame, owns_scope=True, fill_interrupts=True)
    return start_worker(work, frame, owns_scope=False)


class _EventCallback:
    """Calls ``Runner.invoke``'s ``on_event`` with each event as it is delivered.

    Calls are serialized (a Parallel branch sends from its own thread). The first exception
    the callback raises is kept, the run is cancelled at once, and no further event is
    delivered; :func:`start_worker` raises the exception once the run has stopped.
    """

    __slots__ = ("callback", "downstream", "error", "lock", "scope")

    def __init__(
        self, downstream: EventSink, callback: Callable[[AgentEvent], object], scope: RunScope
    ) -> None:
        self.downstream = downstream
        self.callback = callback
        self.scope = scope
        self.lock = threading.Lock()
        self.error: BaseException | None = None

    def send(self, item: AgentEvent) -> None:
        with self.lock:
            if self.error is not None:
                return
            self.downstream.send(item)
            try:
                self.callback(item)
                return
            except BaseException as error:  # raised again by start_worker, not swallowed
                self.error = error
        self.scope.request_cancel(CancelMode.IMMEDIATE)


class _BareRunSink:
    """The top of a run without a Runner: gives an interrupt event its contexts."""

    __slots__ = ("downstream", "journal")

    def __init__(self, downstream: EventSink, journal: Journal) -> None:
        self.downstream = downstream
        self.journal = journal

    def send(self, item: AgentEvent) -> object:
        action = item.action
        if action is not None and action.interrupted is not None:
            contexts = interrupt_contexts(self.journal.points())
            interrupted = InterruptInfo(data=action.interrupted.data, contexts=contexts)
            item = attrs.evolve(item, action=attrs.evolve(action, interrupted=interrupted))
        return self.downstream.send(item)


def _outcome_of(frame: RunFrame, outcome: RunOutcome | None) -> RunOutcome:
    """What ``result()`` reads of the run at ``frame`` besides its events."""
    if outcome is None:
        outcome = RunOutcome()
    if outcome.session_values is None and frame.session is not None:
        outcome.session_values = frame.session.snapshot
    if outcome.usage is None:
        outcome.usage = frame.observers.usage
    return outcome


def _run_inline(
    body: Callable[[], None],
    context: contextvars.Context,
    scope: RunScope,
    outcome: RunOutcome,
) -> None:
    """Run ``body`` in this thread; a Ctrl-C meanwhile cancels the run (see ``_ctrlc``).

    Raises:
        KeyboardInterrupt: Ctrl-C was pressed; the run has stopped (and was saved, if it
            has a checkpoint id) or a second Ctrl-C gave up waiting for it.
    """
    guard = InvokeGuard(scope)
    try:
        with guard:
            context.run(body)
    except KeyboardInterrupt:
        if not guard.pressed:
            raise
    if guard.pressed:
        raise ctrl_c_interrupt(outcome.checkpoint_id, stopped=not guard.forced)


def start_worker(
    work: Callable[[Any], None],
    frame: RunFrame,
    *,
    owns_scope: bool,
    on_finish: Callable[[], object] | None = None,
    fill_interrupts: bool = False,
    outcome: RunOutcome | None = None,
    inline: bool = False,
    on_event: Callable[[AgentEvent], object] | None = None,
    stop_at_exit: bool = False,
) -> RunIterator:
    """Run ``work(sink)`` in a new thread, or inline, and return the iterator of its events.

    The worker that owns the run's scope ends it (``scope.finish()`` joins the run's threads)
    before closing the generator, and the iterator joins the worker at its end, so no thread
    outlives the run. Closing the iterator of a scope-owning worker cancels the run. With
    ``fill_interrupts`` (a run without a Runner) interrupt events get their contexts here.
    ``outcome`` is filled by the Runner for :meth:`RunIterator.result`. ``inline`` runs the
    work in the calling thread (``Runner.invoke``), with ``on_event`` called for each event.
    With ``stop_at_exit`` (a run with a checkpoint id), a worker still going when the program
    exits is cancelled and waited for, so that its run is saved (see ``_ctrlc``).
    """
    outcome = _outcome_of(frame, outcome)
    pair = _Pair()
    scope = frame.scope
    iterator = RunIterator(
        pair, outcome, scope if owns_scope else None, frame.steering if owns_scope else None
    )
    generator: AsyncGenerator[AgentEvent] = AsyncGenerator(pair)
    context = contextvars.copy_context()
    sink: EventSink = generator
    if fill_interrupts:
        sink = _BareRunSink(sink, frame.journal)
    callback = None
    if on_event is not None:
        if not inline:
            raise ValueError("on_event is only for a run in the calling thread (inline)")
        sink = callback = _EventCallback(sink, on_event, scope)

    untrack: Callable[[], None] | None = None  # set before the worker starts

    def body() -> None:
        with use_frame(frame):
            try:
                work(sink)
            except BaseException as error:  # the consumer gets every failure as an event
                _put_last(generator, AgentEvent(err=error))
            else:
                # Told to stop (a send was refused): the work ended early, as cancelled.
                _end_refused(generator, lambda: AgentEvent(err=scope.cancel_error()))
            finally:
                # Each step even if the one before was cut (a Ctrl-C while joining a tool
                # that ignores the cancel): locks and leases are given back all the same.
                try:
                    if owns_scope:
                        scope.finish()
                finally:
                    try:
                        if on_finish is not None:
                            on_finish()
                    finally:
                        generator.close()
                        if untrack is not None:
                            untrack()

    if inline:
        # Nobody watches the run live (Runner.invoke): run it in the calling thread, the
        # events queue up for result(). No worker, no hand-over of every event.
        _run_inline(body, context, scope, outcome)
        if callback is not None and callback.error is not None:
            raise callback.error
        return iterator
    thread = threading.Thread(target=context.run, args=(body,), name="agentkit-run", daemon=True)

    def inside() -> bool:
        # A tool of this very run closing the iterator must not wait for the run to end.
        current = current_frame()
        return current is not None and current.scope is scope

    if owns_scope:
        _attach_producer(
            iterator, thread, lambda: scope.request_cancel(CancelMode.IMMEDIATE), inside
        )
    else:
        _attach_producer(iterator, thread, inside=inside, stop=scope.stop_requested)
    if stop_at_exit and owns_scope:
        untrack = exit_stops.track(scope, thread)
    thread.start()
    return iterator
