"""The outcomes of one tool round of a ChatModelAgent, gathered as its calls report them.

:meth:`~agentkit.agents._react.ReactRun.tool_round` runs the calls (one inline, several on the
run's pool); :class:`RoundOutcome` takes each call's :class:`~agentkit.agents._tool_calls.ToolItem`
in the agent's thread: it delivers events in completion order (holding back the event of a
return-directly call until the round is over), keeps results in call order, and collects the
errors and interrupts that end the round.
"""

from __future__ import annotations

from collections.abc import Callable

from agentkit._interrupt import InterruptSignal, ToolRoundState
from agentkit.agents._react_config import ReactState
from agentkit.agents._tool_calls import ToolItem
from agentkit.errors import AgentCancelledError
from agentkit.events import AgentEvent
from agentkit.schema import Message, ToolCall

__all__ = ["RoundOutcome", "return_directly_call"]


def return_directly_call(calls: list[ToolCall], names: frozenset[str]) -> str | None:
    """The id of the last call of a return-directly tool among ``calls``, or ``None``."""
    found: str | None = None
    for call in calls:
        if call.function.name in names:
            found = call.id
    return found


class RoundOutcome:
    """What the calls of one tool round reported so far (one round, the agent's thread only)."""

    __slots__ = (
        "calls",
        "emit",
        "errors",
        "failed",
        "held",
        "results",
        "return_directly_id",
        "round_state",
        "signals",
    )

    def __init__(
        self,
        emit: Callable[[AgentEvent], None],
        round_state: ToolRoundState,
        return_directly_id: str | None,
    ) -> None:
        self.emit = emit
        self.round_state = round_state
        self.calls = round_state.calls
        self.return_directly_id = return_directly_id
        # Calls finished before a resume count as done; their events were delivered then.
        self.results: dict[int, Message] = dict(round_state.done)
        self.held: AgentEvent | None = None  # the return-directly call's event, until the end
        self.errors: list[BaseException] = []
        self.signals: dict[int, InterruptSignal] = {}
        self.failed: set[int] = set()  # calls whose result tells the model how they failed

    def pending(self) -> list[int]:
        """The indexes of the calls that have no result yet, in call order."""
        return [index for index in range(len(self.calls)) if index not in self.results]

    def handle(self, item: ToolItem) -> None:
        """Take one report of a call: deliver its event, keep its result or its error."""
        event = item.event
        if event is not None:
            self._deliver(item, event)
            if not item.forwarded and event.action is not None:
                self.round_state.actions[item.index] = event.action
        if item.message is not None:
            self.results[item.index] = item.message
            self.round_state.done[item.index] = item.message
            if item.failed:
                self.failed.add(item.index)
        if item.error is not None:
            if isinstance(item.error, InterruptSignal):
                self.signals[item.index] = item.error
            else:
                self.errors.append(item.error)

    def _deliver(self, item: ToolItem, event: AgentEvent) -> None:
        if (
            item.forwarded
            or not self.return_directly_id
            or self.calls[item.index].id != self.return_directly_id
        ):
            self.emit(event)
        elif not item.failed:
            self.held = event
        else:
            if self.held is not None:  # the call's stream, which broke
                self.emit(self.held)
                self.held = None
            self.emit(event)

    def raise_stop(self) -> None:
        """Raise what ends the round early: a call's error (not a cancel, if any), an interrupt.

        Of several interrupts, the first call's is raised (each recorded its own point).
        """
        if self.errors:
            for error in self.errors:
                if not isinstance(error, AgentCancelledError):
                    raise error
            raise self.errors[0]
        if self.signals:
            raise self.signals[min(self.signals)]

    def finish(self, state: ReactState, held_before: AgentEvent | None) -> Message | None:
        """Deliver the held event, extend the conversation; return the final message, if any.

        ``held_before`` is the event of a return-directly call that finished before a resume.
        A failed call of a return-directly tool (a transfer to nobody) ends nothing: the
        model gets to read what went wrong.
        """
        held = self.held if self.held is not None else held_before
        if held is not None:
            self.emit(held)
        results = self.results
        state.messages.extend(results[index] for index in range(len(self.calls)))
        if not self.return_directly_id:
            return None
        final = None
        for index, call in enumerate(self.calls):
            if call.id == self.return_directly_id:
                final = None if index in self.failed else results[index]
        return final
