"""One inbox for the tool calls waiting for a human, across every run of a checkpoint store.

A run whose tool call needs approval (``@tool(needs_approval=True)``,
:func:`~agentkit.with_approval`) stops with an :class:`~agentkit.ApprovalRequest` and is
saved in the Runner's checkpoint store. :class:`ApprovalInbox` reads that store: it lists
every request still waiting (:meth:`~ApprovalInbox.pending`, oldest first, by owner), decides
one (:meth:`~ApprovalInbox.decide`: approve, approve with edited arguments, or reject with a
reason) and writes an :class:`ApprovalRecord` of each decision to an audit log
(:meth:`~ApprovalInbox.records`)::

    inbox = ApprovalInbox(runner, owner_key="owner", expires_after=3600)
    for waiting in inbox.pending(owner="alice"):
        print(waiting.run_id, waiting.tool_name, waiting.arguments, waiting.age(inbox.now()))
    decided = inbox.decide(run_id, interrupt_id, Approve(), by="bob", owner="alice")
    decided.run.result()                 # the resumed run (a RunIterator)

**Exactly once.** A decision resumes the run with :meth:`Runner.resume
<agentkit.Runner.resume>` (or, with ``runs=``, hands it to
:meth:`LocalRuns.resume <agentkit.integrations.runs.LocalRuns.resume>` /
``AgentQueue.resume``), whose lease lets one resume of a checkpoint run at a time, and
whose interrupt ids change each time a run stops. The inbox takes the checkpoint lease
(:func:`~agentkit.checkpoint.lease_for`) of the decision's record while it decides, so two
operators deciding one request at once, in one process or many, get one decision: the other
gets :class:`ApprovalDecidedError` naming who decided (after waiting up to ``wait`` seconds
for the winner's record). The record is written before the run is resumed; a decider that
dies between the two leaves a run :meth:`~ApprovalInbox.recover` resumes.

**Owners.** A run's owner is the session value named ``owner_key`` (submit runs with
``session_values={"owner": user_id}``); ``owner=`` filters :meth:`~ApprovalInbox.pending` and
must match to decide (:class:`ApprovalOwnerError`, which says the same as "not found"). A run
without that value belongs to nobody: anyone may decide it. With ``runs=``, the run backend
checks its own owner too (pass the same id to ``submit(owner=...)``).

**Expiry.** With ``expires_after`` (seconds from when the call first asked), a decision on
a request past it is refused with :class:`ApprovalExpiredError`, and the run is told: it is
resumed with ``Reject(reason="the approval expired ...")``, recorded as ``"expired"``.
:meth:`~ApprovalInbox.expire` does the same for every request past its time (call it from a
periodic job). Times are read on the checkpoint store's clock (``clock=`` of the built-in
stores), so a test moves them with :class:`agentkit.testing.ManualClock`; a request's ask
time is the system clock of the process where the tool was called.

**The audit log** is kept in a checkpoint store (``audit_store``; default the Runner's
store), one record per decision, signed by the Runner's serializer as checkpoints are, under
ids starting with :data:`AUDIT_PREFIX` (the inbox skips them when listing runs). A store's
``prune`` removes old records too: give the audit log its own store to keep it longer.

Listing reads every checkpoint of the store (:class:`~agentkit.checkpoint.ListingCheckPointStore`,
which every built-in store is): meant for an operations page, not for a hot path.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import attrs

from agentkit._checkpoints import Checkpoint, load_checkpoint
from agentkit._clock import Clock
from agentkit._html import escape
from agentkit._persist import persisted
from agentkit._results import RunIterator
from agentkit._runner import Runner
from agentkit.checkpoint import CheckPointStore, ListingCheckPointStore, lease_for
from agentkit.checkpoint._base import _clock_of
from agentkit.checkpoint._binding import dumps_for_store, loads_for_store
from agentkit.errors import (
    AgentKitError,
    AgentKitTypeError,
    AgentKitValueError,
    CheckpointBusyError,
    CheckpointConsumedError,
    CheckpointError,
    CheckpointNotFoundError,
)
from agentkit.integrations.runs import RunBackend
from agentkit.tools._approval import ApprovalRequest, Approve, Reject

__all__ = [
    "AUDIT_PREFIX",
    "ApprovalDecidedError",
    "ApprovalError",
    "ApprovalExpiredError",
    "ApprovalInbox",
    "ApprovalNotFoundError",
    "ApprovalOwnerError",
    "ApprovalRecord",
    "Decided",
    "PendingApproval",
]

_log = logging.getLogger("agentkit")

AUDIT_PREFIX = "agentkit.approvals/"
"""The ids of audit records in a checkpoint store start with this (then run id, ``/``,
interrupt id)."""

_DECISION_LEASE_TTL = 60.0  # seconds a crashed decider blocks its request


class ApprovalError(AgentKitError):
    """A decision on a pending approval was refused."""


class ApprovalNotFoundError(ApprovalError, LookupError):
    """No approval is waiting under this run id and interrupt id (or the run is gone)."""


class ApprovalOwnerError(ApprovalNotFoundError):
    """The approval belongs to another owner's run (a "not found", so ids cannot be probed)."""


