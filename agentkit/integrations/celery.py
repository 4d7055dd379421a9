"""Running agents on Celery workers, with their events in Redis Streams (extra ``[celery]``).

A web process enqueues a run; a Celery worker runs it; every event goes to a Redis Stream that
any web process can read (and a browser can reconnect to with ``Last-Event-ID``)::

    # tasks.py: imported by the workers (celery -A tasks worker --pool=threads) and the web app
    from celery import Celery
    from agentkit.integrations.celery import AgentQueue

    app = Celery("tasks", broker=REDIS_URL, backend=REDIS_URL)
    queue = AgentQueue(app)
    queue.register("assistant", build_agent)      # agents live in the worker, never in messages

    # a web process
    run_id = queue.submit("assistant", "What's the weather in Paris?")
    for entry in queue.events(run_id):            # RunEvent(id, kind, data), blocking for new ones
        ...
    queue.resume(run_id, {interrupt_id: True})    # a human approved: any worker continues
    queue.cancel(run_id)                          # from any process

How runs stay whole:

* the run id is the checkpoint id; checkpoints live in Redis (:class:`RedisCheckPointStore`), so
  a run interrupted on one worker is resumed on any other;
* tasks are acknowledged late (``acks_late``, ``reject_on_worker_lost``): a task whose worker
  died is delivered again; a lease on the run id (held by fresh runs, and by
  :meth:`Runner.resume`) makes sure only one worker runs it at a time;
* a worker that receives SIGTERM (a deploy; Celery's warm shutdown) cancels its runs at a safe
  point (after the current tool calls, by default), so the checkpoint holds every finished
  tool; then it enqueues the run again as a resume, and another worker goes on from there:
  no approved tool runs twice and no run is lost. (Use ``--pool=threads`` or ``solo``: the
  shutdown signal reaches the runs of the worker's own process.)

Entries are those of :mod:`agentkit.integrations.runs`; a run's ``end`` entry (its JSON summary)
is also the Celery task's result. Run input, session values and resume data travel as JSON.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentkit._runlog import publish, summary_of_error
from agentkit.cancel import CancelHandle, CancelMode
from agentkit.checkpoint import DEFAULT_LEASE_TTL
from agentkit.errors import CheckpointBusyError, CheckpointConsumedError
from agentkit.events import Agent
from agentkit.integrations._celery_worker import Watcher, connect_shutdown_signal, shutting_down
from agentkit.integrations._redislog import RedisRunLog, check_event_id
from agentkit.integrations.runs import (
    RunEventStream,
    RunNotFoundError,
    RunStateError,
    to_messages,
)
from agentkit.options import with_cancel, with_checkpoint_id, with_session_values
from agentkit.runner import Runner
from agentkit.schema import Message

if TYPE_CHECKING:
    from agentkit.checkpoint import Lease, RedisCheckPointStore

__all__ = [
    "AgentQueue",
    "cancel",
    "events",
    "resume",
    "submit",
    "TASK_NAME",
]

_log = logging.getLogger("agentkit")

TASK_NAME = "agentkit.run"
"""The name of the Celery task that runs agents."""


class AgentQueue:
    """Agents by name, run by Celery workers; events, cancels and resumes through Redis.

    Args:
        app: the Celery app (Redis as broker and result backend is the tested setup).
        redis_url: where run logs, run states and checkpoints live; default: ``REDIS_URL``,
            else the app's broker URL.
        prefix: prepended to the Redis keys of runs.
        checkpoint_prefix: prepended to the Redis keys of checkpoints.
        stream_maxlen: the most entries a run's stream keeps (approximately; oldest dropped).
        ttl: seconds run logs, states and checkpoints live after their last write.
        shutdown_mode: how a worker's SIGTERM cancels its runs (a safe point by default).
        shutdown_timeout: seconds the safe point may take before the cancel becomes immediate.
        task_name: the Celery task name (one per app).

    The same object (same module) is used by the workers, which :meth:`register` the agents,
    and by the web processes, which :meth:`submit`, read :meth:`events`, :meth:`resume` and
    :meth:`cancel`.
    """

    def __init__(
        self,
        app: Any,
        *,
        redis_url: str | None = None,
        prefix: str = "agentkit:run:",
        checkpoint_prefix: str = "agentkit:checkpoint:",
        stream_maxlen: int = 10_000,
        ttl: float = 7 * 24 * 3600.0,
        shutdown_mode: CancelMode = CancelMode.AFTER_TOOL_CALLS,
        shutdown_timeout: float = 60.0,
        task_name: str = TASK_NAME,
    ) -> None:
        if not isinstance(shutdown_mode, CancelMode):
            raise TypeError(f"shutdown_mode must be a CancelMode (got {shutdown_mode!r})")
        if ttl <= 0 or stream_maxlen <= 0:
            raise ValueError(
                f"ttl and stream_maxlen must be positive (got ttl={ttl}, "
                f"stream_maxlen={stream_maxlen})"
            )
        self.app = app
        self._redis_url = redis_url
        self._prefix = prefix
        self._checkpoint_prefix = checkpoint_prefix
        self._maxlen = stream_maxlen
        self._ttl = float(ttl)
        self.shutdown_mode = shutdown_mode
        self.shutdown_timeout = shutdown_timeout
        self._factories: dict[str, tuple[Callable[[], Agent], bool]] = {}
        self._runners: dict[str, Runner] = {}
        self._lock = threading.Lock()
        self._runlog: RedisRunLog | None = None
        self._store: RedisCheckPointStore | None = None
        queue = self

        def run_agent(
            task: Any, run_id: str, agent_name: str, kind: str, payload: dict[str, Any]
        ) -> dict[str, Any]:
            request = task.request
            route = (request.delivery_info or {}).get("routing_key")
            return queue._execute(request.hostname or "", route, run_id, agent_name, kind, payload)

        # Late acks: a task whose worker died is delivered again (the run id's lease keeps it
        # to one worker at a time).
        self.task: Any = app.task(
            name=task_name, bind=True, acks_late=True, reject_on_worker_lost=True
        )(run_agent)
        connect_shutdown_signal()

    # --- registry (worker side) ---

    def register(
        self, name: str, agent: Agent | Callable[[], Agent], *, enable_streaming: bool = True
    ) -> None:
        """Make an agent runnable by ``name``: an agent, or a function that builds one.

        A function is called once, in the worker, when the first run of ``name`` starts.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"an agent needs a non-empty name (got {name!r})")
        factory: Callable[[], Agent]
        if isinstance(agent, Agent):
            built = agent

            def factory() -> Agent:
                return built

        elif callable(agent):
            factory = agent
        else:
            raise TypeError(
                f"register() takes an agent or a function that builds one (got {agent!r})"
            )
        with self._lock:
            self._factories[name] = (factory, enable_streaming)
            self._runners.pop(name, None)

    def runner(self, name: str) -> Runner:
        """The Runner of the registered agent ``name`` (built on first use)."""
        with self._lock:
            runner = self._runners.get(name)
            if runner is not None:
                return runner
            entry = self._factories.get(name)
        if entry is None:
            known = ", ".join(sorted(self._factories)) or "none"
            raise RunNotFoundError(
                f"no agent named {name!r} is registered in this worker (registered: {known}); "
                "call queue.register(name, agent) in the module the worker imports"
            )
        factory, streaming = entry
        built = Runner(factory(), enable_streaming=streaming, checkpoint_store=self.store)
        with self._lock:
            return self._runners.setdefault(name, built)

    # --- Redis ---

    @property
    def redis_url(self) -> str:
        """The Redis URL of run logs and checkpoints."""
        url = self._redis_url or os.environ.get("REDIS_URL") or ""
        broker = str(self.app.conf.broker_url or "")
        if not url and broker.startswith(("redis://", "rediss://", "unix://")):
            url = broker
        if not url:
            raise ValueError(
                "AgentQueue needs Redis for run logs and checkpoints: pass redis_url=..., set "
                "REDIS_URL, or use a redis:// broker URL"
            )
        return url

    @property
    def store(self) -> RedisCheckPointStore:
        """The checkpoint store of the runs (Redis)."""
        with self._lock:
            if self._store is None:
                from agentkit.checkpoint import RedisCheckPointStore

                self._store = RedisCheckPointStore(
                    client=self._log().client, prefix=self._checkpoint_prefix, ttl=self._ttl
                )
            return self._store

    def _log(self) -> RedisRunLog:
        if self._runlog is None:
            try:
                import redis
            except ImportError as exc:
                raise ImportError(
                    "the Celery integration needs redis-py: pip install 'agentkit[celery]'"
                ) from exc
            client = redis.Redis.from_url(self.redis_url)
            self._runlog = RedisRunLog(
                client, prefix=self._prefix, maxlen=self._maxlen, ttl=self._ttl
            )
        return self._runlog

    # --- web side ---

    def submit(
        self,
        agent_name: str,
        query_or_messages: str | Message | Sequence[Message],
        *,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
        queue: str | None = None,
    ) -> str:
        """Enqueue a run of the agent registered as ``agent_name``; returns the run id.

        The run id is ``checkpoint_id`` when given (it must be new), else a fresh one.
        ``session_values`` must be JSON-serializable. ``queue`` picks a Celery queue.
        """
        messages = to_messages(query_or_messages)
        run_id = checkpoint_id or uuid.uuid4().hex
        payload = {
            "messages": [message.to_dict() for message in messages],
            "session_values": dict(session_values or {}),
        }
        _check_json(payload, "the run's messages and session_values")
        log = self._log()
        if not log.create(run_id, agent_name):
            raise RunStateError(
                f"run id {run_id!r} is taken; leave checkpoint_id out to get a new one"
            )
        self.task.apply_async(args=[run_id, agent_name, "run", payload], queue=queue)
        return run_id

    def events(
        self, run_id: str, last_event_id: str | None = None, *, idle_timeout: float | None = None
    ) -> RunEventStream:
        """Read the run's entries after ``last_event_id``, blocking for new ones, until ``end``.

        Raises:
            RunNotFoundError: no run has this id.
            ValueError: ``last_event_id`` is not an event id.
        """
        check_event_id(last_event_id)
        log = self._log()
        log.state(run_id)
        return RunEventStream(
            functools.partial(log.read, run_id),
            last_event_id,
            idle_timeout=idle_timeout,
            is_live=functools.partial(log.is_live, run_id),
        )

    def resume(
        self, run_id: str, targets: Mapping[str, Any] | None = None, *, queue: str | None = None
    ) -> str | None:
        """Enqueue the resume of a stopped run; any worker continues it.

        ``targets`` maps interrupt ids to JSON resume data. Returns the id of the entry after
        which the resumed run's entries come (pass it to :meth:`events`).

        Raises:
            RunNotFoundError: no run has this id.
            RunStateError: the run is not interrupted, cancelled or failed (it is queued,
                running, completed, or another resume of it was enqueued already).
        """
        wanted = dict(targets or {})
        _check_json(wanted, "resume targets")
        log = self._log()
        claimed = log.claim_resume(run_id)
        if claimed < 0:
            log.state(run_id)  # raises RunNotFoundError
        state = log.state(run_id)
        if claimed == 0:
            raise RunStateError(
                f"run {run_id!r} is {state.get('status')}; only an interrupted, cancelled or "
                "failed run can be resumed (and only once per stop)"
            )
        after = log.last_id(run_id)
        self.task.apply_async(
            args=[run_id, state["agent"], "resume", {"targets": wanted}], queue=queue
        )
        return after

    def cancel(self, run_id: str, mode: CancelMode = CancelMode.IMMEDIATE) -> bool:
        """Ask the worker of ``run_id`` to cancel it; ``False`` unless it is queued or running."""
        if not isinstance(mode, CancelMode):
            raise TypeError(f"mode must be a CancelMode (got {mode!r})")
        log = self._log()
        if log.state(run_id).get("status") not in ("queued", "running"):
            return False
        log.request_cancel(run_id, mode.value)
        return True

    def status(self, run_id: str) -> dict[str, Any]:
        """The run's state: ``status``, ``agent``, ``worker`` and its ``summary`` once stopped."""
        state: dict[str, Any] = dict(self._log().state(run_id))
        if "summary" in state:
            state["summary"] = json.loads(state["summary"])
        return state

    def interrupts(self, run_id: str) -> list[str]:
        """The interrupt ids of the run's latest interrupt (empty unless it is interrupted)."""
        summary = self.status(run_id).get("summary") or {}
        return list(summary.get("interrupts", [])) if summary.get("status") == "interrupted" else []

    def has_run(self, run_id: str) -> bool:
        """``True`` if Redis holds a record of ``run_id``."""
        log = self._log()
        return bool(log.client.exists(log.key(run_id)))

    # --- worker side ---

    def _execute(
        self,
        worker: str,
        route: str | None,
        run_id: str,
        agent_name: str,
        kind: str,
        payload: dict[str, Any],
    ) -> dict[str, Any]:
        """The body of the Celery task: run or resume, publish the events, requeue on shutdown."""
        if shutting_down.is_set():
            # A worker going down still receives what it had asked the broker for.
            return self._requeue(worker, route, run_id, agent_name, kind, payload, ran=False)
        log = self._log()
        try:
            status = log.state(run_id).get("status")
        except RunNotFoundError:
            status = None
        if status not in ("queued", "running"):
            # A delivery of a run that stopped since (or whose records expired): at least
            # once means sometimes twice; the run already went on without this one.
            _log.info("agentkit: run %r is %s; the task is a duplicate", run_id, status)
            return {"status": "duplicate", "error": f"the run is {status or 'unknown'}"}
        append = functools.partial(log.append, run_id)
        handle = CancelHandle()
        lease: Lease | None = None
        watcher = Watcher(
            log,
            run_id,
            handle,
            shutdown_mode=self.shutdown_mode,
            shutdown_timeout=self.shutdown_timeout,
        )
        watcher.start()
        try:
            try:
                runner = self.runner(agent_name)
                if kind == "run":
                    from agentkit.checkpoint import lease_for

                    lease = lease_for(self.store, run_id, DEFAULT_LEASE_TTL)
                    watcher.lease = lease
                    messages = [Message.from_dict(item) for item in payload["messages"]]
                    run = runner.run(
                        messages,
                        with_checkpoint_id(run_id),
                        with_session_values(payload.get("session_values") or {}),
                        with_cancel(handle),
                    )
                else:
                    run = runner.resume(run_id, with_cancel(handle), targets=payload["targets"])
            except (CheckpointBusyError, CheckpointConsumedError) as error:
                # Another worker runs it, or it completed: a duplicate delivery, nothing to do.
                _log.info("agentkit: run %r not started on %s: %s", run_id, worker, error)
                return {"status": "duplicate", "error": str(error)}
            log.set_state(run_id, status="running", worker=worker)
            append("status", {"status": "started", "worker": worker, "kind": kind})
            summary = publish(run, append)
        except Exception as error:
            summary = summary_of_error(error)
        finally:
            watcher.stop()
            if lease is not None:
                lease.release()
        if watcher.reason == "shutdown" and summary["status"] == "cancelled":
            return self._requeue(worker, route, run_id, agent_name, kind, payload, ran=True)
        log.finish(run_id, summary)
        return summary

    def _requeue(
        self,
        worker: str,
        route: str | None,
        run_id: str,
        agent_name: str,
        kind: str,
        payload: dict[str, Any],
        *,
        ran: bool,
    ) -> dict[str, Any]:
        """Enqueue a run this worker stopped for its shutdown: as a resume if it was saved.

        A run that never started here goes back as it came (a resume keeps its targets).
        """
        if ran and self.store.get(run_id) is not None:
            kind, payload = "resume", {"targets": {}}
        log = self._log()
        log.set_state(run_id, status="queued")
        log.append(run_id, "status", {"status": "requeued", "worker": worker, "kind": kind})
        self.task.apply_async(args=[run_id, agent_name, kind, payload], queue=route)
        _log.info("agentkit: worker %s shutting down; run %r enqueued again", worker, run_id)
        return {"status": "requeued"}


