"""Where threads start: one way inside a run (``RunScope.spawn``), a few named ones outside.

The structural test reads agentkit's source: a thread, a thread pool, a timer or a context
copy may only appear in the modules listed in ``ALLOWED``. The behaviour tests run real
agents on real threads; tools meet at barriers, so every count is taken while all the work
of a run is alive at once, and no test depends on timing.
"""

from __future__ import annotations

import ast
import contextvars
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    Agent,
    AgentCancelledError,
    AgentTool,
    CancelHandle,
    CancelMode,
    ChatModelAgent,
    LoopAgent,
    Message,
    ParallelAgent,
    Role,
    Runner,
    SequentialAgent,
    ToolTimeoutError,
    assistant_message,
    cancellable_sleep,
    check_cancelled,
    get_session_value,
    tool,
    with_cancel,
    with_session_values,
)
from agentkit._runctx import current_frame
from agentkit._scope import RunScope
from agentkit._spawn import RunEndedError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak

GUARD = 30.0  # a failure guard for waits, never a pace
ROOT = Path(__file__).resolve().parent.parent / "agentkit"

# Modules that may start threads or copy contexts themselves, and why.
ALLOWED = {
    "agentkit._spawn": "the run's pool: RunScope.spawn, the one way inside a run",
    "agentkit._agent": "the run worker: starts the run itself, before any scope work",
    "agentkit._refresher": "the process's one refreshing thread for run leases and "
    "conversation locks: started with the first, joined with the last",
    "agentkit._aioloop": "the process's asyncio loop (async tools, MCP): started on first use, "
    "joined at exit; runs no thread per call",
    "agentkit.conversation.conformance": "a conformance suite for stores (test helper)",
    "agentkit.memory.conformance": "a conformance suite for memory stores (test helper)",
}
ALLOWED_PACKAGES = {
    "agentkit.integrations": "Celery and background runs: start and watch whole runs",
    "agentkit.testing": "test helpers that race threads on purpose",
    "agentkit.evals": "evaluate(): whole runs, one per case, on a pool the call owns and joins",
}
FORBIDDEN = {
    "threading.Thread",
    "threading.Timer",
    "concurrent.futures.ThreadPoolExecutor",
    "concurrent.futures.thread.ThreadPoolExecutor",
    "contextvars.copy_context",
    "multiprocessing.pool.ThreadPool",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def thread_starts(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, what)`` for every call or subclass of a forbidden name (aliases resolved)."""
    aliases: dict[str, str] = {}  # local name -> full dotted name
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            used = [node.func]
        elif isinstance(node, ast.ClassDef):
            used = list(node.bases)
        else:
            continue
        for expression in used:
            dotted = _dotted(expression)
            if dotted is None:
                continue
            head, _, rest = dotted.partition(".")
            full = aliases.get(head, head) + (f".{rest}" if rest else "")
            if full in FORBIDDEN:
                found.append((expression.lineno, full))
    return found


def allowed(module: str) -> bool:
    return module in ALLOWED or any(
        module == package or module.startswith(package + ".") for package in ALLOWED_PACKAGES
    )


def test_threads_start_only_in_the_allowed_modules() -> None:
    offences = []
    starters = set()
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        found = thread_starts(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            starters.add(module)
        if found and not allowed(module):
            offences += [f"{module}:{line} uses {what}" for line, what in found]
    assert not offences, (
        "start concurrent work inside a run with RunScope.spawn (agentkit.cancel), which "
        "copies the context and joins the thread when the run ends:\n" + "\n".join(offences)
    )
    assert starters >= set(ALLOWED), f"stale entries in ALLOWED: {set(ALLOWED) - starters}"


def test_the_scan_sees_aliases_and_references() -> None:
    source = (
        "import threading as t\n"
        "from concurrent.futures import ThreadPoolExecutor as Pool\n"
        "from contextvars import copy_context\n"
        "class Keeper(t.Thread): ...\n"
        "def f():\n"
        "    Pool(2)\n"
        "    return copy_context().run(print)\n"
        "threading_docs = 'threading.Thread('\n"
        "def g(thread: t.Thread) -> None: ...\n"
    )
    assert thread_starts(ast.parse(source)) == [
        (4, "threading.Thread"),
        (6, "concurrent.futures.ThreadPoolExecutor"),
        (7, "contextvars.copy_context"),
    ]


# --- RunScope.spawn itself ---------------------------------------------------------------

_probe: contextvars.ContextVar[str] = contextvars.ContextVar("probe", default="unset")


def test_spawned_work_runs_named_in_a_copy_of_the_callers_context() -> None:
    scope = RunScope()
    with no_thread_leak():
        token = _probe.set("caller's")
        try:
            future = scope.spawn(
                lambda suffix: (_probe.get() + suffix, threading.current_thread().name),
                "!",
                name="agentkit-test probe",
            )
            assert future.result(GUARD) == ("caller's!", "agentkit-test probe")
        finally:
            _probe.reset(token)
        scope.finish()


def test_a_spawned_exception_reaches_the_waiter_with_its_traceback() -> None:
    scope = RunScope()

    def fail() -> None:
        raise LookupError("from the spawned thread")

    with no_thread_leak():
        future = scope.spawn(fail, name="agentkit-test fail")
        error = future.exception(GUARD)
        scope.finish()
    assert isinstance(error, LookupError) and error.__traceback__ is not None


def test_spawned_work_waiting_for_work_it_spawned_never_deadlocks() -> None:
    depth = 64  # far more than any bounded pool agentkit ever had per fork
    scope = RunScope()
    bottom = threading.Event()

    def level(n: int) -> int:
        if n == depth:
            bottom.set()
            return n
        return scope.spawn(level, n + 1, name=f"agentkit-test level {n + 1}").result(GUARD)

    with no_thread_leak():
        assert scope.spawn(level, 1, name="agentkit-test level 1").result(GUARD) == depth
        assert bottom.is_set()
        scope.finish()


def test_finish_joins_every_spawned_thread_and_refuses_later_work() -> None:
    scope = RunScope()
    running = threading.Barrier(4, timeout=GUARD)
    before = set(threading.enumerate())
    futures = [scope.spawn(running.wait, name=f"agentkit-test {i}") for i in range(3)]
    running.wait()
    for future in futures:
        future.result(GUARD)
    scope.finish()
    # Joined, not merely finishing: nothing new is alive the moment finish() returns.
    assert [t.name for t in threading.enumerate() if t not in before] == []
    with pytest.raises(RunEndedError, match="already ended"):
        scope.spawn(print, name="agentkit-test late")


def test_released_work_keeps_its_thread_but_the_run_does_not_wait_for_it() -> None:
    scope = RunScope()
    started, release = threading.Event(), threading.Event()

    def hang() -> str:
        started.set()
        release.wait(GUARD)
        return "late"

    future = scope.spawn(hang, name="agentkit-test released")
    assert started.wait(GUARD)
    scope.release(future)
    scope.finish()  # returns although the work still runs
    (thread,) = [t for t in threading.enumerate() if t.name == "agentkit-test released"]
    release.set()
    thread.join(GUARD)
    assert not thread.is_alive() and future.result() == "late"


# --- runs: thread counts, joins, context ---------------------------------------------------


class Census:
    """Names of the threads alive beyond those before the run, taken when a barrier trips."""

    def __init__(self, parties: int) -> None:
        self.before = set(threading.enumerate())
        self.names: list[str] = []
        self.barrier = threading.Barrier(parties, action=self.take, timeout=GUARD)

    def take(self) -> None:
        self.names = sorted(t.name for t in threading.enumerate() if t not in self.before)


def leaf(name: str, census: Census, calls: int = 2) -> ChatModelAgent:
    """An agent whose model asks for ``calls`` parallel tool calls that meet at the barrier."""

    def meet() -> str:
        """Wait for every tool call of the run."""
        census.barrier.wait()
        return "met"

    meet.__name__ = f"meet_{name}"

    def reply(messages: list[Message]) -> Message:
        if messages[-1].role is Role.TOOL:
            return assistant_message("done")
        return calls_message(*[call(meet.__name__) for _ in range(calls)])

    return ChatModelAgent(name, "meets", ScriptedChatModel(reply), tools=[tool(meet)])


def flat(census: Census, width: int) -> Agent:
    return ParallelAgent("par", "flat", [leaf(f"l{i}", census) for i in range(width)])


def nested(census: Census, width: int) -> Agent:
    """``Par(l0, Seq(Loop(Par(l1, Seq(Loop(Par(l2, ...)))))))``: one level per leaf."""
    inner: Agent = leaf(f"l{width - 1}", census)
    for level in reversed(range(width - 1)):
        wrapped = SequentialAgent(f"s{level}", "d", [LoopAgent(f"o{level}", "d", [inner], 1)])
        inner = ParallelAgent(f"p{level}", "nested", [leaf(f"l{level}", census), wrapped])
    return inner


def census_of(make: Callable[[Census, int], Agent], width: int) -> list[str]:
    census = Census(parties=2 * width)  # every tool call of every leaf at once
    with no_thread_leak():
        events = list(Runner(make(census, width)).query("go"))
    assert [e.err for e in events if e.err is not None] == []
    return census.names


@pytest.mark.parametrize("width", [2, 4])
def test_parallel_in_parallel_with_parallel_tools_needs_no_thread_per_level(width: int) -> None:
    flat_names = census_of(flat, width)
    nested_names = census_of(nested, width)
    # The run's worker, one thread per branch but the first (which runs in its parent's
    # thread), one per tool call: the same for any nesting depth.
    assert len(flat_names) == len(nested_names) == 1 + (width - 1) + 2 * width
    assert flat_names.count("agentkit-run") == nested_names.count("agentkit-run") == 1
    assert sum(n.startswith("agentkit-tool meet_") for n in nested_names) == 2 * width
    assert sum(n.startswith("agentkit-parallel ") for n in nested_names) == width - 1


def test_tools_that_run_parallels_with_parallel_tools_do_not_deadlock() -> None:
    # 3 agent tools, each a Parallel of 2 leaves of 2 tool calls: 12 calls that can only
    # pass their barrier together, 19 threads at once (no pool bound to run out of).
    census = Census(parties=12)
    inner = [
        AgentTool(ParallelAgent(f"team{i}", "d", [leaf(f"t{i}a", census), leaf(f"t{i}b", census)]))
        for i in range(3)
    ]
    script = ScriptedChatModel(
        [calls_message(*[call(f"team{i}", {"request": "go"}) for i in range(3)]), "all done"]
    )
    agent = ChatModelAgent("boss", "d", script, tools=list(inner))
    with no_thread_leak():
        events = list(Runner(agent).query("go"))
    assert events[-1].get_message() == assistant_message("all done")
    assert len(census.names) == 1 + 3 + 3 + 12, census.names


def test_every_thread_of_a_run_is_joined_when_its_iterator_ends() -> None:
    census = Census(parties=6)
    before = set(threading.enumerate())
    events = list(Runner(nested(census, 3)).query("go"))
    assert events and len(census.names) == 1 + 2 + 6
    # No grace period: the run joined its threads before the iterator reported its end.
    assert [t.name for t in threading.enumerate() if t not in before] == []


def where() -> str:
    """The last segment of the current run address (a tool's own)."""
    frame = current_frame()
    assert frame is not None
    return frame.address[-1]


def test_spawned_work_sees_the_session_and_the_cancel_of_its_run() -> None:
    handle = CancelHandle()
    cancelled, seen = threading.Event(), []
    both = threading.Barrier(2, timeout=GUARD)

    @tool
    def canceller() -> str:
        """Cancel the run."""
        both.wait()
        seen.append(("canceller", get_session_value("who"), where()))
        handle.cancel(CancelMode.IMMEDIATE)
        cancelled.set()
        return "cancelled"

    @tool
    def watcher() -> str:
        """Watch for the cancel."""
        both.wait()
        seen.append(("watcher", get_session_value("who"), where()))
        assert cancelled.wait(GUARD)
        try:
            check_cancelled()
        except AgentCancelledError:
            seen.append(("watcher", "saw the cancel", ""))
        try:
            cancellable_sleep(GUARD)  # wakes at once: the cancel already happened
        except AgentCancelledError:
            seen.append(("watcher", "woke", ""))
        return "watched"

    model = ScriptedChatModel(
        [calls_message(call("canceller", id="c1"), call("watcher", id="w1")), "unreachable"]
    )
    agent = ChatModelAgent("a", "d", model, tools=[canceller, watcher])
    with no_thread_leak():
        events = list(
            Runner(agent).query("go", with_session_values({"who": "alice"}), with_cancel(handle))
        )
    assert sorted(seen) == [
        ("canceller", "alice", "tool:canceller:c1"),
        ("watcher", "alice", "tool:watcher:w1"),
        ("watcher", "saw the cancel", ""),
        ("watcher", "woke", ""),
    ]
    assert isinstance(events[-1].err, AgentCancelledError)
    assert handle.wait(GUARD)


def test_a_parallel_branch_on_a_spawned_thread_sees_the_session() -> None:
    seen: dict[str, Any] = {}

    def branch(name: str) -> ChatModelAgent:
        @tool
        def look() -> str:
            """Look at the session."""
            seen[name] = (get_session_value("who"), threading.current_thread().name)
            return "looked"

        model = ScriptedChatModel([calls_message(call("look")), "done"])
        return ChatModelAgent(name, "d", model, tools=[look])

    agent = ParallelAgent("par", "d", [branch("first"), branch("second")])
    with no_thread_leak():
        list(Runner(agent).query("go", with_session_values({"who": "bob"})))
    assert seen["first"] == ("bob", "agentkit-run")  # the first branch runs inline
    assert seen["second"] == ("bob", "agentkit-parallel par")


def test_a_cancel_with_a_grace_period_leaves_no_escalation_thread_behind() -> None:
    handle = CancelHandle()
    during: list[list[str]] = []

    @tool
    def stop() -> str:
        """Ask the run to stop after this round, with an hour of grace."""
        handle.cancel(CancelMode.AFTER_TOOL_CALLS, timeout=3600)
        during.append([t.name for t in threading.enumerate()])
        return "asked"

    model = ScriptedChatModel([calls_message(call("stop")), "unreachable"])
    agent = ChatModelAgent("a", "d", model, tools=[stop])
    before = set(threading.enumerate())
    events = list(Runner(agent).query("go", with_cancel(handle)))
    assert "agentkit-cancel-escalation" in during[0]  # waiting on the run, not on a clock
    assert isinstance(events[-1].err, AgentCancelledError)
    assert not events[-1].err.escalated
    assert [t.name for t in threading.enumerate() if t not in before] == []


def test_an_abandoned_timed_call_is_spawned_and_let_go_by_its_run() -> None:
    started, release = threading.Event(), threading.Event()

    @tool(timeout=0.1)
    def hang() -> str:
        """Hang until released (always longer than the limit)."""
        started.set()
        release.wait(GUARD)
        return "too late"

    model = ScriptedChatModel([calls_message(call("hang")), "unreachable"])
    agent = ChatModelAgent("a", "d", model, tools=[hang])
    before = set(threading.enumerate())
    try:
        events = list(Runner(agent).query("go"))
        left = [t for t in threading.enumerate() if t not in before]
        assert [t.name for t in left] == ["agentkit-tool hang (timed)"]
    finally:
        release.set()
    assert isinstance(events[-1].err, ToolTimeoutError)
    for thread in left:
        thread.join(GUARD)
        assert not thread.is_alive()
