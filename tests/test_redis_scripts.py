"""agentkit's Redis scripts on connections kept for them (``agentkit/checkpoint/_redisscripts``).

Against a real redis-server: a script sent on a lane replies as ``client.register_script``
would (values, errors), never checks a connection out of the client's pool, survives a killed
connection and a flushed script cache, gives each thread its own connection, starts afresh
in a forked child, and is not used with clients it would change (capped, blocking,
single-connection pools).
"""

from __future__ import annotations

import gc
import multiprocessing
import socket
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

redis = pytest.importorskip("redis")

from agentkit.checkpoint._redisscripts import LANE_MIN_CAP, Scripts  # noqa: E402
from tests.redis_server import redis_url  # noqa: E402,F401

GUARD = 30.0  # failure guard only

# A pool of a class of its own (as Sentinel's is): no lane for it, by design.
OWN_POOL: Any = type("OwnPool", (redis.ConnectionPool,), {})

ECHO = "return ARGV[1]"
SHAPES = """
if ARGV[1] == 'int' then return 42 end
if ARGV[1] == 'nil' then return nil end
if ARGV[1] == 'list' then return {1, 'two', {KEYS[1]}} end
if ARGV[1] == 'error' then return redis.error_reply('NOPE no such thing') end
return redis.call('INCRBY', KEYS[1], ARGV[1])
"""


@pytest.fixture
def client(redis_url: str) -> Iterator[Any]:  # noqa: F811
    made = redis.Redis.from_url(redis_url)
    yield made
    made.close()


@pytest.fixture
def scripts(client: Any) -> Iterator[Scripts]:
    made = Scripts(client)
    yield made
    made.close()


def test_a_plain_client_gets_a_lane_and_its_scripts_reply_as_redis_py_would(
    client: Any, scripts: Scripts
) -> None:
    assert scripts.lane is not None
    lane_script = scripts.register(SHAPES)
    plain_script = client.register_script(SHAPES)
    for shape in ("int", "nil", "list"):
        assert lane_script(keys=["k"], args=[shape]) == plain_script(keys=["k"], args=[shape])
    assert lane_script(keys=["k"], args=["list"]) == [1, b"two", [b"k"]]
    assert lane_script(keys=["a"], args=["5"]) == plain_script(keys=["b"], args=["5"]) == 5
    assert lane_script(keys=["counter"], args=["3"]) == 3
    assert lane_script(keys=["counter"], args=["4"]) == 7
    with pytest.raises(redis.ResponseError, match="NOPE no such thing"):
        lane_script(keys=["k"], args=["error"])
    # An error reply is read whole: the connection goes on serving.
    assert lane_script(keys=["counter"], args=["1"]) == 8
    assert scripts.lane.idle() == 1


def test_a_lane_script_never_checks_a_connection_out_of_the_pool(
    client: Any, scripts: Scripts
) -> None:
    script = scripts.register(ECHO)
    script(args=["warm"])
    taken = []
    original = client.connection_pool.get_connection

    def counting(*args: Any, **kwargs: Any) -> Any:
        taken.append(1)
        return original(*args, **kwargs)

    client.connection_pool.get_connection = counting
    try:
        for number in range(50):
            assert script(args=[str(number)]) == str(number).encode()
    finally:
        del client.connection_pool.get_connection
    assert taken == []


def test_a_killed_connection_is_replaced_and_the_call_goes_through(
    scripts: Scripts, redis_url: str  # noqa: F811
) -> None:
    script = scripts.register(ECHO)
    assert script(args=["before"]) == b"before"
    killer = redis.Redis.from_url(redis_url)
    try:
        killed = killer.client_kill_filter(_type="normal", skipme=True)
        assert killed >= 1
    finally:
        killer.close()
    assert script(args=["after"]) == b"after"


def test_a_flushed_script_cache_loads_the_script_again(client: Any, scripts: Scripts) -> None:
    script = scripts.register("return 'flushed ' .. ARGV[1]")
    assert script(args=["once"]) == b"flushed once"
    client.script_flush()
    assert script(args=["twice"]) == b"flushed twice"


def test_threads_each_use_their_own_connection(scripts: Scripts) -> None:
    script = scripts.register(ECHO)
    threads_count, calls = 8, 200
    barrier = threading.Barrier(threads_count, timeout=GUARD)
    wrong: list[tuple[str, Any]] = []

    def worker(index: int) -> None:
        barrier.wait()
        for call in range(calls):
            value = f"{index}-{call}"
            reply = script(args=[value])
            if reply != value.encode():
                wrong.append((value, reply))

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD)
        assert not thread.is_alive()
    assert wrong == []
    assert scripts.lane is not None and 1 <= scripts.lane.idle() <= threads_count


def _child(results: Any) -> None:
    # The client (and its lane) came with the fork; the child must not use the parent's
    # connection (their replies would interleave when both call at once).
    reply = _FORKED_SCRIPT(args=["from the child"])
    results.put((reply, _local_addresses(_FORKED_LANE)))


def _local_addresses(lane: Any) -> set[Any]:
    """The local socket addresses of the lane's idle connections (white box)."""
    return {connection._sock.getsockname() for connection in lane._idle}


