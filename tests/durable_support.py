"""Agents for crash tests: every built-in agent kind, with models that answer from the conversation.

A crashed run is resumed from its last finished step, so the models cannot play a fixed
script: each model here decides its reply from the messages it is sent (what its agent did so
far), and the same conversation always gets the same reply, whichever process asks. The
tools write what they do to an effects file (one line per start and per end, with the call's
:func:`~agentkit.tool_call_key`), outside the process, so a test can count every effect a run
had, killed or not.

The same builders serve the in-process tests (``ScriptedChatModel`` with a reply function)
and the crash matrix, whose child processes talk to a loopback ``FakeOpenAIServer`` (the
parent's server answers with :func:`reply_for_request`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentkit import (
    Agent,
    AgentTool,
    ChatModelAgent,
    LoopAgent,
    Message,
    ParallelAgent,
    Role,
    SequentialAgent,
    tool,
    tool_call_key,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import planexecute, supervisor
from agentkit.schema import FunctionCall, ToolCall, assistant_message
from agentkit.testing import Reply

KINDS = ("react", "sequential", "parallel", "loop", "agenttool", "supervisor", "planexecute")
"""Every agent kind the crash tests cover."""


# --- the effects file ---------------------------------------------------------------------------


@attrs.frozen
class Effect:
    """One line of the effects file."""

    what: str  # "start" or "end"
    tool: str
    call_id: str
    key: str


class Effects:
    """Appends what tools do to a file (``O_APPEND``, one write per line: a kill never tears
    a line the OS got) and reads it back."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, what: str, tool_name: str, call_id: str, key: str) -> None:
        line = json.dumps([what, tool_name, call_id, key]) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def read(self) -> list[Effect]:
        if not self.path.exists():
            return []
        return [Effect(*json.loads(line)) for line in self.path.read_text().splitlines() if line]


Hook = Callable[[str, str, str], None]
"""``hook(moment, tool_name, call_id)``, called at ``"start"`` (before the effect) and ``"end"``
(after it, before the tool returns): where a test crashes a run."""


def _no_hook(moment: str, tool_name: str, call_id: str) -> None:
    return None


@attrs.define
class Tools:
    """The tools of the crash tests: ``work`` (idempotent) and ``pay`` (not idempotent)."""

    effects: Effects
    hook: Hook = _no_hook

    def make(self) -> tuple[Any, Any]:
        effects = self.effects
        tools = self

        def run(name: str, result: str) -> str:
            from agentkit._runctx import current_frame

            frame = current_frame()
            call_id = frame.tool.call_id if frame is not None and frame.tool is not None else ""
            key = tool_call_key()
            tools.hook("start", name, call_id)
            effects.write("start", name, call_id, key)
            effects.write("end", name, call_id, key)
            tools.hook("end", name, call_id)
            return result

        @tool
        def work(item: str) -> str:
            """Work on an item (safe to run twice)."""
            return run("work", f"worked on {item}")

        @tool(idempotent=False)
        def pay(amount: int) -> str:
            """Pay an amount (must not run twice unnoticed)."""
            return run("pay", f"paid {amount}")

        return work, pay


# --- crashes in-process ------------------------------------------------------------------------
# A crash is simulated at an exact point: the store is copied there (what a process killed at
# that instant leaves behind) and the run is abandoned; a new Runner resumes from the copy.


class Crash(BaseException):
    """The process dies here (nothing after it runs in the real world)."""


class WatchedStore(InMemoryCheckPointStore):
    """A store that tells the crash when a step record is about to be written ("save") and
    when it was written ("saved")."""

    crash: CrashAt | None = None

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        if self.crash is not None:
            self.crash.tick("save")
        super().append_step(checkpoint_id, data, sync=sync)
        if self.crash is not None:
            self.crash.tick("saved")


def copy_of(store: InMemoryCheckPointStore, checkpoint_id: str) -> InMemoryCheckPointStore:
    """What the store holds for a run right now: all a killed process leaves behind."""
    copy = InMemoryCheckPointStore()
    data = store.get(checkpoint_id)
    if data is not None:
        copy.set(checkpoint_id, data)
    for record in store.read_steps(checkpoint_id):
        copy.append_step(checkpoint_id, record)
    return copy


@attrs.define
class CrashAt:
    """Crashes a run at the ``number``-th event of a kind: a model call, a tool start, a tool
    end (after its effect, before it returns).

    Other threads of the run go on after the crash point in this simulation; what they do
    then did not happen in the world the copy shows, so their effects are not recorded
    (:class:`UntilCrash`).
    """

    kind: str  # "model", "start", "end", "save" or "saved"
    number: int
    store: InMemoryCheckPointStore
    checkpoint_id: str = "crashed-run"
    seen: int = 0
    left: InMemoryCheckPointStore | None = None
    lock: threading.Lock = attrs.Factory(threading.Lock)

    def tick(self, kind: str) -> None:
        with self.lock:
            if self.left is not None:
                raise Crash("after the crash")  # this world ended
            if kind != self.kind:
                return
            self.seen += 1
            if self.seen == self.number:
                self.left = copy_of(self.store, self.checkpoint_id)
                raise Crash(f"{kind} {self.number}")


