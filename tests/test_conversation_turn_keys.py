"""Duplicate conversation turns: a turn sent again with the same key does not run twice.

Whole runs through a Runner with each conversation store (memory, file, SQLite, Redis), a
second process for the cross-process case, and an interrupted turn resumed before its repeat.
The model and the tool count their calls, so a turn that ran twice would show.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    ChatModelAgent,
    ConversationBusyError,
    Message,
    Role,
    Runner,
    interrupt,
    tool,
    with_checkpoint_id,
    with_conversation_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.conversation import (
    FileConversationStore,
    InMemoryConversationStore,
    RedisConversationStore,
    SQLiteConversationStore,
)
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

ROOT = Path(__file__).resolve().parent.parent
GUARD = 60.0


@pytest.fixture(params=["memory", "file", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    kind = request.param
    if kind == "memory":
        yield InMemoryConversationStore()
    elif kind == "file":
        yield FileConversationStore(tmp_path / "conversations")
    elif kind == "sqlite":
        sqlite = SQLiteConversationStore(tmp_path / "conversations.sqlite3")
        yield sqlite
        sqlite.close()
    else:
        remote = RedisConversationStore(
            request.getfixturevalue("redis_url"), prefix=f"test:{request.node.name}:"
        )
        yield remote
        remote.close()


def weather_agent() -> tuple[ChatModelAgent, list[str]]:
    """An agent that looks the weather up with a tool that records each call."""
    looked_up: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Get the weather of a city."""
        looked_up.append(city)
        return f"sunny in {city}"

    def script(messages: list[Message]) -> Message | str:
        last = messages[-1]
        if last.role is Role.USER:
            return calls_message(call("get_weather", {"city": last.content}))
        return f"It is {last.content}."

    return ChatModelAgent("forecaster", "d", ScriptedChatModel(script), tools=[get_weather]), looked_up


def test_a_repeated_turn_returns_the_first_turns_result_and_runs_nothing(store: Any) -> None:
    agent, looked_up = weather_agent()
    runner = Runner(agent, conversation_store=store)
    first = runner.invoke("Oslo", with_conversation_id("c1", turn_key="request-1"))
    assert first.text == "It is sunny in Oslo."
    stored = store.load("c1")
    with no_thread_leak(GUARD):
        again = runner.invoke("Oslo", with_conversation_id("c1", turn_key="request-1"))
    assert again.text == first.text
    assert looked_up == ["Oslo"]  # the tool ran once
    assert store.load("c1") == stored  # nothing appended
    assert [(e.agent_name, [str(s) for s in e.run_path]) for e in again.events] == [
        (e.agent_name, [str(s) for s in e.run_path]) for e in first.events
    ]
    assert [e.get_message() for e in again.events] == [e.get_message() for e in first.events]
    assert again.usage.total_tokens == 0  # no model was called
    # Another key is another turn, which sees the first in its history.
    assert runner.invoke("Rome", with_conversation_id("c1", turn_key="request-2")).text == (
        "It is sunny in Rome."
    )
    assert looked_up == ["Oslo", "Rome"]
    assert store.load("c1")[0].extra["agentkit_turn"]["key"] == "request-1"


def test_a_repeated_turn_streams_like_the_first_when_the_runner_streams() -> None:
    agent, looked_up = weather_agent()
    runner = Runner(agent, conversation_store=InMemoryConversationStore(), enable_streaming=True)
    first = runner.invoke("Paris", with_conversation_id("c", turn_key="k"))
    with runner.query("Paris", with_conversation_id("c", turn_key="k")) as events:
        again = list(events)
    variants = [e.output.message_output for e in again if e.output is not None]
    assert [v is not None and v.is_streaming for v in variants] == [True] * 3
    assert "".join(c.content for c in again[-1].output.message_output.message_stream) == (  # type: ignore[union-attr]
        first.text
    )
    assert looked_up == ["Paris"]


def test_a_repeat_while_the_first_turn_runs_is_busy_then_gets_its_result() -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def slow(city: str) -> str:
        """Slow."""
        started.set()
        release.wait(GUARD)
        return city

    model = ScriptedChatModel(
        lambda messages: calls_message(call("slow", {"city": "x"}))
        if messages[-1].role is Role.USER
        else "finished"
    )
    runner = Runner(
        ChatModelAgent("a", "d", model, tools=[slow]), conversation_store=InMemoryConversationStore()
    )
    events = runner.query("go", with_conversation_id("c", turn_key="k"))
    assert started.wait(GUARD)
    with pytest.raises(ConversationBusyError):
        runner.invoke("go", with_conversation_id("c", turn_key="k"))
    release.set()
    assert list(events)[-1].get_message().content == "finished"  # type: ignore[union-attr]
    assert runner.invoke("go", with_conversation_id("c", turn_key="k")).text == "finished"
    assert len(model.calls) == 2


