"""The checkpoint of a run: what is saved, how it is read back, and the run's lease.

The life of a checkpoint is described in :mod:`agentkit.runner`; this module holds its pieces:
the persisted :class:`Checkpoint` and its tombstone, loading with every check (a damaged or
consumed checkpoint is a :class:`~agentkit.CheckpointError`, never a raw ``AttributeError``;
a durable run's step records are folded in, see :mod:`agentkit._durable`), saving with errors
that name the value that cannot be saved, and the :class:`LeaseKeeper` that keeps a run
exclusive while it lives.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._clock import SYSTEM_CLOCK, Clock
from agentkit._events import AgentInput
from agentkit._interrupt import ResumeOnlyData, ToolRoundState
from agentkit._limits import RunLimits
from agentkit._observe import RunUsage
from agentkit._options import HeldLease
from agentkit._persist import persisted
from agentkit._points import ResumePoint, ResumeState, new_point_id
from agentkit._progress import ROOT, ExtendField, MergeField, PutPoint, SetField, apply_ops
from agentkit._refresher import Refreshed, refresher_for
from agentkit._runctx import RecordedEvent, RunFrame
from agentkit.checkpoint._base import DEFAULT_LEASE_TTL, Lease
from agentkit.errors import CheckpointConsumedError, CheckpointError, CheckpointNotFoundError

if TYPE_CHECKING:
    from agentkit.checkpoint import CheckPointStore
    from agentkit.checkpoint._serializer import Serializer
    from agentkit.conversation._turn import ConversationTurn, OpenTurn

__all__ = [
    "DEFAULT_LEASE_TTL",
    "RUN_LEASE_TTL",
    "Checkpoint",
    "ConsumedCheckpoint",
    "KeptLease",
    "LeaseKeeper",
    "StepRecord",
    "culprit",
    "fold_steps",
    "load_checkpoint",
    "make_checkpoint",
    "new_point",
    "resume_state",
    "save_checkpoint",
]

RUN_LEASE_TTL = 30.0
"""Seconds a run's lease lasts unless refreshed (``Runner(lease_ttl=...)``): a live run
refreshes it every third of that, so this is how long a crashed run's id stays busy."""

_log = logging.getLogger("agentkit")



@persisted("agentkit.Checkpoint")
@attrs.define
class Checkpoint:
    """What the Runner saves when a run stops before it completes (framework-internal).

    ``reason`` is ``"interrupted"``, ``"cancelled"``, ``"failed"``, or ``"running"`` for the
    image of a durable run that has not stopped (``durability="step"``; see
    :mod:`agentkit._durable`), which its step records bring up to date. ``usage`` is what the
    run used so far and ``limits`` the limits it ran with: a resumed run continues the count
    (and keeps the limits unless it is given others).

    Fields added after the first release have defaults, and loading fills them in for
    checkpoints written before they existed (the decoder gives an attrs object written before
    a field existed that field's default): add new per-run state the same way, as a field
    with a default.
    """

    root_input: AgentInput
    session_values: dict[str, Any]
    history: list[RecordedEvent]
    enable_streaming: bool
    points: list[ResumePoint]
    interrupt_data: Any = None
    reason: str = "interrupted"
    conversation: ConversationTurn | None = None  # the conversation turn the run belongs to
    key: str = ""  # the run's key, which tool_call_key() derives from ("" before it existed)
    generation: str = ""  # names this save: the step records written after it carry it
    # Resume data a resumed run was given and had not used up when it stopped or died:
    # resuming again without targets uses it (interrupt id -> data).
    resume_data: dict[str, Any] = attrs.Factory(dict)
    usage: RunUsage | None = None  # what the run used so far (None: saved before it was kept)
    limits: RunLimits | None = None  # the limits the run ran with


@persisted("agentkit.ConsumedCheckpoint")
@attrs.define
class ConsumedCheckpoint:
    """The tombstone of a checkpoint whose resumed run completed (framework-internal)."""

    completed_at: str  # ISO 8601, UTC


