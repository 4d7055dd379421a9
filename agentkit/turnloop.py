"""TurnLoop: a long-lived conversation that takes new input while a turn runs (Eino's TurnLoop).

Items (user messages, tasks, anything) are pushed into the loop from any thread; the loop's
thread turns what is waiting into a *turn*, one run of the agent, and hands the turn's events
to the caller. Items pushed while a turn runs wait for the next turn, or, pushed with
``preempt=True``, stop the running turn at its next safe point (after a model call that asked
for tools, or after a round of tool calls) so the next turn starts at once::

    from agentkit import TurnLoop, print_events

    def show(turn, events):
        print_events(events)

    with TurnLoop(agent, on_events=show) as loop:
        loop.push("Find me a flight to Lisbon")
        ...
        loop.push("Actually, make it Porto", preempt=True)   # the agent changes course
    print(loop.wait())

The turns are turns of one conversation: each turn's input is the history (the earlier turns'
messages and what the agents said, including the work of a preempted turn) plus the new
messages, kept in a :class:`~agentkit.conversation.ConversationStore`.

A turn that stops for outside input (a tool's :func:`~agentkit.interrupt`, an approval) ends
the loop: :meth:`~agentkit.TurnLoop.wait` returns a :class:`~agentkit.TurnLoopExit` whose
``reason`` is a :class:`TurnInterruptedError`, and with a checkpoint store and id the loop
saves a checkpoint. A new ``TurnLoop`` with the same store and id resumes from it:
``gen_resume`` gives the resume data. ``stop()`` (at the next safe point by default) saves the
turn in progress the same way.

Differences from Eino, deliberate: the loop keeps the conversation's history (Eino leaves that
to ``GenInput``; pass ``keep_history=False`` for Eino's behaviour); a loop that exits with
anything left (unhandled items, a stopped turn) saves it whatever the exit reason, so a failure
loses nothing (Eino saves only on a stop or an interrupt); a loop resuming a checkpoint holds
a lease on it (the Runner's, ``lease_ttl`` seconds, refreshed while the loop lives), and
records that the resumed turn ended before it starts the next one, so no checkpoint is resumed
twice. With a checkpoint store, an item ``push`` accepted is in the store before ``push``
returns ``True``: a process killed at any moment loses none (an item whose turn was running is
handled again by the loop that takes over). Eino's push strategy, preempt delay and
acknowledgement are ``push``'s ``preempt=<function>``, ``preempt_delay`` and ``acknowledged``;
late items are not ported: ``push`` returns ``False`` for an item the loop did not take, and
the caller keeps it.

``TurnLoop`` steers a conversation between turns (or by preempting one); to add a message to
the run in progress without stopping it, use ``RunIterator.send``.

``TurnLoop``, ``TurnLoopExit`` moved to :mod:`agentkit`; their spellings here still work until
agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit._turnloop import (
    AgentFactory,
    GenInput,
    GenResume,
    OnEvents,
    SavedTurn,
    TurnContext,
    TurnInput,
    TurnInterruptedError,
    TurnResume,
    default_input,
    default_resume,
    drain_events,
)

__all__ = [
    "AgentFactory",
    "GenInput",
    "GenResume",
    "OnEvents",
    "SavedTurn",
    "TurnContext",
    "TurnInput",
    "TurnInterruptedError",
    "TurnResume",
    "default_input",
    "default_resume",
    "drain_events",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "TurnLoop": "agentkit.TurnLoop",
            "TurnLoopExit": "agentkit.TurnLoopExit",
        },
    )
