"""Runner: the entry point that runs an agent, keeps its session and saves checkpoints.

The life of a checkpoint (a run given ``with_checkpoint_id(id)`` and a Runner with a
checkpoint store):

* **saved as it goes** (``durability="step"``, the default): the run takes a lease on the id
  (:class:`~agentkit.CheckpointBusyError` at once if another live run holds it), writes its
  image when it starts, and then, after every finished model reply and tool call, appends
  what changed to the store before it goes on (see ``agentkit/_durable.py``). A run whose
  process dies (SIGKILL, OOM, a lost machine) is resumed from its last finished step, once its
  lease expired (``lease_ttl``). With ``durability="stop"`` nothing is written until the run
  stops.
* **saved** when the run stops before it completes: interrupted, cancelled, or failed (a model
  error after its retries, a tool exception, a timeout). The checkpoint holds the run's input,
  session values, history and the resume points every stopped component recorded (see
  ``agentkit._points``): the last safe point, after the last finished model or tool call.
  It is saved *before* the interrupt or error event is delivered; when saving fails, the
  run's last event is a :class:`~agentkit.CheckpointError` that says why, and no interrupt
  event follows it.
* **resumed** with :meth:`Runner.resume`: exclusively (a lease, refreshed while the resumed
  run lives, released when it ends, expiring if its process dies). Finished tools are never
  run again; a tool call that started but did not finish before a crash runs again if its
  tool is idempotent, else the run interrupts with an :class:`~agentkit.UnfinishedToolCall`
  for a human to decide. A resumed run that stops again overwrites the checkpoint (new
  interrupt ids).
* **consumed** when a resumed run (or a durable one) completes: a tombstone replaces the
  checkpoint, and a later ``resume`` of the id raises :class:`~agentkit.CheckpointConsumedError`,
  so an approved action cannot run twice by resuming twice. Tombstones stay until deleted
  (``store.delete(id)``) or, in a store with a ``ttl``, until they expire.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._agent import EventSink, run_agent, start_worker
from agentkit._cancel import CancelMode
from agentkit._checkpoints import (
    RUN_LEASE_TTL,
    Checkpoint,
    ConsumedCheckpoint,
    LeaseKeeper,
    load_checkpoint,
    make_checkpoint,
    resume_state,
    save_checkpoint,
)
from agentkit._events import (
    Agent,
    AgentEvent,
    AgentInput,
    AgentOutput,
    InterruptInfo,
    MessageVariant,
    ResumeInfo,
    RunStep,
)
from agentkit._lazy import present
from agentkit._limits import RunLimits
from agentkit._observe import RunObservers, UsageLedger
from agentkit._options import NO_OPTIONS, AgentRunOption, HeldLease, RunOptionSet
from agentkit._results import RunIterator, RunOutcome, RunResult
from agentkit._runctx import EventLog, RunFrame, RunKey, Session
from agentkit._runner_sink import RunnerSink
from agentkit._scope import RunScope
from agentkit._steering import Steering
from agentkit._values import BuiltValue
from agentkit.agents._flow import _flow_node
from agentkit.errors import (
    AgentKitTypeError,
    AgentKitValueError,
    CheckpointConsumedError,
    CheckpointError,
)
from agentkit.schema import ContentPart, Message, _input_messages
from agentkit.streams import stream_from_list

if TYPE_CHECKING:
    from agentkit._durable import DurableRun
    from agentkit._points import ResumeState
    from agentkit.checkpoint import CheckPointStore, Lease, PickleSerializer
    from agentkit.conversation import ConversationStore
    from agentkit.conversation._turn import DoneTurn, OpenTurn

__all__ = ["Runner"]

_log = logging.getLogger("agentkit")

class Runner(BuiltValue):
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
        lease_ttl: seconds a run's exclusive claim on its checkpoint id lasts (default 30);
            the Runner refreshes it every third of that while the run lives, so this only
            bounds how long the id stays busy after the process running it died.
        conversation_store: where conversations live (see ``agentkit.conversation``); runs
            given ``with_conversation_id(id)`` are turns of that conversation.
        durability: when a run with a checkpoint id is saved. ``"step"`` (the default): as it
            goes, after every finished model reply and tool call, so a run whose process dies
            resumes from its last finished step; it costs one small write per step (about
            0.2-0.3 ms of CPU with the file and SQLite stores; see the README's "Durability
            and recovery") and the run holds a lease on its id while it lives. ``"stop"``:
            only when the run stops (interrupt, cancel, failure), as before version 0.5: a run
            whose process dies is lost since its last stop.
        limits: the :class:`~agentkit.RunLimits` of every run (``with_limits(...)`` gives one
            run others, ``with_limits(None)`` none). A run that reaches a limit pauses when it
            has a checkpoint id (an interrupt with a :class:`~agentkit.LimitReached`; resume it
            with a larger ``with_limits(...)``), and ends with
            :class:`~agentkit.RunLimitError` otherwise.

    The life of a checkpoint (saved as it goes or on a stop; resumed exclusively; consumed
    once a resumed or durable run completes) is described in :mod:`agentkit.runner`.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        enable_streaming: bool = False,
        checkpoint_store: CheckPointStore | None = None,
        serializer: PickleSerializer | None = None,
        lease_ttl: float = RUN_LEASE_TTL,
        conversation_store: ConversationStore | None = None,
        durability: str = "step",
        limits: RunLimits | None = None,
    ) -> None:
        if isinstance(lease_ttl, bool) or not isinstance(lease_ttl, (int, float)) or lease_ttl <= 0:
            raise AgentKitValueError(
                f"lease_ttl must be a positive number of seconds (got {lease_ttl!r})"
            )
        if durability not in ("step", "stop"):
            raise AgentKitValueError(
                f"durability must be 'step' (save after every finished model reply and tool "
                f"call) or 'stop' (save when the run stops), got {durability!r}"
            )
        if limits is not None and not isinstance(limits, RunLimits):
            raise AgentKitTypeError(
                f"limits must be a RunLimits, or None for none (got {limits!r}); write "
                "Runner(agent, limits=RunLimits(model_calls=20, cost=1.0))"
            )
        self.durability = durability
        self._agent = _flow_node(agent)
        self.enable_streaming = enable_streaming
        self.checkpoint_store = checkpoint_store
        self._serializer = serializer
        self.lease_ttl = float(lease_ttl)
        self.conversation_store = conversation_store
        self.limits = limits

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

    def invoke(
        self,
        query: str | Message | Sequence[Message | str | ContentPart],
        *options: AgentRunOption,
        on_event: Callable[[AgentEvent], object] | None = None,
        raise_errors: bool = True,
    ) -> RunResult:
        """Run the agent to its end in this thread and return the :class:`~agentkit.RunResult`.

        ``query`` is a user message's text, a :class:`~agentkit.Message`, a list of messages,
        or a list of text and parts (one user message: ``["What is this?", ImagePart(png)]``,
        see :func:`~agentkit.user_message`). The result is the same as
        ``run(...).result()``, but the run goes on in the calling thread, with no worker
        thread handing each event over::

            print(runner.invoke("What is 2 + 2?").text)

        ``on_event`` is called with each event as it happens, the way a ``for`` loop over
        :meth:`run` sees it: to show progress, or print a streamed answer as it arrives, at
        the cost of no thread hand-over::

            def show(event):
                if event.output and event.output.message_output:
                    for chunk in event.output.message_output.message_stream or ():
                        print(chunk.content, end="", flush=True)

            runner.invoke("Tell me a story", on_event=show)

        The callback runs in the thread that produced the event (this one, or a
        ``ParallelAgent`` branch's), one call at a time. It may read the event's message
        stream; the run waits meanwhile. If it raises, the run is cancelled at once (as
        closing :meth:`run`'s iterator would; a run with a checkpoint id is saved) and
        ``invoke`` raises that exception.

        With ``raise_errors=False`` a failed run returns too, its error in ``result.error``
        (as :meth:`RunIterator.result(raise_errors=False) <agentkit.results.RunIterator.result>`
        does); an exception ``on_event`` raised is still raised.

        Raises:
            Exception: the error a failed run ended with (see :meth:`RunIterator.result
                <agentkit.results.RunIterator.result>`), unless ``raise_errors`` is false, or
                the one ``on_event`` raised; an interrupted run returns normally, with
                ``result.interrupt`` and ``result.checkpoint_id`` set.
        """
        messages = _input_messages(query, "Runner.invoke")
        # Nobody reads the events through an iterator: the run goes on in this thread.
        run = self._run(messages, options, inline=True, on_event=on_event)
        return run.result(raise_errors=raise_errors)

    def query(
        self, text: str | Message | Sequence[str | ContentPart], *options: AgentRunOption
    ) -> RunIterator:
        """Run the agent on one user message; see :meth:`run`.

        ``text`` is the message's text, a :class:`~agentkit.Message`, or a list of text and
        parts (``["Describe this", ImagePart(png)]``, see :func:`~agentkit.user_message`).

        Raises:
            TypeError: ``text`` is none of these.
        """
        return self.run(_input_messages(text, "Runner.query"), *options)

    def run(self, messages: Sequence[Message], *options: AgentRunOption) -> RunIterator:
        """Run the agent on ``messages`` in a worker thread; returns the event iterator at once.

        Closing the iterator (or leaving its ``with`` block) cancels the run. The iterator's
        ``result()`` waits for the end and returns a :class:`~agentkit.RunResult`. With
        ``with_conversation_id(id)`` the run is a turn of that conversation (see
        :func:`~agentkit.with_conversation_id`); with ``with_conversation_id(id,
        turn_key=key)`` a turn the conversation holds already is not run again: its events
        are the first turn's messages.

        Raises (at once, before a thread starts):
            ValueError: a conversation id was given but the Runner has no conversation store.
            ConversationBusyError: another turn of that conversation is running.
        """
        return self._run(messages, options, inline=False)

    def _run(
        self,
        messages: Sequence[Message],
        options: tuple[AgentRunOption, ...],
        *,
        inline: bool,
        on_event: Callable[[AgentEvent], object] | None = None,
    ) -> RunIterator:
        if isinstance(messages, (str, Message)):
            raise AgentKitTypeError(
                "run() takes a list of messages; use query(text) for a single user message"
            )
        for item in messages:
            if not isinstance(item, Message):
                raise AgentKitTypeError(
                    f"run() takes a list of Message objects (got a {type(item).__name__} in "
                    "it); use query([...]) for one user message of text and parts"
                )
        parsed = RunOptionSet(options) if options else NO_OPTIONS
        run_options = parsed.run
        turn: OpenTurn | None = None
        if run_options.conversation_id is not None:
            from agentkit.conversation._turn import open_turn  # only runs with conversations

            opened = open_turn(
                self._conversation_store(),
                run_options.conversation_id,
                messages,
                run_options.conversation_trim,
                run_options.turn_key,
            )
            if not isinstance(opened, tuple):  # a repeat of a turn the conversation holds
                return self._repeat(opened, parsed, inline, on_event)
            turn, messages = opened
        try:
            return self._start(messages, parsed, turn, inline, on_event)
        except BaseException:
            if turn is not None:
                turn.release()  # the run never started: nothing else gives the lock back
            raise

    def _start(
        self,
        messages: Sequence[Message],
        options: RunOptionSet,
        turn: OpenTurn | None,
        inline: bool = False,
        on_event: Callable[[AgentEvent], object] | None = None,
    ) -> RunIterator:
        run_options = options.run
        root_input = AgentInput(messages=list(messages), enable_streaming=self.enable_streaming)
        scope = RunScope()
        if run_options.cancel_handle is not None:
            scope.attach(run_options.cancel_handle)
        limits = run_options.limits if run_options.limits_given else self.limits
        usage = None
        if limits is not None:
            # Reaching a limit pauses a run that can be saved, and ends the others.
            pausable = run_options.checkpoint_id is not None and self.checkpoint_store is not None
            usage = UsageLedger(limits, pausable=pausable)
        frame = RunFrame(
            scope=scope,
            log=EventLog(),
            session=Session(run_options.session_values),
            root_input=root_input,
            observers=RunObservers.from_options(options.given, usage),
            options=options,
            steering=run_options.steering or Steering(),
        )
        agent = self._agent
        outcome = RunOutcome()
        checkpoint_id = run_options.checkpoint_id
        durable = self._durable(
            checkpoint_id,
            frame,
            run_options.checkpoint_lease,
            save_input=run_options.checkpoint_save_input,
        )
        keeper: LeaseKeeper | None = None
        if durable is not None:
            frame = attrs.evolve(frame, progress=durable.progress)
        elif run_options.checkpoint_lease is not None and checkpoint_id is not None:
            # Saved when it stops (durability="stop"), with a lease the caller holds: kept
            # while the run lives; lost, it cancels the run and fences the save.
            keeper = LeaseKeeper(
                run_options.checkpoint_lease, on_lost=_cancel(scope), release=False
            )
        _bind_steering(frame)
        _log.debug("agentkit: run of agent %r starts", agent.name)

        def work(generator: EventSink) -> None:
            sink = self._sink(
                generator, frame, checkpoint_id, outcome, turn, durable, keeper,
                consume=durable is not None,
            )
            try:
                place = frame.at_agent(RunStep(agent.name))
                if durable is not None:
                    if not _begin(durable, make_checkpoint(frame, [], None, "running", turn),
                                  sink, place):
                        return
                    # A fresh run that stops with nothing to resume leaves nothing behind.
                    sink.discard = durable.writer.discard
                run_agent(agent, place, sink, root_input)
            except BaseException as error:  # the run's last event, as any failure
                sink.abort(error, agent.name)
            finally:
                _end_steering(frame, outcome, checkpoint_id)
                sink.finish()

        return start_worker(
            work,
            frame,
            owns_scope=True,
            outcome=outcome,
            on_finish=_on_finish(durable, turn, keeper),
            inline=inline,
            on_event=on_event,
            stop_at_exit=run_options.checkpoint_id is not None,
        )

    def _durable(
        self,
        checkpoint_id: str | None,
        frame: RunFrame,
        lease: HeldLease | None,
        *,
        save_input: bool = True,
    ) -> DurableRun | None:
        """The durable side of a run saved as it goes (``durability="step"``), or ``None``.

        Raises:
            CheckpointBusyError: another live run holds the id.
        """
        store = self.checkpoint_store
        if self.durability != "step" or checkpoint_id is None or store is None:
            return None
        from agentkit._durable import DurableRun

        ledger = frame.observers.usage
        return DurableRun(
            store,
            self.serializer,
            checkpoint_id,
            lease_ttl=self.lease_ttl,
            scope=frame.scope,
            session=frame.session,
            log=frame.log,
            lease=lease,
            save_input=save_input,
            # A run with limits keeps its usage in every step record (costs nothing otherwise).
            usage=None if ledger.limits is None else ledger.snapshot,
        )

    def _repeat(
        self,
        done: DoneTurn,
        options: RunOptionSet,
        inline: bool,
        on_event: Callable[[AgentEvent], object] | None,
    ) -> RunIterator:
        """The run of a turn that repeats a completed one: its agents' messages, read back.

        No agent runs and nothing is appended; the events are the first turn's messages, in
        its order, named as they were (streamed when this Runner streams).
        """
        run_options = options.run
        scope = RunScope()
        if run_options.cancel_handle is not None:
            scope.attach(run_options.cancel_handle)
        frame = RunFrame(
            scope=scope,
            log=EventLog(),
            session=Session(run_options.session_values),
            root_input=AgentInput(enable_streaming=self.enable_streaming),
            observers=RunObservers.from_options(options.given),
            options=options,
        )
        streaming = self.enable_streaming
        events = []
        for said in done.said:
            message = said.message
            variant = MessageVariant(
                streaming,
                None if streaming else message,
                stream_from_list([message]) if streaming else None,
                message.role,
                message.tool_name,
            )
            events.append(
                AgentEvent(
                    agent_name=said.agent_name,
                    run_path=[RunStep(name) for name in said.run_path],
                    output=AgentOutput(message_output=variant),
                )
            )
        _log.info(
            "agentkit: turn %r of conversation %r ran before; its messages are given back",
            done.key,
            done.conversation_id,
        )

        def work(sink: EventSink) -> None:
            for event in events:
                scope.check()
                sink.send(event)

        return start_worker(
            work, frame, owns_scope=True, outcome=RunOutcome(), inline=inline, on_event=on_event
        )

    def _conversation_store(self) -> ConversationStore:
        store = self.conversation_store
        if store is None:
            raise AgentKitValueError(
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

        The run keeps counting what it used for its limits, and keeps the limits it was saved
        with (the Runner's default, for a run saved without any): give
        ``with_limits(RunLimits(...))`` to replace them, e.g. to let a run that paused on a
        :class:`~agentkit.LimitReached` go on with a larger allowance (no ``targets`` needed).

        Raises (at once, before a thread starts):
            ValueError: the Runner has no checkpoint store, or a target id is unknown.
            CheckpointNotFoundError: nothing is saved under ``checkpoint_id``.
            CheckpointConsumedError: a resumed run of this checkpoint completed already.
            CheckpointError: the checkpoint is corrupt, foreign or fails verification.
            CheckpointBusyError: another resume of this checkpoint is running.
        """
        store = self.checkpoint_store
        if store is None:
            raise AgentKitValueError(
                f"cannot resume checkpoint {checkpoint_id!r}: this Runner has no checkpoint "
                "store to load it from; create the Runner with checkpoint_store=... (the store "
                "the run was saved in)"
            )
        from agentkit.checkpoint import lease_for

        lease = lease_for(store, checkpoint_id, self.lease_ttl)
        turn: OpenTurn | None = None
        keeper: LeaseKeeper | None = None
        try:
            try:
                checkpoint = self._load(store, checkpoint_id)
            except CheckpointConsumedError:
                _drop_leftover_steps(store, checkpoint_id)
                raise
            points = resume_state(checkpoint, targets)
            frame = _resumed_frame(checkpoint, points, options, self.limits)
            scope = frame.scope
            info = ResumeInfo(
                enable_streaming=checkpoint.enable_streaming,
                interrupt_info=InterruptInfo(data=checkpoint.interrupt_data),
            )
            if checkpoint.conversation is not None:
                from agentkit.conversation._turn import resume_turn

                turn = resume_turn(self._conversation_store(), checkpoint.conversation)
            durable = self._durable(checkpoint_id, frame, lease)
            if durable is not None:
                frame = attrs.evolve(frame, progress=durable.progress)
            else:  # saved when it stops: the lease is kept here, and fences the save
                keeper = LeaseKeeper(lease, on_lost=_cancel(scope), release=False)
            _bind_steering(frame)
        except BaseException:
            if turn is not None:
                turn.release()
            lease.release()
            raise
        agent = self._agent
        outcome = RunOutcome()
        _log.debug("agentkit: resumed run of checkpoint %r starts", checkpoint_id)

        def work(generator: EventSink) -> None:
            sink = self._sink(
                generator, frame, checkpoint_id, outcome, turn, durable, keeper,
                consume=True,
            )
            try:
                place = frame.at_agent(RunStep(agent.name))
                if durable is not None:
                    image = make_checkpoint(
                        frame, checkpoint.points, checkpoint.interrupt_data, "running", turn,
                        points.targets(),
                    )
                    if not _begin(durable, image, sink, place):
                        return
                if frame.resume is None:
                    # A durable run that died before any step of it finished: nothing of it
                    # is kept but its input, so it runs again from the start.
                    run_agent(agent, place, sink, checkpoint.root_input)
                    return
                resumed_input = AgentInput(enable_streaming=info.enable_streaming)
                run_agent(agent, place, sink, resumed_input, info)
            except BaseException as error:  # the run's last event, as any failure
                sink.abort(error, agent.name)
            finally:
                _end_steering(frame, outcome, checkpoint_id)
                sink.finish()

        finish = _resumed_finish(durable, keeper, lease, turn)
        return start_worker(
            work, frame, owns_scope=True, on_finish=finish, outcome=outcome, stop_at_exit=True
        )

    def _load(self, store: CheckPointStore, checkpoint_id: str) -> Checkpoint:
        return load_checkpoint(store, self.serializer, checkpoint_id)

    def _save(self, checkpoint_id: str, checkpoint: Checkpoint | ConsumedCheckpoint) -> None:
        save_checkpoint(self.checkpoint_store, self.serializer, checkpoint_id, checkpoint)

    def _sink(
        self,
        generator: EventSink,
        frame: RunFrame,
        checkpoint_id: str | None,
        outcome: RunOutcome,
        turn: OpenTurn | None,
        durable: DurableRun | None,
        keeper: LeaseKeeper | None,
        *,
        consume: bool,
    ) -> RunnerSink:
        """The top of a run or a resumed run: a durable run saves through its writer, any
        other through this Runner's store, fenced by the caller's lease when it holds one."""
        if durable is not None:
            return RunnerSink(
                generator, durable.writer.save, frame, checkpoint_id, outcome, turn,
                consume=consume, final=durable.final_points,
            )

        def save(checkpoint_id: str, checkpoint: Checkpoint | ConsumedCheckpoint) -> None:
            if keeper is not None and keeper.lost is not None:
                raise _fenced(checkpoint_id, keeper.lost)
            self._save(checkpoint_id, checkpoint)

        return RunnerSink(generator, save, frame, checkpoint_id, outcome, turn, consume=consume)


def _drop_leftover_steps(store: CheckPointStore, checkpoint_id: str) -> None:
    """Delete step records left under a tombstone (the process that completed the run died
    between writing the tombstone and deleting them); the caller holds the id's lease."""
    from agentkit.checkpoint._base import journals

    if not journals(store):
        return
    try:
        store.delete_steps(checkpoint_id)
    except Exception as error:  # the consumed checkpoint is the answer; this is housekeeping
        _log.warning(
            "agentkit: cannot delete the step records left under consumed checkpoint %r: "
            "%s: %s",
            checkpoint_id,
            type(error).__name__,
            error,
        )


def _resumed_frame(
    checkpoint: Checkpoint,
    points: ResumeState,
    options: tuple[AgentRunOption, ...],
    default_limits: RunLimits | None,
) -> RunFrame:
    """The frame of a run resumed from ``checkpoint``: its session, history, key, options and
    usage (``default_limits``: the Runner's, for a run saved without limits)."""
    parsed = RunOptionSet(options) if options else NO_OPTIONS
    run_options = parsed.run
    session = Session(checkpoint.session_values)
    session.update(run_options.session_values)
    log = EventLog()
    started = bool(checkpoint.points)  # else: nothing finished (a durable run's first image)
    if started:
        log.restore(checkpoint.history)
    scope = RunScope()
    if run_options.cancel_handle is not None:
        scope.attach(run_options.cancel_handle)
    # The run goes on counting what it used, within the limits it was saved with unless it is
    # given others.
    limits = run_options.limits if run_options.limits_given else checkpoint.limits
    usage = UsageLedger(
        limits if limits is not None or run_options.limits_given else default_limits,
        carried=checkpoint.usage,
        pausable=True,
    )
    return RunFrame(
        scope=scope,
        log=log,
        session=session,
        root_input=checkpoint.root_input,
        resume=points if started else None,
        observers=RunObservers.from_options(parsed.given, usage),
        options=parsed,
        key=RunKey(checkpoint.key) if checkpoint.key else RunKey.fresh(),
        steering=run_options.steering or Steering(),
    )


def _begin(durable: DurableRun, image: Checkpoint, sink: RunnerSink, place: RunFrame) -> bool:
    """Write a durable run's first image; if that fails, end the run with the error.

    Written, the messages sent to the run are written as they come (``send`` returns once
    they are)."""
    try:
        durable.begin(image)
    except CheckpointError as error:
        step = place.run_path[-1]
        sink.send(AgentEvent(agent_name=step.agent_name, run_path=[step], err=error))
        return False
    steering, progress = place.steering, place.progress
    if steering is not None and progress is not None:
        steering.attach(progress.write_session)
    return True


def _bind_steering(frame: RunFrame) -> None:
    """Give the run's inbox its session (a durable run's sends wait for its first write)."""
    steering, session = frame.steering, frame.session
    if steering is not None and session is not None:
        steering.bind(session, durable=frame.progress is not None)


def _end_steering(frame: RunFrame, outcome: RunOutcome, checkpoint_id: str | None) -> None:
    """The run's agent returned: refuse sends, and say which messages it never used."""
    steering = frame.steering
    if steering is None:
        return
    unused = steering.close()
    outcome.unused_messages = unused
    if unused:
        _log.warning(
            "agentkit: the run ended before it used %d message(s) sent to it%s",
            len(unused),
            "" if checkpoint_id is None else
            f" (kept in checkpoint {checkpoint_id!r} if it was saved there, for its resume)",
        )


def _on_finish(
    durable: DurableRun | None, turn: OpenTurn | None, keeper: LeaseKeeper | None = None
) -> Callable[[], None] | None:
    """What a fresh run does when it ended: stop keeping its lease, give its turn back."""
    if durable is None and turn is None and keeper is None:
        return None

    def finish() -> None:
        try:
            if durable is not None:
                durable.end()
            if keeper is not None:
                keeper.stop()
        finally:
            if turn is not None:
                turn.release()

    return finish


def _resumed_finish(
    durable: DurableRun | None, keeper: LeaseKeeper | None, lease: Lease, turn: OpenTurn | None
) -> Callable[[], None]:
    """What a resumed run does when it ended: stop keeping its lease, release it, give its
    conversation turn back."""

    def finish() -> None:
        try:
            if durable is not None:
                durable.end()
            if keeper is not None:
                keeper.stop()
        finally:
            try:
                lease.release()
            finally:
                if turn is not None:
                    turn.release()

    return finish


def _cancel(scope: RunScope) -> Callable[[str], None]:
    def cancel(reason: str) -> None:
        scope.request_cancel(CancelMode.IMMEDIATE)

    return cancel


def _fenced(checkpoint_id: str, reason: str) -> CheckpointError:
    return CheckpointError(
        f"the run of checkpoint {checkpoint_id!r} stopped saving: {reason}; it saves nothing "
        "more, so as not to overwrite the other run"
    )

present(
    (
        Runner,
    ),
    "agentkit",
)
