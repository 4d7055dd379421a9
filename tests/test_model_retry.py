"""Model retry on rejected output and failover to other models, over real HTTP.

Each test runs an agent on :class:`OpenAIChatModel` clients talking to loopback
:class:`FakeOpenAIServer` instances, so retries and failovers are real requests.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from agentkit import (
    AgentCancelledError,
    APIStatusError,
    BadRequestError,
    CancelHandle,
    ChatModelAgent,
    Message,
    ModelRetryConfig,
    RetryExhaustedError,
    Role,
    Runner,
    SequentialAgent,
    WillRetryError,
    tool,
    with_cancel,
)
from agentkit.errors import AgentConfigError
from agentkit.models import FailoverChatModel, OpenAIChatModel
from agentkit.models.failover import FailoverChoice, FailoverContext
from agentkit.testing import FakeOpenAIServer, Reply, call, summarize

GUARD = 30.0


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def backup() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def client(server: FakeOpenAIServer, name: str = "gpt-test") -> OpenAIChatModel:
    # No HTTP-level retries: every failure the server scripts reaches the agent.
    return OpenAIChatModel(name, base_url=server.base_url, api_key="sk-test", max_retries=0)


def empty_is_rejected(output: Message | None, error: BaseException | None) -> bool:
    return error is not None or (output is not None and not output.content.strip())


def no_wait(attempt: int) -> float:
    return 0.0


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
def test_a_rejected_output_is_asked_for_again(
    server: FakeOpenAIServer, streaming: bool, caplog: pytest.LogCaptureFixture
) -> None:
    server.queue(Reply("   "), Reply("the real answer"))
    retry = ModelRetryConfig(max_retries=2, should_retry=empty_is_rejected, backoff=no_wait)
    agent = ChatModelAgent("a", "d", client(server), model_retry=retry)
    with caplog.at_level(logging.INFO, logger="agentkit"):
        events = list(Runner(agent, enable_streaming=streaming).query("hi"))
    assert len(server.requests) == 2
    assert server.requests[0]["messages"] == server.requests[1]["messages"]
    if streaming:  # every attempt is streamed as it comes; the rejected one ends with an error
        assert len(events) == 2
        variant = events[0].output.message_output  # type: ignore[union-attr]
        assert variant is not None and variant.message_stream is not None
        chunks = []
        with pytest.raises(WillRetryError, match="rejected by should_retry at attempt 1"):
            for chunk in variant.message_stream:
                chunks.append(chunk.content)
        assert "".join(chunks) == "   "
        assert summarize(events[1])[2:4] == ("assistant", "the real answer")
    else:  # only the accepted reply is emitted
        assert [summarize(e)[2:4] for e in events] == [("assistant", "the real answer")]
    assert all(e.err is None for e in events)
    assert any(
        "agent 'a' retries its model call (retry 1 of 2" in r.getMessage() for r in caplog.records
    )


def test_a_rejected_streamed_reply_stays_out_of_the_next_agents_history(
    server: FakeOpenAIServer, backup: FakeOpenAIServer
) -> None:
    server.queue(Reply(""), Reply("draft ready"))
    backup.queue(Reply("reviewed"))
    retry = ModelRetryConfig(max_retries=1, should_retry=empty_is_rejected, backoff=no_wait)
    writer = ChatModelAgent("writer", "d", client(server), model_retry=retry)
    reviewer = ChatModelAgent("reviewer", "d", client(backup))
    runner = Runner(SequentialAgent("flow", "d", [writer, reviewer]), enable_streaming=True)
    events = list(runner.query("hi"))
    assert events[-1].err is None
    sent = backup.requests[0]["messages"]
    assert [m["content"] for m in sent] == ["hi", "For context: [writer] said: draft ready."]


def test_retries_run_out_with_retry_exhausted_error(server: FakeOpenAIServer) -> None:
    server.queue(Reply(""), Reply(""))
    retry = ModelRetryConfig(max_retries=1, should_retry=empty_is_rejected, backoff=no_wait)
    agent = ChatModelAgent("a", "d", client(server), model_retry=retry)
    events = list(Runner(agent).query("hi"))
    error = events[-1].err
    assert isinstance(error, RetryExhaustedError)
    assert "failed 2 times (model_retry allows 1 retries)" in str(error)
    assert "rejected by should_retry at attempt 2" in str(error)
    assert len(server.requests) == 2


def test_by_default_failed_calls_are_retried_and_the_error_is_the_cause(
    server: FakeOpenAIServer,
) -> None:
    server.queue(Reply(status=500, error="boom"), Reply("recovered"))
    agent = ChatModelAgent(
        "a", "d", client(server), model_retry=ModelRetryConfig(max_retries=1, backoff=no_wait)
    )
    events = list(Runner(agent).query("hi"))
    assert [summarize(e)[2:4] for e in events] == [("assistant", "recovered")]

    server.queue(Reply(status=500, error="boom"), Reply(status=500, error="still"))
    events = list(Runner(agent).query("hi"))
    error = events[-1].err
    assert isinstance(error, RetryExhaustedError)
    assert isinstance(error.__cause__, APIStatusError)


def test_a_cancel_wakes_the_backoff_wait(server: FakeOpenAIServer) -> None:
    waiting = threading.Event()

    def long_wait(attempt: int) -> float:
        waiting.set()
        return GUARD * 10

    server.queue(Reply(""))
    retry = ModelRetryConfig(max_retries=3, should_retry=empty_is_rejected, backoff=long_wait)
    handle = CancelHandle()
    agent = ChatModelAgent("a", "d", client(server), model_retry=retry)
    events_iter = Runner(agent).query("hi", with_cancel(handle))
    assert waiting.wait(GUARD)
    handle.cancel()
    events = list(events_iter)
    assert isinstance(events[-1].err, AgentCancelledError)
    assert len(server.requests) == 1


def test_model_retry_must_be_a_config() -> None:
    with pytest.raises(AgentConfigError, match="max_retries must be an int >= 0"):
        ModelRetryConfig(max_retries=-1)
    with pytest.raises(AgentConfigError, match="model_retry must be a ModelRetryConfig"):
        ChatModelAgent("a", "d", object(), model_retry=3)  # type: ignore[arg-type]


# --- failover --------------------------------------------------------------------------------


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.mark.parametrize("streaming", [False, True], ids=["invoke", "stream"])
def test_failover_answers_with_the_next_model_and_keeps_using_it(
    server: FakeOpenAIServer,
    backup: FakeOpenAIServer,
    streaming: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.queue(Reply(status=503, error="overloaded"))
    backup.queue(Reply(tool_calls=[call("add", '{"a": 1, "b": 2}')]), Reply("3"))
    model = FailoverChatModel([client(server, "primary"), client(backup, "secondary")])
    agent = ChatModelAgent("a", "d", model, tools=[add])
    with caplog.at_level(logging.INFO, logger="agentkit"):
        events = list(Runner(agent, enable_streaming=streaming).query("hi"))
    assert [summarize(e)[2:4] for e in events] == [
        ("assistant", ""), ("tool/add", "3"), ("assistant", "3"),
    ]
    # the primary failed once; the second model call went straight to the backup
    assert [r["model"] for r in server.requests] == ["primary"]
    assert [r["model"] for r in backup.requests] == ["secondary", "secondary"]
    assert [t["function"]["name"] for t in backup.requests[0]["tools"]] == ["add"]
    assert backup.requests[1]["messages"][-1]["role"] == Role.TOOL.value
    assert any("failing over to" in r.getMessage() for r in caplog.records)


def test_should_failover_decides_which_errors_fail_over(
    server: FakeOpenAIServer, backup: FakeOpenAIServer
) -> None:
    server.queue(Reply(status=400, error="bad request"))
    model = FailoverChatModel(
        [client(server), client(backup)],
        should_failover=lambda error: not isinstance(error, BadRequestError),
    )
    events = list(Runner(ChatModelAgent("a", "d", model)).query("hi"))
    assert isinstance(events[-1].err, BadRequestError)
    assert backup.requests == []


def test_when_every_model_fails_the_last_error_is_raised(
    server: FakeOpenAIServer, backup: FakeOpenAIServer
) -> None:
    server.queue(Reply(status=500, error="first down"))
    backup.queue(Reply(status=503, error="second down"))
    model = FailoverChatModel([client(server), client(backup)])
    events = list(Runner(ChatModelAgent("a", "d", model)).query("hi"))
    assert isinstance(events[-1].err, APIStatusError)
    assert "second down" in str(events[-1].err)


def test_retry_and_failover_compose(server: FakeOpenAIServer, backup: FakeOpenAIServer) -> None:
    # primary fails, the backup's first answer is rejected, the retry fails over again and
    # the backup (now preferred) answers.
    server.queue(Reply(status=500, error="down"))
    backup.queue(Reply(""), Reply("good"))
    model = FailoverChatModel([client(server), client(backup)])
    retry = ModelRetryConfig(max_retries=2, should_retry=empty_is_rejected, backoff=no_wait)
    events = list(Runner(ChatModelAgent("a", "d", model, model_retry=retry)).query("hi"))
    assert [summarize(e)[2:4] for e in events] == [("assistant", "good")]
    assert len(server.requests) == 1
    assert len(backup.requests) == 2


def test_failover_needs_a_model() -> None:
    with pytest.raises(AgentConfigError, match="at least one model"):
        FailoverChatModel([])


# --- failover choosing the next model (Eino: ModelFailoverConfig.GetFailoverModel) -----------


def test_failover_model_wrapper_generate_failover_to_second_model(
    server: FakeOpenAIServer, backup: FakeOpenAIServer
) -> None:
    server.queue(Reply(status=503, error="overloaded"), Reply("primary again"))
    backup.queue(Reply(tool_calls=[call("add", '{"a": 1, "b": 2}')]), Reply("3"))
    primary, secondary = client(server, "primary"), client(backup, "secondary")
    seen: list[FailoverContext] = []

    def choose(context: FailoverContext) -> object:
        seen.append(context)
        return secondary

    model = FailoverChatModel([primary], choose_model=choose, max_failovers=1)
    agent = ChatModelAgent("a", "d", model, tools=[add])
    events = list(Runner(agent).query("hi"))
    assert [summarize(e)[2:4] for e in events] == [
        ("assistant", ""), ("tool/add", "3"), ("assistant", "3"),
    ]
    (context,) = seen
    assert (context.attempt, context.failed_model) == (1, primary)
    assert isinstance(context.error, APIStatusError) and "overloaded" in str(context.error)
    assert [m.content for m in context.input_messages] == ["hi"]
    # The chosen model got the agent's tools; it answered, so the next call went to it first.
    assert [t["function"]["name"] for t in backup.requests[0]["tools"]] == ["add"]
    assert len(server.requests) == 1 and len(backup.requests) == 2


def test_failover_choice_gives_the_chosen_model_its_own_input(
    server: FakeOpenAIServer, backup: FakeOpenAIServer
) -> None:
    server.queue(Reply(status=400, error="context length exceeded"))
    backup.queue(Reply("short answer"))
    small = client(backup, "small")

    def choose(context: FailoverContext) -> FailoverChoice:
        return FailoverChoice(small, [Message(Role.USER, "hi (shortened)")])

    model = FailoverChatModel([client(server)], choose_model=choose, max_failovers=1)
    events = list(Runner(ChatModelAgent("a", "d", model)).query("hi"))
    assert events[-1].get_message().content == "short answer"  # type: ignore[union-attr]
    assert backup.requests[0]["messages"][-1]["content"] == "hi (shortened)"


def test_failover_model_wrapper_stops_when_get_failover_model_returns_nil_model(
    server: FakeOpenAIServer,
) -> None:
    server.queue(Reply(status=500, error="down"))
    model = FailoverChatModel([client(server)], choose_model=lambda c: None, max_failovers=3)
    events = list(Runner(ChatModelAgent("a", "d", model)).query("hi"))
    assert isinstance(events[-1].err, APIStatusError) and "down" in str(events[-1].err)


def test_failover_model_wrapper_stops_when_get_failover_model_returns_error(
    server: FakeOpenAIServer,
) -> None:
    server.queue(Reply(status=500, error="down"))

    class NoBackup(AgentConfigError):
        pass

    def choose(context: FailoverContext) -> object:
        raise NoBackup("no backup model for this tenant")

    model = FailoverChatModel([client(server)], choose_model=choose, max_failovers=3)
    events = list(Runner(ChatModelAgent("a", "d", model)).query("hi"))
    assert isinstance(events[-1].err, NoBackup)


def test_failover_attempts_are_bounded_by_max_failovers(
    server: FakeOpenAIServer, backup: FakeOpenAIServer
) -> None:
    backup.queue(*[Reply(status=503, error=f"busy {n}") for n in range(3)])
    attempts: list[int] = []

    def choose(context: FailoverContext) -> object:
        attempts.append(context.attempt)
        return client(backup)

    server.queue(Reply(status=503, error="busy"))
    model = FailoverChatModel([client(server)], choose_model=choose, max_failovers=2)
    events = list(Runner(ChatModelAgent("a", "d", model)).query("hi"))
    assert attempts == [1, 2]
    assert len(backup.requests) == 2
    assert "busy 1" in str(events[-1].err)


def test_failover_with_a_list_is_bounded_by_max_failovers(
    server: FakeOpenAIServer, backup: FakeOpenAIServer
) -> None:
    server.queue(Reply(status=503, error="busy"))
    model = FailoverChatModel([client(server), client(backup)], max_failovers=0)
    events = list(Runner(ChatModelAgent("a", "d", model)).query("hi"))
    assert backup.requests == [] and "busy" in str(events[-1].err)


def test_choose_model_needs_max_failovers_and_a_model() -> None:
    with pytest.raises(AgentConfigError, match="needs max_failovers"):
        FailoverChatModel([object()], choose_model=lambda c: None)
    with pytest.raises(AgentConfigError, match="max_failovers must be an int >= 0"):
        FailoverChatModel([object()], max_failovers=-1)
