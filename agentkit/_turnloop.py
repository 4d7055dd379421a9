"""TurnLoop: a long-lived conversation that takes new input while a turn runs (Eino's TurnLoop).

The definitions behind :mod:`agentkit.turnloop`, whose docstring documents them.
"""

from __future__ import annotations

import enum
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import attrs

from agentkit._cancel import CancelHandle, CancelMode
from agentkit._checkpoints import (
    RUN_LEASE_TTL,
    Checkpoint,
    LeaseKeeper,
    load_checkpoint,
    save_checkpoint,
)
from agentkit._events import Agent, InterruptInfo
from agentkit._lazy import present
from agentkit._options import (
    AgentRunOption,
    RunOptionSet,
    with_cancel,
    with_checkpoint_id,
    with_conversation_id,
)
from agentkit._persist import persisted
from agentkit._results import RunIterator, RunResult
from agentkit._runner import Runner
from agentkit._spawn import RunPool
from agentkit.errors import (
    AgentCancelledError,
    AgentKitError,
    AgentKitRuntimeError,
    AgentKitTimeoutError,
    AgentKitTypeError,
    AgentKitValueError,
    CheckpointError,
)
from agentkit.schema import (
    AudioPart,
    FilePart,
    ImagePart,
    Message,
    Role,
    TextPart,
    _input_messages,
    tool_message,
    user_message,
)

if TYPE_CHECKING:
    from agentkit.checkpoint import CheckPointStore, PickleSerializer
    from agentkit.conversation import ConversationStore
    from agentkit.conversation._trim import HistoryTrimmer

__all__ = [
    "AgentFactory",
    "GenInput",
    "GenResume",
    "OnEvents",
    "SavedTurn",
    "TurnContext",
    "TurnInput",
    "TurnInterruptedError",
    "TurnLoop",
    "TurnLoopExit",
    "TurnResume",
    "default_input",
    "default_resume",
    "drain_events",
]

_log = logging.getLogger("agentkit")

T = TypeVar("T")

# The id a turn's run is saved under, in the turn's own in-memory store: the loop keeps what a
# stopped turn saved in its own checkpoint.
_TURN_CHECKPOINT_ID = "turn"

_NOT_RUN = "The call to {name} (id {call_id}) did not complete: a new message came in first."


class TurnInterruptedError(AgentKitError):
    """A turn of a :class:`TurnLoop` stopped for outside input, which ended the loop.

    Eino's ``InterruptError``: a tool called :func:`~agentkit.interrupt` (or asked for an
    approval). With a checkpoint store and id the loop saved a checkpoint; a new ``TurnLoop``
    with the same store and id resumes it, its ``gen_resume`` answering the interrupt points
    (``interrupt.contexts``: their ``id`` keys the resume data).

    Attributes:
        interrupt: the turn's :class:`~agentkit.InterruptInfo`.
    """

    def __init__(self, interrupt: InterruptInfo) -> None:
        count = len(interrupt.contexts)
        points = "; ".join(f"{context.id}: {context.info!r}" for context in interrupt.contexts)
        super().__init__(
            f"the turn was interrupted at {count} point(s) waiting for input"
            f"{': ' + points if points else ''}; resume the loop with a TurnLoop on the same "
            "checkpoint store and id whose gen_resume answers them"
        )
        self.interrupt = interrupt

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.interrupt,))


def _as_list(value: Sequence[Any] | None) -> list[Any] | None:
    return None if value is None else list(value)


def _as_items(value: Sequence[Any]) -> list[Any]:
    return list(value)


def _as_messages(value: Sequence[Message]) -> list[Message]:
    return list(value)


def _as_options(value: Sequence[AgentRunOption]) -> tuple[AgentRunOption, ...]:
    return tuple(value)


@attrs.frozen
class TurnInput(Generic[T]):
    """What ``gen_input`` decides for a turn: its new messages and which items it takes.

    Attributes:
        messages: the turn's new messages (the loop puts the conversation's history before
            them unless it was made with ``keep_history=False``).
        options: run options for the turn (not ``with_checkpoint_id``, ``with_cancel`` or
            ``with_conversation_id``: the loop sets those itself).
        consumed: the items the turn handles (``None``: every item ``gen_input`` was given);
            ``TurnContext.consumed`` and, if the turn stops, ``TurnLoopExit.interrupted_items``.
        remaining: the items kept for a later turn, before any pushed since. Items in neither
            list are dropped.
    """

    messages: list[Message] = attrs.field(converter=_as_messages)
    options: tuple[AgentRunOption, ...] = attrs.field(default=(), converter=_as_options)
    consumed: list[T] | None = attrs.field(default=None, converter=_as_list)
    remaining: list[T] = attrs.field(factory=list, converter=_as_items)


@attrs.frozen
class TurnResume(Generic[T]):
    """What ``gen_resume`` decides for the turn a checkpoint stopped in.

    Attributes:
        targets: resume data by interrupt id (``InterruptContext.id``), as for
            :meth:`Runner.resume <agentkit.Runner.resume>`; ``None`` resumes without data (an
            interrupt asks again; a cancelled or failed turn goes on from its last safe point).
        options: run options for the resumed turn (the same restrictions as the
            ``options`` of :class:`TurnInput`).
        consumed: the items the resumed turn handles (``None``: the checkpoint's
            ``interrupted_items``).
        remaining: the items kept for later turns (``None``: the checkpoint's
            ``unhandled_items`` then the items pushed before the loop started).
    """

    targets: Mapping[str, Any] | None = None
    options: tuple[AgentRunOption, ...] = attrs.field(default=(), converter=_as_options)
    consumed: list[T] | None = attrs.field(default=None, converter=_as_list)
    remaining: list[T] | None = attrs.field(default=None, converter=_as_list)


@attrs.frozen
class SavedTurn(Generic[T]):
    """The turn a loop's checkpoint stopped in, as ``gen_resume`` is given it.

    Attributes:
        interrupted_items: the items the stopped turn was handling.
        unhandled_items: the items that were waiting when the loop stopped.
        new_items: the items pushed into this loop before it started.
        interrupt: the interrupt to answer (its ``contexts`` name the ids ``targets`` keys),
            or ``None`` when the turn was stopped by a cancel or failed.
        reason: ``"interrupted"``, ``"cancelled"`` or ``"failed"``.
    """

    interrupted_items: list[T]
    unhandled_items: list[T]
    new_items: list[T]
    interrupt: InterruptInfo | None
    reason: str


