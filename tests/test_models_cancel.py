"""A cancel reaches an in-flight OpenAIChatModel call inside a real agent run.

Real Runner, ChatModelAgent and CancelHandle (or a closed event iterator) against a real
loopback server that misbehaves: silent before the first byte, rate limiting with a long
Retry-After, or trickling. Each run must end with exactly one AgentCancelledError event,
send no further request, and leave no thread behind. Waits use events; the time limits are
failure guards far below the model's 60 s timeout and the server's 30 s Retry-After.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    CancelHandle,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    StreamReader,
    stream_from_iterator,
    with_cancel,
)
from agentkit.models import ModelOptions, OpenAIChatModel
from agentkit.schema import ResponseMeta
from agentkit.testing import no_thread_leak
from tests.misbehaving_server import (
    Behaviour,
    RawServer,
    rate_limited,
    silent,
    sse_first_chunk_then_trickle,
    trickle_json,
)

GUARD = 10.0  # failure guard: far below the 60 s the model would otherwise wait


class Consumer:
    """Reads a run's events in a thread, recording them."""

    def __init__(self, events: Any, read_first_chunk: bool = False) -> None:
        self.events = events
        self.seen: list[AgentEvent] = []
        self.first_chunk = threading.Event()
        self.stream_errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(read_first_chunk,))
        self.thread.start()

    def _run(self, read_first_chunk: bool) -> None:
        for event in self.events:
            self.seen.append(event)
            output = event.output
            stream = (
                output.message_output.message_stream if output and output.message_output else None
            )
            if stream is not None and read_first_chunk:
                stream.recv()
                self.first_chunk.set()
                try:
                    list(stream)
                except BaseException as error:
                    self.stream_errors.append(error)

    def join(self) -> list[BaseException]:
        self.thread.join(GUARD)
        assert not self.thread.is_alive(), "the run did not end after the cancel"
        return [event.err for event in self.seen if event.err is not None]


def run_and_cancel(
    behaviour: Behaviour,
    streaming: bool,
    when: Callable[[RawServer, Consumer], None],
    close_iterator: bool = False,
    read_first_chunk: bool = False,
) -> tuple[list[BaseException], RawServer, Consumer]:
    with RawServer(behaviour) as server:
        with OpenAIChatModel("m", base_url=server.base_url, api_key="k", timeout=60) as model:
            agent = ChatModelAgent("assistant", "answers", model)
            handle = CancelHandle()
            with no_thread_leak(timeout=GUARD):
                events = Runner(agent, enable_streaming=streaming).query("hi", with_cancel(handle))
                consumer = Consumer(events, read_first_chunk)
                when(server, consumer)
                if close_iterator:
                    events.close()
                else:
                    handle.cancel()  # must not raise, whatever the run is doing
                    assert handle.wait(GUARD) is True
                errors = consumer.join()
        return errors, server, consumer


def after_request(server: RawServer, consumer: Consumer) -> None:
    server.wait_for_request()


def after_response(server: RawServer, consumer: Consumer) -> None:
    server.wait_for_request()
    assert server.responded.wait(GUARD)


def after_first_chunk(server: RawServer, consumer: Consumer) -> None:
    assert consumer.first_chunk.wait(GUARD)


def assert_one_cancel(errors: list[BaseException]) -> None:
    assert len(errors) == 1, errors
    assert isinstance(errors[0], AgentCancelledError), errors[0]


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("close_iterator", [False, True])
def test_cancel_while_waiting_for_the_first_byte(streaming: bool, close_iterator: bool) -> None:
    errors, server, _ = run_and_cancel(silent, streaming, after_request, close_iterator)
    if not close_iterator:  # a closed iterator delivers no more events
        assert_one_cancel(errors)
    assert server.request_count == 1


@pytest.mark.parametrize("streaming", [False, True])
def test_cancel_during_a_retry_after_backoff_sends_no_further_request(streaming: bool) -> None:
    errors, server, _ = run_and_cancel(rate_limited(30), streaming, after_response)
    assert_one_cancel(errors)
    assert server.request_count == 1


def test_cancel_while_a_non_streamed_body_trickles() -> None:
    errors, server, _ = run_and_cancel(trickle_json(0.05), False, after_response)
    assert_one_cancel(errors)
    assert server.request_count == 1


@pytest.mark.parametrize("close_iterator", [False, True])
def test_cancel_while_a_stream_trickles_ends_its_readers_with_the_cancel(
    close_iterator: bool,
) -> None:
    errors, server, consumer = run_and_cancel(
        sse_first_chunk_then_trickle(0.05),
        True,
        after_first_chunk,
        close_iterator,
        read_first_chunk=True,
    )
    if not close_iterator:
        assert_one_cancel(errors)
    # The reader of the message stream learns of the cancel, not of a broken server.
    assert [type(error) for error in consumer.stream_errors] == [AgentCancelledError]
    assert server.request_count == 1


class _GeneratorModel:
    """A model whose stream is a plain generator blocked until released."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        raise NotImplementedError

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        def chunks() -> Iterator[Message]:
            yield Message(Role.ASSISTANT, "Hel")
            self.inside.set()
            assert self.release.wait(GUARD)
            yield Message(Role.ASSISTANT, "lo", response_meta=ResponseMeta("stop"))

        return stream_from_iterator(chunks())


def test_cancel_never_raises_while_the_run_reads_a_generator_stream() -> None:
    model = _GeneratorModel()
    handle = CancelHandle()
    with no_thread_leak(timeout=GUARD):
        events = Runner(ChatModelAgent("a", "d", model), enable_streaming=True).query(
            "hi", with_cancel(handle)
        )
        consumer = Consumer(events)
        assert model.inside.wait(GUARD)
        handle.cancel()  # used to raise "generator already executing" here
        model.release.set()
        assert handle.wait(GUARD) is True
        errors = consumer.join()
    assert_one_cancel(errors)


def test_closing_a_stream_from_another_thread_aborts_the_blocked_read_outside_a_run() -> None:
    with (
        RawServer(sse_first_chunk_then_trickle(0.05)) as server,
        OpenAIChatModel("m", base_url=server.base_url, api_key="k", timeout=60) as model,
        no_thread_leak(timeout=GUARD),
    ):
        reader = model.stream([Message(Role.USER, "hi")])
        assert reader.recv().content == "Hel"
        errors: list[BaseException] = []

        def read() -> None:
            try:
                reader.recv()
            except BaseException as error:
                errors.append(error)

        thread = threading.Thread(target=read)
        thread.start()
        # Closing while the read may or may not have started: either way it must end now.
        reader.close()
        thread.join(GUARD)
        assert not thread.is_alive()
        assert len(errors) == 1
        assert isinstance(errors[0], (AgentCancelledError, EOFError)), errors[0]
