"""Durable steps: what a run writes as it goes, its lease, its records' integrity, idempotency.

``Runner(durability="step")`` (the default with a store and a checkpoint id) writes the run's
input when it starts and one record per finished model reply and tool call; the records are
signed, bound to the id, the store and their place, and a store without step records gets the
whole checkpoint instead. Recovery of every agent kind is ``test_durable_recovery.py``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentMiddleware,
    AgentTool,
    Approve,
    CancelHandle,
    CancelMode,
    ChatModelAgent,
    CheckpointBusyError,
    CheckpointConsumedError,
    CheckpointError,
    LimitReached,
    LoopAgent,
    ModelState,
    ParallelAgent,
    Reject,
    Role,
    RunLimits,
    Runner,
    UnfinishedToolCall,
    add_session_value,
    get_session_value,
    interrupt,
    tool,
    tool_call_key,
    with_approval,
    with_cancel,
    with_checkpoint_id,
)
from agentkit._checkpoints import load_checkpoint
from agentkit.checkpoint import (
    CheckPointStore,
    FileCheckPointStore,
    InMemoryCheckPointStore,
    PickleSerializer,
    lease_for,
)
from agentkit.errors import ResumeError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, run_events
from agentkit.tools import is_idempotent
from tests.durable_support import Crash, copy_of

KEY = b"durable steps tests key of 32 b!"
SERIALIZER = PickleSerializer(KEY)


class Spy(InMemoryCheckPointStore):
    """A memory store that notes every write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, int]] = []

    def set(self, checkpoint_id: str, data: bytes) -> None:
        self.writes.append(("set", len(data)))
        super().set(checkpoint_id, data)

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        self.writes.append(("sync step" if sync else "step", len(data)))
        super().append_step(checkpoint_id, data, sync=sync)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def adding_agent(rounds: int) -> ChatModelAgent:
    script: list[Any] = [calls_message(call("add", {"a": i, "b": 1}, id=f"c{i}"))
                         for i in range(rounds)]
    return ChatModelAgent("A", "adds", ScriptedChatModel([*script, "done"]), tools=[add],
                          max_iterations=rounds + 1)


def crashing_add(
    store: InMemoryCheckPointStore, checkpoint_id: str, at: int, left: list[InMemoryCheckPointStore]
) -> Any:
    """An ``add`` tool whose first call with ``a == at`` kills the process: what the store
    holds for ``checkpoint_id`` then is appended to ``left``. Later calls add."""
    crashed = threading.Event()

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        if a == at and not crashed.is_set():
            crashed.set()
            left.append(copy_of(store, checkpoint_id))
            raise Crash("killed")
        return a + b

    return add


def runner_for(agent: Any, store: Any, **settings: Any) -> Runner:
    return Runner(agent, checkpoint_store=store, serializer=SERIALIZER, **settings)


# --- what is written, and when ------------------------------------------------------------------


def test_a_durable_run_writes_its_input_first_then_one_record_per_step() -> None:
    store = Spy()
    result = runner_for(adding_agent(3), store).invoke("go", with_checkpoint_id("r"))
    assert result.text == "done"
    kinds = [kind for kind, _ in store.writes]
    # the input; then per round the model's reply and the tool call; the answer; the tombstone
    assert kinds == ["set"] + ["step"] * (2 * 3 + 1) + ["set"]
    assert store.read_steps("r") == []
    with pytest.raises(CheckpointConsumedError):
        runner_for(adding_agent(0), store).resume("r")


def test_save_input_false_writes_nothing_before_the_first_step_then_saves_it_whole() -> None:
    # For a caller that keeps the input (a task message): the first save is the first step's
    # image; a crash before it leaves nothing (the caller starts again), one after it resumes.
    store = Spy()
    left: list[InMemoryCheckPointStore] = []
    seen_before_first_reply: list[bytes | None] = []

    def reply(messages: list[Any]) -> Any:
        done = sum(1 for message in messages if message.role is Role.TOOL)
        if done == 0:
            seen_before_first_reply.append(store.get("r"))
        if done < 3:
            return calls_message(call("add", {"a": done, "b": 1}, id=f"c{done}"))
        return "done"

    add = crashing_add(store, "r", at=1, left=left)
    agent = ChatModelAgent("A", "adds", ScriptedChatModel(reply), tools=[add])
    with pytest.raises(Crash):
        runner_for(agent, store).invoke("go", with_checkpoint_id("r", save_input=False))
    assert seen_before_first_reply == [None]  # nothing written before the first step
    # the first step (the model's reply) as the first image; then the first tool's result
    # and the second reply as records; then the stop's save of what the agent declared (the
    # Crash unwinds the run like a SystemExit; a killed process stops before it: ``left``
    # holds the store as the crash found it)
    assert [kind for kind, _ in store.writes] == ["set", "step", "step", "set"]
    resumed = runner_for(agent, left[0]).resume("r").result()
    assert resumed.text == "done"

    store = Spy()
    result = runner_for(adding_agent(3), store).invoke(
        "go", with_checkpoint_id("r", save_input=False)
    )
    assert result.text == "done"
    assert [kind for kind, _ in store.writes] == ["set"] + ["step"] * (2 * 3) + ["set"]
    with pytest.raises(CheckpointConsumedError):
        runner_for(adding_agent(0), store).resume("r")


class _Watching(AgentMiddleware):
    """A middleware that looks at each model call (it puts the run on the hooks' path)."""

    def before_model(self, state: ModelState) -> None:
        assert state.messages