def load_checkpoint(
    store: CheckPointStore, serializer: Serializer, checkpoint_id: str
) -> Checkpoint:
    """Read, verify and decode the checkpoint ``checkpoint_id`` (its step records folded in).

    Every failure is a :class:`~agentkit.CheckpointError`; a consumed checkpoint raises
    :class:`~agentkit.CheckpointConsumedError`.
    """
    try:
        data = store.get(checkpoint_id)
    except Exception as error:
        raise CheckpointError(
            f"cannot load checkpoint {checkpoint_id!r}: the store failed to read it: "
            f"{type(error).__name__}: {error}"
        ) from error
    if data is None:
        raise CheckpointNotFoundError(_not_found(store, checkpoint_id))
    from agentkit.checkpoint._binding import loads_for_store

    checkpoint = loads_for_store(serializer, store, checkpoint_id, data)
    if isinstance(checkpoint, ConsumedCheckpoint):
        raise CheckpointConsumedError(
            f"checkpoint {checkpoint_id!r} was consumed: a resumed run of it completed at "
            f"{checkpoint.completed_at}, so it cannot be resumed again (that would repeat "
            "what the run did); start a new run instead"
        )
    if not isinstance(checkpoint, Checkpoint):
        raise CheckpointError(
            f"cannot load checkpoint {checkpoint_id!r}: it holds a "
            f"{type(checkpoint).__name__}, not the saved state of an agentkit run"
        )
    _validate(checkpoint, checkpoint_id)
    return fold_steps(store, serializer, checkpoint_id, checkpoint)


@persisted("agentkit.StepRecord")
@attrs.frozen
class StepRecord:
    """One commit of a durable run, as appended to its checkpoint's journal.

    ``generation`` names the base it follows; ``seq`` is its place among that base's records
    (1, 2, 3...). Both are inside the signed payload. ``usage`` is what the run had used when
    the record was written, for a run with limits (so a run resumed after a crash counts on
    from its last step, not from its last base); ``None`` otherwise.
    """

    generation: str
    seq: int
    ops: list[Any]
    usage: RunUsage | None = None


# --- loading ----------------------------------------------------------------------------------


def fold_steps(
    store: CheckPointStore, serializer: Serializer, checkpoint_id: str, checkpoint: Checkpoint
) -> Checkpoint:
    """``checkpoint`` (a base just loaded) brought up to date with its step records.

    The records of the base's generation are applied in order (see :mod:`agentkit._durable`);
    those of another generation are left over from before the base was saved again, and
    skipped; a record repeated byte for byte right after itself (an append retried after a
    lost answer) is applied once.

    Raises:
        CheckpointError: a record is forged, from elsewhere, out of place or does not fit.
    """
    from agentkit.checkpoint._base import journals

    if not journals(store) or not checkpoint.generation:
        return checkpoint
    try:
        records = store.read_steps(checkpoint_id)
    except CheckpointError:
        raise
    except Exception as error:
        raise CheckpointError(
            f"cannot load checkpoint {checkpoint_id!r}: the store failed to read its step "
            f"records: {type(error).__name__}: {error}"
        ) from error
    if not records:
        return checkpoint
    from agentkit.checkpoint._binding import loads_for_store

    points = {point.address: point for point in checkpoint.points}
    expected = 1
    previous = b""
    for position, data in enumerate(records, 1):
        if data == previous:
            # The same record twice in a row: an append retried after its first try reached
            # the store but its answer was lost (a dropped connection). Applied once.
            continue
        previous = data
        try:
            record = loads_for_store(serializer, store, checkpoint_id, data)
        except CheckpointError as error:
            raise CheckpointError(
                f"cannot load checkpoint {checkpoint_id!r}: its step record {position} is "
                f"refused: {error}"
            ) from None
        if not isinstance(record, StepRecord):
            raise CheckpointError(
                f"cannot load checkpoint {checkpoint_id!r}: its step record {position} holds a "
                f"{type(record).__name__}, not a step record"
            )
        if record.generation != checkpoint.generation:
            continue  # left over from before the base was saved again
        if record.seq != expected:
            raise CheckpointError(
                f"cannot load checkpoint {checkpoint_id!r}: its step record {position} says "
                f"it is step {record.seq} of its run, but it is in the place of step "
                f"{expected}: the records were reordered, or one was replayed; refusing them"
            )
        if record.usage is not None:
            checkpoint.usage = record.usage
        try:
            apply_ops(record.ops, checkpoint, points, new_point, own=_same)
        except (ValueError, TypeError, AttributeError, IndexError) as error:
            raise CheckpointError(
                f"cannot load checkpoint {checkpoint_id!r}: its step record {position} does "
                f"not fit the checkpoint ({error})"
            ) from None
        expected += 1
    checkpoint.points = list(points.values())
    return checkpoint


