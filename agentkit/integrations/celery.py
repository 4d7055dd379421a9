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
    run_id = queue.submit("assistant", "What's the weather in Paris?", owner=user_id)
    for entry in queue.events(run_id, owner=user_id):   # RunEvent(id, kind, data), blocking
        ...
    queue.resume(run_id, {interrupt_id: True}, owner=user_id)   # any worker continues
    queue.cancel(run_id, owner=user_id)                          # from any process

How runs stay whole:

* the run id is the checkpoint id; checkpoints live in Redis
  (:class:`~agentkit.checkpoint.RedisCheckPointStore`), so a run interrupted on one worker is
  resumed on any other;
* tasks are acknowledged late (``acks_late``, ``reject_on_worker_lost``): a task whose worker
  died is delivered again (after the broker's ``visibility_timeout``); a lease on the run id
  (``lease_ttl``, refreshed while the run lives; held by fresh runs, and by
  :meth:`~agentkit.Runner.resume`) makes sure only one worker runs it at a time. A task
  delivered while its run is held is sent again, due ``lease_ttl`` seconds later, never
  dropped; once the dead worker's lease expired, the new worker takes the run over (from its
  checkpoint, if it has one), so no run stays "running" without a worker;
* a worker process watches its runs (cancels, lease refreshes, its shutdown) with one thread
  and one pub/sub connection, whatever the number of runs; it connects again after Redis
  went away; a lost lease stops exactly the run that lost it; the worker's writes wait out a
  Redis restart;
* a run's interrupt (or final error) reaches the stream together with its ``end`` entry and
  its new state, so a resume sent the instant a reader sees the interrupt is accepted;
