"""Shared limits in one process: ConcurrencyLimit and RateLimit on real models, tools and runs.

Whole runs of real Runners and ChatModelAgents in real threads, against the loopback
``FakeOpenAIServer``, which counts the requests in flight itself. Waits use events and
conditions; time limits are failure guards. Where a test is about time (a rate, a pause a
server asked for), it asserts a lower bound the limit guarantees, never an upper one that
load could break, except where failing fast is the point.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    CancelHandle,
    ChatModelAgent,
    ConcurrencyLimit,
    RateLimit,
    RunInfo,
    Runner,
    tool,
    with_callbacks,
    with_cancel,
)
from agentkit.errors import SharedLimitError, SlotTimeoutError
from agentkit.models import OpenAIChatModel
from agentkit.schema import user_message
from agentkit.testing import FakeOpenAIServer, Reply, call, no_thread_leak
from agentkit.throttle import LimitWait

GUARD = 30.0


class InFlight:
    """Counts requests in flight at the server; each request waits a little for company.

    A request waits until more than ``limit`` requests are in flight together, or for
    ``linger`` seconds: without a limit on the client, concurrent requests pile up at once
    and the count goes over ``limit``; with one, it cannot, however the threads are timed.
    """

    def __init__(self, limit: int, linger: float = 0.05, reply: str = "done") -> None:
        self.limit = limit
        self.linger = linger
        self.reply = reply
        self.condition = threading.Condition()
        self.now = 0
        self.most = 0
        self.total = 0

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self.condition:
            self.now += 1
            self.total += 1
            self.most = max(self.most, self.now)
            self.condition.notify_all()
            self.condition.wait_for(lambda: self.now > self.limit, timeout=self.linger)
            self.now -= 1
        return Reply(self.reply, chunks=2)


class Waits:
    """A callback handler that keeps every ``on_limit_wait`` report."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[RunInfo, LimitWait]] = []

    def on_limit_wait(self, info: RunInfo, wait: LimitWait) -> None:
        with self.lock:
            self.seen.append((info, wait))


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, True, 2.5, "3", None])
def test_a_concurrency_limit_below_one_or_not_an_int_is_refused(limit: Any) -> None:
    with pytest.raises(ValueError, match="int >= 1"):
        ConcurrencyLimit(limit)


def test_a_rate_limit_with_nothing_set_is_refused() -> None:
    with pytest.raises(ValueError, match="requests_per_minute=, tokens_per_minute= or both"):
        RateLimit()


@pytest.mark.parametrize("value", [0, -5, float("nan"), float("inf"), True, "60"])
@pytest.mark.parametrize("field", ["requests_per_minute", "tokens_per_minute"])
def test_a_rate_that_is_not_a_positive_finite_number_is_refused(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        RateLimit(**{field: value})


def test_limits_of_the_wrong_kind_are_refused_with_the_argument_to_use() -> None:
    with pytest.raises(TypeError, match=r"a rate limit goes to rate_limit="):
        OpenAIChatModel("m", concurrency=RateLimit(requests_per_minute=10))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"a concurrency limit goes to concurrency="):
        OpenAIChatModel("m", rate_limit=ConcurrencyLimit(2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="concurrency= takes a ConcurrencyLimit"):
        tool(concurrency=3)  # type: ignore[call-overload]


def test_bad_timeouts_and_token_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="timeout"):
        ConcurrencyLimit(1).acquire(timeout="soon")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tokens must be an int >= 0"):
        RateLimit(tokens_per_minute=10).acquire(tokens=-1)


# --- ConcurrencyLimit -------------------------------------------------------------------------


def test_sixteen_threads_of_five_runs_never_have_more_than_three_model_calls_in_flight() -> None:
    counter = InFlight(limit=3)
    slots = ConcurrencyLimit(3)
    waits = Waits()
    finished: list[str] = []
    errors: list[BaseException] = []
    with FakeOpenAIServer(handler=counter) as fake, no_thread_leak(GUARD):
        model = OpenAIChatModel("gpt-test", base_url=fake.base_url, api_key="k", concurrency=slots)
        agent = ChatModelAgent("assistant", "answers", model)
        runners = [Runner(agent), Runner(agent, enable_streaming=True)]

        def user(number: int) -> None:
            try:
                for turn in range(5):
                    runner = runners[(number + turn) % 2]
                    result = runner.invoke(f"question {number}.{turn}", with_callbacks(waits))
                    finished.append(result.text)
            except BaseException as error:  # reported below
                errors.append(error)

        # The test holds the three slots until all sixteen users queue for them.
        held = [slots.acquire() for _ in range(3)]
        threads = [threading.Thread(target=user, args=(n,)) for n in range(16)]
        for thread in threads:
            thread.start()
        eventually(lambda: slots.waiting == 16)
        for slot in held:
            slot.release()
        for thread in threads:
            thread.join(GUARD)
        model.close()
    assert not errors
    assert finished == ["done"] * 80
    assert counter.total == 80
    assert counter.most <= 3
    assert slots.in_use == 0 and slots.waiting == 0
    # Calls that queued were reported, named as model calls of the agent.
    assert len(waits.seen) >= 16  # the first call of every user waited
    info, wait = waits.seen[0]
    assert (info.component, info.name, info.agent_name) == ("ChatModel", "gpt-test", "assistant")
    assert wait.limit is slots and wait.kind == "concurrency" and wait.error is None
    assert all(wait.seconds > 0 for _, wait in waits.seen)


