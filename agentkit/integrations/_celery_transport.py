"""The Redis broker transport of :class:`~agentkit.integrations.celery.AgentQueue` workers.

kombu's Redis transport (kombu 5.7 with Celery 5.7) can kill a worker when Redis restarts
while tasks are in flight. On the lost connection Celery's consumer first collects the
connection, which detaches the transport from its kombu connection (``transport.client =
None``), and then closes it. If the first close of the task channel was cut short by the
outage, the second one restores the channel's unacknowledged messages, which needs a new
connection pool, whose parameters come from the detached connection: ``AttributeError:
'NoneType' object has no attribute 'hostname'``, which Celery treats as unrecoverable. A task
that finishes after the reconnect fails the same way when it acknowledges its message.
``acks_late`` tasks (every agentkit run) are in flight for as long as they run, so a restart
under load killed workers (2 of 5 restarts in issue 49's repro).

:class:`Transport` is kombu's Redis transport that keeps its kombu connection once it has
one: a late restore or acknowledgement then works as it does before the reconnect (against
the restarted Redis; or, while Redis is still away, with a connection error, which kombu and
Celery handle: the message stays in the broker's unacknowledged index and comes back after
the ``visibility_timeout``, to find its run stopped).

:func:`use_patient_transport` installs it for the workers of an app whose broker is Redis.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis

__all__ = ["Transport", "use_patient_transport"]


class Transport(kombu_redis.Transport):
    """kombu's Redis transport whose channels outlive a Redis restart under load."""

    @property
    def client(self) -> Any:
        """The kombu connection of this transport (kept once set: see the module)."""
        return self._agentkit_client

    @client.setter
    def client(self, value: Any) -> None:
        # kombu detaches a closed connection with ``transport.client = None``; the channels
        # of this transport may still restore or acknowledge messages afterwards.
        if value is not None or not hasattr(self, "_agentkit_client"):
            self._agentkit_client = value


def use_patient_transport(app: Any) -> bool:
    """Make ``app``'s workers use :class:`Transport` if its broker is Redis and no transport
    was chosen; ``True`` if it was installed."""
    conf = app.conf
    url = str(conf.broker_url or "")
    if conf.broker_transport or not url.startswith(("redis://", "rediss://")):
        return False
    conf.broker_transport = Transport
    return True