@pytest.mark.parametrize("hooks", [False, True], ids=["plain", "middleware"])
@pytest.mark.parametrize("how", ["on_event", "query"])
def test_no_reader_sees_a_step_before_its_record_is_written(how: str, hooks: bool) -> None:
    # Each model reply and each tool result is one step record: the k-th message event a
    # reader gets must find k records written (a crash before the record would undo the step,
    # and the reader would have seen something that did not happen).
    store = Spy()
    seen: list[tuple[str, int]] = []

    def note(event: AgentEvent) -> None:
        message = event.get_message()
        if message is not None:
            written = sum(1 for kind, _ in store.writes if kind == "step")
            seen.append((message.role.value, written))

    agent = adding_agent(3)
    if hooks:
        agent = ChatModelAgent("A", "adds", ScriptedChatModel(
            [*[calls_message(call("add", {"a": i, "b": 1}, id=f"c{i}")) for i in range(3)],
             "done"]), tools=[add], middlewares=[_Watching()])
    runner = runner_for(agent, store)
    if how == "on_event":
        runner.invoke("go", with_checkpoint_id("r"), on_event=note)
    else:
        with runner.query("go", with_checkpoint_id("r")) as events:
            for event in events:
                note(event)
    assert [role for role, _ in seen] == ["assistant", "tool"] * 3 + ["assistant"]
    written = [count for _, count in seen]
    if how == "on_event":  # delivered in the run's own thread, as it goes: exactly k
        assert written == list(range(1, 8))
    else:  # read from another thread, maybe later: at least k
        assert all(count >= k for k, count in enumerate(written, start=1)), written


def test_a_step_costs_the_same_at_the_hundredth_step_as_at_the_second() -> None:
    store = Spy()
    runner_for(adding_agent(100), store).invoke("go", with_checkpoint_id("long"))
    steps = [size for kind, size in store.writes if kind == "step"]
    replies, results = steps[2:-1:2], steps[1:-1:2]
    assert len(replies) == 99
    # Only the step is written, never the history: the 100th is about the size of the 2nd.
    assert max(replies) <= min(replies) * 1.1
    assert max(results) <= min(results) * 1.1


def test_durability_stop_writes_nothing_while_the_run_lives() -> None:
    store = Spy()
    runner = runner_for(adding_agent(3), store, durability="stop")
    assert runner.invoke("go", with_checkpoint_id("r")).text == "done"
    assert store.writes == []  # a completed fresh run leaves nothing, as before
    with pytest.raises(ValueError, match="durability must be 'step'"):
        Runner(adding_agent(0), durability="always")


def test_a_run_without_a_checkpoint_id_writes_nothing() -> None:
    store = Spy()
    assert runner_for(adding_agent(2), store).invoke("go").text == "done"
    assert store.writes == []


def test_a_session_value_set_by_a_tool_is_saved_with_its_step() -> None:
    store = InMemoryCheckPointStore()
    left: list[InMemoryCheckPointStore] = []

    @tool
    def remember(fact: str) -> str:
        """Remember a fact."""
        add_session_value("fact", fact)
        return "noted"

    @tool
    def crash() -> str:
        """Dies."""
        left.append(copy_of(store, "s"))
        raise Crash("process killed")

    script: list[Any] = [calls_message(call("remember", {"fact": "blue"}, id="m")),
              calls_message(call("crash", id="x")), "the fact is {fact}"]
    agent = ChatModelAgent("A", "d", ScriptedChatModel(script), tools=[remember, crash])
    with pytest.raises(Crash):
        runner_for(agent, store).invoke("go", with_checkpoint_id("s"))

    @tool(name="crash")
    def fine() -> str:
        """Does not die this time."""
        return f"fact was {get_session_value('fact')}"

    resumed = ChatModelAgent("A", "d", ScriptedChatModel(["answer"]), tools=[remember, fine])
    result = runner_for(resumed, left[0]).resume("s").result()
    assert result.session_values["fact"] == "blue"
    assert [m.content for m in (e.get_message() for e in result.events) if m] == [
        "fact was blue", "answer"]


def test_a_store_without_step_records_gets_the_whole_checkpoint_at_each_step() -> None:
    class PlainStore:
        """A third-party store: get, set, delete and nothing else."""

        def __init__(self) -> None:
            self.data: dict[str, bytes] = {}
            self.sets = 0

        def get(self, checkpoint_id: str) -> bytes | None:
            return self.data.get(checkpoint_id)

        def set(self, checkpoint_id: str, data: bytes) -> None:
            self.sets += 1
            self.data[checkpoint_id] = data

        def delete(self, checkpoint_id: str) -> None:
            self.data.pop(checkpoint_id, None)

    store = PlainStore()
    seen: list[bytes] = []
    sets: list[int] = []

    @tool
    def work(n: int) -> str:
        """Work."""
        if n == 2:
            seen.append(store.data["p"])  # what a crash here would leave
            sets.append(store.sets)
            raise Crash("killed")
        return f"did {n}"

    script = [calls_message(call("work", {"n": n}, id=f"w{n}")) for n in (1, 2)] + ["done"]
    agent = ChatModelAgent("A", "d", ScriptedChatModel(script), tools=[work])
    with pytest.raises(Crash):
        runner_for(agent, store).invoke("go", with_checkpoint_id("p"))
    assert sets == [4]  # the input, the first reply, the first call, the second reply
    left = PlainStore()
    left.data["p"] = seen[0]

    @tool(name="work")
    def again(n: int) -> str:
        """Work (the process was replaced)."""
        assert n == 2, "the finished call never runs again"
        return "did 2"

    resumed = ChatModelAgent("A", "d", ScriptedChatModel(["done"]), tools=[again])
    assert runner_for(resumed, left).resume("p").result().text == "done"