def test_a_freed_slot_goes_to_the_caller_that_waited_longest() -> None:
    slots = ConcurrencyLimit(1)
    first = slots.acquire()
    order: list[int] = []

    def waiter(number: int) -> None:
        with slots.acquire(timeout=GUARD):
            order.append(number)

    threads = []
    for number in range(4):
        thread = threading.Thread(target=waiter, args=(number,))
        thread.start()
        threads.append(thread)
        eventually(lambda: slots.waiting == number + 1)  # noqa: B023 - called at once
    first.release()
    for thread in threads:
        thread.join(GUARD)
    assert order == [0, 1, 2, 3]
    assert slots.in_use == 0


def test_a_slot_released_twice_is_released_once() -> None:
    slots = ConcurrencyLimit(2)
    slot = slots.acquire()
    other = slots.acquire()
    slot.release()
    slot.release()
    assert slots.in_use == 1 and slot.released and not other.released
    other.release()
    assert slots.in_use == 0


def test_a_model_call_waits_for_a_slot_no_longer_than_its_timeout(server: FakeOpenAIServer) -> None:
    slots = ConcurrencyLimit(1)
    model = OpenAIChatModel(
        "gpt-test", base_url=server.base_url, api_key="k", timeout=0.3, concurrency=slots
    )
    held = slots.acquire()
    started = time.monotonic()
    with pytest.raises(SlotTimeoutError) as caught:
        model.generate([user_message("hi")])
    assert time.monotonic() - started >= 0.3
    assert "a call under ConcurrencyLimit(1) waited" in str(caught.value)
    assert "until its timeout of" in str(caught.value)
    assert caught.value.limit is slots and caught.value.waited > 0.25  # the time the call had left
    assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, SharedLimitError)
    assert server.requests == []  # nothing was sent
    assert slots.waiting == 0
    held.release()
    assert slots.in_use == 0


@pytest.mark.parametrize("close_iterator", [False, True])
def test_a_cancel_ends_a_run_waiting_for_a_slot_at_once(
    server: FakeOpenAIServer, close_iterator: bool
) -> None:
    slots = ConcurrencyLimit(1)
    waits = Waits()
    model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="k", concurrency=slots)
    runner = Runner(ChatModelAgent("assistant", "answers", model))
    held = slots.acquire()  # the run cannot get a slot
    handle = CancelHandle()
    with no_thread_leak(GUARD):
        events = runner.query("hi", with_cancel(handle), with_callbacks(waits))
        with queued_behind(slots):
            pass
        if close_iterator:
            events.close()
            collected = []
        else:
            handle.cancel()
            collected = list(events)
    assert server.requests == []
    assert slots.waiting == 0 and slots.in_use == 1
    if not close_iterator:
        assert len(collected) == 1 and isinstance(collected[0].err, AgentCancelledError)
    ((_, wait),) = waits.seen
    assert wait.kind == "concurrency" and isinstance(wait.error, AgentCancelledError)
    held.release()
    assert slots.in_use == 0


def eventually(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds (polled: it watches another thread's progress)."""
    deadline = time.monotonic() + GUARD
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.002)


class queued_behind:
    """A ``with`` block entered once someone waits for a slot of ``limit``."""

    def __init__(self, limit: ConcurrencyLimit) -> None:
        self.limit = limit

    def __enter__(self) -> None:
        eventually(lambda: self.limit.waiting > 0)

    def __exit__(self, *exc_info: object) -> None:
        pass


def test_a_stream_holds_its_slot_until_it_is_read_to_the_end(server: FakeOpenAIServer) -> None:
    slots = ConcurrencyLimit(1)
    server.queue(Reply("one two three", chunks=3))
    model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="k", concurrency=slots)
    reader = model.stream([user_message("hi")])
    assert slots.in_use == 1
    text = "".join(chunk.content for chunk in reader)
    assert text == "one two three"
    assert slots.in_use == 0