@attrs.frozen
class TurnLoopExit(Generic[T]):
    """How a :class:`TurnLoop` ended; returned by :meth:`TurnLoop.wait`.

    Attributes:
        reason: ``None`` for a clean exit (a stop that let the running turn finish, or found
            no turn running); an :class:`~agentkit.AgentCancelledError` when a stop cancelled
            the running turn; a :class:`TurnInterruptedError` when a turn interrupted; else
            the error that ended the loop (one that ``gen_input``, ``gen_resume``, the agent
            factory or ``on_events`` raised, the failed turn's error under the default
            ``on_events``, or a :class:`~agentkit.CheckpointError` loading the checkpoint).
        unhandled_items: items pushed (``push`` returned ``True``) that no turn took.
        interrupted_items: the items of the turn that was stopped (by a stop, an interrupt, a
            failure), or ``[]``.
        stop_cause: the first non-empty ``cause`` given to :meth:`.TurnLoop.stop`.
        checkpoint_attempted: ``True`` when the loop tried to save a checkpoint as it ended.
        checkpoint_error: why that save failed, or ``None``.
    """

    reason: BaseException | None
    unhandled_items: list[T]
    interrupted_items: list[T]
    stop_cause: str = ""
    checkpoint_attempted: bool = False
    checkpoint_error: CheckpointError | None = None

    @property
    def interrupt(self) -> InterruptInfo | None:
        """The interrupt that ended the loop (``reason`` is a :class:`TurnInterruptedError`)."""
        reason = self.reason
        return reason.interrupt if isinstance(reason, TurnInterruptedError) else None


class TurnContext(Generic[T]):
    """One turn of a :class:`TurnLoop`, as ``on_events`` sees it.

    Attributes:
        loop: the loop (``on_events`` may ``push`` or ``stop`` it).
        consumed: the items the turn handles.
        resumed: ``True`` for the turn that resumes a checkpoint.
    """

    __slots__ = ("_preempted", "_stopped", "consumed", "loop", "resumed")

    def __init__(self, loop: TurnLoop[T], consumed: list[T], resumed: bool) -> None:
        self.loop = loop
        self.consumed = consumed
        self.resumed = resumed
        self._preempted = False
        self._stopped = False

    @property
    def preempted(self) -> bool:
        """``True`` once a ``push(..., preempt=True)`` asked this turn to stop."""
        return self._preempted

    @property
    def stopped(self) -> bool:
        """``True`` once a :meth:`.TurnLoop.stop` asked this turn to stop (not ``finish_turn``)."""
        return self._stopped

    @property
    def stop_cause(self) -> str:
        """The loop's stop cause (see :meth:`.TurnLoop.stop`), once this turn was stopped."""
        return self.loop._stop_cause() if self._stopped else ""

    def __repr__(self) -> str:
        flags = "".join(
            f", {name}=True" for name in ("resumed", "preempted", "stopped") if getattr(self, name)
        )
        return f"TurnContext(consumed={self.consumed!r}{flags})"


@persisted("agentkit.TurnLoopCheckpoint")
@attrs.define
class _LoopCheckpoint:
    """What a :class:`TurnLoop` saves when it ends with something left (framework-internal).

    ``turn`` is the stopped turn's run (``None`` when the loop stopped between turns); its
    ``conversation`` names the history the resumed turn is appended to.
    """

    unhandled_items: list[Any]
    interrupted_items: list[Any]
    turn: Checkpoint | None = None
    interrupt: InterruptInfo | None = None


GenInput = Callable[["TurnLoop[T]", list[T]], TurnInput[T]]
"""``gen_input(loop, items) -> TurnInput``: what a turn is made of (Eino's ``GenInput``)."""

GenResume = Callable[["TurnLoop[T]", SavedTurn[T]], TurnResume[T]]
"""``gen_resume(loop, saved) -> TurnResume``: how a saved turn goes on (Eino's ``GenResume``)."""

OnEvents = Callable[[TurnContext[T], RunIterator], object]
"""``on_events(turn, events)``: what is done with a turn's events (Eino's ``OnAgentEvents``)."""

AgentFactory = Callable[[list[T]], "Agent | Runner"]
"""``factory(consumed_items) -> Agent | Runner``: the agent of a turn (Eino's ``PrepareAgent``)."""


def default_input(loop: TurnLoop[Any], items: list[Any]) -> TurnInput[Any]:
    """The default ``gen_input``: every item is taken, each as a message of the turn.

    A ``str`` item becomes a user message; a :class:`~agentkit.Message` is used as it is; a
    part, or a list of ``str`` and parts, becomes one user message of those parts (see
    :func:`~agentkit.user_message`).

    Raises:
        TypeError: an item is none of these (give the loop a ``gen_input`` for such items).
    """
    messages = []
    for item in items:
        if isinstance(item, Message):
            messages.append(item)
        elif isinstance(item, str):
            messages.append(user_message(item))
        elif isinstance(item, (TextPart, ImagePart, FilePart, AudioPart)) or (
            isinstance(item, (list, tuple)) and not any(isinstance(i, Message) for i in item)
        ):
            messages.extend(_input_messages(item, "TurnLoop"))
        else:
            raise AgentKitTypeError(
                f"the TurnLoop cannot make a message of a {type(item).__name__} item "
                f"({item!r}); push str or Message items, or give TurnLoop a gen_input that "
                "turns your items into a TurnInput"
            )
    return TurnInput(messages)


def default_resume(loop: TurnLoop[Any], saved: SavedTurn[Any]) -> TurnResume[Any]:
    """The default ``gen_resume``: resume without data, the items kept as they were."""
    return TurnResume()


def drain_events(turn: TurnContext[Any], events: RunIterator) -> None:
    """The default ``on_events``: read the turn's events; a failed turn ends the loop.

    Raises:
        Exception: the error of the turn's error event (a cancel is the loop's business and
            is not raised).
    """
    for event in events:
        error = event.err
        if error is not None and not isinstance(error, AgentCancelledError):
            raise error


