"""Run options: the option type, the options the framework reads, and the ``with_*`` makers.

Framework-internal; the public side and its documentation are in :mod:`agentkit.options`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs

from agentkit._cancel import CancelHandle
from agentkit._steering import Steering
from agentkit.errors import AgentKitTypeError, AgentKitValueError

if TYPE_CHECKING:
    from agentkit._limits import RunLimits
    from agentkit.conversation._trim import HistoryTrimmer
    from agentkit.models._base import ModelOptions

__all__ = [
    "AgentRunOption",
    "HeldLease",
    "wrap_impl_specific_opt_fn",
    "get_impl_specific_options",
    "with_agent_tool_run_options",
    "with_cancel",
    "with_chat_model_options",
    "with_checkpoint_id",
    "with_conversation_id",
    "with_limits",
    "with_session_values",
    "with_skip_transfer_messages",
    "with_tool_options",
]

T = TypeVar("T")


@attrs.frozen
class AgentRunOption:
    """An option for one run, optionally limited to some agents with :meth:`designate_agent`."""

    target: type
    apply: Callable[[Any], Any] = attrs.field(repr=False)
    agent_names: tuple[str, ...] = ()

    def designate_agent(self, *names: str) -> AgentRunOption:
        """Return a copy of this option that only the named agents see (names accumulate)."""
        if not names:
            raise AgentKitValueError("designate_agent() needs at least one agent name")
        return attrs.evolve(self, agent_names=self.agent_names + tuple(names))

    def applies_to(self, agent_name: str) -> bool:
        """``True`` if the agent named ``agent_name`` should see this option."""
        return not self.agent_names or agent_name in self.agent_names


def wrap_impl_specific_opt_fn(options_type: type[T], fn: Callable[[T], Any]) -> AgentRunOption:
    """Return a run option that applies ``fn`` to an ``options_type`` instance.

    For custom agents: the agent reads its options with :func:`get_impl_specific_options`.
    ``fn`` may update its argument in place, or return a new instance to replace it.
    """
    if not isinstance(options_type, type):
        raise AgentKitTypeError(f"options_type must be a class (got {options_type!r})")
    return AgentRunOption(target=options_type, apply=fn)


def get_impl_specific_options(base: T, *options: AgentRunOption) -> T:
    """Apply, in order, every option made for exactly ``type(base)`` to ``base``; return it.

    Options for other types are ignored. Example, in a custom agent's ``run``::

        settings = get_impl_specific_options(EchoSettings(), *options)
    """
    kind = type(base)
    for option in options:
        if option.target is kind:
            result = option.apply(base)
            if result is not None:
                if type(result) is not kind:
                    raise AgentKitTypeError(
                        f"an option function for {kind.__name__} returned "
                        f"{type(result).__name__}; return None or a {kind.__name__}"
                    )
                base = result
    return base


def filter_options(
    options: Iterable[AgentRunOption], agent_name: str
) -> tuple[AgentRunOption, ...]:
    """Return the options the agent named ``agent_name`` sees."""
    return tuple(option for option in options if option.applies_to(agent_name))


# --- built-in options ------------------------------------------------------------------------


class HeldLease(Protocol):
    """What a run needs of a lease it is given (an ``agentkit.checkpoint.Lease``)."""

    @property
    def checkpoint_id(self) -> str:
        """The leased id."""
        ...

    @property
    def ttl(self) -> float:
        """Seconds the lease lasts unless refreshed."""
        ...

    def refresh(self, ttl: float | None = None) -> bool:
        """Extend the lease; ``False`` when it was lost."""
        ...

    def release(self) -> None:
        """Give the lease back."""
        ...


@attrs.define
class RunOptions:
    """Options read by the Runner and the flow wrapper (framework-internal)."""

    session_values: dict[str, Any] = attrs.Factory(dict)
    checkpoint_id: str | None = None
    checkpoint_lease: HeldLease | None = None  # a lease the caller holds on checkpoint_id
    checkpoint_save_input: bool = True  # a durable run saves its input before its agent runs
    skip_transfer_messages: bool = False
    cancel_handle: CancelHandle | None = None
    conversation_id: str | None = None
    conversation_trim: HistoryTrimmer | None = None
    limits: RunLimits | None = None
    limits_given: bool = False  # with_limits(None) runs without limits: not the same as unset
    turn_key: str | None = None
    steering: Steering | None = None  # where a run backend's send() reaches the run


@attrs.define
class ChatModelAgentOptions:
    """Options read by :class:`~agentkit.ChatModelAgent` (framework-internal)."""

    model_options: dict[str, Any] = attrs.Factory(dict)
    tool_options: dict[str, Any] = attrs.Factory(dict)
    agent_tool_options: dict[str, tuple[AgentRunOption, ...]] = attrs.Factory(dict)


def with_session_values(values: Mapping[str, Any]) -> AgentRunOption:
    """Add ``values`` to the session when the run starts (and when it is resumed)."""
    copied = dict(values)

    def apply(options: RunOptions) -> None:
        options.session_values.update(copied)

    return wrap_impl_specific_opt_fn(RunOptions, apply)


def with_checkpoint_id(
    checkpoint_id: str, *, lease: HeldLease | None = None, save_input: bool = True
) -> AgentRunOption:
    """Save the run under ``checkpoint_id``, so that it can be resumed.

    With ``Runner(durability="step")`` (the default) the run is saved as it goes (every
    finished model reply and tool call) and holds a lease on the id while it lives; with
    ``durability="stop"`` it is saved when it stops before completing (interrupted, cancelled,
    failed). See :class:`~agentkit.Runner`.

    ``lease``: a :class:`~agentkit.checkpoint.Lease` the caller holds on ``checkpoint_id``
    already (a worker that claimed the run before starting it). The run uses it instead of
    taking its own: it keeps it refreshed while it lives and stops if it is lost, but does not
    release it (the caller does).

    ``save_input=False`` (with ``durability="step"``): the run does not save its input before
    its agent runs; its first save is that of its first finished step (one write fewer per
    run). For a caller that keeps the input itself and starts the run again from it when the
    run stopped before it saved anything (no checkpoint under the id), as a task queue does
    with its task message; ``AgentQueue`` runs its tasks so. Without such a caller, a crash
    before the first step loses the run's input: leave it ``True``.
    """
    if not isinstance(checkpoint_id, str) or not checkpoint_id:
        raise AgentKitValueError(
            f"a checkpoint id must be a non-empty string (got {checkpoint_id!r})"
        )
    if lease is not None and lease.checkpoint_id != checkpoint_id:
        raise AgentKitValueError(
            f"the lease given with checkpoint id {checkpoint_id!r} is on another id "
            f"({lease.checkpoint_id!r}); give the lease taken on this id"
        )

    def apply(options: RunOptions) -> None:
        options.checkpoint_id = checkpoint_id
        options.checkpoint_lease = lease
        options.checkpoint_save_input = save_input

    return wrap_impl_specific_opt_fn(RunOptions, apply)


_MAX_TURN_KEY_LENGTH = 256

def with_conversation_id(
    conversation_id: str,
    *,
    trim: HistoryTrimmer | None = None,
    turn_key: str | None = None,
) -> AgentRunOption:
    """Make the run a turn of the conversation ``conversation_id`` (needs a conversation store).

    The run's input is the stored history plus its messages; when the run completes, its
    messages and what the agents said are appended to the conversation. An interrupted turn
    is appended when its resumed run completes (the checkpoint remembers the conversation).
    ``trim(history) -> history`` chooses what of the history the turn sees (see
    ``agentkit.conversation.keep_last_turns`` / ``keep_within_tokens``); the stored
    conversation keeps everything. One turn at a time per conversation: a second one raises
    :class:`~agentkit.ConversationBusyError` from ``run``/``query``/``invoke``.

    ``turn_key`` names the turn, for a client that may send it twice (a double click, a
    request retried after a timeout): a turn whose key the conversation already holds does
    not run again. Its run runs no agent and calls no model: its events are the messages
    the first turn's agents said, read back from the conversation (``result().text`` is the
    first turn's answer), and nothing is appended. A duplicate that comes while the first
    turn still runs raises :class:`~agentkit.ConversationBusyError` as any second turn does
    (retry it once that turn is over); the key is recorded when the turn's messages are
    appended, so a turn that interrupted is not recognised until its resumed run completes.
    The key is kept in the conversation, on the turn's first message
    (``message.extra["agentkit_turn"]``), and goes when the conversation is deleted.
    """
    if not isinstance(conversation_id, str) or not conversation_id:
        raise AgentKitValueError(
            f"a conversation id must be a non-empty string (got {conversation_id!r})"
        )
    if trim is not None and not callable(trim):
        raise AgentKitTypeError(f"trim must be a function of the history (got {trim!r})")
    if turn_key is not None and (
        not isinstance(turn_key, str) or not turn_key or len(turn_key) > _MAX_TURN_KEY_LENGTH
    ):
        raise AgentKitValueError(
            f"a turn key must be a string of 1 to {_MAX_TURN_KEY_LENGTH} characters, such as "
            f"the id of the request that brought the turn (got {turn_key!r})"
        )

    def apply(options: RunOptions) -> None:
        options.conversation_id = conversation_id
        options.conversation_trim = trim
        options.turn_key = turn_key

    return wrap_impl_specific_opt_fn(RunOptions, apply)


def with_limits(limits: RunLimits | None) -> AgentRunOption:
    """Limit what the run may use: model calls, tool calls, tokens, cost, run time.

    ``limits`` replaces the Runner's default (``Runner(limits=...)``) for this run; ``None``
    runs without limits. Given to :meth:`~agentkit.Runner.resume`, it replaces the limits the
    run was saved with (which a resume keeps otherwise): resume a run that paused on a
    :class:`~agentkit.LimitReached` with a larger allowance to let it go on::

        runner.resume("trip-1", with_limits(RunLimits(cost=2.00)))

    See :class:`~agentkit.RunLimits` for what is counted and when a run stops.

    Raises:
        TypeError: ``limits`` is not a ``RunLimits`` (or ``None``).
    """
    from agentkit._limits import RunLimits

    if limits is not None and not isinstance(limits, RunLimits):
        raise AgentKitTypeError(
            f"with_limits() takes a RunLimits, or None for no limits (got {limits!r}); "
            "write with_limits(RunLimits(model_calls=20, cost=1.0))"
        )

    def apply(options: RunOptions) -> None:
        options.limits = limits
        options.limits_given = True

    return wrap_impl_specific_opt_fn(RunOptions, apply)


def steer_through(steering: Steering) -> AgentRunOption:
    """Let the messages given to ``steering`` reach the run (framework-internal: how a run
    backend that starts the run with ``Runner.invoke`` keeps a way to send to it)."""

    def apply(options: RunOptions) -> None:
        options.steering = steering

    return wrap_impl_specific_opt_fn(RunOptions, apply)


def with_cancel(handle: CancelHandle) -> AgentRunOption:
    """Let ``handle`` cancel the run."""
    if not isinstance(handle, CancelHandle):
        raise AgentKitTypeError(f"with_cancel() needs a CancelHandle (got {handle!r})")

    def apply(options: RunOptions) -> None:
        options.cancel_handle = handle

    return wrap_impl_specific_opt_fn(RunOptions, apply)


def with_skip_transfer_messages() -> AgentRunOption:
    """Leave transfer calls and their results out of a transfer target's input."""

    def apply(options: RunOptions) -> None:
        options.skip_transfer_messages = True

    return wrap_impl_specific_opt_fn(RunOptions, apply)


