"""Running ``async def`` tools: each call is a task on agentkit's event loop.

Framework-internal; see :mod:`agentkit._aioloop` for the loop and
:class:`~agentkit.tools.FunctionTool` for what users are told. The calling thread
(the agent's, or a tool thread of its round) waits for the task; an immediate cancel of the
run, or the end of the call's time limit, cancels the task (``asyncio.CancelledError`` at
the coroutine's ``await``) and the wait ends once the coroutine finished its cleanup, so the
same rules hold as for plain functions.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

from agentkit._aioloop import Task, start_task
from agentkit._runctx import abort_on_cancel, check_cancelled
from agentkit.errors import ToolError

__all__ = ["AsyncItems", "await_in_loop"]

T = TypeVar("T")

_CLOSE_WAIT = 10.0  # seconds closing an async generator may take before the reader stops waiting


def await_in_loop(make: Callable[[], Awaitable[T]], tool_name: str) -> T:
    """Run ``make()`` (a coroutine of a tool's function) on the loop and wait for its end.

    The coroutine sees the caller's context (session values, the tool call, the run's
    cancel). Its result is returned and its exception raised as they are.

    Raises:
        AgentCancelledError: the run was cancelled (or the call's time limit ended) while
            the coroutine ran; it was cancelled and has ended.
        ToolError: the coroutine ended cancelled for another reason (it cancelled itself,
            or the process is exiting).
    """

    async def call() -> T:
        return await make()

    # The abort is registered before the coroutine can start: a cancel always finds this
    # wait registered (so a timed call's waiter knows the call is ending and waits for its
    # cleanup), and one that comes before the task exists cancels it as soon as it does.
    tasks: list[Task[T]] = []
    aborted = threading.Event()
    lock = threading.Lock()

    def abort() -> None:  # never blocks: a cancel does not wait for the task to start
        aborted.set()
        with lock:
            started = tasks[0] if tasks else None
        if started is not None:
            started.cancel()

    try:
        with abort_on_cancel(abort):
            name = f"agentkit-tool {tool_name}"
            task = start_task(call, inherit_context=True, name=name)
            with lock:
                tasks.append(task)
            # The flag is set before abort() looks for the task, and the task published
            # before this looks at the flag: one of the two cancels it.
            if aborted.is_set():
                task.cancel()
            task.wait()
    except BaseException:
        # The run was being cancelled, or KeyboardInterrupt in this thread. Either way the
        # caller goes on only once the coroutine's cleanup ran, as on the path above.
        if tasks:
            tasks[0].cancel()
            tasks[0].wait()
        raise
    try:
        return task.result()
    except concurrent.futures.CancelledError:
        check_cancelled()
        raise ToolError(
            f"{tool_name}: the async call was cancelled, but not by its agent run: the "
            "coroutine cancelled itself, or the process is exiting",
            tool_name=tool_name,
        ) from None


class AsyncItems(Iterator[Any]):
    """The items of an async generator (an ``async def`` tool that yields), read from a thread.

    Each ``next()`` runs one step of the generator on the loop, with the same cancel rules
    as :func:`await_in_loop`; :meth:`close` closes the generator there.
    """

    def __init__(self, generator: AsyncIterator[Any], tool_name: str) -> None:
        self._generator = generator
        self._tool_name = tool_name
        self._done = False

    def __iter__(self) -> AsyncItems:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        try:
            return await_in_loop(self._generator.__anext__, self._tool_name)
        except StopAsyncIteration:
            self._done = True
            raise StopIteration from None

    def close(self) -> None:
        """Close the generator (its ``finally`` blocks run on the loop); idempotent."""
        if self._done:
            return
        self._done = True
        aclose = getattr(self._generator, "aclose", None)
        if aclose is None:
            return

        async def close() -> None:
            await aclose()

        task = start_task(close, inherit_context=True, name=f"agentkit-tool {self._tool_name}")
        task.wait(_CLOSE_WAIT)
