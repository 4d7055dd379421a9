"""Runner: the entry point that runs an agent, keeps its session and saves checkpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._persist import persisted
from agentkit.agents.flow import FlowAgent
from agentkit.cancel import RunScope
from agentkit.errors import (
    AgentCancelledError,
    AgentKitError,
    CheckpointError,
    CheckpointNotFoundError,
)
from agentkit.events import Agent, AgentAction, AgentEvent, AgentInput, InterruptInfo, ResumeInfo
from agentkit.interrupt import ResumeState, SignalNode, flatten
from agentkit.options import AgentRunOption, RunOptions, get_impl_specific_options
from agentkit.runctx import EventLog, RecordedEvent, RunFrame, Session
from agentkit.schema import Message, user_message
from agentkit.worker import EventSink, start_worker

if TYPE_CHECKING:
    from agentkit.checkpoint import CheckPointStore, PickleSerializer
    from agentkit.iterators import AsyncIterator

__all__ = ["Runner"]


@persisted("agentkit.Checkpoint")
@attrs.define
class Checkpoint:
    """What the Runner saves when a run interrupts (framework-internal)."""

    root_input: AgentInput
    session_values: dict[str, Any]
    history: list[RecordedEvent]
    enable_streaming: bool
    points: dict[str, tuple[tuple[str, ...], Any]]
    interrupt_data: Any = None
    version: int = 1


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
        serializer: how checkpoints are encoded; default ``PickleSerializer.from_env()``
            (signed when ``AGENTKIT_CHECKPOINT_KEY`` is set).
    """

    def __init__(
        self,
        agent: Agent,
        *,
        enable_streaming: bool = False,
        checkpoint_store: CheckPointStore | None = None,
        serializer: PickleSerializer | None = None,
    ) -> None:
        self._agent = agent if isinstance(agent, FlowAgent) else FlowAgent(agent)
        self.enable_streaming = enable_streaming
        self.checkpoint_store = checkpoint_store
        self._serializer = serializer

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

    def query(self, text: str, *options: AgentRunOption) -> AsyncIterator[AgentEvent]:
        """Run the agent on one user message ``text``; see :meth:`run`."""
        return self.run([user_message(text)], *options)

    def run(
        self, messages: Sequence[Message], *options: AgentRunOption
    ) -> AsyncIterator[AgentEvent]:
        """Run the agent on ``messages`` in a worker thread; returns the event iterator at once.

        Closing the iterator (or leaving its ``with`` block) cancels the run.
        """
        if isinstance(messages, (str, Message)):
            raise TypeError(
                "run() takes a list of messages; use query(text) for a single user message"
            )
        run_options = get_impl_specific_options(RunOptions(), *options)
        root_input = AgentInput(messages=list(messages), enable_streaming=self.enable_streaming)
        scope = RunScope()
        if run_options.cancel_handle is not None:
            scope.attach(run_options.cancel_handle)
        frame = RunFrame(
            scope=scope,
            log=EventLog(),
            session=Session(run_options.session_values),
            root_input=root_input,
        )
        agent = self._agent

        def work(generator: EventSink) -> None:
            sink = _RunnerSink(generator, self, frame, run_options.checkpoint_id)
            agent._run_into(root_input, sink, options)

        return start_worker(work, frame, owns_scope=True)

    def resume(
        self,
        checkpoint_id: str,
        *options: AgentRunOption,
        targets: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[AgentEvent]:
        """Continue the run saved under ``checkpoint_id``; returns the event iterator.

        ``targets`` maps interrupt ids (``InterruptContext.id``) to resume data; without
        targets every interrupted point is resumed without data (tools that call
        ``interrupt()`` again interrupt again). The streaming mode is the saved run's. If the
        resumed run interrupts again, it is saved under the same id.

        Raises (at once, before a thread starts):
            ValueError: the Runner has no checkpoint store, or a target id is unknown.
            CheckpointNotFoundError: nothing is saved under ``checkpoint_id``.
            CheckpointError: the checkpoint is corrupt, foreign or fails verification.
            CheckpointBusyError: another resume of this checkpoint is running.
        """
        store = self.checkpoint_store
        if store is None:
            raise ValueError(
                "failed to resume: store is nil; create the Runner with checkpoint_store=..."
            )
        from agentkit.checkpoint import lease_for

        lease = lease_for(store, checkpoint_id)
        try:
            checkpoint = self._load(store, checkpoint_id)
            resume_state = _resume_state(checkpoint, targets)
        except BaseException:
            lease.release()
            raise
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
        )
        info = ResumeInfo(
            enable_streaming=checkpoint.enable_streaming,
            interrupt_info=InterruptInfo(data=checkpoint.interrupt_data),
        )
        agent = self._agent

        def work(generator: EventSink) -> None:
            sink = _RunnerSink(generator, self, frame, checkpoint_id)
            agent._resume_into(info, sink, options)

        return start_worker(
            work, frame, owns_scope=True, on_finish=lease.release
        )

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
        if not isinstance(checkpoint, Checkpoint):
            raise CheckpointError(
                "failed to load from checkpoint: failed to decode checkpoint: it holds a "
                f"{type(checkpoint).__name__}, not an agentkit run"
            )
        return checkpoint

    def _save(self, frame: RunFrame, checkpoint_id: str, node: SignalNode, data: Any) -> None:
        saved_history = [record.checkpointable() for record in frame.log.visible()]
        root_input = frame.root_input or AgentInput()
        checkpoint = Checkpoint(
            root_input=AgentInput(
                messages=list(root_input.messages), enable_streaming=root_input.enable_streaming
            ),
            session_values=frame.session.snapshot() if frame.session is not None else {},
            history=saved_history,
            enable_streaming=root_input.enable_streaming,
            points=flatten(node),
            interrupt_data=data,
        )
        from agentkit.checkpoint._binding import dumps_for_store

        payload = dumps_for_store(self.serializer, self.checkpoint_store, checkpoint_id, checkpoint)
        store = self.checkpoint_store
        if store is None:
            raise CheckpointError(
                "the run has a checkpoint id but the Runner has no checkpoint_store"
            )
        store.set(checkpoint_id, payload)


