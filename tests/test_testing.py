"""agentkit.testing itself: its checks fail loudly (also under ``python -O``) and clean up."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from agentkit import AgentKitError, ChatModelAgent, Runner, tool, user_message
from agentkit.models import OpenAIChatModel, ScriptedChatModel
from agentkit.testing import (
    ALL_CHECKS,
    LEASE_CHECKS,
    STEP_CHECKS,
    STORE_CHECKS,
    FakeOpenAIServer,
    Reply,
    StoreConformanceError,
    ThreadLeakError,
    call,
    calls_message,
    check_checkpoint_store,
    no_thread_leak,
    run_events,
    summarize,
)

GUARD = 30.0  # a failure guard for waits, never a pace


def run_optimized(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in ``python -O`` (assert statements stripped); PYTHONPATH is inherited."""
    return subprocess.run(
        [sys.executable, "-O", "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


# The first lines of both scripts prove that -O is on: a bare assert no longer fires.
OPTIMIZED_PREAMBLE = """
    import sys
    assert False, "python -O did not strip this assert"
    print("optimize", sys.flags.optimize)
"""


def test_checkpoint_conformance_fails_a_broken_store_under_python_O() -> None:
    result = run_optimized(
        OPTIMIZED_PREAMBLE
        + """
    from agentkit.testing import StoreConformanceError, check_checkpoint_store

    class ForgetfulStore:
        # Keeps only the first byte of every checkpoint.
        def __init__(self):
            self.data = {}
        def get(self, checkpoint_id):
            return self.data.get(checkpoint_id)
        def set(self, checkpoint_id, data):
            self.data[checkpoint_id] = data[:1]
        def delete(self, checkpoint_id):
            self.data.pop(checkpoint_id, None)

    store = ForgetfulStore()
    try:
        check_checkpoint_store(lambda: store)
    except StoreConformanceError as error:
        print("failed:", error)
        sys.exit(3)
    print("the broken store passed")
    """
    )
    assert result.stdout.splitlines()[0] == "optimize 1", result.stderr
    assert result.returncode == 3, result.stdout + result.stderr
    assert "failed: check_round_trip: after set: get(" in result.stdout


def test_conversation_conformance_fails_a_broken_store_under_python_O() -> None:
    result = run_optimized(
        OPTIMIZED_PREAMBLE
        + """
    from agentkit.conversation import InMemoryConversationStore
    from agentkit.conversation.conformance import check_conversation_store
    from agentkit.testing import StoreConformanceError

    class ForgetfulStore(InMemoryConversationStore):
        # Keeps only the last message appended.
        def append(self, conversation_id, messages):
            self.delete(conversation_id)
            super().append(conversation_id, list(messages)[-1:])

    try:
        check_conversation_store(ForgetfulStore)
    except StoreConformanceError as error:
        print("failed:", error)
        sys.exit(3)
    print("the broken store passed")
    """
    )
    assert result.stdout.splitlines()[0] == "optimize 1", result.stderr
    assert result.returncode == 3, result.stdout + result.stderr
    assert "failed: conversation store conformance: after one append" in result.stdout


def test_a_thread_leak_is_reported_under_python_O() -> None:
    result = run_optimized(
        OPTIMIZED_PREAMBLE
        + """
    import threading
    from agentkit.testing import ThreadLeakError, no_thread_leak

    gate = threading.Event()
    try:
        with no_thread_leak(timeout=0.1):
            threading.Thread(target=gate.wait, name="left-behind").start()
    except ThreadLeakError as error:
        print("failed:", error)
        sys.exit(3)
    finally:
        gate.set()
    print("the leak passed")
    """
    )
    assert result.returncode == 3, result.stdout + result.stderr
    assert "failed: 1 thread(s) started in the block still run" in result.stdout
    assert "left-behind" in result.stdout


def test_conformance_errors_are_agentkit_errors_and_assertion_errors() -> None:
    assert issubclass(StoreConformanceError, AgentKitError)
    assert issubclass(StoreConformanceError, AssertionError)
    assert issubclass(ThreadLeakError, AgentKitError)
    assert issubclass(ThreadLeakError, AssertionError)
    assert ALL_CHECKS == STORE_CHECKS + LEASE_CHECKS + STEP_CHECKS


class PlainStore:
    """A correct store without lease methods."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def get(self, checkpoint_id: str) -> bytes | None:
        return self.data.get(checkpoint_id)

    def set(self, checkpoint_id: str, data: bytes) -> None:
        self.data[checkpoint_id] = data

    def delete(self, checkpoint_id: str) -> None:
        self.data.pop(checkpoint_id, None)


def test_require_leases_says_what_is_missing_and_how_to_fix_it() -> None:
    store = PlainStore()
    with pytest.raises(StoreConformanceError) as caught:
        check_checkpoint_store(lambda: store, require_leases=True, checks=())
    assert str(caught.value) == (
        "PlainStore has no acquire_lease/release_lease methods; add them "
        "(see agentkit.checkpoint.LeasingCheckPointStore) or pass require_leases=False"
    )


def test_require_steps_says_what_is_missing_and_how_to_fix_it() -> None:
    store = PlainStore()
    with pytest.raises(StoreConformanceError) as caught:
        check_checkpoint_store(lambda: store, require_steps=True, checks=())
    assert str(caught.value) == (
        "PlainStore has no append_step/read_steps/delete_steps methods; add them "
        "(see agentkit.checkpoint.JournalingCheckPointStore) or pass require_steps=False"
    )
    check_checkpoint_store(lambda: store, checks=STEP_CHECKS)  # optional: passes without them


class ForgetfulJournal(PlainStore):
    """Keeps step records, but ``delete`` forgets to remove them (a common mistake)."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: dict[str, list[bytes]] = {}

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        self.steps.setdefault(checkpoint_id, []).append(data)

    def read_steps(self, checkpoint_id: str) -> list[bytes]:
        return list(self.steps.get(checkpoint_id, ()))

    def delete_steps(self, checkpoint_id: str) -> None:
        self.steps.pop(checkpoint_id, None)


def test_the_step_checks_catch_a_delete_that_keeps_the_records() -> None:
    store = ForgetfulJournal()
    with pytest.raises(StoreConformanceError, match="delete must remove the step records too"):
        check_checkpoint_store(lambda: store, checks=STEP_CHECKS, require_steps=True)


def test_the_step_checks_catch_records_read_out_of_order() -> None:
    class Reversed(ForgetfulJournal):
        def delete(self, checkpoint_id: str) -> None:
            super().delete(checkpoint_id)
            self.delete_steps(checkpoint_id)

        def read_steps(self, checkpoint_id: str) -> list[bytes]:
            return list(reversed(super().read_steps(checkpoint_id)))

    store = Reversed()
    with pytest.raises(StoreConformanceError, match="^check_steps_round_trip_in_order: after"):
        check_checkpoint_store(lambda: store, checks=STEP_CHECKS)


class Journal(ForgetfulJournal):
    """A correct journaling store (``delete`` removes the records), under one lock."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def delete(self, checkpoint_id: str) -> None:
        with self.lock:
            super().delete(checkpoint_id)
            self.delete_steps(checkpoint_id)


class Rebasing(Journal):
    """A correct ``set_base``: the base and the removal of its records under one lock."""

    def set_base(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        with self.lock:
            self.data[checkpoint_id] = data
            self.steps.pop(checkpoint_id, None)

    def get(self, checkpoint_id: str) -> bytes | None:
        with self.lock:
            return super().get(checkpoint_id)

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        with self.lock:
            super().append_step(checkpoint_id, data)

    def read_steps(self, checkpoint_id: str) -> list[bytes]:
        with self.lock:
            return super().read_steps(checkpoint_id)


REBASE_CHECKS = [check for check in STEP_CHECKS if "set_base" in check.__name__]


def test_the_set_base_checks_pass_a_correct_store_and_skip_a_store_without_it() -> None:
    assert len(REBASE_CHECKS) == 3
    check_checkpoint_store(Rebasing, checks=STEP_CHECKS, require_steps=True)
    check_checkpoint_store(Journal, checks=REBASE_CHECKS, require_steps=True)  # no set_base
    check_checkpoint_store(PlainStore, checks=REBASE_CHECKS)


def test_the_set_base_checks_catch_a_set_base_that_keeps_the_records() -> None:
    class KeepsRecords(Rebasing):
        def set_base(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
            self.set(checkpoint_id, data)

    store = KeepsRecords()
    with pytest.raises(StoreConformanceError, match="set_base must remove the old base's records"):
        check_checkpoint_store(lambda: store, checks=REBASE_CHECKS)
    concurrent = [check for check in REBASE_CHECKS if "concurrent" in check.__name__]
    with no_thread_leak(), pytest.raises(StoreConformanceError, match="not the records of one base"):
        check_checkpoint_store(lambda: store, checks=concurrent)


def test_the_set_base_checks_catch_a_set_base_that_drops_other_ids_records() -> None:
    class DropsEveryRecord(Rebasing):
        def set_base(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
            with self.lock:
                self.data[checkpoint_id] = data
                self.steps.clear()

    store = DropsEveryRecord()
    with pytest.raises(StoreConformanceError, match="must leave the records of .* alone"):
        check_checkpoint_store(lambda: store, checks=REBASE_CHECKS)


def test_the_set_base_checks_catch_a_set_base_without_the_sync_flag() -> None:
    class NoSync(Rebasing):
        def set_base(self, checkpoint_id: str, data: bytes) -> None:  # type: ignore[override]
            super().set_base(checkpoint_id, data)

    store = NoSync()
    with pytest.raises(TypeError, match="sync"):
        check_checkpoint_store(lambda: store, checks=REBASE_CHECKS)


def test_the_set_base_checks_catch_a_torn_base() -> None:
    class TornBase(Rebasing):
        def get(self, checkpoint_id: str) -> bytes | None:
            value = super().get(checkpoint_id)
            return value[: len(value) // 2] if value is not None and len(value) > 1000 else value

    store = TornBase()
    concurrent = [check for check in REBASE_CHECKS if "concurrent" in check.__name__]
    with no_thread_leak(), pytest.raises(StoreConformanceError, match="never written whole"):
        check_checkpoint_store(lambda: store, checks=concurrent)


def test_a_failing_custom_check_is_named_in_the_error() -> None:
    def check_nothing_is_stored(make_store: object) -> None:
        raise AssertionError("the store kept something")

    with pytest.raises(StoreConformanceError, match="^check_nothing_is_stored: the store kept"):
        check_checkpoint_store(PlainStore, checks=[check_nothing_is_stored])


def test_a_store_that_raises_in_a_thread_fails_the_concurrency_checks() -> None:
    class FlakyStore(PlainStore):
        def set(self, checkpoint_id: str, data: bytes) -> None:
            if threading.current_thread() is not threading.main_thread():
                raise OSError("disk on fire")
            super().set(checkpoint_id, data)

    store = FlakyStore()
    parallel_writes = [check for check in ALL_CHECKS if check.__name__ == "check_threads_write_distinct_ids"]
    with no_thread_leak(), pytest.raises(StoreConformanceError, match=r"parallel writes: set raised OSError"):
        check_checkpoint_store(lambda: store, checks=parallel_writes)


# -- run_events --------------------------------------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """Return the weather in a city."""
    return f"Sunny in {city}."


def weather_agent() -> ChatModelAgent:
    model = ScriptedChatModel([calls_message(call("get_weather", {"city": "Paris"}, id="w1")), "Sunny."])
    return ChatModelAgent("a", "answers", model, tools=[get_weather])


def test_run_events_drains_an_event_iterator() -> None:
    events = run_events(Runner(weather_agent()).query("hi"))
    assert [summarize(event) for event in events] == [
        ("a", ["a"], "assistant", "", None),
        ("a", ["a"], "tool/get_weather", "Sunny in Paris.", None),
        ("a", ["a"], "assistant", "Sunny.", None),
    ]


def test_run_events_starts_the_run_itself_when_given_a_callable() -> None:
    events = run_events(lambda: Runner(weather_agent(), enable_streaming=True).query("hi"))
    assert summarize(events[-1]) == ("a", ["a"], "assistant", "Sunny.", None)


def leaky_run(gate: threading.Event) -> Iterator[str]:
    """Starts a thread that outlives the run (it waits for ``gate``)."""
    threading.Thread(target=gate.wait, name="leaky-tool").start()
    return iter(["only event"])


def test_run_events_fails_a_run_that_leaves_a_thread_behind() -> None:
    gate = threading.Event()
    try:
        with pytest.raises(ThreadLeakError, match="leaky-tool"):
            run_events(lambda: leaky_run(gate), timeout=0.1)  # type: ignore[arg-type, return-value]
    finally:
        gate.set()


# -- FakeOpenAIServer --------------------------------------------------------------------------


def test_stopping_the_server_joins_its_connection_threads() -> None:
    before = set(threading.enumerate())
    server = FakeOpenAIServer().start()
    server.queue(Reply("hello"))
    host, port = server.base_url.removeprefix("http://").removesuffix("/v1").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert json.loads(response.read())["choices"][0]["message"]["content"] == "hello"
        # The kept-alive connection still has its handler thread waiting for a request.
        assert len(set(threading.enumerate()) - before) == 2
        server.stop()
        assert set(threading.enumerate()) - before == set()
    finally:
        connection.close()
        server.stop()


def test_the_server_answers_a_chat_model_agent_over_real_http() -> None:
    # The server's connection threads live as long as the server, not the run: watch both.
    with no_thread_leak(), FakeOpenAIServer() as server:
        server.queue(Reply(tool_calls=[call("get_weather", {"city": "Oslo"}, id="w1")]), Reply("Sunny."))
        model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="sk-test")
        agent = ChatModelAgent("a", "answers", model, tools=[get_weather])
        events = list(Runner(agent, enable_streaming=True).query("Weather in Oslo?"))
    assert [summarize(event)[2:4] for event in events] == [
        ("assistant", ""),
        ("tool/get_weather", "Sunny in Oslo."),
        ("assistant", "Sunny."),
    ]
    assert server.requests[1]["messages"][-1] == {
        "role": "tool",
        "content": "Sunny in Oslo.",
        "tool_call_id": "w1",
    }


def test_no_thread_leak_inside_the_servers_block_ignores_its_keep_alive_connections() -> None:
    # The way a user writes it: the server around the test, the check around the run. The
    # model's client keeps its connection open after the run, and with it the server's
    # connection thread; the check ends at once (it used to fail after its 10 s timeout).
    with FakeOpenAIServer() as server:
        server.queue("Hello!", "Again!")
        model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="sk-test")
        agent = ChatModelAgent("a", "answers", model)
        with no_thread_leak(timeout=GUARD):
            assert Runner(agent).invoke("Hi").text == "Hello!"
        [connection] = server.owned_threads()
        assert connection.name == "FakeOpenAIServer connection 1" and connection.is_alive()
        with no_thread_leak(timeout=GUARD):  # the same connection again, then a new one
            assert Runner(agent, enable_streaming=True).invoke("Hi").text == "Again!"
        model.close()
    assert server.owned_threads() == []
    assert not connection.is_alive()


def test_no_thread_leak_inside_the_servers_block_still_reports_the_runs_own_threads() -> None:
    gate = threading.Event()
    with FakeOpenAIServer() as server:
        server.queue(Reply(tool_calls=[call("leaky_tool", id="t1")]), "done")
        model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="sk-test")

        @tool
        def leaky_tool() -> str:
            """Leave a thread behind."""
            threading.Thread(target=gate.wait, name="left-by-the-tool", daemon=True).start()
            return "ok"

        agent = ChatModelAgent("a", "answers", model, tools=[leaky_tool])
        try:
            with pytest.raises(ThreadLeakError) as caught, no_thread_leak(timeout=0.1):
                assert Runner(agent).invoke("Hi").text == "done"
        finally:
            gate.set()
        model.close()
    assert "left-by-the-tool" in str(caught.value)
    assert "FakeOpenAIServer" not in str(caught.value)


def test_a_server_started_inside_the_block_and_left_running_is_a_leak() -> None:
    server = None
    try:
        with pytest.raises(ThreadLeakError, match="FakeOpenAIServer"), no_thread_leak(timeout=0.1):
            server = FakeOpenAIServer().start()
    finally:
        if server is not None:
            server.stop()


def test_the_server_runs_in_its_own_process_until_stdin_closes() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "agentkit.testing._openai_server", "--content", "From afar."],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        base_url = process.stdout.readline().strip()
        model = OpenAIChatModel("gpt-test", base_url=base_url, api_key="sk-test")
        assert model.generate([user_message("hi")]).content == "From afar."
        model.close()
        process.stdin.close()
        assert process.stdout.read().strip() == "connections: 1"
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
