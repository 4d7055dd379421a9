"""``async def`` tools: tasks on agentkit's one event loop, with the rules of plain tools.

Every call runs on the process's ``agentkit-asyncio`` thread, in the context of the agent
run; a time limit or a cancel of the run cancels the task, and the caller goes on only once
the coroutine finished its cleanup. Coroutines wait on asyncio events the test controls, so
no limit fires because a machine is slow.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    AgentCancelledError,
    CancelHandle,
    CancelMode,
    ChatModelAgent,
    Role,
    Runner,
    ToolError,
    ToolTimeoutError,
    check_cancelled,
    get_session_value,
    get_tool_options,
    interrupt,
    tool,
    with_cancel,
    with_checkpoint_id,
    with_session_values,
    with_tool_options,
)
from agentkit._aioloop import THREAD_NAME
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak, summarize

GUARD = 30.0  # a failure guard for waits, never a pace
ROOT = Path(__file__).resolve().parent.parent


def one_call(name: str, arguments: dict[str, Any] | None = None) -> ScriptedChatModel:
    return ScriptedChatModel([calls_message(call(name, arguments or {}, id="c1")), "done"])


class Gate:
    """An event a coroutine awaits and the test sets from its own thread (or never)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.ended = threading.Event()
        self.cancelled = threading.Event()
        self._release = threading.Event()

    def release(self) -> None:
        self._release.set()

    async def wait(self) -> None:
        self.started.set()
        try:
            while not self._release.is_set():
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        finally:
            self.ended.set()


# --- what a call sees -------------------------------------------------------------------------


def test_a_call_runs_on_the_loop_thread_in_the_runs_context() -> None:
    seen: dict[str, Any] = {}

    @tool
    async def look(city: str, days: int = 1) -> dict[str, Any]:
        """Look around.

        Args:
            city: where.
            days: how long.
        """
        seen["thread"] = threading.current_thread().name
        seen["who"] = get_session_value("who")
        seen["options"] = get_tool_options()
        await asyncio.sleep(0)
        return {"city": city, "days": days}

    assert look.info().parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "where."},
            "days": {"type": "integer", "description": "how long.", "default": 1},
        },
        "required": ["city"],
    }
    model = one_call("look", {"city": "Oslo", "days": "2"})
    result = Runner(ChatModelAgent("a", "d", model, tools=[look])).invoke(
        "go", with_session_values({"who": "ada"}), with_tool_options(unit="C")
    )
    assert result.text == "done"
    assert model.calls[1].messages[-1].content == '{"city": "Oslo", "days": 2}'
    assert seen == {"thread": THREAD_NAME, "who": "ada", "options": {"unit": "C"}}
    assert asyncio.run(look("Rome")) == {"city": "Rome", "days": 1}  # still the function


def make_tool(kind: str, body: Callable[[], Any], **options: Any) -> Any:
    """The same tool as a plain and as an async function."""
    if kind == "sync":

        def act() -> Any:
            return body()

    else:

        async def act() -> Any:  # type: ignore[misc]
            await asyncio.sleep(0)
            return body()

    act.__doc__ = "Act."
    return tool(act, **options)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_exception_is_handled_as_for_a_plain_tool(kind: str) -> None:
    def fail() -> str:
        raise LookupError("no such city")

    # without a handler: the run ends with the tool's error
    model = one_call("act")
    events = list(Runner(ChatModelAgent("a", "d", model, tools=[make_tool(kind, fail)])).query("go"))
    error = events[-1].err
    assert isinstance(error, ToolError) and isinstance(error.__cause__, LookupError)
    assert "no such city" in str(error)
    # with a handler: the model is told
    model = one_call("act")
    agent = ChatModelAgent(
        "a", "d", model, tools=[make_tool(kind, fail)],
        tool_exception_handler=lambda error, info: f"failed: {error}",
    )
    assert Runner(agent).invoke("go").text == "done"
    assert model.calls[1].messages[-1].content == "failed: no such city"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_unencodable_result_is_the_same_tool_error(kind: str) -> None:
    tool_ = make_tool(kind, object)
    with pytest.raises(ToolError, match="act: the result cannot be encoded as JSON: result is of"):
        tool_.invoke("")


# --- time limits and cancels ------------------------------------------------------------------


