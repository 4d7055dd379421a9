"""The run context: session values, run path, event history and interrupt address.

It lives in one :class:`contextvars.ContextVar` holding an immutable :class:`RunFrame`.
Moving to a nested position (an agent inside a flow, a tool call) sets a new frame for the
duration; starting a thread copies the context (``contextvars.copy_context().run``), so the
thread sees the same session and position.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import attrs

from agentkit._events import AgentAction, AgentEvent, AgentInput, MessageVariant, RunStep
from agentkit._observe import RunObservers, UsageLedger
from agentkit._options import NO_OPTIONS, RunOptionSet
from agentkit._persist import persisted
from agentkit._points import Journal, PointResume, ResumeState
from agentkit._progress import Progress
from agentkit._scope import RunScope
from agentkit._steering import Steering
from agentkit.errors import AgentKitError, AgentKitRuntimeError
from agentkit.schema import Message

__all__ = [
    "abort_on_cancel",
    "add_session_value",
    "add_session_values",
    "cancellable_sleep",
    "check_cancelled",
    "current_usage",
    "get_session_value",
    "get_session_values",
    "get_tool_options",
    "send_tool_gen_action",
    "tool_call_key",
]


class Session:
    """Session values shared by every agent of one run (thread-safe)."""

    __slots__ = ("_lock", "_values")

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, Any] = dict(values or {})

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            return self._values.get(key, default)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._values)

    def set(self, key: str, value: Any) -> None:
        with self._lock:
            self._values[key] = value

    def update(self, values: Mapping[str, Any]) -> None:
        with self._lock:
            self._values.update(values)

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._values)


_sequence = itertools.count()


@persisted("agentkit.RecordedError")
class RecordedError(AgentKitError):
    """An error kept in a checkpoint's history, as its type name and message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(type_name, message)
        self.type_name = type_name
        self.message = message

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}"


@persisted("agentkit.RecordedEvent")
@attrs.define(eq=False)
class RecordedEvent:
    """An agent's own event as kept in the run's history.

    The history holds the event's output as it is: an output never changes, and a streamed
    one is read through a reader of its own whenever the history needs the message.
    """

    seq: int
    agent_name: str
    run_path: tuple[RunStep, ...]
    variant: MessageVariant | None
    is_transfer: bool
    err: BaseException | None = None

    @classmethod
    def of(
        cls, event: AgentEvent, run_path: tuple[RunStep, ...] | None = None
    ) -> RecordedEvent:
        """The record of ``event``; ``run_path``: its run path, when the caller has it."""
        action = event.action
        return cls(
            seq=next(_sequence),
            agent_name=event.agent_name,
            run_path=tuple(event.run_path) if run_path is None else run_path,
            variant=event.output.message_output if event.output is not None else None,
            is_transfer=action is not None and action.transfer_to_agent is not None,
            err=event.err,
        )

    def message(self) -> Message | None:
        """The event's message (a stream is concatenated once, by its variant)."""
        return None if self.variant is None else self.variant.get_message()

    def checkpointable(self) -> RecordedEvent:
        """A copy a checkpoint can hold: a stream read into its message, the error kept as
        type and text (errors of any type may be recorded; a checkpoint holds only types its
        serializer accepts, and only their text is needed later). A stream that failed (or
        was cut by a cancel) keeps its error instead of a message."""
        variant = self.variant
        err = self.err
        if variant is not None and variant.is_streaming:
            try:
                message = variant.get_message()
            except Exception as error:
                variant, err = None, err or error
            else:
                variant = MessageVariant(False, message, None, variant.role, variant.tool_name)
        if err is not None and not isinstance(err, RecordedError):
            err = RecordedError(type(err).__name__, str(err))
        if variant is self.variant and err is self.err:
            return self
        return attrs.evolve(self, variant=variant, err=err)