def test_an_interrupted_turn_is_recognised_once_its_resumed_run_completed() -> None:
    approvals: list[bool] = []

    @tool
    def pay(amount: int) -> str:
        """Pay."""
        approvals.append(bool(interrupt("pay?")))
        return f"paid {amount}"

    model = ScriptedChatModel(
        lambda messages: calls_message(call("pay", {"amount": 5}))
        if messages[-1].role is Role.USER
        else messages[-1].content
    )
    store = InMemoryConversationStore()
    runner = Runner(
        ChatModelAgent("payer", "d", model, tools=[pay]),
        conversation_store=store,
        checkpoint_store=InMemoryCheckPointStore(),
    )
    paused = runner.invoke(
        "pay 5", with_conversation_id("c", turn_key="pay-1"), with_checkpoint_id("run-1")
    )
    assert paused.interrupted
    target = paused.interrupt.contexts[0].id  # type: ignore[union-attr]
    assert runner.resume("run-1", targets={target: True}).result().text == "paid 5"
    repeat = runner.invoke("pay 5", with_conversation_id("c", turn_key="pay-1"))
    assert repeat.text == "paid 5"
    assert approvals == [True]  # paid once


def test_a_turn_key_needs_a_message_and_a_sane_value() -> None:
    runner = Runner(
        ChatModelAgent("a", "d", ScriptedChatModel(["hi"])),
        conversation_store=InMemoryConversationStore(),
    )
    with pytest.raises(ValueError, match="at least one message"):
        runner.run([], with_conversation_id("c", turn_key="k"))
    with pytest.raises(ValueError, match="turn key must be a string of 1 to 256"):
        with_conversation_id("c", turn_key="")
    with pytest.raises(ValueError, match="turn key"):
        with_conversation_id("c", turn_key="k" * 257)


def test_history_sent_again_as_new_messages_does_not_carry_old_turn_keys() -> None:
    store = InMemoryConversationStore()
    agent, looked_up = weather_agent()
    runner = Runner(agent, conversation_store=store)
    runner.invoke("Oslo", with_conversation_id("a", turn_key="k"))
    copied = store.load("a")[:1]  # the keyed first message, sent to another conversation
    result = runner.run(copied, with_conversation_id("b")).result()
    assert result.text == "It is sunny in Oslo."
    # (every turn's first message records the turn; this one's has no key)
    assert "key" not in store.load("b")[0].extra["agentkit_turn"]
    assert looked_up == ["Oslo", "Oslo"]


REPEAT = """
import sys
from agentkit import ChatModelAgent, Runner, with_conversation_id
from agentkit.conversation import SQLiteConversationStore
from agentkit.models import ScriptedChatModel
store = SQLiteConversationStore(sys.argv[1])
model = ScriptedChatModel(["a second answer"])
result = Runner(ChatModelAgent("forecaster", "d", model), conversation_store=store).invoke(
    "Oslo", with_conversation_id("c", turn_key="request-1"))
print(result.text, len(model.calls))
"""


def test_a_repeat_from_another_process_gets_the_first_answer(tmp_path: Path) -> None:
    path = tmp_path / "conversations.sqlite3"
    store = SQLiteConversationStore(path)
    agent, _ = weather_agent()
    Runner(agent, conversation_store=store).invoke(
        "Oslo", with_conversation_id("c", turn_key="request-1")
    )
    store.close()
    done = subprocess.run(
        [sys.executable, "-c", REPEAT, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "It is sunny in Oslo. 0"


def test_an_unreadable_turn_record_lets_the_turn_run_again(caplog: pytest.LogCaptureFixture) -> None:
    store = InMemoryConversationStore()
    runner = Runner(
        ChatModelAgent("a", "d", ScriptedChatModel(["first", "second"])), conversation_store=store
    )
    runner.invoke("hi", with_conversation_id("c", turn_key="k"))
    history = store.load("c")
    broken = [
        Message(history[0].role, history[0].content, extra={"agentkit_turn": {"key": "k",
                                                                              "records": "x"}}),
        *history[1:],
    ]
    store.delete("c")
    store.append("c", broken)
    assert runner.invoke("hi", with_conversation_id("c", turn_key="k")).text == "second"
    assert "is unreadable" in caplog.text
