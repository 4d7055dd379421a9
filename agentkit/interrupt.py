"""Interrupts: pausing a run for outside input, and the bookkeeping to resume it.

A tool pauses the run with :func:`interrupt`; a custom agent sends :func:`interrupt_event`.
Each interrupting point gets a fresh id and an address (``agent:<name>`` and
``tool:<tool name>:<call id>`` segments). Composite components (a ChatModelAgent whose tools
interrupted, a workflow whose child interrupted) wrap their children's signals in a node of
their own that carries the state they need to continue. The Runner saves that tree in the
checkpoint; on resume every component finds its own state again by its address.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import attrs

from agentkit._persist import persisted
from agentkit.events import AgentAction, AgentEvent, InterruptContext, InterruptInfo
from agentkit.runctx import current_frame
from agentkit.schema import Message, ToolCall

__all__ = ["get_interrupt_state", "interrupt", "interrupt_event"]


@persisted("agentkit.SignalNode")
@attrs.define(eq=False)
class SignalNode:
    """One node of an interrupt tree (framework-internal)."""

    id: str
    info: Any
    state: Any
    address: tuple[str, ...]
    is_root_cause: bool
    children: list[SignalNode] = attrs.Factory(list)

    def walk(self) -> list[SignalNode]:
        nodes = [self]
        for child in self.children:
            nodes.extend(child.walk())
        return nodes

    def contexts(self) -> list[InterruptContext]:
        """The root-cause contexts of this tree, each with its parent chain."""
        roots: list[InterruptContext] = []

        def visit(node: SignalNode, parent: InterruptContext | None) -> None:
            context = InterruptContext(
                id=node.id,
                info=node.info,
                address=node.address,
                is_root_cause=node.is_root_cause,
                parent=parent,
            )
            if node.is_root_cause:
                roots.append(context)
            for child in node.children:
                visit(child, context)

        visit(self, None)
        return roots


class InterruptSignal(BaseException):
    """Raised by :func:`interrupt` to stop a tool call (derives from ``BaseException``).

    ``except Exception`` in user code does not catch it, so an interrupt cannot be
    swallowed by accident. The framework turns it into an interrupt event.
    """

    def __init__(self, node: SignalNode) -> None:
        super().__init__(f"interrupted at {';'.join(node.address)}")
        self.node = node


@attrs.define(eq=False)
class PointResume:
    """What a resumed run knows about one interrupt point (one address)."""

    was_interrupted: bool = False
    state: Any = None
    is_resume_target: bool = False
    has_data: bool = False
    data: Any = None


@attrs.define(eq=False)
class ResumeState:
    """The interrupt points of a checkpoint and the resume data given for them."""

    points: dict[str, tuple[tuple[str, ...], Any]]
    targets: dict[str, Any] = attrs.Factory(dict)
    _by_address: dict[tuple[str, ...], Any] = attrs.field(init=False, alias="_by_address")
    _data: dict[tuple[str, ...], Any] = attrs.field(init=False, alias="_data")
    _targeted: set[tuple[str, ...]] = attrs.field(init=False, alias="_targeted")

    def __attrs_post_init__(self) -> None:
        self._by_address = {address: state for address, state in self.points.values()}
        self._data = {}
        self._targeted = set()
        for point_id, data in self.targets.items():
            address = self.points[point_id][0]
            self._data[address] = data
            for length in range(1, len(address) + 1):
                self._targeted.add(address[:length])

    def at(self, address: tuple[str, ...]) -> PointResume:
        """What the component at ``address`` should know when it resumes."""
        was = address in self._by_address
        return PointResume(
            was_interrupted=was,
            state=self._by_address.get(address) if was else None,
            is_resume_target=address in self._targeted,
            has_data=address in self._data,
            data=self._data.get(address),
        )

    def next_hops(self, address: tuple[str, ...]) -> list[str]:
        """The distinct child segments of ``address`` that lead to saved interrupt points."""
        depth = len(address)
        hops: list[str] = []
        for saved in self._by_address:
            if len(saved) > depth and saved[:depth] == address and saved[depth] not in hops:
                hops.append(saved[depth])
        return hops


def flatten(node: SignalNode) -> dict[str, tuple[tuple[str, ...], Any]]:
    """Map every node id of the tree to its (address, state)."""
    return {item.id: (item.address, item.state) for item in node.walk()}


def new_id() -> str:
    return str(uuid.uuid4())


# --- tools ------------------------------------------------------------------------------------


def interrupt(info: Any = None, *, state: Any = None) -> Any:
    """Inside a tool: pause the run here, or return the resume data once resumed.

    The first call stops the run: its last event carries ``action.interrupted`` with an
    :class:`~agentkit.InterruptContext` for this point (``info`` is shown to the user;
    ``state`` is saved and given back by :func:`get_interrupt_state`). When the run is
    resumed with data for this point's id, the call returns that data (``None`` is data);
    resumed without data for it, it interrupts again under a new id.

    Example::

        @tool
        def pay(amount: float) -> str:
            approved = interrupt(f"approve paying {amount}?")
            return "paid" if approved else "cancelled"

    Raises:
        RuntimeError: called outside a tool call.
    """
    frame = current_frame()
    if frame is None or frame.tool is None:
        raise RuntimeError("interrupt() works only inside a tool call of an agent run")
    resume = frame.tool.resume
    if isinstance(resume, PointResume) and resume.is_resume_target and resume.has_data:
        resume.has_data = False  # delivered once
        return resume.data
    raise InterruptSignal(SignalNode(new_id(), info, state, frame.address, True))


def get_interrupt_state() -> Any:
    """Inside a resumed tool call: the ``state`` its latest interrupt saved, else ``None``."""
    frame = current_frame()
    if frame is None or frame.tool is None:
        return None
    resume = frame.tool.resume
    if isinstance(resume, PointResume) and resume.was_interrupted:
        return resume.state
    return None


def interrupt_event(info: Any = None, state: Any = None) -> AgentEvent:
    """For custom agents: an event that interrupts the run at the agent's position.

    ``state`` comes back as ``ResumeInfo.interrupt_state`` when the agent is resumed.
    """
    frame = current_frame()
    address = frame.address if frame is not None else ()
    node = SignalNode(new_id(), info, state, address, True)
    return signal_event(node, data=info)


def signal_event(node: SignalNode, data: Any = None) -> AgentEvent:
    """An event carrying the interrupt tree ``node``."""
    return AgentEvent(
        action=AgentAction(
            interrupted=InterruptInfo(data=data, contexts=node.contexts()), _signal=node
        )
    )


def composite_signal(
    info: Any, state: Any, children: list[SignalNode], address: tuple[str, ...] | None = None
) -> SignalNode:
    """A node at the current address wrapping the signals of its children."""
    if address is None:
        frame = current_frame()
        address = frame.address if frame is not None else ()
    return SignalNode(new_id(), info, state, address, False, children)


# --- ChatModelAgent tool rounds ------------------------------------------------------------------


@persisted("agentkit.ToolRoundState")
@attrs.define(eq=False, getstate_setstate=False)
class ToolRoundState:
    """A ChatModelAgent paused inside a tool round: enough to finish the round on resume."""

    messages: list[Message]
    remaining: int
    calls: list[ToolCall]
    done: dict[int, Message] = attrs.Factory(dict)
    resume_of: dict[int, PointResume] = attrs.field(factory=dict, eq=False)

    def __getstate__(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "remaining": self.remaining,
            "calls": self.calls,
            "done": self.done,
        }

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "resume_of", {})


def resume_tool_round(
    agent_name: str,
    round_state: ToolRoundState,
    done: dict[int, Message],
    signals: Mapping[int, InterruptSignal],
    state_messages: list[Message],
) -> InterruptSignal:
    """The signal a ChatModelAgent raises when tools of a round interrupted."""
    saved = ToolRoundState(
        messages=list(round_state.messages),
        remaining=round_state.remaining,
        calls=list(round_state.calls),
        done=dict(done),
    )
    children = [signals[index].node for index in sorted(signals)]
    return InterruptSignal(composite_signal(None, saved, children))
