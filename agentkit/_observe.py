"""What observes a run: its callback handlers, and its usage and limits (framework-internal).

:class:`RunObservers` rides on the run's :class:`~agentkit._runctx.RunFrame`; the public side is
:mod:`agentkit.callbacks`.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from agentkit._limits import LIMIT_NAMES
from agentkit._options import AgentRunOption, get_impl_specific_options
from agentkit._persist import persisted
from agentkit.errors import RunLimitError
from agentkit.schema import TokenUsage

if TYPE_CHECKING:
    from agentkit._events import AgentEvent, AgentInput
    from agentkit._limits import ModelPricing, RunLimits
    from agentkit._scope import RunScope
    from agentkit.schema import Message

__all__ = [
    "CallbackOptions",
    "HANDLER_METHODS",
    "CallEstimate",
    "CallbackSet",
    "Reservation",
    "EventCopy",
    "RunInfo",
    "RunObservers",
    "RunUsage",
    "UsageLedger",
    "fire",
    "observe_agent",
]

_log = logging.getLogger("agentkit")

T = TypeVar("T")


@attrs.frozen
class RunInfo:
    """What a callback is about.

    Attributes:
        name: the agent's name (``component="Agent"``), the model's name (``"ChatModel"``),
            or the tool's name (``"Tool"``).
        type: the agent's type (``"ChatModel"``, ``"Sequential"``, ``"Parallel"``, ``"Loop"``,
            ``"Supervisor"``, ``"PlanExecute"``, or a custom agent's class name); for models and
            tools, the model's or tool's class name.
        component: ``"Agent"``, ``"ChatModel"`` or ``"Tool"``.
        run_path: the names of the run path of the agent concerned (for models and tools: of
            the agent that calls them), ending with that agent's name.
        agent_name: the agent concerned, or the agent calling the model or tool.
        invocation_id: the id of the agent's turn (of the calling agent's, for models and
            tools): the ``invocation_id`` of the events that turn emitted (Eino's
            ``InvocationID``; ``""`` where no turn is known).
    """

    name: str
    type: str
    component: str
    run_path: tuple[str, ...]
    agent_name: str = ""
    invocation_id: str = ""


@attrs.define
class CallbackOptions:
    """Handlers given with :func:`with_callbacks` (framework-internal)."""

    handlers: list[object] = attrs.Factory(list)


HANDLER_METHODS = (
    "on_agent_start",
    "on_agent_end",
    "on_model_start",
    "on_model_end",
    "on_tool_start",
    "on_tool_end",
    "on_limit_wait",
)


def _takes_events(handler: object) -> bool:
    """Whether ``handler.on_agent_end`` takes the agent's events as a third argument."""
    callback = getattr(handler, "on_agent_end", None)
    if not callable(callback):
        return False
    try:
        inspect.signature(callback).bind(None, None, ())
    except (TypeError, ValueError):  # two parameters (or no signature): the classic form
        return False
    return True


class CallbackSet:
    """The handlers of one run, filtered per agent where they fire (framework-internal)."""

    __slots__ = ("_cache", "_entries", "_lock", "_takers")

    def __init__(self, entries: Sequence[tuple[object, tuple[str, ...]]]) -> None:
        self._entries = tuple(entries)
        self._cache: dict[str, tuple[object, ...]] = {}
        self._lock = threading.Lock()
        # The handlers whose on_agent_end takes the agent's events: only agents they observe
        # keep a copy of their events (the others do no work per event).
        self._takers = frozenset(id(h) for h, _ in self._entries if _takes_events(h))

    def takes_events(self, handler: object) -> bool:
        """Whether ``handler`` (one of this set's) wants the agent's events at its end."""
        return id(handler) in self._takers

    def wants_events(self, agent_name: str) -> bool:
        """Whether a handler observing the agent ``agent_name`` wants its events."""
        takers = self._takers
        return bool(takers) and any(id(h) in takers for h in self.for_agent(agent_name))

    @classmethod
    def from_options(cls, options: Iterable[AgentRunOption]) -> CallbackSet | None:
        """The handlers given in ``options``, or ``None`` when there are none."""
        # Designation is kept with each handler and applied where the handler fires, so
        # that the handlers reach every agent of the run (workflow children, transfer
        # targets, agents used as tools) whatever options those are given.
        entries: list[tuple[object, tuple[str, ...]]] = []
        for option in options:
            if option.target is CallbackOptions:
                found = get_impl_specific_options(CallbackOptions(), option).handlers
                entries.extend((handler, option.agent_names) for handler in found)
        return cls(entries) if entries else None

    def for_agent(self, agent_name: str) -> tuple[object, ...]:
        """The handlers that observe the agent named ``agent_name``."""
        cached = self._cache.get(agent_name)
        if cached is None:
            cached = tuple(
                handler for handler, names in self._entries if not names or agent_name in names
            )
            with self._lock:
                self._cache[agent_name] = cached
        return cached


