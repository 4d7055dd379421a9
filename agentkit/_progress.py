"""Durable progress: what a run's components commit at their steps (``durability="step"``).

The design, in full (the Runner's side is :mod:`agentkit._durable`):

* **The image.** A durable run keeps in its checkpoint store an *image* of itself that a
  resume can go on from, of the same shape as a stopped run's checkpoint: the run's input,
  history and session values, and the *live points*: for every component running now, the
  resume point it would record if the run stopped here (a ChatModelAgent's conversation and
  tool round, a Sequential's child, a Parallel's lanes, a pending transfer, an agent tool's
  inner history). A run whose process died is resumed from its image the way a stopped run is
  resumed from its journal's points (:mod:`agentkit._points`).
* **Declarations.** A component says where it is with ``AgentRun.save_state``, an interrupt
  with ``interrupt()``, ``interrupt_event()`` or ``CompositeInterrupt``; each enters by one
  door, :func:`save_point`, which keeps the point in the run's journal or, in a durable run,
  hands it to :meth:`Progress.declare` alone (the writer's image is the run's one record of
  its points: a stop saves it, :meth:`Progress.close`): the writer diffs the declared state
  against what it wrote last for that address (:func:`state_delta`) and commits the *ops*
  that turn one into the other (:class:`PutPoint`, :class:`DropPoints`, :class:`SetField`,
  :class:`ExtendField`, :class:`MergeField`), addressed like resume points; the address
  ``()`` is the checkpoint itself (``history``, ``session_values``). The components never
  build ops for their own state. A ChatModelAgent declares after each model reply and each
  tool call, a workflow when it moves to its next child (the finished child's points dropped
  in the same commit), a flow when it transfers, a Parallel when it forks and as each branch
  finishes, an agent tool when its inner run starts. One commit is one unit, never split, so
  the image always shows a state its components really had.
* **History with its owner.** A commit also carries the new entries of the committing
  frame's history (:meth:`Progress.track`, through ``AgentRun.keep_history``, names where
  each history goes in the image: the run's, a Parallel lane's, an agent tool's inner
  run's). So the history never runs ahead of the points, and a Parallel branch's events are
  written by its own commits only. A field a history is kept in is the writer's: a
  declaration's delta leaves it out (its first put holds it whole).
* **Session values** that changed since the last record (a new value object under a key)
  ride on every commit. A value changed in place is written when its key is set again or at
  the next full save; set values with ``add_session_value`` to have them saved with the step.
* **Writing** is the Runner's writer (:mod:`agentkit._durable`), handed the ops as they are
  committed: it appends them to the store as one signed step record before the component
  goes on. Nothing in this module knows a store.
* **Cost.** Without ``durability="step"`` and a checkpoint id, ``RunFrame.progress`` is
  ``None``: each component checks that once per step and does nothing else.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from agentkit._persist import persisted
from agentkit._points import Journal, new_point_id

__all__ = [
    "ROOT",
    "DropPoints",
    "ExtendField",
    "LogLike",
    "MergeField",
    "Op",
    "Place",
    "Progress",
    "PutPoint",
    "SetField",
    "forget_points",
    "save_point",
    "state_delta",
]

Address = tuple[str, ...]

ROOT: Address = ()
"""The address of the checkpoint itself in ops (its fields ``history`` and ``session_values``)."""


@persisted("agentkit.StepPut")
@attrs.frozen
class PutPoint:
    """Op: the component at ``address`` is at ``state`` now (its point is replaced whole).

    ``id``, ``info`` and ``root``: an interrupt's point, as its context shows it (its id, what
    it shows, whether it is a root cause); a declared state has none (its point gets a fresh
    id). A record written before these fields existed loads with none.
    """

    address: Address
    state: Any
    id: str | None = None
    info: Any = None
    root: bool = False


@persisted("agentkit.StepDrop")
@attrs.frozen
class DropPoints:
    """Op: forget the points at and under ``address`` (those components finished)."""

    address: Address


@persisted("agentkit.StepSet")
@attrs.frozen
class SetField:
    """Op: the field ``field`` of the state at ``address`` is ``value`` now."""

    address: Address
    field: str
    value: Any


@persisted("agentkit.StepExtend")
@attrs.frozen
class ExtendField:
    """Op: ``items`` are added to the list (or set) ``field`` of the state at ``address``;
    with ``index``, to the list at that position of the field (a Parallel's lanes)."""

    address: Address
    field: str
    items: Any
    index: int | None = None


@persisted("agentkit.StepMerge")
@attrs.frozen
class MergeField:
    """Op: the dict ``field`` of the state at ``address`` is updated with ``items``."""

    address: Address
    field: str
    items: dict[Any, Any]


Op = PutPoint | DropPoints | SetField | ExtendField | MergeField
"""One change of a durable run's image."""


class LogLike(Protocol):
    """What :class:`Progress` reads of a history (an ``agentkit._runctx.EventLog``)."""

    def size(self) -> int:
        """How many entries the history holds of its own."""
        ...

    def since(self, start: int) -> list[Any]:
        """Its own entries from ``start`` on, as a checkpoint holds them."""
        ...

    def chain(self) -> tuple[LogLike, ...]:
        """This history and the ones its entries are also recorded in."""
        ...


class Place(Protocol):
    """Where a state is declared (what :func:`save_point` reads of a ``RunFrame``): the
    declaring component's address, the run's journal, its progress (``None``: not durable)
    and the history the component records into."""

    @property
    def address(self) -> Address: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def progress(self) -> Progress | None: ...
    @property
    def log(self) -> LogLike: ...


def save_point(
    place: Place,
    state: Any,
    *,
    info: Any = None,
    root_cause: bool = False,
    dropped: Sequence[Address] = (),
    done: Sequence[Address] = (),
    flush: bool = True,
    sync: bool = False,
) -> None:
    """The one way a resume point enters a run: the component at ``place`` is at ``state``.

    ``AgentRun.save_state`` and the interrupts (:func:`~agentkit.interrupt`,
    :func:`~agentkit.interrupt_event`, :class:`~agentkit.tools.CompositeInterrupt`) all call
    it. The point is kept in the run's journal, which a stop saves; in a durable run it goes
    to the writer alone (:meth:`Progress.declare`), whose image a stop saves: one source.

    ``info`` and ``root_cause`` are what an interrupt shows there; ``dropped``: addresses whose
    points are over, forgotten now in memory and in the store with this commit; ``done``:
    addresses forgotten in memory already (a child that completed: :func:`forget_points`),
    dropped in the store with this commit. ``flush`` and ``sync`` are
    :meth:`Progress.declare`'s. A root cause is
    declared with ``flush=False``: the Runner delivers an interrupt event only after the
    stop's save, which holds it, so the point needs no write of its own (a crash before that
    save leaves the interrupt undelivered: the resumed run asks again), and a write inside a
    tool would have a store's failure taken for the tool's own error.

    Raises:
        CheckpointError: a durable run's writer could not make the commit durable.
    """
    journal = place.journal
    address = place.address
    progress = place.progress
    if progress is not None:
        # A durable run keeps its points in its writer alone (what a stop saves too).
        progress.declare(
            address, state, place.log, done=(*done, *dropped), info=info,
            root_cause=root_cause, flush=flush, sync=sync,
        )
        return
    for gone in dropped:
        journal.discard_under(gone)
    if info is None and not root_cause:
        journal.declare(address, state)
    else:
        journal.record(address, state, info, root=root_cause)


def forget_points(place: Place, *, by_parent: bool = True) -> None:
    """The component at ``place`` handled its stop, or completed: forget its points and
    those below it (``AgentRun.discard_state``, a child's completion in ``AgentRun.run_child``).

    Forgotten in the journal now; in a durable run by the writer now (:meth:`Progress.forget`),
    and the store follows with the next declaration of the component above it (``by_parent``;
    otherwise the owner names it in ``done`` of its next :func:`save_point`: a composite whose
    lanes share its address), or one at or below the forgotten address, never earlier, so a
    process that dies in between goes on from the last step written; a stop's save leaves them
    out (:meth:`Progress.close`).
    """
    progress = place.progress
    if progress is not None:
        progress.forget(place.address, by_parent=by_parent)
    else:
        place.journal.discard_under(place.address)


class _Cursor:
    """Where the entries of one history go in the image, and how many were written."""

    __slots__ = ("address", "field", "index", "log", "written")

    def __init__(
        self, log: LogLike, address: Address, field: str, index: int | None, written: int
    ) -> None:
        self.log = log
        self.address = address
        self.field = field
        self.index = index
        self.written = written


Sink = Callable[[list[Op], bool], None]
"""The Runner's writer: ``sink(ops, sync)`` makes ``ops`` durable before it returns."""

_MISSING: Any = object()


class Progress:
    """The durable progress of one run: components commit ops, the writer makes them durable.

    Thread-safe: Parallel branches and parallel tool calls commit from their own threads;
    commits are written one at a time, in the order they were made.
    """

    __slots__ = (
        "_cursors", "_declared", "_held", "_kept", "_lock", "_order", "_pending", "_session",
        "_sink", "_written_session",
    )

    def __init__(self, sink: Sink, session: Any = None) -> None:
        self._sink = sink
        self._session = session  # an agentkit._runctx.Session (it has snapshot())
        self._lock = threading.Lock()
        self._cursors: dict[int, _Cursor] = {}
        # The fields histories are kept in, by address (the writer's: left out of deltas).
        self._kept: dict[Address, tuple[str, ...]] = {}
        # The state last declared per address, as the image holds it now (the base of the
        # next declaration's delta: written_base); an address the image changed otherwise is
        # not here.
        self._declared: dict[Address, Any] = {}
        # The addresses declared in this run and not forgotten since, in the order of their
        # latest declaration (the journal's order: a stop saves its points in it).
        self._order: dict[Address, None] = {}
        # Forgotten addresses whose drop waits for a declaration (forget), each with whether
        # the next declaration of the component above writes it (else its owner's ``done``).
        self._held: dict[Address, bool] = {}
        self._pending: list[Op] = []
        self._written_session: dict[str, Any] = (
            session.snapshot() if session is not None else {}
        )

    def track(
        self,
        log: LogLike,
        address: Address,
        field: str,
        index: int | None = None,
        *,
        written: int | None = None,
    ) -> bool:
        """Write the entries ``log`` records to ``field`` of the state at ``address``; return
        ``False`` (and change nothing) if ``log`` is written somewhere already.

        ``written``: how many of its entries the image holds already (default: all it has).
        """
        done = log.size() if written is None else written
        with self._lock:
            if id(log) in self._cursors:
                return False
            self._cursors[id(log)] = _Cursor(log, address, field, index, done)
            self._kept[address] = (*self._kept.get(address, ()), field)
            return True

    def untrack(self, log: LogLike) -> None:
        """Stop writing ``log`` (its component returned): the next declaration at its address
        is put whole (what was written of the field is not what was declared there)."""
        with self._lock:
            cursor = self._cursors.pop(id(log), None)
            if cursor is not None:
                self._declared.pop(cursor.address, None)
                fields = list(self._kept.pop(cursor.address, ()))
                fields.remove(cursor.field)
                if fields:
                    self._kept[cursor.address] = tuple(fields)

    def declare(
        self,
        address: Address,
        state: Any,
        log: LogLike | None = None,
        *,
        done: Sequence[Address] = (),
        info: Any = None,
        root_cause: bool = False,
        flush: bool = True,
        sync: bool = False,
    ) -> None:
        """The component at ``address`` is at ``state`` now (``AgentRun.save_state``): commit
        what changed since its last declaration, the points at ``done`` dropped first.

        The commit holds only the delta from the state declared last at ``address`` (see
        :func:`state_delta`; the writer keeps a shallow copy of it), so a step of a long run
        costs what the step changed; a field a history is kept in (:meth:`track`) is left out
        of the delta. ``info`` and ``root_cause``: an interrupt's point, put whole with a
        fresh id, its info and its root flag. The drops
        :meth:`forget` held for this address (its children's, or its own) go first.
        The commit also carries the new entries of ``log``; with ``flush`` it is written
        (with what was committed before without ``flush``) before this returns. ``sync``: the
        record must survive a power loss too (the start of a call that must not run twice
        unnoticed).

        Raises:
            CheckpointError: the writer could not make the commit durable; the component
                must not go on as if it were.
        """
        with self._lock:
            known = self._declared
            order = self._order
            ops: list[Op] = []
            if self._held:
                self._release_held(address, ops)
            for gone in done:
                ops.append(DropPoints(gone))
                self._forget(gone)
            order.pop(address, None)
            order[address] = None
            if info is not None or root_cause:
                ops.append(PutPoint(address, state, new_point_id(), info, root_cause))
                known.pop(address, None)  # the next declaration (no info) puts it whole
            else:
                ops.extend(state_delta(address, known.get(address), state,
                                       self._kept.get(address, ())))
                known[address] = written_base(state)
            self._write(ops, log, flush, sync)

    def forget(self, address: Address, *, by_parent: bool = True) -> None:
        """The points at and under ``address`` are over (:func:`forget_points`): forget them
        now (a stop leaves them out); drop them in the store with the next declaration at the
        address above (``by_parent``; otherwise with the owner's declaration that names it in
        ``done``), or at or under ``address`` (it runs again), or at the stop's save
        (:meth:`close`), never earlier."""
        with self._lock:
            self._forget(address)
            held = self._held
            if any(address[: len(gone)] == gone for gone in held):
                return  # a drop held already covers it
            held[address] = by_parent

    def close(self) -> tuple[list[Op], list[Address]]:
        """The run stops: what was committed but not written yet (the declarations made
        without ``flush``, the new entries of every kept history, the held drops), and the
        addresses declared and not forgotten, in the order of their latest declaration (the
        order a stop saves its points in). A declaration made after this (a straggling tool
        call's) is not in the stop's save, which the writer makes its last word."""
        with self._lock:
            ops = self._pending
            self._pending = []
            for cursor in self._cursors.values():
                entries = cursor.log.since(cursor.written)
                if entries:
                    ops.append(ExtendField(cursor.address, cursor.field, entries, cursor.index))
                    cursor.written += len(entries)
            ops.extend(DropPoints(gone) for gone in self._held)
            self._held = {}
            return ops, list(self._order)

    def _release_held(self, address: Address, ops: list[Op]) -> None:
        """Move to ``ops`` the held drops that a declaration at ``address`` writes: those of
        its direct children (forgotten below it, ``by_parent``) and those at or above it (it
        runs again)."""
        held = self._held
        for gone in [g for g, by_parent in held.items()
                     if (by_parent and g[:-1] == address) or address[: len(g)] == g]:
            del held[gone]
            ops.append(DropPoints(gone))

    def _forget(self, address: Address) -> None:
        """Forget what was declared at and under ``address`` (the lock held)."""
        depth = len(address)
        if self._declared:
            _forget_under(self._declared, address)
        order = self._order
        for gone in [saved for saved in order if saved[:depth] == address]:
            del order[gone]
        held = self._held
        if held:
            for gone in [saved for saved in held if saved[:depth] == address]:
                del held[gone]

    def write_session(self) -> None:
        """Write the session values that changed since the last write (a message sent to the
        run, :meth:`agentkit.RunIterator.send`) before returning, with whatever was committed
        without ``flush`` before it (never less than a declaration held).

        Raises:
            CheckpointError: the writer could not make them durable.
        """
        with self._lock:
            self._write((), None, True, False)

    def _write(self, ops: Sequence[Op], log: LogLike | None, flush: bool, sync: bool) -> None:
        """Commit ``ops`` and the new entries of ``log`` (the lock held)."""
        pending = self._pending
        if log is not None:
            for history in log.chain():
                cursor = self._cursors.get(id(history))
                if cursor is None:
                    continue
                entries = history.since(cursor.written)
                if entries:
                    pending.append(ExtendField(cursor.address, cursor.field, entries,
                                               cursor.index))
                    cursor.written += len(entries)
        pending.extend(ops)
        if not flush:
            return
        changed = self._session_changes()
        if changed:
            pending.append(MergeField(ROOT, "session_values", changed))
        if not pending:
            return
        self._pending = []
        self._sink(pending, sync)

    def _session_changes(self) -> dict[str, Any]:
        session = self._session
        if session is None or not session:
            return {}
        now: dict[str, Any] = session.snapshot()
        written = self._written_session
        changed = {
            key: value for key, value in now.items() if written.get(key, _MISSING) is not value
        }
        if changed:
            self._written_session = now
        return changed


# --- deltas of a component's state ----------------------------------------------------------


_CONTAINERS = (list, dict, set)


def written_base(state: Any) -> Any:
    """What :func:`state_delta` needs to remember of a written ``state``: its class and its
    field values, its lists, dicts and sets copied (so that a component changing them in
    place later does not change what was written). ``None``: not an attrs class, always put
    whole."""
    kind = type(state)
    known = _FIELDS_OF.get(kind)  # a class seen before (every step of a run declares one)
    if known is None:
        if not attrs.has(kind):
            return None
        known = _fields_of(kind)
    values = known[1]
    return kind, [
        value.copy() if type(value) in _CONTAINERS else value for value in values(state)
    ]


def state_delta(
    address: Address, base: Any, new: Any, kept: Sequence[str] = ()
) -> list[Op]:
    """The ops that turn the point state written as ``base`` (:func:`written_base`) into
    ``new``.

    Field by field: a value that is the same object is skipped; a list that starts with the
    written one's items (the same objects) is extended, a set that holds the written one is
    added to, a dict that holds the written one's items is merged; anything else is set whole.
    Items are compared by identity, so a list whose items were changed in place, not
    replaced, is not seen as changed. With no ``base`` (or one of another class) the point is
    put whole. The fields named in ``kept`` (histories the writer extends itself) are left
    out.
    """
    if base is None or base[0] is not type(new):
        return [PutPoint(address, new)]
    ops: list[Op] = []
    names, values = _fields_of(type(new))
    for name, before, after in zip(names, base[1], values(new), strict=True):
        if after is before or name in kept:
            continue
        kind = type(after)
        if kind is type(before) and kind in _CONTAINERS and not after and not before:
            continue  # both empty (a fresh copy of an empty list, dict or set)
        op = _field_delta(address, name, before, after)
        if op is not None:
            ops.append(op)
    return ops


_FIELDS_OF: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}


