"""A run's event log, record and cancel requests in Redis (used by the Celery integration).

Keys, for ``prefix + run_id`` = ``K``:

* ``K:events``: a Redis Stream of entries ``{kind, data}`` with the ids ``0-1``, ``0-2``, ...
  (``XADD K:events 0-*``), so an entry's id holds its number. ``XADD`` trims the stream to
  about ``maxlen`` entries; a reader that asks for trimmed entries gets a ``gap`` entry saying
  how many it lost, then the oldest entries kept. The key expires ``ttl`` seconds after its
  last write. Entry ids are the event ids a browser sends back as ``Last-Event-ID``. An
  ``end`` entry also has a field ``seal`` (over the run id and its data): a reader reports an
  ``end`` entry without a valid one as a ``gap`` (reason ``unverified``) and reads on, so an
  ``end`` forged by someone with write access to Redis does not stop it with a made-up answer.
* ``K``: a hash whose field ``sealed`` holds the run's :class:`RunRecord`, sealed (see
  :mod:`agentkit.integrations._signing`): who owns the run, its status, how often it stopped,
  the nonce of the latest task message sent for it and its last summary. It is only ever
  replaced by a compare-and-set of the whole sealed text (a Lua script), so two writers
  cannot both move a run on.
* ``K:cancel``: a sealed cancel request; the same text is published on the channel
  ``K:cancel`` for the worker that runs it.
* ``K:inbox``: a list of sealed messages sent to the run (``AgentQueue.send``), oldest first,
  capped; the run's worker takes them before its next model call and removes them once its
  checkpoint holds them.
* ``prefix + "idempotency:" + digest``: the run a submission's idempotency key started, sealed
  (its digest binds key and owner; see :mod:`agentkit.integrations._idempotency`). It is made
  with the run's record, in one script, and the record's hash names it (field ``idem``), so
  every write of the record keeps it alive as long as the record.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from agentkit.checkpoint._redisscripts import Scripts
from agentkit.integrations._errors import (
    EventIdError,
    RunIntegrityError,
    RunNotFoundError,
    RunStateError,
)
from agentkit.integrations._runids import stream_position
from agentkit.integrations._signing import Sealer, SealError
from agentkit.integrations.runs import RunEvent

__all__ = ["READ_BATCH", "RedisRunLog", "RunRecord", "check_event_id"]

_log = logging.getLogger("agentkit")

READ_BATCH = 200
"""The most entries one read returns (a reader holds no more than this at a time)."""
_CAS_TRIES = 50
LIVE = ("queued", "running")
STOPPED = ("interrupted", "cancelled", "failed")

# KEYS[1] = the record hash. ARGV: the sealed text expected there, the new sealed text, the
# TTL in ms. Returns 1 when the record was replaced, 0 otherwise.
_SET_RECORD = """
if redis.call('HGET', KEYS[1], 'sealed') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'sealed', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local idem = redis.call('HGET', KEYS[1], 'idem')
if idem then redis.call('PEXPIRE', idem, ARGV[3]) end
return 1
"""

# KEYS[1] = the record hash, KEYS[2] = a lease key. ARGV: the lease's owner, its ttl in ms.
# A worker's first look at a run it was sent: the record's sealed text, and the run's lease
# taken if it is free. Returns {sealed text or false, 1 if the lease was taken else 0}; no
# lease is taken for a run without a sealed record. A lease key without an expiry is no lease
# (agentkit never writes one; someone with write access to Redis may): it is taken over.
_RECORD_AND_LEASE = """
local sealed = redis.call('HGET', KEYS[1], 'sealed')
if not sealed then return {false, 0} end
if redis.call('PTTL', KEYS[2]) == -1 then redis.call('DEL', KEYS[2]) end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {sealed, 1} end
return {sealed, 0}
"""

# KEYS[1] = the record hash, KEYS[2] = the stream. ARGV: the first entry id to read, the most
# entries to read. A reader's first look: the record's sealed text (to check the reader's
# right to it) and the entries there already. Returns {sealed text or false, entries}.
_RECORD_AND_READ = """
local sealed = redis.call('HGET', KEYS[1], 'sealed')
if not sealed then return {false} end
return {sealed, redis.call('XRANGE', KEYS[2], ARGV[1], '+', 'COUNT', ARGV[2])}
"""

# KEYS[1] = a lease key, ARGV[1] = its owner: free the lease if that owner holds it.
_RELEASE_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS[1] = the record hash, KEYS[2] = the stream, KEYS[3] (optional) = the run's lease key.
# ARGV: expected sealed text, new sealed text, TTL in ms, MAXLEN, the lease's owner (only
# with KEYS[3]), then kind and data of each entry to add (the run's last events, then its end
# entry), then the end entry's seal (its field ``seal``). The record and the entries change
# together: no reader sees the run's interrupt before its record says it is interrupted; and
# the lease, if its owner still holds it, is freed with them (so the run is free to resume
# once its stop is seen).
_FINISH = """
if redis.call('HGET', KEYS[1], 'sealed') ~= ARGV[1] then return false end
redis.call('HSET', KEYS[1], 'sealed', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local idem = redis.call('HGET', KEYS[1], 'idem')
if idem then redis.call('PEXPIRE', idem, ARGV[3]) end
local first = 5
if #KEYS > 2 then
    if redis.call('GET', KEYS[3]) == ARGV[5] then redis.call('DEL', KEYS[3]) end
    first = 6
end
local id
local last = #ARGV - 2
for i = first, last, 2 do
    if i == last then
        id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '0-*',
                        'kind', ARGV[i], 'data', ARGV[i + 1], 'seal', ARGV[#ARGV])
    else
        id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '0-*',
                        'kind', ARGV[i], 'data', ARGV[i + 1])
    end
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return id
"""

# KEYS[1] = the record hash, KEYS[2] = the stream, KEYS[3] = the cancel key. ARGV: expected
# sealed text, new sealed text, TTL in ms, MAXLEN, then kind and data of each entry to add.
# A run starting on a worker: its record says "running" and its first entries are there
# together, and the cancel request stored for it (if any) is returned. Returns {0} when the
# record was not the expected one, else {1, the cancel request or false}.
_START = """
if redis.call('HGET', KEYS[1], 'sealed') ~= ARGV[1] then return {0} end
redis.call('HSET', KEYS[1], 'sealed', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local idem = redis.call('HGET', KEYS[1], 'idem')
if idem then redis.call('PEXPIRE', idem, ARGV[3]) end
for i = 5, #ARGV, 2 do
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '0-*', 'kind', ARGV[i],
               'data', ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {1, redis.call('GET', KEYS[3]), redis.call('LLEN', KEYS[4])}
"""

# KEYS[1] = the idempotency key, KEYS[2] = the new run's record hash, KEYS[3] = its stream.
# ARGV: the new record's sealed text, the key's sealed value, the TTL in ms, MAXLEN, the data
# of the run's first (``run``) entry. Returns {1, ''} when the run was recorded (with its
# first entry), {0, ''} when its id is taken, {2, value} when the key names an earlier run.
_CREATE_ONCE = """
local first = redis.call('GET', KEYS[1])
if first then return {2, first} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {0, ''} end
redis.call('HSET', KEYS[2], 'sealed', ARGV[1], 'idem', KEYS[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '0-*', 'kind', 'run', 'data', ARGV[5])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return {1, ''}
"""

# KEYS[1] = the new run's record hash, KEYS[2] = its stream. ARGV: the record's sealed text,
# the TTL in ms, MAXLEN, the data of the run's first (``run``) entry. Returns 1 when the run
# was recorded (with its first entry), 0 when its id is taken.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'sealed', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '0-*', 'kind', 'run', 'data', ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""

# KEYS[1] = the stream. ARGV: MAXLEN, TTL in ms, kind, data. Returns the new entry's id.
_APPEND = """
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '0-*', 'kind', ARGV[3],
                      'data', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return id
"""

# KEYS[1] = the stream, KEYS[2] = the run's inbox. ARGV as _APPEND. Returns the new entry's id
# and how many messages wait in the inbox (a worker's append: what a run reads before its next
# model call, told in the round trip the append makes anyway).
_APPEND_AND_CHECK = """
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '0-*', 'kind', ARGV[3],
                      'data', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {id, redis.call('LLEN', KEYS[2])}
"""

# KEYS[1] = the run's inbox (a list of sealed messages); ARGV: the sealed message, how many
# the inbox holds at most, its time to live in ms. Returns the inbox's length, 0 when full.
_PUSH_MESSAGE = """
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
local length = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PUBLISH', KEYS[1], '1')
return length
"""

# KEYS[1] = the idempotency key; ARGV[1] = the value it must still hold to be removed.
_FORGET_KEY = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def check_event_id(last_event_id: str | None) -> int:
    """The number of the entry to read after (``0`` for the start).

    Raises:
        EventIdError: ``last_event_id`` is not an id of a run's stream (``"0-<n>"``).
    """
    first, second = stream_position(last_event_id)
    if first != 0:
        raise EventIdError(
            f"Last-Event-ID {last_event_id!r} is not an event id of this service (ids look "
            "like '0-12'); reconnect without it to read the run from the start"
        )
    return second


@attrs.frozen
class RunRecord:
    """What Redis holds about a run, sealed: the record every decision about the run reads.

    ``stops`` counts the times the run stopped (its end entries); ``pending`` is the nonce of
    the latest task message sent for the run, the only one a worker accepts.
    """

    run_id: str
    agent: str
    owner: str | None
    status: str
    stops: int = 0
    pending: str = ""
    worker: str = ""
    summary: dict[str, Any] | None = None

    @property
    def live(self) -> bool:
        """``True`` while the run is queued or running."""
        return self.status in LIVE

    @property
    def stopped(self) -> bool:
        """``True`` when the run can be resumed: interrupted, cancelled or failed."""
        return self.status in STOPPED

    @property
    def interrupts(self) -> list[str]:
        """The interrupt ids of the run's latest stop, if it was an interrupt."""
        if self.status != "interrupted" or self.summary is None:
            return []
        return [str(item) for item in self.summary.get("interrupts", [])]

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object."""
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> RunRecord:
        """The record of a verified JSON object; :class:`RunIntegrityError` if it is no record."""
        try:
            record = cls(**body)
        except TypeError as error:
            raise RunIntegrityError(f"a run record holds unexpected fields ({error})") from None
        texts = (record.run_id, record.agent, record.status, record.pending, record.worker)
        if (
            not all(isinstance(text, str) for text in texts)
            or not isinstance(record.owner, (str, type(None)))
            or type(record.stops) is not int
            or not isinstance(record.summary, (dict, type(None)))
        ):
            raise RunIntegrityError("a run record holds values of the wrong type")
        return record


class RedisRunLog:
    """The Redis side of runs: entries, sealed records, cancel requests."""

    def __init__(
        self, client: Any, *, prefix: str, maxlen: int, ttl: float, sealer: Sealer
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.maxlen = maxlen
        self.ttl_ms = max(1, round(ttl * 1000))
        self.sealer = sealer
        self._scripts = Scripts(client)
        self._set_record = self._scripts.register(_SET_RECORD)
        self._finish = self._scripts.register(_FINISH)
        self._record_and_lease = self._scripts.register(_RECORD_AND_LEASE)
        self._release_lease = self._scripts.register(_RELEASE_LEASE)
        self._record_and_read = self._scripts.register(_RECORD_AND_READ)
        self._start = self._scripts.register(_START)
        self._create_once = self._scripts.register(_CREATE_ONCE)
        self._create = self._scripts.register(_CREATE)
        self._append = self._scripts.register(_APPEND)
        self._append_and_check = self._scripts.register(_APPEND_AND_CHECK)
        self._forget_key = self._scripts.register(_FORGET_KEY)
        self._push_message = self._scripts.register(_PUSH_MESSAGE)

    def key(self, run_id: str, suffix: str = "") -> str:
        """The Redis key of ``run_id`` (with ``suffix``: ``:events``, ``:cancel``)."""
        return f"{self.prefix}{run_id}{suffix}"

    # --- the record ---

    def create(self, record: RunRecord) -> bool:
        """Record a new run with its first (``run``) entry, in one script; ``False`` if the id
        is taken."""
        sealed = self.sealer.seal("record", record.to_json())
        created = self._create(
            keys=[self.key(record.run_id), self.key(record.run_id, ":events")],
            args=[sealed, self.ttl_ms, self.maxlen, _first_entry(record)],
        )
        return bool(created)

    def create_once(
        self, record: RunRecord, key: str, request: str
    ) -> tuple[str, str, str] | None:
        """Record a new run started with the idempotency key ``key`` (a digest), atomically.

        Returns ``None`` when the run was recorded (its first entry appended), else ``(run id,
        request digest, sealed value)`` of the run the key started before.

        Raises:
            RunStateError: the run id is taken.
            RunIntegrityError: the key's value fails verification.
        """
        sealed = self.sealer.seal("record", record.to_json())
        value = self.sealer.seal(
            "idempotency", {"key": key, "run_id": record.run_id, "request": request}
        )
        outcome, first = self._create_once(
            keys=[
                self.idempotency_key(key),
                self.key(record.run_id),
                self.key(record.run_id, ":events"),
            ],
            args=[sealed, value, self.ttl_ms, self.maxlen, _first_entry(record)],
        )
        if int(outcome) == 0:
            raise RunStateError(
                f"run id {record.run_id!r} is taken; leave checkpoint_id out to get a new one"
            )
        if int(outcome) == 1:
            return None
        text = _text(first)
        try:
            body = self.sealer.open("idempotency", text)
        except SealError as error:
            raise RunIntegrityError(f"an idempotency key's record: {error}") from None
        if body.get("key") != key or not isinstance(body.get("run_id"), str):
            raise RunIntegrityError(
                "an idempotency key's record names another key (copied there by someone with "
                "write access to Redis); it is not used"
            )
        return body["run_id"], str(body.get("request")), text

    def idempotency_key(self, key: str) -> str:
        """The Redis key of an idempotency key's digest."""
        return f"{self.prefix}idempotency:{key}"

    def forget_key(self, key: str, run_id: str, request: str) -> None:
        """Free an idempotency key that still names ``run_id`` (its run could not start)."""
        value = self.client.get(self.idempotency_key(key))
        if value is None:
            return
        try:
            body = self.sealer.open("idempotency", _text(value))
        except SealError:
            return
        if body.get("run_id") == run_id and body.get("request") == request:
            self._forget_key(keys=[self.idempotency_key(key)], args=[_text(value)])

    def record(self, run_id: str) -> tuple[RunRecord, str]:
        """The run's verified record and its sealed text.

        Raises:
            RunNotFoundError: no run has this id.
            RunIntegrityError: the record fails verification or is not the record of ``run_id``.
        """
        return self._verified(run_id, self.client.hget(self.key(run_id), "sealed"))

    def record_and_lease(
        self, run_id: str, lease_key: bytes, owner: str, ttl: float
    ) -> tuple[RunRecord, str, bool]:
        """The run's verified record and its sealed text, and its lease taken for ``owner``
        if it is free (``lease_key``: the checkpoint store's key of it); one round trip.

        The third value says whether the lease was taken (the caller then releases it); a
        lease taken for a record that fails verification is freed before the error is
        raised, and none is taken for a run without a sealed record.

        Raises:
            RunNotFoundError: no run has this id.
            RunIntegrityError: the record fails verification or is not the record of ``run_id``.
        """
        ttl_ms = max(1, round(ttl * 1000))
        sealed, took = self._record_and_lease(
            keys=[self.key(run_id), lease_key], args=[owner, ttl_ms]
        )
        try:
            record, text = self._verified(run_id, sealed)
        except RunIntegrityError:
            if took:
                self._release_lease(keys=[lease_key], args=[owner])
            raise
        return record, text, bool(took)

    def _verified(self, run_id: str, sealed: object) -> tuple[RunRecord, str]:
        if sealed is None:
            if self.client.exists(self.key(run_id)):
                raise RunIntegrityError(
                    f"run {run_id!r} has a record without a seal (written by an agentkit older "
                    "than signed run records, or by someone without the key); it is not used"
                )
            raise RunNotFoundError(
                f"no run with id {run_id!r} (it never existed, or its records expired)"
            )
        text = _text(sealed)
        try:
            record = RunRecord.from_json(self.sealer.open("record", text))
        except SealError as error:
            raise RunIntegrityError(f"the record of run {run_id!r}: {error}") from None
        if record.run_id != run_id:
            raise RunIntegrityError(
                f"the record under run id {run_id!r} is the record of run {record.run_id!r} "
                "(copied there by someone with write access to Redis); it is not used"
            )
        return record, text

    def update(
        self,
        run_id: str,
        change: Callable[[RunRecord], RunRecord | None],
        known: tuple[RunRecord, str] | None = None,
    ) -> RunRecord:
        """Replace the run's record with ``change(record)`` (compare-and-set, retried).

        ``change`` may raise to refuse the change, or return ``None`` to leave the record as
        it is. Returns the record as it is now. ``known``: the verified record and its sealed
        text as this process last read or wrote them (see :meth:`replace`).
        """
        return self.replace(run_id, change, known)[0]

    def replace(
        self,
        run_id: str,
        change: Callable[[RunRecord], RunRecord | None],
        known: tuple[RunRecord, str] | None = None,
    ) -> tuple[RunRecord, str]:
        """:meth:`update`, returning the record as it is now and its sealed text.

        With ``known`` (a record this process verified, and its sealed text), the first
        compare-and-set expects that text without reading the record again: one round trip
        instead of two when nobody changed it meanwhile; when somebody did, the set fails
        and the record is read (and verified) again, as without ``known``.
        """
        for _ in range(_CAS_TRIES):
            if known is None:
                record, sealed = self.record(run_id)
            else:
                (record, sealed), known = known, None
            new = change(record)
            if new is None:
                return record, sealed
            replacement = self.sealer.seal("record", new.to_json())
            if self._set_record(keys=[self.key(run_id)], args=[sealed, replacement, self.ttl_ms]):
                return new, replacement
        raise RunStateError(
            f"the record of run {run_id!r} changed {_CAS_TRIES} times while it was updated; "
            "try again"
        )

    def finish(
        self,
        run_id: str,
        change: Callable[[RunRecord], RunRecord],
        summary: dict[str, Any],
        tail: Sequence[tuple[str, dict[str, Any]]] = (),
        known: tuple[RunRecord, str] | None = None,
        *,
        lease: tuple[bytes, str] | None = None,
    ) -> str:
        """Record the run's stop (``change`` of its record), the ``tail`` entries (its last
        events) and its ``end`` entry, atomically; returns the ``end`` entry's id.

        ``known``: as for :meth:`replace` (the first try expects its sealed text unread).
        ``lease``: the run's lease key and owner: the lease is freed by the same script, if
        that owner still holds it (whoever kept it refreshed must have stopped)."""
        keys: list[str | bytes] = [self.key(run_id), self.key(run_id, ":events")]
        entries: list[str] = []
        if lease is not None:
            keys.append(lease[0])
            entries.append(lease[1])
        for kind, data in [*tail, ("end", summary)]:
            entries += [kind, json.dumps(data, ensure_ascii=False)]
        entries.append(self._end_seal(run_id, entries[-1]))
        for _ in range(_CAS_TRIES):
            if known is None:
                record, sealed = self.record(run_id)
            else:
                (record, sealed), known = known, None
            replacement = self.sealer.seal("record", change(record).to_json())
            entry_id = self._finish(
                keys=keys, args=[sealed, replacement, self.ttl_ms, self.maxlen, *entries],
            )
            if entry_id is not None:
                return _text(entry_id)
        raise RunStateError(f"the record of run {run_id!r} kept changing while the run stopped")

    def _end_seal(self, run_id: str, data: str) -> str:
        """The seal of a run's ``end`` entry whose data is ``data`` (JSON text)."""
        digest = hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()
        return self.sealer.seal("end", {"run_id": run_id, "data": digest})

    def _verified_end(self, run_id: str, data: str, seal: str | None) -> bool:
        """``True`` if an ``end`` entry is the one a worker or web process of this
        deployment wrote (its seal, over the run id and the entry's data, verifies)."""
        if seal is None:
            return False
        try:
            body = self.sealer.open("end", seal)
        except SealError:
            return False
        digest = hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()
        return body.get("run_id") == run_id and body.get("data") == digest

    def start(
        self,
        run_id: str,
        change: Callable[[RunRecord], RunRecord],
        entries: Sequence[tuple[str, dict[str, Any]]],
        known: tuple[RunRecord, str] | None = None,
    ) -> tuple[RunRecord, str, str | None, bool]:
        """Record a run's start (``change`` of its record) and append its first ``entries``,
        atomically; read its stored cancel request and whether messages wait in its inbox in
        the same round trip.

        Returns the record as it is now, its sealed text, the sealed cancel request stored
        for the run (or ``None``) and whether messages sent to it wait. ``known``: as for
        :meth:`replace` (the first try expects its sealed text unread). ``change`` may raise
        to refuse the start.
        """
        fields: list[str] = []
        for kind, data in entries:
            fields += [kind, json.dumps(data, ensure_ascii=False)]
        keys = [
            self.key(run_id),
            self.key(run_id, ":events"),
            self.key(run_id, ":cancel"),
            self.key(run_id, ":inbox"),
        ]
        for _ in range(_CAS_TRIES):
            if known is None:
                record, sealed = self.record(run_id)
            else:
                (record, sealed), known = known, None
            new = change(record)
            replacement = self.sealer.seal("record", new.to_json())
            reply = self._start(
                keys=keys, args=[sealed, replacement, self.ttl_ms, self.maxlen, *fields]
            )
            if int(reply[0]) == 1:
                requested = reply[1] if len(reply) > 1 else None
                waiting = len(reply) > 2 and int(reply[2]) > 0
                return new, replacement, None if requested is None else _text(requested), waiting
        raise RunStateError(
            f"the record of run {run_id!r} changed {_CAS_TRIES} times while the run started; "
            "try again"
        )

    def _entries(
        self, run_id: str, number: int, items: list[tuple[Any, dict[Any, Any]]]
    ) -> list[RunEvent]:
        """Stream entries read after entry ``0-<number>``, with a ``gap`` entry where some
        were trimmed."""
        entries: list[RunEvent] = []
        expected = number + 1
        for raw_id, fields in items:
            entry_id = _text(raw_id)
            got = int(entry_id.rpartition("-")[2])
            if got > expected:
                entries.append(RunEvent.gap(f"0-{got - 1}", got - expected))
            expected = got + 1
            entries.append(self._entry(run_id, entry_id, fields))
        return entries

    def _entry(self, run_id: str, entry_id: str, fields: dict[Any, Any]) -> RunEvent:
        """A stream entry as a :class:`RunEvent`; an unreadable one as a ``gap`` of one entry,
        and an ``end`` entry whose seal does not verify as a ``gap`` too: written by someone
        with write access to Redis, it must not end a reader's stream with a made-up answer."""
        values = {_text(key): _text(value) for key, value in fields.items()}
        try:
            data = json.loads(values["data"])
            kind = values["kind"]
        except (KeyError, ValueError):
            data = None
        if isinstance(data, dict):
            entry = RunEvent(entry_id, kind, data)
            if kind != "end" or self._verified_end(run_id, values["data"], values.get("seal")):
                return entry
            _log.error(
                "agentkit: entry %s of run %r is an end entry without a valid seal (written "
                "by someone with write access to Redis, not by agentkit); reported as a gap",
                entry_id,
                run_id,
            )
            return RunEvent.gap(entry_id, 1, reason="unverified")
        _log.warning(
            "agentkit: entry %s of run %r is unreadable; reported as a gap", entry_id, run_id
        )
        return RunEvent.gap(entry_id, 1, reason="unreadable")

    def is_live(self, run_id: str) -> bool:
        """``True`` while the run is queued or running (``False`` for an unusable record)."""
        try:
            return self.record(run_id)[0].live
        except (RunNotFoundError, RunIntegrityError) as error:
            _log.debug("agentkit: run %r is not live: %s", run_id, error)
            return False

    # --- entries ---

    def append(self, run_id: str, kind: str, data: dict[str, Any]) -> str:
        """Append one entry; returns its id."""
        entry_id = self._append(
            keys=[self.key(run_id, ":events")],
            args=[self.maxlen, self.ttl_ms, kind, json.dumps(data, ensure_ascii=False)],
        )
        return _text(entry_id)

    def append_and_check(self, run_id: str, kind: str, data: dict[str, Any]) -> tuple[str, bool]:
        """Append one entry (as :meth:`append`); returns its id and whether messages wait in
        the run's inbox (:meth:`messages`), in the same round trip."""
        entry_id, waiting = self._append_and_check(
            keys=[self.key(run_id, ":events"), self.key(run_id, ":inbox")],
            args=[self.maxlen, self.ttl_ms, kind, json.dumps(data, ensure_ascii=False)],
        )
        return _text(entry_id), int(waiting) > 0

    def read(self, run_id: str, after: str | None, wait: float) -> list[RunEvent]:
        """Entries after ``after`` (at most :data:`READ_BATCH`), waiting up to ``wait`` s.

        A ``gap`` entry comes first when entries after ``after`` were trimmed.
        """
        stream = self.key(run_id, ":events")
        number = check_event_id(after)
        block = max(1, round(wait * 1000)) if wait > 0 else None
        reply = self.client.xread({stream: f"0-{number}"}, count=READ_BATCH, block=block)
        return self._entries(
            run_id, number, [item for _name, items in reply or [] for item in items]
        )

    def record_and_read(
        self, run_id: str, after: str | None
    ) -> tuple[RunRecord, str, list[RunEvent]]:
        """The run's verified record, its sealed text, and the entries after ``after`` there
        now (as :meth:`read` without waiting), in one round trip: a reader's first look.

        Raises:
            RunNotFoundError: no run has this id.
            RunIntegrityError: the record fails verification or is not the record of ``run_id``.
            EventIdError: ``after`` is not an event id of a run.
        """
        number = check_event_id(after)
        reply = self._record_and_read(
            keys=[self.key(run_id), self.key(run_id, ":events")],
            args=[f"0-{number + 1}", READ_BATCH],
        )
        record, text = self._verified(run_id, reply[0])
        items = [(raw_id, _pairs(fields)) for raw_id, fields in reply[1]]
        return record, text, self._entries(run_id, number, items)

    def last_id(self, run_id: str) -> str | None:
        """The id of the latest entry, or ``None``."""
        newest = self.client.xrevrange(self.key(run_id, ":events"), count=1)
        return _text(newest[0][0]) if newest else None

    # --- cancel requests ---

    def request_cancel(self, run_id: str, sealed: str) -> None:
        """Store and publish a sealed cancel request for the run's worker."""
        key = self.key(run_id, ":cancel")
        with self.client.pipeline() as pipe:
            pipe.set(key, sealed, px=self.ttl_ms)
            pipe.publish(key, sealed)
            pipe.execute()

    # --- messages sent to a run (AgentQueue.send) ---

    def push_message(self, run_id: str, sealed: str, cap: int) -> bool:
        """Add a sealed message to the run's inbox; ``False`` when ``cap`` messages wait."""
        pushed = self._push_message(
            keys=[self.key(run_id, ":inbox")], args=[sealed, cap, self.ttl_ms]
        )
        return bool(pushed)

    def messages(self, run_id: str, limit: int) -> list[str]:
        """The sealed messages waiting in the run's inbox, oldest first (at most ``limit``)."""
        items = self.client.lrange(self.key(run_id, ":inbox"), 0, limit - 1)
        return [_text(item) for item in items]

    def drop_messages(self, run_id: str, sealed: Sequence[str]) -> None:
        """Remove messages the run took (or refused) from its inbox."""
        key = self.key(run_id, ":inbox")
        with self.client.pipeline() as pipe:
            for text in sealed:
                pipe.lrem(key, 1, text)
            pipe.execute()

    def clear_cancel(self, run_id: str) -> None:
        """Drop a cancel request left from an earlier stop of the run."""
        self.client.delete(self.key(run_id, ":cancel"))

    def cancel_requested(self, run_id: str) -> str | None:
        """The sealed cancel request stored for the run, or ``None``."""
        value = self.client.get(self.key(run_id, ":cancel"))
        return None if value is None else _text(value)


def _pairs(flat: list[Any]) -> dict[Any, Any]:
    """A stream entry's fields as a Lua script returns them (``[name, value, ...]``)."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _first_entry(record: RunRecord) -> str:
    """The data of a run's first (``run``) entry, as JSON."""
    return json.dumps({"run_id": record.run_id, "agent": record.agent}, ensure_ascii=False)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