class EventLog:
    """The events recorded in one run, with lanes for parallel branches.

    A lane sees the entries its parent had when the lane forked, plus its own. Lanes are
    committed to their parent in the order their entries were created.
    """

    __slots__ = ("_base", "_entries", "_lock", "_parent")

    def __init__(self, parent: EventLog | None = None) -> None:
        self._lock = threading.Lock()
        self._entries: list[RecordedEvent] = []
        self._parent = parent
        self._base = len(parent.visible()) if parent is not None else 0

    def append(self, entry: RecordedEvent) -> None:
        with self._lock:
            self._entries.append(entry)

    def own(self) -> list[RecordedEvent]:
        with self._lock:
            return list(self._entries)

    def visible(self) -> list[RecordedEvent]:
        """Entries this log's readers see, oldest first."""
        with self._lock:
            own = list(self._entries)
        if self._parent is None:
            return own
        return self._parent.visible()[: self._base] + own

    def fork(self) -> EventLog:
        return EventLog(self)

    def commit(self, lanes: list[EventLog]) -> None:
        """Append the entries of ``lanes`` (forked from this log) in creation order."""
        merged = sorted((entry for lane in lanes for entry in lane.own()), key=lambda e: e.seq)
        with self._lock:
            self._entries.extend(merged)

    def restore(self, entries: list[RecordedEvent]) -> None:
        with self._lock:
            self._entries.extend(entries)

    # --- what a durable run writes of it (see agentkit._progress) ---

    def size(self) -> int:
        """How many entries this log holds of its own."""
        with self._lock:
            return len(self._entries)

    def since(self, start: int) -> list[RecordedEvent]:
        """Its own entries from ``start`` on, as a checkpoint holds them."""
        with self._lock:
            entries = self._entries[start:]
        return [entry.checkpointable() for entry in entries]

    def chain(self) -> tuple[EventLog, ...]:
        """This log and the logs its entries are also recorded in (none: each its own)."""
        return (self,)


class RunKey:
    """A run's key, or a tool call's key, derived (SHA-256) from its run's key on first use.

    A run's own key is a random text kept in its checkpoint. A tool call's key (what
    :func:`tool_call_key` returns, and the key of an agent tool's inner run) is derived from
    the key of the run the call is in and where the call is: its address, its run path and its
    model round. Building a call's key only keeps those parts; the hash is computed the first
    time the key is asked for (most calls never ask), once. Two threads asking at once compute
    the same text.
    """

    __slots__ = ("_address", "_base", "_call_id", "_round", "_run_path", "_tool", "_value")

    def __init__(self, value: str) -> None:
        self._value: str | None = value
        self._base: RunKey | None = None
        self._address: tuple[str, ...] = ()
        self._tool = ""
        self._call_id = ""
        self._run_path: tuple[RunStep, ...] = ()
        self._round: int | None = None

    @classmethod
    def fresh(cls) -> RunKey:
        """A new run's key: 32 random hex digits."""
        return cls(uuid.uuid4().hex)

    @classmethod
    def of_call(
        cls,
        base: RunKey,
        address: tuple[str, ...],
        tool: str,
        call_id: str,
        run_path: tuple[RunStep, ...],
        round_left: int | None,
    ) -> RunKey:
        """The key of call ``call_id`` of ``tool``, made in the run (or call) keyed ``base`` at
        ``address`` and ``run_path``; ``round_left``: the model rounds the agent had left."""
        key = cls.__new__(cls)
        key._value = None
        key._base = base
        key._address = address
        key._tool = tool
        key._call_id = call_id
        key._run_path = run_path
        key._round = round_left
        return key

    @property
    def value(self) -> str:
        """The key as 32 hex digits (a call's is derived here, the first time)."""
        value = self._value
        if value is None:
            value = self._value = self._derive()
        return value

    def _derive(self) -> str:
        import hashlib  # only when a key is asked for: importing agentkit stays light

        assert self._base is not None
        place = (
            *self._address,
            f"tool:{self._tool}:{self._call_id}",
            "/".join(step.agent_name for step in self._run_path),
            "" if self._round is None else str(self._round),
        )
        digest = hashlib.sha256(self._base.value.encode("utf-8", "surrogatepass"))
        for part in place:
            encoded = part.encode("utf-8", "surrogatepass")
            digest.update(len(encoded).to_bytes(4, "big"))
            digest.update(encoded)
        return digest.hexdigest()[:32]