def _fields_of(cls: type) -> tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]:
    """The attrs field names of ``cls`` and a getter of their values, as a tuple.

    Remembered per class (a durable run diffs its state at every step; point states are a
    few classes).
    """
    known = _FIELDS_OF.get(cls)
    if known is None:
        names = tuple(field.name for field in attrs.fields(cls))
        if len(names) >= 2:
            known = names, operator.attrgetter(*names)
        else:  # attrgetter of one name returns the value itself, not a tuple
            getters = [operator.attrgetter(name) for name in names]
            known = names, lambda value: tuple(get(value) for get in getters)
        if len(_FIELDS_OF) < 256:
            _FIELDS_OF[cls] = known
    return known


def _forget_under(known: dict[Address, Any], address: Address) -> None:
    """Forget what was declared at and under ``address`` (its points were dropped)."""
    depth = len(address)
    for gone in [saved for saved in known if saved[:depth] == address]:
        del known[gone]


def _field_delta(address: Address, name: str, before: Any, after: Any) -> Op | None:
    kind = type(after)
    if kind is not type(before):
        return SetField(address, name, after.copy() if kind in _CONTAINERS else after)
    if kind is list:
        size = len(before)
        if len(after) >= size and all(map(operator.is_, before, after)):
            return ExtendField(address, name, after[size:]) if len(after) > size else None
        return SetField(address, name, after.copy())
    if kind is set:
        if before <= after:
            return ExtendField(address, name, after - before) if after != before else None
        return SetField(address, name, after.copy())
    if kind is dict:
        if all(key in after and after[key] is value for key, value in before.items()):
            added = {key: value for key, value in after.items()
                     if before.get(key, _MISSING) is not value}
            return MergeField(address, name, added) if added else None
        return SetField(address, name, after.copy())
    if after == before:
        return None
    return SetField(address, name, after)