class ApprovalDecidedError(ApprovalError):
    """The approval was decided already, or is being decided by someone else now.

    Attributes:
        record: the winning decision's :class:`ApprovalRecord`, or ``None`` while it is
            being made.
    """

    def __init__(self, message: str, record: ApprovalRecord | None = None) -> None:
        super().__init__(message)
        self.record = record


class ApprovalExpiredError(ApprovalError):
    """The approval expired before the decision; the run was resumed with a rejection.

    Attributes:
        decided: what the inbox did instead: its ``record`` (action ``"expired"``) and, when
            the inbox resumed the run itself, the run's events (``decided.run``: read them,
            or call ``result()``; closing the iterator would cancel the run).
    """

    def __init__(self, message: str, decided: Decided) -> None:
        super().__init__(message)
        self.decided = decided


@attrs.frozen
class PendingApproval:
    """A tool call waiting for a decision, as :meth:`ApprovalInbox.pending` lists it.

    Attributes:
        run_id: the run's checkpoint id.
        interrupt_id: the id to decide it by (the interrupt's ``InterruptContext.id``).
        owner: the run's owner (its ``owner_key`` session value), ``None`` for nobody's.
        tool_name: the tool the model called.
        call_id: the id of the call.
        arguments: the arguments the model sent.
        asked_at: when it first asked (seconds since the epoch; ``None`` for a request saved
            by an earlier release, which never expires).
        expires_at: when it expires, ``None`` for never.
        request: the interrupt info itself (what the run asks).
    """

    run_id: str
    interrupt_id: str
    owner: str | None
    tool_name: str
    call_id: str
    arguments: dict[str, Any] = attrs.field(hash=False)
    asked_at: float | None
    expires_at: float | None
    request: ApprovalRequest

    def age(self, now: float) -> float | None:
        """Seconds it has waited at ``now`` (``None`` when the ask time is unknown)."""
        return None if self.asked_at is None else max(0.0, now - self.asked_at)


@persisted("agentkit.ApprovalRecord")
@attrs.frozen
class ApprovalRecord:
    """One decision in the audit log.

    Attributes:
        run_id: the run decided.
        interrupt_id: the request decided.
        tool_name: the tool of the call.
        call_id: the id of the call.
        owner: the run's owner (``None`` for nobody's).
        action: ``"approved"``, ``"edited"`` (approved with other arguments), ``"rejected"``
            or ``"expired"`` (rejected by the inbox, the request being past its time).
        decided_by: who decided (``by=``; for ``"expired"``, who tried, or ``"expiry"``).
        decided_at: when (seconds since the epoch, on the store's clock).
        arguments: the arguments the call was shown with.
        new_arguments: the arguments it runs with (``None`` when it does not run).
        reason: the rejection's reason (``""`` otherwise).
    """

    run_id: str
    interrupt_id: str
    tool_name: str
    call_id: str
    owner: str | None
    action: str
    decided_by: str
    decided_at: float
    arguments: dict[str, Any] = attrs.field(hash=False)
    new_arguments: dict[str, Any] | None = attrs.field(hash=False)
    reason: str = ""