# --- leases of live runs ----------------------------------------------------------------------


def blocking_agent(started: threading.Event, release: threading.Event) -> ChatModelAgent:
    @tool
    def wait() -> str:
        """Wait for the test."""
        started.set()
        assert release.wait(30)
        return "waited"

    model = ScriptedChatModel([calls_message(call("wait", id="w")), "done"])
    return ChatModelAgent("A", "d", model, tools=[wait])


def test_a_live_run_holds_the_lease_on_its_id_until_it_ends() -> None:
    store = InMemoryCheckPointStore()
    started, release = threading.Event(), threading.Event()
    runner = runner_for(blocking_agent(started, release), store)
    with no_thread_leak():
        events = runner.query("go", with_checkpoint_id("busy"))
        assert started.wait(10)
        with pytest.raises(CheckpointBusyError, match="'busy' is being resumed by another run"):
            runner.query("again", with_checkpoint_id("busy"))
        with pytest.raises(CheckpointBusyError):
            runner.resume("busy")
        runner_for(adding_agent(0), store).invoke("other ids are free", with_checkpoint_id("b2"))
        release.set()
        assert run_events(events)[-1].get_message().content == "done"  # type: ignore[union-attr]
    with lease_for(store, "busy"):  # released when the run ended
        pass


def test_a_run_given_a_lease_keeps_it_and_leaves_its_release_to_the_caller() -> None:
    store = InMemoryCheckPointStore()
    lease = lease_for(store, "claimed", ttl=30)
    result = runner_for(adding_agent(1), store).invoke(
        "go", with_checkpoint_id("claimed", lease=lease)
    )
    assert result.text == "done"
    assert not lease.released and lease.refresh() is True
    with pytest.raises(CheckpointBusyError):
        lease_for(store, "claimed")
    lease.release()
    with pytest.raises(ValueError, match="the lease given with checkpoint id 'x' is on another"):
        with_checkpoint_id("x", lease=lease_for(store, "y"))


class StolenLeaseStore(InMemoryCheckPointStore):
    """Another process takes the id over once ``stolen`` is set (the lease had expired)."""

    def __init__(self) -> None:
        super().__init__()
        self.stolen = threading.Event()
        self.writes_after = 0

    def acquire_lease(self, checkpoint_id: str, owner: str, ttl: float) -> bool:
        if self.stolen.is_set():
            return False
        return super().acquire_lease(checkpoint_id, owner, ttl)

    def set(self, checkpoint_id: str, data: bytes) -> None:
        self.writes_after += self.stolen.is_set()
        super().set(checkpoint_id, data)

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        self.writes_after += self.stolen.is_set()
        super().append_step(checkpoint_id, data, sync=sync)


def losing_agent(store: StolenLeaseStore, started: threading.Event) -> ChatModelAgent:
    """An agent whose one tool call outlives its run's lease: another process takes the id
    over (``store.stolen``) while the call runs."""

    @tool
    def slow() -> str:
        """Takes longer than the lease."""
        started.set()
        store.stolen.set()
        threading.Event().wait(1.0)  # three refreshes of a 0.3 s lease: the first one fails
        return "late"

    model = ScriptedChatModel([calls_message(call("slow", id="s")), "done"])
    return ChatModelAgent("A", "d", model, tools=[slow])


def test_a_run_that_loses_its_lease_stops_and_writes_nothing_more() -> None:
    store = StolenLeaseStore()
    started = threading.Event()
    runner = runner_for(losing_agent(store, started), store, lease_ttl=0.3)
    with no_thread_leak():
        events = run_events(runner.query("go", with_checkpoint_id("lost")))
    assert started.is_set()
    errors = [event.err for event in events if event.err is not None]
    assert any(isinstance(error, AgentCancelledError) for error in errors)
    saved = [error for error in errors if isinstance(error, CheckpointError)]
    assert saved and "its lease expired and another process took it" in str(saved[-1])
    assert "saves nothing more" in str(saved[-1])
    assert store.writes_after == 0


def test_a_run_saved_when_it_stops_keeps_a_given_lease_and_is_fenced_when_it_is_lost() -> None:
    # durability="stop" with a lease the caller holds (a queue worker): the run keeps it
    # refreshed and leaves its release to the caller ...
    store = StolenLeaseStore()
    lease = lease_for(store, "kept", ttl=30)
    runner = runner_for(adding_agent(1), store, durability="stop")
    assert runner.invoke("go", with_checkpoint_id("kept", lease=lease)).text == "done"
    assert not lease.released and lease.refresh() is True
    lease.release()

    # ... and when another process takes the id over, the run is cancelled and its save
    # when it stops is refused: it must not overwrite the other run's checkpoint.
    started = threading.Event()
    runner = runner_for(losing_agent(store, started), store, durability="stop")
    lease = lease_for(store, "lost", ttl=0.3)
    with no_thread_leak():
        events = run_events(runner.query("go", with_checkpoint_id("lost", lease=lease)))
    assert started.is_set()
    errors = [event.err for event in events if event.err is not None]
    assert any(isinstance(error, AgentCancelledError) for error in errors)
    saved = [error for error in errors if isinstance(error, CheckpointError)]
    assert saved and "saves nothing more" in str(saved[-1])
    assert store.writes_after == 0 and store.get("lost") is None


# --- the records' integrity --------------------------------------------------------------------


