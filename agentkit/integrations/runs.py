"""Runs that outlive a request: numbered event logs, reconnectable readers, in-process runs.

A web page that shows an agent run should survive a dropped connection: the browser reconnects
with the id of the last event it saw (``Last-Event-ID``) and goes on from there. For that the
run's events are appended to a log as :class:`RunEvent` entries, each with an id, and read
back by any number of :class:`RunEventStream` readers. Two backends share this shape (the
:class:`RunBackend` protocol):

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

Logs are capped: a reader that asks for entries that were dropped to keep a log within its
cap gets a ``gap`` entry first (``{"lost": <how many>, "reason": "trimmed"}``), then the
oldest entries kept; nothing is skipped without saying so.

The shape of every entry is a JSON Schema shipped with the package, versioned
(:data:`RUN_LOG_SCHEMA_VERSION`): :func:`run_log_schema` returns it, for readers in other
languages, for validating a stream in a test, or for generating types from it.

**Runs belong to someone.** Every call takes ``owner=``: the user or tenant id of your app
that submits the run, and the one that may read, resume, cancel or forget it. Another owner's
call raises :class:`RunOwnerError` (a :class:`RunNotFoundError`, so "not yours" and "no such
run" look the same to a caller), and so does a call without ``owner`` on a run that has one.
A run submitted without an owner (``owner=None``, the default) belongs to nobody: anyone who
knows its id may use it, as before owners existed. A web app serving several users passes
the logged-in user's id on every call.

**A submission may come twice** (a double click, a POST retried after a timeout): pass
``idempotency_key=`` (a request id the client made up) to ``submit``. The first submission
with a key starts a run; a later one with the same key (and owner) returns that run's id and
starts nothing, for as long as the run is kept. The same key with another agent, input,
session values or run id raises :class:`RunStateError`.
"""

from __future__ import annotations

import collections
import json
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import resources
from typing import Any, Protocol

import attrs

from agentkit._cancel import CancelHandle, CancelMode
from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit._lazy import present
from agentkit._options import steer_through, with_cancel, with_checkpoint_id, with_session_values
from agentkit._runctx import check_cancelled
from agentkit._runlog import Append, InlineRun, Published, publish, summary_of_error
from agentkit._runner import Runner
from agentkit._steering import Steering
from agentkit.errors import AgentKitValueError
from agentkit.integrations._errors import (
    EventIdError,
    RedisPrefixError,
    RunIdError,
    RunIntegrityError,
    RunNotFoundError,
    RunOwnerError,
    RunStateError,
    TaskMessageError,
    owner_mismatch,
)
from agentkit.integrations._idempotency import check_key, conflict, key_digest, request_digest
from agentkit.integrations._runids import check_owner, check_run_id, log_position
from agentkit.schema import ContentPart, Message, _input_messages

__all__ = [
    "EventIdError",
    "LocalRuns",
    "RedisPrefixError",
    "RunBackend",
    "RunEvent",
    "RunEventStream",
    "RunIdError",
    "RunIntegrityError",
    "RunNotFoundError",
    "RunOwnerError",
    "RunStateError",
    "TaskMessageError",
    "to_messages",
    "POLL_INTERVAL",
    "RUN_LOG_SCHEMA_VERSION",
    "run_log_schema",
]

present(
    (
        EventIdError,
        RedisPrefixError,
        RunIdError,
        RunIntegrityError,
        RunNotFoundError,
        RunOwnerError,
        RunStateError,
        TaskMessageError,
    ),
    __name__,
)

POLL_INTERVAL = 0.5
"""Seconds a reader waits for new entries before it looks at whether it was closed."""

RUN_LOG_SCHEMA_VERSION = 1
"""The version of :func:`run_log_schema`; it changes whenever the shape of an entry changes."""


