"""Reading and writing Celery task messages on the Redis broker, as someone with access to it.

Kombu's Redis transport keeps a queue as a Redis list of JSON messages (``LPUSH``, consumed
with ``BRPOP``); a task's arguments are the base64-encoded JSON body ``[args, kwargs, embed]``.
The Celery tests hold a message back by sending it to a queue no worker consumes, take it off
that list, and put copies (as they are, or altered) on a list a worker consumes.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from typing import Any

GUARD = 60  # seconds: a failure guard only


def take(client: Any, lane: str) -> dict[str, Any]:
    """Take the oldest message off the broker list ``lane`` (waiting for it)."""
    popped = client.brpop([lane], timeout=GUARD)
    assert popped is not None, f"no message arrived on {lane!r}"
    message: dict[str, Any] = json.loads(popped[1])
    return message


def args_of(message: dict[str, Any]) -> list[Any]:
    """The task arguments a message carries."""
    body = json.loads(base64.b64decode(message["body"]))
    args: list[Any] = body[0]
    return args


def put(client: Any, lane: str, message: dict[str, Any], *, args: list[Any] | None = None) -> str:
    """Put a copy of ``message`` (with ``args`` instead of its own) on ``lane``; its task id."""
    copied = copy.deepcopy(message)
    if args is not None:
        body = json.loads(base64.b64decode(copied["body"]))
        body[0] = args
        copied["body"] = base64.b64encode(json.dumps(body).encode()).decode()
        copied["headers"]["argsrepr"] = repr(args)
    task_id = str(uuid.uuid4())
    copied["headers"].update(id=task_id, root_id=task_id)
    copied["properties"].update(
        correlation_id=task_id,
        delivery_tag=str(uuid.uuid4()),
        delivery_info={"exchange": "", "routing_key": lane},
    )
    client.lpush(lane, json.dumps(copied))
    return task_id