def _resume_state(checkpoint: Checkpoint, targets: Mapping[str, Any] | None) -> ResumeState:
    wanted = dict(targets or {})
    unknown = sorted(set(wanted) - set(checkpoint.points))
    if unknown:
        known = sorted(
            point_id for point_id, (address, _) in checkpoint.points.items() if address
        )
        raise ValueError(
            f"unknown interrupt id(s) {', '.join(map(repr, unknown))}; this checkpoint's "
            f"interrupt ids are: {', '.join(map(repr, known))}"
        )
    return ResumeState(points=dict(checkpoint.points), targets=wanted)


class _RunnerSink:
    """Saves a checkpoint before an interrupt event reaches the consumer."""

    __slots__ = ("checkpoint_id", "downstream", "frame", "interrupted", "runner")

    def __init__(
        self, downstream: EventSink, runner: Runner, frame: RunFrame, checkpoint_id: str | None
    ) -> None:
        self.downstream = downstream
        self.runner = runner
        self.frame = frame
        self.checkpoint_id = checkpoint_id
        self.interrupted = False

    def send(self, item: AgentEvent) -> bool:
        action = item.action
        if isinstance(item.err, AgentCancelledError):
            self._save_on_cancel(item.err)
            return self.downstream.send(item)
        if action is None or action.interrupted is None or action._signal is None:
            return self.downstream.send(item)
        if self.interrupted:
            return self.downstream.send(
                AgentEvent(
                    err=AgentKitError("multiple interrupt actions should not happen in Runner")
                )
            )
        self.interrupted = True
        node: SignalNode = action._signal
        event = AgentEvent(
            agent_name=item.agent_name,
            run_path=item.run_path,
            output=item.output,
            action=AgentAction(
                interrupted=InterruptInfo(data=action.interrupted.data, contexts=node.contexts()),
                _signal=node,
            ),
        )
        if self.checkpoint_id is not None:
            try:
                self.runner._save(self.frame, self.checkpoint_id, node, action.interrupted.data)
            except Exception as error:
                failure = CheckpointError(f"failed to save checkpoint: {error}")
                failure.__cause__ = error
                self.downstream.send(AgentEvent(err=failure))
        return self.downstream.send(event)

    def _save_on_cancel(self, error: AgentCancelledError) -> None:
        node = getattr(error, "_signal", None)
        if self.checkpoint_id is None or not isinstance(node, SignalNode):
            return
        try:
            self.runner._save(self.frame, self.checkpoint_id, node, None)
        except Exception as failure:
            wrapped = CheckpointError(f"failed to save checkpoint on cancel: {failure}")
            wrapped.__cause__ = failure
            self.downstream.send(AgentEvent(err=wrapped))