* a worker that receives SIGTERM (a deploy; Celery's warm shutdown) cancels its runs at a safe
  point (after the current tool calls, by default), so the checkpoint holds every finished
  tool; then it enqueues the run again as a resume, and another worker goes on from there:
  no approved tool runs twice and no run is lost. (Use ``--pool=threads`` or ``solo``: the
  shutdown signal reaches the runs of the worker's own process.)

Who can write the broker or Redis cannot steer a run:

* every task message is sealed (HMAC-SHA256 with the checkpoint key, or ``signing_key=``)
  over its run id, its kind, its input or resume data, a nonce, the run's stop count and an
  expiry (``message_ttl``). A worker runs a message only if it verifies and is the latest
  message sent for its run (its nonce is the one in the run's record), so a forged, altered,
  expired or replayed message, or resume data meant for another run or another stop, runs
  nothing: the worker logs an error naming what was wrong and leaves the run as it was;
* the run's record in Redis (owner, status, stop count, pending message, summary) is sealed
  the same way, and so are cancel requests;
* every call takes ``owner=`` (see :mod:`agentkit.integrations.runs`), and caller-chosen run
  ids are checked (``"X:cancel"`` is refused).

Entries are those of :mod:`agentkit.integrations.runs`; a run's ``end`` entry (its JSON summary)
is also the Celery task's result. Run input, session values and resume data travel as JSON.
Streams are capped (``stream_maxlen``): a reader that asks for trimmed entries gets a ``gap``
entry saying how many it lost.
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

import attrs

from agentkit._cancel import CancelHandle, CancelMode
from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit._events import Agent
from agentkit._lazy import present
from agentkit._options import steer_through, with_cancel, with_checkpoint_id, with_session_values
from agentkit._runlog import InlineRun, Summary, publish, summary_of_error
from agentkit._runner import Runner
from agentkit._steering import MAX_QUEUED, Steering, steering_message
from agentkit.errors import (
    AgentCancelledError,
    AgentKitRuntimeError,
    AgentKitTypeError,
    AgentKitValueError,
    CheckpointBusyError,
    CheckpointConsumedError,
    MissingDependencyError,
)
from agentkit.integrations._celery_worker import (
    OUTAGE_WAIT,
    Watcher,
    WatchHub,
    connect_shutdown_signal,
    patiently,
    shutting_down,
)
from agentkit.integrations._errors import (
    RunIdError,
    RunIntegrityError,
    RunNotFoundError,
    RunStateError,
    TaskMessageError,
    owner_mismatch,
)
from agentkit.integrations._idempotency import check_key, conflict, key_digest, request_digest
from agentkit.integrations._ledger import ReplayLedger, SQLiteReplayLedger
from agentkit.integrations._redislog import RedisRunLog, RunRecord
from agentkit.integrations._redisprefixes import claim_prefix
from agentkit.integrations._runids import check_owner, check_run_id
from agentkit.integrations._signing import Sealer, SealError, as_keys
from agentkit.integrations.runs import RunEvent, RunEventStream, to_messages
from agentkit.schema import ContentPart, Message

if TYPE_CHECKING:
    from agentkit._results import RunIterator
    from agentkit.checkpoint import Lease, RedisCheckPointStore

__all__ = [
    "AgentQueue",
    "ReplayLedger",
    "SQLiteReplayLedger",
    "cancel",
    "events",
    "resume",
    "submit",
    "TASK_NAME",
]

present([ReplayLedger, SQLiteReplayLedger], __name__)

_log = logging.getLogger("agentkit")

TASK_NAME = "agentkit.run"
"""The name of the Celery task that runs agents."""

_RUN_LEASE_TTL = 30.0
"""Seconds a worker's claim on a run lasts unless refreshed (``AgentQueue(lease_ttl=...)``)."""


_RESCUE_WAIT = 20.0
"""Seconds a web process keeps trying to fail a run (and free its idempotency key), or to
give a resume back, whose task message could not be sent, while Redis is away."""


class _MovedOn(Exception):
    """A run's record moved on before a change that expected it as it was."""


@attrs.frozen
class _Order:
    """A verified task message: run or resume ``run_id`` (the ``stops``-th stop of it)."""

    run_id: str
    agent: str
    kind: str
    payload: dict[str, Any]
    nonce: str
    stops: int
    expires: float

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> _Order:
        try:
            order = cls(
                run_id=body["run_id"],
                agent=body["agent"],
                kind=body["kind"],
                payload=body["payload"],
                nonce=body["nonce"],
                stops=body["stops"],
                expires=body["expires"],
            )
        except KeyError as error:
            raise TaskMessageError(f"the task message has no {error.args[0]!r}") from None
        if (
            not all(isinstance(text, str) for text in (order.run_id, order.agent, order.nonce))
            or order.kind not in ("run", "resume")
            or not isinstance(order.payload, dict)
            or type(order.stops) is not int
            or not isinstance(order.expires, (int, float))
        ):
            raise TaskMessageError("the task message holds values of the wrong type")
        return order


class AgentQueue:
    """Agents by name, run by Celery workers; events, cancels and resumes through Redis.

    Args:
        app: the Celery app (Redis as broker and result backend is the tested setup).
        redis_url: where run logs, run records and checkpoints live; default: ``REDIS_URL``,
            else the app's broker URL.
        prefix: prepended to the Redis keys of runs.
        checkpoint_prefix: prepended to the Redis keys of checkpoints. Both are recorded in
            the Redis database on first use; one that overlaps a prefix another deployment
            records there (one starts with the other: ``agentkit:run:`` and
            ``agentkit:run:t1-``) raises :class:`~agentkit.integrations.runs.RedisPrefixError`,
            since their keys would be shared.
        stream_maxlen: the most entries a run's stream keeps (approximately; oldest dropped,
            and a reader that asks for them gets a ``gap`` entry).
        ttl: seconds run logs, records and checkpoints live after their last write.
        shutdown_mode: how a worker's SIGTERM cancels its runs (a safe point by default).
        shutdown_timeout: seconds the safe point may take before the cancel becomes immediate.
        task_name: the Celery task name (one per app).
        signing_key: the key (16 bytes or more; ``str`` is UTF-8 encoded, surrounding
            whitespace dropped) that seals task messages, run records and cancel requests,
            or a list of keys for rotation (the first seals, all are accepted). Default: the
            checkpoint key (``AGENTKIT_CHECKPOINT_KEY``, else the key file), which workers and
            web processes must then share.
        message_ttl: seconds a task message stays valid after it was sent (default one day).
            A worker refuses an older one; the run it was sent for fails with an error saying
            so if no worker took it in time.
        lease_ttl: seconds a worker's claim on a run lasts unless refreshed (the worker
            refreshes it every third of that while the run lives). A run whose worker died
            (``kill -9``, a lost machine) can be taken over this long after its last refresh;
            a task delivered again meanwhile waits that long and tries again.
        durability: when a run is saved, as for :class:`~agentkit.Runner`. ``"step"`` (the
            default): after every finished model reply and tool call, so a worker killed
            mid-run loses at most the step in flight and the run goes on on another worker
            from there (a finished tool never runs again). ``"stop"``: only when the run
            stops (an interrupt, a cancel, a worker's shutdown); a short run then costs a
            worker about 3 ms of CPU less, and a run whose worker was killed starts again
            from its input, running its tools again: for agents whose tools may run twice.
        replay_ledger: where the processes note each task message whose run stopped,
            outside Redis (:class:`SQLiteReplayLedger` for one host, or a
            :class:`ReplayLedger` of yours). A worker refuses a message the ledger has seen
            end, whatever Redis says: someone who can write Redis can otherwise copy a run's
            record, checkpoint and sealed resume message, let a worker run it (a payment a
            human approved), restore the copies and push the message again, and the tool
            runs twice. Without a ledger (the default) that rollback replay is possible
            within ``message_ttl``; see the security guide.
        clock: the clock message expiry and the runs' leases are timed on (the system's by
            default). A web process stamps each task message with its expiry on it, and a
            worker compares that with its own; a worker refreshes its runs' leases, and
            counts one lost, on it, and its checkpoint store takes it (see
            :class:`~agentkit.checkpoint.RedisCheckPointStore`'s ``clock``). For tests (a
            :class:`~agentkit.testing.ManualClock`, or a clock set apart from the system's):
            the processes of a deployment compare the times they write down, so they must
            read clocks that agree.

    The same object (same module) is used by the workers, which :meth:`register` the agents,
    and by the web processes, which :meth:`submit`, read :meth:`events`, :meth:`resume` and
    :meth:`cancel`. Every web-side call takes ``owner=``: see :mod:`agentkit.integrations.runs`.
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
        signing_key: bytes | str | Sequence[bytes | str] | None = None,
        message_ttl: float = 24 * 3600.0,
        lease_ttl: float = _RUN_LEASE_TTL,
        durability: str = "step",
        replay_ledger: ReplayLedger | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if durability not in ("step", "stop"):
            raise AgentKitValueError(
                f"durability must be 'step' (save after every finished model reply and tool "
                f"call) or 'stop' (save when the run stops), got {durability!r}"
            )
        if replay_ledger is not None and not isinstance(replay_ledger, ReplayLedger):
            raise AgentKitTypeError(
                f"replay_ledger must be a ReplayLedger, such as SQLiteReplayLedger(path) "
                f"(got {replay_ledger!r})"
            )
        if not isinstance(shutdown_mode, CancelMode):
            raise AgentKitTypeError(f"shutdown_mode must be a CancelMode (got {shutdown_mode!r})")
        if ttl <= 0 or stream_maxlen <= 0 or message_ttl <= 0 or lease_ttl <= 0:
            raise AgentKitValueError(
                f"ttl, stream_maxlen, message_ttl and lease_ttl must be positive (got ttl={ttl}, "
                f"stream_maxlen={stream_maxlen}, message_ttl={message_ttl}, "
                f"lease_ttl={lease_ttl})"
            )
        self.app = app
        self._redis_url = redis_url
        self._prefix = prefix
        self._checkpoint_prefix = checkpoint_prefix
        self._maxlen = stream_maxlen
        self._ttl = float(ttl)
        self._message_ttl = float(message_ttl)
        self._lease_ttl = float(lease_ttl)
        self._clock = clock
        self.durability = durability
        self.replay_ledger = replay_ledger
        self._keys = None if signing_key is None else as_keys(signing_key)
        self.shutdown_mode = shutdown_mode
        self.shutdown_timeout = shutdown_timeout
        self._factories: dict[str, tuple[Callable[[], Agent], bool]] = {}
        self._runners: dict[str, Runner] = {}
        self._lock = threading.Lock()
        self._runlog: RedisRunLog | None = None
        self._hub: WatchHub | None = None
        self._store: RedisCheckPointStore | None = None
        queue = self

        def run_agent(task: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
            request = task.request
            route = (request.delivery_info or {}).get("routing_key")
            return queue._execute(request.hostname or "", route, args, kwargs)

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
            raise AgentKitValueError(f"an agent needs a non-empty name (got {name!r})")
        factory: Callable[[], Agent]
        if isinstance(agent, Agent):
            built = agent

            def factory() -> Agent:
                return built

        elif callable(agent):
            factory = agent
        else:
            raise AgentKitTypeError(
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
        built = Runner(
            factory(),
            enable_streaming=streaming,
            checkpoint_store=self.store,
            lease_ttl=self._lease_ttl,
            durability=self.durability,
        )
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
            raise AgentKitValueError(
                "AgentQueue needs Redis for run logs and checkpoints: pass redis_url=..., set "
                "REDIS_URL, or use a redis:// broker URL"
            )
        return url

    @property
    def store(self) -> RedisCheckPointStore:
        """The checkpoint store of the runs (Redis)."""
        log = self._log()
        with self._lock:
            if self._store is None:
                from agentkit.checkpoint import RedisCheckPointStore

                self._store = RedisCheckPointStore(
                    client=log.client,
                    prefix=self._checkpoint_prefix,
                    ttl=self._ttl,
                    outage_wait=OUTAGE_WAIT,  # a run's step writes wait out a Redis restart
                    clock=self._clock,
                )
            return self._store

    def _log(self) -> RedisRunLog:
        with self._lock:
            if self._runlog is None:
                try:
                    import redis
                except ImportError as exc:
                    raise MissingDependencyError(
                        "the Celery integration needs redis-py: pip install 'agentkit[celery]'"
                    ) from exc
                client = redis.Redis.from_url(self.redis_url)
                # No other deployment's keys may be ours (a prefix that starts with ours).
                claim_prefix(client, self._prefix, "runs")
                claim_prefix(client, self._checkpoint_prefix, "checkpoints")
                database = client.connection_pool.connection_kwargs.get("db", 0)
                sealer = Sealer(self._signing_keys, f"{self._prefix}\0db={database}")
                self._runlog = RedisRunLog(
                    client, prefix=self._prefix, maxlen=self._maxlen, ttl=self._ttl, sealer=sealer
                )
            return self._runlog

    def _watch_hub(self) -> WatchHub:
        """The watcher of this process's runs (made on first use)."""
        log = self._log()
        with self._lock:
            if self._hub is None:
                self._hub = WatchHub(log, clock=self._clock)
            return self._hub

    def _signing_keys(self) -> list[bytes]:
        if self._keys is not None:
            return self._keys
        from agentkit.checkpoint._keys import default_keys

        return default_keys()[0]  # the checkpoint key signs; earlier keys still verify

    def _seal_order(self, record: RunRecord, kind: str, payload: dict[str, Any]) -> str:
        """The sealed task message that runs (or resumes) ``record``'s run, once."""
        now = self._clock.time()
        body = {
            "run_id": record.run_id,
            "agent": record.agent,
            "kind": kind,
            "payload": payload,
            "nonce": record.pending,
            "stops": record.stops,
            "issued": now,
            "expires": now + self._message_ttl,
        }
        return self._log().sealer.seal("task", body)

    def _owned(self, run_id: str, owner: str | None) -> RunRecord:
        """The verified record of ``run_id`` if it belongs to ``owner``."""
        check_run_id(run_id)
        record, _ = self._log().record(run_id)
        if record.owner != owner:
            raise owner_mismatch(run_id)
        return record

    # --- web side ---

    def submit(
        self,
        agent_name: str,
        query_or_messages: str | Message | Sequence[Message | str | ContentPart],
        *,
        owner: str | None = None,
        checkpoint_id: str | None = None,
        session_values: Mapping[str, Any] | None = None,
        queue: str | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Enqueue a run of the agent registered as ``agent_name``; returns the run id.

        ``owner`` is the user or tenant id that may use the run (``None``: anyone who knows
        its id). The run id is ``checkpoint_id`` when given (it must be new), else a fresh
        one. ``session_values`` must be JSON-serializable. ``queue`` picks a Celery queue.

        With ``idempotency_key`` (a request id the client made up), a submission that
        repeats an earlier one (same key, same owner), from any process, returns the
        earlier run's id and enqueues nothing: Redis records the run and its key in one
        step, so of two submissions racing with one key exactly one starts a run. The key
        lives as long as the run's record (``ttl`` after its last change). If the run cannot
        be enqueued (the broker is down), the key is freed and the run marked failed, so
        that the client's retry starts it; when Redis itself failed, this is tried again
        for up to 20 seconds (a restart), and should it still fail, the
        client's retry with the same key finds the run queued and sends its task again.

        Raises:
            RunIdError: ``checkpoint_id`` is not a valid run id.
            RunStateError: the run id is taken, or the key was used for another request
                (another agent, input, session values or run id).
        """
        owner = check_owner(owner)
        key = check_key(idempotency_key)
        messages = to_messages(query_or_messages)
        run_id = uuid.uuid4().hex if checkpoint_id is None else check_run_id(checkpoint_id)
        payload = {
            "messages": [message.to_dict() for message in messages],
            "session_values": dict(session_values or {}),
        }
        _check_json(payload, "the run's messages and session_values")
        record = RunRecord(run_id, agent_name, owner, "queued", pending=uuid.uuid4().hex)
        log = self._log()
        if key is None:
            if not log.create(record):
                raise RunStateError(
                    f"run id {run_id!r} is taken; leave checkpoint_id out to get a new one"
                )
            self._send(record, "run", payload, queue, rescue=(None, ""))
            return run_id
        stored = key_digest(owner, key)
        request = request_digest(agent_name, messages, session_values, checkpoint_id)
        first = log.create_once(record, stored, request)
        if first is not None:
            first_id, first_request, _ = first
            if first_request != request:
                raise conflict(key, first_id)
            # A repeated submission: the same run. If it is still queued, its task may
            # never have reached the broker (Redis failed between the record and the
            # send, and the rescue below could not run): it is sent again. A worker runs
            # a run's message once at most (the record's nonce, the run's lease), so a
            # second copy of a message that did arrive runs nothing.
            self._send_again(first_id, payload, queue)
            return first_id
        self._send(record, "run", payload, queue, rescue=(stored, request))
        return run_id

    def _send(
        self,
        record: RunRecord,
        kind: str,
        payload: dict[str, Any],
        queue: str | None,
        *,
        rescue: tuple[str | None, str],
    ) -> None:
        """Send the run's task message; if that fails, fail the run (and free its
        idempotency key, ``rescue``: the key's digest, or ``None``, and the request's)."""
        try:
            self.task.apply_async(args=[self._seal_order(record, kind, payload)], queue=queue)
        except Exception as error:
            self._not_enqueued(record, *rescue, error)
            raise

    def _send_again(self, run_id: str, payload: dict[str, Any], queue: str | None) -> None:
        """Send a fresh run's task message again if the run is still queued for it."""
        record, _ = self._log().record(run_id)
        if record.status == "queued" and record.stops == 0:
            _log.info("agentkit: run %r is still queued; its task message is sent again", run_id)
            # Not failed if this send fails too: the first copy may be in the broker.
            self.task.apply_async(args=[self._seal_order(record, "run", payload)], queue=queue)

    def _not_enqueued(
        self, record: RunRecord, key: str | None, request: str, error: Exception
    ) -> None:
        """A run whose task could not be sent: fail it and free its idempotency key.

        The broker is often the same Redis, so the failure that stopped the send may stop
        these writes too: they are tried again while Redis restarts (up to
        ``_RESCUE_WAIT`` seconds), so that the run does not stay "queued" with its key.
        """
        log = self._log()
        summary = summary_of_error(error)

        def fail(current: RunRecord) -> RunRecord:
            if current.pending != record.pending or current.status != "queued":
                raise _MovedOn(record.run_id)  # a copy sent earlier did reach a worker
            return attrs.evolve(current, status="failed", stops=current.stops + 1, summary=summary)

        def rescue() -> None:
            if key is not None:
                log.forget_key(key, record.run_id, request)
            log.finish(record.run_id, fail, summary)

        try:
            patiently(rescue, "marks a run that could not be enqueued", wait=_RESCUE_WAIT)
        except _MovedOn:
            return
        except Exception as cleanup:  # the submission's own error is the one to raise
            _log.error(
                "agentkit: run %r could not be enqueued (%s) nor marked failed: %s; it stays "
                "queued until the client submits it again with its idempotency key (which "
                "sends it again) or cancels it",
                record.run_id, error, cleanup,
            )
            return
        self._consumed(record.run_id, record.pending)

    def events(
        self,
        run_id: str,
        last_event_id: str | None = None,
        *,
        owner: str | None = None,
        idle_timeout: float | None = None,
    ) -> RunEventStream:
        """Read the run's entries after ``last_event_id``, blocking for new ones, until ``end``.

        Raises:
            RunNotFoundError: no run has this id
                (:class:`~agentkit.integrations.runs.RunOwnerError`: not ``owner``'s).
            EventIdError: ``last_event_id`` is not an event id of a run (``"0-<n>"``).
        """
        check_run_id(run_id)
        log = self._log()
        # The owner check and the first batch: one round trip.
        record, _, first = log.record_and_read(run_id, last_event_id)
        if record.owner != owner:
            raise owner_mismatch(run_id)
        return RunEventStream(
            _ReadFirst(first, functools.partial(log.read, run_id)),
            last_event_id,
            idle_timeout=idle_timeout,
            is_live=functools.partial(log.is_live, run_id),
        )

    def resume(
        self,
        run_id: str,
        targets: Mapping[str, Any] | None = None,
        *,
        owner: str | None = None,
        queue: str | None = None,
    ) -> str | None:
        """Enqueue the resume of a stopped run; any worker continues it.

        ``targets`` maps interrupt ids to JSON resume data; the task message binds them to
        this run and this stop of it. Returns the id of the entry after which the resumed
        run's entries come (pass it to :meth:`events`).

        If the task cannot be sent (the broker is down), the run is stopped again as it was
        (tried for up to 20 seconds while Redis restarts) and the error is
        raised: the resume can be asked for again.

        Raises:
            RunNotFoundError: no run has this id
                (:class:`~agentkit.integrations.runs.RunOwnerError`: not ``owner``'s).
            RunStateError: the run is not interrupted, cancelled or failed (it is queued,
                running, completed, or another resume of it was enqueued already).
            ValueError: a target is not an interrupt id of the run's latest interrupt.
        """
        check_run_id(run_id)
        wanted = dict(targets or {})
        _check_json(wanted, "resume targets")
        nonce = uuid.uuid4().hex

        def claim(record: RunRecord) -> RunRecord:
            if record.owner != owner:
                raise owner_mismatch(run_id)
            if not record.stopped:
                raise RunStateError(
                    f"run {run_id!r} is {record.status}; only an interrupted, cancelled or "
                    "failed run can be resumed (and only once per stop)"
                )
            unknown = sorted(set(wanted) - set(record.interrupts))
            if unknown:
                known = ", ".join(map(repr, record.interrupts)) or "none"
                raise AgentKitValueError(
                    f"unknown interrupt id(s) {', '.join(map(repr, unknown))} for run "
                    f"{run_id!r}; its interrupt ids are: {known}"
                )
            return attrs.evolve(record, status="queued", pending=nonce, worker="")

        log = self._log()
        before: list[RunRecord] = []

        def remember_and_claim(record: RunRecord) -> RunRecord:
            before[:] = [record]
            return claim(record)

        record = log.update(run_id, remember_and_claim)
        try:
            log.clear_cancel(run_id)
            after = log.last_id(run_id)
            message = self._seal_order(record, "resume", {"targets": wanted})
            self.task.apply_async(args=[message], queue=queue)
        except Exception as error:
            self._unclaim(before[0], nonce, error)
            raise
        return after

    def _unclaim(self, stopped: RunRecord, nonce: str, error: Exception) -> None:
        """A resume whose task could not be sent: the run is stopped again as it was, so
        that the resume can be asked for again (tried while Redis restarts, as for
        :meth:`submit`)."""

        def back(current: RunRecord) -> RunRecord | None:
            if current.pending != nonce or current.status != "queued":
                return None  # moved on meanwhile
            return attrs.evolve(
                current, status=stopped.status, pending=stopped.pending, worker=stopped.worker
            )

        try:
            patiently(
                lambda: self._log().update(stopped.run_id, back),
                "gives a resume that could not be enqueued back",
                wait=_RESCUE_WAIT,
            )
        except Exception as cleanup:  # the resume's own error is the one to raise
            _log.error(
                "agentkit: the resume of run %r could not be enqueued (%s) nor undone: %s; "
                "cancel the run to stop it",
                stopped.run_id, error, cleanup,
            )

    def cancel(
        self, run_id: str, mode: CancelMode = CancelMode.IMMEDIATE, *, owner: str | None = None
    ) -> bool:
        """Cancel ``run_id`` from any process; ``False`` unless it is queued or running.

        A running run is cancelled by its worker (``mode`` applies). A run no worker has
        started yet is cancelled at once: its record says ``cancelled`` (with its ``end``
        entry), and its task message, should it reach a worker, runs nothing.
        """
        if not isinstance(mode, CancelMode):
            raise AgentKitTypeError(f"mode must be a CancelMode (got {mode!r})")
        record = self._owned(run_id, owner)
        if not record.live:
            return False
        log = self._log()
        if record.status == "queued" and self._cancel_queued(record):
            return True
        body = {"run_id": run_id, "mode": mode.value, "stops": record.stops}
        log.request_cancel(run_id, log.sealer.seal("cancel", body))
        return True

    def _cancel_queued(self, record: RunRecord) -> bool:
        """Cancel a run no worker has started: its record says so (with its ``end``
        entry), and its task message, if it reaches a worker, runs nothing. ``False`` if a
        worker started it meanwhile (then the worker is asked to cancel it)."""
        error = AgentCancelledError(
            f"run {record.run_id!r} was cancelled before a worker started it"
        )
        summary = summary_of_error(error)

        def cancelled(current: RunRecord) -> RunRecord:
            if current.status != "queued":
                raise _MovedOn(record.run_id)
            return attrs.evolve(
                current, status="cancelled", stops=current.stops + 1, summary=summary
            )

        try:
            self._log().finish(record.run_id, cancelled, summary)
        except _MovedOn:
            return False
        self._consumed(record.run_id, record.pending)
        return True

    def send(self, run_id: str, message: str | Message, *, owner: str | None = None) -> bool:
        """Add a user message to the run before its next model call, from any process;
        ``False`` unless it is queued or running.

        The message is sealed (as cancel requests are) and kept in Redis with the run's
        record (key ``<prefix><run id>:inbox``) before this returns; the run's worker takes it
        before its next model call, writes it into the run's checkpoint and only then drops
        it from Redis, so a worker that dies does not lose it (the run's next worker takes
        it). See :meth:`RunIterator.send <agentkit.results.RunIterator.send>` for where the
        message goes; a message the run ends without using is logged as a warning by its
        worker, and stays in Redis (until the run's entries expire) for a resume to use. A
        message sent in the instant between the run's end and its worker recording that end
        is accepted and left in Redis the same way, without the warning.

        Raises:
            RunNotFoundError: no run has this id
                (:class:`~agentkit.integrations.runs.RunOwnerError`: not ``owner``'s).
            AgentKitTypeError, AgentKitValueError: ``message`` is not a user message of at
                most 100,000 characters.
            AgentKitRuntimeError: 32 messages wait for the run already.
        """
        checked = steering_message(message)
        record = self._owned(run_id, owner)
        if not record.live:
            return False
        log = self._log()
        body = {"run_id": run_id, "id": uuid.uuid4().hex, "message": checked.to_dict()}
        if not log.push_message(run_id, log.sealer.seal("message", body), MAX_QUEUED):
            raise AgentKitRuntimeError(
                f"send(): {MAX_QUEUED} messages wait for run {run_id!r} already; wait for the "
                "run to use them (their agent entries) before sending more"
            )
        return True

    def status(self, run_id: str, *, owner: str | None = None) -> dict[str, Any]:
        """The run's state: ``status``, ``agent``, ``worker`` and its ``summary`` once stopped."""
        record = self._owned(run_id, owner)
        state: dict[str, Any] = {"status": record.status, "agent": record.agent}
        if record.worker:
            state["worker"] = record.worker
        if record.summary is not None:
            state["summary"] = record.summary
        return state

    def interrupts(self, run_id: str, *, owner: str | None = None) -> list[str]:
        """The interrupt ids of the run's latest interrupt (empty unless it is interrupted)."""
        return self._owned(run_id, owner).interrupts

    def has_run(self, run_id: str, *, owner: str | None = None) -> bool:
        """``True`` if Redis holds a record of ``run_id`` that belongs to ``owner``.

        Raises:
            RunIntegrityError: the record fails verification.
        """
        try:
            self._owned(run_id, owner)
        except (RunNotFoundError, RunIdError):
            return False
        return True

    # --- worker side ---

    def _execute(
        self, worker: str, route: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """The body of the Celery task: verify, run or resume, publish, requeue on shutdown."""
        try:
            order = self._open_order(args, kwargs)
            record, sealed, lease = self._current_record(order)
        except TaskMessageError as error:
            _log.error("agentkit: worker %s refused a task message: %s", worker, error)
            return {"status": "refused", "error": str(error)}
        try:
            refused = self._refused(worker, route, order, record)
        except BaseException:
            _let_go(lease)
            raise
        if refused is not None:
            _let_go(lease)
            return refused
        # "running": a worker took this very message before; it died, or still runs it.
        redelivered = record.status == "running"
        return self._run_order(
            worker,
            route,
            order,
            args[0],
            redelivered=redelivered,
            known=(record, sealed),
            lease=lease,
        )

    def _refused(
        self, worker: str, route: str | None, order: _Order, record: RunRecord
    ) -> dict[str, Any] | None:
        """What becomes of a verified order this worker does not run now (``None``: run it)."""
        if order.expires < self._clock.time():
            return self._expired(worker, order, record)
        if not record.live or record.stops != order.stops:
            # A delivery of a run that stopped since: at least once means sometimes twice;
            # the run already went on without this one.
            _log.info("agentkit: run %r is %s; a duplicate task", order.run_id, record.status)
            return {"status": "duplicate", "error": f"the run is {record.status}"}
        if self.replay_ledger is not None and self.replay_ledger.ended(order.nonce):
            # Redis says the message is the run's latest, the ledger that its run stopped
            # after it: Redis was rolled back to before that stop, and the message replayed.
            replayed = (
                f"the task message of run {order.run_id!r} was run to a stop before (the "
                "replay ledger says so): a replayed message, and Redis was rolled back to "
                "before that stop; nothing is run"
            )
            _log.error("agentkit: worker %s refused a task message: %s", worker, replayed)
            return {"status": "refused", "error": replayed}
        if shutting_down.is_set():
            # A worker going down still receives what it had asked the broker for.
            return self._requeue(worker, route, order, ran=False)
        return None

    def _open_order(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Order:
        """The verified order of a task message; :class:`TaskMessageError` for anything else."""
        if len(args) != 1 or kwargs:
            raise TaskMessageError(
                f"the task message is not a sealed agentkit message (it has {len(args)} "
                f"arguments and {len(kwargs)} keyword arguments; agentkit sends one sealed "
                "text); if it was sent by an older agentkit, submit the run again"
            )
        try:
            return _Order.from_body(self._log().sealer.open("task", args[0]))
        except SealError as error:
            raise TaskMessageError(str(error)) from None

    def _current_record(
        self, order: _Order
    ) -> tuple[RunRecord, str, Lease | CheckpointBusyError | None]:
        """The run's record and its sealed text, if ``order`` is the latest message sent for
        the run; and for a fresh run its lease, taken in the same round trip (or why it could
        not be: another worker holds it). The caller releases the lease.
        """
        lease: Lease | CheckpointBusyError | None = None
        try:
            if order.kind == "resume":  # the resume takes its own lease
                record, sealed = self._log().record(order.run_id)
            else:
                record, sealed, lease = self._record_and_lease(order.run_id)
        except (RunNotFoundError, RunIntegrityError) as error:
            raise TaskMessageError(f"run {order.run_id!r}: {error}") from None
        if record.pending != order.nonce:
            _let_go(lease)
            raise TaskMessageError(
                f"the message for run {order.run_id!r} is not the latest one sent for it "
                f"(it was made after stop {order.stops} of the run, which stopped "
                f"{record.stops} times so far): a replayed or superseded message; nothing is run"
            )
        return record, sealed, lease

    def _record_and_lease(self, run_id: str) -> tuple[RunRecord, str, Lease | CheckpointBusyError]:
        """The run's record, sealed text and lease (or why not) in one round trip."""
        from agentkit.checkpoint import Lease
        from agentkit.checkpoint._base import new_lease_owner

        store = self.store
        owner = new_lease_owner()
        record, sealed, took = self._log().record_and_lease(
            run_id, store.lease_key(run_id), owner, self._lease_ttl
        )
        if took:
            return record, sealed, Lease(store, run_id, owner, self._lease_ttl)
        return record, sealed, CheckpointBusyError(
            f"checkpoint {run_id!r} is being resumed by another run; try again when it has "
            "finished (the claim of a run that crashed expires by itself)"
        )

    def _expired(self, worker: str, order: _Order, record: RunRecord) -> dict[str, Any]:
        """A verified message that expired: fail its run if it still waits for this message."""
        age = f"it expired {self._clock.time() - order.expires:.0f} s ago"
        _log.error(
            "agentkit: worker %s refused the task message of run %r: %s (message_ttl)",
            worker,
            order.run_id,
            age,
        )
        if record.status != "queued":
            return {"status": "refused", "error": f"the task message expired ({age})"}
        error = TaskMessageError(
            f"the task message of run {order.run_id!r} waited in the queue longer than "
            f"message_ttl ({age}); no worker took it in time. Resume the run (or submit it "
            "again), and give the workers more capacity or AgentQueue a longer message_ttl"
        )
        summary = summary_of_error(error)

        def fail(current: RunRecord) -> RunRecord:
            if current.pending != order.nonce or current.status != "queued":
                raise TaskMessageError(f"run {order.run_id!r} moved on meanwhile")
            return attrs.evolve(current, status="failed", stops=current.stops + 1, summary=summary)

        try:
            self._log().finish(order.run_id, fail, summary)
        except TaskMessageError:
            return {"status": "refused", "error": f"the task message expired ({age})"}
        self._consumed(order.run_id, order.nonce)
        return summary

    def _run_order(
        self,
        worker: str,
        route: str | None,
        order: _Order,
        message: str,
        *,
        redelivered: bool,
        known: tuple[RunRecord, str],
        lease: Lease | CheckpointBusyError | None,
    ) -> dict[str, Any]:
        """Run or resume the order's run in this worker; publish its events; record its stop.

        ``message`` is the sealed task message (sent again when the run is held elsewhere);
        ``redelivered``: a worker took this message before (and died, or still runs it);
        ``known``: the run's verified record and sealed text as the worker read them (its
        record changes expect them unread, and read them again only when they changed);
        ``lease``: a fresh run's lease, taken with that read (or why it could not be).
        """
        log = self._log()
        run_id = order.run_id
        handle = CancelHandle()
        watcher = Watcher(
            self._watch_hub(),
            run_id,
            handle,
            stops=order.stops,
            shutdown_mode=self.shutdown_mode,
            shutdown_timeout=self.shutdown_timeout,
            lease_ttl=self._lease_ttl,
        )
        # Whether the hub hears the run's cancels already: then the run's stored cancel
        # request is read below, with the record's "running" mark (else the hub reads it).
        listening = watcher.start(check=False)
        taken, lease = lease, None  # lease: held while the run lives here
        tail: list[tuple[str, dict[str, Any]]] = []
        ran = False  # the run ran to a summary: its lease is given back below, not here
        try:
            try:
                lease, run = self._start(order, handle, watcher, taken, redelivered=redelivered)
            except CheckpointBusyError as error:
                # Another worker holds the run: alive (a duplicate delivery), or dead (its
                # lease expires within lease_ttl). Try again then, never drop the run.
                return self._retry_later(worker, route, order, message, error)
            except CheckpointConsumedError as error:
                if not redelivered:  # a "queued" record, yet done: rolled back, or replayed
                    _log.info("agentkit: run %r not started on %s: %s", run_id, worker, error)
                    return {"status": "duplicate", "error": str(error)}
                # Its checkpoint says it completed (a resume: that resume did), and a worker
                # took this message before: it died before it recorded the end. Nothing runs
                # again; the end is recorded below, so that the run does not stay "running".
                _log.warning(
                    "agentkit: run %r completed on a worker that died before it recorded the "
                    "run's end; worker %s records it",
                    run_id,
                    worker,
                )
                summary, ran = self._completed_summary(run_id), True
            else:
                started = [("status", {"status": "started", "worker": worker, "kind": order.kind})]
                try:
                    # The "running" mark, the first entry and the stored cancel request: one
                    # round trip. A retry after a lost reply reads the record again (its set may
                    # have passed).
                    record, sealed, requested = _record_start(
                        log, watcher, listening, _mark_running(order, worker), started, known
                    )
                    known = (record, sealed)
                except TaskMessageError as error:
                    run.close()
                    _log.error("agentkit: worker %s stopped run %r: %s", worker, run_id, error)
                    return {"status": "refused", "error": str(error)}
                if listening and requested is not None:
                    watcher.offer(requested)

                append = _appender(log, watcher, run_id)
                if isinstance(run, InlineRun):
                    published = run.publish(append)
                else:
                    published = publish(run, append)
                summary, tail = published.summary, published.tail
                ran = True
        except Exception as error:
            summary = summary_of_error(error)
            ran = True
        finally:
            # From here on the hub refreshes the lease no more, and the run was given a lease
            # it never refreshes itself (see Watcher.hold): nothing takes it again once freed.
            watcher.stop()
            if lease is not None and not ran:
                lease.release()
        if watcher.reason == "lease lost" or (
            watcher.reason == "shutdown" and summary["status"] == "cancelled"
        ):
            if lease is not None:
                lease.release()
            if watcher.reason == "lease lost":
                return self._after_lost_lease(worker, route, order, tail)
            return self._requeue(worker, route, order, ran=True, tail=tail)

        def stop(current: RunRecord) -> RunRecord:
            return attrs.evolve(
                current, status=summary["status"], stops=current.stops + 1, summary=summary
            )

        # The lease is freed by the same script that records the stop: a resume enqueued the
        # moment a reader sees the interrupt finds the run free to take. (Should the end
        # never be recorded, the lease expires within lease_ttl, and the task, not
        # acknowledged, is delivered again.)
        # Expects the "running" record unread; the watcher's notes append entries only, so
        # only another writer (which the set then detects) makes it read the record again.
        held = None if lease is None else (self.store.lease_key(run_id), lease.owner)
        tries = iter([known])
        patiently(
            lambda: log.finish(run_id, stop, summary, tail, next(tries, None), lease=held),
            "records a run's end",
        )
        self._consumed(order.run_id, order.nonce)
        return summary

    def _consumed(self, run_id: str, nonce: str) -> None:
        """Note in the replay ledger that the run of the message ``nonce`` stopped."""
        if self.replay_ledger is None:
            return
        try:
            self.replay_ledger.end(nonce)
        except Exception:  # the run stopped; only its replay protection is missing
            _log.exception(
                "agentkit: could not note the end of run %r's task message in the replay "
                "ledger; a rollback of Redis could replay it",
                run_id,
            )

    def _completed_summary(self, run_id: str) -> dict[str, Any]:
        """The summary of a run that completed on a worker that died before it recorded the
        end: its answer is the last one its entries show (``None`` if the worker died before
        it appended that too)."""
        log = self._log()
        seen = Summary()
        after: str | None = None
        while entries := log.read(run_id, after, 0):
            for entry in entries:
                if entry.kind == "agent":
                    seen.note(entry.data)
            after = entries[-1].id
        return {"status": "completed", "answer": seen.answer, "interrupts": [], "prompts": [],
                "error": None}

    def _start(
        self,
        order: _Order,
        handle: CancelHandle,
        watcher: Watcher,
        taken: Lease | CheckpointBusyError | None,
        *,
        redelivered: bool,
    ) -> tuple[Lease | None, RunIterator | InlineRun]:
        """Start the order's run (a fresh run holds a lease on its id): a resume's event
        iterator, or a fresh run ready to run in the task's thread (:class:`InlineRun`).

        A fresh run's lease (``taken`` with the read of its record, or why it could not be)
        is refreshed by the process's watch hub (``watcher``), which tells the run when it
        is lost: the run starts no thread of its own for it.

        A redelivered order goes on from the run's checkpoint, when the worker that took it
        first saved one: a fresh run is resumed; a resume whose targets the run has moved
        past (it interrupted again, or saved progress) is resumed without them.

        Raises:
            CheckpointBusyError: another worker holds the run.
            CheckpointConsumedError: a resume of it completed already.
        """
        try:
            runner = self.runner(order.agent)
        except BaseException:
            _let_go(taken)
            raise
        run_id = order.run_id
        # Messages sent to the run (send) reach it from Redis, before each model call.
        steer = steer_through(Steering(_RedisInbox(self._log(), run_id, watcher)))
        if order.kind == "resume":
            targets = order.payload["targets"]
            try:
                return None, runner.resume(run_id, with_cancel(handle), steer, targets=targets)
            except ValueError:
                if not redelivered:
                    raise
                _log.info("agentkit: run %r moved past its resume data; resuming it", run_id)
                return None, runner.resume(run_id, with_cancel(handle), steer)
        if isinstance(taken, CheckpointBusyError):
            raise taken
        assert taken is not None  # a fresh order's read takes its lease
        lease = taken
        try:
            if redelivered and self.store.get(run_id) is not None:
                lease.release()  # the resume takes its own
                _log.info("agentkit: run %r was saved by a worker that died; resuming it", run_id)
                return None, runner.resume(run_id, with_cancel(handle), steer)
            messages = [Message.from_dict(item) for item in order.payload["messages"]]
            run = InlineRun(
                runner,
                messages,
                (
                    # The hub refreshes the lease; the run is told when it is lost. The task
                    # message holds the input: a run that stops before its first step is
                    # started again from it, so its first save is its first step's.
                    with_checkpoint_id(run_id, lease=watcher.hold(lease), save_input=False),
                    with_session_values(order.payload.get("session_values") or {}),
                    with_cancel(handle),
                    steer,
                ),
            )
        except BaseException:
            watcher.give_back(lease)  # the hub refreshes it no more
            raise
        return lease, run

    def _retry_later(
        self,
        worker: str,
        route: str | None,
        order: _Order,
        message: str,
        error: CheckpointBusyError,
    ) -> dict[str, Any]:
        """Send ``message`` again, due once a lease not refreshed since now has expired."""
        countdown = self._lease_ttl
        _log.info(
            "agentkit: run %r is held by another worker (%s); worker %s sends its task again, "
            "due in %g s",
            order.run_id,
            error,
            worker,
            countdown,
        )
        self.task.apply_async(args=[message], queue=route, countdown=countdown)
        return {"status": "retrying", "countdown": countdown}

    def _after_lost_lease(
        self,
        worker: str,
        route: str | None,
        order: _Order,
        tail: list[tuple[str, dict[str, Any]]],
    ) -> dict[str, Any]:
        """The run stopped here because its lease was lost: leave it, or enqueue it again.

        Another worker that took the lease owns the run now; if none did (Redis was away
        longer than the lease), the run is enqueued again as a resume, like at a shutdown.
        """
        from agentkit.checkpoint import lease_for

        try:
            probe = lease_for(self.store, order.run_id, self._lease_ttl)
        except CheckpointBusyError:
            _log.info("agentkit: run %r goes on on another worker", order.run_id)
            return {"status": "lease lost"}
        try:
            return self._requeue(worker, route, order, ran=True, tail=tail)
        finally:
            probe.release()

    def _requeue(
        self,
        worker: str,
        route: str | None,
        order: _Order,
        *,
        ran: bool,
        tail: list[tuple[str, dict[str, Any]]] | None = None,
    ) -> dict[str, Any]:
        """Enqueue a run this worker stopped (its shutdown, a lost lease): as a resume if it
        was saved. A run that never started here goes back as it came (a resume keeps its
        targets). ``tail`` holds the run's last events (not appended yet).
        """
        kind, payload = order.kind, order.payload
        if ran and self.store.get(order.run_id) is not None:
            kind, payload = "resume", {"targets": {}}
        nonce = uuid.uuid4().hex

        def requeue(current: RunRecord) -> RunRecord:
            if current.pending != order.nonce:
                raise TaskMessageError(f"run {order.run_id!r} moved on meanwhile")
            return attrs.evolve(current, status="queued", pending=nonce, worker="")

        log = self._log()
        record = log.update(order.run_id, requeue)
        self._consumed(order.run_id, order.nonce)
        for entry_kind, data in tail or ():
            log.append(order.run_id, entry_kind, data)
        log.append(order.run_id, "status", {"status": "requeued", "worker": worker, "kind": kind})
        self.task.apply_async(args=[self._seal_order(record, kind, payload)], queue=route)
        _log.info("agentkit: worker %s stopped run %r; enqueued again", worker, order.run_id)
        return {"status": "requeued"}


class _ReadFirst:
    """A run's read function whose first call returns the batch read with the owner check."""

    __slots__ = ("_first", "_read")

    def __init__(
        self, first: list[RunEvent], read: Callable[[str | None, float], list[RunEvent]]
    ) -> None:
        self._first: list[RunEvent] | None = first
        self._read = read

    def __call__(self, after: str | None, wait: float) -> list[RunEvent]:
        first, self._first = self._first, None
        return first if first else self._read(after, wait)



class _RedisInbox:
    """The messages ``AgentQueue.send`` left in Redis for one run (a ``SteeringSource``).

    Each is opened (sealed for this purpose and deployment) and checked before the run sees
    it: one that fails, or was sealed for another run, is logged and dropped.
    """

    def __init__(self, log: RedisRunLog, run_id: str, watcher: Watcher) -> None:
        self._log = log
        self._run_id = run_id
        self._watcher = watcher  # says whether a message may wait (no read when none was sent)
        self._texts: dict[str, str] = {}  # message id -> its sealed text, to drop it by

    def fetch(self) -> list[tuple[str, Message]]:
        if not self._watcher.take_mail():
            return []
        found: list[tuple[str, Message]] = []
        refused: list[str] = []
        for sealed in self._log.messages(self._run_id, MAX_QUEUED):
            try:
                body = self._log.sealer.open("message", sealed)
                if body.get("run_id") != self._run_id or not isinstance(body.get("id"), str):
                    raise SealError(f"it was sealed for run {body.get('run_id')!r}")
                message = steering_message(Message.from_dict(body["message"]))
            except Exception as error:
                _log.error(
                    "agentkit: dropped a message sent to run %r: %s", self._run_id, error
                )
                refused.append(sealed)
                continue
            self._texts[body["id"]] = sealed
            found.append((body["id"], message))
        if refused:
            self._log.drop_messages(self._run_id, refused)
        return found

    def acknowledge(self, ids: Sequence[str]) -> None:
        texts = [self._texts.pop(key) for key in ids if key in self._texts]
        if texts:
            self._log.drop_messages(self._run_id, texts)


def _appender(
    log: RedisRunLog, watcher: Watcher, run_id: str
) -> Callable[[str, dict[str, Any]], str]:
    """How a worker appends its run's entries (waiting out a Redis outage).

    Each append also says whether messages wait in the run's inbox: a message sent before an
    event was appended reaches the run's next model call, whether or not its notice reached
    the watcher yet.
    """

    def append(kind: str, data: dict[str, Any]) -> str:
        entry_id, waiting = patiently(
            lambda: log.append_and_check(run_id, kind, data), "appends an entry"
        )
        if waiting:
            watcher.mail()
        return entry_id

    return append


def _let_go(lease: Lease | CheckpointBusyError | None) -> None:
    """Release a lease taken with a run's record for an order that is not run."""
    if lease is not None and not isinstance(lease, CheckpointBusyError):
        lease.release()


def _record_start(
    log: RedisRunLog,
    watcher: Watcher,
    listening: bool,
    change: Callable[[RunRecord], RunRecord],
    entries: list[tuple[str, dict[str, Any]]],
    known: tuple[RunRecord, str],
) -> tuple[RunRecord, str, str | None]:
    """Record the run's start (:meth:`RedisRunLog.start`); return its record, sealed text
    and stored cancel request.

    The same round trip says whether messages were sent to the run before it started: the
    watcher then lets the run read its inbox at its first model call; later ones are announced
    to the watcher by the hub once it listens (a run nobody writes to reads no inbox). A retry
    after a lost reply reads the record again (its set may have passed).
    """
    tries = iter([known])
    if listening:
        watcher.take_mail()
    record, sealed, requested, mail = patiently(
        lambda: log.start(watcher.run_id, change, entries, next(tries, None)), "records a run"
    )
    if mail:
        watcher.mail()
    return record, sealed, requested


def _mark_running(order: _Order, worker: str) -> Callable[[RunRecord], RunRecord]:
    """The record change of a run that starts on ``worker`` for ``order``."""

    def running(current: RunRecord) -> RunRecord:
        if current.pending != order.nonce or not current.live:
            raise TaskMessageError(f"run {order.run_id!r} moved on before it started")
        return attrs.evolve(current, status="running", worker=worker)

    return running


def _check_json(value: Any, what: str) -> None:
    """Refuse, before anything is recorded, what cannot travel to a worker as JSON."""
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        raise AgentKitTypeError(
            f"{what} must be JSON-serializable to travel to a Celery worker ({error}); pass "
            "plain dicts, lists, strings, numbers, booleans and None"
        ) from None


def submit(
    queue: AgentQueue,
    agent_name: str,
    query_or_messages: str | Message | Sequence[Message | str | ContentPart],
    *,
    owner: str | None = None,
    checkpoint_id: str | None = None,
    session_values: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> str:
    """Enqueue a run; see :meth:`AgentQueue.submit`."""
    return queue.submit(
        agent_name,
        query_or_messages,
        owner=owner,
        checkpoint_id=checkpoint_id,
        session_values=session_values,
        idempotency_key=idempotency_key,
    )


def events(
    queue: AgentQueue, run_id: str, last_event_id: str | None = None, *, owner: str | None
) -> RunEventStream:
    """Read a run's events; see :meth:`AgentQueue.events`."""
    return queue.events(run_id, last_event_id, owner=owner)


def cancel(
    queue: AgentQueue,
    run_id: str,
    mode: CancelMode = CancelMode.IMMEDIATE,
    *,
    owner: str | None = None,
) -> bool:
    """Cancel a run from any process; see :meth:`AgentQueue.cancel`."""
    return queue.cancel(run_id, mode, owner=owner)


def resume(
    queue: AgentQueue,
    run_id: str,
    targets: Mapping[str, Any] | None = None,
    *,
    owner: str | None = None,
) -> str | None:
    """Enqueue a resume; see :meth:`AgentQueue.resume`."""
    return queue.resume(run_id, targets, owner=owner)
