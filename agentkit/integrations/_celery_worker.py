"""The worker side of the Celery integration: the shutdown signal and the per-run watcher.

Celery sends ``worker_shutting_down`` in a worker's main process when a warm shutdown begins
(SIGTERM). :data:`shutting_down` records it; each running run's :class:`Watcher` then cancels
its run at the queue's safe point. The watcher also delivers cancel requests from web
processes (a pub/sub channel, and a Redis key read when it starts listening and every few
seconds) and refreshes a fresh run's lease; it connects again after Redis went away, and
stops the run when it lost the lease.
A cancel request is sealed: one that fails verification, names another run or was made
before the run's latest stop is ignored (and logged).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agentkit.cancel import CancelHandle, CancelMode
from agentkit.integrations._redislog import RedisRunLog
from agentkit.integrations._signing import SealError
from agentkit.integrations.runs import POLL_INTERVAL

if TYPE_CHECKING:
    from agentkit.checkpoint import Lease

_log = logging.getLogger("agentkit")

shutting_down = threading.Event()
_lock = threading.Lock()
_connected = False


def on_worker_shutting_down(**_: Any) -> None:
    """Celery's warm shutdown began in this process: the watchers stop their runs."""
    shutting_down.set()


def connect_shutdown_signal() -> None:
    """Connect :func:`on_worker_shutting_down` to Celery's signal (once per process)."""
    global _connected
    with _lock:
        if _connected:
            return
        from celery.signals import worker_shutting_down

        worker_shutting_down.connect(on_worker_shutting_down, weak=False)
        _connected = True


OUTAGE_WAIT = 60.0
"""Seconds a worker keeps trying to write a run's entries and record while Redis is away."""

_T = TypeVar("_T")


def patiently(call: Callable[[], _T], what: str, *, wait: float = OUTAGE_WAIT) -> _T:
    """``call()``, tried again with growing pauses while Redis cannot be reached.

    For the writes of a running run (its entries, its record): a restart or failover of Redis
    delays them instead of failing the run. After ``wait`` seconds the connection error is
    raised (the task's message, not acknowledged then, is delivered again later).
    """
    import redis

    deadline = time.monotonic() + wait
    pause = 0.05
    warned = False
    while True:
        try:
            return call()
        except (redis.ConnectionError, redis.TimeoutError) as error:
            if time.monotonic() + pause > deadline:
                raise
            if not warned:
                warned = True
                _log.warning("agentkit: Redis is away while a worker %s (%s); trying again",
                             what, error)
            time.sleep(pause)
            pause = min(pause * 2, 2.0)


