"""The Redis broker transport of :class:`~agentkit.integrations.celery.AgentQueue` workers.

kombu's Redis transport (kombu 5.x with Celery 5.7) can kill a worker when Redis restarts
while tasks are in flight: on the lost connection Celery's consumer first collects the
connection (which detaches the transport from its kombu connection) and then closes it; if
the first close of the task channel was cut short by the outage, the second one restores
the channel's unacknowledged messages, which needs a new connection pool, whose parameters
come from the detached kombu connection (``None``): ``AttributeError: 'NoneType' object has
no attribute 'hostname'``, which Celery treats as unrecoverable. The same happens to the
acknowledgement of a task that finishes after the reconnect. ``acks_late`` tasks (every
agentkit run) are in flight for as long as they run, so a restart under load killed workers.

:class:`Transport` is kombu's Redis transport with one difference: a channel whose
transport was detached from its connection leaves its unacknowledged messages where they
are (in the broker's unacknowledged index, from which any worker restores them after the
``visibility_timeout``) instead of failing. Nothing is lost: a run still in flight goes on
in the worker and records its end; its message, delivered again after the visibility
timeout, finds the run stopped and runs nothing (the run's record says so).

:func:`use_patient_transport` installs it for the workers of an app whose broker is Redis.
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis as kombu_redis

__all__ = ["Transport", "use_patient_transport"]

_log = logging.getLogger("agentkit")


def _detached(channel: Any) -> bool:
    """``True`` once the channel's transport was detached from its kombu connection."""
    transport = getattr(channel, "connection", None)
    return transport is None or transport.client is None


class QoS(kombu_redis.QoS):
    """Unacknowledged messages of a channel whose connection was collected stay in Redis."""

    def restore_unacked(self, client: Any = None) -> None:
        """Restore the channel's unacknowledged messages, unless its transport is detached
        (then the broker's ``visibility_timeout`` brings them back)."""
        if _detached(self.channel):
            _log.info(
                "agentkit: the broker connection closed with messages in flight; they stay "
                "in Redis and are delivered again after the broker's visibility_timeout"
            )
            return
        super().restore_unacked(client)  # type: ignore[no-untyped-call]

    def ack(self, delivery_tag: Any) -> None:
        """Acknowledge a message; on a channel whose transport is detached, leave it to the
        ``visibility_timeout`` (its run, stopped by then, runs nothing again)."""
        if _detached(self.channel):
            _log.info(
                "agentkit: a task finished after its broker connection was replaced; its "
                "message is acknowledged by the visibility_timeout instead"
            )
            return
        super().ack(delivery_tag)  # type: ignore[no-untyped-call]

    def reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        """Reject a message; on a detached channel, leave it to the ``visibility_timeout``."""
        if _detached(self.channel):
            return
        super().reject(delivery_tag, requeue=requeue)  # type: ignore[no-untyped-call]


class Channel(kombu_redis.Channel):
    """kombu's Redis channel with :class:`QoS`."""

    QoS = QoS


class Transport(kombu_redis.Transport):
    """kombu's Redis transport whose channels survive a Redis restart under load."""

    Channel = Channel


def use_patient_transport(app: Any) -> bool:
    """Make ``app``'s workers use :class:`Transport` if its broker is Redis and no transport
    was chosen; ``True`` if it was installed."""
    conf = app.conf
    url = str(conf.broker_url or "")
    if conf.broker_transport or not url.startswith(("redis://", "rediss://")):
        return False
    conf.broker_transport = Transport
    return True