def test_a_time_limit_cancels_the_coroutine_and_ends_the_run_with_tool_timeout_error() -> None:
    gate = Gate()

    @tool(timeout=0.2)
    async def hang() -> str:
        """Hang until released."""
        await gate.wait()
        return "too late"

    model = one_call("hang")
    with no_thread_leak(timeout=GUARD):
        events = list(Runner(ChatModelAgent("a", "d", model, tools=[hang])).query("go"))
        assert gate.cancelled.wait(GUARD) and gate.ended.wait(GUARD)
    error = events[-1].err
    assert isinstance(error, ToolTimeoutError)
    assert (error.tool_name, error.call_id) == ("hang", "c1")
    assert "did not finish within 0.2 seconds" in str(error)
    assert len(model.calls) == 1


def test_a_timed_out_async_call_goes_back_to_the_model_with_a_handler() -> None:
    gate = Gate()

    @tool
    async def hang() -> str:
        """Hang until released."""
        await gate.wait()
        return "too late"

    model = one_call("hang")
    agent = ChatModelAgent(
        "a", "d", model, tools=[hang], tool_timeout=0.2,
        tool_exception_handler=lambda error, info: type(error).__name__,
    )
    assert Runner(agent).invoke("go").text == "done"
    assert model.calls[1].messages[-1].content == "ToolTimeoutError"
    assert gate.cancelled.wait(GUARD)