class UntilCrash(Effects):
    """Effects written only while the crashed world lasts."""

    def __init__(self, path: Path, crash: CrashAt) -> None:
        super().__init__(path)
        self.crash = crash

    def write(self, what: str, tool_name: str, call_id: str, key: str) -> None:
        with self.crash.lock:
            if self.crash.left is None:
                super().write(what, tool_name, call_id, key)



# --- conversation-driven replies ------------------------------------------------------------


@attrs.frozen
class Turn:
    """What an agent's model does: ``rounds`` of tool calls per turn, then an answer.

    Each round is a list of ``(tool, arguments)``; a turn makes ``per_turn`` rounds (cycling
    through ``rounds`` by how many the agent made in all), then answers ``"<name> done <n>"``.
    """

    name: str
    rounds: tuple[tuple[tuple[str, dict[str, Any]], ...], ...]
    per_turn: int = 1
    final: str = ""


@attrs.frozen
class Seen:
    """A conversation as a model sees it: role, tool call ids, tool result id, content."""

    role: str
    call_ids: tuple[str, ...]
    result_id: str
    content: str


def _own(call_id: str, name: str) -> bool:
    return call_id.startswith(f"{name}-")


def decide(turn: Turn, seen: Sequence[Seen]) -> tuple[str, list[tuple[str, str, dict[str, Any]]]]:
    """The reply of ``turn``'s agent to ``seen``: ``(text, [(call id, tool, arguments)])``."""
    made = sum(1 for item in seen if item.role == "assistant" and any(
        _own(call_id, turn.name) for call_id in item.call_ids))
    this_turn = 0
    for item in reversed(seen):  # the agent's own trailing block is its current turn
        if item.role == "tool" and _own(item.result_id, turn.name):
            continue
        if item.role == "assistant" and item.call_ids and _own(item.call_ids[0], turn.name):
            this_turn += 1
            continue
        break
    if this_turn < turn.per_turn and turn.rounds:
        round_calls = turn.rounds[made % len(turn.rounds)]
        return "", [
            (f"{turn.name}-{made}-{position}", name, dict(arguments))
            for position, (name, arguments) in enumerate(round_calls)
        ]
    return turn.final or f"{turn.name} done {made}", []


def seen_messages(messages: Sequence[Message]) -> list[Seen]:
    return [
        Seen(
            message.role.value,
            tuple(call.id for call in message.tool_calls),
            message.tool_call_id,
            message.content,
        )
        for message in messages
    ]


def seen_request(request: dict[str, Any]) -> list[Seen]:
    """The conversation of an OpenAI Chat Completions request body."""
    seen = []
    for message in request.get("messages", []):
        calls = tuple(call["id"] for call in message.get("tool_calls") or ())
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        seen.append(Seen(message["role"], calls, message.get("tool_call_id") or "", content))
    return seen


def as_message(text: str, calls: list[tuple[str, str, dict[str, Any]]]) -> Message:
    if not calls:
        return assistant_message(text)
    return Message(
        Role.ASSISTANT,
        text,
        tool_calls=[
            ToolCall(id=call_id, function=FunctionCall(name, json.dumps(arguments)))
            for call_id, name, arguments in calls
        ],
    )


# --- models ----------------------------------------------------------------------------------

ModelFactory = Callable[[str], Any]
"""``factory(name)`` -> the chat model of the agent (or planner/replanner) named ``name``."""


def scripted(turns: dict[str, Callable[[list[Seen]], Message]]) -> ModelFactory:
    """Scripted models answering with ``turns[name](conversation)``."""

    def factory(name: str) -> Any:
        answer = turns[name]
        return ScriptedChatModel(lambda messages: answer(seen_messages(messages)))

    return factory


def _plain(turn: Turn) -> Callable[[list[Seen]], Message]:
    return lambda seen: as_message(*decide(turn, seen))


def _supervisor_turn(workers: Sequence[str]) -> Callable[[list[Seen]], Message]:
    """Transfers to each worker in turn, then answers."""

    def answer(seen: list[Seen]) -> Message:
        made = sum(1 for item in seen if item.role == "assistant" and any(
            call_id.startswith("boss-") for call_id in item.call_ids))
        if made < len(workers):
            return as_message("", [(f"boss-{made}-0", "transfer_to_agent",
                                    {"agent_name": workers[made]})])
        return assistant_message(f"boss done {made}")

    return answer