def crashed_copy(steps: int) -> InMemoryCheckPointStore:
    """The store of a run killed after ``steps`` tool calls of ``add`` finished."""
    store = InMemoryCheckPointStore()
    left: list[InMemoryCheckPointStore] = []
    add = crashing_add(store, "i", at=steps, left=left)
    script = [calls_message(call("add", {"a": i, "b": 1}, id=f"c{i}")) for i in range(5)]
    agent = ChatModelAgent("A", "d", ScriptedChatModel([*script, "done"]), tools=[add])
    with pytest.raises(Crash):
        runner_for(agent, store).invoke("go", with_checkpoint_id("i"))
    return left[0]


def resume_text(store: Any, checkpoint_id: str = "i") -> str:
    return runner_for(adding_agent(0), store).resume(checkpoint_id).result().text


def rewritten(store: InMemoryCheckPointStore, records: list[bytes], into: str = "i"
              ) -> InMemoryCheckPointStore:
    copy = InMemoryCheckPointStore()
    base = store.get("i")
    assert base is not None
    copy.set(into, base)
    for record in records:
        copy.append_step(into, record)
    return copy


def test_a_run_with_limits_resumed_after_a_crash_counts_on_from_its_last_step() -> None:
    # Killed while its 4th tool call runs (4 model calls made): the resumed run may make one
    # more model call under RunLimits(model_calls=5), not five more.
    store = InMemoryCheckPointStore()
    left: list[InMemoryCheckPointStore] = []
    add = crashing_add(store, "i", at=3, left=left)
    script = [calls_message(call("add", {"a": i, "b": 1}, id=f"c{i}")) for i in range(5)]
    model = ScriptedChatModel([*script, "done"])
    agent = ChatModelAgent("A", "d", model, tools=[add])
    limits = RunLimits(model_calls=5)
    with pytest.raises(Crash):
        runner_for(agent, store, limits=limits).invoke("go", with_checkpoint_id("i"))
    resumed = runner_for(agent, left[0], limits=limits).resume("i").result()
    assert resumed.status == "interrupted"
    (context,) = resumed.interrupt.contexts  # type: ignore[union-attr]
    assert context.info == LimitReached("model_calls", 5, 5)


def test_an_intact_journal_resumes() -> None:
    store = crashed_copy(3)
    assert len(store.read_steps("i")) == 7  # four replies, three finished calls
    assert resume_text(store) == "done"


def test_a_forged_step_record_is_refused() -> None:
    store = crashed_copy(3)
    records = store.read_steps("i")
    forged = bytearray(records[2])
    forged[-5] ^= 0x01
    with pytest.raises(CheckpointError, match="its step record 3 is refused: .*signature"):
        resume_text(rewritten(store, [*records[:2], bytes(forged), *records[3:]]))


def test_reordered_or_replayed_step_records_are_refused() -> None:
    store = crashed_copy(3)
    records = store.read_steps("i")
    swapped = [records[0], records[2], records[1], *records[3:]]
    with pytest.raises(CheckpointError, match="record 2 says it is step 3 .* reordered, or one"):
        resume_text(rewritten(store, swapped))
    with pytest.raises(CheckpointError, match="record 8 says it is step 1"):
        resume_text(rewritten(store, [*records, records[0]]))


def test_a_record_appended_twice_in_a_row_is_applied_once() -> None:
    # An append retried after a lost answer (the first try reached the store) leaves the
    # same bytes twice in a row: the run resumes as if it were there once.
    store = crashed_copy(3)
    records = store.read_steps("i")
    doubled = [*records[:3], records[2], *records[3:], records[-1]]
    assert resume_text(rewritten(store, doubled)) == "done"
    # A record repeated further away is still a replay, refused.
    with pytest.raises(CheckpointError, match="record 4 says it is step 2"):
        resume_text(rewritten(store, [*records[:3], records[1], *records[3:]]))


def test_step_records_of_another_checkpoint_id_are_refused() -> None:
    store = crashed_copy(3)
    moved = InMemoryCheckPointStore()  # run "i"'s records under id "j", beside "j"'s own base
    started = threading.Event()
    release = threading.Event()
    with no_thread_leak():
        events = runner_for(blocking_agent(started, release), moved).query(
            "go", with_checkpoint_id("j"))
        assert started.wait(10)
        base = moved.get("j")
        release.set()
        run_events(events)
    assert base is not None
    forged = InMemoryCheckPointStore()
    forged.set("j", base)
    for record in store.read_steps("i"):
        forged.append_step("j", record)
    with pytest.raises(CheckpointError, match="step record 1 is refused: .*signature check"):
        resume_text(forged, "j")


def test_records_left_by_an_earlier_save_of_the_id_are_skipped() -> None:
    store = crashed_copy(3)
    earlier = crashed_copy(1).read_steps("i")  # another run of the id, another generation
    assert resume_text(rewritten(store, [*earlier, *store.read_steps("i")])) == "done"


def test_a_torn_last_record_in_a_file_store_is_dropped_and_the_run_resumes(
    tmp_path: Path,
) -> None:
    files = FileCheckPointStore(tmp_path)
    left: dict[str, bytes] = {}

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        if a == 3:  # what a process killed here leaves in the directory
            left.update({p.name: p.read_bytes() for p in tmp_path.glob("c-*.*")
                         if p.suffix in (".ckpt", ".steps")})
            raise Crash("killed")
        return a + b

    script = [calls_message(call("add", {"a": i, "b": 1}, id=f"c{i}")) for i in range(5)]
    agent = ChatModelAgent("A", "d", ScriptedChatModel([*script, "done"]), tools=[add])
    with pytest.raises(Crash):
        runner_for(agent, files).invoke("go", with_checkpoint_id("i"))
    for name, data in left.items():
        (tmp_path / name).write_bytes(data)
    path = files.steps_path_for("i")
    assert len(files.read_steps("i")) == 7
    path.write_bytes(path.read_bytes()[:-7])  # killed while writing the last record
    assert len(files.read_steps("i")) == 6
    assert resume_text(files) == "done"
    assert not path.exists()