class Watcher:
    """Per run in a worker: delivers cancel requests and the shutdown, refreshes the lease.

    It outlives a lost connection to Redis (a restart, a failover): it reconnects with a
    growing pause (``MIN_BACKOFF`` to ``MAX_BACKOFF`` seconds), subscribes again and reads the
    run's stored cancel request, so a cancel made meanwhile is not lost; it also reads that
    request every ``KEY_CHECK`` seconds, for cancels published while a connection was being
    made again. A lease it cannot refresh before it expires, or finds held by another worker,
    is lost: the run is cancelled at once (:attr:`reason` ``"lease lost"``), since another
    worker may now run it.
    """

    MIN_BACKOFF = 0.05
    MAX_BACKOFF = 2.0
    KEY_CHECK = 2.0

    def __init__(
        self,
        log: RedisRunLog,
        run_id: str,
        handle: CancelHandle,
        *,
        stops: int,
        shutdown_mode: CancelMode,
        shutdown_timeout: float,
        lease_ttl: float,
    ) -> None:
        self._log = log
        self._shutdown_mode = shutdown_mode
        self._shutdown_timeout = shutdown_timeout
        self._run_id = run_id
        self._stops = stops
        self._handle = handle
        self._lease_ttl = lease_ttl
        self._stop = threading.Event()
        # A channel of this watcher's own: stop() publishes to it, so a watcher waiting for a
        # cancel message wakes at once instead of at the end of its poll (the run's ``end``
        # entry is written, and the worker's thread freed, only once the watcher stopped).
        self._wake_channel = log.key(run_id, f":watcher:{uuid.uuid4().hex}")
        self._lease: Lease | None = None
        self._lease_until = 0.0  # monotonic time the lease is known to last until
        self._next_refresh = 0.0
        self._outage = False  # the connection to Redis is lost right now
        self.reason: str | None = None  # "user", "shutdown" or "lease lost"
        self._thread = threading.Thread(
            target=self._watch, name=f"agentkit-watch-{run_id[:8]}", daemon=True
        )

    def start(self) -> None:
        """Start watching (a thread that :meth:`stop` joins)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching; returns once the thread ended (at once: the watcher is woken)."""
        self._stop.set()
        try:
            self._log.client.publish(self._wake_channel, b"stop")
        except Exception:
            # Only slower: the watcher still sees the stop at the end of its poll.
            _log.warning(
                "agentkit: could not wake the watcher of run %r; it stops within %.2f s",
                self._run_id,
                POLL_INTERVAL / 2,
                exc_info=True,
            )
        self._thread.join()

    def hold(self, lease: Lease) -> None:
        """Refresh ``lease`` (just taken) while the run lives."""
        now = time.monotonic()
        self._lease_until = now + self._lease_ttl
        self._next_refresh = now + self._lease_ttl / 3
        self._lease = lease

    def _watch(self) -> None:
        backoff = self.MIN_BACKOFF
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception as error:  # Redis unreachable: wait, then listen again
                if not self._outage:
                    self._outage = True
                    _log.warning(
                        "agentkit: lost the connection to Redis while watching run %r (%s: "
                        "%s); connecting again",
                        self._run_id,
                        type(error).__name__,
                        error,
                    )
                self._shutdown_if_asked()
                self._check_lease_time()
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.MAX_BACKOFF)
            else:
                return

    def _listen(self) -> None:
        log = self._log
        pubsub = log.pubsub()
        cancel_channel = log.key(self._run_id, ":cancel")
        ended = False
        try:
            pubsub.subscribe(cancel_channel, self._wake_channel)
            self._check_cancel_key()  # asked before we listened (or while we could not)
            if self._outage:
                self._outage = False
                _log.info("agentkit: watching run %r again", self._run_id)
            next_key_check = time.monotonic() + self.KEY_CHECK
            while not self._stop.is_set():
                self._shutdown_if_asked()
                message = pubsub.get_message(timeout=POLL_INTERVAL / 2)
                if (
                    message is not None
                    and message.get("type") == "message"
                    and _text(message.get("channel")) == cancel_channel
                ):
                    data = message["data"]
                    self._user_cancel(data.decode() if isinstance(data, bytes) else str(data))
                now = time.monotonic()
                if now >= next_key_check:
                    next_key_check = now + self.KEY_CHECK
                    self._check_cancel_key()
                self._refresh_lease(now)
            ended = True
        finally:
            if ended:  # the next run's watcher listens on it (unsubscribed)
                log.give_back(pubsub)
            else:
                try:
                    pubsub.close()
                except Exception:  # a broken connection: nothing to give back
                    _log.debug("agentkit: closing a pub/sub connection failed", exc_info=True)

    def _shutdown_if_asked(self) -> None:
        if shutting_down.is_set() and self.reason is None:
            self.reason = "shutdown"
            self._handle.cancel(self._shutdown_mode, self._shutdown_timeout)
            self._note({"status": "stopping", "reason": "worker shutdown"})

    def _check_cancel_key(self) -> None:
        requested = self._log.cancel_requested(self._run_id)
        if requested is not None:
            self._user_cancel(requested)

    def _refresh_lease(self, now: float) -> None:
        lease = self._lease
        if lease is None or now < self._next_refresh:
            return
        if not lease.refresh():
            self._lost_lease("another worker holds it now")
            return
        self._lease_until = now + self._lease_ttl
        self._next_refresh = now + self._lease_ttl / 3

    def _check_lease_time(self) -> None:
        """During an outage: past the lease's expiry, another worker may have taken the run."""
        if self._lease is not None and time.monotonic() >= self._lease_until:
            self._lost_lease(f"it could not be refreshed within its {self._lease_ttl:g} s")

    def _lost_lease(self, why: str) -> None:
        if self.reason == "lease lost":
            return
        self.reason = "lease lost"
        self._lease = None
        _log.error(
            "agentkit: lost the lease on run %r (%s); stopping the run here, since another "
            "worker may run it",
            self._run_id,
            why,
        )
        self._handle.cancel(CancelMode.IMMEDIATE)
        self._note({"status": "stopping", "reason": "lease lost"})

    def _note(self, status: dict[str, Any]) -> None:
        """Append a status entry to the run's log, if Redis can be reached now."""
        try:
            self._log.append(self._run_id, "status", status)
        except Exception:  # Redis is away: the entry is news only, the cancel took effect
            _log.debug("agentkit: could not note %r for run %r", status, self._run_id,
                       exc_info=True)

    def _user_cancel(self, sealed: str) -> None:
        if self.reason is not None:
            return  # cancelled already (the same request, read again after an outage)
        try:
            body = self._log.sealer.open("cancel", sealed)
        except SealError as error:
            _log.error("agentkit: ignored a cancel request for run %r: %s", self._run_id, error)
            return
        if body.get("run_id") != self._run_id or body.get("stops") != self._stops:
            _log.warning(
                "agentkit: ignored a cancel request for run %r: it was made for run %r before "
                "stop %r, and this is stop %d",
                self._run_id,
                body.get("run_id"),
                body.get("stops"),
                self._stops,
            )
            return
        try:
            chosen = CancelMode(body.get("mode"))
        except ValueError:
            chosen = CancelMode.IMMEDIATE
        self.reason = "user"
        self._handle.cancel(chosen)
        self._note({"status": "cancelling", "mode": chosen.value})


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