def run_log_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one run log entry, as readers get it.

    An entry is ``{"id": ..., "kind": ..., "data": {...}}``: a :class:`RunEvent` of
    :class:`LocalRuns` or :class:`~agentkit.integrations.celery.AgentQueue` (``vars(entry)``
    or ``attrs.asdict(entry)``), or one frame of an SSE response of
    :mod:`agentkit.integrations.flask` (its ``id:``, ``event:`` and JSON ``data:`` lines).
    The schema describes every kind (``run``, ``status``, ``token``, ``agent``, ``end``,
    ``gap``, ``done``) and the data of each; its ``$id`` ends with
    :data:`RUN_LOG_SCHEMA_VERSION`. The file is ``agentkit/integrations/runlog.schema.json``.
    Each call returns a fresh copy.

    Example (with the ``jsonschema`` package)::

        import attrs, jsonschema
        from agentkit.integrations.runs import run_log_schema

        validator = jsonschema.Draft202012Validator(run_log_schema())
        for entry in runs.events(run_id):
            validator.validate(attrs.asdict(entry))
    """
    text = resources.files(__package__).joinpath("runlog.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
_READ_BATCH = 200  # the most entries one read hands a reader


@attrs.frozen
class RunEvent:
    """One entry of a run's event log: its ``id``, its ``kind`` and its JSON ``data``."""

    id: str
    kind: str
    data: dict[str, Any]

    @classmethod
    def gap(cls, event_id: str, lost: int, *, reason: str = "trimmed") -> RunEvent:
        """A ``gap`` entry: ``lost`` entries up to ``event_id`` cannot be read (``reason``).

        Its id is that of the last entry lost, so a client that reconnects with it goes on
        with the first entry kept.
        """
        return cls(event_id, "gap", {"lost": lost, "reason": reason})


class RunEventStream:
    """Reads a run's log from after ``last_event_id``; blocks for new entries; ends after ``end``.

    Iterate it (or use it as a context manager). Each wait for new entries is bounded
    (:data:`POLL_INTERVAL`), so :meth:`close` from another thread ends the iteration within
    that time. ``idle_timeout`` (seconds without a new entry) ends the iteration early: an SSE
    client then reconnects with ``Last-Event-ID`` and goes on where it stopped. Read inside an
    agent run (a tool that follows another run), an immediate cancel of that run ends the
    reading with :class:`~agentkit.AgentCancelledError` (:func:`~agentkit.check_cancelled`).
    ``is_live`` tells whether the run is queued or running: a reader that caught up with a
    stopped run ends at once (read after a run's ``end`` entry, it waits only while a resume
    is under way). A reader holds at most one batch of entries (200) at a time: a slow reader
    costs no memory of its own, and one that falls behind a capped log gets a ``gap`` entry.
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


class RunBackend(Protocol):
    """What a web app needs from a run backend: :class:`LocalRuns` or ``AgentQueue``."""

    def submit(
        self,
        agent_name: str,
        query_or_messages: str | Message | Sequence[Message | str | ContentPart],
        *,
        owner: str | None = None,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Start a run; returns its id (the first run's id again for a repeated key)."""
        ...

    def events(
        self,
        run_id: str,
        last_event_id: str | None = None,
        *,
        owner: str | None = None,
        idle_timeout: float | None = None,
    ) -> RunEventStream:
        """Read the run's log after ``last_event_id``."""
        ...

    def resume(
        self, run_id: str, targets: Mapping[str, Any] | None = None, *, owner: str | None
    ) -> str | None:
        """Resume a stopped run; returns the entry id its new entries follow."""
        ...

    def cancel(
        self, run_id: str, mode: CancelMode = CancelMode.IMMEDIATE, *, owner: str | None = None
    ) -> bool:
        """Cancel a queued or running run."""
        ...

    def status(self, run_id: str, *, owner: str | None = None) -> dict[str, Any]:
        """The run's state."""
        ...

    def interrupts(self, run_id: str, *, owner: str | None = None) -> list[str]:
        """The interrupt ids of the run's latest interrupt."""
        ...

    def has_run(self, run_id: str, *, owner: str | None = None) -> bool:
        """``True`` if the run exists and belongs to ``owner``."""
        ...


