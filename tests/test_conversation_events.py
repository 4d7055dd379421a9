"""Conversations as events and their rollback (Eino v0.10's ``SessionEventStore`` and
``RollbackSession``). The conformance suite runs the common checks on every store
(``test_conversation_stores.py``); here: agents and run paths, turn keys, the append-only log."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentkit import (
    ChatModelAgent,
    ConversationBusyError,
    Runner,
    set_sub_agents,
    with_conversation_id,
)
from agentkit.conversation import (
    FileConversationStore,
    InMemoryConversationStore,
    load_events,
    rollback,
)
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message


def test_events_name_the_agent_and_run_path_of_each_message() -> None:
    helper = ChatModelAgent("Helper", "answers", ScriptedChatModel(["from the helper"]))
    front = set_sub_agents(ChatModelAgent(
        "Front", "routes",
        ScriptedChatModel([calls_message(call("transfer_to_agent", {"agent_name": "Helper"}))]),
    ), [helper])
    store = InMemoryConversationStore()
    Runner(front, conversation_store=store).invoke("hi", with_conversation_id("c"))
    events = [(e.turn, e.message.role.value, e.agent_name, e.run_path)
              for e in load_events(store, "c")]
    assert events[0] == (0, "user", "", ())
    assert events[-1] == (0, "assistant", "Helper", ("Front", "Helper"))
    assert {e[2] for e in events[1:]} == {"Front", "Helper"}


def test_a_rolled_back_keyed_turn_runs_again_when_repeated() -> None:
    model = ScriptedChatModel(["first answer", "second answer"])
    store = InMemoryConversationStore()
    runner = Runner(ChatModelAgent("A", "d", model), conversation_store=store)
    options = with_conversation_id("c", turn_key="k1")
    assert runner.invoke("question", options).text == "first answer"
    assert runner.invoke("question", options).text == "first answer"  # the recorded turn
    rollback(store, "c", keep_turns=0)
    assert store.load("c") == []
    assert runner.invoke("question", options).text == "second answer"
    assert len(model.calls) == 2


def test_rollback_appends_a_marker_and_the_log_keeps_what_was_rolled_back(tmp_path: Path) -> None:
    store = FileConversationStore(tmp_path)
    runner = Runner(ChatModelAgent("A", "d", ScriptedChatModel(["one", "two"])),
                    conversation_store=store)
    runner.invoke("first", with_conversation_id("c"))
    runner.invoke("second", with_conversation_id("c"))
    [log] = list(tmp_path.rglob("*.jsonl"))
    before = log.read_bytes()
    rollback(store, "c", keep_turns=1)
    after = log.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    assert [m.content for m in store.load("c")] == ["first", "one"]
    # a store opened afresh (another process) reads the same
    assert [m.content for m in FileConversationStore(tmp_path).load("c")] == ["first", "one"]


def test_rollback_says_what_it_cannot_do() -> None:
    store = InMemoryConversationStore()
    Runner(ChatModelAgent("A", "d", ScriptedChatModel(["one"])), conversation_store=store
           ).invoke("first", with_conversation_id("c"))
    with pytest.raises(ValueError, match="it has 1; pass keep_turns from 0 to 1"):
        rollback(store, "c", keep_turns=2)
    with pytest.raises(ValueError, match="0 or more"):
        rollback(store, "c", keep_turns=-1)
    lock = store.lock("c")
    try:
        with pytest.raises(ConversationBusyError):
            rollback(store, "c", keep_turns=0)
    finally:
        lock.release()
    rollback(store, "c", keep_turns=1)  # nothing to roll back: nothing appended
    assert len(store.load("c")) == 2