class _Phase(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    EXITED = "exited"


@attrs.define
class _StopState:
    """What :meth:`.TurnLoop.stop` asked (guarded by the loop's lock)."""

    committed: bool = False  # no new turn starts
    idle_for: float | None = None  # stop once idle that long (until committed)
    skip_checkpoint: bool = False
    cause: str = ""


@attrs.define(eq=False)
class _Turn(Generic[T]):
    """The turn being planned or run (guarded by the loop's lock)."""

    handle: CancelHandle
    context: TurnContext[T]


@attrs.frozen(eq=False)
class _PreemptRequest(Generic[T]):
    """What one ``push`` asked of the running turn."""

    preempt: bool | Callable[[TurnContext[T] | None], bool]
    safe_point: CancelMode
    timeout: float | None
    delay: float | None
    acknowledged: threading.Event | None

    def resolved(self) -> None:
        """The request was acted on, or there was nothing to act on."""
        if self.acknowledged is not None:
            self.acknowledged.set()


@attrs.define(eq=False)
class _Plan(Generic[T]):
    """A turn ready to run: what it runs and on which items."""

    consumed: list[T]
    remaining: list[T]
    options: tuple[AgentRunOption, ...]
    given: list[T]  # what the turn was planned from: put back whole if it does not run
    messages: list[Message] = attrs.Factory(list)
    resume: Checkpoint | None = None  # the saved run this turn resumes
    targets: Mapping[str, Any] | None = None
    saved: SavedTurn[T] | None = None  # what the loop's checkpoint said of that run


@attrs.define(eq=False)
class _Ended:
    """How a turn ended, as the loop acts on it."""

    result: RunResult
    saved: Checkpoint | None  # what the turn's run saved (stopped before it completed)
    callback_error: BaseException | None
    preempted: bool  # a push(preempt=True) asked the turn to stop
    stopped: bool  # a stop() asked the turn to stop


class TurnLoop(Generic[T]):
    """A long-lived conversation with an agent: items pushed at any time become turns.

    Build it, :meth:`push` items (before or after :meth:`start`), :meth:`stop` it, and
    :meth:`wait` for its :class:`TurnLoopExit`. As a context manager it starts on entry; on
    exit it handles every item pushed and ends (``stop(idle_for=0)``), or, when the block
    raised, stops the running turn at a safe point (``stop()``), then waits.

    Args:
        runner_factory_or_agent: the agent every turn runs (any :class:`~agentkit.Agent`),
            a :class:`~agentkit.Runner` whose agent and streaming mode every turn uses, or a
            function ``factory(consumed_items) -> Agent | Runner`` called for each turn (Eino's
            ``PrepareAgent``). Turns always run with the loop's checkpoint and conversation
            settings, not a given Runner's.
        gen_input: ``gen_input(loop, items) -> TurnInput``: what a turn is made of, given every
            item waiting (default :func:`default_input`: each item a message).
        gen_resume: ``gen_resume(loop, saved: SavedTurn) -> TurnResume``: how the turn a
            checkpoint stopped in is resumed, e.g. the answers to its interrupt (default: no
            data).
        on_events: ``on_events(turn: TurnContext, events: RunIterator)``: called in the loop's
            thread with each turn's events as they come (default :func:`drain_events`). What
            it leaves unread is read by the loop. If it raises, the turn is cancelled and the
            loop ends with that error.
        checkpoint_store: where the loop keeps what is left, under ``checkpoint_id``: every
            item it accepted and has not finished (saved before :meth:`push` returns), and
            when it ends a stopped or interrupted turn; a loop started with a store and an id
            that hold a checkpoint resumes it. The loop holds a lease on the id while it lives
            (a given Runner's ``lease_ttl``, else the Runner's default, 30 s): a loop whose
            process died frees the id that long after.
        checkpoint_id: the loop's checkpoint id (both or neither with a store).
        serializer: how the checkpoint is encoded (default ``PickleSerializer()``, as for a
            Runner); items must be types it accepts (``allowed_types``).
        enable_streaming: stream model output in the turns' events.
        keep_history: make the turns one conversation (default); ``False`` gives each turn
            only ``TurnInput.messages``.
        conversation_store: where the history is kept (default: in memory, for the loop's
            life). Give a durable one (``FileConversationStore``...) for a loop resumed in
            another process.
        conversation_id: the history's id in the store (default: the checkpoint id, else
            ``"turnloop"``).
        trim: ``trim(history) -> history``: what of the history a turn sees (see
            ``agentkit.conversation.keep_last_turns``); the store keeps everything.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: a checkpoint id without a store, or the reverse.
    """

    def __init__(
        self,
        runner_factory_or_agent: Agent | Runner | AgentFactory[T],
        *,
        gen_input: GenInput[T] | None = None,
        gen_resume: GenResume[T] | None = None,
        on_events: OnEvents[T] | None = None,
        checkpoint_store: CheckPointStore | None = None,
        checkpoint_id: str | None = None,
        serializer: PickleSerializer | None = None,
        enable_streaming: bool = False,
        keep_history: bool = True,
        conversation_store: ConversationStore | None = None,
        conversation_id: str | None = None,
        trim: HistoryTrimmer | None = None,
    ) -> None:
        self._target = _check_target(runner_factory_or_agent)
        for name, value in (
            ("gen_input", gen_input),
            ("gen_resume", gen_resume),
            ("on_events", on_events),
            ("trim", trim),
        ):
            if value is not None and not callable(value):
                raise AgentKitTypeError(f"TurnLoop {name} must be a function (got {value!r})")
        if (checkpoint_store is None) != (checkpoint_id is None):
            raise AgentKitValueError(
                "give TurnLoop both checkpoint_store and checkpoint_id (to save and resume the "
                "loop), or neither"
            )
        for name, text in (("checkpoint_id", checkpoint_id), ("conversation_id", conversation_id)):
            if text is not None and (not isinstance(text, str) or not text):
                raise AgentKitValueError(f"{name} must be a non-empty string (got {text!r})")
        if not keep_history and (conversation_store, conversation_id, trim) != (None, None, None):
            raise AgentKitValueError(
                "conversation_store, conversation_id and trim are about the loop's history: "
                "they need keep_history=True"
            )
        self._gen_input: GenInput[T] = gen_input or default_input
        self._gen_resume: GenResume[T] = gen_resume or default_resume
        self._on_events: OnEvents[T] = on_events or drain_events
        self._checkpoint_store = checkpoint_store
        self._checkpoint_id = checkpoint_id
        self._serializer = serializer
        self._enable_streaming = bool(enable_streaming)
        if keep_history and conversation_store is None:
            from agentkit.conversation import InMemoryConversationStore

            conversation_store = InMemoryConversationStore()
        self._conversation_store = conversation_store
        self._conversation_id = conversation_id or checkpoint_id or "turnloop"
        self._trim = trim
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # items, stops
        self._buffer: list[T] = []
        self._phase = _Phase.NEW
        self._stop = _StopState()
        self._turn: _Turn[T] | None = None
        self._done = threading.Event()
        self._exit: TurnLoopExit[T] | None = None
        self._pool: RunPool | None = None
        self._thread: threading.Thread | None = None
        # The loop thread's own state: written by it alone, read by others once _done is set.
        self._reason: BaseException | None = None
        self._interrupted: list[T] = []  # the stopped turn's items
        self._left: Checkpoint | None = None  # the stopped turn's run, kept in the checkpoint
        self._interrupt: InterruptInfo | None = None  # the stopped turn's interrupt
        self._claimed = False  # the loop holds the lease on its checkpoint id
        # With a store: the loop took its lease and loaded its checkpoint, so pushes are saved
        # (guarded by the lock; a push made between start() and then waits for it).
        self._ready = False
        # What the store must keep beside the waiting items (guarded by the lock): the items
        # out of the buffer that no turn finished (a turn being planned or run), and the
        # loaded turn until its resumed run ends.
        self._taken: list[T] = []
        self._held: _LoopCheckpoint | None = None
        # Saves of the loop's checkpoint, one at a time, each of the state when it is made
        # (taken under the lock while this one is held), so the last save is the last state.
        self._save_lock = threading.Lock()
        self._stored = False  # the store holds a checkpoint of this loop (save_lock)
        self._turn_serializer: PickleSerializer | None = None

    def __repr__(self) -> str:
        return (
            f"<TurnLoop {self._phase.value} checkpoint_id={self.checkpoint_id!r} "
            f"waiting={len(self._buffer)}>"
        )

    @property
    def checkpoint_store(self) -> CheckPointStore | None:
        """Where the loop saves what is left when it ends (``None``: nowhere)."""
        return self._checkpoint_store

    @property
    def checkpoint_id(self) -> str | None:
        """The id of the loop's checkpoint in :attr:`checkpoint_store`."""
        return self._checkpoint_id

    @property
    def enable_streaming(self) -> bool:
        """Whether the turns' model output is streamed (a given Runner's own mode counts)."""
        return self._enable_streaming

    @property
    def keep_history(self) -> bool:
        """Whether the turns are one conversation (their input starts with the history)."""
        return self._conversation_store is not None

    @property
    def conversation_store(self) -> ConversationStore | None:
        """Where the history is kept (``None`` without history)."""
        return self._conversation_store

    @property
    def conversation_id(self) -> str:
        """The history's id in :attr:`conversation_store`."""
        return self._conversation_id

    @property
    def serializer(self) -> PickleSerializer:
        """The checkpoint serializer (default ``PickleSerializer()``, made on first use)."""
        if self._serializer is None:
            from agentkit.checkpoint import PickleSerializer

            self._serializer = PickleSerializer()
        return self._serializer

    @property
    def done(self) -> bool:
        """``True`` once the loop ended (:meth:`wait` returns at once)."""
        return self._done.is_set()

    # --- the public controls ------------------------------------------------------------------

    def start(self) -> TurnLoop[T]:
        """Start the loop's thread (once; later calls do nothing) and return the loop.

        Items pushed before are handled first; with a checkpoint store and id, a saved
        checkpoint is resumed (or its waiting items taken) before anything else.
        """
        with self._lock:
            if self._phase is not _Phase.NEW:
                return self
            self._phase = _Phase.RUNNING
            self._pool = pool = RunPool("turnloop")
        pool.spawn(self._main, name="agentkit-turnloop")
        return self

    def push(
        self,
        item: T,
        *,
        preempt: bool | Callable[[TurnContext[T] | None], bool] = False,
        safe_point: CancelMode = CancelMode.ANY_SAFE_POINT,
        preempt_timeout: float | None = None,
        preempt_delay: float | None = None,
        acknowledged: threading.Event | None = None,
    ) -> bool:
        """Add ``item`` for a later turn; ``False`` when the loop stopped (the item is not taken).

        Thread-safe. Without a checkpoint store it never blocks. With one, the item is saved
        in the loop's checkpoint before ``push`` returns ``True`` (one store write), so it
        survives the process being killed; an item pushed before :meth:`start` is saved
        when the loop has started (taken its lease and loaded its checkpoint), and a push
        made while it starts waits for that. With ``preempt=True`` the running turn (or the one
        being planned, which did not see the item) is cancelled at ``safe_point``
        (``CancelMode.ANY_SAFE_POINT``: after a model call that asked for tools, or after a
        round of tool calls, whichever comes first; or one of them alone). The next turn
        starts at once with the items waiting; the preempted turn's messages stay in the
        history (a tool call it did not run is answered with a message saying so), its items
        are done. A turn that reaches no safe point (a final answer) completes normally;
        ``preempt_timeout`` (seconds) stops it at once after that long. The cancel is
        requested when ``push`` returns.

        Eino's push options:

        - ``preempt`` may be a function (Eino's ``WithPushStrategy``): called with the running
          turn's :class:`TurnContext` (``None`` between turns) when the loop takes the item,
          under the loop's lock, so the turn it sees is the one a preempt would stop; it
          returns whether to preempt (e.g. only a turn that handles items of lower
          priority). It must not call the loop.
        - ``preempt_delay`` (seconds, Eino's ``WithPreemptDelay``): the item is taken at once,
          the preempt requested that much later, from the turn that was running when the item
          was taken: a turn that ended meanwhile is not preempted, nor is a later one. The
          turn gets a grace period to finish on its own.
        - ``acknowledged`` (Eino's ack channel): an event set once the preempt request was
          resolved: the cancel requested from its turn, or nothing to preempt (no turn, the
          turn ended, the loop ended, ``push`` returned ``False``, no preempt asked).

        Raises:
            ValueError: ``safe_point`` is ``CancelMode.IMMEDIATE`` (a preempt waits for a safe
                point; give ``preempt_timeout`` to bound the wait), or a negative timeout.
            CheckpointError: the item could not be saved (the loop did not take it).
        """
        if not isinstance(safe_point, CancelMode) or safe_point is CancelMode.IMMEDIATE:
            raise AgentKitValueError(
                f"safe_point must be CancelMode.ANY_SAFE_POINT, AFTER_CHAT_MODEL or "
                f"AFTER_TOOL_CALLS (got {safe_point!r}); a preempt never stops a turn at once, "
                "give preempt_timeout to bound how long it waits for the safe point"
            )
        _check_seconds("preempt_timeout", preempt_timeout)
        _check_seconds("preempt_delay", preempt_delay)
        if not (isinstance(preempt, bool) or callable(preempt)):
            raise AgentKitTypeError(
                f"preempt is a bool or a function of the running turn (got {preempt!r})"
            )
        if acknowledged is not None and not isinstance(acknowledged, threading.Event):
            raise AgentKitTypeError(
                f"acknowledged is a threading.Event (got {type(acknowledged).__name__})"
            )
        request = _PreemptRequest(
            preempt, safe_point, preempt_timeout, preempt_delay, acknowledged
        )
        taken = False
        try:
            taken = self._push(item, request)
        finally:
            if not taken:
                request.resolved()
        return taken

    def _push(self, item: T, request: _PreemptRequest[T]) -> bool:
        store, checkpoint_id = self.checkpoint_store, self.checkpoint_id
        with self._lock:
            while self._phase is _Phase.RUNNING and store is not None and not self._ready:
                self._wake.wait()  # the loop's start is store calls; its end notifies too
            if self._phase is _Phase.EXITED or self._stop.committed:
                return False
            if store is None or checkpoint_id is None or self._phase is _Phase.NEW:
                self._take(item, request)
                return True
        with self._save_lock:
            with self._lock:
                if self._closed():
                    return False
                state = self._state_locked([item])
            self._write_state(store, checkpoint_id, state)
            with self._lock:
                if self._closed():
                    return False  # the loop's end saves what it has, without the item
                self._take(item, request)
        return True

    def _closed(self) -> bool:
        """Whether the loop takes no more items (holding the lock)."""
        return self._phase is _Phase.EXITED or self._stop.committed

    def _take(self, item: T, request: _PreemptRequest[T]) -> None:
        """Put ``item`` in the buffer and preempt the turn if asked (holding the lock)."""
        self._buffer.append(item)
        self._wake.notify_all()
        turn = self._turn
        wanted = request.preempt
        if callable(wanted):
            wanted = bool(wanted(None if turn is None else turn.context))
        if not wanted or turn is None:
            request.resolved()
            return
        pool = self._pool
        if request.delay and pool is not None:
            pool.spawn(self._preempt_later, turn, request, name="agentkit-turnloop-preempt")
            return
        self._preempt(turn, request)

    def _preempt(self, turn: _Turn[T], request: _PreemptRequest[T]) -> None:
        """Ask ``turn`` to stop for the items waiting (holding the lock)."""
        try:
            if turn.handle.cancel(request.safe_point, request.timeout):
                turn.context._preempted = True
        finally:
            request.resolved()

    def _preempt_later(self, turn: _Turn[T], request: _PreemptRequest[T]) -> None:
        """A delayed preempt: after its delay, stop ``turn`` if it still runs."""
        try:
            assert request.delay is not None
            if self._done.wait(request.delay):
                return  # the loop ended: nothing to preempt
            with self._lock:
                if self._turn is turn:
                    self._preempt(turn, request)
        finally:
            request.resolved()

    def stop(
        self,
        *,
        graceful: bool = True,
        timeout: float | None = None,
        finish_turn: bool = False,
        idle_for: float | None = None,
        skip_checkpoint: bool = False,
        cause: str = "",
    ) -> None:
        """Ask the loop to end; returns at once (:meth:`wait` for the end). Thread-safe.

        No turn starts after it. The running turn is cancelled at its next safe point
        (``graceful=True``; after ``timeout`` seconds without one, at once), or at once
        (``graceful=False``), and kept in the loop's checkpoint to be resumed; or it runs to
        its end (``finish_turn=True``: Eino's bare ``Stop()``). A loop waiting for items
        ends at once.

        ``idle_for`` (seconds) defers the stop until the loop has had no turn and no item for
        that long (each item starts the wait again; the running turn is not touched);
        ``idle_for=0`` ends the loop once every item pushed was handled. A later ``stop()``
        without it ends the loop anyway. ``skip_checkpoint=True`` saves nothing
        (and removes the checkpoint the loop resumed): for a loop you will not resume.
        ``cause`` is reported as ``TurnLoopExit.stop_cause`` (the first one given counts).
        Calling ``stop`` again may escalate (a graceful stop, then an immediate one).

        Raises:
            ValueError: a non-positive ``timeout``, a negative ``idle_for``, or a ``timeout``
                without a graceful cancel to bound.
        """
        _check_seconds("timeout", timeout, positive=True)
        _check_seconds("idle_for", idle_for)
        if timeout is not None and (not graceful or finish_turn):
            raise AgentKitValueError(
                "timeout bounds a graceful stop's wait for a safe point; it means nothing with "
                "graceful=False (the turn stops at once) or finish_turn=True (it runs to its end)"
            )
        with self._lock:
            if self._phase is _Phase.EXITED:
                return
            state = self._stop
            state.skip_checkpoint = state.skip_checkpoint or skip_checkpoint
            state.cause = state.cause or cause
            self._wake.notify_all()
            if idle_for is not None:
                if not state.committed and state.idle_for is None:
                    state.idle_for = idle_for
                return
            state.committed = True
            turn = self._turn
            if finish_turn or turn is None:
                return
            mode = CancelMode.ANY_SAFE_POINT if graceful else CancelMode.IMMEDIATE
            if turn.handle.cancel(mode, timeout):
                turn.context._stopped = True

    def wait(self, timeout: float | None = None) -> TurnLoopExit[T]:
        """Block until the loop ended and return how (the same object to every caller).

        Called before :meth:`start`, it waits for a start and then for the end.

        Raises:
            TimeoutError: the loop did not end within ``timeout`` seconds.
            RuntimeError: called from the loop's own thread (``on_events``, ``gen_input``...),
                where it could never return; call :meth:`stop` there instead.
        """
        if threading.current_thread() is self._thread:
            raise AgentKitRuntimeError(
                "TurnLoop.wait() was called from the loop's own thread (an on_events, "
                "gen_input, gen_resume or agent factory callback): it would wait for itself "
                "forever; call loop.stop() there and wait() from another thread"
            )
        if not self._done.wait(timeout):
            raise AgentKitTimeoutError(f"the TurnLoop did not end within {timeout} seconds")
        pool = self._pool
        if pool is not None:
            pool.close()  # joins the loop's thread
        exit_state = self._exit
        assert exit_state is not None
        return exit_state

    def __enter__(self) -> TurnLoop[T]:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: object,
    ) -> None:
        if exc_type is None:
            self.stop(idle_for=0)  # every item pushed in the block is handled
        else:
            self.stop()  # leaving on an error: the running turn stops at a safe point
        self.wait()

    def _stop_cause(self) -> str:
        with self._lock:
            return self._stop.cause

    # --- the loop's thread --------------------------------------------------------------------

    def _main(self) -> None:
        self._thread = threading.current_thread()
        keeper: LeaseKeeper | None = None
        try:
            keeper = self._take_lease()
            try:
                resume = self._load()
            except BaseException:
                # What is stored could not be read: it is left as it is (a serializer with the
                # right key or allowed types may read it), never overwritten or removed.
                self._claimed = False
                raise
            if self._claimed:
                with self._lock:
                    stopping = self._stop.committed  # then the loop's end saves them
                if not stopping:
                    self._save_state()  # the items pushed before start() are kept from now on
                with self._lock:
                    self._ready = True
                    self._wake.notify_all()
            self._run_turns(resume)
        except BaseException as error:  # the exit reports every failure
            if self._reason is None:
                self._reason = error
        finally:
            try:
                self._end()
            finally:
                if keeper is not None:
                    keeper.stop()
                self._done.set()
                pool = self._pool
                if pool is not None:
                    pool.close()  # this thread ends when _main returns

    def _take_lease(self) -> LeaseKeeper | None:
        """Claim the checkpoint id for the loop's life (another loop on it is refused)."""
        store, checkpoint_id = self.checkpoint_store, self.checkpoint_id
        if store is None or checkpoint_id is None:
            return None
        from agentkit.checkpoint import lease_for

        target = self._target
        ttl = target.lease_ttl if isinstance(target, Runner) else RUN_LEASE_TTL
        keeper = LeaseKeeper(lease_for(store, checkpoint_id, ttl))
        self._claimed = True
        return keeper

    def _load(self) -> tuple[SavedTurn[T], Checkpoint] | None:
        """Load the loop's checkpoint: its stopped turn to resume, or its waiting items."""
        store, checkpoint_id = self.checkpoint_store, self.checkpoint_id
        if store is None or checkpoint_id is None:
            return None
        data = _read(store, checkpoint_id)
        if data is None:
            return None
        from agentkit.checkpoint._binding import loads_for_store

        state = loads_for_store(self.serializer, store, checkpoint_id, data)
        if not isinstance(state, _LoopCheckpoint):
            raise CheckpointError(
                f"cannot resume the TurnLoop from checkpoint {checkpoint_id!r}: it holds a "
                f"{type(state).__name__}, not a TurnLoop's checkpoint (a Runner's checkpoint "
                "is resumed with Runner.resume; give the loop an id of its own)"
            )
        with self._save_lock:
            self._stored = True
        with self._lock:
            new_items, self._buffer = self._buffer, []
            if state.turn is None:
                self._buffer = [*state.unhandled_items, *new_items]
                return None
            self._held = _LoopCheckpoint(
                [], list(state.interrupted_items), state.turn, state.interrupt
            )
            self._taken = [*state.unhandled_items, *new_items]
        saved = SavedTurn(
            interrupted_items=list(state.interrupted_items),
            unhandled_items=list(state.unhandled_items),
            new_items=new_items,
            interrupt=state.interrupt,
            reason=state.turn.reason,
        )
        return saved, state.turn

    def _run_turns(self, resume: tuple[SavedTurn[T], Checkpoint] | None) -> None:
        while True:
            if resume is not None:
                plan = self._plan_resume(*resume)
                resume = None
            else:
                items = self._next_items()
                if items is None:
                    return
                plan = self._plan_input(items)
            if plan is None:
                return
            ended = self._run(plan)
            if ended is None or not self._after_turn(plan, ended):
                return

    def _next_items(self) -> list[T] | None:
        """Wait for items (or the stop); take them all and open the turn that plans them."""
        idle_until: float | None = None
        with self._lock:
            while True:
                if self._stop.committed:
                    return None
                if self._buffer:
                    items, self._buffer = self._buffer, []
                    self._taken = list(items)
                    self._turn = _Turn(CancelHandle(), TurnContext(self, [], False))
                    return items
                idle_for = self._stop.idle_for
                if idle_for is None:
                    self._wake.wait()
                    continue
                now = time.monotonic()
                if idle_until is None:
                    idle_until = now + idle_for
                if now >= idle_until:
                    self._stop.committed = True  # idle that long: the deferred stop
                    return None
                self._wake.wait(idle_until - now)

    def _plan_input(self, items: list[T]) -> _Plan[T] | None:
        """Ask ``gen_input`` what the turn is; ``None`` (items put back) when it cannot run."""
        try:
            made = self._gen_input(self, items)
            if not isinstance(made, TurnInput):
                raise AgentKitTypeError(
                    f"gen_input must return a TurnInput (got {type(made).__name__}: {made!r})"
                )
            _check_options(made.options, "TurnInput.options")
        except BaseException as error:
            self._put_back(items, error)
            return None
        consumed = list(items) if made.consumed is None else made.consumed
        return _Plan(consumed, made.remaining, made.options, items, messages=list(made.messages))

    def _plan_resume(self, saved: SavedTurn[T], run: Checkpoint) -> _Plan[T] | None:
        """Ask ``gen_resume`` how the saved turn goes on."""
        with self._lock:
            saved = attrs.evolve(saved, new_items=[*saved.new_items, *self._buffer])
            self._buffer = []
            self._taken = [*saved.unhandled_items, *saved.new_items]
            self._turn = _Turn(CancelHandle(), TurnContext(self, [], True))
        try:
            made = self._gen_resume(self, saved)
            if not isinstance(made, TurnResume):
                raise AgentKitTypeError(
                    f"gen_resume must return a TurnResume (got {type(made).__name__}: {made!r})"
                )
            _check_options(made.options, "TurnResume.options")
        except BaseException as error:
            self._keep_stopped(run, saved.interrupted_items, saved.interrupt)
            self._put_back([*saved.unhandled_items, *saved.new_items], error)
            return None
        consumed = saved.interrupted_items if made.consumed is None else made.consumed
        remaining = made.remaining
        if remaining is None:
            remaining = [*saved.unhandled_items, *saved.new_items]
        return _Plan(
            consumed,
            remaining,
            made.options,
            [*saved.unhandled_items, *saved.new_items],
            resume=run,
            targets=made.targets,
            saved=saved,
        )

    def _keep_stopped(
        self, run: Checkpoint, items: list[T], interrupt: InterruptInfo | None
    ) -> None:
        """Keep a stopped turn for the loop's checkpoint."""
        self._left, self._interrupted, self._interrupt = run, list(items), interrupt

    def _put_back(self, items: list[T], error: BaseException | None) -> None:
        """The planned turn does not run: its items wait again, in front."""
        with self._lock:
            self._buffer[:0] = items
            self._taken = []
            self._turn = None
        if error is not None:
            self._reason = error

    def _cancel_plan(self, plan: _Plan[T], error: BaseException | None) -> None:
        """The planned turn does not run: everything is as it was before it was planned."""
        if plan.resume is not None and plan.saved is not None:
            self._keep_stopped(plan.resume, plan.saved.interrupted_items, plan.saved.interrupt)
        self._put_back(list(plan.given), error)

    def _run(self, plan: _Plan[T]) -> _Ended | None:
        """Run the planned turn; ``None`` when it did not start (the loop ends)."""
        try:
            runner = self._runner_for(plan.consumed)
        except BaseException as error:
            self._cancel_plan(plan, error)
            return None
        with self._lock:
            turn = self._turn
            assert turn is not None
            stopping = self._stop.committed
            turn.context.consumed = list(plan.consumed)
        if stopping:
            self._cancel_plan(plan, None)
            return None
        try:
            events = self._start_run(runner, plan, turn.handle)
        except BaseException as error:
            self._cancel_plan(plan, error)
            return None
        with self._lock:
            self._buffer[:0] = plan.remaining
            # Kept until the turn ends: run again by the loop that takes over if this process
            # dies (a resumed turn's items are in the loaded turn).
            self._taken = [] if plan.resume is not None else list(plan.consumed)
        return self._handle_events(turn.context, events, runner)

    def _runner_for(self, consumed: list[T]) -> Runner:
        """The Runner of a turn: the agent (made by the factory), the turn's own store."""
        target = self._target
        if not isinstance(target, Runner) and not _is_agent(target):
            target = cast("AgentFactory[T]", target)(list(consumed))
            if not isinstance(target, Runner) and not _is_agent(target):
                raise AgentKitTypeError(
                    f"the TurnLoop's agent factory must return an Agent or a Runner (got "
                    f"{type(target).__name__}: {target!r})"
                )
        from agentkit.checkpoint import InMemoryCheckPointStore

        if isinstance(target, Runner):
            agent, streaming = target.agent, target.enable_streaming
        else:
            agent, streaming = cast("Agent", target), self.enable_streaming
        return Runner(
            agent,
            enable_streaming=streaming,
            checkpoint_store=InMemoryCheckPointStore(),
            serializer=self._serializer_for_turns(),
            conversation_store=self.conversation_store,
        )

    def _serializer_for_turns(self) -> PickleSerializer:
        """How a turn's run is saved in its own store: the loop's serializer when the loop
        persists or was given one (its allowed types count), else one with a key of its own
        (nothing leaves the process, so no key needs to be found or made)."""
        if self._serializer is not None or self.checkpoint_store is not None:
            return self.serializer
        if self._turn_serializer is None:
            from agentkit.checkpoint import PickleSerializer

            self._turn_serializer = PickleSerializer(secrets.token_bytes(32))
        return self._turn_serializer

    def _start_run(self, runner: Runner, plan: _Plan[T], handle: CancelHandle) -> RunIterator:
        options = (*plan.options, with_cancel(handle))
        if plan.resume is not None:
            store = runner.checkpoint_store
            assert store is not None
            save_checkpoint(store, runner.serializer, _TURN_CHECKPOINT_ID, plan.resume)
            return runner.resume(_TURN_CHECKPOINT_ID, *options, targets=plan.targets)
        options = (*options, with_checkpoint_id(_TURN_CHECKPOINT_ID))
        if self.keep_history:
            options = (*options, with_conversation_id(self.conversation_id, trim=self._trim))
        return runner.run(plan.messages, *options)

    def _handle_events(
        self, context: TurnContext[T], events: RunIterator, runner: Runner
    ) -> _Ended:
        """Give the turn's events to ``on_events``; read the rest; see how the turn ended."""
        callback_error: BaseException | None = None
        try:
            self._on_events(context, events)
        except BaseException as error:  # the loop ends with it; the turn is cancelled
            callback_error = error
            events.close()
        result = events.result(raise_errors=False)
        with self._lock:
            self._turn = None  # from here on, nothing changes the context's flags
        return _Ended(
            result,
            _stopped_run(runner),
            callback_error,
            preempted=context.preempted,
            stopped=context.stopped,
        )

    def _after_turn(self, plan: _Plan[T], ended: _Ended) -> bool:
        """Act on how the turn ended; ``False`` ends the loop."""
        error, interrupt = ended.result.error, ended.result.interrupt
        cancelled = isinstance(error, AgentCancelledError)
        preempted = cancelled and ended.preempted and not ended.stopped
        stopped = ended.callback_error is not None or interrupt is not None
        kept = ended.saved is not None and (stopped or (cancelled and not preempted))
        with self._lock:
            self._taken = []  # the turn ended: its items are done, or kept as the stopped turn
            if kept:  # what a push saves until the loop's end saves it
                self._held = _LoopCheckpoint([], list(plan.consumed), ended.saved, interrupt)
        if ended.saved is not None and kept:
            # Stopped for outside input, by a stop, or by a failure: kept to be resumed.
            self._keep_stopped(ended.saved, plan.consumed, interrupt)
            if ended.callback_error is not None:
                self._reason = ended.callback_error
            elif interrupt is not None:
                self._reason = TurnInterruptedError(interrupt)
            else:
                self._reason = error
            return False
        if ended.callback_error is not None:
            self._reason = ended.callback_error
            return False
        if preempted and ended.saved is not None:
            self._keep_preempted_work(ended.saved)
        if plan.resume is not None:
            with self._lock:
                self._held = None  # the resumed turn ran once: the store must not hold it
        self._save_state()
        return True

    def _keep_preempted_work(self, saved: Checkpoint) -> None:
        """Append what a preempted turn said to the history (its run did not complete)."""
        store, turn = self.conversation_store, saved.conversation
        if store is None or turn is None:
            return
        said = []
        for record in saved.history:
            if record.err is not None:
                continue
            try:
                message = record.message()
            except Exception:
                continue  # a stream cut by the cancel: nothing of it is kept
            if message is not None:
                said.append(message)
        lock = store.lock(turn.conversation_id)
        try:
            store.append(turn.conversation_id, [*turn.new_messages, *_answer_open_calls(said)])
        finally:
            lock.release()

    def _state_locked(self, pushed: Sequence[T] = ()) -> _LoopCheckpoint | None:
        """What the loop's checkpoint must hold now (holding the lock); ``None``: nothing."""
        items = [*self._taken, *self._buffer, *pushed]
        held = self._held
        if held is None:
            return _LoopCheckpoint(items, []) if items else None
        return _LoopCheckpoint(items, list(held.interrupted_items), held.turn, held.interrupt)

    def _save_state(self) -> None:
        """Save what the loop holds now (after it finished items): see :meth:`push`."""
        store, checkpoint_id = self.checkpoint_store, self.checkpoint_id
        if store is None or checkpoint_id is None or not self._claimed:
            return
        with self._save_lock:
            with self._lock:
                state = self._state_locked()
            self._write_state(store, checkpoint_id, state)

    def _write_state(
        self, store: CheckPointStore, checkpoint_id: str, state: _LoopCheckpoint | None
    ) -> None:
        """Save ``state`` (or remove the checkpoint for ``None``), holding the save lock."""
        if state is not None:
            self._save(store, checkpoint_id, state)
            self._stored = True
        elif self._stored:
            failure = _delete(store, checkpoint_id)
            if failure is not None:
                raise failure
            self._stored = False

    def _save(self, store: CheckPointStore, checkpoint_id: str, state: _LoopCheckpoint) -> None:
        from agentkit.checkpoint._binding import dumps_for_store

        try:
            data = dumps_for_store(self.serializer, store, checkpoint_id, state)
        except CheckpointError as error:
            raise CheckpointError(
                f"cannot save the TurnLoop's checkpoint {checkpoint_id!r}: {error} (pushed "
                "items must be types the serializer accepts: give it allowed_types=...)"
            ) from error
        try:
            store.set(checkpoint_id, data)
        except Exception as error:
            raise CheckpointError(
                f"cannot save the TurnLoop's checkpoint {checkpoint_id!r}: the store refused "
                f"it: {type(error).__name__}: {error}"
            ) from error

    def _end(self) -> None:
        """Save what is left (or remove the resumed checkpoint) and make the exit state."""
        with self._lock:
            self._phase = _Phase.EXITED
            unhandled, self._buffer = self._buffer, []
            stop = attrs.evolve(self._stop)
            self._turn = None
            self._wake.notify_all()
        attempted, failure = False, None
        store, checkpoint_id = self.checkpoint_store, self.checkpoint_id
        if store is not None and checkpoint_id is not None and self._claimed:
            left = self._left is not None or unhandled or self._interrupted
            with self._save_lock:  # after a push's save under way: this one is the last
                if left and not stop.skip_checkpoint:
                    attempted = True
                    state = _LoopCheckpoint(
                        list(unhandled), list(self._interrupted), self._left, self._interrupt
                    )
                    try:
                        self._save(store, checkpoint_id, state)
                    except CheckpointError as error:
                        failure = error
                        _log.warning("agentkit: %s", error)
                elif self._stored:
                    failure = _delete(store, checkpoint_id)
        self._exit = TurnLoopExit(
            reason=self._reason,
            unhandled_items=list(unhandled),
            interrupted_items=list(self._interrupted),
            stop_cause=stop.cause,
            checkpoint_attempted=attempted,
            checkpoint_error=failure,
        )


