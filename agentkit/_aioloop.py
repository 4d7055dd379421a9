"""agentkit's one asyncio event loop: a private thread that runs ``async def`` tools and MCP.

Framework-internal. agentkit is synchronous, but some code users bring is not: ``async def``
tools (:mod:`agentkit.tools.function`) and the ``mcp`` package (:mod:`agentkit.mcp`). Both
run their coroutines here, on one event loop per process, in one daemon thread named
``agentkit-asyncio``:

* **Started on first use**, never by ``import agentkit``: a program without async tools and
  MCP clients never has this thread.
* **Never the caller's loop.** A Jupyter kernel's loop, or the loop of ``asyncio.run`` in the
  calling thread, is left alone; callers block in their own thread until their coroutine
  ended (:meth:`Task.wait`), as they would for a plain function.
* **Joined at exit.** An ``atexit`` handler stops the loop: the tasks still running are
  cancelled (an MCP connection then stops its server) and the thread is joined, within
  :data:`EXIT_GRACE` seconds.
* **Safe after fork.** A forked child does not have the parent's thread; it starts a loop of
  its own on first use. The parent's loop objects are kept, untouched, for the child's life:
  finalizing them would close what the parent still uses (an MCP server's process).

A coroutine that blocks (``time.sleep``, a synchronous HTTP call) blocks every other one of
the process; that is how asyncio works, and why the documentation of async tools says to
``await`` slow work.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextvars
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentkit.errors import AgentKitRuntimeError

if TYPE_CHECKING:  # asyncio itself is imported when the loop starts: a program without
    import asyncio  # async tools and MCP clients never pays for it (memory, import time)

__all__ = ["EXIT_GRACE", "THREAD_NAME", "Task", "in_loop_thread", "loop_thread", "start_task"]

_log = logging.getLogger("agentkit")

T = TypeVar("T")

THREAD_NAME = "agentkit-asyncio"
"""The name of the loop's thread."""

EXIT_GRACE = 10.0
"""Seconds the tasks still running at exit get to end after they were cancelled."""


class _Raised:
    """A ``KeyboardInterrupt``/``SystemExit`` a coroutine raised, carried to its caller: a task
    that raises one of them would stop the loop itself."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def _carried(coroutine: Coroutine[Any, Any, T]) -> T | _Raised:
    try:
        return await coroutine
    except (KeyboardInterrupt, SystemExit) as error:
        return _Raised(error)


class Task(Generic[T]):
    """A coroutine running on agentkit's loop, seen from the thread that started it.

    Its end is final: :meth:`wait` returns once the coroutine returned, raised or finished
    being cancelled (its ``finally`` blocks ran), never before.
    """

    __slots__ = ("_cancel_asked", "_future", "_loop", "_task")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._task: asyncio.Task[Any] | None = None  # set in the loop thread
        self._cancel_asked = False  # read and written in the loop thread only

    def cancel(self) -> None:
        """Cancel the coroutine (from any thread; does not block, does not wait)."""
        try:
            self._loop.call_soon_threadsafe(self._cancel_in_loop)
        except RuntimeError:  # the loop closed: the coroutine was cancelled already
            pass

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the coroutine ended; ``False`` if ``timeout`` seconds passed first."""
        done, _ = concurrent.futures.wait([self._future], timeout)
        return bool(done)

    @property
    def cancelled(self) -> bool:
        """``True`` once the coroutine ended cancelled."""
        return self._future.cancelled()

    def result(self) -> T:
        """The coroutine's result, or the exception it raised (after :meth:`wait`).

        Raises:
            concurrent.futures.CancelledError: the coroutine was cancelled.
        """
        value = self._future.result(0)
        if isinstance(value, _Raised):
            raise value.error
        return value  # type: ignore[no-any-return]

    # --- the loop's side ---

    def _start(self, make: Callable[[], Coroutine[Any, Any, T]], name: str | None) -> None:
        if self._cancel_asked:
            self._end_cancelled()
            return
        try:
            coroutine = make()
        except BaseException as error:
            self._future.set_exception(error)
            return
        self._task = self._loop.create_task(_carried(coroutine), name=name)
        self._task.add_done_callback(self._finish)

    def _cancel_in_loop(self) -> None:
        self._cancel_asked = True
        if self._task is not None:
            self._task.cancel()

    def _end_cancelled(self) -> None:
        self._future.cancel()
        # What wakes concurrent.futures.wait() for a cancelled future (as asyncio's own
        # run_coroutine_threadsafe does): cancel() alone only wakes result() and exception().
        self._future.set_running_or_notify_cancel()

    def _finish(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self._end_cancelled()
            return
        error = task.exception()
        if error is not None:
            self._future.set_exception(error)
        else:
            self._future.set_result(task.result())


class _LoopThread:
    """The loop and the thread that runs it (one per process)."""

    def __init__(self) -> None:
        import asyncio

        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import asyncio

        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                loop.run_until_complete(_end_tasks(EXIT_GRACE))
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

    def stop(self, timeout: float) -> None:
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # closed already
            return
        self.thread.join(timeout)
        if self.thread.is_alive():
            _log.warning("agentkit's event loop thread did not end within %s s", timeout)


async def _end_tasks(grace: float) -> None:
    """Cancel the tasks still running and give them ``grace`` seconds to end."""
    import asyncio

    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=grace)
        if pending:
            _log.warning(
                "%d coroutine(s) on agentkit's event loop ignored their cancellation at exit",
                len(pending),
            )


