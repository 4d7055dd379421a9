"""Runs that outlive a request: numbered event logs, reconnectable readers, in-process runs.

A web page that shows an agent run should survive a dropped connection: the browser reconnects
with the id of the last event it saw (``Last-Event-ID``) and goes on from there. For that the
run's events are appended to a log as :class:`RunEvent` entries, each with an id, and read
back by any number of :class:`RunEventStream` readers. Two backends share this shape:

* :class:`LocalRuns` (this module): runs in threads of this process, the log in memory; for a
  single-process app (and for tests).
* :class:`agentkit.integrations.celery.AgentQueue`: runs on Celery workers, the log in a Redis
  Stream; for many web processes and many worker machines.

Entry kinds, in order: ``run`` (first: ``{"run_id", "agent"}``), ``status`` (progress such as
``{"status": "started"}``), ``token`` (``{"agent_name", "content"}``, one per streamed chunk),
``agent`` (``AgentEvent.to_dict()``) and ``end`` (the run stopped; a JSON summary: ``status``
is ``"completed"``, ``"interrupted"``, ``"cancelled"`` or ``"failed"``, with ``answer``,
``interrupts`` and ``error``). A resumed run appends to the same log after its ``end`` entry;
a reader stops after the first ``end`` entry that follows where it started.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from agentkit._runctx import check_cancelled
from agentkit._runlog import publish, summary_of_error
from agentkit.cancel import CancelHandle, CancelMode
from agentkit.errors import AgentKitError
from agentkit.options import with_cancel, with_checkpoint_id, with_session_values
from agentkit.runner import Runner
from agentkit.schema import Message, user_message

__all__ = [
    "LocalRuns",
    "RunEvent",
    "RunEventStream",
    "RunNotFoundError",
    "RunStateError",
    "to_messages",
    "POLL_INTERVAL",
]

POLL_INTERVAL = 0.5
"""Seconds a reader waits for new entries before it looks at whether it was closed."""


class RunNotFoundError(AgentKitError, LookupError):
    """No run has the given id (it never existed, or its log expired)."""


class RunStateError(AgentKitError):
    """The run cannot do that now (resume a run that is not stopped, for example)."""


@attrs.frozen
class RunEvent:
    """One entry of a run's event log: its ``id``, its ``kind`` and its JSON ``data``."""

    id: str
    kind: str
    data: dict[str, Any]


class RunEventStream:
    """Reads a run's log from after ``last_event_id``; blocks for new entries; ends after ``end``.

    Iterate it (or use it as a context manager). Each wait for new entries is bounded
    (:data:`POLL_INTERVAL`), so :meth:`close` from another thread ends the iteration within
    that time. ``idle_timeout`` (seconds without a new entry) ends the iteration early: an SSE
    client then reconnects with ``Last-Event-ID`` and loses nothing. Read inside an agent run
    (a tool that follows another run), an immediate cancel of that run ends the reading with
    :class:`~agentkit.AgentCancelledError` (:func:`~agentkit.check_cancelled`). ``is_live``
    tells whether the run is queued or running: a reader that caught up with a stopped run ends
    at once (read after a run's ``end`` entry, it waits only while a resume is under way).
    """

    def __init__(
        self,
        read: Callable[[str | None, float], Sequence[RunEvent]],
        last_event_id: str | None = None,
        *,
        idle_timeout: float | None = None,
        on_close: Callable[[], None] | None = None,
        is_live: Callable[[], bool] | None = None,
    ) -> None:
        self._read = read
        self._is_live = is_live
        self.last_event_id = last_event_id
        self._idle_timeout = idle_timeout
        self._closed = threading.Event()
        self._on_close = on_close
        self._ended = False

    def __iter__(self) -> Iterator[RunEvent]:
        waited = 0.0
        while not self._ended and not self._closed.is_set():
            check_cancelled()
            wait = POLL_INTERVAL
            if self._idle_timeout is not None:
                wait = min(wait, max(0.0, self._idle_timeout - waited))
            batch = self._read(self.last_event_id, wait)
            if not batch and self._is_live is not None and not self._is_live():
                # Stopped: what it wrote before it stopped is there now, or never comes.
                batch = self._read(self.last_event_id, 0.0)
                if not batch:
                    return
            if not batch:
                waited += wait
                if self._idle_timeout is not None and waited >= self._idle_timeout:
                    return
                continue
            waited = 0.0
            for entry in batch:
                if self._closed.is_set():
                    return
                self.last_event_id = entry.id
                yield entry
                if entry.kind == "end":
                    self._ended = True
                    return

    @property
    def ended(self) -> bool:
        """``True`` once the ``end`` entry was read."""
        return self._ended

    def close(self) -> None:
        """Stop reading (from any thread); the iteration ends within :data:`POLL_INTERVAL`."""
        if self._closed.is_set():
            return
        self._closed.set()
        if self._on_close is not None:
            self._on_close()

    def __enter__(self) -> RunEventStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def to_messages(query_or_messages: str | Message | Sequence[Message]) -> list[Message]:
    """A query text, one message or a list of messages as a list of messages."""
    if isinstance(query_or_messages, str):
        return [user_message(query_or_messages)]
    if isinstance(query_or_messages, Message):
        return [query_or_messages]
    messages = list(query_or_messages)
    for message in messages:
        if not isinstance(message, Message):
            raise TypeError(
                "a run takes a query text or a list of Message objects "
                f"(got a list holding {type(message).__name__})"
            )
    return messages