def test_a_stream_closed_early_gives_its_slot_back(server: FakeOpenAIServer) -> None:
    slots = ConcurrencyLimit(1)
    server.queue(Reply("one two three", chunks=3))
    model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="k", concurrency=slots)
    reader = model.stream([user_message("hi")])
    reader.recv()
    reader.close()
    assert slots.in_use == 0


def test_a_failed_attempt_gives_its_slot_back_before_the_retry(server: FakeOpenAIServer) -> None:
    slots = ConcurrencyLimit(1)
    server.queue(Reply(status=503, error="busy", retry_after=0), Reply("fine"))
    model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="k", concurrency=slots)
    assert model.generate([user_message("hi")]).content == "fine"
    assert len(server.requests) == 2 and slots.in_use == 0


def test_a_tool_runs_no_more_calls_at_once_than_its_limit() -> None:
    condition = threading.Condition()
    state = {"now": 0, "most": 0}

    @tool(concurrency=ConcurrencyLimit(2))
    def lookup(key: str) -> str:
        """Look a key up."""
        with condition:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            condition.notify_all()
            condition.wait_for(lambda: state["now"] > 2, timeout=0.05)
            state["now"] -= 1
        return key.upper()

    calls = [call("lookup", {"key": f"k{n}"}, id=f"c{n}") for n in range(6)]
    from agentkit.models import ScriptedChatModel
    from agentkit.testing import calls_message

    model = ScriptedChatModel([calls_message(*calls), "all looked up"])
    waits = Waits()
    runner = Runner(ChatModelAgent("assistant", "answers", model, tools=[lookup]))
    with no_thread_leak(GUARD):
        result = runner.invoke("look them up", with_callbacks(waits))
    assert result.text == "all looked up"
    tool_results = [e.get_message().content for e in result.events[1:-1]]  # type: ignore[union-attr]
    assert sorted(tool_results) == [f"K{n}" for n in range(6)]
    assert state["most"] == 2
    assert lookup.concurrency is not None and lookup.concurrency.in_use == 0  # type: ignore[attr-defined]
    assert waits.seen and all(info.component == "Tool" for info, _ in waits.seen)
    assert {info.name for info, _ in waits.seen} == {"lookup"}


def test_a_streaming_tool_holds_its_slot_until_its_stream_ends() -> None:
    slots = ConcurrencyLimit(1)

    @tool(concurrency=slots)
    def count(n: int) -> Iterator[str]:
        """Count up to n."""
        for i in range(n):
            yield str(i)

    reader = count.stream('{"n": 3}')
    assert slots.in_use == 1
    assert "".join(reader) == "012"
    assert slots.in_use == 0
    reader = count.stream('{"n": 3}')
    reader.close()  # closed before it was read
    assert slots.in_use == 0


def test_a_tool_with_a_timeout_waits_no_longer_for_a_slot() -> None:
    slots = ConcurrencyLimit(1)

    @tool(concurrency=slots, timeout=0.2)
    def slow() -> str:
        """Never gets to run."""
        return "ran"

    with slots.acquire(), pytest.raises(SlotTimeoutError):
        slow.invoke("{}")
    assert slots.in_use == 0 and slots.waiting == 0


# --- RateLimit --------------------------------------------------------------------------------


def test_requests_past_the_allowance_wait_for_the_bucket_to_refill() -> None:
    rate = RateLimit(requests_per_minute=120)  # two a second, a minute's worth at once
    started = time.monotonic()
    for _ in range(120):
        assert rate.acquire().waited == 0.0
    grant = rate.acquire(timeout=GUARD)
    assert grant.waited > 0
    assert time.monotonic() - started >= 0.5  # 121 requests from a full bucket of 120


def test_a_rate_wait_that_cannot_end_in_time_fails_at_once() -> None:
    rate = RateLimit(requests_per_minute=1)
    rate.acquire()
    started = time.monotonic()
    with pytest.raises(SlotTimeoutError, match="would have to wait"):
        rate.acquire(timeout=30)
    assert time.monotonic() - started < 10  # it knew it would take a minute: no 30 s wait


def test_tokens_are_charged_by_estimate_and_settled_with_the_real_usage() -> None:
    rate = RateLimit(tokens_per_minute=6000)  # 100 tokens a second
    started = time.monotonic()
    grant = rate.acquire(tokens=6000)
    grant.settle(3000)  # used half: 3000 come back at once
    assert rate.acquire(tokens=3000).waited == 0.0
    assert rate.acquire(tokens=100, timeout=GUARD).waited > 0
    assert time.monotonic() - started >= 1.0  # 6100 tokens from a bucket of 6000


