"""Ctrl-C during a run: cancel it, let it save, then raise :class:`KeyboardInterrupt`.

A Ctrl-C (SIGINT, :class:`KeyboardInterrupt`) in the thread that drives a run is a cancel of
that run: the run stops at once, a run with a checkpoint id is saved (so that
``runner.resume(id)``, in this process or another one, goes on from the last finished step),
no thread of the run is left behind, and then ``KeyboardInterrupt`` is raised to the caller,
with a note saying what was saved.

* **A run in a worker thread** (``Runner.run``/``query``/``resume``): the Ctrl-C interrupts
  the caller waiting for the next event (a ``for`` loop, ``result()``). :func:`stop_after_ctrl_c`
  cancels the run and waits for it to end.
* **A run in the calling thread** (``Runner.invoke``): the Ctrl-C lands wherever the run is, in
  a tool, a model call, ``on_event``. While the run goes on, :class:`InvokeGuard` replaces
  Python's SIGINT handler (in the main thread, when no other handler was installed): the first
  Ctrl-C cancels the run (``RunScope.interrupt``) and raises
  :class:`KeyboardCancel` where the run is, which is both the run's cancel error (so every
  agent records where it stopped, as for any cancel) and a ``KeyboardInterrupt`` (so a tool's
  ``except KeyboardInterrupt`` cleanup runs).

* **A Ctrl-C in the body of a ``for`` loop** over a run's events, outside ``with``, does not
  reach the iterator: the run goes on in its worker thread until the program exits, and then
  :data:`exit_stops` cancels it (a run with a checkpoint id) and waits for its save.

Either way a Ctrl-C that arrives while the run saves its checkpoint (a section under
``RunScope.protect``) waits for the save to end, so the save is never cut
halfway. Another Ctrl-C while the run has not stopped yet (a tool that ignores the cancel)
stops waiting for it: ``KeyboardInterrupt`` at once, nothing more is saved.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from agentkit._cancel import CancelMode
from agentkit._scope import RunScope
from agentkit.errors import AgentCancelledError

__all__ = [
    "EXIT_WAIT",
    "InvokeGuard",
    "KeyboardCancel",
    "ctrl_c_interrupt",
    "exit_stops",
    "stop_after_ctrl_c",
]

_log = logging.getLogger("agentkit")


class KeyboardCancel(AgentCancelledError, KeyboardInterrupt):
    """The cancel error of a run stopped by Ctrl-C; also a :class:`KeyboardInterrupt`."""

    def __init__(self, mode: Any = CancelMode.IMMEDIATE, escalated: bool = False) -> None:
        super().__init__(mode, escalated)
        self.args = ("the run was cancelled by Ctrl-C (KeyboardInterrupt)",)

    def __str__(self) -> str:
        return "the run was cancelled by Ctrl-C (KeyboardInterrupt)"


def ctrl_c_interrupt(checkpoint_id: str | None, *, stopped: bool) -> KeyboardInterrupt:
    """The ``KeyboardInterrupt`` raised to the caller once the run it cancelled has ended.

    ``checkpoint_id`` is the id the run was saved under (``None``: nothing was saved);
    ``stopped`` is ``False`` when a second Ctrl-C gave up waiting for the run to stop.
    """
    if not stopped:
        note = (
            "agentkit: a second Ctrl-C stopped waiting for the run to end; what it did after "
            "its last save is not saved"
        )
    elif checkpoint_id is not None:
        note = (
            f"agentkit: Ctrl-C cancelled the run; it was saved: runner.resume({checkpoint_id!r}) "
            "goes on from the last model or tool call that finished"
        )
    else:
        note = "agentkit: Ctrl-C cancelled the run (it had no checkpoint id: nothing was saved)"
    if sys.version_info >= (3, 11):
        error = KeyboardInterrupt()
        error.add_note(note)
    else:  # no notes before Python 3.11
        error = KeyboardInterrupt(note)
    return error


def stop_after_ctrl_c(scope: RunScope, join: Callable[[], None]) -> bool:
    """Cancel the run of ``scope`` after a Ctrl-C, and wait for it to end with ``join``.

    For a run in a worker thread; call it from the ``except KeyboardInterrupt`` of the thread
    that was waiting. Returns ``False`` when another Ctrl-C gave up waiting (the run had not
    stopped yet); a Ctrl-C while the run saves its checkpoint waits for the save.
    """
    scope.request_cancel(CancelMode.IMMEDIATE)
    while True:
        try:
            join()
            return True
        except KeyboardInterrupt:
            if not scope.protected:
                return False
            _log.warning(
                "agentkit: Ctrl-C while the run saves its checkpoint: waiting for the save "
                "to end"
            )


class InvokeGuard:
    """Turns Ctrl-C into a cancel of the run going on in this thread (``Runner.invoke``).

    A context manager around the run. It installs its SIGINT handler only in the main thread
    and only in place of Python's own (``signal.default_int_handler``): a program with a
    handler of its own keeps it, and a run in another thread gets no Ctrl-C anyway.
    :attr:`pressed` tells whether Ctrl-C was pressed, :attr:`forced` whether a second one
    gave up on the run.
    """

    __slots__ = ("_previous", "forced", "pressed", "scope")

    def __init__(self, scope: RunScope) -> None:
        self.scope = scope
        self.pressed = False
        self.forced = False
        self._previous: Any = None

    def __enter__(self) -> InvokeGuard:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        # A signal handler: it runs between two bytecodes of the main thread, which may hold
        # any lock right now. It takes none (RunScope.interrupt is lock-free).
        first = not self.pressed
        self.pressed = True
        scope = self.scope
        if scope.protected:
            # The run is saving: let the save end; invoke raises KeyboardInterrupt afterwards.
            scope.interrupt()
            return
        if first:
            scope.interrupt()
            raise KeyboardCancel()
        self.forced = True
        raise KeyboardInterrupt


EXIT_WAIT = 10.0
"""Seconds the interpreter's exit waits, in all, for the runs it cancelled to save and end."""