def to_messages(
    query_or_messages: str | Message | Sequence[Message | str | ContentPart],
) -> list[Message]:
    """A query text, one message, a list of messages, or a list of text and parts (one user
    message, see :func:`~agentkit.user_message`) as a list of messages.

    Raises:
        TypeError: anything else (the error says what a run takes).
    """
    return _input_messages(query_or_messages, "submit()")


class _MemoryLog:
    """A run's log in memory: entries numbered 1, 2, ...; the oldest dropped past the cap."""

    def __init__(self, max_entries: int) -> None:
        self._entries: list[RunEvent] = []
        self._first = 1  # the number of self._entries[0]
        self._max = max_entries
        # Entries are dropped in chunks, so appending stays O(1) amortized.
        self._slack = max(1, max_entries // 8)
        self.condition = threading.Condition()

    def append(self, kind: str, data: dict[str, Any]) -> str:
        with self.condition:
            entry = RunEvent(str(self._first + len(self._entries)), kind, data)
            self._entries.append(entry)
            excess = len(self._entries) - self._max
            if excess >= self._slack:
                del self._entries[:excess]
                self._first += excess
            self.condition.notify_all()
            return entry.id

    def last_id(self) -> str | None:
        with self.condition:
            return self._entries[-1].id if self._entries else None

    def held(self) -> int:
        with self.condition:
            return len(self._entries)

    def read(self, after: str | None, wait: float) -> list[RunEvent]:
        start = log_position(after)
        with self.condition:
            if self._first + len(self._entries) - 1 <= start and wait > 0:
                self.condition.wait(wait)
            batch: list[RunEvent] = []
            if start + 1 < self._first:
                batch.append(RunEvent.gap(str(self._first - 1), self._first - 1 - start))
                start = self._first - 1
            offset = start + 1 - self._first
            batch.extend(self._entries[offset : offset + _READ_BATCH])
            return batch

    def wake(self) -> None:
        with self.condition:
            self.condition.notify_all()


@attrs.define
class _LocalRun:
    agent_name: str
    owner: str | None
    log: _MemoryLog
    status: str = "queued"
    interrupts: list[str] = attrs.Factory(list)
    summary: dict[str, Any] | None = None
    handle: CancelHandle | None = None
    steering: Steering | None = None  # where send() reaches the run while it is live
    thread: threading.Thread | None = None
    idempotency: tuple[str, str] | None = None  # the key as stored, and the request's digest


def _check_unsaved(runner: Runner, run_id: str) -> None:
    """Refuse ``run_id`` if the checkpoint store of ``runner`` holds a checkpoint under it."""
    store = runner.checkpoint_store
    if store is not None and store.get(run_id) is not None:
        raise RunStateError(
            f"run id {run_id!r} has a checkpoint in the store (an interrupted run, which its "
            "owner may still resume with Runner.resume, or the tombstone of a completed one); "
            "a new run under it would replace it. Leave checkpoint_id out to get a new id, or "
            "delete the checkpoint first (store.delete(id)) if it is no longer wanted"
        )


class LocalRuns:
    """Runs agents in background threads of this process, each with a reconnectable log.

    Same methods as :class:`agentkit.integrations.celery.AgentQueue` (the :class:`RunBackend`
    protocol), so an app can switch between one process and Celery workers without changing
    its views.

    Args:
        runners: the agents by name, each as a :class:`~agentkit.Runner` (give it a
            ``checkpoint_store`` so interrupted runs can be resumed).
        max_entries: the most entries a run's log keeps (about; the oldest go first, and a
            reader that asks for them gets a ``gap`` entry). Default 10,000, as
            ``AgentQueue(stream_maxlen=...)``.
        retention: seconds a stopped run (completed, interrupted, cancelled, failed) is kept
            for readers and resumes before it is forgotten. Default one hour.
        max_stopped: the most stopped runs kept; past it the oldest stopped run is forgotten.
            Default 100.
        clock: the clock ``retention`` is measured on (its ``monotonic()``; the system's by
            default): a test moves a :class:`~agentkit.testing.ManualClock` past the
            retention period instead of waiting for it.

    What it holds at most: ``max_entries`` entries for each live run and each of the
    ``max_stopped`` stopped ones. With the defaults that is 1,000,000 entries for the stopped
    runs, about 300 MB if every run filled its log with streamed tokens (about 300 bytes an
    entry; larger tool results weigh more). On a small server lower ``max_entries`` (a reader
    that reconnects late then gets a ``gap`` entry) or ``max_stopped``.

    A forgotten run's log is freed (readers still reading it finish what they hold); its
    checkpoint stays in the Runner's store, so ``Runner.resume`` can still continue an
    interrupted one, and :meth:`submit` refuses a new run under its id while it is there.
    :meth:`forget` drops a stopped run at once. Runs that are queued or running are never
    forgotten.

    A run's thread belongs to this object: :meth:`close` cancels every run and joins them.
    A submitted run goes on in that thread (as :meth:`Runner.invoke <agentkit.Runner.invoke>`
    does), one thread per run; a resumed one is read there from the thread
    :meth:`Runner.resume <agentkit.Runner.resume>` starts.

    Example::

        runs = LocalRuns({"assistant": Runner(agent, checkpoint_store=store)})
        run_id = runs.submit("assistant", "What's the weather in Paris?", owner=user_id)
        for entry in runs.events(run_id, owner=user_id):
            print(entry.kind, entry.data)
    """

    def __init__(
        self,
        runners: Mapping[str, Runner],
        *,
        max_entries: int = 10_000,
        retention: float = 3600.0,
        max_stopped: int = 100,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if max_entries < 1 or max_stopped < 0 or retention < 0:
            raise AgentKitValueError(
                "max_entries must be at least 1, and retention and max_stopped not negative "
                f"(got max_entries={max_entries}, retention={retention}, "
                f"max_stopped={max_stopped})"
            )
        self._runners = dict(runners)
        self._max_entries = max_entries
        self._retention = float(retention)
        self._clock = clock
        self._max_stopped = max_stopped
        self._runs: dict[str, _LocalRun] = {}
        # idempotency key (bound to its owner) -> the run id and request digest of its run
        self._keys: dict[str, tuple[str, str]] = {}
        self._stopped: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._closed = False

    def submit(
        self,
        agent_name: str,
        query_or_messages: str | Message | Sequence[Message | str | ContentPart],
        *,
        owner: str | None = None,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Start a run of ``agent_name`` in a background thread; returns the run id at once.

        The run id is ``checkpoint_id`` when given, else a fresh one. A given id must be new
        here and in the Runner's checkpoint store: an interrupted run this object forgot
        (``retention``) keeps its checkpoint there, for its owner to resume, and a completed
        one its tombstone; a new run would replace them.
        With ``idempotency_key``, a submission that repeats an earlier one (same key, same
        owner) returns the earlier run's id and starts nothing, as long as that run is kept
        (see ``retention``).

        Raises:
            RunIdError: ``checkpoint_id`` is not a valid run id (1 to 128 letters, digits,
                ``.``, ``_`` or ``-``, starting with a letter or digit).
            RunStateError: the run id is taken (a run here, or a checkpoint in the Runner's
                store), this object was closed, or the key was used for another request
                (another agent, input, session values or run id).
        """
        owner = check_owner(owner)
        key = check_key(idempotency_key)
        runner = self._runner(agent_name)
        messages = to_messages(query_or_messages)
        run_id = uuid.uuid4().hex if checkpoint_id is None else check_run_id(checkpoint_id)
        run = _LocalRun(agent_name, owner, _MemoryLog(self._max_entries))
        if key is not None:
            digest = request_digest(agent_name, messages, session_values, checkpoint_id)
            run.idempotency = (key_digest(owner, key), digest)
        run.log.append("run", {"run_id": run_id, "agent": agent_name})
        with self._lock:
            if self._closed:
                raise RunStateError("LocalRuns was closed; create a new one to start runs")
            self._sweep()
            if run.idempotency is not None:
                first = self._keys.get(run.idempotency[0])
                if first is not None:
                    if first[1] != run.idempotency[1]:
                        raise conflict(str(key), first[0])
                    return first[0]  # a repeated submission: the same run, nothing started
            if run_id in self._runs:
                raise RunStateError(
                    f"run id {run_id!r} is taken; leave checkpoint_id out to get a new one"
                )
            self._runs[run_id] = run
            if run.idempotency is not None:
                self._keys[run.idempotency[0]] = (run_id, run.idempotency[1])
        if checkpoint_id is not None:
            # Checked with the id held here (no second submission can take it meanwhile),
            # after a repeated submission got its run back.
            try:
                _check_unsaved(runner, run_id)
            except BaseException:
                with self._lock:
                    self._drop(run_id)
                raise
        values = dict(session_values or {})

        def start(handle: CancelHandle, steering: Steering, append: Append) -> Published:
            # In the run's thread (Runner.invoke), with no thread of its own behind it.
            options = (
                with_checkpoint_id(run_id),
                with_session_values(values),
                with_cancel(handle),
                steer_through(steering),
            )
            return InlineRun(runner, messages, options).publish(append)

        self._start(run_id, run, start)
        return run_id

    def resume(
        self, run_id: str, targets: Mapping[str, Any] | None = None, *, owner: str | None
    ) -> str | None:
        """Resume a stopped run with ``targets`` (interrupt id -> resume data).

        Returns the id of the log entry after which the resumed run's entries come (pass it
        to :meth:`events` as ``last_event_id``).

        Raises:
            RunNotFoundError: no run has this id (:class:`RunOwnerError`: not ``owner``'s).
            RunStateError: the run is queued, running or completed.
        """
        run = self._run(run_id, owner)
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
            self._stopped.pop(run_id, None)
        after = run.log.last_id()
        wanted = dict(targets or {})

        def start(handle: CancelHandle, steering: Steering, append: Append) -> Published:
            resumed = runner.resume(
                run_id, with_cancel(handle), steer_through(steering), targets=wanted
            )
            return publish(resumed, append)

        self._start(run_id, run, start)
        return after

    def events(
        self,
        run_id: str,
        last_event_id: str | None = None,
        *,
        owner: str | None = None,
        idle_timeout: float | None = None,
    ) -> RunEventStream:
        """Read the run's log after ``last_event_id`` (from the start without one).

        Raises:
            RunNotFoundError: no run has this id (:class:`RunOwnerError`: not ``owner``'s).
            EventIdError: ``last_event_id`` is not an id of this log (a whole number).
        """
        run = self._run(run_id, owner)
        log_position(last_event_id)

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

    def send(self, run_id: str, message: str | Message, *, owner: str | None = None) -> bool:
        """Add a user message to the run before its next model call; ``False`` when it is not
        queued or running.

        Safe from any thread: see :meth:`RunIterator.send <agentkit.results.RunIterator.send>`
        for where the message goes and how it is kept (a message the run ends without using
        is logged as a warning; the run's log has an ``agent`` entry, a user message, for each
        message it used).

        Raises:
            RunNotFoundError: no run has this id (:class:`RunOwnerError`: not ``owner``'s).
            AgentKitTypeError, AgentKitValueError: ``message`` is not a user message of at
                most 100,000 characters.
            AgentKitRuntimeError: 32 messages wait for the run's next model call already.
        """
        run = self._run(run_id, owner)
        with self._lock:
            steering = run.steering if run.status in ("queued", "running") else None
        if steering is None:
            return False
        return steering.send(message)

    def cancel(
        self, run_id: str, mode: CancelMode = CancelMode.IMMEDIATE, *, owner: str | None = None
    ) -> bool:
        """Cancel the run; ``False`` when it is not queued or running."""
        run = self._run(run_id, owner)
        with self._lock:
            handle = run.handle if run.status in ("queued", "running") else None
        if handle is None:
            return False
        return handle.cancel(mode)

    def status(self, run_id: str, *, owner: str | None = None) -> dict[str, Any]:
        """The run's state: ``status``, ``agent`` and, once stopped, its ``summary``.

        ``status`` is queued, running, interrupted, completed, cancelled or failed.
        """
        run = self._run(run_id, owner)
        with self._lock:
            state: dict[str, Any] = {"status": run.status, "agent": run.agent_name}
            if run.summary is not None:
                state["summary"] = run.summary
            return state

    def interrupts(self, run_id: str, *, owner: str | None = None) -> list[str]:
        """The interrupt ids of the run's latest interrupt (empty unless interrupted)."""
        return list(self._run(run_id, owner).interrupts)

    def has_run(self, run_id: str, *, owner: str | None = None) -> bool:
        """``True`` if this object holds ``run_id`` and it belongs to ``owner``."""
        with self._lock:
            run = self._runs.get(run_id)
        return run is not None and run.owner == owner

    def forget(self, run_id: str, *, owner: str | None = None) -> None:
        """Drop a stopped run now: its log is freed and its id is unknown from then on.

        Raises:
            RunNotFoundError: no run has this id (:class:`RunOwnerError`: not ``owner``'s).
            RunStateError: the run is queued or running (cancel it first).
        """
        run = self._run(run_id, owner)
        with self._lock:
            if run.status in ("queued", "running"):
                raise RunStateError(
                    f"run {run_id!r} is {run.status}; cancel it and let it stop before "
                    "forgetting it"
                )
            self._drop(run_id)

    def held(self) -> int:
        """How many runs this object holds now (live and stopped)."""
        with self._lock:
            return len(self._runs)

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

    def _run(self, run_id: str, owner: str | None) -> _LocalRun:
        check_run_id(run_id)
        with self._lock:
            self._sweep()
            run = self._runs.get(run_id)
        if run is None:
            raise RunNotFoundError(
                f"no run with id {run_id!r} (never started here, or forgotten: stopped runs "
                "are kept for LocalRuns(retention=...) seconds)"
            )
        if run.owner != owner:
            raise owner_mismatch(run_id)
        return run

    def _sweep(self) -> None:
        """Forget the stopped runs past the retention period or the count (lock held)."""
        deadline = self._clock.monotonic() - self._retention
        stopped = self._stopped
        while stopped:
            run_id, stopped_at = next(iter(stopped.items()))
            if len(stopped) <= self._max_stopped and stopped_at > deadline:
                return
            self._drop(run_id)

    def _drop(self, run_id: str) -> None:
        """Forget a stopped run (lock held)."""
        self._stopped.pop(run_id, None)
        run = self._runs.pop(run_id, None)
        if run is not None:
            if run.idempotency is not None:
                self._keys.pop(run.idempotency[0], None)  # the key goes with its run
            run.log.wake()

    def _start(
        self,
        run_id: str,
        run: _LocalRun,
        start: Callable[[CancelHandle, Steering, Append], Published],
    ) -> None:
        handle = CancelHandle()
        steering = Steering()
        previous = run.thread
        run.handle = handle
        run.steering = steering
        run.status = "queued"

        def work() -> None:
            if previous is not None:
                previous.join()
            run.status = "running"
            run.log.append("status", {"status": "started"})
            tail: list[tuple[str, dict[str, Any]]] = []
            try:
                published = start(handle, steering, run.log.append)
                summary, tail = published.summary, published.tail
            except Exception as error:  # resume refused: busy, consumed, bad targets
                summary = summary_of_error(error)
            # The status, the run's last events and the end entry change together: a reader
            # that sees the interrupt can resume at once.
            with self._lock:
                run.summary = summary
                run.interrupts = list(summary.get("interrupts", []))
                run.status = str(summary["status"])
                for kind, data in tail:
                    run.log.append(kind, data)
                run.log.append("end", summary)
                run.handle = None
                run.steering = None
                steering.close()  # a run that never started takes nothing more
                if self._runs.get(run_id) is run:
                    self._stopped[run_id] = self._clock.monotonic()
                    self._stopped.move_to_end(run_id)
                    self._sweep()

        thread = threading.Thread(target=work, name=f"agentkit-run-{run_id[:8]}", daemon=True)
        run.thread = thread
        thread.start()
