"""The checkpoint of a run: what is saved, how it is read back, and the resume's lease.

The life of a checkpoint is described in :mod:`agentkit.runner`; this module holds its pieces:
the persisted :class:`Checkpoint` and its tombstone, loading with every check (a damaged or
consumed checkpoint is a :class:`~agentkit.CheckpointError`, never a raw ``AttributeError``),
saving with errors that name the value that cannot be saved, and the :class:`LeaseKeeper` that
keeps a resume exclusive while it lives.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._observe import RunUsage
from agentkit._persist import persisted
from agentkit._points import ResumePoint, ResumeState
from agentkit._runctx import RecordedEvent, RunFrame
from agentkit.checkpoint.base import DEFAULT_LEASE_TTL
from agentkit.errors import CheckpointConsumedError, CheckpointError, CheckpointNotFoundError
from agentkit.events import AgentInput
from agentkit.limits import RunLimits

if TYPE_CHECKING:
    from agentkit.checkpoint import CheckPointStore, Lease
    from agentkit.checkpoint.serializer import Serializer
    from agentkit.conversation._turn import ConversationTurn, OpenTurn

__all__ = [
    "DEFAULT_LEASE_TTL",
    "Checkpoint",
    "ConsumedCheckpoint",
    "LeaseKeeper",
    "load_checkpoint",
    "make_checkpoint",
    "resume_state",
    "save_checkpoint",
]

_log = logging.getLogger("agentkit")



@persisted("agentkit.Checkpoint")
@attrs.define
class Checkpoint:
    """What the Runner saves when a run stops before it completes (framework-internal).

    ``reason`` is ``"interrupted"``, ``"cancelled"`` or ``"failed"``. ``usage`` is what the
    run used so far and ``limits`` the limits it ran with: a resumed run continues the count
    (and keeps the limits unless it is given others).
    """

    root_input: AgentInput
    session_values: dict[str, Any]
    history: list[RecordedEvent]
    enable_streaming: bool
    points: list[ResumePoint]
    interrupt_data: Any = None
    reason: str = "interrupted"
    conversation: ConversationTurn | None = None  # the conversation turn the run belongs to
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
    """Read, verify and decode the checkpoint ``checkpoint_id``.

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
    for field in _LATER_FIELDS:
        try:
            getattr(checkpoint, field)
        except AttributeError:  # saved before checkpoints held this field
            setattr(checkpoint, field, None)
    _validate(checkpoint, checkpoint_id)
    return checkpoint

_LATER_FIELDS = ("conversation", "usage", "limits")
"""Fields added to :class:`Checkpoint` after its first release (``None`` when missing)."""


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
            f"cannot save checkpoint {checkpoint_id!r}: {_culprit(serializer, checkpoint)}"
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
) -> Checkpoint:
    """The checkpoint of the run in ``frame``, stopped at ``points`` for ``reason``."""
    root_input = frame.root_input or AgentInput()
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


def _culprit(serializer: Serializer, checkpoint: Checkpoint | ConsumedCheckpoint) -> str:
    """Name the session value or resume state that cannot be saved, if one alone fails."""
    if not isinstance(checkpoint, Checkpoint):
        return ""
    probes: list[tuple[str, Any]] = [
        (f"session value {key!r} ({type(value).__name__})", value)
        for key, value in checkpoint.session_values.items()
    ]
    probes.extend(
        (f"the interrupt state at {';'.join(point.address)} ({type(point.state).__name__})",
         point.state)
        for point in checkpoint.points
    )
    probes.append(("the interrupt info", checkpoint.interrupt_data))
    for what, value in probes:
        try:
            serializer.dumps(value, checkpoint_id="probe")
        except CheckpointError:
            return f"{what} cannot be saved: "
    return ""


def resume_state(checkpoint: Checkpoint, targets: Mapping[str, Any] | None) -> ResumeState:
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
    return ResumeState(checkpoint.points, wanted)


class LeaseKeeper:
    """Refreshes a resume's lease while the resumed run lives; releases it at the end."""

    __slots__ = ("_done", "_lease", "_thread")

    def __init__(self, lease: Lease) -> None:
        self._lease = lease
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._keep, name="agentkit-lease", daemon=True)
        self._thread.start()

    def _keep(self) -> None:
        interval = self._lease.ttl / 3
        while not self._done.wait(interval):
            try:
                if not self._lease.refresh():
                    _log.warning(
                        "agentkit: lost the claim on checkpoint %r while resuming it",
                        self._lease.checkpoint_id,
                    )
                    return
            except Exception:
                _log.warning(
                    "agentkit: could not refresh the claim on checkpoint %r",
                    self._lease.checkpoint_id,
                    exc_info=True,
                )

    def stop(self) -> None:
        self._done.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self._lease.release()
