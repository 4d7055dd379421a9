"""Shared limits across processes: RedisConcurrencyLimit and RedisRateLimit.

Real processes (``python -c``) against a real redis-server and the loopback
``FakeOpenAIServer`` of this process, which counts the requests in flight. A holder is
killed with SIGKILL to show that its slot comes back when its lease ends (in real time, and
at once for a limit on a :class:`~agentkit.testing.ManualClock` moved past the lease); Redis is stopped
and frozen (SIGSTOP) under waiting calls to show that they fail with a clear error within
their timeout. Time limits are failure guards; the times asserted are lower bounds the
limits guarantee, or upper bounds that are the point of the test (a call's timeout).
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkit import AgentCancelledError, CancelHandle, ChatModelAgent, Runner, with_cancel
from agentkit.errors import SharedLimitUnavailableError, SlotTimeoutError
from agentkit.models import OpenAIChatModel
from agentkit.schema import user_message
from agentkit.testing import FakeOpenAIServer, ManualClock, Reply, no_thread_leak
from tests.redis_server import (
    redis_url,  # noqa: F401 (a session fixture)
    running_redis_server,
)
from tests.test_shared_limits import InFlight

redis = pytest.importorskip("redis")
from agentkit.integrations.redis import RedisConcurrencyLimit, RedisRateLimit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GUARD = 60.0

# A process of users: THREADS threads, each making RUNS agent runs, all under one
# RedisConcurrencyLimit(3). argv: redis url, limit name, model base url, threads, runs.
USERS = """
import sys, threading
from agentkit import ChatModelAgent, Runner
from agentkit.models import OpenAIChatModel
from agentkit.integrations.redis import RedisConcurrencyLimit
url, name, base_url, threads, runs = sys.argv[1:6]
slots = RedisConcurrencyLimit(3, name, url=url, lease=10)
model = OpenAIChatModel("gpt-test", base_url=base_url, api_key="k", concurrency=slots)
runner = Runner(ChatModelAgent("assistant", "answers", model), enable_streaming=True)
answers, errors = [], []
def user(number):
    try:
        for turn in range(int(runs)):
            answers.append(runner.invoke(f"q{number}.{turn}").text)
    except BaseException as error:
        errors.append(repr(error))
