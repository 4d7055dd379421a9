"""Runner: the entry point that runs an agent, keeps its session and saves checkpoints.

The life of a checkpoint (a run given ``with_checkpoint_id(id)``):

* **saved** when the run stops before it completes: interrupted, cancelled, or failed (a model
  error after its retries, a tool exception, a timeout). The checkpoint holds the run's input,
  session values, history and the resume points every stopped component recorded (see
  :mod:`agentkit._points`): the last safe point, after the last finished model or tool call.
  It is saved *before* the interrupt or error event is delivered; when saving fails, the
  run's last event is a :class:`~agentkit.CheckpointError` that says why, and no interrupt
  event follows it.
* **resumed** with :meth:`Runner.resume`: exclusively (a lease, refreshed while the resumed
  run lives, released when it ends, expiring if its process dies). Finished tools are never
  run again. A resumed run that stops again overwrites the checkpoint (new interrupt ids).
* **consumed** when a resumed run completes: a tombstone replaces the checkpoint, and a later
  ``resume`` of the id raises :class:`~agentkit.CheckpointConsumedError`, so an approved
  action cannot run twice by resuming twice.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._observe import RunObservers
from agentkit._persist import persisted
from agentkit._points import ResumePoint, ResumeState, interrupt_contexts
from agentkit.agents.flow import FlowAgent
from agentkit.cancel import RunScope
from agentkit.conversation._turn import ConversationTurn, OpenTurn, open_turn, resume_turn
from agentkit.errors import (
    AgentCancelledError,
    AgentKitError,
    CheckpointConsumedError,
    CheckpointError,
    CheckpointNotFoundError,
    ConversationStoreError,
)
from agentkit.events import Agent, AgentEvent, AgentInput, InterruptInfo, ResumeInfo
from agentkit.options import AgentRunOption, RunOptions, get_impl_specific_options
from agentkit.results import RunIterator, RunOutcome, RunResult
from agentkit.runctx import EventLog, RecordedEvent, RunFrame, Session
from agentkit.schema import Message, user_message
from agentkit.worker import EventSink, start_worker

if TYPE_CHECKING:
    from agentkit.checkpoint import CheckPointStore, Lease, PickleSerializer
    from agentkit.conversation import ConversationStore

__all__ = ["Runner"]

_log = logging.getLogger("agentkit")

DEFAULT_LEASE_TTL = 600.0
"""Seconds a resume's claim on its checkpoint lasts without a refresh (10 minutes)."""


@persisted("agentkit.Checkpoint")
@attrs.define
class Checkpoint:
    """What the Runner saves when a run stops before it completes (framework-internal).

    ``reason`` is ``"interrupted"``, ``"cancelled"`` or ``"failed"``.
    """

    root_input: AgentInput
    session_values: dict[str, Any]
    history: list[RecordedEvent]
    enable_streaming: bool
    points: list[ResumePoint]
    interrupt_data: Any = None
    reason: str = "interrupted"
    conversation: ConversationTurn | None = None  # the conversation turn the run belongs to


@persisted("agentkit.ConsumedCheckpoint")
@attrs.define
class ConsumedCheckpoint:
    """The tombstone of a checkpoint whose resumed run completed (framework-internal)."""

    completed_at: str  # ISO 8601, UTC