class _ExitStops:
    """Runs with a checkpoint id still going in a worker thread: stopped at interpreter exit.

    A ``KeyboardInterrupt`` (or any exception) raised in the body of a ``for`` loop over a
    run's events, outside a ``with`` block, never reaches the run's iterator, and the run's
    worker thread is a daemon that the interpreter's exit would cut anywhere. So at exit
    (``atexit``, which runs while daemon threads still run), every such run still going is
    cancelled and waited for (``EXIT_WAIT`` seconds in all), which saves it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[int, tuple[RunScope, threading.Thread]] = {}
        self._registered = False

    def track(self, scope: RunScope, thread: threading.Thread) -> Callable[[], None]:
        """Stop the run of ``scope`` (worker ``thread``) at exit; returns what untracks it."""
        key = id(scope)
        with self._lock:
            self._runs[key] = (scope, thread)
            if not self._registered:
                import atexit  # only programs that run with checkpoint ids register

                atexit.register(self.stop_all)
                self._registered = True

        def untrack() -> None:
            with self._lock:
                self._runs.pop(key, None)

        return untrack

    def stop_all(self) -> None:
        """Cancel every tracked run and wait for them to end (bounded by ``EXIT_WAIT``)."""
        with self._lock:
            runs = list(self._runs.values())
        if not runs:
            return
        _log.warning(
            "agentkit: the program exits while %d run(s) with a checkpoint id are going on: "
            "cancelling them so that they are saved",
            len(runs),
        )
        for scope, _ in runs:
            scope.request_cancel(CancelMode.IMMEDIATE)
        deadline = time.monotonic() + EXIT_WAIT
        for _, thread in runs:
            thread.join(max(0.0, deadline - time.monotonic()))


exit_stops = _ExitStops()
"""The runs :class:`_ExitStops` stops at interpreter exit (one per process)."""