def new_point(
    address: tuple[str, ...],
    state: Any,
    point_id: str | None = None,
    info: Any = None,
    root: bool = False,
) -> ResumePoint:
    """The point a step record puts at ``address``: an interrupt's with its id, info and
    root flag; a declared state's with a fresh id (no interrupt targets it)."""
    return ResumePoint(point_id or new_point_id(), address, state, info, root)


def _same(value: Any) -> Any:
    return value


def _not_found(store: CheckPointStore, checkpoint_id: str) -> str:
    """What can be told about an id the store has nothing under."""
    ttl = getattr(store, "ttl", None)
    dropped = (
        f", or the store dropped it: it keeps a checkpoint {ttl:g} seconds after it was saved "
        "(its ttl), and the tombstone of a resumed run that completed too"
        if isinstance(ttl, (int, float)) and not isinstance(ttl, bool)
        else ", or it was deleted from the store"
    )
    return (
        f"no checkpoint is saved under {checkpoint_id!r}: no run saved one under this id"
        f"{dropped}. (A checkpoint whose resumed run completed is not this error but "
        "CheckpointConsumedError, as long as the store keeps it.) Check the id: runs save under "
        "the id given with with_checkpoint_id(...)"
    )


def save_checkpoint(
    store: CheckPointStore | None,
    serializer: Serializer,
    checkpoint_id: str,
    checkpoint: Checkpoint | ConsumedCheckpoint,
) -> None:
    """Encode and store ``checkpoint``; every failure is a :class:`~agentkit.CheckpointError`."""
    if store is None:
        raise CheckpointError(
            "the run has a checkpoint id but the Runner has no checkpoint_store; create "
            "the Runner with checkpoint_store=..."
        )
    from agentkit.checkpoint._binding import dumps_for_store

    try:
        payload = dumps_for_store(serializer, store, checkpoint_id, checkpoint)
    except CheckpointError as error:
        raise CheckpointError(
            f"cannot save checkpoint {checkpoint_id!r}: {culprit(serializer, checkpoint)}"
            f"{error}"
        ) from error
    try:
        store.set(checkpoint_id, payload)
    except Exception as error:
        raise CheckpointError(
            f"cannot save checkpoint {checkpoint_id!r}: the store refused it: "
            f"{type(error).__name__}: {error}"
        ) from error