def fire(handlers: tuple[object, ...], method: str, *args: Any) -> None:
    """Call ``handler.method(*args)`` on each handler that has it; log what they raise."""
    for handler in handlers:
        callback = getattr(handler, method, None)
        if callback is None:
            continue
        try:
            callback(*args)
        except Exception:
            _log.exception(
                "callback handler %r raised in %s; the run goes on", handler, method
            )


class EventCopy:
    """A sink that keeps a copy of the events of one agent turn on their way downstream, for
    the ``on_agent_end`` handlers that take them (framework-internal)."""

    __slots__ = ("_downstream", "events")

    def __init__(self, downstream: Any) -> None:
        self._downstream = downstream
        self.events: list[AgentEvent] = []

    def send(self, item: AgentEvent) -> object:
        """Keep ``item`` and pass it on."""
        self.events.append(item)
        return self._downstream.send(item)


def observe_agent(
    observers: RunObservers,
    name: str,
    agent_type: Callable[[], str],
    run_path: tuple[str, ...],
    input: AgentInput,
    turn: Callable[[], T],
    own_error: Callable[[T], BaseException | None],
    invocation_id: str = "",
    copy: EventCopy | None = None,
) -> T:
    """Run ``turn()``, one turn of the agent ``name``, reported to the handlers that observe it.

    ``own_error(result)`` names the error event the agent sent, if any, for ``on_agent_end``;
    ``invocation_id`` is the turn's.
    ``copy`` holds the turn's events for the handlers whose ``on_agent_end`` takes them.
    """
    callbacks = observers.callbacks
    handlers = callbacks.for_agent(name) if callbacks is not None else ()
    if not handlers:
        return turn()
    info = RunInfo(name, agent_type(), "Agent", run_path, name, invocation_id)
    fire(handlers, "on_agent_start", info, input)
    try:
        result = turn()
    except BaseException as error:
        _fire_end(handlers, callbacks, info, error, copy)
        raise
    _fire_end(handlers, callbacks, info, own_error(result), copy)
    return result


def _fire_end(
    handlers: tuple[object, ...],
    callbacks: CallbackSet | None,
    info: RunInfo,
    error: BaseException | None,
    copy: EventCopy | None,
) -> None:
    if copy is None or callbacks is None:
        fire(handlers, "on_agent_end", info, error)
        return
    events = tuple(copy.events)
    for handler in handlers:
        if callbacks.takes_events(handler):
            fire((handler,), "on_agent_end", info, error, events)
        else:
            fire((handler,), "on_agent_end", info, error)


@persisted("agentkit.RunUsage")
@attrs.frozen
class RunUsage:
    """What a run used so far, by limit name (framework-internal).

    Saved in the run's checkpoint, so that a resumed run continues the count of its
    :class:`~agentkit.RunLimits`. ``model_calls`` and ``tool_calls`` are counted only while the
    run has limits; ``cost`` is ``None`` until a model call had a cost; ``wall_time`` is the
    seconds the run ran (the time it was paused does not count).
    """

    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None
    wall_time: float = 0.0

    def used(self, limit: str) -> float:
        """The amount used of the limit named ``limit`` (one of ``LIMIT_NAMES``)."""
        value: float | None = getattr(self, limit)
        return 0 if value is None else value