workers = [threading.Thread(target=user, args=(n,)) for n in range(int(threads))]
for worker in workers: worker.start()
for worker in workers: worker.join()
model.close(); slots.close()
print(len(answers), answers.count("done"), errors, flush=True)
"""

# A process that makes one model call under RedisConcurrencyLimit(1) and never ends it (the
# server holds the answer). argv: redis url, limit name, model base url, lease.
HOLDER = """
import sys
from agentkit.models import OpenAIChatModel
from agentkit.integrations.redis import RedisConcurrencyLimit
from agentkit.schema import user_message
url, name, base_url, lease = sys.argv[1:5]
slots = RedisConcurrencyLimit(1, name, url=url, lease=float(lease))
model = OpenAIChatModel("gpt-test", base_url=base_url, api_key="k", concurrency=slots)
model.generate([user_message("hold")])
"""

# Pause a RedisRateLimit for argv[3] seconds, in another process. argv: url, name, seconds.
PAUSER = """
import sys
from agentkit.integrations.redis import RedisRateLimit
url, name, seconds = sys.argv[1:4]
RedisRateLimit(name, requests_per_minute=10_000, url=url).pause(float(seconds))
print("paused", flush=True)
"""


def child(script: str, *args: str, stdout: Any = subprocess.PIPE) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def frozen_redis() -> Iterator[tuple[str, int]]:
    """A redis-server of this test alone, to stop or freeze: its URL and process id."""
    with running_redis_server() as url:
        pid = int(redis.Redis.from_url(url).info("server")["process_id"])
        try:
            yield url, pid
        finally:
            os.kill(pid, signal.SIGCONT)  # so that it can be stopped


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -2, 1.5, True])
def test_a_redis_concurrency_limit_below_one_is_refused(limit: Any) -> None:
    with pytest.raises(ValueError, match="int >= 1"):
        RedisConcurrencyLimit(limit, "name", url="redis://127.0.0.1:1")


def test_a_redis_limit_without_a_name_or_a_lease_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a name"):
        RedisConcurrencyLimit(2, "", url="redis://127.0.0.1:1")
    with pytest.raises(ValueError, match="lease must be"):
        RedisConcurrencyLimit(2, "x", url="redis://127.0.0.1:1", lease=0)
    with pytest.raises(ValueError, match="requests_per_minute=, tokens_per_minute= or both"):
        RedisRateLimit("x", url="redis://127.0.0.1:1")
    with pytest.raises(ValueError, match="tokens_per_minute"):
        RedisRateLimit("x", tokens_per_minute=-1, url="redis://127.0.0.1:1")


# --- across processes -------------------------------------------------------------------------


def test_three_processes_never_have_more_than_three_calls_in_flight(
    redis_url: str,  # noqa: F811
) -> None:
    counter = InFlight(limit=3)
    name = fresh("in-flight")
    with FakeOpenAIServer(handler=counter) as fake:
        users = [child(USERS, redis_url, name, fake.base_url, "5", "3") for _ in range(3)]
        outputs = [process.communicate(timeout=GUARD) for process in users]
    for process, (out, err) in zip(users, outputs, strict=True):
        assert process.returncode == 0, err
        assert out.split(maxsplit=2)[:2] == ["15", "15"] and out.rstrip().endswith("[]"), out
    assert counter.total == 45
    assert counter.most <= 3
    assert RedisConcurrencyLimit(3, name, url=redis_url).in_use == 0


def test_the_slot_of_a_killed_holder_comes_back_when_its_lease_ends(
    redis_url: str,  # noqa: F811
) -> None:
    arrived = threading.Event()
    answer = threading.Event()

    def handler(request: dict[str, Any]) -> Reply:
        if request["messages"][-1]["content"] == "hold":
            arrived.set()
            answer.wait(GUARD)  # never answered while the holder lives
        return Reply("mine now")

    name = fresh("killed")
    lease = 3.0
    slots = RedisConcurrencyLimit(1, name, url=redis_url, lease=lease)
    with FakeOpenAIServer(handler=handler) as fake:
        holder = child(HOLDER, redis_url, name, fake.base_url, str(lease))
        try:
            assert arrived.wait(GUARD), holder.stderr.read() if holder.stderr else ""
            assert slots.in_use == 1
            lease_ends = lease_ends_of(slots)
            assert len(lease_ends) == 1
            wait_for_lease_ends(slots, lambda ends: ends and ends[0] > lease_ends[0])
            assert slots.in_use == 1  # a living holder refreshes its lease: it stays taken
            with pytest.raises(SlotTimeoutError):
                slots.acquire(timeout=0.2)
            holder.send_signal(signal.SIGKILL)
            holder.wait(GUARD)
            killed_at = time.monotonic()
            assert slots.in_use == 1  # the dead holder's lease has not run out yet
            model = OpenAIChatModel(
                "gpt-test", base_url=fake.base_url, api_key="k", concurrency=slots, timeout=GUARD
            )
            reply = model.generate([user_message("after")])
            waited = time.monotonic() - killed_at
        finally:
            holder.kill()
            holder.wait(GUARD)
            answer.set()
        model.close()
    assert reply.content == "mine now"
    assert waited < lease + 5.0  # the slot came back with the end of the lease
    assert slots.in_use == 0 and slots.held_here == 0


def lease_ends_of(slots: RedisConcurrencyLimit) -> list[float]:
    """The ends of the slot leases held now (ms, on the clock of whoever wrote them)."""
    client = redis.Redis.from_url(slots_url(slots))
    try:
        return [score for _, score in client.zrange(slots_key(slots), 0, -1, withscores=True)]
    finally:
        client.close()


def slots_url(slots: RedisConcurrencyLimit) -> str:
    settings = slots._client.connection_pool.connection_kwargs
    return f"redis://{settings['host']}:{settings['port']}/{settings.get('db', 0)}"


def slots_key(slots: RedisConcurrencyLimit) -> str:
    return f"agentkit:limit:{slots.name}:slots"


def ends_at_least(end: float, ends: list[float]) -> bool:
    return bool(ends) and ends[0] >= end


def wait_for_lease_ends(
    slots: RedisConcurrencyLimit, done: Callable[[list[float]], object]
) -> list[float]:
    """Poll Redis (a failure guard bounds it) until the lease ends satisfy ``done``."""
    deadline = time.monotonic() + GUARD
    while not done(ends := lease_ends_of(slots)):
        assert time.monotonic() < deadline, f"the slot leases never got there: {ends}"
        time.sleep(0.01)  # polling Redis, not pacing the test
    return ends


def test_on_a_manual_clock_the_slot_of_a_killed_holder_comes_back_once_the_clock_passes_its_lease(
    redis_url: str,  # noqa: F811
) -> None:
    # The holder, another process, times its lease on the Redis server's clock; this
    # process's limit reads a manual clock that starts at the same time and moves past the
    # dead holder's lease at once: no lease is waited out.
    arrived, answer = threading.Event(), threading.Event()

    def handler(request: dict[str, Any]) -> Reply:
        if request["messages"][-1]["content"] == "hold":
            arrived.set()
            answer.wait(GUARD)  # never answered while the holder lives
        return Reply("mine now")

    clock = ManualClock()
    name = fresh("killed-clocked")
    lease = 300.0  # five minutes of lease, longer than the test runs
    slots = RedisConcurrencyLimit(1, name, url=redis_url, lease=lease, clock=clock)
    with FakeOpenAIServer(handler=handler) as fake:
        holder = child(HOLDER, redis_url, name, fake.base_url, str(lease))
        try:
            assert arrived.wait(GUARD), holder.stderr.read() if holder.stderr else ""
            holder.send_signal(signal.SIGKILL)
            holder.wait(GUARD)
            assert slots.in_use == 1
            with pytest.raises(SlotTimeoutError):
                slots.acquire(timeout=0.2)
            [lease_end] = lease_ends_of(slots)  # the holder's, on the server's clock
            clock.advance(lease_end / 1000 - clock.time() - 1.0)
            assert slots.in_use == 1  # the dead holder's lease has a second left
            clock.advance(1.5)
            assert slots.in_use == 0  # and now it ended
            model = OpenAIChatModel(
                "gpt-test", base_url=fake.base_url, api_key="k", concurrency=slots, timeout=GUARD
            )
            reply = model.generate([user_message("after")])
        finally:
            holder.kill()
            holder.wait(GUARD)
            answer.set()
        model.close()
    assert reply.content == "mine now"
    assert slots.in_use == 0 and slots.held_here == 0
    slots.close()


def test_on_a_manual_clock_a_held_slot_is_refreshed_as_the_clock_moves(
    redis_url: str,  # noqa: F811
) -> None:
    clock = ManualClock()
    name = fresh("refreshed-clocked")
    lease = 30.0
    slots = RedisConcurrencyLimit(1, name, url=redis_url, lease=lease, clock=clock)
    rival = RedisConcurrencyLimit(1, name, url=redis_url, lease=lease, clock=clock)
    with no_thread_leak():
        slot = slots.acquire(timeout=GUARD)
        for _ in range(9):  # three leases, a third at a time
            assert clock.wait_for_waiters(1, GUARD)  # the next refresh is scheduled
            clock.advance(lease / 3)
            refreshed_end = (clock.time() + lease) * 1000 - 1  # a lease from the clock's now
            wait_for_lease_ends(slots, functools.partial(ends_at_least, refreshed_end))
        assert slots.in_use == 1  # 90 s on the clock, a 30 s lease: kept by its refreshes
        with pytest.raises(SlotTimeoutError):
            rival.acquire(timeout=0.2)
        slot.release()
        rival.acquire(timeout=GUARD).release()  # given back: the rival's turn at once
        slots.close()
        rival.close()


def test_a_pause_in_one_process_holds_back_the_callers_of_another(
    redis_url: str,  # noqa: F811
) -> None:
    name = fresh("paused")
    rate = RedisRateLimit(name, requests_per_minute=10_000, url=redis_url)
    pauser = child(PAUSER, redis_url, name, "3")
    out, err = pauser.communicate(timeout=GUARD)
    assert pauser.returncode == 0 and out.strip() == "paused", err
    started = time.monotonic()
    left = rate.paused_for  # what is left of the other process's pause (Redis's clock)
    assert left > 0
    grant = rate.acquire(timeout=GUARD)
    assert time.monotonic() - started >= left - 0.01  # milliseconds of rounding
    assert grant.waited > 0
    assert rate.paused_for == 0.0
    rate.close()


# --- one process, Redis's rules ---------------------------------------------------------------


def test_a_freed_slot_wakes_a_waiter_of_another_object_at_once(
    redis_url: str,  # noqa: F811
) -> None:
    name = fresh("wake")
    first = RedisConcurrencyLimit(1, name, url=redis_url)
    second = RedisConcurrencyLimit(1, name, url=redis_url)  # its own connections
    held = first.acquire()
    got: list[float] = []

    def wait_for_it() -> None:
        with second.acquire(timeout=GUARD) as slot:
            got.append(slot.waited)

    with no_thread_leak(GUARD):
        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        time.sleep(0.2)  # it waits by now (if not, it finds the slot taken, or free)
        held.release()
        waiter.join(GUARD)
    assert len(got) == 1
    assert first.in_use == 0 and second.held_here == 0


def test_requests_past_the_shared_allowance_wait_for_the_refill(
    redis_url: str,  # noqa: F811
) -> None:
    name = fresh("refill")
    one = RedisRateLimit(name, requests_per_minute=120, url=redis_url)
    other = RedisRateLimit(name, requests_per_minute=120, url=redis_url)
    started = time.monotonic()
    for limit in (one, other) * 60:
        assert limit.acquire().waited == 0.0
    assert other.acquire(timeout=GUARD).waited > 0
    assert time.monotonic() - started >= 0.5 - 0.01  # 121 from 120; ms of Redis's clock
    slow = RedisRateLimit(fresh("slow"), requests_per_minute=1, url=redis_url)
    slow.acquire()
    with pytest.raises(SlotTimeoutError, match="would have to wait"):
        slow.acquire(timeout=0.1)


def test_shared_tokens_are_settled_with_the_real_usage(redis_url: str) -> None:  # noqa: F811
    rate = RedisRateLimit(fresh("tokens"), tokens_per_minute=6000, url=redis_url)
    started = time.monotonic()
    grant = rate.acquire(tokens=6000)
    grant.settle(3000)
    assert rate.acquire(tokens=3000).waited == 0.0
    assert rate.acquire(tokens=100, timeout=GUARD).waited > 0
    assert time.monotonic() - started >= 1.0 - 0.01


def test_a_model_under_a_redis_rate_is_paused_for_everyone_by_a_429(
    redis_url: str,  # noqa: F811
) -> None:
    name = fresh("429")
    rate = RedisRateLimit(name, requests_per_minute=10_000, url=redis_url)
    with FakeOpenAIServer() as fake:
        fake.queue(Reply(status=429, error="slow down", retry_after=1), Reply("ok"))
        model = OpenAIChatModel("gpt-test", base_url=fake.base_url, api_key="k", rate_limit=rate)
        assert model.generate([user_message("hi")]).content == "ok"
        model.close()
    other = RedisRateLimit(name, requests_per_minute=10_000, url=redis_url)
    assert other.paused_for == 0.0  # over by now; it held the retry back meanwhile
    assert len(fake.requests) == 2


def test_a_cancel_ends_a_run_waiting_for_a_redis_slot(redis_url: str) -> None:  # noqa: F811
    slots = RedisConcurrencyLimit(1, fresh("cancel"), url=redis_url)
    held = slots.acquire()
    with FakeOpenAIServer() as fake:
        model = OpenAIChatModel("gpt-test", base_url=fake.base_url, api_key="k", concurrency=slots)
        handle = CancelHandle()
        with no_thread_leak(GUARD):
            events = Runner(ChatModelAgent("a", "d", model)).query("hi", with_cancel(handle))
            time.sleep(0.3)  # the run waits for the slot
            handle.cancel()
            collected = list(events)
        assert fake.requests == []
    assert len(collected) == 1 and isinstance(collected[0].err, AgentCancelledError)
    held.release()
    assert slots.in_use == 0


# --- Redis down -------------------------------------------------------------------------------


def test_a_call_fails_clearly_when_redis_is_down_and_sends_nothing() -> None:
    with running_redis_server() as url:
        pass  # stopped: nothing listens there now
    slots = RedisConcurrencyLimit(2, "down", url=url)
    with FakeOpenAIServer() as fake:
        model = OpenAIChatModel("gpt-test", base_url=fake.base_url, api_key="k", concurrency=slots)
        started = time.monotonic()
        with pytest.raises(SharedLimitUnavailableError, match="could not reach Redis") as caught:
            model.generate([user_message("hi")])
        assert time.monotonic() - started < 5.0
        assert fake.requests == []
    assert isinstance(caught.value, ConnectionError) and caught.value.limit is slots
    rate = RedisRateLimit("down", requests_per_minute=10, url=url)
    with pytest.raises(SharedLimitUnavailableError, match=r"RedisRateLimit\('down'"):
        rate.acquire()


def test_redis_stopped_under_a_waiting_call_fails_it_within_its_timeout(
    frozen_redis: tuple[str, int],
) -> None:
    url, pid = frozen_redis
    slots = RedisConcurrencyLimit(1, "stopped", url=url)
    holder = RedisConcurrencyLimit(1, "stopped", url=url)
    held = holder.acquire()
    failures: list[BaseException] = []

    def wait() -> None:
        try:
            slots.acquire(timeout=10.0)
        except BaseException as error:
            failures.append(error)

    with no_thread_leak(GUARD):
        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.3)  # it waits
        started = time.monotonic()
        os.kill(pid, signal.SIGSTOP)  # Redis stops answering
        waiter.join(GUARD)
        failed_after = time.monotonic() - started
        held.release()  # its lease is left to run out: logged, not raised
    assert len(failures) == 1 and isinstance(failures[0], SharedLimitUnavailableError)
    assert "could not reach Redis" in str(failures[0])
    assert failed_after < 10.0  # within the call's timeout
    assert slots.held_here == 0


def test_redis_killed_under_a_waiting_call_fails_it_at_once() -> None:
    with running_redis_server() as url:
        pid = int(redis.Redis.from_url(url).info("server")["process_id"])
        slots = RedisConcurrencyLimit(1, "killed", url=url)
        held = slots.acquire()
        failures: list[BaseException] = []

        def wait() -> None:
            try:
                slots.acquire(timeout=10.0)
            except BaseException as error:
                failures.append(error)

        with no_thread_leak(GUARD):
            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
            started = time.monotonic()
            waiter.join(GUARD)
            failed_after = time.monotonic() - started
            held.release()
    assert len(failures) == 1 and isinstance(failures[0], SharedLimitUnavailableError)
    assert failed_after < 5.0


def test_a_redis_restart_without_persistence_forgets_held_slots_as_documented(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 49, A20: a documented limit, pinned. Redis without persistence forgets the slots
    # held when it restarts: a second call gets a slot of a limit of 1 while the first still
    # holds its own, and the holder's next refresh says so in the log.
    from tests.celery_support import RestartableRedis

    server = RestartableRedis(tmp_path)
    server.start()
    limit = RedisConcurrencyLimit(1, f"restart-{uuid.uuid4().hex[:6]}", url=server.url,
                                  lease=0.6)
    try:
        first = limit.acquire(timeout=5)
        server.stop()
        for leftover in tmp_path.rglob("*"):  # a restart without persistence: nothing kept
            if leftover.is_file():
                leftover.unlink()
        server.start()
        with caplog.at_level("WARNING", logger="agentkit"):
            second = limit.acquire(timeout=0.1)  # granted: the first slot was forgotten
            deadline = time.monotonic() + 10
            while "restarted without persistence" not in caplog.text:
                assert time.monotonic() < deadline, caplog.text
                time.sleep(0.05)
        second.release()
        first.release()
    finally:
        limit.close()
        server.stop()
