"""Running agents: :func:`run_in_worker`, the one way agentkit starts a background worker.

Built-in agents are written push-style: ``_run_into(input, sink, options)`` runs the agent in
the calling thread and sends events into ``sink``. Wrappers (the flow wrapper, workflows, the
Runner) run their children in the same thread with a sink that transforms events on the way.
Only the outermost ``run()`` starts a thread, so a run's thread count does not grow with how
deeply agents are nested.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any, Protocol

from agentkit.cancel import CancelMode, RunScope
from agentkit.events import Agent, AgentEvent, AgentInput, ResumeInfo
from agentkit.iterators import AsyncIterator, _attach_producer, new_async_iterator_pair
from agentkit.options import AgentRunOption
from agentkit.runctx import EventLog, RunFrame, current_frame, use_frame

__all__ = ["EventSink", "run_in_worker"]



class EventSink(Protocol):
    """Where events go: ``send`` returns ``False`` once nobody wants more."""

    def send(self, item: AgentEvent) -> bool: ...


def run_in_worker(work: Callable[[Any], None]) -> AsyncIterator[AgentEvent]:
    """Run ``work(generator)`` in a new thread and return the iterator of what it sends.

    The thread runs with the caller's run context (session values, run path, interrupt
    address). An exception raised by ``work`` becomes a final event whose ``err`` is that
    exception (its traceback kept); the generator is always closed. When the consumer closes
    the iterator, ``generator.send`` returns ``False`` and, for a top-level run, the run is
    cancelled: no further model or tool call starts and open model streams are closed.

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
        return start_worker(work, RunFrame(scope=RunScope(), log=EventLog()), owns_scope=True)
    return start_worker(work, frame, owns_scope=False)


def start_worker(
    work: Callable[[Any], None],
    frame: RunFrame,
    *,
    owns_scope: bool,
    on_finish: Callable[[], object] | None = None,
) -> AsyncIterator[AgentEvent]:
    """Start the worker thread of :func:`run_in_worker` in ``frame`` (framework-internal).

    The worker that owns the run's scope releases it (joins the tool pool) before closing
    the generator, and the iterator joins the worker at its end, so no thread outlives the
    run. Closing the iterator of a scope-owning worker cancels the run.
    """
    iterator: AsyncIterator[AgentEvent]
    iterator, generator = new_async_iterator_pair()
    context = contextvars.copy_context()
    scope = frame.scope

    def body() -> None:
        with use_frame(frame):
            try:
                work(generator)
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
        _attach_producer(iterator, thread, inside=inside)
    thread.start()
    return iterator


def is_builtin(agent: object) -> bool:
    """``True`` for agents that implement the push-style ``_run_into`` protocol."""
    return getattr(agent, "_agentkit_push", False) is True


def drive(
    agent: Agent,
    input: AgentInput | None,
    sink: EventSink,
    options: tuple[AgentRunOption, ...],
    resume: ResumeInfo | None = None,
) -> None:
    """Run ``agent`` in the current thread, sending its events into ``sink``.

    Built-in agents run inline. Other agents are pulled from the iterator their ``run()``
    (or ``resume()``) returns; it is closed as soon as ``sink`` wants no more. An exception
    raised by a built-in agent becomes its final error event.
    """
    if is_builtin(agent):
        try:
            if resume is None:
                agent._run_into(input, sink, options)  # type: ignore[attr-defined]
            else:
                agent._resume_into(resume, sink, options)  # type: ignore[attr-defined]
        except Exception as error:
            sink.send(AgentEvent(err=error))
        return
    if resume is None:
        events = agent.run(input if input is not None else AgentInput(), *options)
    else:
        resume_method = getattr(agent, "resume", None)
        if resume_method is None:
            raise TypeError(f"agent {agent.name!r} cannot be resumed: it has no resume() method")
        events = resume_method(resume, *options)
    try:
        for event in events:
            if not sink.send(event):
                break
    finally:
        events.close()
