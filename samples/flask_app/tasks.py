"""The Celery side of the sample app: workers run the concierge; events go to Redis Streams.

REDIS_URL=redis://localhost:6379/0 celery -A flask_app.tasks worker --pool=threads
(run from the samples directory; ``CELERY_QUEUE`` names the queue, default ``celery``)
"""

from __future__ import annotations

import os

from celery import Celery

from agentkit.integrations.celery import AgentQueue

from .agents import AGENT_NAME, build_agent

REDIS_URL = os.environ.get("REDIS_URL", "redis://localhost:6379/0")

# A worker that dies (kill -9, out of memory, a lost machine) never acknowledges its tasks;
# Kombu's Redis transport gives such a task to another worker VISIBILITY_TIMEOUT seconds after
# it was taken, looking for them every RESTORE_EVERY seconds. The run's lease (LEASE_TTL,
# refreshed every third of it by the live worker) has expired by then, so the other worker
# takes the run over; a task delivered while its run is still held (a run longer than the
# visibility timeout) is sent again, due LEASE_TTL seconds later, until the run has ended.
# So a run whose worker died is "running" for at most about VISIBILITY_TIMEOUT + RESTORE_EVERY
# seconds. Keep VISIBILITY_TIMEOUT several times LEASE_TTL.
VISIBILITY_TIMEOUT = 120
RESTORE_EVERY = 10
LEASE_TTL = 30.0

app = Celery("flask_app", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    task_default_queue=os.environ.get("CELERY_QUEUE", "celery"),
    broker_transport_options={
        "visibility_timeout": VISIBILITY_TIMEOUT,
        "unacked_restore_interval": RESTORE_EVERY,
        "unacked_restore_throttle": 1,
    },
)
queue = AgentQueue(app, redis_url=REDIS_URL, lease_ttl=LEASE_TTL)
queue.register(AGENT_NAME, build_agent)