class SlowCleanup:
    """A coroutine whose cleanup after a cancel takes a while (awaits), then says it ended."""

    def __init__(self, cleanup: float = 0.3) -> None:
        self.started = threading.Event()
        self.cleaned = threading.Event()
        self._cleanup = cleanup

    async def wait(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()  # never set: only a cancel ends it
        except asyncio.CancelledError:
            await asyncio.sleep(self._cleanup)  # a cleanup that awaits (closing a connection)
            self.cleaned.set()
            raise


def test_a_time_limit_waits_for_the_coroutines_cleanup_before_the_run_goes_on() -> None:
    work = SlowCleanup()

    @tool(timeout=0.2)
    async def hang() -> str:
        """Hang until cancelled."""
        await work.wait()
        return "never"

    # the handler runs where the run goes on after the limit: the cleanup has run by then
    model = one_call("hang")
    agent = ChatModelAgent(
        "a", "d", model, tools=[hang],
        tool_exception_handler=lambda error, info: (
            f"{type(error).__name__}, cleaned up: {work.cleaned.is_set()}"
        ),
    )
    with no_thread_leak(timeout=GUARD):
        assert Runner(agent).invoke("go").text == "done"
    assert model.calls[1].messages[-1].content == "ToolTimeoutError, cleaned up: True"

    # without a handler the run ends with the limit's error, once the cleanup ran
    work = SlowCleanup()
    with no_thread_leak(timeout=GUARD):
        events = list(Runner(ChatModelAgent("a", "d", one_call("hang"), tools=[hang])).query("go"))
        assert work.cleaned.is_set()
    assert isinstance(events[-1].err, ToolTimeoutError)


def test_cancelling_a_run_during_a_timed_async_call_waits_for_its_cleanup() -> None:
    work = SlowCleanup()
    handle = CancelHandle()

    @tool(timeout=GUARD)
    async def hang() -> str:
        """Hang until cancelled."""
        await work.wait()
        return "never"

    runner = Runner(ChatModelAgent("a", "d", one_call("hang"), tools=[hang]))
    with no_thread_leak(timeout=GUARD):
        events = runner.query("go", with_cancel(handle))
        assert work.started.wait(GUARD)
        handle.cancel(CancelMode.IMMEDIATE)
        collected = list(events)
        assert work.cleaned.is_set()
    assert isinstance(collected[-1].err, AgentCancelledError)


def test_a_cleanup_that_never_ends_holds_the_run_only_for_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentkit.agents import _react

    monkeypatch.setattr(_react, "CLEANUP_WAIT", 0.2)
    stuck = threading.Event()
    release = threading.Event()

    @tool(timeout=0.2)
    async def stubborn() -> str:
        """Ignore the first cancel until released."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            stuck.set()
            while not release.is_set():  # a cleanup that outlives any patience
                try:
                    await asyncio.sleep(0.01)
                except asyncio.CancelledError:
                    pass
            raise
        return "never"

    with no_thread_leak(timeout=GUARD):  # the abandoned call's thread ends once released
        try:
            runner = Runner(ChatModelAgent("a", "d", one_call("stubborn"), tools=[stubborn]))
            events = list(runner.query("go"))
            assert stuck.is_set()  # the run went on while the cleanup still ran
            assert isinstance(events[-1].err, ToolTimeoutError)
        finally:
            release.set()


@pytest.mark.parametrize("streaming", [False, True])
def test_cancelling_the_run_cancels_the_task_and_waits_for_its_cleanup(streaming: bool) -> None:
    gate = Gate()
    handle = CancelHandle()

    @tool
    async def wait_forever() -> str:
        """Wait."""
        await gate.wait()
        return "never"

    model = one_call("wait_forever")
    runner = Runner(ChatModelAgent("a", "d", model, tools=[wait_forever]), enable_streaming=streaming)
    with no_thread_leak(timeout=GUARD):
        events = runner.query("go", with_cancel(handle))
        assert gate.started.wait(GUARD)
        handle.cancel(CancelMode.IMMEDIATE)
        collected = list(events)
        # the coroutine's finally ran before the run reported its end
        assert gate.cancelled.is_set() and gate.ended.is_set()
    assert isinstance(collected[-1].err, AgentCancelledError)
    assert handle.wait(GUARD)


def test_a_cancel_before_the_caller_waits_still_waits_for_the_cleanup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cancel lands after the coroutine started but before the calling thread waits for
    it (a loaded machine): the run still ends only once the coroutine's ``finally`` ran."""
    from agentkit._aioloop import start_task as real_start
    from agentkit.tools import _async

    gate = Gate()
    handle = CancelHandle()
    cancelled = threading.Event()

    def start_then_stall(*args: Any, **kwargs: Any) -> Any:
        task = real_start(*args, **kwargs)
        assert cancelled.wait(GUARD)  # the caller reaches its wait only after the cancel
        return task

    monkeypatch.setattr(_async, "start_task", start_then_stall)

    @tool
    async def wait_forever() -> str:
        """Wait."""
        await gate.wait()
        return "never"

    runner = Runner(ChatModelAgent("a", "d", one_call("wait_forever"), tools=[wait_forever]))
    with no_thread_leak(timeout=GUARD):
        events = runner.query("go", with_cancel(handle))
        assert gate.started.wait(GUARD)
        handle.cancel(CancelMode.IMMEDIATE)
        cancelled.set()
        collected = list(events)
        assert gate.cancelled.is_set() and gate.ended.is_set()
    assert isinstance(collected[-1].err, AgentCancelledError)


def test_closing_the_event_iterator_cancels_the_task() -> None:
    gate = Gate()

    @tool
    async def wait_forever() -> str:
        """Wait."""
        await gate.wait()
        return "never"

    with no_thread_leak(timeout=GUARD):
        with Runner(ChatModelAgent("a", "d", one_call("wait_forever"), tools=[wait_forever])).query(
            "go"
        ) as events:
            next(events)  # the model's call
            assert gate.started.wait(GUARD)
        assert gate.cancelled.wait(GUARD)


def test_check_cancelled_inside_a_coroutine_sees_the_runs_cancel() -> None:
    handle = CancelHandle()
    outcome: list[str] = []

    @tool
    async def polite() -> str:
        """Check for the cancel between steps."""
        handle.cancel(CancelMode.AFTER_TOOL_CALLS)
        check_cancelled()  # a safe-point cancel does not stop a tool
        outcome.append("went on")
        return "ok"

    model = ScriptedChatModel([calls_message(call("polite", id="c1")), "unreachable"])
    events = list(Runner(ChatModelAgent("a", "d", model, tools=[polite])).query("go", with_cancel(handle)))
    assert outcome == ["went on"]
    assert isinstance(events[-1].err, AgentCancelledError)
    assert [summarize(e)[2:4] for e in events[:-1]] == [("assistant", ""), ("tool/polite", "ok")]


# --- concurrency ------------------------------------------------------------------------------


def test_sixteen_calls_of_one_round_run_at_once_on_the_one_loop() -> None:
    arrived: list[str] = []
    threads: set[str] = set()
    all_in = threading.Event()

    @tool
    async def meet(n: int) -> str:
        """Meet the others."""
        threads.add(threading.current_thread().name)
        arrived.append(str(n))
        if len(arrived) == 16:
            all_in.set()
        # returns only once all 16 calls are in flight together
        for _ in range(int(GUARD / 0.01)):
            if all_in.is_set():
                return f"met {n}"
            await asyncio.sleep(0.01)
        raise AssertionError("the 16 calls never ran at once")

    model = ScriptedChatModel(
        [calls_message(*[call("meet", {"n": n}, id=f"m{n}") for n in range(16)]), "all met"]
    )
    with no_thread_leak(timeout=GUARD):
        result = Runner(ChatModelAgent("a", "d", model, tools=[meet])).invoke("go")
    assert result.text == "all met"
    sent = {m.tool_call_id: m.content for m in model.calls[1].messages if m.role is Role.TOOL}
    assert sent == {f"m{n}": f"met {n}" for n in range(16)}
    assert threads == {THREAD_NAME}


def test_sixteen_threads_invoking_at_once_share_the_loop() -> None:
    start = threading.Barrier(16, timeout=GUARD)
    loops: set[int] = set()

    @tool
    async def where() -> int:
        """Which loop."""
        loops.add(id(asyncio.get_running_loop()))
        await asyncio.sleep(0.05)
        return 1

    results: list[str] = []

    def caller() -> None:
        start.wait()
        results.append(where.invoke(""))

    workers = [threading.Thread(target=caller) for _ in range(16)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(GUARD)
    assert results == ["1"] * 16 and len(loops) == 1


# --- interrupts and streams -------------------------------------------------------------------


def test_an_async_tool_can_interrupt_and_be_resumed() -> None:
    @tool
    async def pay(amount: int) -> str:
        """Pay after a human said yes."""
        await asyncio.sleep(0)
        answer = interrupt(f"pay {amount}?")
        return f"paid {amount}" if answer == "yes" else "not paid"

    store = InMemoryCheckPointStore()
    model = ScriptedChatModel([calls_message(call("pay", {"amount": 5}, id="p1")), "done"])
    runner = Runner(ChatModelAgent("a", "d", model, tools=[pay]), checkpoint_store=store)
    first = runner.invoke("pay", with_checkpoint_id("run-1"))
    assert first.interrupt is not None
    [context] = first.interrupt.contexts
    assert context.info == "pay 5?"
    resumed = runner.resume("run-1", targets={context.id: "yes"}).result()
    assert resumed.text == "done"
    assert model.calls[1].messages[-1].content == "paid 5"


def test_an_async_generator_streams_its_items_and_is_closed_when_read_partly() -> None:
    closed = threading.Event()

    @tool
    async def count(to: int) -> AsyncIterator[str]:
        """Count."""
        try:
            for n in range(to):
                await asyncio.sleep(0)
                yield f"{n} "
        finally:
            closed.set()

    assert count.invoke('{"to": 3}') == "0 1 2 "
    reader = count.stream('{"to": 100}')
    assert reader.recv() == "0 "
    closed.clear()
    reader.close()
    assert closed.wait(GUARD)
    model = one_call("count", {"to": 4})
    result = Runner(ChatModelAgent("a", "d", model, tools=[count]), enable_streaming=True).invoke(
        "go"
    )
    assert model.calls[1].messages[-1].content == "0 1 2 3 "
    assert result.events[1].output.message_output.is_streaming  # type: ignore[union-attr]


def test_calling_an_async_tool_from_the_loop_itself_is_a_clear_error() -> None:
    @tool
    async def inner() -> str:
        """Inner."""
        return "inner"

    @tool
    async def outer() -> str:
        """Calls another tool the blocking way, from inside the loop."""
        return inner.invoke("")

    with pytest.raises(RuntimeError, match="agentkit's event loop cannot wait for itself"):
        outer.invoke("")
    assert inner.invoke("") == "inner"  # the loop is fine


# --- the caller's own loops -------------------------------------------------------------------


def test_inside_asyncio_run_the_callers_loop_is_left_alone() -> None:
    seen: dict[str, Any] = {}

    @tool
    async def where() -> str:
        """Which loop."""
        seen["tool_loop"] = asyncio.get_running_loop()
        return threading.current_thread().name

    async def main() -> str:
        seen["caller_loop"] = asyncio.get_running_loop()
        before = len(asyncio.all_tasks())
        text = Runner(ChatModelAgent("a", "d", one_call("where"), tools=[where])).invoke("go").text
        seen["tasks_added"] = len(asyncio.all_tasks()) - before
        return text

    assert asyncio.run(main()) == "done"
    assert seen["tool_loop"] is not seen["caller_loop"]
    assert seen["tasks_added"] == 0


def test_async_tools_in_a_real_jupyter_kernel() -> None:
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    cells = [
        "import asyncio, threading\n"
        "from agentkit import ChatModelAgent, Runner, tool\n"
        "from agentkit.testing import ScriptedChatModel, call, calls_message\n"
        "\n"
        "@tool\n"
        "async def weather(city: str) -> dict:\n"
        "    '''The weather in a city.'''\n"
        "    await asyncio.sleep(0.01)\n"
        "    return {'city': city, 'sky': 'clear', 'thread': threading.current_thread().name}\n"
        "\n"
        "print('kernel loop running:', asyncio.get_event_loop().is_running())",
        "model = ScriptedChatModel([calls_message(*[call('weather', {'city': c}) for c in "
        "('Oslo', 'Rome')]), 'Both clear.'])\n"
        "result = Runner(ChatModelAgent('a', 'd', model, tools=[weather])).invoke('weather?')\n"
        "print('answer:', result.text)\n"
        "print('tool said:', model.calls[1].messages[-1].content)",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    printed = "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout"
    )
    assert "kernel loop running: True" in printed
    assert "answer: Both clear." in printed
    assert 'tool said: {"city": "Rome", "sky": "clear", "thread": "agentkit-asyncio"}' in printed


# --- the loop's life --------------------------------------------------------------------------


def run_script(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


def test_a_program_without_async_tools_never_imports_asyncio() -> None:
    done = run_script(
        """
        import sys
        from agentkit import ChatModelAgent, Runner, tool
        from agentkit.models import OpenAIChatModel
        from agentkit.models import ScriptedChatModel
        from agentkit.testing import call, calls_message

        @tool
        def add(a: int, b: int) -> int:
            \"\"\"Add.\"\"\"
            return a + b

        model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 2})), "3"])
        assert Runner(ChatModelAgent("a", "d", model, tools=[add])).invoke("go").text == "3"
        print("asyncio" in sys.modules)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_loop_starts_on_first_use_and_is_joined_at_exit() -> None:
    done = run_script(
        """
        import asyncio, threading
        import agentkit
        from agentkit import tool
        from agentkit.testing import no_thread_leak

        assert [t.name for t in threading.enumerate()] == ["MainThread"]

        @tool
        async def start_background() -> str:
            '''Leave a task running on the loop.'''
            async def linger():
                try:
                    await asyncio.sleep(3600)
                finally:
                    print("background task cleaned up", flush=True)
            asyncio.get_running_loop().create_task(linger())
            return "started"

        with no_thread_leak():  # the loop's thread is the process's, not the block's
            print(start_background.invoke(""), flush=True)
        print(sorted(t.name for t in threading.enumerate()), flush=True)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "started",
        "['MainThread', 'agentkit-asyncio']",
        "background task cleaned up",  # at exit: cancelled, cleaned up, thread joined
    ]
    assert done.stderr == ""


def test_a_forked_child_runs_async_tools_on_a_loop_of_its_own() -> None:
    @tool
    async def pid() -> int:
        """The process id."""
        await asyncio.sleep(0)
        return os.getpid()

    assert pid.invoke("") == str(os.getpid())  # the parent's loop runs
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child process
        code = 1
        try:
            os.close(read)
            answer = {"pid": pid.invoke(""), "me": os.getpid()}
            os.write(write, json.dumps(answer).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = json.loads(pipe.read() or "{}")
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert answer["pid"] == str(answer["me"]) and answer["me"] != os.getpid()
    assert pid.invoke("") == str(os.getpid())  # the parent's loop is untouched


def test_mcp_connections_and_async_tools_share_the_loop() -> None:
    pytest.importorskip("mcp")
    from tests.mcp_servers.support import mcp_connections, toolbox_client

    @tool
    async def where() -> str:
        """Which thread."""
        return threading.current_thread().name

    with toolbox_client() as client:
        add = next(t for t in client.tools() if t.info().name == "add")
        assert add.invoke('{"a": 1, "b": 2}') == "3"  # type: ignore[attr-defined]
        assert len(mcp_connections()) == 1  # a task on the loop, not a thread
        assert where.invoke("") == THREAD_NAME
        names = [t.name for t in threading.enumerate()]
        assert names.count(THREAD_NAME) == 1
        assert not [name for name in names if name.startswith("agentkit-mcp")]

        @tool
        async def blocking_mcp_call() -> str:
            """Call an MCP tool the blocking way, from inside the loop."""
            return add.invoke('{"a": 1, "b": 1}')  # type: ignore[attr-defined,no-any-return]

        with pytest.raises(RuntimeError, match="cannot wait on agentkit's event loop thread"):
            blocking_mcp_call.invoke("")
        assert add.invoke('{"a": 2, "b": 2}') == "4"  # type: ignore[attr-defined]
    assert mcp_connections() == []


def test_system_exit_in_a_coroutine_reaches_the_caller_and_the_loop_goes_on() -> None:
    @tool
    async def leave() -> str:
        """Leave."""
        raise SystemExit(3)

    with pytest.raises(SystemExit) as caught:
        leave.invoke("")
    assert caught.value.code == 3

    @tool
    async def still() -> str:
        """Still there."""
        return "here"

    assert still.invoke("") == "here"