def with_chat_model_options(**model_options: Any) -> AgentRunOption:
    """Pass ``ModelOptions`` fields (``temperature=0.2``, ...) to every model call of the run.

    Raises:
        ValueError: a key is not a ``ModelOptions`` field.
    """
    from agentkit.models._base import ModelOptions

    known = attrs.fields_dict(ModelOptions)
    unknown = sorted(set(model_options) - set(known))
    if unknown:
        raise AgentKitValueError(
            f"unknown model option(s) {', '.join(map(repr, unknown))}; "
            f"ModelOptions fields are: {', '.join(known)}"
        )
    copied = dict(model_options)

    def apply(options: ChatModelAgentOptions) -> None:
        options.model_options.update(copied)

    return wrap_impl_specific_opt_fn(ChatModelAgentOptions, apply)


def with_tool_options(**tool_options: Any) -> AgentRunOption:
    """Pass keyword options to every tool call; tools read them with ``get_tool_options()``."""
    copied = dict(tool_options)

    def apply(options: ChatModelAgentOptions) -> None:
        options.tool_options.update(copied)

    return wrap_impl_specific_opt_fn(ChatModelAgentOptions, apply)


def with_agent_tool_run_options(
    options: Mapping[str, Iterable[AgentRunOption]],
) -> AgentRunOption:
    """Give run options to the agents the agent calls through :class:`~agentkit.AgentTool`.

    ``options`` maps the name of an agent run as a tool (the :class:`~agentkit.AgentTool`'s
    name, or a deep agent's sub-agent started by its ``task`` tool) to the options its inner
    run gets, on top of the run's own: the inner agent sees every option of the run meant for it
    (those designated to no agent or to it by name), then these, so that a model option given
    here wins over the run's. Eino's ``WithAgentToolRunOptions``::

        runner.query(
            "plan the trip",
            with_agent_tool_run_options({"Researcher": [with_chat_model_options(temperature=0)]}),
        )

    Options given several times for one tool add up, in order. Like every option, this one
    may be designated to the calling agent (``.designate_agent("Boss")``).

    Raises:
        TypeError: ``options`` is not a mapping of tool names to lists of run options.
    """
    if not isinstance(options, Mapping):
        raise AgentKitTypeError(
            "with_agent_tool_run_options() takes a mapping of agent tool names to lists of "
            f"run options (got {options!r}); write "
            "with_agent_tool_run_options({'Researcher': [with_chat_model_options(temperature=0)]})"
        )
    copied: dict[str, tuple[AgentRunOption, ...]] = {}
    for name, given in options.items():
        listed = tuple(given)
        wrong = [option for option in listed if not isinstance(option, AgentRunOption)]
        if not isinstance(name, str) or wrong:
            raise AgentKitTypeError(
                "with_agent_tool_run_options() takes a mapping of agent tool names to lists of "
                f"run options (got {name!r}: {list(listed)!r}); make each option with a "
                "with_* function"
            )
        copied[name] = listed

    def apply(target: ChatModelAgentOptions) -> None:
        for name, listed in copied.items():
            target.agent_tool_options[name] = target.agent_tool_options.get(name, ()) + listed

    return wrap_impl_specific_opt_fn(ChatModelAgentOptions, apply)