# --- tool_call_key ----------------------------------------------------------------------------


def test_tool_call_key_is_stable_for_a_call_and_distinct_for_every_other() -> None:
    keys: list[tuple[str, str]] = []

    @tool
    def note(label: str) -> str:
        """Note a label."""
        keys.append((label, tool_call_key()))
        if label == "ask" and not interrupt("go on?"):
            return "stopped"
        return "noted"

    script: list[Any] = [
        calls_message(call("note", {"label": "a"}, id="same"), call("note", {"label": "a"}, id="other")),
        calls_message(call("note", {"label": "a"}, id="same")),  # the same id, a later round
        calls_message(call("note", {"label": "ask"}, id="q")),
        "done",
    ]
    store = InMemoryCheckPointStore()
    runner = runner_for(ChatModelAgent("A", "d", ScriptedChatModel(script), tools=[note]), store)
    first = runner.invoke("go", with_checkpoint_id("k"))
    assert first.interrupt is not None
    runner.resume("k", targets={first.interrupt.contexts[0].id: True}).result()
    again = runner_for(ChatModelAgent("A", "d", ScriptedChatModel([*script[:1], "x"]),
                                       tools=[note]), InMemoryCheckPointStore())
    again.invoke("go", with_checkpoint_id("k"))  # another run under the same id
    values = [key for _, key in keys]
    assert all(len(key) == 32 and int(key, 16) >= 0 for key in values)
    ask = [key for label, key in keys if label == "ask"]
    assert len(ask) == 2 and ask[0] == ask[1]  # the interrupted call, and its resume
    others = values[:3] + values[5:]
    assert len(set(others)) == len(others) == 5


def test_tool_call_key_differs_in_every_round_of_a_loop() -> None:
    keys: list[str] = []

    @tool
    def tick() -> str:
        """Tick."""
        keys.append(tool_call_key())
        return "ok"

    model = ScriptedChatModel([calls_message(call("tick", id="t")), "once"] * 3)
    loop = LoopAgent("L", "d", [ChatModelAgent("A", "d", model, tools=[tick])], max_iterations=3)
    Runner(loop).invoke("go")
    assert len(keys) == 3 and len(set(keys)) == 3


def _derived_key(base: str, *place: str) -> str:
    """tool_call_key()'s recipe, written out: SHA-256 of the base key and each part of the
    call's place (length-prefixed), 32 hex digits."""
    digest = hashlib.sha256(base.encode())
    for part in place:
        digest.update(len(part.encode()).to_bytes(4, "big"))
        digest.update(part.encode())
    return digest.hexdigest()[:32]


def test_tool_call_key_in_nested_agent_tools_derives_from_the_saved_run_key() -> None:
    # The key of a call two agent tools deep chains the derivation through both enclosing
    # calls (each call's key is the base of the inner run's calls), from the run key the
    # checkpoint holds; resumed, the call gets the same key.
    keys: list[str] = []

    @tool
    def note() -> str:
        """Note the key."""
        keys.append(tool_call_key())
        return "noted" if interrupt("go on?") else "stopped"

    inner = ChatModelAgent("Inner", "d", ScriptedChatModel([calls_message(call("note", id="c3")), "in"]),
                           tools=[note], max_iterations=3)
    mid = ChatModelAgent("Mid", "d", ScriptedChatModel([calls_message(call("Inner", {"request": "r"}, id="c2")), "mid"]),
                         tools=[AgentTool(inner)], max_iterations=4)
    outer = ChatModelAgent("Outer", "d", ScriptedChatModel([calls_message(call("Mid", {"request": "r"}, id="c1")), "out"]),
                           tools=[AgentTool(mid)], max_iterations=5)
    store = InMemoryCheckPointStore()
    runner = runner_for(outer, store)
    first = runner.invoke("go", with_checkpoint_id("nested"))
    assert first.interrupt is not None
    run_key = load_checkpoint(store, SERIALIZER, "nested").key
    assert len(run_key) == 32
    outer_call = _derived_key(run_key, "agent:Outer", "tool:Mid:c1", "Outer", "4")
    mid_call = _derived_key(
        outer_call, "agent:Outer", "tool:Mid:c1", "agent:Mid", "tool:Inner:c2", "Mid", "3"
    )
    inner_call = _derived_key(
        mid_call, "agent:Outer", "tool:Mid:c1", "agent:Mid", "tool:Inner:c2", "agent:Inner",
        "tool:note:c3", "Inner", "2",
    )
    assert keys == [inner_call]
    assert runner.resume("nested", targets={first.interrupt.contexts[0].id: True}).result().text == "out"
    assert keys == [inner_call, inner_call]


def test_tool_call_key_outside_a_tool_call_raises() -> None:
    with pytest.raises(RuntimeError, match="only inside a tool call"):
        tool_call_key()


# --- idempotency ------------------------------------------------------------------------------