def _check_json(value: Any, what: str) -> None:
    """Refuse, before anything is recorded, what cannot travel to a worker as JSON."""
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"{what} must be JSON-serializable to travel to a Celery worker ({error}); pass "
            "plain dicts, lists, strings, numbers, booleans and None"
        ) from None


def submit(
    queue: AgentQueue,
    agent_name: str,
    query_or_messages: str | Message | Sequence[Message],
    *,
    checkpoint_id: str | None = None,
    session_values: Mapping[str, Any] | None = None,
) -> str:
    """Enqueue a run; see :meth:`AgentQueue.submit`."""
    return queue.submit(
        agent_name, query_or_messages, checkpoint_id=checkpoint_id, session_values=session_values
    )


def events(queue: AgentQueue, run_id: str, last_event_id: str | None = None) -> RunEventStream:
    """Read a run's events; see :meth:`AgentQueue.events`."""
    return queue.events(run_id, last_event_id)


def cancel(queue: AgentQueue, run_id: str, mode: CancelMode = CancelMode.IMMEDIATE) -> bool:
    """Cancel a run from any process; see :meth:`AgentQueue.cancel`."""
    return queue.cancel(run_id, mode)


def resume(queue: AgentQueue, run_id: str, targets: Mapping[str, Any] | None = None) -> str | None:
    """Enqueue a resume; see :meth:`AgentQueue.resume`."""
    return queue.resume(run_id, targets)