def make_checkpoint(
    frame: RunFrame,
    points: list[ResumePoint],
    data: Any,
    reason: str,
    turn: OpenTurn | None = None,
    resume_data: Mapping[str, Any] | None = None,
) -> Checkpoint:
    """The checkpoint of the run in ``frame``, stopped at ``points`` for ``reason``.

    ``resume_data``: the resume data the run was given that targets one of ``points`` (the
    rest was used), but for the data that serves one resume only (:class:`ResumeOnlyData`).
    """
    root_input = frame.root_input or AgentInput()
    known = {point.id for point in points}
    ledger = frame.observers.usage
    return Checkpoint(
        root_input=AgentInput(
            messages=list(root_input.messages), enable_streaming=root_input.enable_streaming
        ),
        session_values=frame.session.snapshot() if frame.session is not None else {},
        history=[record.checkpointable() for record in frame.log.visible()],
        enable_streaming=root_input.enable_streaming,
        points=points,
        interrupt_data=data,
        reason=reason,
        conversation=None if turn is None else turn.turn,
        key=frame.key.value,
        resume_data={
            k: v for k, v in (resume_data or {}).items()
            if k in known and not isinstance(v, ResumeOnlyData)
        },
        usage=ledger.snapshot(),
        limits=ledger.limits,
    )


def _validate(checkpoint: Checkpoint, checkpoint_id: str) -> None:
    """Refuse a checkpoint whose fields are missing or of the wrong type (edited by hand)."""
    expected: list[tuple[str, type | tuple[type, ...]]] = [
        ("root_input", AgentInput),
        ("session_values", dict),
        ("history", list),
        ("enable_streaming", bool),
        ("points", list),
        ("reason", str),
        ("usage", (RunUsage, type(None))),
        ("limits", (RunLimits, type(None))),
    ]
    for field, kind in expected:
        try:
            value = getattr(checkpoint, field)
        except AttributeError:
            value = _MISSING
        if not isinstance(value, kind):
            raise CheckpointError(
                f"cannot load checkpoint {checkpoint_id!r}: it is damaged (edited by hand?): its "
                f"field {field!r} is {'missing' if value is _MISSING else type(value).__name__}"
            )
    for item in checkpoint.history:
        if not isinstance(item, RecordedEvent):
            raise CheckpointError(
                f"cannot load checkpoint {checkpoint_id!r}: it is damaged (edited by hand?): its "
                f"history holds a {type(item).__name__}"
            )
    for point in checkpoint.points:
        if not isinstance(point, ResumePoint):
            raise CheckpointError(
                f"cannot load checkpoint {checkpoint_id!r}: it is damaged (edited by hand?): its "
                f"resume points hold a {type(point).__name__}"
            )


_MISSING = object()


def culprit(serializer: Serializer, checkpoint: Any) -> str:
    """Name the session value or resume state that cannot be saved, if one alone fails."""
    probes: list[tuple[str, Any]]
    if isinstance(checkpoint, Checkpoint):
        probes = [
            (f"session value {key!r} ({type(value).__name__})", value)
            for key, value in checkpoint.session_values.items()
        ]
        for point in checkpoint.points:
            where = ";".join(point.address)
            if isinstance(point.state, ToolRoundState):
                probes.extend(
                    (f"run-local value {key!r} ({type(value).__name__}) at {where}", value)
                    for key, value in point.state.run_locals.items()
                )
            probes.append(
                (f"the interrupt state at {where} ({type(point.state).__name__})", point.state)
            )
        probes.append(("the interrupt info", checkpoint.interrupt_data))
        probes.append(("the resume data", checkpoint.resume_data))
    else:
        probes = _step_probes(checkpoint)
    for what, value in probes:
        try:
            serializer.dumps(value, checkpoint_id="probe")
        except CheckpointError:
            return f"{what} cannot be saved: "
    return ""


def _step_probes(record: Any) -> list[tuple[str, Any]]:
    """The values of a step record that could fail to encode, each with what to call it."""
    probes: list[tuple[str, Any]] = []
    for op in record.ops if isinstance(record, StepRecord) else ():
        where = ";".join(op.address)
        if isinstance(op, MergeField) and op.address == ROOT:
            probes.extend(
                (f"session value {key!r} ({type(value).__name__})", value)
                for key, value in op.items.items()
            )
        elif isinstance(op, PutPoint):
            probes.append((f"the state at {where} ({type(op.state).__name__})", op.state))
        elif isinstance(op, SetField | ExtendField | MergeField):
            value = op.value if isinstance(op, SetField) else op.items
            probes.append((f"the change of {op.field} at {where or 'the run'}", value))
    return probes