_lock = threading.Lock()
_current: _LoopThread | None = None
_inherited: list[_LoopThread] = []  # a forked child's copies of its parent's loop: kept
_exit_hook_installed = False


def _loop_thread() -> _LoopThread:
    global _current, _exit_hook_installed
    with _lock:
        if _current is None:
            _current = _LoopThread()
            if not _exit_hook_installed:
                atexit.register(_stop_at_exit)
                _exit_hook_installed = True
        return _current


def start_task(
    make: Callable[[], Coroutine[Any, Any, T]],
    *,
    inherit_context: bool,
    name: str | None = None,
) -> Task[T]:
    """Run the coroutine ``make()`` on agentkit's loop, starting the loop on first use.

    ``make`` is called in the loop thread. With ``inherit_context`` the coroutine runs in a
    copy of the caller's context (an agent run's session, tool call and cancel scope, as a
    tool's thread would see them); otherwise in an empty one (work that outlives the caller,
    such as an MCP connection). ``name`` names the asyncio task.

    Raises:
        RuntimeError: called from the loop's own thread (waiting there would block the loop).
    """
    if in_loop_thread():
        raise AgentKitRuntimeError(
            "agentkit's event loop cannot wait for itself: this code runs on that loop (inside "
            "an async tool or an MCP callback); from async code, await the coroutine directly, "
            "or run blocking agentkit calls in a thread (await asyncio.to_thread(...))"
        )
    runner = _loop_thread()
    task: Task[T] = Task(runner.loop)
    context = contextvars.copy_context() if inherit_context else contextvars.Context()
    runner.loop.call_soon_threadsafe(task._start, make, name, context=context)
    return task


def in_loop_thread() -> bool:
    """Whether the calling thread is the loop's thread."""
    current = _current
    return current is not None and threading.current_thread() is current.thread


def loop_thread() -> threading.Thread | None:
    """The loop's thread, if this process started it (for thread-leak checks)."""
    current = _current
    return None if current is None else current.thread


def _stop_at_exit() -> None:
    current = _current
    if current is not None and current.pid == os.getpid():
        current.stop(EXIT_GRACE + 5.0)


def _after_fork_in_child() -> None:
    global _current, _lock
    _lock = threading.Lock()  # another thread of the parent may have held it
    if _current is not None:
        _inherited.append(_current)
    _current = None


os.register_at_fork(after_in_child=_after_fork_in_child)