def _check_target(target: object) -> Any:
    if isinstance(target, Runner) or _is_agent(target) or callable(target):
        return target
    raise AgentKitTypeError(
        f"TurnLoop needs an agent, a Runner or a function returning one for each turn "
        f"(got {type(target).__name__}: {target!r})"
    )


def _is_agent(value: object) -> bool:
    return all(hasattr(value, name) for name in ("name", "description", "run"))


def _check_seconds(name: str, value: float | None, *, positive: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AgentKitTypeError(f"{name} must be a number of seconds (got {value!r})")
    if value < 0 or (positive and value == 0):
        raise AgentKitValueError(
            f"{name} must be {'a positive' if positive else 'a non-negative'} number of "
            f"seconds (got {value!r})"
        )


def _check_options(options: tuple[AgentRunOption, ...], where: str) -> None:
    for option in options:
        if not isinstance(option, AgentRunOption):
            raise AgentKitTypeError(f"{where} must hold run options (got {option!r})")
    run = RunOptionSet(options).run if options else None
    if run is None:
        return
    taken = [
        name
        for name, given in (
            ("with_checkpoint_id", run.checkpoint_id is not None),
            ("with_cancel", run.cancel_handle is not None),
            ("with_conversation_id", run.conversation_id is not None),
        )
        if given
    ]
    if taken:
        raise AgentKitValueError(
            f"{where} has {', '.join(taken)}: the TurnLoop sets these itself (its "
            "checkpoint_store/checkpoint_id, stop() and push(preempt=True), and its "
            "conversation_store/conversation_id); leave them out"
        )


def _read(store: CheckPointStore, checkpoint_id: str) -> bytes | None:
    try:
        return store.get(checkpoint_id)
    except Exception as error:
        raise CheckpointError(
            f"cannot load the TurnLoop's checkpoint {checkpoint_id!r}: the store failed to "
            f"read it: {type(error).__name__}: {error}"
        ) from error


def _stopped_run(runner: Runner) -> Checkpoint | None:
    """What the turn's run saved when it stopped before completing (``None`` if it completed)."""
    store = runner.checkpoint_store
    assert store is not None
    if store.get(_TURN_CHECKPOINT_ID) is None:
        return None
    from agentkit.errors import CheckpointConsumedError

    try:
        return load_checkpoint(store, runner.serializer, _TURN_CHECKPOINT_ID)
    except CheckpointConsumedError:
        return None  # a resumed run that completed


def _delete(store: CheckPointStore, checkpoint_id: str) -> CheckpointError | None:
    """Remove the checkpoint the loop resumed (nothing is left of it)."""
    try:
        store.delete(checkpoint_id)
    except Exception as error:
        failure = CheckpointError(
            f"cannot remove the TurnLoop's checkpoint {checkpoint_id!r}, which the loop "
            f"finished: {type(error).__name__}: {error}; delete it, or a new loop resumes it"
        )
        _log.warning("agentkit: %s", failure)
        return failure
    return None


def _answer_open_calls(messages: list[Message]) -> list[Message]:
    """``messages`` with a tool message for every tool call that got no result."""
    answered = {message.tool_call_id for message in messages if message.role is Role.TOOL}
    patched: list[Message] = []
    for message in messages:
        patched.append(message)
        if message.role is Role.ASSISTANT:
            patched.extend(
                tool_message(
                    _NOT_RUN.format(name=call.function.name, call_id=call.id),
                    call.id,
                    call.function.name,
                )
                for call in message.tool_calls
                if call.id not in answered
            )
    return patched

present(
    (
        TurnLoop,
        TurnLoopExit,
    ),
    "agentkit",
)

present(
    (
        AgentFactory,
        GenInput,
        GenResume,
        OnEvents,
        SavedTurn,
        TurnContext,
        TurnInput,
        TurnInterruptedError,
        TurnResume,
        default_input,
        default_resume,
        drain_events,
    ),
    "agentkit.turnloop",
)
