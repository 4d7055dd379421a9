"""Running agents: :func:`run_in_worker`, the one way agentkit starts a background worker.

Built-in agents are written push-style: ``_run_into(input, sink, options)`` runs the agent in
the calling thread and sends events into ``sink``. Wrappers (the flow wrapper, workflows, the
Runner) run their children in the same thread with a sink that transforms events on the way.
Only the outermost ``run()`` starts a thread, so a run's thread count does not grow with how
deeply agents are nested.
"""

from __future__ import annotations

import abc
import contextvars
import threading
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from agentkit._options import AgentRunOption
from agentkit._points import Journal, interrupt_contexts
from agentkit._runctx import EventLog, RunFrame, current_frame, use_frame
from agentkit._scope import RunScope
from agentkit.cancel import CancelMode
from agentkit.errors import ResumeError
from agentkit.events import Agent, AgentEvent, AgentInput, InterruptInfo, ResumeInfo
from agentkit.iterators import AsyncGenerator, _attach_producer, _Pair
from agentkit.results import RunIterator, RunOutcome

__all__ = ["BuiltinAgent", "EventSink", "run_in_worker"]


class EventSink(Protocol):
    """Where events go: ``send`` returns ``False`` once nobody wants more."""

    def send(self, item: AgentEvent) -> bool: ...