def _planner(seen: list[Seen]) -> Message:
    return as_message("", [("plan-0", "plan", {"steps": ["s1", "s2"]})])


def _executor(seen: list[Seen]) -> Message:
    """Works on step s1, pays for step s2 (its user message names the step), then answers."""
    step = seen[-1].content.rsplit("\n", 1)[-1] if seen else ""
    if seen and seen[-1].role == "tool":
        return assistant_message(f"executor did {step or 'it'}")
    asked = next((item.content.rsplit("\n", 1)[-1] for item in reversed(seen)
                  if item.role == "user"), "s1")
    call = ("pay", {"amount": 7}) if asked == "s2" else ("work", {"item": asked})
    return as_message("", [(f"executor-{asked}-0", call[0], call[1])])


def _replanner(seen: list[Seen]) -> Message:
    done = seen[-1].content.count("Step: ") if seen else 0
    if done < 2:
        return as_message("", [(f"replan-{done}", "plan", {"steps": ["s2"]})])
    return as_message("", [("respond-0", "respond", {"response": f"all {done} steps done"})])


def answers(kind: str) -> dict[str, Callable[[list[Seen]], Message]]:
    """What every model of an agent kind answers, by agent name."""
    work = ("work", {"item": "x"})
    pay = ("pay", {"amount": 7})
    table: dict[str, dict[str, Callable[[list[Seen]], Message]]] = {
        "react": {"A": _plain(Turn("A", ((work,), (work, pay), (work,)), per_turn=3))},
        "sequential": {
            "A": _plain(Turn("A", ((work,), (pay,)), per_turn=2)),
            "B": _plain(Turn("B", ((work,),))),
        },
        "parallel": {
            "A": _plain(Turn("A", ((work,), (pay,)), per_turn=2)),
            "B": _plain(Turn("B", ((work,),))),
            "C": _plain(Turn("C", ((work, work),))),
        },
        "loop": {"A": _plain(Turn("A", ((work,), (pay,))))},
        "agenttool": {
            "outer": _plain(Turn("outer", ((("inner", {"request": "go"}),), (work,)), per_turn=2)),
            "inner": _plain(Turn("inner", ((work,), (pay,)), per_turn=2)),
        },
        "supervisor": {
            "boss": _supervisor_turn(["w1", "w2"]),
            "w1": _plain(Turn("w1", ((work,),))),
            "w2": _plain(Turn("w2", ((pay,),))),
        },
        "planexecute": {
            "planner": _planner,
            "executor": _executor,
            "replanner": _replanner,
        },
    }
    return table[kind]


def reply_for_request(kind: str, request: dict[str, Any]) -> Reply:
    """The loopback server's answer to a request of an agent of ``kind`` (by its model name)."""
    answer = answers(kind)[request["model"]]
    message = answer(seen_request(request))
    return Reply(message.content, tool_calls=list(message.tool_calls))


# --- the agents ------------------------------------------------------------------------------


def build(kind: str, model: ModelFactory, tools: Tools) -> Agent:
    """The agent of ``kind``, its models made by ``model(name)``."""
    work, pay = tools.make()
    both = [work, pay]
    if kind == "react":
        return ChatModelAgent("A", "works", model("A"), tools=both)
    if kind == "sequential":
        return SequentialAgent("S", "in order", [
            ChatModelAgent("A", "works", model("A"), tools=both),
            ChatModelAgent("B", "works", model("B"), tools=both),
        ])
    if kind == "parallel":
        return ParallelAgent("P", "at once", [
            ChatModelAgent(name, "works", model(name), tools=both) for name in ("A", "B", "C")
        ])
    if kind == "loop":
        return LoopAgent("L", "again", [ChatModelAgent("A", "works", model("A"), tools=both)],
                         max_iterations=3)
    if kind == "agenttool":
        inner = ChatModelAgent("inner", "does the inner work", model("inner"), tools=both)
        return ChatModelAgent("outer", "delegates", model("outer"), tools=[AgentTool(inner), work])
    if kind == "supervisor":
        boss = ChatModelAgent("boss", "supervises", model("boss"))
        return supervisor.new(boss, [
            ChatModelAgent("w1", "worker one", model("w1"), tools=both),
            ChatModelAgent("w2", "worker two", model("w2"), tools=both),
        ])
    if kind == "planexecute":
        return planexecute.new(
            planexecute.new_planner(model("planner")),
            planexecute.new_executor(model("executor"), tools=both),
            planexecute.new_replanner(model("replanner")),
            max_iterations=4,
        )
    raise ValueError(f"unknown agent kind {kind!r}")


def scripted_agent(kind: str, tools: Tools) -> Agent:
    """The agent of ``kind`` with scripted models (in-process tests)."""
    return build(kind, scripted(answers(kind)), tools)