_NOTHING = RunUsage()
"""What a run that was not resumed carries (shared: frozen)."""

_MODEL_CALLS = "model_calls"
_TOOL_CALLS = "tool_calls"
_CONSUMED = ("input_tokens", "output_tokens", "total_tokens", "cost", "wall_time")
"""The limits every safe point checks (the call counts are checked at their own kind)."""

_NEXT = {_MODEL_CALLS: "model call", _TOOL_CALLS: "tool call"}

_BUDGETS = ("input_tokens", "output_tokens", "total_tokens", "cost")
"""The limits a model call spends from while it runs: what it reserves before it starts."""

_CHARS_PER_TOKEN = 4  # the usual rule of thumb for English text and JSON
_TOKENS_PER_MESSAGE = 4  # a message's role and framing


@attrs.frozen
class CallEstimate:
    """What a model call is expected to use, worked out from its request (framework-internal).

    ``output_tokens`` is ``None`` when the request does not bound the reply (no
    ``max_tokens``); ``pricing`` is the model's, when it has one; ``agent_name`` is the
    calling agent's, whose earlier calls tell what its calls use.
    """

    agent_name: str
    input_tokens: int
    output_tokens: int | None = None
    pricing: ModelPricing | None = None

    @classmethod
    def of(
        cls,
        agent_name: str,
        messages: Sequence[Message],
        max_tokens: int | None,
        pricing: object,
    ) -> CallEstimate:
        """The estimate of a call of ``agent_name`` sending ``messages``, its reply bounded
        by ``max_tokens``."""
        from agentkit._limits import ModelPricing

        chars = 0
        for message in messages:
            chars += len(message.content)
            for tool_call in message.tool_calls:
                chars += len(tool_call.function.name) + len(tool_call.function.arguments)
        tokens = chars // _CHARS_PER_TOKEN + _TOKENS_PER_MESSAGE * len(messages)
        return cls(
            agent_name=agent_name,
            input_tokens=tokens,
            output_tokens=max_tokens if max_tokens is not None and max_tokens > 0 else None,
            pricing=pricing if isinstance(pricing, ModelPricing) else None,
        )


@attrs.frozen(eq=False)
class Reservation:
    """What one running model call holds of the run's budgets (framework-internal).

    Made by :meth:`UsageLedger.begin`, given back by :meth:`UsageLedger.release` once the
    call's real usage is counted.
    """

    amounts: dict[str, float]