def resume_state(checkpoint: Checkpoint, targets: Mapping[str, Any] | None) -> ResumeState:
    """The resume state of ``checkpoint`` for ``targets`` (interrupt id -> resume data).

    The resume data a resumed run was given and did not use up before it stopped or died
    (``Checkpoint.resume_data``) applies again, unless ``targets`` says otherwise.

    Raises:
        ValueError: a target id is not an interrupt id of the checkpoint.
    """
    wanted = dict(targets or {})
    known_ids = {point.id for point in checkpoint.points}
    unknown = sorted(set(wanted) - known_ids)
    if unknown:
        roots = sorted(point.id for point in checkpoint.points if point.is_root_cause)
        raise ValueError(
            f"unknown interrupt id(s) {', '.join(map(repr, unknown))}; this checkpoint's "
            f"interrupt ids are: {', '.join(map(repr, roots)) or 'none'} (ids change each "
            "time a run interrupts: use those of the latest interrupt event)"
        )
    saved = {k: v for k, v in checkpoint.resume_data.items() if k in known_ids}
    return ResumeState(checkpoint.points, {**saved, **wanted})


class KeptLease(abc.ABC):
    """A lease its holder keeps refreshed, and which says when it was lost.

    A worker that holds many runs' leases refreshes them all from one thread (the Celery
    integration's watcher does); a run given such a lease (``with_checkpoint_id(id,
    lease=...)``) starts no refreshing thread of its own: its :class:`LeaseKeeper` asks to be
    told (:meth:`watch`) when the holder loses the lease, and stops the run then.
    """

    __slots__ = ()

    @property
    @abc.abstractmethod
    def checkpoint_id(self) -> str:
        """The leased id."""

    @property
    @abc.abstractmethod
    def ttl(self) -> float:
        """Seconds the lease lasts unless refreshed."""

    @property
    def owner(self) -> str | None:
        """The owner name the store holds the lease under, if known (``None`` here); a store
        that can uses it to fence the run's writes."""
        return None

    @abc.abstractmethod
    def refresh(self, ttl: float | None = None) -> bool:
        """Extend the lease now; ``False`` when it was lost or given back."""

    @abc.abstractmethod
    def release(self) -> None:
        """Give the lease back (idempotent)."""

    @abc.abstractmethod
    def watch(self, on_lost: Callable[[str], object]) -> None:
        """Call ``on_lost(reason)`` once when the holder loses the lease (at once if it has).

        It may be called from any thread, and must not block on the run's own work.
        """

    @abc.abstractmethod
    def unwatch(self) -> None:
        """Stop telling of a loss (the run ended)."""