class _MemoryLog:
    """A run's log in memory: entries numbered 1, 2, ...; readers wait on a condition."""

    def __init__(self) -> None:
        self.entries: list[RunEvent] = []
        self.condition = threading.Condition()

    def append(self, kind: str, data: dict[str, Any]) -> str:
        with self.condition:
            entry = RunEvent(str(len(self.entries) + 1), kind, data)
            self.entries.append(entry)
            self.condition.notify_all()
            return entry.id

    def last_id(self) -> str | None:
        with self.condition:
            return self.entries[-1].id if self.entries else None

    def read(self, after: str | None, wait: float) -> list[RunEvent]:
        start = _memory_position(after)
        with self.condition:
            if len(self.entries) <= start and wait > 0:
                self.condition.wait(wait)
            return self.entries[start:]

    def wake(self) -> None:
        with self.condition:
            self.condition.notify_all()


def _memory_position(after: str | None) -> int:
    if after is None or after == "":
        return 0
    if not after.isdigit():
        raise ValueError(
            f"Last-Event-ID {after!r} is not an event id of this app (ids are whole numbers); "
            "reconnect without it to read the run from the start"
        )
    return int(after)


@attrs.define
class _LocalRun:
    agent_name: str
    log: _MemoryLog
    status: str = "queued"
    interrupts: list[str] = attrs.Factory(list)
    summary: dict[str, Any] | None = None
    handle: CancelHandle | None = None
    thread: threading.Thread | None = None