_NO_RUN_KEY = RunKey("")  # what a call made outside any run derives its key from


@attrs.define(eq=False)
class ToolCallFrame:
    """The tool call running in this context."""

    name: str
    call_id: str
    options: Mapping[str, Any]
    action: AgentAction | None = None
    resume: PointResume | None = None  # what a resumed run knows about this call
    agent_name: str = ""  # the calling agent
    history: list[Message] = attrs.Factory(list)  # the caller's conversation, ending in the call
    streaming: bool = False  # whether the caller streams
    forward: Callable[[AgentEvent], None] | None = None  # emit an event in the caller's stream
    emit: Callable[[AgentEvent], object] | None = None  # send_event() inside this call
    # What tool_call_key() is made of: the run's key (or the enclosing call's) and where this
    # call is; derived only when asked for (see RunKey).
    call_key: RunKey = attrs.field(
        default=attrs.Factory(
            lambda self: RunKey.of_call(_NO_RUN_KEY, (), self.name, self.call_id, (), None),
            takes_self=True,
        )
    )

    def key(self) -> str:
        """This call's idempotency key (see :func:`tool_call_key`)."""
        return self.call_key.value


@attrs.frozen(eq=False)
class RunFrame:
    """Where in which run the current code is (framework-internal)."""

    scope: RunScope
    log: EventLog
    journal: Journal = attrs.field(factory=Journal)
    session: Session | None = None
    root_input: AgentInput | None = None
    run_path: tuple[RunStep, ...] = ()
    address: tuple[str, ...] = ()
    tool: ToolCallFrame | None = None
    resume: ResumeState | None = None
    observers: RunObservers = attrs.field(factory=RunObservers)  # callbacks and usage
    options: RunOptionSet = NO_OPTIONS  # every option of the run, parsed once
    # What the run's components commit as they go (durability="step"; None otherwise).
    progress: Progress | None = None
    # The run's key, saved in its checkpoint (inside an agent tool: the calling tool call's
    # key): what tool_call_key() derives every call's key from.
    key: RunKey = attrs.field(factory=RunKey.fresh)
    # The guardrails the agents above hand down to every agent they run (transfer targets,
    # agents used as tools): a ChatModelAgent here checks these besides its own.
    guardrails: tuple[object, ...] = ()
    # The messages sent to the run (RunIterator.send), for the next model call to take.
    steering: Steering | None = None

    # The two moves made on every agent turn and tool call build the frame directly:
    # attrs.evolve would re-read the class's fields each time.

    def at_agent(self, step: RunStep) -> RunFrame:
        """This frame one agent deeper: ``step`` added to the run path and to the address."""
        return RunFrame(
            scope=self.scope,
            log=self.log,
            journal=self.journal,
            session=self.session,
            root_input=self.root_input,
            run_path=(*self.run_path, step),
            address=(*self.address, f"agent:{step.agent_name}"),
            tool=self.tool,
            resume=self.resume,
            observers=self.observers,
            options=self.options,
            progress=self.progress,
            key=self.key,
            guardrails=self.guardrails,
            steering=self.steering,
        )

    def at_tool(self, tool: ToolCallFrame) -> RunFrame:
        """This frame inside the tool call ``tool`` (address segment ``tool:<name>:<call id>``)."""
        return RunFrame(
            scope=self.scope,
            log=self.log,
            journal=self.journal,
            session=self.session,
            root_input=self.root_input,
            run_path=self.run_path,
            address=(*self.address, f"tool:{tool.name}:{tool.call_id}"),
            tool=tool,
            resume=self.resume,
            observers=self.observers,
            options=self.options,
            progress=self.progress,
            key=self.key,
            guardrails=self.guardrails,
            steering=self.steering,
        )

    def handing_down(self, guardrails: tuple[object, ...]) -> RunFrame:
        """This frame with ``guardrails`` added to those handed down (each once)."""
        added = tuple(g for g in guardrails if not any(g is had for had in self.guardrails))
        if not added:
            return self
        return attrs.evolve(self, guardrails=(*self.guardrails, *added))


