"""The worker side of the Celery integration: the shutdown signal and the per-run watcher.

Celery sends ``worker_shutting_down`` in a worker's main process when a warm shutdown begins
(SIGTERM). :data:`shutting_down` records it; each running run's :class:`Watcher` then cancels
its run at the queue's safe point. The watcher also delivers cancel requests from web
processes (a Redis key, checked once, and a pub/sub channel) and refreshes a fresh run's lease.
A cancel request is sealed: one that fails verification, names another run or was made
before the run's latest stop is ignored (and logged).
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import TYPE_CHECKING, Any

from agentkit.cancel import CancelHandle, CancelMode
from agentkit.checkpoint import DEFAULT_LEASE_TTL
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


class Watcher:
    """Per run in a worker: delivers cancel requests and the shutdown, refreshes the lease."""

    def __init__(
        self,
        log: RedisRunLog,
        run_id: str,
        handle: CancelHandle,
        *,
        stops: int,
        shutdown_mode: CancelMode,
        shutdown_timeout: float,
    ) -> None:
        self._log = log
        self._shutdown_mode = shutdown_mode
        self._shutdown_timeout = shutdown_timeout
        self._run_id = run_id
        self._stops = stops
        self._handle = handle
        self._stop = threading.Event()
        # A channel of this watcher's own: stop() publishes to it, so a watcher waiting for a
        # cancel message wakes at once instead of at the end of its poll (the run's ``end``
        # entry is written, and the worker's thread freed, only once the watcher stopped).
        self._wake_channel = log.key(run_id, f":watcher:{uuid.uuid4().hex}")
        self.lease: Lease | None = None
        self.reason: str | None = None  # "user" or "shutdown"
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

    def _watch(self) -> None:
        log = self._log
        pubsub = log.client.pubsub(ignore_subscribe_messages=True)
        refresh_every = DEFAULT_LEASE_TTL / 3
        waited = 0.0
        cancel_channel = log.key(self._run_id, ":cancel")
        try:
            pubsub.subscribe(cancel_channel, self._wake_channel)
            requested = log.cancel_requested(self._run_id)  # asked before we listened
            if requested is not None:
                self._user_cancel(requested)
            while not self._stop.is_set():
                if shutting_down.is_set() and self.reason is None:
                    self.reason = "shutdown"
                    self._handle.cancel(self._shutdown_mode, self._shutdown_timeout)
                    log.append(
                        self._run_id, "status", {"status": "stopping", "reason": "worker shutdown"}
                    )
                message = pubsub.get_message(timeout=POLL_INTERVAL / 2)
                if (
                    message is not None
                    and message.get("type") == "message"
                    and _text(message.get("channel")) == cancel_channel
                ):
                    data = message["data"]
                    self._user_cancel(data.decode() if isinstance(data, bytes) else str(data))
                waited += POLL_INTERVAL / 2
                if self.lease is not None and waited >= refresh_every:
                    waited = 0.0
                    self.lease.refresh()
        except Exception:
            _log.warning(
                "agentkit: watching run %r for cancels failed", self._run_id, exc_info=True
            )
        finally:
            pubsub.close()

    def _user_cancel(self, sealed: str) -> None:
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
        self._log.append(self._run_id, "status", {"status": "cancelling", "mode": chosen.value})


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