def apply_ops(
    ops: Sequence[Op],
    root: Any,
    points: dict[Address, Any],
    make_point: Callable[[Address, Any, str | None, Any, bool], Any],
    *,
    own: Callable[[Any], Any],
) -> None:
    """Apply ``ops`` to an image: ``root`` (the checkpoint) and ``points`` (address -> point).

    ``make_point(address, state, id, info, root)`` builds a point for :class:`PutPoint`;
    ``own(value)`` gives a copy of a put state or of added items that nothing else holds (the
    image changes them in place later). Raises ``ValueError`` naming the op that does not fit
    the image.
    """
    for op in ops:
        if isinstance(op, PutPoint):
            points.pop(op.address, None)  # a put point comes last, like a recorded one
            # A record written before the point's id, info and root flag were has none.
            points[op.address] = make_point(
                op.address, own(op.state), getattr(op, "id", None), getattr(op, "info", None),
                getattr(op, "root", False),
            )
        elif isinstance(op, DropPoints):
            depth = len(op.address)
            for address in [a for a in points if a[:depth] == op.address]:
                del points[address]
        else:
            _apply_field(op, _target(op.address, root, points), own)


def _target(address: Address, root: Any, points: Mapping[Address, Any]) -> Any:
    if address == ROOT:
        return root
    point = points.get(address)
    if point is None:
        raise ValueError(f"a step changes the point at {';'.join(address)!r}, which it has not")
    return point.state


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> frozenset[str]:
    """The attrs field names of ``cls`` (none for a class that is not an attrs class).

    Remembered per class (a durable run applies ops at every step; point states are a few
    classes).
    """
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = frozenset(attrs.fields_dict(cls)) if attrs.has(cls) else frozenset()
        if len(_FIELD_NAMES) < 256:
            _FIELD_NAMES[cls] = names
    return names


def _apply_field(op: SetField | ExtendField | MergeField, target: Any, own: Callable[[Any], Any]
                 ) -> None:
    name = op.field
    if name not in _field_names(type(target)):
        raise ValueError(f"a step changes {type(target).__name__}.{name}, which is not a field")
    if isinstance(op, SetField):
        object.__setattr__(target, name, own(op.value))
        return
    value = getattr(target, name)
    if isinstance(op, ExtendField) and op.index is not None:
        value = value[op.index]
    if isinstance(op, MergeField):
        if not isinstance(value, dict) or not isinstance(op.items, dict):
            raise ValueError(f"a step merges into {type(target).__name__}.{name}, not a dict")
        value.update(op.items)
    elif isinstance(value, list):
        value.extend(op.items)
    elif isinstance(value, set):
        value.update(op.items)
    else:
        raise ValueError(f"a step extends {type(target).__name__}.{name}, not a list or set")
