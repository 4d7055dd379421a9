"""Durable steps, the Runner's side: a run's image in the store, written as it goes.

``Runner(durability="step")`` with a checkpoint store and id makes every finished model reply
and tool call durable before the run goes on (the components' side, what they commit and when,
is :mod:`agentkit._progress`). What is in the store:

* **The base**: a :class:`~agentkit._checkpoints.Checkpoint` of reason ``"running"``, written
  when the run starts (or is resumed) under a fresh random ``generation``; then a full save
  again whenever the run stops (interrupt, cancel, failure: as with ``durability="stop"``) and
  when the journal has grown as large as the base (compaction, so that the records a resume
  reads stay bounded and no step pays for the whole history).
* **Step records** (:class:`StepRecord`), one per commit, appended to the store's journal of
  the id (:class:`~agentkit.checkpoint.JournalingCheckPointStore`): the commit's ops, its
  generation and its number. Each is encoded and signed like a checkpoint, by the run's
  serializer, so it is bound to the checkpoint id and the store's namespace; the number and
  the generation are inside the signed payload. A step costs what changed, not the history.
* A store without a journal gets the whole image saved at each step instead (the documented
  fallback: correct, but the cost of a step grows with the run).

Loading (:func:`fold_steps`) reads the base and its records and applies the records of the
base's generation in order: a record of another generation is left over from an earlier save
(written before a crash cut the clean-up short) and skipped; a record that fails its signature
(forged, or from another id or store), or whose number is not its place (reordered,
replayed), is refused with :class:`~agentkit.CheckpointError`. A record torn by a crash during
its append never reaches the fold: the store drops it (the file store frames records with a
CRC; SQLite and Redis append atomically).

When the run completes, a tombstone replaces the base (a later resume says the run
completed) and the records are deleted. A run that lost its lease (another process resumed
it after the lease expired) is *fenced*: it writes nothing more.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import attrs

from agentkit._cancel import CancelMode
from agentkit._checkpoints import (
    Checkpoint,
    ConsumedCheckpoint,
    LeaseKeeper,
    StepRecord,
    culprit,
    new_point,
    save_checkpoint,
)
from agentkit._observe import RunUsage
from agentkit._options import HeldLease
from agentkit._points import ResumePoint, ResumeState
from agentkit._progress import ROOT, Op, Progress, apply_ops
from agentkit.checkpoint._base import DEFAULT_MAX_BYTES, journals, namespace_of, rebases
from agentkit.errors import CheckpointError

if TYPE_CHECKING:
    from agentkit._runctx import EventLog
    from agentkit._scope import RunScope
    from agentkit.checkpoint import CheckPointStore, JournalingCheckPointStore
    from agentkit.checkpoint._serializer import Serializer

__all__ = ["DurableRun", "StepWriter", "tombstone"]

Address = tuple[str, ...]

COMPACT_MIN_BYTES = 256 * 1024
"""The journal is folded into a new base once it holds this much, or as much as the base."""


def new_generation() -> str:
    """A fresh name for a base save."""
    return uuid.uuid4().hex


# --- writing ----------------------------------------------------------------------------------


class StepWriter:
    """Writes one durable run to its store: the base, then a signed record per commit.

    Thread-safe: commits come from every thread of the run, the final save from the run's
    end. After the final save (or once fenced) it refuses to write, so a straggler (a tool
    call the run stopped waiting for) cannot add a record after the run's last word.
    """

    __slots__ = (
        "_base_bytes",
        "_checkpoint_id",
        "_closed",
        "_encoder",
        "_fenced",
        "_generation",
        "_image",
        "_journal_bytes",
        "_journals",
        "_limit",
        "_lock",
        "_namespace",
        "_points",
        "_seq",
        "_serializer",
        "_store",
        "_unsaved",
        "_usage",
    )

    def __init__(
        self,
        store: CheckPointStore,
        serializer: Serializer,
        checkpoint_id: str,
        usage: Callable[[], RunUsage] | None = None,
    ) -> None:
        self._store = store
        self._usage = usage
        self._serializer = serializer
        self._checkpoint_id = checkpoint_id
        self._journals = journals(store)
        self._namespace = namespace_of(store)
        max_bytes = getattr(store, "max_bytes", DEFAULT_MAX_BYTES)
        self._limit = max_bytes // 2 if isinstance(max_bytes, int) else DEFAULT_MAX_BYTES // 2
        self._lock = threading.Lock()
        self._image: Checkpoint | None = None
        self._points: dict[Address, ResumePoint] = {}
        self._generation = ""
        self._seq = 0
        self._journal_bytes = 0
        self._base_bytes = 0
        self._fenced: str | None = None
        self._closed = False
        self._unsaved = False  # the first image waits for the first commit (start(save=False))
        self._encoder: Callable[[StepRecord], bytes] | None = None  # the serializer, bound

    @property
    def checkpoint_id(self) -> str:
        """The id the run is saved under."""
        return self._checkpoint_id

    def fence(self, reason: str) -> None:
        """Refuse every later write: the run lost its lease (``reason`` says how).

        Takes no lock and never waits: whoever learns of the loss (the refresher, a Celery
        worker's watcher) fences the writer before it cancels the run, so the save the cancel
        makes is refused, even while a write is waiting out a store outage (that write, begun
        before the loss, ends as it would have; every later one checks the fence under the
        lock).
        """
        self._fenced = reason

    # --- the base ---

    def start(self, checkpoint: Checkpoint, *, save: bool = True) -> None:
        """Write the run's first image (its input, session, history and points so far).

        ``save=False``: keep it unwritten; the first commit writes it, with its step, as
        the base (the caller starts the run again from its input if it stops before).
        """
        with self._lock:
            self._check_open()
            self._image = _own(checkpoint)
            self._points = {point.address: point for point in self._image.points}
            if save:
                self._save_image()
            else:
                self._unsaved = True

    def final_points(
        self, ops: list[Op], order: list[Address], resume: ResumeState | None
    ) -> list[ResumePoint] | None:
        """The run stops: apply ``ops`` (what was committed but not written) to the image and
        return its points, as the stop saves them (``None``: the run has no image yet).

        The points declared in this run come in ``order`` (that of their latest
        declarations); after them, in a resumed run, the saved points it did not get back to
        (:meth:`ResumeState.unreached`). Every other point is over (a loaded point the run
        got back to and did not declare again) and is dropped from the image.

        Raises:
            CheckpointError: the ops do not fit the image (nothing can be saved).
        """
        with self._lock:
            image = self._image
            if image is None:
                return None
            points = self._points
            try:
                apply_ops(ops, image, points, new_point, own=_own)
            except (ValueError, TypeError, AttributeError, IndexError) as error:
                raise CheckpointError(
                    f"cannot save checkpoint {self._checkpoint_id!r}: the run's last steps do "
                    f"not fit its image ({error})"
                ) from error
            final = [points[address] for address in order if address in points]
            if resume is not None:
                final.extend(
                    points[kept.address]
                    for kept in resume.unreached(order)
                    if kept.address in points
                )
            self._points = {point.address: point for point in final}
            image.points = list(final)
            return final

    def save(self, checkpoint_id: str, checkpoint: Checkpoint | ConsumedCheckpoint) -> None:
        """The run stopped (``Checkpoint``) or completed (the tombstone): its last save."""
        assert checkpoint_id == self._checkpoint_id
        with self._lock:
            self._check_open()
            self._closed = True
            if isinstance(checkpoint, Checkpoint):
                # An interrupt (or a cancel): set(), which survives a power loss. Its points
                # are the image's (final_points): the image is what is saved.
                checkpoint.generation = new_generation()
                save_checkpoint(self._store, self._serializer, checkpoint_id, checkpoint)
                self._image = checkpoint
                self._delete_steps()
                return
            if not rebases(self._store):
                save_checkpoint(self._store, self._serializer, checkpoint_id, checkpoint)
                self._delete_steps()
                return
            # The tombstone: with the durability of the run's step records.
            store = self._store
            data = self._dumps(checkpoint, "save")
            _store_call(
                checkpoint_id, "save", lambda: store.set_base(checkpoint_id, data, sync=False)
            )

    def discard(self) -> None:
        """The run ended with nothing to resume: remove its image (and its records)."""
        with self._lock:
            self._check_open()
            self._closed = True
            try:
                self._store.delete(self._checkpoint_id)
            except CheckpointError:
                raise
            except Exception as error:
                raise CheckpointError(
                    f"cannot delete checkpoint {self._checkpoint_id!r}: the store refused: "
                    f"{type(error).__name__}: {error}"
                ) from error

    # --- the steps ---

    def write(self, ops: list[Op], sync: bool) -> None:
        """Make ``ops`` (one commit) durable: append a record, or save the image again.

        The image in memory takes the ops even when the store refuses them: it holds what
        the run's components declared, which a stop saves (:meth:`final_points`).
        """
        with self._lock:
            self._check_open()
            image = self._image
            assert image is not None, "a durable run commits after its start"
            if self._unsaved:  # the first image, written with its first step
                self._unsaved = False
                if self._usage is not None:
                    image.usage = self._usage()
                apply_ops(ops, image, self._points, new_point, own=_own)
                self._save_image(sync)
                return
            if not self._journals:
                apply_ops(ops, image, self._points, new_point, own=_own)
                self._save_image(sync)
                return
            usage = None if self._usage is None else self._usage()
            if usage is not None:
                image.usage = usage  # a compaction's new base carries it too
            try:
                record = StepRecord(self._generation, self._seq + 1, ops, usage)
                data = self._encode(record)
                compact = self._journal_bytes + len(data) > max(
                    COMPACT_MIN_BYTES, self._base_bytes
                ) or (self._journal_bytes + len(data) > self._limit)
                if not compact:
                    self._append(data, sync)
            except BaseException:
                with contextlib.suppress(Exception):  # the store's error is the one to tell
                    apply_ops(ops, image, self._points, new_point, own=_own)
                raise
            apply_ops(ops, image, self._points, new_point, own=_own)
            if compact:
                self._save_image(sync)
                return
            self._seq += 1
            self._journal_bytes += len(data)

    def _check_open(self) -> None:
        if self._fenced is not None:
            raise CheckpointError(
                f"the run of checkpoint {self._checkpoint_id!r} stopped saving: "
                f"{self._fenced}; it saves nothing more, so as not to overwrite the other run"
            )
        if self._closed:
            raise CheckpointError(
                f"the run of checkpoint {self._checkpoint_id!r} has ended and saved its last "
                "state; a step that finished after that is not saved"
            )

    def _save_image(self, sync: bool = False) -> None:
        """Save the image as the new base (a new generation) and drop the old records.

        On a :class:`~agentkit.checkpoint.RebasingCheckPointStore` with the durability of a
        step record (``sync``: as a commit asked), else with ``set`` and ``delete_steps``.
        """
        image = self._image
        assert image is not None
        image.points = list(self._points.values())
        image.generation = new_generation()
        data = self._dumps(image, "save")
        store = self._store
        if rebases(store):  # the image and the records' removal in one call
            _store_call(
                self._checkpoint_id, "save",
                lambda: store.set_base(self._checkpoint_id, data, sync=sync),
            )
        else:
            _store_call(self._checkpoint_id, "save", lambda: store.set(self._checkpoint_id, data))
        self._generation = image.generation
        self._seq = 0
        self._journal_bytes = 0
        self._base_bytes = len(data)
        if not rebases(store):
            self._delete_steps()

    def _dumps(self, value: Checkpoint | ConsumedCheckpoint, what: str) -> bytes:
        from agentkit.checkpoint._binding import dumps_for_store

        try:
            return dumps_for_store(
                self._serializer, self._store, self._checkpoint_id, value, self._namespace
            )
        except CheckpointError as error:
            raise CheckpointError(
                f"cannot {what} checkpoint {self._checkpoint_id!r}: "
                f"{culprit(self._serializer, value)}{error}"
            ) from error

    def _delete_steps(self) -> None:
        store = self._store
        if journals(store):
            _store_call(
                self._checkpoint_id, "delete the step records of",
                lambda: store.delete_steps(self._checkpoint_id),
            )

    def _encode(self, record: StepRecord) -> bytes:
        encode = self._encoder
        if encode is None:
            from agentkit.checkpoint._binding import encoder_for

            encode = self._encoder = encoder_for(
                self._serializer, self._store, self._checkpoint_id, self._namespace
            )
        try:
            return encode(record)
        except CheckpointError as error:
            raise CheckpointError(
                f"cannot save a step of checkpoint {self._checkpoint_id!r}: "
                f"{culprit(self._serializer, record)}{error}"
            ) from error

    def _append(self, data: bytes, sync: bool) -> None:
        # write() appends only when the store journals (checked once, in __init__).
        store = cast("JournalingCheckPointStore", self._store)
        _store_call(
            self._checkpoint_id, "append a step to",
            lambda: store.append_step(self._checkpoint_id, data, sync=sync),
        )


def _store_call(checkpoint_id: str, what: str, call: Any) -> None:
    try:
        call()
    except CheckpointError:
        raise
    except Exception as error:
        raise CheckpointError(
            f"cannot {what} checkpoint {checkpoint_id!r}: the store refused it: "
            f"{type(error).__name__}: {error}"
        ) from error


def tombstone() -> ConsumedCheckpoint:
    """The tombstone of a run that completed now."""
    return ConsumedCheckpoint(datetime.datetime.now(datetime.timezone.utc).isoformat())


# --- the image's own copies -------------------------------------------------------------------


def _own(value: Any) -> Any:
    """A copy of a point state (or a checkpoint) whose containers nothing else holds.

    The image changes its states in place as ops come (extends a list, merges a dict), so it
    must not share them with the component that committed them. Only containers are copied
    (lists, dicts, sets, and the fields of the state itself); messages and events are values
    nobody changes.
    """
    kind = type(value)
    if attrs.has(kind):
        changes = {
            field.alias or field.name: _containers(getattr(value, field.name))
            for field in attrs.fields(kind)
            if field.init
        }
        copy = attrs.evolve(value, **changes)
        if isinstance(value, Checkpoint):
            copy.points = [attrs.evolve(point, state=_own(point.state)) for point in value.points]
        return copy
    return _containers(value)


def _containers(value: Any) -> Any:
    kind = type(value)
    if kind is list:
        return [_containers(item) for item in value]
    if kind is dict:
        return {key: _containers(item) for key, item in value.items()}
    if kind is set:
        return set(value)
    return value


# --- one durable run ------------------------------------------------------------------------


class DurableRun:
    """What makes one run durable: its lease, kept while it lives, its writer, its progress.

    Made before the run's thread starts (so a busy id raises at once); :meth:`begin` writes
    the first image in the run's thread; :meth:`end` stops keeping the lease (and releases it,
    unless the caller gave it).
    """

    __slots__ = ("keeper", "progress", "save_input", "writer")

    def __init__(
        self,
        store: CheckPointStore,
        serializer: Serializer,
        checkpoint_id: str,
        *,
        lease_ttl: float,
        scope: RunScope,
        session: Any,
        log: EventLog,
        lease: HeldLease | None = None,
        usage: Callable[[], RunUsage] | None = None,
        save_input: bool = True,
    ) -> None:
        from agentkit.checkpoint._base import _fenced_by, lease_for

        self.save_input = save_input
        own = lease is None
        held = lease_for(store, checkpoint_id, lease_ttl) if lease is None else lease
        try:
            # Its writes check the lease where the store can (a write of a run whose lease
            # was taken is refused), not only when a refresh fails.
            fenced = _fenced_by(store, held)
            self.writer = writer = StepWriter(fenced, serializer, checkpoint_id, usage)
            self.progress = Progress(writer.write, session)
            self.progress.track(log, ROOT, "history")

            def lost(reason: str) -> None:
                writer.fence(reason)
                scope.request_cancel(CancelMode.IMMEDIATE)

            self.keeper = LeaseKeeper(held, on_lost=lost, release=own)
        except BaseException:
            if own:
                held.release()
            raise

    def begin(self, checkpoint: Checkpoint) -> None:
        """Write the run's first image (in the run's thread, before its agent runs).

        Raises:
            CheckpointError: it could not be saved (the run must not start).
        """
        self.writer.start(checkpoint, save=self.save_input)

    def final_points(self, resume: ResumeState | None) -> list[ResumePoint] | None:
        """The points a stop of the run saves: the writer's image with everything committed
        (:meth:`StepWriter.final_points`); ``None``: the run wrote no image."""
        ops, order = self.progress.close()
        return self.writer.final_points(ops, order, resume)

    def end(self) -> None:
        """The run ended: stop keeping its lease (release it if it was taken here)."""
        self.keeper.stop()
