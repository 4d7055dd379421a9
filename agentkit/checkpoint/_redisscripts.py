"""agentkit's Lua scripts in Redis, sent on connections kept for them.

Every Redis write agentkit makes while a run goes on (a step record, an event entry, a run's
start and end, a lease) is one Lua script: ``EVALSHA`` and its reply. Sent the usual way
(``redis.Redis.register_script``), each such call also checks a connection out of the
client's pool and back in, which redis-py 8 does with its locks, a ``poll`` of the socket and
five calls into its metrics hooks: on a 2-core machine about 130 us of CPU per call inside a
run, a tenth of a short Celery run's CPU (``benchmarks/FINDINGS.md``, round 8).

:class:`Scripts` (one per store or run log) registers scripts that are sent, where the
client allows it, on connections of its :class:`ScriptLane`: made as the client's pool makes
its own (its connection class and settings: address, credentials, TLS, timeouts, protocol,
health checks), held in a list of idle ones and taken and given back without the pool's
bookkeeping. What is unchanged: the reply (the client's response callbacks
apply), the retries (the connection's ``retry``, the client's policy: a lost connection is
closed and the call tried again on a fresh one), a script the server does not know
(``NOSCRIPT``: loaded, then run). A connection that raised anything but a Redis error reply
is closed, so none with a reply half read is used again.

The lane is used only where it changes nothing else: a ``redis.Redis`` client with a plain
``redis.ConnectionPool`` allowed at least :data:`LANE_MIN_CAP` connections (redis-py's
default) and without a client-side cache, and no pinned connection. Any other client (a
cluster, Sentinel, a blocking pool, a pool capped lower, a single-connection client, a
cache) gets ``client.register_script`` as before.

A lane keeps as many connections as threads called it at once, counted apart from the
pool's ``max_connections`` (so that lanes made and dropped, a store per request on one
client, never use up the pool). After a ``fork`` the child
starts with none (the parent's stay the parent's). :meth:`Scripts.close` closes the idle
ones (the stores' ``close()`` calls it); the rest close when their owner is collected.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

_log = logging.getLogger("agentkit")

__all__ = ["LANE_MIN_CAP", "ScriptLane", "Scripts", "lane_for"]

Script = Callable[..., Any]
"""A registered script: ``script(keys=[...], args=[...])`` returns its reply."""

LANE_MIN_CAP = 100
"""The lane is used with pools allowed this many connections or more (redis-py's default).

A pool capped lower is one whose owner counts connections: its scripts go through it."""


class ScriptLane:
    """Idle connections for one owner's scripts, made the way the client's pool makes them.

    Thread-safe: a call takes a connection from the idle list (or makes one) and puts it
    back when the reply is read, so no two threads share one at a time.
    """

    __slots__ = ("__weakref__", "_error_reply", "_idle", "_lost", "_make", "_no_script", "_pid")

    def __init__(self, pool: Any) -> None:
        from redis.exceptions import ConnectionError as Lost
        from redis.exceptions import NoScriptError, ResponseError
        from redis.exceptions import TimeoutError as Late

        self._lost = (Lost, Late, OSError)
        self._error_reply: type[Exception] = ResponseError
        self._no_script: type[Exception] = NoScriptError
        self._make: Callable[[], Any] = partial(pool.connection_class, **pool.connection_kwargs)
        self._idle: list[Any] = []
        self._pid = os.getpid()

    def run(
        self, client: Any, sha: str, source: str, keys: Sequence[Any], args: Sequence[Any]
    ) -> Any:
        """Run the script ``source`` (its SHA-1 ``sha``) with ``keys`` and ``args``; ``client``
        parses the reply (its response callbacks)."""
        connection = self._take()
        command = ("EVALSHA", sha, len(keys), *keys, *args)
        try:
            reply = connection.retry.call_with_retry(
                lambda: self._evalsha(client, connection, command, source),
                lambda _error: connection.disconnect(),
            )
        except self._error_reply:  # the server's error reply, read whole: the connection is fine
            self._idle.append(connection)
            raise
        except BaseException:
            # A reply perhaps half read: the socket is closed (the connection stays in the
            # lane and opens a fresh one when next used).
            connection.disconnect()
            self._idle.append(connection)
            raise
        self._idle.append(connection)
        return reply

    def close(self) -> None:
        """Close the idle connections (one in use comes back to the lane when its call
        ends)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.disconnect()

    def _take(self) -> Any:
        if self._pid != os.getpid():
            # A forked child: the parent's sockets are not ours.
            self._idle = []
            self._pid = os.getpid()
        try:
            connection = self._idle.pop()
        except IndexError:
            return self._make()
        # As the pool does: an idle connection with something to read was closed by the
        # server (a restart, its timeout, CLIENT KILL) or holds stray data; open a fresh one.
        try:
            stale = connection.can_read()
        except self._lost as error:
            _log.debug("agentkit: an idle Redis connection failed its check: %s", error)
            stale = True
        if stale:
            connection.disconnect()
        return connection

    def idle(self) -> int:
        """The number of idle connections."""
        return len(self._idle)

    def _evalsha(
        self, client: Any, connection: Any, command: tuple[Any, ...], source: str
    ) -> Any:
        connection.send_command(*command)
        try:
            return client.parse_response(connection, "EVALSHA")
        except self._no_script:  # a server restarted, or flushed its scripts: load, run
            connection.send_command("SCRIPT", "LOAD", source)
            connection.read_response()
            connection.send_command(*command)
            return client.parse_response(connection, "EVALSHA")


def lane_for(client: Any) -> ScriptLane | None:
    """A new lane for ``client``'s scripts, or ``None`` if they must go through its pool."""
    try:
        import redis
    except ImportError:  # pragma: no cover - a client exists, so redis-py does
        return None
    if type(client) is not redis.Redis or client.connection is not None:
        return None
    pool = client.connection_pool
    if (
        type(pool) is not redis.ConnectionPool
        or getattr(pool, "cache", None) is not None
        or (pool.max_connections or 0) < LANE_MIN_CAP
    ):
        return None
    return ScriptLane(pool)


class Scripts:
    """The scripts of one store (or run log) on ``client``, and the lane they go on.

    ``lane`` is ``None`` for a client that must send them through its pool (see the module's
    docstring): :meth:`register` then gives ``client.register_script(source)``.
    """

    __slots__ = ("_client", "lane")

    def __init__(self, client: Any) -> None:
        self._client = client
        self.lane = lane_for(client)

    def register(self, source: str) -> Script:
        """The script ``source``: called as ``script(keys=[...], args=[...])``."""
        lane, client = self.lane, self._client
        if lane is None:
            registered: Script = client.register_script(source)
            return registered
        # Redis names a script by the SHA-1 of its text.
        sha = hashlib.sha1(source.encode("utf-8"), usedforsecurity=False).hexdigest()

        def script(keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
            return lane.run(client, sha, source, keys, args)

        return script

    def close(self) -> None:
        """Close the lane's idle connections (the scripts stay usable: they open new ones)."""
        if self.lane is not None:
            self.lane.close()