_FORKED_SCRIPT: Any = None
_FORKED_LANE: Any = None


def test_a_forked_child_opens_its_own_connections(scripts: Scripts) -> None:
    global _FORKED_SCRIPT, _FORKED_LANE
    script = _FORKED_SCRIPT = scripts.register(ECHO)
    assert script(args=["parent, before"]) == b"parent, before"
    lane = _FORKED_LANE = scripts.lane
    assert lane is not None and lane.idle() == 1
    parents = _local_addresses(lane)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_child, args=(results,))
    child.start()
    try:
        reply, childs = results.get(timeout=GUARD)
    finally:
        child.join(GUARD)
        _FORKED_SCRIPT = _FORKED_LANE = None
    assert reply == b"from the child"
    assert len(childs) == 1 and not childs & parents
    assert child.exitcode == 0
    # The parent's connection was not touched by the child: it goes on as before.
    for number in range(20):
        assert script(args=[f"parent {number}"]) == f"parent {number}".encode()


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda url: redis.Redis.from_url(url, max_connections=LANE_MIN_CAP - 1),
                     id="capped pool"),
        pytest.param(
            lambda url: redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(url)),
            id="blocking pool",
        ),
        pytest.param(lambda url: redis.Redis.from_url(url, single_connection_client=True),
                     id="single connection"),
        pytest.param(
            lambda url: redis.Redis(connection_pool=OWN_POOL.from_url(url)),
            id="pool subclass",
        ),
    ],
)
def test_other_clients_send_scripts_the_usual_way(make: Any, redis_url: str) -> None:  # noqa: F811
    other = make(redis_url)
    try:
        scripts = Scripts(other)
        assert scripts.lane is None
        script = scripts.register(ECHO)
        assert script(args=["usual"]) == b"usual"
    finally:
        other.close()


def test_close_closes_the_idle_connections_and_the_scripts_go_on(
    client: Any, scripts: Scripts
) -> None:
    script = scripts.register(ECHO)
    script(args=["open"])
    before = {entry["id"] for entry in client.client_list()}
    scripts.close()
    after = {entry["id"] for entry in client.client_list()}
    assert len(before - after) == 1  # the lane's one connection is gone
    assert script(args=["again"]) == b"again"  # on a new one


SLOW = """
local start = redis.call('TIME')
while true do
    local now = redis.call('TIME')
    if (now[1] - start[1]) * 1000000 + (now[2] - start[2]) > tonumber(ARGV[1]) then
        return 'slow'
    end
end
"""


def test_a_call_cut_short_never_leaves_its_reply_to_the_next(redis_url: str) -> None:  # noqa: F811
    # A read timeout leaves the slow script's reply on its way; were that connection used
    # again, the next call would read that reply as its own.
    impatient = redis.Redis.from_url(redis_url, socket_timeout=0.1)
    patient = redis.Redis.from_url(redis_url)
    try:
        scripts = Scripts(impatient)
        slow, echo = scripts.register(SLOW), scripts.register(ECHO)
        assert echo(args=["warm"]) == b"warm"
        with pytest.raises(redis.TimeoutError):
            slow(args=[300_000])
        assert patient.ping()  # answered once the slow script ended: its reply was sent
        assert echo(args=["fast"]) == b"fast"
    finally:
        scripts.close()
        impatient.close()
        patient.close()


def test_failed_calls_do_not_pile_up_connections() -> None:
    # Nothing listens on this port: every call fails to connect. A connection that failed
    # stays the lane's (closed) and is tried again: failures never pile up connections.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = redis.Redis.from_url(f"redis://127.0.0.1:{port}/0", max_connections=LANE_MIN_CAP)
    try:
        scripts = Scripts(dead)
        script = scripts.register(ECHO)
        for _ in range(LANE_MIN_CAP + 20):
            with pytest.raises(redis.ConnectionError) as caught:
                script(args=["never"])
            assert "Too many connections" not in str(caught.value)
        assert scripts.lane is not None and scripts.lane.idle() == 1
    finally:
        scripts.close()
        dead.close()


def test_a_lane_goes_with_its_owner(redis_url: str) -> None:  # noqa: F811
    # A store made per request and dropped must not leave its connections behind.
    made = redis.Redis.from_url(redis_url)
    scripts = Scripts(made)
    assert scripts.register(ECHO)(args=["once"]) == b"once"
    gone = weakref.ref(scripts.lane)
    del made, scripts
    gc.collect()
    assert gone() is None


def test_lanes_made_and_dropped_never_use_up_the_clients_pool(client: Any) -> None:
    # A store made per request on one shared client: each has a lane of its own; more of
    # them than the pool may hold connections leave the pool as usable as before.
    cap = client.connection_pool.max_connections
    for number in range(cap + 20):
        scripts = Scripts(client)
        assert scripts.register(ECHO)(args=[str(number)]) == str(number).encode()
        if number % 2:
            scripts.close()  # closed, or just dropped: both
    assert client.ping()
    assert Scripts(client).register(ECHO)(args=["still"]) == b"still"