def test_which_tools_are_idempotent() -> None:
    @tool
    def read() -> str:
        """Read."""
        return ""

    @tool(needs_approval=True)
    def approve_me() -> str:
        """Needs approval."""
        return ""

    @tool(needs_approval=lambda args: True, idempotent=True)
    def safe_anyway() -> str:
        """Needs approval but is safe to repeat."""
        return ""

    @tool(idempotent=False)
    def send() -> str:
        """Send."""
        return ""

    class Custom:
        def info(self) -> Any:
            return read.info()

        def invoke(self, arguments: str, **options: Any) -> str:
            return ""

    assert read.idempotent and is_idempotent(read)
    assert not approve_me.idempotent and not is_idempotent(approve_me)
    assert is_idempotent(safe_anyway)
    assert not is_idempotent(send)
    assert not is_idempotent(with_approval(read))
    assert is_idempotent(Custom())
    assert is_idempotent(AgentTool(ChatModelAgent("inner", "an agent", ScriptedChatModel([]))))
    with pytest.raises(TypeError, match="idempotent must be True, False or None"):
        tool(idempotent="yes")  # type: ignore[call-overload]


def test_is_idempotent_reads_each_tool_not_its_class() -> None:
    class Settable:
        """Says it per instance (an attribute set in __init__, not on the class)."""

        def __init__(self, idempotent: bool) -> None:
            self.idempotent = idempotent

    class Switching:
        """Says it on the class, as a property whose answer can change."""

        answer = True

        @property
        def idempotent(self) -> bool:
            return self.answer

    assert is_idempotent(Settable(True)) and not is_idempotent(Settable(False))
    assert is_idempotent(Settable(True))  # asked again after a False of the same class
    switching = Switching()
    assert is_idempotent(switching)
    switching.answer = False
    assert not is_idempotent(switching)  # the class is remembered, the answer is read each time


# --- unfinished calls -------------------------------------------------------------------------


def unfinished_run(tmp_path: Path) -> tuple[InMemoryCheckPointStore, list[str]]:
    """A run killed while its payment ran (after the payment's effect)."""
    store = InMemoryCheckPointStore()
    left: list[InMemoryCheckPointStore] = []
    paid: list[str] = []

    @tool(idempotent=False)
    def pay(amount: int) -> str:
        """Pay."""
        paid.append(tool_call_key())
        left.append(copy_of(store, "u"))
        raise Crash("killed during the payment")

    model = ScriptedChatModel([calls_message(call("pay", {"amount": 5}, id="p")), "done"])
    with pytest.raises(Crash):
        runner_for(ChatModelAgent("A", "d", model, tools=[pay]), store).invoke(
            "go", with_checkpoint_id("u"))
    return left[0], paid


def paying_runner(store: Any, paid: list[str], model: ScriptedChatModel) -> Runner:
    @tool(idempotent=False)
    def pay(amount: int) -> str:
        """Pay."""
        paid.append(f"{amount} {tool_call_key()}")
        return f"paid {amount}"

    return runner_for(ChatModelAgent("A", "d", model, tools=[pay]), store)


@pytest.mark.parametrize(
    ("decision", "runs", "told"),
    [
        (True, ["5"], "paid 5"),
        (Approve(), ["5"], "paid 5"),
        (Approve(arguments={"amount": 4}), ["4"], "paid 4"),
        (False, [], "did not finish before the run was interrupted by a crash, and it was not "
                    "run again; it may or may not have had its effect."),
        (Reject("it went through"), [], "Reason: it went through"),
        ("the bank says: paid", [], "the bank says: paid"),
    ],
)
def test_an_unfinished_call_waits_for_a_decision(
    tmp_path: Path, decision: Any, runs: list[str], told: str
) -> None:
    store, first = unfinished_run(tmp_path)
    paid: list[str] = []
    model = ScriptedChatModel(["done"])
    stopped = paying_runner(store, paid, model).resume("u").result()
    assert stopped.interrupt is not None and paid == []
    (context,) = stopped.interrupt.contexts
    info = context.info
    assert info == UnfinishedToolCall("pay", "p", {"amount": 5}, first[0])
    assert "pay({\"amount\": 5}) did not finish" in str(info)
    result = paying_runner(store, paid, model).resume("u", targets={context.id: decision}).result()
    assert result.text == "done"
    assert [entry.split()[0] for entry in paid] == runs
    assert all(entry.split()[1] == first[0] for entry in paid)  # the same key as the first try
    assert told in model.calls[-1].messages[-1].content


def test_an_unfinished_call_asked_without_a_decision_asks_again(tmp_path: Path) -> None:
    store, _ = unfinished_run(tmp_path)
    paid: list[str] = []
    model = ScriptedChatModel(["done"])
    first = paying_runner(store, paid, model).resume("u").result()
    second = paying_runner(store, paid, model).resume("u").result()
    assert first.interrupt is not None and second.interrupt is not None
    assert first.interrupt.contexts[0].id != second.interrupt.contexts[0].id
    with pytest.raises(ResumeError, match="must be True, False, Approve.*or the call's result"):
        paying_runner(store, paid, model).resume(
            "u", targets={second.interrupt.contexts[0].id: 42}).result()
    assert paid == []


# --- run limits: a call cut short by a crash counts once ----------------------------------------


def limited_send_run(
    store: CheckPointStore, sent: list[str], crash: bool,
    model: ScriptedChatModel | None = None,
) -> Runner:
    """A run under ``RunLimits(tool_calls=2)``: ``send`` (not idempotent), then ``add``."""

    @tool(idempotent=False)
    def send(n: int) -> str:
        """Send."""
        sent.append(tool_call_key())
        if crash:
            sent.append("killed")
            raise Crash("killed while sending, after the effect")
        return f"sent {n}"

    model = model or ScriptedChatModel(lambda messages: (
        calls_message(call("send", {"n": 1}, id="s")) if len(messages) == 1
        else calls_message(call("add", {"a": 1, "b": 1}, id="a")) if len(messages) == 3
        else "done"
    ))
    agent = ChatModelAgent("A", "d", model, tools=[send, add])
    return runner_for(agent, store, limits=RunLimits(tool_calls=2))