class LeaseKeeper(Refreshed):
    """Keeps a run's lease while the run lives: refreshes it, and says when it was lost.

    Every lease of the process is refreshed every third of its ttl by one thread
    (``agentkit-lease``), which runs while at least one keeper lives and is joined when the
    last one stops: a process with a thousand durable runs has one keeper thread, not a
    thousand. A :class:`KeptLease` is refreshed by its holder instead, and only watched here.
    The lease is *lost* when a refresh says another owner took it (it expired meanwhile: the
    process was paused, or the store unreachable, for longer than the ttl), or when no
    refresh succeeded for a whole ttl (the store is down: the lease may have expired). Then
    ``on_lost(reason)`` is called once, from the refreshing thread (a kept lease's: from its
    holder's): the run must stop, and save nothing, since another process may be running it
    by now. ``on_lost`` must return quickly (request a cancel, set a flag): the other leases
    wait for it. :meth:`stop` ends the keeping and releases the lease (unless it was made
    with ``release=False``: a lease the caller took and gives back itself).

    When a refresh is due and when a lease that could not be refreshed counts as lost are
    read on ``clock`` (default: the clock of the lease's store, ``clock=`` of the built-in
    stores, for a :class:`~agentkit.checkpoint.Lease`; else the system's). With a
    :class:`~agentkit.testing.ManualClock`, a test moves past a refresh or a whole ttl at
    once (``clock.advance(...)``) instead of waiting for it; the refreshing thread still
    waits on a condition, never in a sleep.

    One thread serves all leases, so a store whose calls hang delays every refresh behind
    them; a lease whose refresh comes too late is found expired (its store says so) and is
    lost as above, never kept by mistake.

    Example::

        lease = lease_for(store, "run-1", 30.0)
        keeper = LeaseKeeper(lease, on_lost=lambda reason: handle.cancel())
        try:
            ...  # the work the lease protects
        finally:
            keeper.stop()
    """

    __slots__ = (
        "_clock", "_held_until", "_kept", "_lease", "_lost", "_on_lost", "_refresher", "_release"
    )

    def __init__(
        self,
        lease: HeldLease,
        *,
        on_lost: Callable[[str], object] | None = None,
        release: bool = True,
        clock: Clock | None = None,
    ) -> None:
        super().__init__()
        if clock is None:
            clock = lease.clock if isinstance(lease, Lease) else SYSTEM_CLOCK
        self._clock = clock
        self._refresher = refresher_for(clock)
        self._lease = lease
        self._on_lost = on_lost
        self._release = release
        self._lost: str | None = None
        self._held_until = clock.monotonic() + lease.ttl
        self._kept = isinstance(lease, KeptLease)
        if isinstance(lease, KeptLease):
            lease.watch(self._lose)
        else:
            self._refresher.add(self)

    @property
    def lease(self) -> HeldLease:
        """The lease kept."""
        return self._lease

    @property
    def lost(self) -> str | None:
        """Why the lease was lost, or ``None`` while it is held."""
        return self._lost

    @property
    def refresh_interval(self) -> float:
        """A third of the lease's ttl."""
        return self._lease.ttl / 3

    def refresh_once(self) -> bool:
        """Refresh the lease (in the refreshing thread); ``False``: it was lost."""
        lease = self._lease
        try:
            refreshed = lease.refresh()
        except Exception:
            _log.warning(
                "agentkit: could not refresh the lease on checkpoint %r",
                lease.checkpoint_id,
                exc_info=True,
            )
            if self._clock.monotonic() < self._held_until:
                return True
            if not self.refresh_stopped:
                self._lose(
                    f"its lease could not be refreshed for {lease.ttl:g} seconds (the "
                    "store failed), so another process may have taken the run over"
                )
            return False
        if not refreshed:
            if not self.refresh_stopped:
                self._lose(
                    "its lease expired and another process took it (was this process "
                    f"paused, or the store unreachable, for more than {lease.ttl:g} s?)"
                )
            return False
        self._held_until = self._clock.monotonic() + lease.ttl
        return True

    def _lose(self, reason: str) -> None:
        if self.refresh_stopped and self._kept:
            return  # a kept lease lost after the run ended: nothing left to stop
        self._lost = reason
        _log.warning("agentkit: run of checkpoint %r lost: %s", self._lease.checkpoint_id, reason)
        if self._on_lost is not None:
            try:
                self._on_lost(reason)
            except Exception:  # the refreshing thread has nobody to raise to
                _log.exception("agentkit: on_lost of checkpoint %r failed",
                               self._lease.checkpoint_id)

    def stop(self) -> None:
        """Stop refreshing; release the lease (unless made with ``release=False``).

        A refresh of this lease under way is waited for first, so the release comes after
        it.
        """
        try:
            if self._kept:
                self.refresh_stopped = True
                kept = self._lease
                assert isinstance(kept, KeptLease)
                kept.unwatch()
            else:
                self._refresher.remove(self)
        finally:  # also after a Ctrl-C in that wait: the lease is not left to expire
            if self._release:
                self._lease.release()