@attrs.frozen
class Decided:
    """What :meth:`ApprovalInbox.decide` did.

    Attributes:
        record: the decision as written to the audit log.
        run: the resumed run's events (iterate them, or call ``result()``; dropped unread,
            the run still goes on to its end, while closing it cancels the run); ``None``
            when the inbox handed the decision to ``runs=``.
        after: with ``runs=``, the id of the log entry after which the resumed run's entries
            come (pass it to ``events(run_id, last_event_id=...)``); else ``None``.
    """

    record: ApprovalRecord
    run: RunIterator | None = None
    after: str | None = None


class ApprovalInbox:
    """The pending approvals of every run saved in ``runner``'s checkpoint store.

    Args:
        runner: the Runner the runs belong to (its checkpoint store and serializer).
        owner_key: the session value that names a run's owner (``None``: runs have no owners).
        expires_after: seconds a request may wait before a decision is refused (``None``:
            never).
        audit_store: where decisions are recorded (default: the Runner's checkpoint store);
            it must list its ids (every built-in store does).
        runs: a :class:`~agentkit.integrations.runs.LocalRuns` or ``AgentQueue`` to hand
            decisions to (it resumes the run in its own thread or worker, with its log);
            ``None``: the inbox resumes through ``runner`` and returns the run's events.
        clock: the clock of ages and expiry (default: the checkpoint store's).
        wait: seconds an operator who lost a race waits for the winner's record before
            being told that someone else is deciding.

    Raises:
        ValueError: the Runner has no checkpoint store, or a store cannot list its ids.
    """

    def __init__(
        self,
        runner: Runner,
        *,
        owner_key: str | None = None,
        expires_after: float | None = None,
        audit_store: CheckPointStore | None = None,
        runs: RunBackend | None = None,
        clock: Clock | None = None,
        wait: float = 5.0,
    ) -> None:
        store = runner.checkpoint_store
        if store is None:
            raise AgentKitValueError(
                "ApprovalInbox reads the runs of a checkpoint store, and this Runner has none; "
                "create the Runner with checkpoint_store=..."
            )
        audit = store if audit_store is None else audit_store
        if expires_after is not None and not expires_after > 0:
            raise AgentKitValueError(
                f"expires_after must be a positive number of seconds or None, not {expires_after!r}"
            )
        if owner_key is not None and not isinstance(owner_key, str):
            raise AgentKitTypeError(f"owner_key must be a str or None, not {owner_key!r}")
        self._runner = runner
        self._store = _listing(store, "checkpoint store")
        self._audit = _listing(audit, "audit store")
        self._owner_key = owner_key
        self._expires_after = expires_after
        self._runs = runs
        self._clock = _clock_of(store) if clock is None else clock
        if not wait >= 0:
            raise AgentKitValueError(f"wait must be a number of seconds >= 0, not {wait!r}")
        self._wait = float(wait)

    def now(self) -> float:
        """The inbox's time (seconds since the epoch): what ages and expiry compare with."""
        return self._clock.time()

    def pending(
        self, *, owner: str | None = None, all_owners: bool = False
    ) -> list[PendingApproval]:
        """Every tool call waiting for a decision, oldest first.

        With ``owner``, that owner's runs only, and the runs of nobody; ``all_owners=True``
        lists every run (an operations view). A request already decided (its run resumed and
        not stopped since) is not listed; checkpoints that cannot be read are skipped (logged).
        """
        found = []
        for run_id in self._store.checkpoint_ids():
            if run_id.startswith(AUDIT_PREFIX):
                continue
            checkpoint = self._load(run_id)
            if checkpoint is None:
                continue
            run_owner = self._owner_of(checkpoint)
            if not all_owners and run_owner is not None and run_owner != owner:
                continue
            for waiting in self._waiting(run_id, checkpoint, run_owner):
                if self._audit.get(_audit_id(run_id, waiting.interrupt_id)) is None:
                    found.append(waiting)
        found.sort(key=lambda item: (item.asked_at is None, item.asked_at or 0.0, item.run_id))
        return found

    def decide(
        self,
        run_id: str,
        interrupt_id: str,
        decision: bool | Approve | Reject,
        *,
        by: str,
        owner: str | None = None,
    ) -> Decided:
        """Decide one pending approval, exactly once, and resume its run.

        ``decision``: ``True`` / ``Approve()`` (run the call), ``Approve(arguments={...})``
        (run it with these arguments), ``False`` / ``Reject(reason=...)`` (do not run it; the
        model is told, with the reason). ``by`` names who decided, for the audit log.

        Raises:
            ApprovalNotFoundError: no such request waits (:class:`ApprovalOwnerError`: it is
                another owner's).
            ApprovalDecidedError: it was decided already, or someone is deciding it now (the
                error's ``record`` names the winner when known).
            ApprovalExpiredError: it expired; the run was resumed with a rejection.
            CheckpointError: the run's checkpoint cannot be read or resumed (nothing was
                decided).
        """
        if not isinstance(by, str) or not by:
            raise AgentKitValueError("by= must name who decides (a non-empty str)")
        action, new_arguments, reason = _action(decision)
        record_id = _audit_id(run_id, interrupt_id)
        try:
            lease = lease_for(self._audit, record_id, _DECISION_LEASE_TTL)
        except CheckpointBusyError:
            raise self._lost(run_id, interrupt_id) from None
        with lease:
            earlier = self._record(record_id)
            if earlier is not None:
                raise _decided(earlier)
            waiting = self._find(run_id, interrupt_id, owner)
            now = self.now()
            if waiting.expires_at is not None and now >= waiting.expires_at:
                reason = _expired_reason(self._expires_after)
                expired = self._resume(waiting, "expired", by, now, None, reason, owner)
                raise ApprovalExpiredError(
                    f"the approval of {waiting.tool_name} in run {run_id!r} expired "
                    f"{now - waiting.expires_at:.0f} s ago; the run was resumed with a "
                    "rejection that says so",
                    expired,
                )
            if action == "approved" and new_arguments is not None:
                action = "edited" if new_arguments != waiting.arguments else "approved"
            if action == "approved":
                new_arguments = dict(waiting.arguments)
            return self._resume(waiting, action, by, now, new_arguments, reason, owner)

    def expire(self, *, by: str = "expiry") -> list[Decided]:
        """Reject every pending request past its time, resuming each run; what was done.

        Without ``runs=``, read each resumed run's events (``decided.run``). A request
        someone is deciding at the same moment is left to them.
        """
        if self._expires_after is None:
            return []
        now = self.now()
        done = []
        for waiting in self.pending(all_owners=True):
            if waiting.expires_at is None or now < waiting.expires_at:
                continue
            try:
                self.decide(waiting.run_id, waiting.interrupt_id, False, by=by, owner=waiting.owner)
            except ApprovalExpiredError as expired:
                done.append(expired.decided)
            except (ApprovalDecidedError, ApprovalNotFoundError):
                continue
        return done

    def recover(self) -> list[Decided]:
        """Resume the runs whose decision was recorded but never reached them; what was done.

        A decision is recorded before its run is resumed, so a decider that died between the
        two (its process killed) leaves the request decided and its run waiting. This finds
        such runs (the record is there, the run's checkpoint still waits at that request and
        nobody resumes it now) and resumes each with the recorded decision, once the dead
        decider's lease on the record expired (a minute); call it from the periodic job that
        calls :meth:`expire`. Without ``runs=``, read each resumed run's
        events (``decided.run``).
        """
        done = []
        for record in self.records():
            record_id = _audit_id(record.run_id, record.interrupt_id)
            try:
                lease = lease_for(self._audit, record_id, _DECISION_LEASE_TTL)
            except CheckpointBusyError:
                continue  # being decided now
            with lease:
                checkpoint = self._load(record.run_id)
                if checkpoint is None or not any(
                    waiting.interrupt_id == record.interrupt_id
                    for waiting in self._waiting(record.run_id, checkpoint, None)
                ):
                    continue  # the decision reached the run
                try:
                    with lease_for(self._store, record.run_id):
                        pass  # nobody resumes the run now
                    done.append(self._apply(record))
                except CheckpointBusyError:
                    continue
        return done

    def records(self, run_id: str | None = None) -> list[ApprovalRecord]:
        """The audit log (of ``run_id`` only, when given), oldest decision first."""
        prefix = AUDIT_PREFIX if run_id is None else f"{AUDIT_PREFIX}{run_id}/"
        found = []
        for record_id in self._audit.checkpoint_ids():
            if record_id.startswith(prefix):
                record = self._record(record_id)
                if record is not None and (run_id is None or record.run_id == run_id):
                    found.append(record)
        found.sort(key=lambda record: (record.decided_at, record.run_id, record.interrupt_id))
        return found

    def _repr_html_(self) -> str:
        """In a notebook: every pending approval (all owners), oldest first, as a table."""
        now = self.now()
        head = ("run", "owner", "tool", "arguments", "waiting", "expires in", "interrupt id")
        rows = []
        for waiting in self.pending(all_owners=True):
            age = waiting.age(now)
            left = None if waiting.expires_at is None else waiting.expires_at - now
            cells = (
                waiting.run_id,
                "" if waiting.owner is None else waiting.owner,
                waiting.tool_name,
                waiting.arguments,
                "" if age is None else f"{age:.0f} s",
                "never" if left is None else ("expired" if left <= 0 else f"{left:.0f} s"),
                waiting.interrupt_id,
            )
            rows.append("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>")
        header = "<tr>" + "".join(f"<th>{name}</th>" for name in head) + "</tr>"
        title = f"{len(rows)} pending approval(s)"
        return (
            f'<div style="font-family: system-ui, sans-serif; font-size: 13px">'
            f"<b>{title}</b><table>{header}{''.join(rows)}</table></div>"
        )

    # --- internals -------------------------------------------------------------------------

    def _resume(
        self,
        waiting: PendingApproval,
        action: str,
        by: str,
        now: float,
        new_arguments: dict[str, Any] | None,
        reason: str,
        owner: str | None,
    ) -> Decided:
        """Write the record, then resume the run with the decision (the record is removed
        when the resume is refused at once: nothing was decided). ``owner`` is the decider's
        claim, which a run backend checks against its own record of the run's owner."""
        record = ApprovalRecord(
            waiting.run_id,
            waiting.interrupt_id,
            waiting.tool_name,
            waiting.call_id,
            waiting.owner,
            action,
            by,
            now,
            dict(waiting.arguments),
            None if new_arguments is None else dict(new_arguments),
            reason,
        )
        record_id = _audit_id(waiting.run_id, waiting.interrupt_id)
        serializer = self._runner.serializer
        self._audit.set(record_id, dumps_for_store(serializer, self._audit, record_id, record))
        try:
            return self._apply(record, owner)
        except BaseException:
            self._audit.delete(record_id)
            raise

    def _apply(self, record: ApprovalRecord, owner: str | None = None) -> Decided:
        """Resume the run of ``record`` with its decision (``owner``: for a run backend;
        default the run's owner as recorded)."""
        # The JSON form of the decision: it travels to a Celery worker as it is.
        data: dict[str, Any]
        if record.action == "approved":
            data = {"decision": "approve"}
        elif record.action == "edited":
            data = {"decision": "edit", "arguments": record.new_arguments}
        else:
            data = {"decision": "reject", "reason": record.reason}
        targets = {record.interrupt_id: data}
        if self._runs is not None:
            claimed = record.owner if owner is None else owner
            after = self._runs.resume(record.run_id, targets, owner=claimed)
            return Decided(record, after=after)
        return Decided(record, run=self._runner.resume(record.run_id, targets=targets))

    def _find(self, run_id: str, interrupt_id: str, owner: str | None) -> PendingApproval:
        checkpoint = self._load(run_id) if not run_id.startswith(AUDIT_PREFIX) else None
        if checkpoint is not None:
            run_owner = self._owner_of(checkpoint)
            for waiting in self._waiting(run_id, checkpoint, run_owner):
                if waiting.interrupt_id == interrupt_id:
                    if run_owner is not None and run_owner != owner:
                        raise ApprovalOwnerError(_not_found(run_id, interrupt_id))
                    return waiting
        raise ApprovalNotFoundError(_not_found(run_id, interrupt_id))

    def _waiting(
        self, run_id: str, checkpoint: Checkpoint, owner: str | None
    ) -> list[PendingApproval]:
        if checkpoint.reason != "interrupted":
            return []
        found = []
        for point in checkpoint.points:
            request = point.info
            if not point.is_root_cause or not isinstance(request, ApprovalRequest):
                continue
            asked_at = request.asked_at
            expires_at = (
                None
                if asked_at is None or self._expires_after is None
                else asked_at + self._expires_after
            )
            found.append(
                PendingApproval(
                    run_id,
                    point.id,
                    owner,
                    request.tool_name,
                    request.call_id,
                    dict(request.arguments),
                    asked_at,
                    expires_at,
                    request,
                )
            )
        return found

    def _owner_of(self, checkpoint: Checkpoint) -> str | None:
        if self._owner_key is None:
            return None
        owner = checkpoint.session_values.get(self._owner_key)
        return None if owner is None else str(owner)

    def _load(self, run_id: str) -> Checkpoint | None:
        try:
            return load_checkpoint(self._store, self._runner.serializer, run_id)
        except (CheckpointConsumedError, CheckpointNotFoundError):
            return None  # completed, or deleted since it was listed
        except CheckpointError as error:
            _log.warning("agentkit: approvals: skipping checkpoint %r: %s", run_id, error)
            return None

    def _record(self, record_id: str) -> ApprovalRecord | None:
        data = self._audit.get(record_id)
        if data is None:
            return None
        record = loads_for_store(self._runner.serializer, self._audit, record_id, data)
        if not isinstance(record, ApprovalRecord):
            raise CheckpointError(
                f"the audit record {record_id!r} holds a {type(record).__name__}, not an "
                "ApprovalRecord; something else wrote under the audit prefix"
            )
        return record

    def _lost(self, run_id: str, interrupt_id: str) -> ApprovalDecidedError:
        """The error of an operator who lost the race: with the winner's record once written."""
        record_id = _audit_id(run_id, interrupt_id)
        pause = threading.Event()
        waited = 0.0
        while True:
            record = self._record(record_id)
            if record is not None:
                return _decided(record)
            if waited >= self._wait:
                return ApprovalDecidedError(
                    f"the approval {interrupt_id!r} of run {run_id!r} is being decided by "
                    "someone else right now; list the pending approvals again"
                )
            pause.wait(0.02)
            waited += 0.02