class _Waiter:
    """A call waiting for room in the budgets: woken by a settled call or by a cancel."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = threading.Event()

    def close(self) -> None:  # the run's scope calls it on an immediate cancel
        self.event.set()


class UsageLedger:
    """What a run used: tokens and cost per run and per agent, model and tool calls, run time;
    and the run's limits, checked before each model and tool call (thread-safe;
    framework-internal).

    Every model call of a run adds its ``response_meta.usage`` (and ``cost``) here, under the
    calling agent. A run with :class:`~agentkit.RunLimits` also counts its model and tool calls
    here (:meth:`begin`), before each one starts. ``carried`` is what the run used before it
    was resumed: the limits count it, the totals of this run (``total``, ``by_agent``,
    ``cost``, which ``RunResult`` reports) do not.
    """

    __slots__ = (
        "_budgets",
        "_by_agent",
        "_checks",
        "_cost",
        "_in_flight",
        "_largest",
        "_largest_by_agent",
        "_lock",
        "_reserved",
        "_running_tools",
        "_started",
        "_used",
        "_waiters",
        "carried",
        "limits",
        "pausable",
    )

    def __init__(
        self,
        limits: RunLimits | None = None,
        *,
        carried: RunUsage | None = None,
        pausable: bool = False,
    ) -> None:
        self._lock = threading.Lock()
        self._by_agent: dict[str, TokenUsage] = {}
        self._cost: float | None = None  # this run's, for RunResult.cost
        self._started = time.monotonic()
        self.limits = limits
        self.carried = carried = carried if carried is not None else _NOTHING
        self.pausable = pausable  # reaching a limit pauses the run (it has a checkpoint)
        # What the run used, its resumes before included, by limit name (not the run time).
        self._used: dict[str, float] = {
            name: carried.used(name) for name in LIMIT_NAMES if name != "wall_time"
        }
        # Tool calls counted (begin) that have not ended yet (end_tool_call).
        self._running_tools = 0
        # The limits checked before a model call and before a tool call, worked out once.
        self._checks: dict[str, list[tuple[str, float]]] = {}
        # The token and cost limits, which running model calls reserve from (see begin).
        self._budgets: list[tuple[str, float]] = []
        if limits is not None:
            for kind in (_MODEL_CALLS, _TOOL_CALLS):
                self._checks[kind] = [
                    (name, allowed)
                    for name, allowed in limits.set_limits()
                    if name == kind or name in _CONSUMED
                ]
            self._budgets = [
                (name, allowed) for name, allowed in limits.set_limits() if name in _BUDGETS
            ]
        self._reserved: dict[str, float] = dict.fromkeys(_BUDGETS, 0.0)
        self._in_flight = 0  # model calls holding a reservation
        # The most one answered call used, by budget: of any agent (calls that reported
        # usage), and of each agent (a call that reported none counts as using none).
        self._largest: dict[str, float] = {}
        self._largest_by_agent: dict[str, dict[str, float]] = {}
        self._waiters: set[_Waiter] = set()

    def add(self, agent_name: str, usage: TokenUsage, cost: float | None = None) -> None:
        """Count ``usage`` (and the ``cost`` of the call, if known) for ``agent_name``."""
        with self._lock:
            self._by_agent[agent_name] = _plus(self._by_agent.get(agent_name), usage)
            used = self._used
            used["input_tokens"] += usage.prompt_tokens
            used["output_tokens"] += usage.completion_tokens
            used["total_tokens"] += usage.total_tokens
            if cost is not None:
                self._cost = cost if self._cost is None else self._cost + cost
                used["cost"] += cost
            mine = self._largest_by_agent.setdefault(agent_name, {})
            for name, amount in (
                ("input_tokens", usage.prompt_tokens),
                ("output_tokens", usage.completion_tokens),
                ("total_tokens", usage.total_tokens),
                ("cost", cost or 0.0),
            ):
                for largest in (self._largest, mine):
                    if amount > largest.get(name, -1.0):
                        largest[name] = amount

    @property
    def total(self) -> TokenUsage:
        """The sum over every agent."""
        with self._lock:
            values = list(self._by_agent.values())
        total = TokenUsage()
        for usage in values:
            total = _plus(total, usage)
        return total

    @property
    def by_agent(self) -> dict[str, TokenUsage]:
        """A copy of the sums per agent name."""
        with self._lock:
            return dict(self._by_agent)

    @property
    def cost(self) -> float | None:
        """What this run's model calls cost, or ``None`` when none had a cost."""
        with self._lock:
            return self._cost

    def begin(
        self,
        kind: str,
        estimate: CallEstimate | None = None,
        scope: RunScope | None = None,
    ) -> Reservation | None:
        """Count a model call (``kind="model_calls"``) or tool call (``"tool_calls"``) that
        is about to start; raise :class:`~agentkit.RunLimitError` instead when a limit is
        reached: that call's own, or one of tokens, cost or time. Only for runs with limits.

        A model call with an ``estimate`` also reserves what it is expected to use of the
        token and cost limits, so that calls running at once cannot together spend past them:
        a call that does not fit in what is left beside the calls already running waits
        (woken when one of them ends, or by an immediate cancel of ``scope``) and goes alone
        when none is left running. The overshoot of a budget is so bounded by one call (and
        by how much calls use beyond their estimates), not by how many run at once. Give the
        reservation back with :meth:`release` once the call's usage is counted.

        Raises:
            RunLimitError: a limit is reached.
            AgentCancelledError: the run was cancelled immediately while the call waited.
        """
        checks = self._checks[kind]
        reserves = estimate is not None and bool(self._budgets)
        waiter: _Waiter | None = None
        try:
            while True:
                with self._lock:
                    used = self._used
                    for name, allowed in checks:
                        amount = self._wall_time() if name == "wall_time" else used[name]
                        if amount >= allowed:
                            assert self.limits is not None
                            raise _limit_error(name, amount, allowed, self.limits, kind)
                    reservation = None
                    if reserves:
                        assert estimate is not None
                        amounts = self._expected(estimate)
                        if self._in_flight and not self._fits(amounts):
                            if waiter is not None:
                                waiter.event.clear()  # a release from now on wakes it
                        else:
                            # Alone, a call that cannot be estimated yet reserves nothing
                            # but its place: calls that cannot be estimated wait for it.
                            reservation = Reservation(amounts or {})
                            for name, amount in reservation.amounts.items():
                                self._reserved[name] += amount
                            self._in_flight += 1
                    if not reserves or reservation is not None:
                        used[kind] += 1
                        if kind == _TOOL_CALLS:
                            self._running_tools += 1
                        return reservation
                if waiter is None:
                    # Register with the scope (an immediate cancel wakes the wait) and join
                    # the waiters, then look again before waiting: no wake-up is lost.
                    waiter = _Waiter()
                    if scope is not None:
                        scope.open(waiter)
                    with self._lock:
                        self._waiters.add(waiter)
                    continue
                waiter.event.wait()
                if scope is not None:
                    scope.check()
        finally:
            if waiter is not None:
                with self._lock:
                    self._waiters.discard(waiter)
                if scope is not None:
                    scope.closed(waiter)

    def release(self, reservation: Reservation, estimate: CallEstimate, answered: bool) -> None:
        """Give back what a model call reserved (:meth:`begin`), after its usage was added
        (:meth:`add`), and wake the calls waiting for room.

        ``answered``: the call returned a reply. A reply that reported no usage counts as a
        call of its agent that used none, so the agent's later calls are estimated from it
        rather than going one at a time.
        """
        with self._lock:
            for name, amount in reservation.amounts.items():
                self._reserved[name] -= amount
            self._in_flight -= 1
            if answered:
                mine = self._largest_by_agent.setdefault(estimate.agent_name, {})
                for name in _BUDGETS:
                    mine.setdefault(name, 0.0)
            waiters = list(self._waiters)
        for waiter in waiters:
            waiter.event.set()

    def _expected(self, estimate: CallEstimate) -> dict[str, float] | None:
        """What a call is expected to use of each budget (lock held), or ``None`` when that
        cannot be told yet (no call has answered, and its reply is unbounded, or its model has
        no pricing under a cost limit).

        A call is expected to use at least as much as the largest answered call of its agent,
        or, before its agent's first answer, of the run.
        """
        largest = self._largest_by_agent.get(estimate.agent_name) or self._largest
        output: float | None = estimate.output_tokens
        if output is None:
            output = largest.get("output_tokens")
        if output is None:
            return None
        inputs = max(float(estimate.input_tokens), largest.get("input_tokens", 0.0))
        output = max(output, 0.0)
        amounts = {
            "input_tokens": inputs,
            "output_tokens": output,
            "total_tokens": max(inputs + output, largest.get("total_tokens", 0.0)),
        }
        cost = largest.get("cost")
        if cost is None:
            if estimate.pricing is None and any(name == "cost" for name, _ in self._budgets):
                return None  # a model that prices itself: known once a call answered
            cost = 0.0
        if estimate.pricing is not None:
            cost = max(cost, estimate.pricing.cost(TokenUsage(int(inputs), int(output))))
        amounts["cost"] = cost
        return amounts

    def _fits(self, amounts: dict[str, float] | None) -> bool:
        """Whether a call expected to use ``amounts`` fits beside the running calls (lock
        held)."""
        if amounts is None:
            return False
        used, reserved = self._used, self._reserved
        return all(
            # (a hair of slack: three calls of 0.05 fill a budget of 0.15 in floating point)
            used[name] + reserved[name] + amounts[name] <= allowed * (1 + 1e-9)
            for name, allowed in self._budgets
        )

    def end_tool_call(self, ran: bool) -> None:
        """A tool call counted by :meth:`begin` ended: it ran (``ran``: it returned or failed),
        or it did not (it stopped to ask, was cancelled or rejected, or the run stopped
        around it), and then it is not counted: it is counted when it runs after the resume.

        Must be called before the call's result is reported, so that the step record of the
        result counts it (see :meth:`snapshot`).
        """
        with self._lock:
            self._running_tools -= 1
            if not ran:
                self._used[_TOOL_CALLS] -= 1

    def snapshot(self) -> RunUsage:
        """What the run used so far, its resumes before this one included.

        Tool calls still running are left out: this is what a run saves, and a call that
        had not ended when the run stopped (a crash, a cancel) is run again, or asked about,
        after the resume, where it is counted, once, if it runs.
        """
        with self._lock:
            used = dict(self._used)
            used[_TOOL_CALLS] -= self._running_tools
            cost = self._cost
        carried_cost = self.carried.cost
        if carried_cost is not None:
            cost = carried_cost if cost is None else carried_cost + cost
        return RunUsage(
            model_calls=int(used["model_calls"]),
            tool_calls=int(used["tool_calls"]),
            input_tokens=int(used["input_tokens"]),
            output_tokens=int(used["output_tokens"]),
            total_tokens=int(used["total_tokens"]),
            cost=cost,
            wall_time=self._wall_time(),
        )

    def _wall_time(self) -> float:
        return self.carried.wall_time + (time.monotonic() - self._started)


