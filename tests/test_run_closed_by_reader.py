"""A run its reader closed reports itself cancelled (issue 49, A5).

``it.close()`` or a ``break`` out of ``with runner.query(...) as it`` before the run ended
cancels the run; ``it.result()`` said ``status == "completed"``, no error, and the
tool-calling message as its text. It says ``"cancelled"`` with a
:class:`~agentkit.errors.RunClosedError` (an :class:`~agentkit.AgentCancelledError`) now; a
run that had ended before the close is still completed.
"""

from __future__ import annotations

import pickle
from collections.abc import Generator

import pytest

from agentkit import (
    AgentCancelledError,
    ChatModelAgent,
    Runner,
    cancellable_sleep,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import RunClosedError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak

GUARD = 30.0  # a failure guard, never a pace: the cancel wakes the sleep at once


@tool
def slow_lookup(query: str) -> str:
    """Looks something up, slowly (until the run is cancelled)."""
    cancellable_sleep(GUARD)
    return "found"


def _runner(store: InMemoryCheckPointStore | None = None) -> Runner:
    model = ScriptedChatModel(
        [calls_message(call("slow_lookup", {"query": "x"}, id="c1")), "the answer"]
    )
    agent = ChatModelAgent("looker", "looks up", model, tools=[slow_lookup])
    return Runner(agent, checkpoint_store=store)


def _assert_cancelled_by_reader(it: object) -> None:
    result = it.result(raise_errors=False)  # type: ignore[attr-defined]
    assert result.status == "cancelled"
    assert isinstance(result.error, RunClosedError)
    assert isinstance(result.error, AgentCancelledError)
    assert result.error.events_read == 1
    assert "cancelled by its reader" in str(result.error)
    assert "event iterator was closed after 1 event(s)" in str(result.error)
    with pytest.raises(RunClosedError):
        it.result()  # type: ignore[attr-defined]


def test_a_break_out_of_with_query_reports_the_run_cancelled() -> None:
    with no_thread_leak(), _runner().query("look it up") as it:
        for event in it:
            message = event.get_message()
            assert message is not None and message.tool_calls  # the tool-calling message
            break
    _assert_cancelled_by_reader(it)


def test_close_reports_the_run_cancelled_and_a_checkpoint_resumes_it() -> None:
    store = InMemoryCheckPointStore()
    with no_thread_leak():
        it = _runner(store).query("look it up", with_checkpoint_id("closed"))
        next(it)
        it.close()
    _assert_cancelled_by_reader(it)
    result = it.result(raise_errors=False)
    assert result.checkpoint_id == "closed"  # saved as a cancelled run is


def test_a_run_read_to_its_end_then_closed_is_completed() -> None:
    model = ScriptedChatModel(["hello"])
    with Runner(ChatModelAgent("a", "d", model)).query("hi") as it:
        events = list(it)
    assert len(events) == 1
    result = it.result()
    assert (result.status, result.error, result.text) == ("completed", None, "hello")


def test_a_run_that_ended_before_its_reader_closed_it_is_completed() -> None:
    # The reader took the answer and left before reading the end: nothing was cancelled.
    model = ScriptedChatModel(["hello"])
    with Runner(ChatModelAgent("a", "d", model)).query("hi") as it:
        for _ in it:
            break
    result = it.result()
    assert (result.status, result.error, result.text) == ("completed", None, "hello")


def test_a_cancelled_run_is_cancelled_in_its_status_not_failed() -> None:
    from agentkit import CancelHandle, CancelMode, with_cancel

    handle = CancelHandle()
    model = ScriptedChatModel([calls_message(call("slow_lookup", {"query": "x"}, id="c1"))])
    runner = Runner(ChatModelAgent("looker", "looks up", model, tools=[slow_lookup]))
    with runner.query("look", with_cancel(handle)) as it:
        next(it)
        handle.cancel(CancelMode.IMMEDIATE)
        result = it.result(raise_errors=False)
    assert result.status == "cancelled"
    assert isinstance(result.error, AgentCancelledError)
    assert not isinstance(result.error, RunClosedError)  # a handle's cancel, not the reader's


def test_run_closed_error_pickles_with_its_fields() -> None:
    error = RunClosedError(None, False, events_read=3)
    loaded = pickle.loads(pickle.dumps(error))
    assert type(loaded) is RunClosedError and loaded.events_read == 3
    assert str(loaded) == str(error)


def test_an_sse_response_its_client_left_reports_the_run_cancelled() -> None:
    from agentkit.integrations.flask import sse_events

    with no_thread_leak():
        events = _runner().query("look it up")
        frames = sse_events(events)
        assert isinstance(frames, Generator)
        first = next(frames)
        assert first.startswith("event: agent")
        frames.close()  # the client went away: the server closes the response's generator
    result = events.result(raise_errors=False)
    assert result.status == "cancelled" and isinstance(result.error, RunClosedError)