class Runner:
    """Runs an agent: gives each run a session, names events, saves and resumes checkpoints.

    Example::

        runner = Runner(agent, enable_streaming=True)
        with runner.query("What's the weather in Paris?") as events:
            for event in events:
                print(event.agent_name, event.get_message())

    A Runner holds no per-run state; one Runner can serve many runs from many threads.

    Args:
        agent: the agent to run (any :class:`~agentkit.Agent`).
        enable_streaming: stream model output (events carry message streams).
        checkpoint_store: where interrupted runs are saved (see ``agentkit.checkpoint``);
            without one, nothing is saved and :meth:`resume` is not available.
        serializer: how checkpoints are encoded; default ``PickleSerializer()``: signed with
            the key from ``AGENTKIT_CHECKPOINT_KEY``, else with a key file created once in the
            user's configuration directory (see ``agentkit.checkpoint``).
        lease_ttl: seconds a resume's exclusive claim on its checkpoint lasts; the Runner
            refreshes it while the resumed run lives, so this only bounds how long the
            checkpoint stays locked after the resuming process died.
        conversation_store: where conversations live (see ``agentkit.conversation``); runs
            given ``with_conversation_id(id)`` are turns of that conversation.

    The life of a checkpoint (saved on interrupt, cancel or failure; resumed exclusively;
    consumed once a resumed run completes) is described in :mod:`agentkit.runner`.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        enable_streaming: bool = False,
        checkpoint_store: CheckPointStore | None = None,
        serializer: PickleSerializer | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        conversation_store: ConversationStore | None = None,
    ) -> None:
        if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, (int, float)) or lease_ttl <= 0:
            raise ValueError(f"lease_ttl must be a positive number of seconds (got {lease_ttl!r})")
        self._agent = agent if isinstance(agent, FlowAgent) else FlowAgent(agent)
        self.enable_streaming = enable_streaming
        self.checkpoint_store = checkpoint_store
        self._serializer = serializer
        self.lease_ttl = float(lease_ttl)
        self.conversation_store = conversation_store

    @property
    def agent(self) -> Agent:
        """The agent this Runner runs (wrapped for the flow)."""
        return self._agent

    @property
    def serializer(self) -> PickleSerializer:
        """The checkpoint serializer (default: ``PickleSerializer()``, signed with the key from
        ``AGENTKIT_CHECKPOINT_KEY`` or the user's key file; created on first use)."""
        if self._serializer is None:
            from agentkit.checkpoint import PickleSerializer

            self._serializer = PickleSerializer()
        return self._serializer

    def invoke(self, query: str | Sequence[Message], *options: AgentRunOption) -> RunResult:
        """Run the agent to its end and return the :class:`~agentkit.RunResult`.

        ``query`` is a user message's text or a list of messages. The same as
        ``run(...).result()``::

            print(runner.invoke("What is 2 + 2?").text)

        Raises:
            Exception: the error a failed run ended with (see :meth:`RunIterator.result
                <agentkit.results.RunIterator.result>`); an interrupted run returns normally,
                with ``result.interrupt`` and ``result.checkpoint_id`` set.
        """
        messages = [user_message(query)] if isinstance(query, str) else query
        # Nobody reads the events live: the run goes on in this thread (no worker thread).
        return self._run(messages, options, inline=True).result()

    def query(self, text: str, *options: AgentRunOption) -> RunIterator:
        """Run the agent on one user message ``text``; see :meth:`run`."""
        return self.run([user_message(text)], *options)

    def run(self, messages: Sequence[Message], *options: AgentRunOption) -> RunIterator:
        """Run the agent on ``messages`` in a worker thread; returns the event iterator at once.

        Closing the iterator (or leaving its ``with`` block) cancels the run. The iterator's
        ``result()`` waits for the end and returns a :class:`~agentkit.RunResult`. With
        ``with_conversation_id(id)`` the run is a turn of that conversation (see
        :func:`~agentkit.with_conversation_id`).

        Raises (at once, before a thread starts):
            ValueError: a conversation id was given but the Runner has no conversation store.
            ConversationBusyError: another turn of that conversation is running.
        """
        return self._run(messages, options, inline=False)

    def _run(
        self, messages: Sequence[Message], options: tuple[AgentRunOption, ...], *, inline: bool
    ) -> RunIterator:
        if isinstance(messages, (str, Message)):
            raise TypeError(
                "run() takes a list of messages; use query(text) for a single user message"
            )
        run_options = get_impl_specific_options(RunOptions(), *options)
        turn: OpenTurn | None = None
        if run_options.conversation_id is not None:
            turn, messages = open_turn(
                self._conversation_store(),
                run_options.conversation_id,
                messages,
                run_options.conversation_trim,
            )
        try:
            return self._start(messages, run_options, options, turn, inline)
        except BaseException:
            if turn is not None:
                turn.release()  # the run never started: nothing else gives the lock back
            raise

    def _start(
        self,
        messages: Sequence[Message],
        run_options: RunOptions,
        options: tuple[AgentRunOption, ...],
        turn: OpenTurn | None,
        inline: bool = False,
    ) -> RunIterator:
        root_input = AgentInput(messages=list(messages), enable_streaming=self.enable_streaming)
        scope = RunScope()
        if run_options.cancel_handle is not None:
            scope.attach(run_options.cancel_handle)
        frame = RunFrame(
            scope=scope,
            log=EventLog(),
            session=Session(run_options.session_values),
            root_input=root_input,
            observers=RunObservers.from_options(options),
        )
        agent = self._agent
        outcome = RunOutcome()
        _log.debug("agentkit: run of agent %r starts", agent.name)

        def work(generator: EventSink) -> None:
            sink = _RunnerSink(
                generator, self, frame, run_options.checkpoint_id, outcome, turn, resumed=False
            )
            try:
                agent._run_into(root_input, sink, options)
            finally:
                sink.finish()

        return start_worker(
            work,
            frame,
            owns_scope=True,
            outcome=outcome,
            on_finish=None if turn is None else turn.release,
            inline=inline,
        )

    def _conversation_store(self) -> ConversationStore:
        store = self.conversation_store
        if store is None:
            raise ValueError(
                "the run has a conversation id but the Runner has no conversation store; "
                "create the Runner with conversation_store=... (see agentkit.conversation)"
            )
        return store

    def resume(
        self,
        checkpoint_id: str,
        *options: AgentRunOption,
        targets: Mapping[str, Any] | None = None,
    ) -> RunIterator:
        """Continue the run saved under ``checkpoint_id``; returns the event iterator.

        ``targets`` maps interrupt ids (``InterruptContext.id``) to resume data; without
        targets every interrupted point is resumed without data (tools that call
        ``interrupt()`` again interrupt again). A checkpoint saved on cancel or failure is
        resumed without targets: the run retries from its last safe point. The streaming mode
        is the saved run's. If the resumed run stops again, it is saved under the same id;
        if it completes, the checkpoint is consumed.

        Raises (at once, before a thread starts):
            ValueError: the Runner has no checkpoint store, or a target id is unknown.
            CheckpointNotFoundError: nothing is saved under ``checkpoint_id``.
            CheckpointConsumedError: a resumed run of this checkpoint completed already.
            CheckpointError: the checkpoint is corrupt, foreign or fails verification.
            CheckpointBusyError: another resume of this checkpoint is running.
        """
        store = self.checkpoint_store
        if store is None:
            raise ValueError(
                "failed to resume: store is nil; create the Runner with checkpoint_store=..."
            )
        from agentkit.checkpoint import lease_for

        lease = lease_for(store, checkpoint_id, self.lease_ttl)
        turn: OpenTurn | None = None
        try:
            checkpoint = self._load(store, checkpoint_id)
            resume_state = _resume_state(checkpoint, targets)
            run_options = get_impl_specific_options(RunOptions(), *options)
            session = Session(checkpoint.session_values)
            session.update(run_options.session_values)
            log = EventLog()
            log.restore(checkpoint.history)
            scope = RunScope()
            if run_options.cancel_handle is not None:
                scope.attach(run_options.cancel_handle)
            frame = RunFrame(
                scope=scope,
                log=log,
                session=session,
                root_input=checkpoint.root_input,
                resume=resume_state,
                observers=RunObservers.from_options(options),
            )
            info = ResumeInfo(
                enable_streaming=checkpoint.enable_streaming,
                interrupt_info=InterruptInfo(data=checkpoint.interrupt_data),
            )
            if checkpoint.conversation is not None:
                turn = resume_turn(self._conversation_store(), checkpoint.conversation)
            keeper = _LeaseKeeper(lease)
        except BaseException:
            if turn is not None:
                turn.release()
            lease.release()
            raise
        agent = self._agent
        outcome = RunOutcome()
        _log.debug("agentkit: resumed run of checkpoint %r starts", checkpoint_id)

        def work(generator: EventSink) -> None:
            sink = _RunnerSink(generator, self, frame, checkpoint_id, outcome, turn, resumed=True)
            try:
                agent._resume_into(info, sink, options)
            finally:
                sink.finish()

        def finish() -> None:
            try:
                keeper.stop()
            finally:
                if turn is not None:
                    turn.release()

        return start_worker(work, frame, owns_scope=True, on_finish=finish, outcome=outcome)

    def _load(self, store: CheckPointStore, checkpoint_id: str) -> Checkpoint:
        try:
            data = store.get(checkpoint_id)
        except Exception as error:
            raise CheckpointError(
                f"failed to load from checkpoint: failed to get checkpoint from store: {error}"
            ) from error
        if data is None:
            raise CheckpointNotFoundError(
                f"failed to load from checkpoint: checkpoint[{checkpoint_id}] not exist"
            )
        from agentkit.checkpoint._binding import loads_for_store

        checkpoint = loads_for_store(self.serializer, store, checkpoint_id, data)
        if isinstance(checkpoint, ConsumedCheckpoint):
            raise CheckpointConsumedError(
                f"checkpoint {checkpoint_id!r} was consumed: a resumed run of it completed at "
                f"{checkpoint.completed_at}, so it cannot be resumed again (that would repeat "
                "what the run did); start a new run instead"
            )
        if not isinstance(checkpoint, Checkpoint):
            raise CheckpointError(
                "failed to load from checkpoint: failed to decode checkpoint: it holds a "
                f"{type(checkpoint).__name__}, not an agentkit run"
            )
        try:
            checkpoint.conversation  # noqa: B018 (a probe)
        except AttributeError:  # saved before checkpoints held conversation turns
            checkpoint.conversation = None
        _validate(checkpoint, checkpoint_id)
        return checkpoint

    def _save(self, checkpoint_id: str, checkpoint: Checkpoint | ConsumedCheckpoint) -> None:
        """Encode and store ``checkpoint``; every failure is a :class:`CheckpointError`."""
        store = self.checkpoint_store
        if store is None:
            raise CheckpointError(
                "the run has a checkpoint id but the Runner has no checkpoint_store; create "
                "the Runner with checkpoint_store=..."
            )
        from agentkit.checkpoint._binding import dumps_for_store

        try:
            payload = dumps_for_store(self.serializer, store, checkpoint_id, checkpoint)
        except CheckpointError as error:
            raise CheckpointError(
                f"failed to save checkpoint {checkpoint_id!r}: {_culprit(self, checkpoint)}"
                f"{error}"
            ) from error
        try:
            store.set(checkpoint_id, payload)
        except Exception as error:
            raise CheckpointError(
                f"failed to save checkpoint {checkpoint_id!r}: the store refused it: "
                f"{type(error).__name__}: {error}"
            ) from error

    def _checkpoint(
        self,
        frame: RunFrame,
        points: list[ResumePoint],
        data: Any,
        reason: str,
        turn: OpenTurn | None = None,
    ) -> Checkpoint:
        root_input = frame.root_input or AgentInput()
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
    ]
    for field, kind in expected:
        try:
            value = getattr(checkpoint, field)
        except AttributeError:
            value = _MISSING
        if not isinstance(value, kind):
            raise CheckpointError(
                f"failed to load from checkpoint: checkpoint {checkpoint_id!r} is damaged: its "
                f"field {field!r} is {'missing' if value is _MISSING else type(value).__name__}"
            )
    for item in checkpoint.history:
        if not isinstance(item, RecordedEvent):
            raise CheckpointError(
                f"failed to load from checkpoint: checkpoint {checkpoint_id!r} is damaged: its "
                f"history holds a {type(item).__name__}"
            )
    for point in checkpoint.points:
        if not isinstance(point, ResumePoint):
            raise CheckpointError(
                f"failed to load from checkpoint: checkpoint {checkpoint_id!r} is damaged: its "
                f"resume points hold a {type(point).__name__}"
            )


