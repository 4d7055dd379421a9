"""Tool time limits: run a tool call on another thread of the run and stop waiting after a time.

The call is spawned on the run's threads (``RunScope.spawn``). Python cannot kill a thread. A
call that overruns its limit is *abandoned*: the agent stops waiting, the call fails with
:class:`~agentkit.ToolTimeoutError`, and the call's thread is left to finish on its own. The
run lets go of that thread (``RunScope.release``): the run's end does not wait for it, and it
ends when the call returns (it is a daemon thread, so it never keeps the process alive). Its
cancel scope is cancelled at once, so a tool that calls :func:`~agentkit.check_cancelled`
gets :class:`~agentkit.AgentCancelledError` and one in :func:`~agentkit.cancellable_sleep`
wakes with it. Whatever the abandoned call does afterwards (events, results) is dropped. A
tool that never returns and never checks keeps its thread until the process exits: give such
tools their own way to give up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from agentkit._runctx import current_frame, use_frame
from agentkit._scope import RunScope
from agentkit.cancel import CancelMode
from agentkit.errors import ToolTimeoutError
from agentkit.schema import ToolCall

__all__ = ["AbandonablePut", "call_with_timeout"]

T = TypeVar("T")


class AbandonablePut:
    """Forwards a tool call's reports until the call is abandoned, then drops them."""

    __slots__ = ("_abandoned", "_lock", "_put")

    def __init__(self, put: Callable[[Any], object]) -> None:
        self._put = put
        self._lock = threading.Lock()
        self._abandoned = False

    def __call__(self, item: Any) -> object:
        with self._lock:
            if self._abandoned:
                return None
            return self._put(item)

    def abandon(self) -> None:
        """Drop every later report (waits for a report in progress to be delivered)."""
        with self._lock:
            self._abandoned = True


class _Wake:
    """Registered with the run's scope: an immediate cancel of the run cancels the call."""

    __slots__ = ("call_scope", "done")

    def __init__(self, call_scope: RunScope, done: threading.Event) -> None:
        self.call_scope = call_scope
        self.done = done

    def close(self) -> None:
        self.call_scope.request_cancel(CancelMode.IMMEDIATE)
        self.done.set()


def call_with_timeout(
    fn: Callable[[], T],
    timeout: float,
    call: ToolCall,
    *,
    on_abandon: Callable[[], object],
) -> T:
    """Run ``fn()`` (a tool call) on a spawned thread and return its result within ``timeout``.

    The thread runs in the caller's run context with a cancel scope of its own (so that
    cancelling the abandoned call does not cancel the run); an immediate cancel of the run
    cancels it too and ends the wait at once (the call is abandoned then as well).

    Raises:
        ToolTimeoutError: the call took longer than ``timeout`` seconds (it is abandoned:
            ``on_abandon`` is called and its scope cancelled).
        AgentCancelledError: the run was cancelled immediately while waiting.
        BaseException: what ``fn`` raised.
    """
    frame = current_frame()
    if frame is None:
        raise RuntimeError("tool time limits apply inside an agent run")
    run_scope = frame.scope
    call_scope = RunScope()
    call_frame = attrs.evolve(frame, scope=call_scope)
    done = threading.Event()
    outcome: list[tuple[bool, Any]] = []  # (True, value) or (False, error), set before done

    def body() -> None:
        with use_frame(call_frame):
            try:
                outcome.append((True, fn()))
            except BaseException as error:  # carried to the waiting thread
                outcome.append((False, error))
            finally:
                done.set()
                call_scope.finish()

    wake = _Wake(call_scope, done)
    run_scope.open(wake)  # raises at once if the run is being cancelled
    try:
        spawned = run_scope.spawn(body, name=f"agentkit-tool {call.function.name} (timed)")
        done.wait(timeout)
    finally:
        run_scope.closed(wake)
    if outcome:
        ok, value = outcome[0]
        if ok:
            return value  # type: ignore[no-any-return]
        raise value
    run_scope.release(spawned)  # the run's end does not wait for the abandoned call
    on_abandon()
    call_scope.request_cancel(CancelMode.IMMEDIATE)
    run_scope.check()  # the run was cancelled: that is the error, not the time limit
    name = call.function.name
    raise ToolTimeoutError(
        f"tool {name!r} (call {call.id or '-'}) did not finish within {timeout:g} seconds, so "
        "the agent stopped waiting for it; raise the limit with @tool(timeout=...) or "
        "ChatModelAgent(tool_timeout=...) if it needs longer",
        tool_name=name,
        call_id=call.id,
    )