@pytest.mark.parametrize("decision", [True, Approve()])
def test_a_call_cut_short_by_a_crash_and_approved_counts_once_against_the_limit(
    decision: Any,
) -> None:
    # The send counted before the kill is the send that runs again after the approval: the
    # run then has one call left under tool_calls=2, the add. (It used to count three times:
    # before the kill, when the recovered run asked, and when it ran again.)
    store = InMemoryCheckPointStore()
    sent: list[str] = []
    left: list[InMemoryCheckPointStore] = []
    crashing = limited_send_run(store, sent, crash=True)
    original = store.append_step

    def append(checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        original(checkpoint_id, data, sync=sync)
        if sync:  # the send's start: durable before it runs; the kill comes after it
            left.append(copy_of(store, checkpoint_id))

    store.append_step = append  # type: ignore[method-assign]
    with pytest.raises(Crash):
        crashing.invoke("go", with_checkpoint_id("lim"))
    assert sent[1:] == ["killed"] and len(left) == 1
    recovered = left[0]
    asked = limited_send_run(recovered, sent, crash=False).resume("lim").result()
    assert asked.interrupt is not None, asked.error
    (context,) = asked.interrupt.contexts
    assert isinstance(context.info, UnfinishedToolCall), context.info
    done = limited_send_run(recovered, sent, crash=False).resume(
        "lim", targets={context.id: decision}).result()
    assert done.interrupt is None, [c.info for c in done.interrupt.contexts]
    assert done.text == "done"
    assert sent == [sent[0], "killed", sent[0]]  # sent again once, with the same key


KILLED_SEND = """
import os, signal, sys
from agentkit import ChatModelAgent, Runner, RunLimits, tool, tool_call_key, with_checkpoint_id
from agentkit.checkpoint import PickleSerializer, SQLiteCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

path, effects = sys.argv[1], sys.argv[2]

@tool(idempotent=False)
def send(n: int) -> str:
    \"\"\"Send.\"\"\"
    with open(effects, "a") as file:
        file.write("send " + tool_call_key() + "\\n")
    os.kill(os.getpid(), signal.SIGKILL)  # after the effect, before it returns
    return "sent"

@tool
def add(a: int, b: int) -> int:
    \"\"\"Add.\"\"\"
    return a + b

model = ScriptedChatModel([calls_message(call("send", {"n": 1}, id="s")), "never"])
runner = Runner(ChatModelAgent("A", "d", model, tools=[send, add]),
                checkpoint_store=SQLiteCheckPointStore(path), lease_ttl=0.5,
                serializer=PickleSerializer(KEY), limits=RunLimits(tool_calls=2))
runner.invoke("go", with_checkpoint_id("killed"))
""".replace("KEY", repr(KEY))


def test_a_process_killed_mid_send_under_limits_counts_the_send_once(tmp_path: Path) -> None:
    # The same story as above with a real process killed with SIGKILL in the middle of its
    # send, and a real SQLite store: once approved, the send runs again and the add still fits
    # under tool_calls=2.
    import subprocess
    import sys
    import time

    from agentkit.checkpoint import SQLiteCheckPointStore

    path, effects = tmp_path / "c.db", tmp_path / "effects"
    child = subprocess.run([sys.executable, "-c", KILLED_SEND, str(path), str(effects)],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == -9, child.stderr
    (first,) = effects.read_text().splitlines()
    sent: list[str] = []
    with SQLiteCheckPointStore(path) as store:
        deadline = time.monotonic() + 30  # a failure guard: the dead child's lease lasts 0.5 s
        while True:
            try:
                asked = limited_send_run(store, sent, crash=False).resume("killed").result()
                break
            except CheckpointBusyError:
                assert time.monotonic() < deadline, "the dead child's lease never expired"
                time.sleep(0.05)
        assert asked.interrupt is not None, asked.error
        (context,) = asked.interrupt.contexts
        assert isinstance(context.info, UnfinishedToolCall)
        done = limited_send_run(store, sent, crash=False).resume(
            "killed", targets={context.id: Approve()}).result()
    assert done.interrupt is None, [c.info for c in done.interrupt.contexts]
    assert done.text == "done"
    assert sent == [first.split()[1]]  # sent again once, with the key of the killed try


def test_a_rejected_call_cut_short_by_a_crash_is_not_counted() -> None:
    # Rejected, the send does not run again: like a call a guardrail blocks, it is not
    # counted, and the run has both of its calls left (the add and one more).
    store = InMemoryCheckPointStore()
    sent: list[str] = []
    left: list[InMemoryCheckPointStore] = []
    original = store.append_step

    def append(checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        original(checkpoint_id, data, sync=sync)
        if sync:
            left.append(copy_of(store, checkpoint_id))

    store.append_step = append  # type: ignore[method-assign]
    with pytest.raises(Crash):
        limited_send_run(store, sent, crash=True).invoke("go", with_checkpoint_id("lim"))
    asked = limited_send_run(left[0], sent, crash=False).resume("lim").result()
    assert asked.interrupt is not None
    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 1}, id="a1")),
                               calls_message(call("add", {"a": 2, "b": 1}, id="a2")),
                               calls_message(call("add", {"a": 3, "b": 1}, id="a3")), "done"])
    runner = limited_send_run(left[0], sent, crash=False, model=model)
    paused = runner.resume("lim", targets={asked.interrupt.contexts[0].id: Reject("no")}).result()
    assert paused.interrupt is not None
    assert [c.info for c in paused.interrupt.contexts] == [LimitReached("tool_calls", 2, 2)]
    assert len(model.calls) == 3  # two adds ran; the third was refused


