"""A run's event log, state and cancel requests in Redis (used by the Celery integration).

Keys, for ``prefix + run_id`` = ``K``:

* ``K:events``: a Redis Stream of entries ``{kind, data}`` (``XADD`` with an approximate
  ``MAXLEN``; the key expires ``ttl`` seconds after its last write). Stream ids are the event
  ids a browser sends back as ``Last-Event-ID``.
* ``K``: a hash with the run's ``status``, ``agent`` and ``summary`` (JSON).
* ``K:cancel``: the requested cancel mode; the same value is published on the channel ``K:cancel``
  for the worker that runs it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentkit.integrations.runs import RunEvent, RunNotFoundError

_STREAM_ID = re.compile(r"^\d+(-\d+)?$")

# KEYS[1] = state hash, KEYS[2] = cancel key. Move a stopped run to "queued" atomically, so two
# approvals from two web servers cannot both enqueue a resume.
_CLAIM_RESUME = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return -1 end
if status == 'interrupted' or status == 'cancelled' or status == 'failed' then
    redis.call('HSET', KEYS[1], 'status', 'queued')
    redis.call('DEL', KEYS[2])
    return 1
end
return 0
"""


def check_event_id(last_event_id: str | None) -> str:
    """The stream id to read after (``"0"`` for the start); refuses what is not a stream id."""
    if last_event_id is None or last_event_id == "":
        return "0"
    if not _STREAM_ID.match(last_event_id):
        raise ValueError(
            f"Last-Event-ID {last_event_id!r} is not an event id of this service (ids look like "
            "'1700000000000-0'); reconnect without it to read the run from the start"
        )
    return last_event_id


class RedisRunLog:
    """The Redis side of runs: append and read entries, run state, cancel requests."""

    def __init__(self, client: Any, *, prefix: str, maxlen: int, ttl: float) -> None:
        self.client = client
        self.prefix = prefix
        self.maxlen = maxlen
        self.ttl_ms = max(1, round(ttl * 1000))
        self._claim = client.register_script(_CLAIM_RESUME)

    def key(self, run_id: str, suffix: str = "") -> str:
        """The Redis key of ``run_id`` (with ``suffix``: ``:events``, ``:cancel``)."""
        return f"{self.prefix}{run_id}{suffix}"

    def create(self, run_id: str, agent_name: str) -> bool:
        """Record a new queued run and append its first (``run``) entry; ``False`` if taken."""
        state = self.key(run_id)
        if not self.client.hsetnx(state, "status", "queued"):
            return False
        with self.client.pipeline() as pipe:
            pipe.hset(state, "agent", agent_name)
            pipe.pexpire(state, self.ttl_ms)
            pipe.execute()
        self.append(run_id, "run", {"run_id": run_id, "agent": agent_name})
        return True

    def append(self, run_id: str, kind: str, data: dict[str, Any]) -> str:
        """Append one entry; returns its id."""
        stream = self.key(run_id, ":events")
        fields = {"kind": kind, "data": json.dumps(data, ensure_ascii=False)}
        with self.client.pipeline() as pipe:
            pipe.xadd(stream, fields, maxlen=self.maxlen, approximate=True)
            pipe.pexpire(stream, self.ttl_ms)
            entry_id, _ = pipe.execute()
        return _text(entry_id)

    def read(self, run_id: str, after: str | None, wait: float) -> list[RunEvent]:
        """Entries after ``after``, waiting up to ``wait`` seconds for the first one."""
        stream = self.key(run_id, ":events")
        start = check_event_id(after)
        block = max(1, round(wait * 1000)) if wait > 0 else None
        reply = self.client.xread({stream: start}, count=200, block=block)
        entries: list[RunEvent] = []
        for _name, items in reply or []:
            for entry_id, fields in items:
                values = {_text(key): _text(value) for key, value in fields.items()}
                entries.append(
                    RunEvent(_text(entry_id), values["kind"], json.loads(values["data"]))
                )
        return entries

    def last_id(self, run_id: str) -> str | None:
        """The id of the latest entry, or ``None``."""
        newest = self.client.xrevrange(self.key(run_id, ":events"), count=1)
        return _text(newest[0][0]) if newest else None

    def state(self, run_id: str) -> dict[str, str]:
        """The run's state hash; raises :class:`RunNotFoundError` for an unknown run."""
        raw = self.client.hgetall(self.key(run_id))
        if not raw:
            raise RunNotFoundError(
                f"no run with id {run_id!r} (it never existed, or its records expired)"
            )
        return {_text(key): _text(value) for key, value in raw.items()}

    def set_state(self, run_id: str, **fields: str) -> None:
        """Update fields of the run's state hash."""
        state = self.key(run_id)
        with self.client.pipeline() as pipe:
            pipe.hset(state, mapping=fields)
            pipe.pexpire(state, self.ttl_ms)
            pipe.execute()

    def finish(self, run_id: str, summary: dict[str, Any]) -> str:
        """Record the run's stop: its status, summary and ``end`` entry, in one transaction."""
        state = self.key(run_id)
        stream = self.key(run_id, ":events")
        encoded = json.dumps(summary, ensure_ascii=False)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(state, mapping={"status": summary["status"], "summary": encoded})
            pipe.pexpire(state, self.ttl_ms)
            pipe.xadd(
                stream, {"kind": "end", "data": encoded}, maxlen=self.maxlen, approximate=True
            )
            pipe.pexpire(stream, self.ttl_ms)
            entry_id = pipe.execute()[2]
        return _text(entry_id)

    def is_live(self, run_id: str) -> bool:
        """``True`` while the run is queued or running."""
        status = self.client.hget(self.key(run_id), "status")
        return status is not None and _text(status) in ("queued", "running")

    def claim_resume(self, run_id: str) -> int:
        """Mark a stopped run queued for a resume: 1 done, 0 not stopped, -1 unknown run."""
        result: int = self._claim(keys=[self.key(run_id), self.key(run_id, ":cancel")])
        return int(result)

    def request_cancel(self, run_id: str, mode: str) -> None:
        """Store and publish a cancel request for the run's worker."""
        key = self.key(run_id, ":cancel")
        with self.client.pipeline() as pipe:
            pipe.set(key, mode, px=self.ttl_ms)
            pipe.publish(key, mode)
            pipe.execute()

    def cancel_requested(self, run_id: str) -> str | None:
        """The cancel mode requested for the run, or ``None``."""
        value = self.client.get(self.key(run_id, ":cancel"))
        return None if value is None else _text(value)


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