def _listing(store: CheckPointStore, what: str) -> ListingCheckPointStore:
    if not isinstance(store, ListingCheckPointStore):
        raise AgentKitValueError(
            f"the {what} {type(store).__name__} cannot list its ids; give it a "
            "checkpoint_ids() method (see agentkit.checkpoint.ListingCheckPointStore) or use "
            "a built-in store"
        )
    return store


def _audit_id(run_id: str, interrupt_id: str) -> str:
    return f"{AUDIT_PREFIX}{run_id}/{interrupt_id}"


def _not_found(run_id: str, interrupt_id: str) -> str:
    return (
        f"no approval {interrupt_id!r} is waiting in run {run_id!r} (unknown, another owner's, "
        "or the run went on since); list ApprovalInbox.pending() again"
    )


def _decided(record: ApprovalRecord) -> ApprovalDecidedError:
    return ApprovalDecidedError(
        f"the approval {record.interrupt_id!r} of run {record.run_id!r} was decided already: "
        f"{record.action} by {record.decided_by!r}",
        record,
    )


def _expired_reason(expires_after: float | None) -> str:
    return f"the approval expired (no decision within {expires_after:g} s)"


def _action(decision: object) -> tuple[str, dict[str, Any] | None, str]:
    """``(action, new arguments, reason)`` of a decision."""
    if decision is True:
        return "approved", None, ""
    if decision is False:
        return "rejected", None, ""
    if isinstance(decision, Approve):
        arguments = decision.arguments
        return "approved", None if arguments is None else dict(arguments), ""
    if isinstance(decision, Reject):
        return "rejected", None, decision.reason
    raise AgentKitTypeError(
        f"a decision is True, False, Approve(...) or Reject(...), not {decision!r}"
    )
