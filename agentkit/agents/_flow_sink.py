"""The flow wrapper's sink: names an agent's events and records its own in the history."""

from __future__ import annotations

from agentkit._runctx import EventLog, RecordedEvent
from agentkit._worker import EventSink
from agentkit.events import AgentAction, AgentEvent, RunStep, _name_event

__all__ = ["FlowSink"]


class FlowSink:
    """Names an agent's events, records its own ones, and remembers the last action.

    With ``unnamed_only`` (agents that host a flow of their own, see
    :attr:`~agentkit._worker.BuiltinAgent.hosts_flow`) only the events that arrive without a
    run path are the agent's own: the hosted flow's wrappers have named and recorded theirs
    already, possibly with this very run path.
    """

    __slots__ = (
        "downstream",
        "error",
        "last_action",
        "log",
        "name",
        "run_path",
        "steps",
        "unnamed_only",
    )

    def __init__(
        self,
        downstream: EventSink,
        name: str,
        run_path: tuple[RunStep, ...],
        log: EventLog,
        unnamed_only: bool = False,
    ) -> None:
        self.downstream = downstream
        self.name = name
        self.run_path = tuple(run_path)
        self.steps = list(run_path)
        self.log = log
        self.unnamed_only = unnamed_only
        self.last_action: AgentAction | None = None
        self.error: BaseException | None = None  # the agent's own error event, if any

    def send(self, item: AgentEvent) -> bool:
        path = item.run_path
        if not path:
            _name_event(item, self.name, self.steps.copy())
            own = True
        elif self.unnamed_only:
            own = False
        else:
            own = len(path) == len(self.steps) and path == self.steps
        if own:
            action = item.action
            if action is None or action.interrupted is None:
                self.log.append(RecordedEvent.of(item, self.run_path))
            self.last_action = action
            if item.err is not None:
                self.error = item.err
        return self.downstream.send(item)
