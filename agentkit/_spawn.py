"""The run's thread pool: the one way work inside a run starts on another thread.

:meth:`agentkit.cancel.RunScope.spawn` hands work to the :class:`RunPool` of the run. The pool
copies the caller's ``contextvars`` context into the work (so tools see the run's frame,
session values and cancel scope), names the thread after the work, and returns a
:class:`concurrent.futures.Future` that carries the result or the exception (with its
traceback) back.

The pool grows on demand: work goes to an idle thread if there is one and to a new thread
otherwise, never into a queue behind busy threads. Work inside a run often waits for work it
spawned (a Parallel branch for its own branches, an agent tool for its parallel tool round),
so a bounded pool could deadlock at some nesting depth; this one cannot. The number of
threads is the most work that ran at once, whatever the nesting depth, and idle threads are
reused by later rounds. :meth:`RunPool.close` (from ``RunScope.finish()`` when the run ends)
joins every thread, so none outlives the run, except work explicitly given up with
:meth:`RunPool.release` (a tool call that overran its time limit), whose thread ends on its
own when that work returns.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from agentkit.errors import AgentKitError

__all__ = ["RunEndedError", "RunPool", "run_in_copy"]

T = TypeVar("T")


class RunEndedError(AgentKitError, RuntimeError):
    """Work was handed to a run that already ended (framework-internal)."""


def run_in_copy(fn: Callable[..., T], *args: object) -> T:
    """Run ``fn(*args)`` in this thread, in a copy of the current context.

    What ``fn`` sets in context variables stays in the copy, as it would in spawned work: the
    branch of a Parallel that runs in the calling thread is isolated like its spawned siblings.
    """
    return contextvars.copy_context().run(fn, *args)


class _Job:
    """One piece of spawned work and where it stands (guarded by the pool's lock)."""

    __slots__ = ("args", "context", "fn", "future", "name", "released", "worker")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[object, ...],
        name: str,
        future: Future[Any],
    ) -> None:
        self.fn = fn
        self.args = args
        self.name = name
        self.future = future
        self.context = contextvars.copy_context()
        self.worker: threading.Thread | None = None
        self.released = False

    def run(self) -> None:
        future = self.future
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = self.context.run(self.fn, *self.args)
        except BaseException as error:  # carried to whoever waits on the future
            future.set_exception(error)
        else:
            future.set_result(result)


class _Spawned:
    """What a pool keeps once work was spawned (most runs spawn nothing, and a run in flight
    is a few KiB: these are made at the first spawn)."""

    __slots__ = ("jobs", "pending", "threads")

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.threads: set[threading.Thread] = set()  # the threads close() joins
        self.pending: dict[Future[Any], _Job] = {}  # spawned work not finished yet


class RunPool:
    """The threads of one run's concurrent work (framework-internal; see the module doc).

    Args:
        label: what the idle threads are called (``agentkit-idle <label>``).
    """

    def __init__(self, label: str = "run") -> None:
        self._label = label
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for work; at least as many as jobs queued
        self._spawned: _Spawned | None = None  # made at the first spawn
        self._closed = False

    def spawn(self, fn: Callable[..., T], *args: object, name: str) -> Future[T]:
        """Run ``fn(*args)`` on a thread named ``name``, in a copy of the caller's context.

        Raises:
            RunEndedError: the pool was closed (the run ended).
        """
        future: Future[T] = Future()
        job = _Job(fn, args, name, future)
        with self._lock:
            if self._closed:
                raise RunEndedError(
                    f"cannot start {name!r}: its run already ended; start concurrent work "
                    "only from inside the run (a tool or an agent), before it returns"
                )
            spawned = self._spawned
            if spawned is None:
                spawned = self._spawned = _Spawned()
            spawned.pending[future] = job
            if self._idle:
                self._idle -= 1
                spawned.jobs.put(job)
                return future
            thread = threading.Thread(
                target=self._work, args=(spawned, job), name=name, daemon=True
            )
            spawned.threads.add(thread)
        thread.start()
        return future

    def release(self, future: Future[Any]) -> None:
        """Stop owning the work behind ``future``: :meth:`close` no longer waits for it.

        Work that has not started yet never starts; running work keeps its thread until it
        returns, and that thread then ends instead of taking more work.
        """
        with self._lock:
            spawned = self._spawned
            job = None if spawned is None else spawned.pending.get(future)
            if spawned is None or job is None or future.done() or future.cancel():
                return
            job.released = True
            if job.worker is not None:
                spawned.threads.discard(job.worker)

    def close(self) -> None:
        """Refuse new work and join every owned thread (busy ones when their work returns)."""
        with self._lock:
            self._closed = True
            spawned = self._spawned
            if spawned is None:
                return
            idle, self._idle = self._idle, 0
            threads = list(spawned.threads)
        for _ in range(idle):
            spawned.jobs.put(None)
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join()

    def _work(self, spawned: _Spawned, job: _Job | None) -> None:
        me = threading.current_thread()
        while job is not None:
            with self._lock:
                job.worker = me
            me.name = job.name
            job.run()  # never raises: the future carries what the work raised
            with self._lock:
                del spawned.pending[job.future]
                if job.released or self._closed:
                    spawned.threads.discard(me)
                    return
                self._idle += 1
            me.name = f"agentkit-idle {self._label}"
            job = None  # drop the finished work's references while waiting
            job = spawned.jobs.get()
