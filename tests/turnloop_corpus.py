"""The scenarios behind the TurnLoop checkpoint corpus in ``tests/fixtures/turnloop/``.

A TurnLoop checkpoint written by one version of agentkit must be resumed by every later one.
``tests/fixtures/turnloop/make_corpus.py`` runs each scenario until its loop ends, stores the
checkpoint bytes and what a resuming loop then does; ``test_turnloop_corpus.py`` resumes the
stored bytes with today's code and compares. Change a scenario only together with a new corpus
folder: the stored ones are a promise.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import attrs

from agentkit import AgentEvent, ChatModelAgent, Message, Role, TurnLoop, tool, user_message
from agentkit.checkpoint import CheckPointStore, PickleSerializer
from agentkit.iterators import AsyncIterator
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, summarize
from agentkit.turnloop import SavedTurn, TurnContext, TurnInput, TurnResume

CORPUS_KEY = b"agentkit turnloop corpus key, not a secret"
CHECKPOINT_ID = "corpus:turnloop"
GUARD = 30.0


def serializer() -> PickleSerializer:
    return PickleSerializer(CORPUS_KEY)


def clerk(gate: threading.Event | None = None, started: threading.Event | None = None) -> ChatModelAgent:
    """Files each request; ``pay`` needs approval; ``file`` may wait at ``gate``."""

    @tool(needs_approval=True)
    def pay(payee: str) -> str:
        """Pays a payee."""
        return f"paid {payee}"

    @tool
    def file(note: str) -> str:
        """Files a note."""
        if started is not None:
            started.set()
        if gate is not None and not gate.wait(GUARD):
            raise AssertionError("the gate was never opened")
        return f"filed {note}"

    def reply(messages: list[Message]) -> Message | str:
        last = messages[-1]
        if last.role is Role.USER and last.content.startswith("pay "):
            return calls_message(call("pay", {"payee": last.content[4:]}, id="p1"))
        if last.role is Role.USER:
            return calls_message(call("file", {"note": last.content}, id="f1"))
        return f"clerk: {last.content}"

    return ChatModelAgent("clerk", "files and pays", ScriptedChatModel(reply), tools=[pay, file])


@attrs.frozen
class Scenario:
    """How a loop is stopped (``stop_it``), and how the next loop resumes it."""

    name: str
    items: tuple[str, ...]
    stop_it: Callable[[TurnLoop[str], threading.Event, threading.Event], None]
    approve: bool = False


def _ends_by_itself(loop: TurnLoop[str], started: threading.Event, gate: threading.Event) -> None:
    gate.set()


def _stop_between_turns(loop: TurnLoop[str], started: threading.Event, gate: threading.Event) -> None:
    loop.stop()  # before start: every item is left waiting


def _stop_in_the_tool_round(loop: TurnLoop[str], started: threading.Event, gate: threading.Event) -> None:
    assert started.wait(GUARD)
    loop.stop()
    gate.set()


SCENARIOS = (
    Scenario("interrupted", ("pay ACME", "file taxes"), _ends_by_itself, approve=True),
    Scenario("between_turns", ("file a", "file b"), _stop_between_turns),
    Scenario("stopped", ("memo",), _stop_in_the_tool_round),
)


def one_at_a_time(loop: TurnLoop[str], items: list[str]) -> TurnInput[str]:
    """Each turn takes the first item waiting."""
    return TurnInput([user_message(items[0])], consumed=items[:1], remaining=items[1:])


def resume_all(loop: TurnLoop[str], saved: SavedTurn[str]) -> TurnResume[str]:
    """Approve every interrupt point (none for a stopped turn)."""
    contexts = saved.interrupt.contexts if saved.interrupt is not None else []
    return TurnResume(targets={context.id: True for context in contexts} or None)


def describe(saved: SavedTurn[str] | None) -> dict[str, Any] | None:
    if saved is None:
        return None
    return {
        "interrupted_items": saved.interrupted_items,
        "unhandled_items": saved.unhandled_items,
        "new_items": saved.new_items,
        "reason": saved.reason,
        "interrupt_infos": None if saved.interrupt is None else [
            repr(context.info) for context in saved.interrupt.contexts
        ],
    }


def resume(store: CheckPointStore) -> dict[str, Any]:
    """Resume the loop saved in ``store`` to its end; what it did, JSON-ready."""
    seen: list[SavedTurn[str]] = []
    turns: list[list[Any]] = []

    def gen_resume(loop: TurnLoop[str], saved: SavedTurn[str]) -> TurnResume[str]:
        seen.append(saved)
        return resume_all(loop, saved)

    def on_events(turn: TurnContext[str], events: AsyncIterator[AgentEvent]) -> None:
        turns.append([turn.consumed, [list(summarize(event)) for event in events]])

    loop: TurnLoop[str] = TurnLoop(
        clerk(), gen_input=one_at_a_time, gen_resume=gen_resume, on_events=on_events,
        checkpoint_store=store,
        checkpoint_id=CHECKPOINT_ID, serializer=serializer(),
    )
    loop.start()
    loop.stop(idle_for=0)
    exit_state = loop.wait(GUARD)
    return {
        "saved": describe(seen[0] if seen else None),
        "turns": turns,
        "reason": None if exit_state.reason is None else type(exit_state.reason).__name__,
        "left": store.get(CHECKPOINT_ID) is not None,
    }
