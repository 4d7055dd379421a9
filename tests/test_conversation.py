"""Conversations through whole runs: memory across turns, busy turns, interrupts, processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    ChatModelAgent,
    ConversationBusyError,
    Message,
    Role,
    Runner,
    SequentialAgent,
    interrupt,
    tool,
    with_checkpoint_id,
    with_conversation_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.conversation import InMemoryConversationStore, keep_last_turns
from agentkit.models import OpenAIChatModel, ScriptedChatModel
from agentkit.testing import FakeOpenAIServer, call, calls_message
from tests.redis_server import redis_url  # noqa: F401 (a session fixture)

ROOT = Path(__file__).resolve().parent.parent


def remembering(messages: list[Message]) -> str:
    """A model that answers with what the user said so far."""
    said = [m.content for m in messages if m.role is Role.USER]
    return " / ".join(said)


def contents(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role.value, m.content) for m in messages]


def test_each_turn_sees_the_history_and_is_appended() -> None:
    store = InMemoryConversationStore()
    runner = Runner(
        ChatModelAgent("bot", "d", ScriptedChatModel(remembering)), conversation_store=store
    )
    assert runner.invoke("I am Ann", with_conversation_id("c1")).text == "I am Ann"
    assert runner.invoke("Who am I?", with_conversation_id("c1")).text == "I am Ann / Who am I?"
    assert runner.invoke("Fresh", with_conversation_id("c2")).text == "Fresh"
    assert contents(store.load("c1")) == [
        ("user", "I am Ann"),
        ("assistant", "I am Ann"),
        ("user", "Who am I?"),
        ("assistant", "I am Ann / Who am I?"),
    ]


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def test_tool_calls_and_results_are_part_of_the_conversation() -> None:
    model = ScriptedChatModel(
        [calls_message(call("add", {"a": 1, "b": 2}, id="c")), "three", "you asked 1+2"]
    )
    store = InMemoryConversationStore()
    runner = Runner(ChatModelAgent("calc", "d", model, tools=[add]), conversation_store=store)
    runner.invoke("1+2?", with_conversation_id("c"))
    runner.invoke("what did I ask?", with_conversation_id("c"))
    assert contents(model.calls[-1].messages) == [
        ("user", "1+2?"),
        ("assistant", ""),
        ("tool", "3"),
        ("assistant", "three"),
        ("user", "what did I ask?"),
    ]
    assert model.calls[-1].messages[1].tool_calls[0].id == "c"
    assert len(store.load("c")) == 6


def test_streamed_turns_and_workflows_append_every_agents_message() -> None:
    store = InMemoryConversationStore()
    first = ChatModelAgent("first", "d", ScriptedChatModel(["draft"]))
    second = ChatModelAgent("second", "d", ScriptedChatModel(["final"]))
    runner = Runner(
        SequentialAgent("team", "d", [first, second]),
        enable_streaming=True,
        conversation_store=store,
    )
    assert runner.invoke("go", with_conversation_id("w")).text == "final"
    assert contents(store.load("w")) == [
        ("user", "go"),
        ("assistant", "draft"),
        ("assistant", "final"),
    ]


def test_trim_limits_what_the_turn_sees_but_not_what_is_kept() -> None:
    store = InMemoryConversationStore()
    model = ScriptedChatModel(remembering)
    runner = Runner(ChatModelAgent("bot", "d", model), conversation_store=store)
    for word in ("one", "two", "three"):
        runner.invoke(word, with_conversation_id("t"))
    result = runner.invoke("four", with_conversation_id("t", trim=keep_last_turns(1)))
    assert result.text == "three / four"
    assert len(store.load("t")) == 8


def test_a_second_turn_of_a_running_conversation_is_refused() -> None:
    entered = threading.Event()
    release = threading.Event()

    @tool
    def slow() -> str:
        """Wait."""
        entered.set()
        if not release.wait(60):
            raise TimeoutError("the test never released the tool")
        return "done"

    def reply(messages: list[Message]) -> Message | str:
        last = messages[-1]
        if last.role is Role.TOOL:
            return "finished"
        if last.content == "first":
            return calls_message(call("slow", {}, id="s"))
        return "other"

    model = ScriptedChatModel(reply)
    store = InMemoryConversationStore()
    runner = Runner(ChatModelAgent("bot", "d", model, tools=[slow]), conversation_store=store)
    running = runner.query("first", with_conversation_id("busy"))
    try:
        assert entered.wait(60)
        with pytest.raises(ConversationBusyError, match="conversation 'busy' is busy"):
            runner.invoke("second", with_conversation_id("busy"))
        # another conversation is not affected
        assert runner.invoke("elsewhere", with_conversation_id("free")).text == "other"
    finally:
        release.set()
    assert running.result().text == "finished"
    assert contents(store.load("busy"))[0] == ("user", "first")
    # the lock was released when the first turn ended
    store.lock("busy").release()


def test_a_failed_turn_is_not_appended_and_frees_the_conversation() -> None:
    store = InMemoryConversationStore()
    model = ScriptedChatModel([RuntimeError("model down"), "ok"])
    runner = Runner(ChatModelAgent("bot", "d", model), conversation_store=store)
    result = runner.query("hi", with_conversation_id("f")).result(raise_errors=False)
    assert result.error is not None
    assert store.load("f") == []
    assert runner.invoke("again", with_conversation_id("f")).text == "ok"
    assert contents(store.load("f")) == [("user", "again"), ("assistant", "ok")]


def test_a_conversation_id_without_a_store_is_refused_at_once() -> None:
    runner = Runner(ChatModelAgent("bot", "d", ScriptedChatModel(["x"])))
    with pytest.raises(ValueError, match="has no conversation store"):
        runner.query("hi", with_conversation_id("c"))


@tool
def confirm(action: str) -> str:
    """Confirm an action with the user."""
    return f"{action}: {interrupt(f'confirm {action}?')}"


def test_an_interrupted_turn_is_appended_when_its_resumed_run_completes() -> None:
    store = InMemoryConversationStore()
    model = ScriptedChatModel(
        [calls_message(call("confirm", {"action": "delete"}, id="k")), "deleted", "yes, deleted"]
    )
    runner = Runner(
        ChatModelAgent("bot", "d", model, tools=[confirm]),
        conversation_store=store,
        checkpoint_store=InMemoryCheckPointStore(),
    )
    paused = runner.invoke("delete it", with_conversation_id("i"), with_checkpoint_id("cp"))
    assert paused.interrupt is not None
    assert store.load("i") == []
    # the conversation is free while the turn waits for its answer
    store.lock("i").release()
    [context] = paused.interrupt.contexts
    assert runner.resume("cp", targets={context.id: "ok"}).result().text == "deleted"
    assert contents(store.load("i")) == [
        ("user", "delete it"),
        ("assistant", ""),
        ("tool", "delete: ok"),
        ("assistant", "deleted"),
    ]
    assert runner.invoke("did you?", with_conversation_id("i")).text == "yes, deleted"
    assert len(model.calls[-1].messages) == 5


def test_conversation_with_the_loopback_server() -> None:
    with FakeOpenAIServer(lambda request: f"turn {len(request['messages'])}") as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="k")
        runner = Runner(ChatModelAgent("bot", "d", model), conversation_store=InMemoryConversationStore())
        runner.invoke("a", with_conversation_id("x"))
        runner.invoke("b", with_conversation_id("x"))
        sent = server.requests[-1]["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "a"),
        ("assistant", "turn 1"),
        ("user", "b"),
    ]


SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from agentkit import ChatModelAgent, Role, Runner, interrupt, tool
    from agentkit import with_checkpoint_id, with_conversation_id
    from agentkit.checkpoint import FileCheckPointStore
    from agentkit.conversation import {store_class}
    from agentkit.models import ScriptedChatModel
    from agentkit.testing import call, calls_message

    @tool
    def confirm(action: str) -> str:
        '''Confirm an action with the user.'''
        return action + ": " + str(interrupt("confirm " + action + "?"))

    def model(messages):
        last = messages[-1]
        if last.role is Role.USER and last.content.startswith("please"):
            return calls_message(call("confirm", {{"action": last.content[7:]}}, id="k"))
        if last.role is Role.TOOL:
            return "done " + last.content
        return " | ".join(m.content for m in messages if m.role is not Role.SYSTEM)

    runner = Runner(
        ChatModelAgent("bot", "d", ScriptedChatModel(model), tools=[confirm]),
        conversation_store={store_class}({conversations!r}),
        checkpoint_store=FileCheckPointStore({checkpoints!r}),
    )
    step = sys.argv[1]
    if step == "chat":
        print(runner.invoke(sys.argv[2], with_conversation_id("ann")).text)
    elif step == "ask":
        result = runner.invoke(sys.argv[2], with_conversation_id("ann"), with_checkpoint_id("cp"))
        print(result.interrupt.contexts[0].id)
    else:
        print(runner.resume("cp", targets={{sys.argv[2]: "yes"}}).result().text)
    """
)


