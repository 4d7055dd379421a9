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

app = Celery("flask_app", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    task_default_queue=os.environ.get("CELERY_QUEUE", "celery"),
)
queue = AgentQueue(app, redis_url=REDIS_URL)
queue.register(AGENT_NAME, build_agent)
