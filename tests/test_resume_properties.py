"""Property test: random agent trees that interrupt, fail and are cancelled at random points.

For every tree, one run without mishaps gives the expected outcome. Then the same tree runs
with tools that interrupt (approved on resume), fail once, or cancel the run while they work,
and is resumed until it completes. Checked:

* each run segment ends with at most one cancel error, and nothing follows it;
* no tool call whose result was delivered ever runs again;
* resuming until completion delivers the same results as the run without mishaps: the same
  multiset of (agent, tool result or answer, text).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentTool,
    CancelHandle,
    ChatModelAgent,
    LoopAgent,
    Message,
    ParallelAgent,
    Role,
    Runner,
    SequentialAgent,
    check_cancelled,
    interrupt,
    set_sub_agents,
    tool,
    with_cancel,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.schema import FunctionCall, ToolCall
from agentkit.testing import calls_message, no_thread_leak, summarize

BEHAVIOURS = ("ok", "interrupt", "fail", "cancel")


class World:
    """What the tools of one scenario share: the log of executions and mishaps."""

    def __init__(self, mishaps: bool) -> None:
        self.mishaps = mishaps
        self.lock = threading.Lock()
        self.log: list[tuple[str, str]] = []  # ("exec" | "result", call key)
        self.failed: set[str] = set()
        self.cancelled: set[str] = set()
        self.handle = CancelHandle()

    def note(self, what: str, key: str) -> None:
        with self.lock:
            self.log.append((what, key))


def make_tool(world: World, name: str, behaviour: str) -> Any:
    @tool(name=name, description=f"tool {name}")
    def body(key: str) -> str:
        world.note("exec", key)
        if world.mishaps:
            if behaviour == "interrupt" and not interrupt(f"approve {key}?"):
                return f"{key}: declined"
            if behaviour == "fail" and key not in world.failed:
                world.failed.add(key)
                raise RuntimeError(f"{key} failed")
            if behaviour == "cancel" and key not in world.cancelled:
                world.cancelled.add(key)
                world.handle.cancel()
                check_cancelled()
        return f"{key}: ok"

    return body


def leaf_model(name: str, tools: list[str], transfer_to: str | None) -> ScriptedChatModel:
    """Calls each of its tools once, then (optionally) transfers, then answers."""

    def reply(messages: list[Message]) -> Message:
        results = [m for m in messages if m.role is Role.TOOL and m.tool_name in tools]
        if tools and not results:
            calls = [
                ToolCall(
                    id=f"{name}-{i}",
                    # "request" for agents used as tools; function tools ignore it
                    function=FunctionCall(
                        tool_name, f'{{"key": "{name}-{i}", "request": "{name}-{i}"}}'
                    ),
                )
                for i, tool_name in enumerate(tools)
            ]
            return calls_message(*calls)
        if transfer_to is not None and not any(
            m.role is Role.TOOL and m.tool_name == "transfer_to_agent" for m in messages
        ):
            return calls_message(
                ToolCall(
                    id=f"{name}-t",
                    function=FunctionCall("transfer_to_agent", f'{{"agent_name": "{transfer_to}"}}'),
                )
            )
        return Message(Role.ASSISTANT, f"done-{name}")

    return ScriptedChatModel(reply)


# A tree: ("leaf", [behaviours]) | ("seq" | "par" | "loop", [trees]) | ("tool", leaf) | ("transfer", leaf)
leaves = st.tuples(st.just("leaf"), st.lists(st.sampled_from(BEHAVIOURS), max_size=3))
trees = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(["seq", "par", "loop"]), st.lists(inner, min_size=1, max_size=3)),
        st.tuples(st.just("tool"), leaves),
        st.tuples(st.just("transfer"), leaves),
    ),
    max_leaves=6,
)


class Builder:
    def __init__(self, world: World) -> None:
        self.world = world
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def leaf(self, behaviours: list[str], extra: list[Any] = (), transfer_to: str | None = None):  # type: ignore[no-untyped-def, assignment]
        name = self.name("L")
        tools = [make_tool(self.world, f"{name}_t{i}", b) for i, b in enumerate(behaviours)]
        tools.extend(extra)
        names = [t.info().name for t in tools]
        return ChatModelAgent(name, f"agent {name}", leaf_model(name, names, transfer_to), tools=tools)

    def build(self, tree: Any) -> Any:
        kind, body = tree
        if kind == "leaf":
            return self.leaf(body)
        if kind == "tool":
            inner = self.build(body)
            return self.leaf([], extra=[AgentTool(inner)])
        if kind == "transfer":
            child = self.build(body)
            parent = self.leaf([], transfer_to=child.name)
            return set_sub_agents(parent, [child])
        children = [self.build(child) for child in body]
        name = self.name(kind.upper())
        if kind == "seq":
            return SequentialAgent(name, "d", children)
        if kind == "par":
            return ParallelAgent(name, "d", children)
        return LoopAgent(name, "d", children, max_iterations=1)


def outcome(events: list[AgentEvent]) -> Counter[tuple[str, str, str]]:
    return Counter(
        (event.agent_name, kind, content)
        for event in events
        for (_, _, kind, content, _) in [summarize(event)]
        if kind and kind != "error"
    )


def run_to_completion(tree: Any, mishaps: bool) -> tuple[World, list[list[AgentEvent]]]:
    world = World(mishaps)
    agent = Builder(world).build(tree)
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    segments: list[list[AgentEvent]] = []
    events = runner.query("go", with_checkpoint_id("prop"), with_cancel(world.handle))
    for _ in range(40):
        segment: list[AgentEvent] = []
        with no_thread_leak():
            for event in events:
                segment.append(event)
                kind = summarize(event)[2]
                if kind.startswith("tool/") and kind != "tool/transfer_to_agent":
                    world.note("result", summarize(event)[3].split(":")[0])
        segments.append(segment)
        last = segment[-1] if segment else None
        # A failed parallel branch's error comes mid-stream: the run failed all the same.
        failed = any(event.err is not None for event in segment)
        if last is None or (not failed and not last.interrupted):
            return world, segments
        world.handle = CancelHandle()
        if last.interrupted:
            assert last.action is not None and last.action.interrupted is not None
            targets = {context.id: True for context in last.action.interrupted.contexts}
            events = runner.resume("prop", with_cancel(world.handle), targets=targets)
        else:
            events = runner.resume("prop", with_cancel(world.handle))
    raise AssertionError("the run did not complete after 40 resumes")


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(trees)
def test_resuming_random_trees_until_they_complete(tree: Any) -> None:
    _, (baseline,) = run_to_completion(tree, mishaps=False)
    world, segments = run_to_completion(tree, mishaps=True)

    for segment in segments:
        cancels = [i for i, e in enumerate(segment) if isinstance(e.err, AgentCancelledError)]
        assert len(cancels) <= 1, segment
        if cancels:
            assert cancels[0] == len(segment) - 1, segment

    recorded: set[str] = set()
    for what, key in world.log:
        if what == "exec":
            assert key not in recorded, f"{key} ran again after its result was delivered"
        else:
            recorded.add(key)

    everything = [event for segment in segments for event in segment]
    assert outcome(everything) == outcome(baseline)