class LocalRuns:
    """Runs agents in background threads of this process, each with a reconnectable log.

    Same methods as :class:`agentkit.integrations.celery.AgentQueue`, so an app can switch
    between one process and Celery workers without changing its views.

    Args:
        runners: the agents by name, each as a :class:`~agentkit.Runner` (give it a
            ``checkpoint_store`` so interrupted runs can be resumed).

    A run's thread belongs to this object: :meth:`close` cancels every run and joins them.

    Example::

        runs = LocalRuns({"assistant": Runner(agent, checkpoint_store=store)})
        run_id = runs.submit("assistant", "What's the weather in Paris?")
        for entry in runs.events(run_id):
            print(entry.kind, entry.data)
    """

    def __init__(self, runners: Mapping[str, Runner]) -> None:
        self._runners = dict(runners)
        self._runs: dict[str, _LocalRun] = {}
        self._lock = threading.Lock()
        self._closed = False

    def submit(
        self,
        agent_name: str,
        query_or_messages: str | Message | Sequence[Message],
        *,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
    ) -> str:
        """Start a run of ``agent_name`` in a background thread; returns the run id at once.

        The run id is ``checkpoint_id`` when given (it must be new), else a fresh one.
        """
        runner = self._runner(agent_name)
        messages = to_messages(query_or_messages)
        run_id = checkpoint_id or uuid.uuid4().hex
        run = _LocalRun(agent_name, _MemoryLog())
        run.log.append("run", {"run_id": run_id, "agent": agent_name})
        with self._lock:
            if self._closed:
                raise RunStateError("LocalRuns was closed; create a new one to start runs")
            if run_id in self._runs:
                raise RunStateError(
                    f"run id {run_id!r} is taken; leave checkpoint_id out to get a new one"
                )
            self._runs[run_id] = run
        values = dict(session_values or {})

        def start(handle: CancelHandle) -> Any:
            return runner.run(
                messages,
                with_checkpoint_id(run_id),
                with_session_values(values),
                with_cancel(handle),
            )

        self._start(run_id, run, start)
        return run_id

    def resume(self, run_id: str, targets: Mapping[str, Any] | None = None) -> str | None:
        """Resume a stopped run with ``targets`` (interrupt id -> resume data).

        Returns the id of the log entry after which the resumed run's entries come (pass it
        to :meth:`events` as ``last_event_id``).

        Raises:
            RunNotFoundError: no run has this id.
            RunStateError: the run is queued, running or completed.
        """
        run = self._run(run_id)
        runner = self._runner(run.agent_name)
        with self._lock:
            if self._closed:
                raise RunStateError("LocalRuns was closed; create a new one to resume runs")
            if run.status not in ("interrupted", "cancelled", "failed"):
                raise RunStateError(
                    f"run {run_id!r} is {run.status}; only an interrupted, cancelled or failed "
                    "run can be resumed"
                )
            run.status = "queued"
        after = run.log.last_id()
        wanted = dict(targets or {})

        def start(handle: CancelHandle) -> Any:
            return runner.resume(run_id, with_cancel(handle), targets=wanted)

        self._start(run_id, run, start)
        return after

    def events(
        self, run_id: str, last_event_id: str | None = None, *, idle_timeout: float | None = None
    ) -> RunEventStream:
        """Read the run's log after ``last_event_id`` (from the start without one).

        Raises:
            RunNotFoundError: no run has this id.
            ValueError: ``last_event_id`` is not an id of this log.
        """
        run = self._run(run_id)
        _memory_position(last_event_id)

        def is_live() -> bool:
            with self._lock:
                return run.status in ("queued", "running")

        return RunEventStream(
            run.log.read,
            last_event_id,
            idle_timeout=idle_timeout,
            on_close=run.log.wake,
            is_live=is_live,
        )

    def cancel(self, run_id: str, mode: CancelMode = CancelMode.IMMEDIATE) -> bool:
        """Cancel the run; ``False`` when it is not queued or running."""
        run = self._run(run_id)
        with self._lock:
            handle = run.handle if run.status in ("queued", "running") else None
        if handle is None:
            return False
        return handle.cancel(mode)

    def status(self, run_id: str) -> dict[str, Any]:
        """The run's state: ``status``, ``agent`` and, once stopped, its ``summary``.

        ``status`` is queued, running, interrupted, completed, cancelled or failed.
        """
        run = self._run(run_id)
        with self._lock:
            state: dict[str, Any] = {"status": run.status, "agent": run.agent_name}
            if run.summary is not None:
                state["summary"] = run.summary
            return state

    def interrupts(self, run_id: str) -> list[str]:
        """The interrupt ids of the run's latest interrupt (empty unless interrupted)."""
        return list(self._run(run_id).interrupts)

    def has_run(self, run_id: str) -> bool:
        """``True`` if this object knows ``run_id``."""
        with self._lock:
            return run_id in self._runs

    def close(self) -> None:
        """Cancel every run and wait for their threads to end."""
        with self._lock:
            self._closed = True
            runs = list(self._runs.values())
        for run in runs:
            if run.handle is not None:
                run.handle.cancel(CancelMode.IMMEDIATE)
        for run in runs:
            if run.thread is not None:
                run.thread.join()

    def __enter__(self) -> LocalRuns:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _runner(self, agent_name: str) -> Runner:
        try:
            return self._runners[agent_name]
        except KeyError:
            known = ", ".join(sorted(self._runners)) or "none"
            raise RunNotFoundError(
                f"no agent named {agent_name!r}; the agents are: {known}"
            ) from None

    def _run(self, run_id: str) -> _LocalRun:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            raise RunNotFoundError(f"no run with id {run_id!r}; start one first")
        return run

    def _start(self, run_id: str, run: _LocalRun, start: Callable[[CancelHandle], Any]) -> None:
        handle = CancelHandle()
        previous = run.thread
        run.handle = handle
        run.status = "queued"

        def work() -> None:
            if previous is not None:
                previous.join()
            run.status = "running"
            run.log.append("status", {"status": "started"})
            try:
                summary = publish(start(handle), run.log.append)
            except Exception as error:  # resume refused: busy, consumed, bad targets
                summary = summary_of_error(error)
            with self._lock:  # the status and the end entry change together
                run.summary = summary
                run.interrupts = list(summary.get("interrupts", []))
                run.status = str(summary["status"])
                run.log.append("end", summary)

        thread = threading.Thread(target=work, name=f"agentkit-run-{run_id[:8]}", daemon=True)
        run.thread = thread
        thread.start()
