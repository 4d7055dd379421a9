"""The Redis key prefixes in use in a database, so that no two of them overlap.

Run keys are ``prefix + run_id`` (and ``+ ":events"``, ``+ ":cancel"``), checkpoint keys
``prefix + id``. Two prefixes of which one starts with the other share keys: with
``agentkit:run:`` and ``agentkit:run:t1-``, the run ``t1-abc`` of the first is the run ``abc``
of the second, so one deployment could take (squat) the other's run ids or forget its runs
through the API. Records are sealed per prefix, so neither can forge the other's, but both
can make and delete the same keys.

Every prefix an :class:`~agentkit.integrations.celery.AgentQueue` uses is recorded in the
hash :data:`REGISTRY` of its database, with what it holds (``runs``, ``checkpoints``), in one
Lua script that refuses a prefix overlapping one recorded there; a prefix equal to a recorded
one of the same kind is the same deployment (its workers and web processes) and is accepted.
"""

from __future__ import annotations

from typing import Any

from agentkit.integrations._errors import RedisPrefixError

__all__ = ["REGISTRY", "claim_prefix"]

REGISTRY = "agentkit\x00prefixes"
"""The hash of the prefixes in use; it holds a NUL, which no prefix may, so no run is it."""

# KEYS[1] = the registry. ARGV: the prefix, its kind. Returns nil when the prefix is recorded
# (or was already, for the same kind), else {the prefix it overlaps, that prefix's kind}.
_CLAIM = """
local mine, kind = ARGV[1], ARGV[2]
local held = redis.call('HGETALL', KEYS[1])
for i = 1, #held, 2 do
  local other, other_kind = held[i], held[i + 1]
  if other == mine then
    if other_kind ~= kind then return {other, other_kind} end
  elseif string.sub(other, 1, #mine) == mine or string.sub(mine, 1, #other) == other then
    return {other, other_kind}
  end
end
redis.call('HSET', KEYS[1], mine, kind)
return false
"""


def claim_prefix(client: Any, prefix: str, kind: str) -> None:
    """Record that ``prefix`` holds ``kind`` (``"runs"``, ``"checkpoints"``) in ``client``'s
    database.

    Raises:
        RedisPrefixError: ``prefix`` holds a NUL, or overlaps a prefix recorded there (one
            starts with the other, or they are equal and hold different things).
    """
    if "\x00" in prefix:
        raise RedisPrefixError(f"the Redis prefix {prefix!r} holds a NUL character; drop it")
    found = client.eval(_CLAIM, 1, REGISTRY, prefix, kind)
    if not found:
        return
    other, other_kind = (item.decode() if isinstance(item, bytes) else str(item) for item in found)
    raise RedisPrefixError(
        f"the Redis prefix {prefix!r} (for {kind}) overlaps the prefix {other!r} another "
        f"deployment uses in this database (for {other_kind}): one's keys would be the other's "
        "(a run id of one could take or forget a run of the other). Choose prefixes of which "
        "none starts with another (for example 'agentkit:run:' and 'agentkit:t1:run:' both "
        "overlap; 'agentkit:a:run:' and 'agentkit:b:run:' do not), or another database. If "
        f"that deployment is gone: redis-cli HDEL \"agentkit\\x00prefixes\" {other!r}"
    )
