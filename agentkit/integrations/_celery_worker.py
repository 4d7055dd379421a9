"""The worker side of the Celery integration: the shutdown signal and the runs' watcher.

Celery sends ``worker_shutting_down`` in a worker's main process when a warm shutdown begins
(SIGTERM). :data:`shutting_down` records it; the watcher then cancels each running run at the
queue's safe point. The watcher also delivers cancel requests from web processes (a pub/sub
channel, and a Redis key read when a run starts, after every reconnection and every few
seconds) and refreshes the fresh runs' leases; it connects again after Redis went away, and
stops a run whose lease it lost.

One :class:`WatchHub` per queue and process does this for all the runs of the process: one
thread and one pub/sub connection (a pattern subscription to every run's cancel channel),
whatever the number of runs; each run is a :class:`Watcher` registered with it while the run
lives. The thread ends once no run was registered for :attr:`WatchHub.IDLE` seconds (or at
once when the worker shuts down with no run left); the next run starts it again.
A cancel request is sealed: one that fails verification, names another run or was made
before the run's latest stop is ignored (and logged).

The leases' schedule (when a refresh is due, when a lease that could not be refreshed is
lost) is read on the hub's clock (``WatchHub(log, clock=)``: the queue's, the system's by
default); a test moves a :class:`~agentkit.testing.ManualClock` past a lease instead of
waiting for it (the hub looks at the clock at least every ``POLL_INTERVAL / 2`` seconds).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agentkit._cancel import CancelHandle, CancelMode
from agentkit._checkpoints import KeptLease
from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit.errors import AgentKitTimeoutError
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


def on_worker_init(sender: Any = None, **_: Any) -> None:
    """A worker starts in this process: its broker connection uses the patient transport
    (see :mod:`agentkit.integrations._celery_transport`) if its broker is Redis."""
    app = getattr(sender, "app", None)
    if app is None:
        return
    from agentkit.integrations._celery_transport import use_patient_transport

    if use_patient_transport(app):
        _log.info("agentkit: the worker's Redis broker connections survive a Redis restart")


def connect_shutdown_signal() -> None:
    """Connect :func:`on_worker_shutting_down` and :func:`on_worker_init` to Celery's
    signals (once per process)."""
    global _connected
    with _lock:
        if _connected:
            return
        from celery.signals import worker_init, worker_shutting_down

        worker_shutting_down.connect(on_worker_shutting_down, weak=False)
        worker_init.connect(on_worker_init, weak=False)
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
    """One run in a worker, as the process's :class:`WatchHub` watches it.

    :meth:`start` registers the run (from then on a cancel request for it is delivered, the
    worker's shutdown cancels it, and the lease given to :meth:`hold` is refreshed);
    :meth:`stop` unregisters it, and returns once the hub does nothing more for it. A lease
    the hub cannot refresh before it expires, or finds held by another worker, is lost: the
    run is cancelled at once (:attr:`reason` ``"lease lost"``), since another worker may now
    run it. :attr:`reason` says why the run was cancelled here (``"user"``, ``"shutdown"``,
    ``"lease lost"``), or is ``None``.
    """

    def __init__(
        self,
        hub: WatchHub,
        run_id: str,
        handle: CancelHandle,
        *,
        stops: int,
        shutdown_mode: CancelMode,
        shutdown_timeout: float,
        lease_ttl: float,
    ) -> None:
        self._hub = hub
        self._log = hub.log
        self._clock = hub.clock
        self.run_id = run_id
        self._stops = stops
        self._handle = handle
        self._shutdown_mode = shutdown_mode
        self._shutdown_timeout = shutdown_timeout
        self._lease_ttl = lease_ttl
        # Held while the hub acts on the run, and by stop(): after stop() nothing more is
        # done for the run (no status entry after its end entry).
        self._lock = threading.Lock()
        self._active = False
        self._lease: Lease | None = None
        self._on_lost: Callable[[str], object] | None = None  # the run's, while it watches
        self._lease_until = 0.0  # when the lease is known to last until (the hub's clock)
        self._next_refresh = 0.0
        self.next_key_check = 0.0
        self.reason: str | None = None  # "user", "shutdown" or "lease lost"
        # Whether messages sent to the run (AgentQueue.send) may wait in its Redis inbox: set
        # by the hub when one is published (and after the hub could not listen, or at its key
        # checks), taken by the run before a model call, so that a run nobody writes to reads
        # no inbox (see take_mail). True at first: a message sent before the run started.
        self._mail = True

    def start(self, *, check: bool = True) -> bool:
        """Register the run with the hub; ``True`` if the hub listens for its cancels now.

        A cancel request made before the run was registered is stored in Redis: with
        ``check`` (the default), it is read here when the hub already listens (else the
        hub reads it once it listens). With ``check=False`` the caller reads it (see
        :meth:`offer`) after this call returned ``True``.
        """
        with self._lock:
            self._active = True
        self.next_key_check = time.monotonic() + WatchHub.KEY_CHECK
        listening = self._hub.add(self)
        if listening and check:
            requested = self._log.cancel_requested(self.run_id)
            if requested is not None:
                self.offer(requested)
        return listening

    def stop(self) -> None:
        """Unregister the run; returns once the hub does nothing more for it."""
        self._hub.remove(self)
        with self._lock:
            self._active = False
            self._lease = None

    def hold(self, lease: Lease) -> KeptLease:
        """Refresh ``lease`` (just taken) while the run lives; the lease to give the run.

        The run is given the returned :class:`~agentkit._checkpoints.KeptLease`: it refreshes
        nothing itself (the hub does, for every run of the process), and is told when the
        hub loses the lease (its step writer then writes nothing more).
        """
        with self._lock:
            now = self._clock.monotonic()
            self._lease_until = now + self._lease_ttl
            self._next_refresh = now + self._lease_ttl / 3
            self._lease = lease
        return _HubLease(self, lease)

    def take_mail(self) -> bool:
        """Whether the run's inbox may hold messages now (cleared by the call: a message
        published after it sets it again, so none is missed between the call and the read
        that follows it)."""
        mail, self._mail = self._mail, False
        return mail

    def mail(self) -> None:
        """A message may wait in the run's inbox (called by the hub)."""
        self._mail = True

    def offer(self, sealed: str) -> None:
        """A sealed cancel request for this run: cancel it if the request is valid."""
        with self._lock:
            if self._active:
                self._user_cancel(sealed)

    # --- called by the hub's thread ---

    def shutdown_if_asked(self) -> None:
        """The worker shuts down: cancel the run at the queue's safe point."""
        if not shutting_down.is_set() or self.reason is not None:
            return
        with self._lock:
            if self._active and self.reason is None:
                self.reason = "shutdown"
                self._handle.cancel(self._shutdown_mode, self._shutdown_timeout)
                self._note({"status": "stopping", "reason": "worker shutdown"})

    def refresh_lease(self, now: float) -> None:
        """Refresh the lease if it is due at ``now`` (the hub's clock; raises when Redis
        cannot be reached)."""
        if self._lease is None or now < self._next_refresh:
            return
        with self._lock:
            lease = self._lease
            if lease is None or not self._active:
                return
            if not lease.refresh():
                self._lost_lease("another worker holds it now")
                return
            self._lease_until = now + self._lease_ttl
            self._next_refresh = now + self._lease_ttl / 3

    def next_refresh(self) -> float:
        """When the lease is due to be refreshed (``inf`` without a lease)."""
        return self._next_refresh if self._lease is not None else float("inf")

    def check_lease_time(self) -> None:
        """During an outage: past the lease's expiry, another worker may have taken the run."""
        if self._lease is None:
            return
        with self._lock:
            if (
                self._active
                and self._lease is not None
                and self._clock.monotonic() >= self._lease_until
            ):
                self._lost_lease(f"it could not be refreshed within its {self._lease_ttl:g} s")

    def _lost_lease(self, why: str) -> None:
        self._lease = None
        if self.reason == "lease lost":
            return
        self.reason = "lease lost"
        _log.error(
            "agentkit: lost the lease on run %r (%s); stopping the run here, since another "
            "worker may run it",
            self.run_id,
            why,
        )
        # The run's writer is fenced first, then the run cancelled: the save a cancelled run
        # makes at its stop must find the writer fenced, or it would overwrite the run the
        # other worker now holds.
        self._tell_loss(f"its lease was lost ({why}), so another worker may run it")
        self._handle.cancel(CancelMode.IMMEDIATE)
        self._note({"status": "stopping", "reason": "lease lost"})

    def _tell_loss(self, reason: str) -> None:
        """Tell the run its lease was lost (under the lock; ``on_lost`` returns at once: it
        fences the run's step writer, which takes no lock, and requests a cancel)."""
        on_lost, self._on_lost = self._on_lost, None
        if on_lost is not None:
            try:
                on_lost(reason)
            except Exception:  # the watcher has nobody to raise to
                _log.exception("agentkit: telling run %r of its lost lease failed", self.run_id)

    # --- the run's side of its lease (see _HubLease) ---

    def watch_loss(self, on_lost: Callable[[str], object]) -> None:
        """Call ``on_lost(reason)`` once the lease is lost (at once if it is)."""
        with self._lock:
            self._on_lost = on_lost
            if self.reason == "lease lost":
                self._tell_loss("its lease was lost, so another worker may run it")

    def unwatch_loss(self) -> None:
        """Tell the run of no loss any more."""
        with self._lock:
            self._on_lost = None

    def refresh_now(self, ttl: float | None) -> bool:
        """Refresh the held lease now; ``False`` if it is not held here any more."""
        with self._lock:
            lease = self._lease
            return lease is not None and self._active and lease.refresh(ttl)

    def give_back(self, lease: Lease) -> None:
        """Release ``lease``; the hub stops refreshing it."""
        with self._lock:
            if self._lease is lease:
                self._lease = None
        lease.release()

    def _note(self, status: dict[str, Any]) -> None:
        """Append a status entry to the run's log, if Redis can be reached now."""
        try:
            self._log.append(self.run_id, "status", status)
        except Exception:  # Redis is away: the entry is news only, the cancel took effect
            _log.debug("agentkit: could not note %r for run %r", status, self.run_id,
                       exc_info=True)

    def _user_cancel(self, sealed: str) -> None:
        if self.reason is not None:
            return  # cancelled already (the same request, read again after an outage)
        try:
            body = self._log.sealer.open("cancel", sealed)
        except SealError as error:
            _log.error("agentkit: ignored a cancel request for run %r: %s", self.run_id, error)
            return
        if body.get("run_id") != self.run_id or body.get("stops") != self._stops:
            _log.warning(
                "agentkit: ignored a cancel request for run %r: it was made for run %r before "
                "stop %r, and this is stop %d",
                self.run_id,
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


class _HubLease(KeptLease):
    """A run's lease as its run sees it: the hub refreshes it and says when it is lost."""

    __slots__ = ("_lease", "_watcher")

    def __init__(self, watcher: Watcher, lease: Lease) -> None:
        self._watcher = watcher
        self._lease = lease

    @property
    def checkpoint_id(self) -> str:
        """The leased id (the run id)."""
        return self._lease.checkpoint_id

    @property
    def ttl(self) -> float:
        """Seconds the lease lasts unless refreshed."""
        return self._lease.ttl

    @property
    def owner(self) -> str:
        """The owner name the lease is held under (the run's writes are fenced by it)."""
        return self._lease.owner

    def refresh(self, ttl: float | None = None) -> bool:
        """Extend the lease now, if the hub still holds it for the run."""
        return self._watcher.refresh_now(ttl)

    def release(self) -> None:
        """Give the lease back (the hub stops refreshing it)."""
        self._watcher.give_back(self._lease)

    def watch(self, on_lost: Callable[[str], object]) -> None:
        """Call ``on_lost(reason)`` once the hub loses the lease."""
        self._watcher.watch_loss(on_lost)

    def unwatch(self) -> None:
        """The run ended: tell it nothing more."""
        self._watcher.unwatch_loss()


class WatchHub:
    """Watches every run of a worker process: one thread, one pub/sub connection.

    The thread subscribes to the pattern of all runs' cancel channels once, and delivers a
    message to the registered run it names (others are ignored); it refreshes the registered
    runs' leases, and cancels them when the worker shuts down. It outlives a lost connection
    to Redis (a restart, a failover): it reconnects with a growing pause (``MIN_BACKOFF`` to
    ``MAX_BACKOFF`` seconds), subscribes again and reads the stored cancel request of every
    registered run, so a cancel made meanwhile is not lost; it also reads each run's request
    every ``KEY_CHECK`` seconds. While Redis is away, a run whose lease expired is stopped.

    The thread is started by the first registration and ends once no run was registered for
    ``IDLE`` seconds, or at once when the worker shuts down and no run is left. Thread-safe.

    The runs' leases are timed on ``clock`` (the system's by default): when a refresh is
    due, and when a lease that could not be refreshed during an outage counts as lost. The
    hub looks at the clock at least every ``POLL_INTERVAL / 2`` seconds, so a test that
    moves a :class:`~agentkit.testing.ManualClock` on sees the refreshes that fell due made
    within that. Its other waits (reconnecting, the key checks, the idle end) are real time.
    """

    MIN_BACKOFF = 0.05
    MAX_BACKOFF = 2.0
    KEY_CHECK = 2.0
    IDLE = 10.0

    def __init__(self, log: RedisRunLog, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.log = log
        self.clock = clock
        prefix = log.prefix
        self._prefix = prefix
        # The runs' cancel requests and the notices of messages sent to them (AgentQueue.send).
        self._pattern = _glob_escape(prefix) + "*"
        self._lock = threading.Lock()
        # Watchers by run id: a list, since a task delivered twice to one process (the
        # second is refused by the run's lease) registers a second watcher for a while.
        self._runs: dict[str, list[Watcher]] = {}
        self._thread: threading.Thread | None = None
        self._listening = False  # the pattern subscription is confirmed on a live connection
        self._idle_since = time.monotonic()
        self._outage = False  # the connection to Redis is lost right now
        self._wake = threading.Event()

    @property
    def thread(self) -> threading.Thread | None:
        """The hub's thread while it runs (``None`` once it ended for lack of runs)."""
        with self._lock:
            return self._thread

    @property
    def listening(self) -> bool:
        """``True`` while the hub's subscription is confirmed on a live connection."""
        with self._lock:
            return self._listening

    @property
    def runs(self) -> list[str]:
        """The ids of the runs registered now."""
        with self._lock:
            return list(self._runs)

    def add(self, watcher: Watcher) -> bool:
        """Register a run (start the thread if needed); ``True`` if its cancels are heard now."""
        with self._lock:
            self._runs.setdefault(watcher.run_id, []).append(watcher)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="agentkit-celery-watch", daemon=True
                )
                self._listening = False
                self._thread.start()
            return self._listening

    def remove(self, watcher: Watcher) -> None:
        """Unregister a run's watcher (another one registered under its id stays)."""
        with self._lock:
            watchers = self._runs.get(watcher.run_id, [])
            if watcher in watchers:
                watchers.remove(watcher)
                if not watchers:
                    del self._runs[watcher.run_id]
                if not self._runs:
                    self._idle_since = time.monotonic()

    def _snapshot(self) -> list[Watcher]:
        with self._lock:
            return [watcher for watchers in self._runs.values() for watcher in watchers]

    def _done(self) -> bool:
        """End the thread if no run is left and the hub was idle long enough (or shutdown)."""
        with self._lock:
            if self._runs:
                return False
            idle = time.monotonic() - self._idle_since
            if idle < self.IDLE and not shutting_down.is_set():
                return False
            self._thread = None
            self._listening = False
            return True

    def _watch(self) -> None:
        backoff = self.MIN_BACKOFF
        while True:
            try:
                self._listen()
                return
            except Exception as error:  # Redis unreachable: wait, then listen again
                with self._lock:
                    self._listening = False
                if not self._outage:
                    self._outage = True
                    _log.warning(
                        "agentkit: lost the connection to Redis while watching runs (%s: %s); "
                        "connecting again",
                        type(error).__name__,
                        error,
                    )
                for watcher in self._snapshot():
                    watcher.shutdown_if_asked()
                    watcher.check_lease_time()
                if self._done():
                    return
                self._wake.wait(backoff)
                backoff = min(backoff * 2, self.MAX_BACKOFF)

    def _listen(self) -> None:
        pubsub = self.log.client.pubsub()
        try:
            pubsub.psubscribe(self._pattern)
            deadline = time.monotonic() + _SUBSCRIBE_WAIT
            while True:
                message = pubsub.get_message(timeout=POLL_INTERVAL / 2)
                if message is not None and message.get("type") == "psubscribe":
                    break
                if time.monotonic() > deadline:
                    raise AgentKitTimeoutError("Redis did not confirm the subscription")
            with self._lock:
                self._listening = True
            registered = self._snapshot()
            # Asked before we listened (or while we could not).
            self._check_keys(registered)
            if self._outage:
                self._outage = False
                _log.info("agentkit: watching runs again")
            while not self._done():
                watchers = self._snapshot()
                for watcher in watchers:
                    watcher.shutdown_if_asked()
                now = self.clock.monotonic()
                wake = min((w.next_refresh() for w in watchers), default=float("inf"))
                wait = max(0.0, min(POLL_INTERVAL / 2, wake - now))
                message = pubsub.get_message(timeout=wait)
                if message is not None and message.get("type") == "pmessage":
                    self._deliver(message)
                self._tend(self._snapshot())
        finally:
            with self._lock:
                self._listening = False
            try:
                pubsub.close()
            except Exception:  # a broken connection: nothing to close
                _log.debug("agentkit: closing a pub/sub connection failed", exc_info=True)

    def _deliver(self, message: dict[str, Any]) -> None:
        channel = _text(message.get("channel"))
        if not channel.startswith(self._prefix):
            return
        if channel.endswith(_INBOX):
            with self._lock:
                watchers = list(self._runs.get(channel[len(self._prefix) : -len(_INBOX)], ()))
            for watcher in watchers:
                watcher.mail()
            return
        if not channel.endswith(_CANCEL):
            return
        with self._lock:
            watchers = list(self._runs.get(channel[len(self._prefix) : -len(_CANCEL)], ()))
        data = message["data"]
        for watcher in watchers:
            watcher.offer(data.decode() if isinstance(data, bytes) else str(data))

    def _tend(self, watchers: list[Watcher]) -> None:
        """Refresh the leases that are due; read the cancel keys that are due."""
        now, lease_now = time.monotonic(), self.clock.monotonic()
        due = []
        for watcher in watchers:
            watcher.refresh_lease(lease_now)
            if now >= watcher.next_key_check:
                watcher.next_key_check = now + self.KEY_CHECK
                due.append(watcher)
        self._check_keys(due)

    def _check_keys(self, watchers: list[Watcher]) -> None:
        """Read the stored cancel requests of ``watchers`` (one round trip) and offer them."""
        if not watchers:
            return
        for watcher in watchers:
            watcher.mail()  # a notice may have been missed (not listening, or lost): read once
        log = self.log
        with log.client.pipeline(transaction=False) as pipe:
            for watcher in watchers:
                pipe.get(log.key(watcher.run_id, _CANCEL))
            values = pipe.execute()
        for watcher, value in zip(watchers, values, strict=True):
            if value is not None:
                watcher.offer(_text(value))


_CANCEL = ":cancel"
_INBOX = ":inbox"
_SUBSCRIBE_WAIT = 10.0


def _glob_escape(text: str) -> str:
    """``text`` as a literal in a Redis glob pattern."""
    return "".join("\\" + char if char in "\\*?[]" else char for char in text)


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