_MISSING = object()


def _culprit(runner: Runner, checkpoint: Checkpoint | ConsumedCheckpoint) -> str:
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
            runner.serializer.dumps(value, checkpoint_id="probe")
        except CheckpointError:
            return f"{what} cannot be saved: "
    return ""


def _resume_state(checkpoint: Checkpoint, targets: Mapping[str, Any] | None) -> ResumeState:
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


class _LeaseKeeper:
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


class _RunnerSink:
    """The top of a run: names the outcome, saves checkpoints, delivers the last event.

    An error event is held until the next event arrives or the run ends, so the Runner knows
    whether it is the run's last one: then the checkpoint is saved first.
    """

    __slots__ = (
        "checkpoint_id",
        "downstream",
        "ended",
        "error_seen",
        "frame",
        "held",
        "interrupted",
        "outcome",
        "resumed",
        "runner",
        "turn",
    )

    def __init__(
        self,
        downstream: EventSink,
        runner: Runner,
        frame: RunFrame,
        checkpoint_id: str | None,
        outcome: RunOutcome,
        turn: OpenTurn | None,
        *,
        resumed: bool,
    ) -> None:
        self.outcome = outcome
        self.turn = turn
        self.downstream = downstream
        self.runner = runner
        self.frame = frame
        self.checkpoint_id = checkpoint_id
        self.resumed = resumed
        self.held: AgentEvent | None = None
        self.interrupted = False
        self.error_seen = False
        self.ended = False  # the run's last event was delivered; nothing follows it

    def send(self, item: AgentEvent) -> bool:
        if self.ended:
            return True
        ok = True
        held = self.held
        if held is not None:
            if isinstance(held.err, AgentCancelledError) and isinstance(
                item.err, AgentCancelledError
            ):
                # One cancel is reported once.
                self.held = item
                return True
            self.held = None
            ok = self.downstream.send(held)
        if item.interrupted:
            return self._interrupt(item) and ok
        if item.err is not None:
            self.error_seen = True
            self.held = item
            return ok
        return self.downstream.send(item) and ok

    def _interrupt(self, item: AgentEvent) -> bool:
        if self.interrupted:
            return self.downstream.send(
                AgentEvent(
                    err=AgentKitError("multiple interrupt actions should not happen in Runner")
                )
            )
        self.interrupted = True
        action = item.action
        assert action is not None and action.interrupted is not None
        points = self.frame.journal.points()
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
                checkpoint = self.runner._checkpoint(
                    self.frame, points, data, "interrupted", self.turn
                )
                self.runner._save(self.checkpoint_id, checkpoint)
            except CheckpointError as error:
                # Nothing can be resumed: the failure is the run's last event.
                self.ended = True
                self.downstream.send(
                    AgentEvent(agent_name=item.agent_name, run_path=item.run_path, err=error)
                )
                return False
            self.outcome.checkpoint_id = self.checkpoint_id
            _log.info("agentkit: run interrupted; checkpoint %r saved", self.checkpoint_id)
        self.ended = True
        return self.downstream.send(event)

    def finish(self) -> None:
        """The run ended: save or consume the checkpoint, then deliver the held last event."""
        held, self.held = self.held, None
        if self.ended:
            return
        self.ended = True
        checkpoint_id = self.checkpoint_id
        failure: AgentEvent | None = None
        if checkpoint_id is not None:
            try:
                if self.error_seen:
                    self._save_stopped(checkpoint_id, held)
                elif self.resumed:
                    completed = datetime.datetime.now(datetime.timezone.utc).isoformat()
                    self.runner._save(checkpoint_id, ConsumedCheckpoint(completed))
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
            return AgentEvent(
                agent_name=held.agent_name if held is not None else "",
                run_path=held.run_path if held is not None else [],
                err=ConversationStoreError(
                    f"the turn completed but could not be appended to conversation "
                    f"{self.turn.turn.conversation_id!r}: {type(error).__name__}: {error}"
                ),
            )
        return None

    def _save_stopped(self, checkpoint_id: str, held: AgentEvent | None) -> None:
        """Save the checkpoint of a cancelled or failed run (if anything can be resumed)."""
        points = self.frame.journal.points()
        if not points:
            return
        cancelled = held is not None and isinstance(held.err, AgentCancelledError)
        reason = "cancelled" if cancelled else "failed"
        checkpoint = self.runner._checkpoint(self.frame, points, None, reason, self.turn)
        self.runner._save(checkpoint_id, checkpoint)
        self.outcome.checkpoint_id = checkpoint_id
        _log.info("agentkit: run %s; checkpoint %r saved", reason, checkpoint_id)
        if held is not None and held.err is not None and hasattr(held.err, "add_note"):
            held.err.add_note(
                f"The run can be resumed: runner.resume({checkpoint_id!r}) goes on from the "
                "last model or tool call that finished."
            )
