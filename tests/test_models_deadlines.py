"""Total deadlines of OpenAIChatModel against servers that trickle, keep alive or stay silent.

The per-read timeouts of httpx never fire against a server that sends a byte (or an SSE
comment) now and then; the model's ``timeout`` must still end the call. Each call runs in a
thread joined with a generous guard, so a regression fails the test instead of hanging it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from agentkit.errors import APITimeoutError
from agentkit.models import OpenAIChatModel
from agentkit.schema import user_message
from agentkit.testing import no_thread_leak
from tests.misbehaving_server import (
    RawServer,
    silent,
    sse_comments,
    sse_first_chunk_then_trickle,
    trickle_json,
)

TIMEOUT = 0.5
INTERVAL = 0.05  # far below TIMEOUT: every single read gets bytes in time
GUARD = 30.0  # failure guard only


def outcome(work: Callable[[], Any]) -> tuple[BaseException | None, float]:
    """Run ``work`` in a thread; return what it raised and how long it took."""
    result: list[BaseException | None] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:
            result.append(error)
        else:
            result.append(None)

    start = time.monotonic()
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(GUARD)
    assert not thread.is_alive(), f"the call was still running after {GUARD} s"
    return result[0], time.monotonic() - start


def make_model(server: RawServer, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "m", base_url=server.base_url, api_key="k", **{"timeout": TIMEOUT, **kwargs}
    )


def test_a_trickled_body_ends_generate_at_the_total_deadline() -> None:
    with RawServer(trickle_json(INTERVAL)) as server, make_model(server) as model:
        error, elapsed = outcome(lambda: model.generate([user_message("hi")]))
        assert isinstance(error, APITimeoutError), error
        assert elapsed >= TIMEOUT
        assert server.request_count == 1  # no time was left for a retry


def test_keep_alive_comments_do_not_keep_a_stream_from_timing_out_before_its_first_chunk() -> None:
    with RawServer(sse_comments(INTERVAL)) as server, make_model(server) as model:
        error, elapsed = outcome(lambda: model.stream([user_message("hi")]))
        assert isinstance(error, APITimeoutError), error
        assert elapsed >= TIMEOUT
        assert server.request_count == 1


def test_a_stream_that_trickles_after_its_first_chunk_times_out_in_the_reader() -> None:
    with RawServer(sse_first_chunk_then_trickle(INTERVAL)) as server, make_model(server) as model:
        reader = model.stream([user_message("hi")])
        assert reader.recv().content == "Hel"
        error, elapsed = outcome(lambda: list(reader))
        assert isinstance(error, APITimeoutError), error
        assert "stalled" in str(error)
        assert elapsed >= TIMEOUT * 0.5  # the clock started at the first chunk, not here


@pytest.mark.parametrize("streaming", [False, True])
def test_a_silent_server_ends_the_call_after_one_timeout(streaming: bool) -> None:
    with (
        no_thread_leak(),
        RawServer(silent) as server,
        make_model(server, max_retries=3) as model,
    ):
        call = model.stream if streaming else model.generate
        error, elapsed = outcome(lambda: call([user_message("hi")]))
        assert isinstance(error, APITimeoutError), error
        assert elapsed >= TIMEOUT
        assert server.request_count == 1


def test_the_deadline_is_checked_between_reads_with_a_client_of_the_callers() -> None:
    import httpx

    with (
        RawServer(sse_first_chunk_then_trickle(INTERVAL)) as server,
        httpx.Client() as client,
        make_model(server, http_client=client) as model,
    ):
        reader = model.stream([user_message("hi")])
        assert reader.recv().content == "Hel"
        error, _ = outcome(lambda: list(reader))
        assert isinstance(error, APITimeoutError), error
