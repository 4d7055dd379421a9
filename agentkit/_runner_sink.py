"""The top of a Runner's run: it names the outcome, saves checkpoints, delivers the last event."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._agent import EventSink
from agentkit._cancel import CancelMode
from agentkit._checkpoints import Checkpoint, ConsumedCheckpoint, make_checkpoint
from agentkit._events import AgentEvent, InterruptInfo, RunStep
from agentkit._points import ResumePoint, ResumeState, interrupt_contexts
from agentkit._results import RunOutcome
from agentkit._runctx import RunFrame
from agentkit.errors import (
    AgentCancelledError,
    AgentKitError,
    CheckpointError,
    ConversationStoreError,
)

if TYPE_CHECKING:
    from agentkit.conversation._turn import OpenTurn

__all__ = ["RunnerSink"]

_log = logging.getLogger("agentkit")


class RunnerSink:
    """The top of a run: names the outcome, saves checkpoints, delivers the last event.

    An error event is held until the next event arrives or the run ends, so the Runner knows
    whether it is the run's last one: then the checkpoint is saved first.
    """

    __slots__ = (
        "checkpoint_id",
        "consume",
        "discard",
        "downstream",
        "ended",
        "error_seen",
        "final",
        "frame",
        "held",
        "interrupted",
        "outcome",
        "save",
        "turn",
    )

    def __init__(
        self,
        downstream: EventSink,
        save: Callable[[str, Checkpoint | ConsumedCheckpoint], None],
        frame: RunFrame,
        checkpoint_id: str | None,
        outcome: RunOutcome,
        turn: OpenTurn | None,
        *,
        consume: bool,
        discard: Callable[[], None] | None = None,
        final: Callable[[ResumeState | None], list[ResumePoint] | None] | None = None,
    ) -> None:
        """``consume``: a run that completes leaves a tombstone (a resumed run, a durable
        one); ``discard``: removes what a durable run saved as it went, when it stops with
        nothing to resume; ``final``: a durable run's writer, which gives the points a stop
        saves (its image, with what was not written yet: ``DurableRun.final_points``)."""
        self.outcome = outcome
        self.turn = turn
        self.downstream = downstream
        self.save = save
        self.frame = frame
        self.checkpoint_id = checkpoint_id
        self.consume = consume
        self.discard = discard
        self.final = final
        self.held: AgentEvent | None = None
        self.interrupted = False
        self.error_seen = False
        self.ended = False  # the run's last event was delivered; nothing follows it

    def send(self, item: AgentEvent) -> None:
        if self.ended:
            return
        held = self.held
        if held is not None:
            if isinstance(held.err, AgentCancelledError) and isinstance(
                item.err, AgentCancelledError
            ):
                # One cancel is reported once.
                self.held = item
                return
            self.held = None
            self.downstream.send(held)
        if item.interrupted:
            self._interrupt(item)
            return
        if item.err is not None:
            self.error_seen = True
            self.held = item
            return
        self.downstream.send(item)

    def abort(self, error: BaseException, agent_name: str) -> None:
        """The run was cut by ``error``, which no agent turned into an event.

        Agents report an ``Exception`` as an error event; what gets here is a
        ``BaseException`` (a ``KeyboardInterrupt`` no Ctrl-C handler turned into a cancel, a
        ``SystemExit`` in a tool under ``Runner.invoke``). It ends the run like a failure:
        whatever else of the run still works is cancelled, the run is saved if anything
        was recorded, nothing is consumed or appended to a conversation, and ``error`` is
        the run's last event.
        """
        self.frame.scope.request_cancel(CancelMode.IMMEDIATE)
        self.send(AgentEvent(agent_name=agent_name, run_path=[RunStep(agent_name)], err=error))

    def _points(self) -> list[ResumePoint]:
        """The points to save: what the run recorded, and in a resumed run what it did not
        get back to (:meth:`ResumeState.unreached`). A durable run's are its writer's image
        (``final``): one source, the one a crash would have left, with the stop's last
        declarations.

        Raises:
            CheckpointError: a durable run's image cannot take its last steps.
        """
        resumed = self.frame.resume
        if self.final is not None:
            written = self.final(resumed)
            if written is not None:
                return written
        points = self.frame.journal.points()
        if resumed is not None:
            points.extend(resumed.unreached(point.address for point in points))
        return points

    def _targets(self) -> dict[str, Any]:
        """The resume data this (resumed) run was given: what targets points saved again is
        kept with them (see :func:`~agentkit._checkpoints.make_checkpoint`)."""
        resumed = self.frame.resume
        return {} if resumed is None else resumed.targets()

    def _interrupt(self, item: AgentEvent) -> None:
        if self.interrupted:
            self.downstream.send(
                AgentEvent(
                    err=AgentKitError(
                        "the run interrupted twice: an agent sent an interrupt event after the "
                        "run had interrupted already; an interrupt must be an agent's last event"
                    )
                )
            )
            return
        self.interrupted = True
        action = item.action
        assert action is not None and action.interrupted is not None
        try:
            points = self._points()
        except CheckpointError as error:
            # Nothing can be resumed: the failure is the run's last event.
            self.ended = True
            self.downstream.send(
                AgentEvent(agent_name=item.agent_name, run_path=item.run_path, err=error)
            )
            return
        data = action.interrupted.data
        contexts = interrupt_contexts(points)
        interrupted = InterruptInfo(data=data, contexts=contexts)
        event = attrs.evolve(item, action=attrs.evolve(action, interrupted=interrupted))
        _log.info(
            "agentkit: run interrupted by agent %r at %s",
            item.agent_name,
            ", ".join(";".join(context.address) for context in contexts) or "?",
        )
        if self.checkpoint_id is not None:
            try:
                checkpoint = make_checkpoint(
                    self.frame, points, data, "interrupted", self.turn, self._targets()
                )
                with self.frame.scope.protect():
                    self.save(self.checkpoint_id, checkpoint)
            except CheckpointError as error:
                # Nothing can be resumed: the failure is the run's last event.
                self.ended = True
                self.downstream.send(
                    AgentEvent(agent_name=item.agent_name, run_path=item.run_path, err=error)
                )
                return
            self.outcome.checkpoint_id = self.checkpoint_id
            _log.info("agentkit: run interrupted; checkpoint %r saved", self.checkpoint_id)
        self.ended = True
        self.downstream.send(event)

    def finish(self) -> None:
        """The run ended: save or consume the checkpoint, then deliver the held last event.

        A Ctrl-C meanwhile waits for the end of the save (``RunScope.protect``).
        """
        held, self.held = self.held, None
        if self.ended:
            return
        self.ended = True
        with self.frame.scope.protect():
            self._finish(held)

    def _finish(self, held: AgentEvent | None) -> None:
        checkpoint_id = self.checkpoint_id
        failure: AgentEvent | None = None
        if checkpoint_id is not None:
            try:
                if self.error_seen:
                    self._save_stopped(checkpoint_id, held)
                elif self.consume:
                    import datetime  # only when a resumed or durable run completes

                    completed = datetime.datetime.now(datetime.timezone.utc).isoformat()
                    self.save(checkpoint_id, ConsumedCheckpoint(completed))
                    _log.info("agentkit: checkpoint %r consumed", checkpoint_id)
            except CheckpointError as error:
                failure = AgentEvent(
                    agent_name=held.agent_name if held is not None else "",
                    run_path=held.run_path if held is not None else [],
                    err=error,
                )
        if failure is None and not self.error_seen and self.turn is not None:
            failure = self._append_turn(held)
        if held is not None:
            ended_with = held.err
            if isinstance(ended_with, AgentCancelledError):
                _log.info("agentkit: run cancelled (%s)", ended_with)
            elif ended_with is not None:
                _log.info(
                    "agentkit: run failed in agent %r: %s: %s",
                    held.agent_name,
                    type(ended_with).__name__,
                    ended_with,
                )
            self.downstream.send(held)
        if failure is not None:
            self.downstream.send(failure)

    def _append_turn(self, held: AgentEvent | None) -> AgentEvent | None:
        """The run completed: append the turn to its conversation (an error event if that fails)."""
        assert self.turn is not None
        try:
            self.turn.complete(self.frame.log.visible())
        except Exception as error:
            failure = ConversationStoreError(
                f"the turn completed but could not be appended to conversation "
                f"{self.turn.turn.conversation_id!r}: {type(error).__name__}: {error}",
                conversation_id=self.turn.turn.conversation_id,
            )
            failure.__cause__ = error
            return AgentEvent(
                agent_name=held.agent_name if held is not None else "",
                run_path=held.run_path if held is not None else [],
                err=failure,
            )
        return None

    def _save_stopped(self, checkpoint_id: str, held: AgentEvent | None) -> None:
        """Save the checkpoint of a cancelled or failed run (if anything can be resumed)."""
        points = self._points()
        if not points:
            if self.discard is not None:
                self.discard()
            return
        cancelled = held is not None and isinstance(held.err, AgentCancelledError)
        reason = "cancelled" if cancelled else "failed"
        checkpoint = make_checkpoint(
            self.frame, points, None, reason, self.turn, self._targets()
        )
        self.save(checkpoint_id, checkpoint)
        self.outcome.checkpoint_id = checkpoint_id
        _log.info("agentkit: run %s; checkpoint %r saved", reason, checkpoint_id)
        if held is not None and held.err is not None and hasattr(held.err, "add_note"):
            held.err.add_note(
                f"The run can be resumed: runner.resume({checkpoint_id!r}) goes on from the "
                "last model or tool call that finished."
            )