@pytest.mark.parametrize(
    ("store_class", "name"),
    [("FileConversationStore", "conversations"), ("SQLiteConversationStore", "c.sqlite3")],
)
def test_a_conversation_goes_on_in_new_processes(store_class: str, name: str, tmp_path: Path) -> None:
    script = SCRIPT.format(
        root=str(ROOT),
        store_class=store_class,
        conversations=str(tmp_path / name),
        checkpoints=str(tmp_path / "checkpoints"),
    )

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run("chat", "hello") == "hello"
    point = run("ask", "please pay")
    assert run("resume", point) == "done pay: yes"
    assert run("chat", "recap") == "hello | hello | please pay |  | pay: yes | done pay: yes | recap"


def test_messages_are_stored_as_json_not_pickles(tmp_path: Path) -> None:
    from agentkit.conversation import FileConversationStore

    store = FileConversationStore(tmp_path)
    runner = Runner(ChatModelAgent("bot", "d", ScriptedChatModel(remembering)), conversation_store=store)
    runner.invoke("hi", with_conversation_id("j"))
    [path] = tmp_path.glob("*.jsonl")
    text: Any = path.read_text("utf-8")
    assert '"role":"user"' in text and '"content":"hi"' in text


class BrokenAppend(InMemoryConversationStore):
    """A store whose appends fail (a full disk, a lost connection)."""

    def append(self, conversation_id: str, messages: Any) -> None:
        raise OSError("disk full")


