"""Test doubles and checks for agentkit applications, the ones agentkit tests itself with.

Like ``httpx.MockTransport``, these are public so applications can test their agents the way
agentkit does:

* :class:`~agentkit.models.ScriptedChatModel` replies from a script; :func:`call` and
  :func:`calls_message` build the tool calls it replies with.
* :func:`run_events` drains a run's events and fails if the run leaves a thread behind
  (:func:`no_thread_leak`); :func:`summarize` turns events into tuples to compare.
* :class:`FakeOpenAIServer` is a loopback OpenAI-compatible HTTP server, scripted with
  :class:`Reply`, to test :class:`~agentkit.models.OpenAIChatModel` and whole agents over real HTTP,
  failures included (error statuses, cut streams, slow answers).
  :class:`FakeAnthropicServer` does the same for :class:`~agentkit.models.AnthropicChatModel`
  (Anthropic's Messages API: its stream events, error shapes, thinking signatures and a
  simulated prompt cache); :class:`FakeGeminiServer` for
  :class:`~agentkit.models.GeminiChatModel` (function calls and their thought signatures);
  :class:`FakeResponsesServer` for :class:`~agentkit.models.OpenAIResponsesModel`
  (reasoning items, ``previous_response_id``).
* :func:`cassette` wraps a model to record its calls to a file (JSON or YAML) and replay
  them offline; a replayed call that differs from the recording raises
  :class:`CassetteMismatchError` with a diff. The pytest fixture ``model_cassette`` (in
  :mod:`agentkit.testing.pytest_plugin`) makes it one line per test.
* :class:`ManualClock` is a :class:`Clock` a test moves by hand: give it to a store
  (``clock=``) to wait out a lease or a TTL without sleeping.
* :func:`check_checkpoint_store` runs the conformance suite against your own checkpoint
  store (data, leases, step records); a broken store raises :class:`StoreConformanceError`,
  also under ``python -O``.
  (Conversation stores have theirs in :mod:`agentkit.conversation.conformance`.)

Example::

    from agentkit import ChatModelAgent, Runner
    from agentkit.models import ScriptedChatModel
    from agentkit.testing import call, calls_message, run_events, summarize

    model = ScriptedChatModel([calls_message(call("get_weather", {"city": "Paris"})), "Sunny."])
    events = run_events(Runner(ChatModelAgent("a", "d", model, tools=[get_weather])).query("hi"))
    assert summarize(events[-1]) == ("a", ["a"], "assistant", "Sunny.", None)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._clock import Clock
from agentkit._lazy import attach
from agentkit.testing._anthropic_server import FakeAnthropicServer
from agentkit.testing._cassette import Cassette, cassette
from agentkit.testing._checkpoint_checks import STORE_CHECKS, UNUSUAL_IDS
from agentkit.testing._checkpoint_suite import ALL_CHECKS, check_checkpoint_store
from agentkit.testing._clock import ManualClock
from agentkit.testing._errors import (
    CassetteError,
    CassetteMismatchError,
    CassetteUnplayedError,
    StoreConformanceError,
    ThreadLeakError,
)
from agentkit.testing._events import run_events, summarize
from agentkit.testing._gemini_server import FakeGeminiServer
from agentkit.testing._lease_checks import LEASE_CHECKS
from agentkit.testing._messages import call, calls_message
from agentkit.testing._openai_replies import Reply
from agentkit.testing._openai_server import FakeOpenAIServer
from agentkit.testing._responses_server import FakeResponsesServer
from agentkit.testing._step_checks import STEP_CHECKS
from agentkit.testing._store_support import StoreCheck, StoreFactory
from agentkit.testing._threads import no_thread_leak

__all__ = [
    "Clock",
    "ManualClock",
    "ALL_CHECKS",
    "Cassette",
    "CassetteError",
    "CassetteMismatchError",
    "CassetteUnplayedError",
    "FakeAnthropicServer",
    "FakeGeminiServer",
    "FakeOpenAIServer",
    "FakeResponsesServer",
    "LEASE_CHECKS",
    "Reply",
    "STEP_CHECKS",
    "STORE_CHECKS",
    "StoreCheck",
    "StoreConformanceError",
    "StoreFactory",
    "ThreadLeakError",
    "UNUSUAL_IDS",
    "call",
    "calls_message",
    "cassette",
    "check_checkpoint_store",
    "no_thread_leak",
    "run_events",
    "summarize",
]

# Objects defined here present themselves as ``agentkit.testing.X`` in reprs and tracebacks
# (the scripted model keeps its own public name, ``agentkit.models.scripted.X``).
for _obj in (
    Cassette,
    Clock,
    ManualClock,
    CassetteError,
    CassetteMismatchError,
    CassetteUnplayedError,
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeOpenAIServer,
    FakeResponsesServer,
    Reply,
    StoreConformanceError,
    ThreadLeakError,
    call,
    calls_message,
    cassette,
    check_checkpoint_store,
    no_thread_leak,
    run_events,
    summarize,
):
    _obj.__module__ = __name__
del _obj

if not TYPE_CHECKING:  # dir() lists the API only (not this module's imports)
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "ModelCall": "agentkit.models.ModelCall",
            "ScriptedChatModel": "agentkit.models.ScriptedChatModel",
        },
    )