def _limit_error(
    limit: str, used: float, allowed: float, limits: RunLimits, kind: str
) -> RunLimitError:
    from agentkit._limits import _counted, _describe

    what = _describe(limit)
    verb = {
        "model_calls": "it made",
        "tool_calls": "it made",
        "wall_time": "it ran",
        "cost": "its model calls cost",
    }.get(limit, "its model calls used")
    return RunLimitError(
        f"the run reached its {what} limit ({limits!r}): {verb} {_counted(limit, used)}, so it "
        f"stopped before its next {_NEXT[kind]}. Give it a larger allowance "
        "(with_limits(RunLimits(...)) for one run, Runner(limits=...) for every run), or run "
        "it with a checkpoint id (with_checkpoint_id(...) and a checkpoint store): then a run "
        "that reaches a limit pauses, to be resumed with a larger one",
        limit=limit,
        used=used,
        allowed=allowed,
    )


def _plus(left: TokenUsage | None, right: TokenUsage) -> TokenUsage:
    if left is None:
        return TokenUsage(
            right.prompt_tokens,
            right.completion_tokens,
            right.total_tokens,
            right.cached_tokens,
            right.cache_write_tokens,
        )
    return TokenUsage(
        left.prompt_tokens + right.prompt_tokens,
        left.completion_tokens + right.completion_tokens,
        left.total_tokens + right.total_tokens,
        left.cached_tokens + right.cached_tokens,
        left.cache_write_tokens + right.cache_write_tokens,
    )


@attrs.frozen(eq=False)
class RunObservers:
    """What observes one run: its callback handlers and its usage ledger (framework-internal).

    Held by the run's :class:`~agentkit._runctx.RunFrame` (``frame.observers``), so every
    thread and nested agent of the run (agents used as tools included) reaches the same one.
    """

    callbacks: CallbackSet | None = None
    usage: UsageLedger = attrs.Factory(UsageLedger)

    @classmethod
    def from_options(
        cls, options: Iterable[AgentRunOption], usage: UsageLedger | None = None
    ) -> RunObservers:
        """The observers of a run started with ``options`` (``usage``: its ledger, when the
        run has limits or goes on from a checkpoint)."""
        callbacks = CallbackSet.from_options(options)
        if usage is None:
            return cls(callbacks=callbacks)
        return cls(callbacks=callbacks, usage=usage)