# --- the options of one run, parsed once -------------------------------------------------------


@attrs.frozen(eq=False)
class AgentOptions:
    """The run's options as one agent sees them, parsed once per run and agent.

    An :class:`~agentkit.AgentRun` carries them as ``run.options``. Iterating gives the
    :class:`AgentRunOption` objects meant for this agent (those not designated to other agents),
    so ``get_impl_specific_options(MySettings(), *run.options)`` reads a custom agent's own options;
    :meth:`custom` does the same.

    Attributes:
        given: the options meant for this agent, in the order they were given.
        model_options: the ``with_chat_model_options`` values, merged (``None`` without any).
        tool_options: the ``with_tool_options`` values, merged.
        agent_tool_options: the ``with_agent_tool_run_options`` options, by agent tool name.
    """

    given: tuple[AgentRunOption, ...] = ()
    model_options: ModelOptions | None = None
    tool_options: Mapping[str, Any] = attrs.field(factory=dict)
    agent_tool_options: Mapping[str, tuple[AgentRunOption, ...]] = attrs.field(factory=dict)

    def __iter__(self) -> Iterator[AgentRunOption]:
        return iter(self.given)

    def custom(self, base: T) -> T:
        """``get_impl_specific_options(base, *self.given)``: the options for ``type(base)``."""
        return get_impl_specific_options(base, *self.given)