def test_an_idempotent_call_in_flight_when_a_parallel_call_was_saved_counts_once() -> None:
    # Two calls at once under tool_calls=3: the fast one finishes and is saved while the slow
    # one still runs; the process dies; the recovered run runs the slow (idempotent) one again.
    # It counts once: the run still has its third call, in the next round.
    store = InMemoryCheckPointStore()
    left: list[InMemoryCheckPointStore] = []
    saved = threading.Event()
    original = store.append_step
    records = 0

    def append(checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        nonlocal records
        original(checkpoint_id, data, sync=sync)
        records += 1
        if records == 2:  # the model's reply, then the fast call's result
            saved.set()

    store.append_step = append  # type: ignore[method-assign]
    ran: list[str] = []

    def tools(crash: bool) -> list[Any]:
        @tool
        def slow(n: int) -> int:
            """Slow."""
            ran.append("slow")
            if crash:
                assert saved.wait(30)
                left.append(copy_of(store, "par"))
                raise Crash("killed while the slow call ran")
            return n

        @tool
        def fast(n: int) -> int:
            """Fast."""
            ran.append("fast")
            return n

        return [slow, fast]

    def script(messages: list[Any]) -> Any:
        if len(messages) == 1:
            return calls_message(call("slow", {"n": 1}, id="s"), call("fast", {"n": 2}, id="f"))
        if len(messages) == 4:
            return calls_message(call("fast", {"n": 3}, id="f2"))
        return "done"

    def runner(target: Any, crash: bool) -> Runner:
        agent = ChatModelAgent("A", "d", ScriptedChatModel(script), tools=tools(crash))
        return runner_for(agent, target, limits=RunLimits(tool_calls=3))

    with pytest.raises(Crash):
        runner(store, crash=True).invoke("go", with_checkpoint_id("par"))
    assert len(left) == 1
    done = runner(left[0], crash=False).resume("par").result()
    assert done.interrupt is None, [c.info for c in done.interrupt.contexts]
    assert done.text == "done"
    assert sorted(ran) == ["fast", "fast", "slow", "slow"]  # the fast one not again


# --- resume against changed code --------------------------------------------------------------


def test_an_approval_for_a_tool_that_is_gone_fails_the_resume_and_keeps_the_request() -> None:
    @tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    model = ScriptedChatModel([calls_message(call("pay", {"amount": 5}, id="p")), "done"])
    store = InMemoryCheckPointStore()
    first = runner_for(ChatModelAgent("A", "d", model, tools=[pay]), store).invoke(
        "go", with_checkpoint_id("c"))
    assert first.interrupt is not None
    point = first.interrupt.contexts[0].id

    @tool
    def transfer_money(amount: int) -> str:
        """The payment tool, renamed."""
        return "moved"

    renamed = ChatModelAgent("A", "d", ScriptedChatModel(["done"]), tools=[transfer_money])
    with pytest.raises(ResumeError) as failed:
        runner_for(renamed, store).resume("c", targets={point: Approve()}).result()
    text = str(failed.value)
    assert "targets a tool that agent 'A' does not have now" in text
    assert "tool 'pay' (call 'p')" in text and "its tools: 'transfer_money'" in text
    # The request is still there, under the same id: the fixed code resumes it.
    fixed = ChatModelAgent("A", "d", ScriptedChatModel(["done"]), tools=[pay])
    assert runner_for(fixed, store).resume("c", targets={point: Approve()}).result().text == "done"


# --- the Parallel cancel of issue 27 ----------------------------------------------------------


@pytest.mark.parametrize("durability", ["step", "stop"])
@pytest.mark.parametrize("mode", ["inside the tools", "after the tools"])
def test_a_parallel_cancel_after_the_tool_calls_never_runs_a_finished_tool_again(
    durability: str, mode: str
) -> None:
    counts: dict[str, int] = {}
    handle = CancelHandle()
    all_ran = threading.Barrier(3)

    def branch(name: str) -> ChatModelAgent:
        @tool(name=f"t{name}")
        def work() -> str:
            """Work once."""
            counts[name] = counts.get(name, 0) + 1
            if counts[name] == 1 and mode == "inside the tools":
                all_ran.wait(10)
                handle.cancel(CancelMode.AFTER_TOOL_CALLS)
            return "ok"

        model = ScriptedChatModel([calls_message(call(f"t{name}", id=f"{name}1")), f"{name} done"])
        return ChatModelAgent(name, "d", model, tools=[work])

    runner = runner_for(ParallelAgent("P", "d", [branch(n) for n in "abc"]),
                        InMemoryCheckPointStore(), durability=durability)
    if mode == "after the tools":
        handle.cancel(CancelMode.AFTER_TOOL_CALLS)
    first = run_events(runner.query("go", with_cancel(handle), with_checkpoint_id("par")))
    assert isinstance(first[-1].err, AgentCancelledError)
    rest = run_events(runner.resume("par"))
    assert not any(event.err for event in rest)
    assert counts == {"a": 1, "b": 1, "c": 1}


def test_events_of_a_resumed_run_are_facts(tmp_path: Path) -> None:
    store = crashed_copy(2)
    result = runner_for(adding_agent(0), store).resume("i").result()
    assert all(isinstance(event, AgentEvent) for event in result.events)
    tools = [json.loads(e.get_message().content) for e in result.events  # type: ignore[union-attr]
             if e.get_message() is not None and e.get_message().role.value == "tool"]  # type: ignore[union-attr]
    assert tools == [3]  # the killed call (a=2) ran again