def test_a_turn_that_cannot_be_appended_ends_with_a_conversation_store_error() -> None:
    from agentkit.errors import ConversationStoreError

    runner = Runner(
        ChatModelAgent("bot", "d", ScriptedChatModel(["hi"])), conversation_store=BrokenAppend()
    )
    with pytest.raises(ConversationStoreError, match="could not be appended to conversation 'b'.*disk full"):
        runner.invoke("hello", with_conversation_id("b"))
    # the lock was given back
    runner.conversation_store.lock("b").release()  # type: ignore[union-attr]


def test_a_redis_conversation_through_the_runner(redis_url: str) -> None:  # noqa: F811
    from agentkit.conversation import RedisConversationStore

    with RedisConversationStore(redis_url, prefix="test:runner-conversation:") as store:
        store.delete("r")
        runner = Runner(ChatModelAgent("bot", "d", ScriptedChatModel(remembering)), conversation_store=store)
        runner.invoke("one", with_conversation_id("r"))
        assert runner.invoke("two", with_conversation_id("r")).text == "one / two"
        assert len(store.load("r")) == 4
        store.delete("r")


def test_a_checkpoint_saved_before_checkpoints_held_conversations_still_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentkit._checkpoints import Checkpoint

    # attrs writes __getstate__ into slotted classes at run time; mypy's attrs plugin does not.
    original = Checkpoint.__getstate__  # type: ignore[attr-defined]

    def old_format(self: Checkpoint) -> dict[str, Any]:
        state = dict(original(self))
        del state["conversation"]
        return state

    model = ScriptedChatModel([calls_message(call("confirm", {"action": "x"}, id="k")), "done"])
    runner = Runner(
        ChatModelAgent("bot", "d", model, tools=[confirm]),
        checkpoint_store=InMemoryCheckPointStore(),
    )
    monkeypatch.setattr(Checkpoint, "__getstate__", old_format)
    paused = runner.invoke("go", with_checkpoint_id("old"))
    monkeypatch.undo()
    [context] = paused.interrupt.contexts  # type: ignore[union-attr]
    assert runner.resume("old", targets={context.id: "ok"}).result().text == "done"