def run_in_worker(work: Callable[[Any], None]) -> RunIterator:
    """Run ``work(generator)`` in a new thread and return the iterator of what it sends.

    The iterator is a :class:`~agentkit.results.RunIterator`: ``result()`` waits for the end.

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
        # A bare run (no Runner): it gets its own scope, but no session.
        frame = RunFrame(scope=RunScope(), log=EventLog())
        return start_worker(work, frame, owns_scope=True, fill_interrupts=True)
    return start_worker(work, frame, owns_scope=False)


class _EventCallback:
    """Calls ``Runner.invoke``'s ``on_event`` with each event as it is delivered.

    The event goes through ``hand_out`` first (the iterator keeps a copy of its stream for
    ``result()``, as for the events it yields). Calls are serialized (a Parallel branch sends
    from its own thread). The first exception the callback raises is kept, the run is
    cancelled at once, and no further event is delivered; :func:`start_worker` raises the
    exception once the run has stopped.
    """

    __slots__ = ("callback", "downstream", "error", "hand_out", "lock", "scope")

    def __init__(
        self,
        downstream: EventSink,
        callback: Callable[[AgentEvent], object],
        hand_out: Callable[[AgentEvent], AgentEvent],
        scope: RunScope,
    ) -> None:
        self.downstream = downstream
        self.callback = callback
        self.hand_out = hand_out
        self.scope = scope
        self.lock = threading.Lock()
        self.error: BaseException | None = None

    def send(self, item: AgentEvent) -> bool:
        with self.lock:
            if self.error is not None or not self.downstream.send(item):
                return False
            try:
                self.callback(self.hand_out(item))
                return True
            except BaseException as error:  # raised again by start_worker, not swallowed
                self.error = error
        self.scope.request_cancel(CancelMode.IMMEDIATE)
        return False


class _BareRunSink:
    """The top of a run without a Runner: fills in the contexts of an interrupt event."""

    __slots__ = ("downstream", "journal")

    def __init__(self, downstream: EventSink, journal: Journal) -> None:
        self.downstream = downstream
        self.journal = journal

    def send(self, item: AgentEvent) -> bool:
        action = item.action
        if action is not None and action.interrupted is not None:
            action.interrupted = InterruptInfo(
                data=action.interrupted.data, contexts=interrupt_contexts(self.journal.points())
            )
        return self.downstream.send(item)


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
) -> RunIterator:
    """Start the worker thread of :func:`run_in_worker` in ``frame`` (framework-internal).

    The worker that owns the run's scope releases it (joins the tool pool) before closing
    the generator, and the iterator joins the worker at its end, so no thread outlives the
    run. Closing the iterator of a scope-owning worker cancels the run. The generator of a
    worker inside a run (a custom agent run by a built-in one) refuses events once the run is
    being cancelled. With ``fill_interrupts`` (a run without a Runner) interrupt events get
    their contexts here. ``outcome`` is filled by the Runner for :meth:`RunIterator.result`.
    """
    if outcome is None:
        outcome = RunOutcome()
    if outcome.session_values is None and frame.session is not None:
        outcome.session_values = frame.session.snapshot
    pair = _Pair()
    iterator = RunIterator(pair, outcome)
    generator: AsyncGenerator[AgentEvent] = AsyncGenerator(pair)
    context = contextvars.copy_context()
    scope = frame.scope
    sink: EventSink = generator
    if fill_interrupts:
        sink = _BareRunSink(generator, frame.journal)
    callback = None
    if on_event is not None:
        if not inline:
            raise ValueError("on_event is only for a run in the calling thread (inline)")
        sink = callback = _EventCallback(sink, on_event, iterator._hand_out, scope)

    def body() -> None:
        with use_frame(frame):
            try:
                work(sink)
            except BaseException as error:  # the consumer gets every failure as an event
                generator.send(AgentEvent(err=error))
            finally:
                try:
                    if owns_scope:
                        scope.finish()
                    if on_finish is not None:
                        on_finish()
                finally:
                    generator.close()

    if inline:
        # Nobody watches the run live (Runner.invoke): run it in the calling thread, the
        # events queue up for result(). No worker, no hand-over of every event.
        context.run(body)
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
        _attach_producer(iterator, thread, inside=inside, stop=scope.stop_event)
    thread.start()
    return iterator


class BuiltinAgent(abc.ABC):
    """The base of agentkit's own agents (framework-internal).

    Built-in agents are push-style: :meth:`_run_into` and :meth:`_resume_into` run the agent
    in the calling thread and send its events into a sink. ``run``/``resume`` are implemented
    once here over them, in a worker thread. The class attributes declare how the flow
    wrapper treats the agent.
    """

    passes_events_through: ClassVar[bool] = False
    """The agent forwards its children's events, which their own wrappers named and recorded
    already (workflows): the flow wrapper records none of them and acts on no action."""

    @property
    def hosts_flow(self) -> bool:
        """``True`` when the agent runs a flow of its own inside the wrapper's turn.

        Such an agent (a deterministic-transfer wrapper around a flow) sends the events of
        the flow's wrappers already named, some with the wrapper's own run path: the
        wrapper names, records and acts on the agent's unnamed events only.
        """
        return False

    def _prepare(self) -> None:  # noqa: B027 (an optional hook)
        """Check the agent can run (called by ``run``/``resume`` before the thread starts)."""

    def _entry(self) -> BuiltinAgent:
        """The agent whose ``_run_into``/``_resume_into`` a bare ``run()`` calls."""
        return self

    def run(self, input: AgentInput, *options: AgentRunOption) -> RunIterator:
        """Run the agent in a worker thread; returns the event iterator at once."""
        self._prepare()
        entry = self._entry()
        return run_in_worker(lambda sink: entry._run_into(input, sink, options))

    def resume(self, info: ResumeInfo, *options: AgentRunOption) -> RunIterator:
        """Resume the agent inside a run restored by the Runner; returns the event iterator."""
        self._prepare()
        entry = self._entry()
        return run_in_worker(lambda sink: entry._resume_into(info, sink, options))

    @abc.abstractmethod
    def _run_into(
        self, input: AgentInput | None, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        """Run the agent in this thread, sending its events into ``sink``."""

    def _resume_into(
        self, info: ResumeInfo, sink: EventSink, options: tuple[AgentRunOption, ...]
    ) -> None:
        raise ResumeError(f"agent {self!r} cannot be resumed")


def drive(
    agent: Agent,
    input: AgentInput | None,
    sink: EventSink,
    options: tuple[AgentRunOption, ...],
    resume: ResumeInfo | None = None,
) -> None:
    """Run ``agent`` in the current thread, sending its events into ``sink``.

    Built-in agents run inline. Other agents are pulled from the iterator their ``run()``
    (or ``resume()``) returns; it is closed as soon as ``sink`` wants no more, and a run
    cancelled meanwhile ends with the cancel error once the agent stopped. An exception
    raised by the agent becomes its final error event.
    """
    try:
        if isinstance(agent, BuiltinAgent):
            if resume is None:
                agent._run_into(input, sink, options)
            else:
                agent._resume_into(resume, sink, options)
            return
        _pull(agent, input, sink, options, resume)
    except Exception as error:
        sink.send(AgentEvent(err=error))


def _pull(
    agent: Agent,
    input: AgentInput | None,
    sink: EventSink,
    options: tuple[AgentRunOption, ...],
    resume: ResumeInfo | None,
) -> None:
    if resume is None:
        events = agent.run(input if input is not None else AgentInput(), *options)
    else:
        resume_method = getattr(agent, "resume", None)
        if not callable(resume_method):
            raise ResumeError(
                f"agent {agent.name!r} cannot be resumed: it has no resume() method"
            )
        events = resume_method(resume, *options)
    try:
        for event in events:
            if not sink.send(event):
                break
    finally:
        events.close()
    frame = current_frame()
    if frame is not None and events._cut_short:
        # The agent was told to stop (a send returned False): the run ends cancelled. An
        # agent that finished before the cancel is stopped at the next step boundary.
        frame.scope.check()
