"""Resume points: where a run stopped and what each stopped component needs to go on.

When a run stops before it completes (a tool or agent interrupts, the run is cancelled, or it
fails), every component on the way from the stopping point to the Runner records one
:class:`ResumePoint` in the run's :class:`Journal`: its *address* (``agent:<name>`` and
``tool:<tool name>:<call id>`` segments) and the *state* it needs to continue (a ChatModelAgent's
conversation and finished tool calls, a Sequential workflow's child index, ...). The Runner saves
the journal's points in the checkpoint; on resume every component finds its own state again by
its address (:class:`ResumeState`). Nothing travels on events or exceptions: a point enters the
journal by one door, ``agentkit._progress.save_point``, and is read where the Runner saves. A
durable run (``durability="step"``) keeps its points in its writer's image instead
(``agentkit._progress.Progress``), in the same order, and a stop saves that image's points.

Interrupt contexts (:class:`~agentkit.InterruptContext`) are derived from the points once, when
the Runner delivers the interrupt event: a point's parent is the recorded point whose address is
the longest proper prefix of its own (a state whose class sets ``shown_in_contexts = False``,
a flow's transfer, is passed over).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from agentkit._events import InterruptContext
from agentkit._persist import persisted

Address = tuple[str, ...]


@persisted("agentkit.ResumePoint")
@attrs.frozen
class ResumePoint:
    """One stopped component: its address, its state and, for interrupts, what to show.

    ``is_root_cause`` marks the points that asked for the stop themselves (a tool calling
    ``interrupt()``, a custom agent sending ``interrupt_event()``); ``info`` is what they showed.
    """

    id: str
    address: Address
    state: Any = None
    info: Any = None
    is_root_cause: bool = False


def new_point_id() -> str:
    """A fresh, opaque interrupt id."""
    return str(uuid.uuid4())


class Journal:
    """The resume points one run recorded, at most one per address (thread-safe).

    A later record at the same address replaces the earlier one: a component that stops again
    knows best where it is now.
    """

    __slots__ = ("_lock", "_points")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._points: dict[Address, ResumePoint | tuple[Any]] = {}

    def record(
        self, address: Address, state: Any = None, info: Any = None, *, root: bool = False
    ) -> ResumePoint:
        """Record that the component at ``address`` stopped with ``state``; return the point."""
        point = ResumePoint(new_point_id(), tuple(address), state, info, root)
        with self._lock:
            self._points.pop(point.address, None)
            self._points[point.address] = point
        return point

    def declare(self, address: Address, state: Any) -> None:
        """Keep ``state`` as where the component at ``address`` is now (``AgentRun.save_state``).

        Like :meth:`record` without info, and without minting the point's id now: a component
        declares at every step, and an id is needed only if the run stops (:meth:`points`).
        """
        address = tuple(address)
        with self._lock:
            self._points.pop(address, None)
            self._points[address] = (state,)

    def discard_under(self, address: Address) -> None:
        """Forget the points at or below ``address``: the component there handled the stop
        and went on (an error turned into a message for the model, a failed agent whose turn
        passed on to another one)."""
        depth = len(address)
        with self._lock:
            points = self._points
            under = []
            for saved in points:
                if saved[:depth] == address:
                    under.append(saved)
            for saved in under:
                del points[saved]

    def points(self) -> list[ResumePoint]:
        """The recorded points, in the order they were recorded (a declared state gets its
        point, and its id, the first time it is asked for)."""
        with self._lock:
            points = self._points
            for address, point in points.items():
                if type(point) is tuple:  # declared: (state,)
                    points[address] = ResumePoint(new_point_id(), address, point[0])
            return list(points.values())  # type: ignore[arg-type]

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._points)


def interrupt_contexts(points: Iterable[ResumePoint]) -> list[InterruptContext]:
    """The root-cause contexts of ``points``, each with its chain of parents."""
    by_address = {point.address: point for point in points}
    made: dict[Address, InterruptContext] = {}

    def context(point: ResumePoint) -> InterruptContext:
        existing = made.get(point.address)
        if existing is not None:
            return existing
        parent = None
        for length in range(len(point.address) - 1, 0, -1):
            above = by_address.get(point.address[:length])
            # A state that only routes a resumed run (a flow's transfer) is no context.
            if above is not None and getattr(type(above.state), "shown_in_contexts", True):
                parent = context(above)
                break
        made[point.address] = result = InterruptContext(
            id=point.id,
            info=point.info,
            address=point.address,
            is_root_cause=point.is_root_cause,
            parent=parent,
        )
        return result

    return [context(point) for point in by_address.values() if point.is_root_cause]


@attrs.define(eq=False)
class PointResume:
    """What a resumed run knows about one address."""

    was_interrupted: bool = False
    state: Any = None
    is_resume_target: bool = False
    has_data: bool = False
    data: Any = None


class ResumeState:
    """The resume points of a checkpoint and the resume data given for them."""

    __slots__ = ("_by_address", "_data", "_given", "_targeted", "_visited", "points")

    def __init__(self, points: Iterable[ResumePoint], targets: Mapping[str, Any]) -> None:
        self.points = list(points)
        self._given = dict(targets)
        self._visited: set[Address] = set()
        by_id = {point.id: point for point in self.points}
        self._by_address: dict[Address, ResumePoint] = {p.address: p for p in self.points}
        self._data: dict[Address, Any] = {}
        self._targeted: set[Address] = set()
        for point_id, data in targets.items():
            address = by_id[point_id].address
            self._data[address] = data
            for length in range(1, len(address) + 1):
                self._targeted.add(address[:length])

    def targets(self) -> dict[str, Any]:
        """The resume data given, by interrupt id."""
        return dict(self._given)

    def at(self, address: Address) -> PointResume:
        """What the component at ``address`` should know when it resumes.

        Asking is what a component does when the resumed run reaches it: the address counts
        as reached from then on (see :meth:`unreached`).
        """
        self._visited.add(address)
        point = self._by_address.get(address)
        return PointResume(
            was_interrupted=point is not None,
            state=point.state if point is not None else None,
            is_resume_target=address in self._targeted,
            has_data=address in self._data,
            data=self._data.get(address),
        )

    def unreach(self, address: Address) -> None:
        """The component at ``address`` asked for its point but did not use it (it could not:
        the resume failed there): keep the point as it was for the next save (see
        :meth:`unreached`), its id with it, so that the same resume data applies again."""
        self._visited.discard(address)

    def next_hops(self, address: Address) -> list[str]:
        """The distinct child segments of ``address`` that lead to saved points."""
        depth = len(address)
        hops: list[str] = []
        for saved in self._by_address:
            if len(saved) > depth and saved[:depth] == address and saved[depth] not in hops:
                hops.append(saved[depth])
        return hops

    def leads_to(self, address: Address, segment: str) -> bool:
        """Whether a saved point lies at or below ``address + (segment,)``."""
        return segment in self.next_hops(address)

    def addresses(self) -> list[Address]:
        """Every saved address."""
        return list(self._by_address)

    def unreached(self, recorded: Iterable[Address]) -> list[ResumePoint]:
        """The saved points the resumed run stopped before reaching, which it must save again.

        A resumed run can stop again (a cancel, an interrupt elsewhere) before it gets back to
        a component that had stopped: a Sequential cancelled at a transition before its
        resumed child, a Parallel branch not started yet. That component's points still hold
        the only record of its progress, so they go into the next checkpoint unchanged: every
        saved point whose nearest reached ancestor stopped again (has a point in ``recorded``)
        and that was not reached itself. Points under a component that was reached are its
        own business: it recorded anew, or it completed.
        """
        stopped = set(recorded)
        visited = self._visited
        kept: list[ResumePoint] = []
        for point in self.points:
            address = point.address
            if address in visited or address in stopped:
                continue
            for length in range(len(address) - 1, 0, -1):
                if address[:length] in visited:
                    if address[:length] in stopped:
                        kept.append(point)
                    break
        return kept