_frame: contextvars.ContextVar[RunFrame | None] = contextvars.ContextVar(
    "agentkit_run_frame", default=None
)


def current_frame() -> RunFrame | None:
    """The frame of the run the caller is part of, or ``None`` outside a run."""
    return _frame.get()


class _FrameInUse:
    """The ``with`` block of :func:`use_frame` (a class: no generator per block)."""

    __slots__ = ("_frame", "_token")

    def __init__(self, frame: RunFrame) -> None:
        self._frame = frame
        self._token: contextvars.Token[RunFrame | None] | None = None

    def __enter__(self) -> RunFrame:
        self._token = _frame.set(self._frame)
        return self._frame

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _frame.reset(self._token)
            self._token = None


def use_frame(frame: RunFrame) -> AbstractContextManager[RunFrame]:
    """Make ``frame`` current for the block."""
    return _FrameInUse(frame)


def call_in_frame(frame: RunFrame, function: Callable[[Any, Any], None], a: Any, b: Any) -> None:
    """``function(a, b)`` with ``frame`` current (one call where a ``with`` block takes four:
    every agent turn that moves to another frame goes through here)."""
    if _frame.get() is frame:
        function(a, b)
        return
    token = _frame.set(frame)
    try:
        function(a, b)
    finally:
        _frame.reset(token)


# --- public accessors -----------------------------------------------------------------------


def _session_for_write(what: str) -> Session:
    frame = _frame.get()
    if frame is None or frame.session is None:
        raise AgentKitRuntimeError(
            f"{what}() needs an agent run: call it from an agent, a tool or a nested agent "
            "run by a Runner (outside a run there is no session to write to)"
        )
    return frame.session


def get_session_value(key: str, default: Any = None) -> Any:
    """Return the session value ``key`` of the current run, or ``default``."""
    frame = _frame.get()
    if frame is None or frame.session is None:
        return default
    return frame.session.get(key, default)


def get_session_values() -> dict[str, Any]:
    """Return a copy of the current run's session values (``{}`` outside a run)."""
    frame = _frame.get()
    if frame is None or frame.session is None:
        return {}
    return frame.session.snapshot()


def add_session_value(key: str, value: Any) -> None:
    """Set the session value ``key`` for the rest of the run (every agent sees it).

    Raises:
        RuntimeError: called outside an agent run.
    """
    _session_for_write("add_session_value").set(key, value)


def add_session_values(values: Mapping[str, Any]) -> None:
    """Set several session values at once.

    Raises:
        RuntimeError: called outside an agent run.
    """
    _session_for_write("add_session_values").update(values)


def get_tool_options() -> dict[str, Any]:
    """Inside a tool call: the options passed with ``with_tool_options`` (``{}`` otherwise)."""
    frame = _frame.get()
    if frame is None or frame.tool is None:
        return {}
    return dict(frame.tool.options)


def send_tool_gen_action(action: AgentAction) -> None:
    """Inside a tool call: attach ``action`` to this call's result event.

    Raises:
        RuntimeError: called outside a tool call of a ChatModelAgent.
    """
    frame = _frame.get()
    if frame is None or frame.tool is None:
        raise AgentKitRuntimeError(
            "send_tool_gen_action() works only inside a tool call of an agent run"
        )
    frame.tool.action = action