def test_a_call_larger_than_a_minute_of_tokens_waits_for_a_full_bucket_then_runs() -> None:
    rate = RateLimit(tokens_per_minute=600)
    assert rate.acquire(tokens=5000).waited == 0.0  # a full bucket admits it; now in debt
    with pytest.raises(SlotTimeoutError):
        rate.acquire(tokens=1, timeout=1.0)  # the debt takes minutes to pay


def test_a_429_with_retry_after_holds_back_every_thread_sharing_the_rate() -> None:
    lock = threading.Lock()
    arrivals: list[float] = []
    refused_at: list[float] = []

    def handler(request: dict[str, Any]) -> Reply:
        now = time.monotonic()
        with lock:
            if not refused_at:
                refused_at.append(now)
                return Reply(status=429, error="slow down", retry_after=1)
            arrivals.append(now)
        return Reply("ok")

    rate = RateLimit(requests_per_minute=10_000)
    waits = Waits()
    with FakeOpenAIServer(handler=handler) as fake:
        model = OpenAIChatModel("gpt-test", base_url=fake.base_url, api_key="k", rate_limit=rate)
        runner = Runner(ChatModelAgent("assistant", "answers", model))
        results: list[str] = []

        def ask() -> None:
            results.append(runner.invoke("hi", with_callbacks(waits)).text)

        first = threading.Thread(target=ask)
        first.start()
        eventually(lambda: rate.paused_for > 0)  # the 429 arrived: the whole rate is paused
        others = [threading.Thread(target=ask) for _ in range(19)]
        for thread in others:
            thread.start()
        for thread in [first, *others]:
            thread.join(GUARD)
        model.close()
    assert results == ["ok"] * 20
    assert len(arrivals) == 20  # the retry and the 19 others
    assert min(arrivals) >= refused_at[0] + 1.0  # nobody sent a request before Retry-After
    rate_waits = [wait for _, wait in waits.seen if wait.kind == "rate"]
    assert len(rate_waits) >= 19 and all(wait.limit is rate for wait in rate_waits)


def test_a_429_without_retry_after_pauses_the_rate_for_the_back_off(
    server: FakeOpenAIServer,
) -> None:
    rate = RateLimit(requests_per_minute=10_000)
    server.queue(Reply(status=429, error="slow down"), Reply("ok"))
    model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="k", rate_limit=rate)
    paused: list[float] = []
    original = rate.pause

    def watch(seconds: float) -> None:
        paused.append(seconds)
        original(seconds)

    rate.pause = watch  # type: ignore[method-assign]
    assert model.generate([user_message("hi")]).content == "ok"
    assert len(paused) == 1 and 0 < paused[0] <= OpenAIChatModel.retry_max_delay


def test_a_model_without_limits_never_enters_the_limit_code(server: FakeOpenAIServer) -> None:
    import cProfile
    import pstats

    server.queue(Reply("a"), Reply("b", chunks=2))
    model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="k")
    profile = cProfile.Profile()
    profile.enable()
    model.generate([user_message("hi")])
    "".join(chunk.content for chunk in model.stream([user_message("hi")]))
    profile.disable()
    called = {key[0] for key in pstats.Stats(profile).stats}  # type: ignore[attr-defined]
    limit_code = ("_http/_limits.py", "agentkit/throttle.py", "agentkit/_waiting.py")
    assert not [path for path in called if path.replace("\\", "/").endswith(limit_code)]


def test_opentelemetry_adds_the_wait_to_the_model_call_span(server: FakeOpenAIServer) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentkit.integrations.otel import OpenTelemetryHandler

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    slots = ConcurrencyLimit(1)
    server.queue(Reply("fine"))
    model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="k", concurrency=slots)
    runner = Runner(ChatModelAgent("assistant", "answers", model))
    held = slots.acquire()
    events = runner.query("hi", with_callbacks(OpenTelemetryHandler(tracer_provider=provider)))
    with queued_behind(slots):
        held.release()
    assert [event.get_message().content for event in events] == ["fine"]  # type: ignore[union-attr]
    chat = next(span for span in exporter.get_finished_spans() if span.name == "chat gpt-test")
    (event,) = chat.events
    assert event.name == "agentkit.limit_wait"
    assert event.attributes is not None
    assert event.attributes["agentkit.limit.kind"] == "concurrency"
    assert event.attributes["agentkit.limit"] == "ConcurrencyLimit(1)"
    assert float(event.attributes["agentkit.limit.wait_seconds"]) > 0  # type: ignore[arg-type]