class RunOptionSet:
    """Every option of one run, parsed once when the run starts (framework-internal).

    ``run`` holds what the Runner and the flow read; :meth:`for_agent` what one agent sees,
    parsed the first time that agent asks and kept for the rest of the run.
    """

    __slots__ = ("_by_agent", "_lock", "given", "run")

    def __init__(self, given: Iterable[AgentRunOption] = ()) -> None:
        self.given = tuple(given)
        self.run = (
            get_impl_specific_options(RunOptions(), *self.given) if self.given else _NO_RUN_OPTIONS
        )
        self._by_agent: dict[str, AgentOptions] = {}
        self._lock = threading.Lock()

    def for_agent_tool(self, caller: str, agent_name: str) -> RunOptionSet:
        """The options of the inner run of the agent ``agent_name`` that ``caller`` ran as a
        tool: the run's own, then those ``with_agent_tool_run_options`` gives for it."""
        extra = self.for_agent(caller).agent_tool_options.get(agent_name, ())
        if not extra:
            return self
        return RunOptionSet((*self.given, *extra))

    def for_agent(self, agent_name: str) -> AgentOptions:
        """The options the agent named ``agent_name`` sees (parsed once per run)."""
        found = self._by_agent.get(agent_name)
        if found is not None:
            return found
        if not self.given:
            return _NO_AGENT_OPTIONS
        given = filter_options(self.given, agent_name)
        parsed = get_impl_specific_options(ChatModelAgentOptions(), *given)
        model_options = None
        if parsed.model_options:
            from agentkit.models._base import ModelOptions

            model_options = ModelOptions(**parsed.model_options)
        made = AgentOptions(
            given, model_options, dict(parsed.tool_options), dict(parsed.agent_tool_options)
        )
        with self._lock:
            return self._by_agent.setdefault(agent_name, made)


_NO_RUN_OPTIONS = RunOptions()
_NO_AGENT_OPTIONS = AgentOptions()
NO_OPTIONS = RunOptionSet()
"""The options of a run given none (shared: it parses nothing and keeps nothing)."""