def tool_call_key() -> str:
    """Inside a tool call: a key that names this call, for downstream idempotency.

    The key is the same every time this call runs: when a run resumed after an interrupt, a
    cancel or a crash runs the call again, the key is the one the first attempt had. It is
    different for every other call (another call of the same tool, the same call id in a later
    model round, another run under the same checkpoint id). Pass it to services that accept
    an idempotency key, so that a call run twice has its effect once::

        @tool
        def pay(amount: int, to: str) -> str:
            '''Pay an amount.'''
            response = httpx.post(
                "https://payments.example/charges",
                json={"amount": amount, "to": to},
                headers={"Idempotency-Key": tool_call_key()},
            )
            return response.json()["status"]

    The key is 32 hex digits, derived (SHA-256) from a random key the run keeps in its
    checkpoint and where the call is: its address, run path and model round.

    Raises:
        RuntimeError: called outside a tool call of an agent run.
    """
    frame = _frame.get()
    if frame is None or frame.tool is None:
        raise AgentKitRuntimeError(
            "tool_call_key() works only inside a tool call of an agent run (it names the call "
            "running in this thread)"
        )
    return frame.tool.key()


def current_usage() -> UsageLedger | None:
    """The token usage ledger of the current run (``.total``, ``.by_agent``), or ``None``.

    Every model call the framework makes (a ChatModelAgent's, the plan-execute planner's)
    adds its usage to it once; ``RunResult.usage`` reads it, and the callbacks see the same
    calls. A custom agent that calls a model itself adds the reply's usage (and cost) here
    (``current_usage().add(agent_name, usage, cost)``): it then counts towards the run's token
    and cost limits too. Each run has one (a resumed run starts a new one, which carries what
    the run used before for its limits); outside a run there is none.
    """
    frame = _frame.get()
    if frame is None:
        return None
    return frame.observers.usage


# --- cancellation inside a run ------------------------------------------------------------------


def check_cancelled() -> None:
    """Raise :class:`~agentkit.AgentCancelledError` if the current run is being cancelled.

    Long-running tools and custom agents call it between steps of their own to stop
    cooperatively. It raises once an immediate cancel was requested (``CancelMode.IMMEDIATE``,
    closing the event iterator, or a safe-point cancel that escalated after its timeout);
    the safe-point modes let a running tool finish. Outside a run it does nothing.
    """
    frame = _frame.get()
    if frame is not None:
        frame.scope.check()


def cancellable_sleep(seconds: float) -> None:
    """Sleep ``seconds``, waking at once with :class:`~agentkit.AgentCancelledError` on a cancel.

    Use it instead of :func:`time.sleep` in tools and custom agents (polling, back-off), so
    that an immediate cancel of the run does not wait for the sleep to end. Outside a run it
    is a plain sleep.
    """
    frame = _frame.get()
    if frame is None:
        threading.Event().wait(seconds)
        return
    frame.scope.sleep(seconds)


class _AbortOnCancel:
    """The ``with`` block of :func:`abort_on_cancel`; ``close`` is what the cancel calls."""

    __slots__ = ("_abort", "_scope")

    def __init__(self, abort: Callable[[], object]) -> None:
        self._abort = abort
        self._scope: RunScope | None = None

    def __enter__(self) -> None:
        frame = _frame.get()
        if frame is not None:
            frame.scope.open(self)  # raises the cancel error, after abort(), when cancelling
            self._scope = frame.scope

    def __exit__(self, *exc_info: object) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            scope.closed(self)

    def close(self) -> None:
        self._abort()


def abort_on_cancel(abort: Callable[[], object]) -> AbstractContextManager[None]:
    """Call ``abort()`` if the current run is cancelled immediately while the block runs.

    For blocking calls agentkit cannot interrupt by itself (a socket read, a subprocess, a
    request to another service): ``abort`` runs in the cancelling thread and should make the
    blocked call return or raise (close the connection, kill the process). The block should
    then call :func:`check_cancelled` to turn the aborted call into the cancel error.
    ``abort`` must not block, and its exceptions are logged, never raised in the cancelling
    thread. When the run is already being cancelled, ``abort`` is called and
    :class:`~agentkit.AgentCancelledError` raised before the block runs. Outside a run it
    does nothing.

    Example::

        with abort_on_cancel(process.kill):
            out, _ = process.communicate()
        check_cancelled()
    """
    return _AbortOnCancel(abort)
