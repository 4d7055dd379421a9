"""Run results: :class:`RunResult`, and :class:`RunIterator`, the event iterator that makes one.

The definitions behind :mod:`agentkit.results`, whose docstring documents them.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._ctrlc import ctrl_c_interrupt, stop_after_ctrl_c
from agentkit._events import AgentEvent, InterruptInfo
from agentkit._lazy import present
from agentkit._scope import RunScope
from agentkit._steering import STEERING_KEY, TAKEN_KEY, Steering
from agentkit.errors import AgentCancelledError, AgentKitRuntimeError, RunClosedError
from agentkit.iterators import AsyncIterator, _Pair, _wait_for_end
from agentkit.schema import Message, Role, TokenUsage

if TYPE_CHECKING:
    from agentkit._observe import UsageLedger

__all__ = ["RunIterator", "RunOutcome", "RunResult", "cost_of", "usage_of"]


@attrs.define
class RunOutcome:
    """What the framework learns about a run that its events do not say (framework-internal).

    Set by the Runner as the run ends, read by :meth:`.RunIterator.result`.

    Attributes:
        checkpoint_id: the id a checkpoint of this run was saved under (interrupted, cancelled
            or failed), ``None`` when none was saved.
        session_values: reads the run's final session values.
        usage: the run's token usage ledger (every model call of the run adds to it).
        unused_messages: the messages sent to the run that it never used (set as it ends).
    """

    checkpoint_id: str | None = None
    session_values: Callable[[], dict[str, Any]] | None = None
    usage: UsageLedger | None = None
    unused_messages: tuple[Message, ...] = ()


@attrs.define(eq=False)
class RunResult:
    """Everything a finished run produced; made by :meth:`.RunIterator.result`.

    Attributes:
        events: every event of the run, in order.
        final_message: the message of the last event that had one (the answer of a run that
            completed), or ``None``.
        text: ``final_message.content``, or ``""``.
        output: the structured output of the run (the last ``output.customized_output`` an
            event carried, e.g. the typed value of a ``ChatModelAgent(output_type=...)``), or
            ``None``.
        session_values: the run's session values when it ended.
        usage: the tokens the run's model calls used (the run's usage ledger, which callbacks,
            tracing and ``UsageTracker`` report too): retried calls and agents used as tools
            included.
        usage_by_agent: the same, per agent name.
        cost: what the run's model calls cost (the sum of their ``response_meta.cost``, which
            models given a :class:`~agentkit.ModelPricing` set), or ``None`` when no
            model had pricing. A resumed run reports what it used since the resume (its
            :class:`~agentkit.RunLimits` count the whole run).
        interrupt: the interrupt, when the run stopped for outside input (a paused budget:
            a :class:`~agentkit.LimitReached` in ``interrupt.contexts``).
        checkpoint_id: the id to pass to ``Runner.resume``, when a checkpoint of the run was
            saved (it interrupted, or stopped early with ``with_checkpoint_id``).
        error: the error the run failed with, or ``None`` (an interrupted run did not fail).
        unused_messages: the messages sent to the run (:meth:`.RunIterator.send`) that it
            accepted but ended before using: sent after its last model call. A run that
            stopped with a checkpoint keeps them there, and its resume uses them.
    """

    events: list[AgentEvent]
    final_message: Message | None
    output: Any
    session_values: dict[str, Any]
    usage: TokenUsage
    usage_by_agent: dict[str, TokenUsage]
    interrupt: InterruptInfo | None = None
    checkpoint_id: str | None = None
    error: BaseException | None = None
    cost: float | None = None
    unused_messages: tuple[Message, ...] = ()

    @property
    def text(self) -> str:
        """The final message's text, or ``""``."""
        return "" if self.final_message is None else self.final_message.content

    @property
    def interrupted(self) -> bool:
        """``True`` when the run stopped at an interrupt."""
        return self.interrupt is not None

    @property
    def status(self) -> str:
        """``"completed"``, ``"interrupted"``, ``"cancelled"`` or ``"failed"``.

        ``"cancelled"`` when ``error`` is an :class:`~agentkit.AgentCancelledError`: the run
        was cancelled (a :class:`~agentkit.CancelHandle`, or its reader closed the event
        iterator before the end: :class:`~agentkit.errors.RunClosedError`).
        """
        error = self.error
        if error is not None:
            return "cancelled" if isinstance(error, AgentCancelledError) else "failed"
        return "interrupted" if self.interrupt is not None else "completed"

    def _lines(self) -> list[tuple[str, str]]:
        rows = [("status", self.status)]
        if self.final_message is not None:
            rows.append(("text", self.text))
        if self.output is not None:
            rows.append(("output", repr(self.output)))
        if self.interrupt is not None:
            infos = [repr(context.info) for context in self.interrupt.contexts]
            rows.append(("interrupt", "; ".join(infos) or repr(self.interrupt.data)))
            rows.append(("interrupt ids", ", ".join(c.id for c in self.interrupt.contexts)))
        if self.checkpoint_id is not None:
            rows.append(("checkpoint_id", self.checkpoint_id))
        if self.error is not None:
            rows.append(("error", f"{type(self.error).__name__}: {self.error}"))
        rows.append(("events", str(len(self.events))))
        usage = self.usage
        rows.append(
            (
                "usage",
                f"{usage.prompt_tokens} prompt + {usage.completion_tokens} completion = "
                f"{usage.total_tokens} tokens",
            )
        )
        if self.cost is not None:
            rows.append(("cost", f"{self.cost:.6g}"))
        if self.session_values:
            rows.append(("session", ", ".join(sorted(map(str, self.session_values)))))
        return rows

    def __str__(self) -> str:
        return "\n".join(f"{name}: {value}" for name, value in self._lines())

    def __repr__(self) -> str:
        parts = [f"status={self.status!r}", f"text={_short(self.text)!r}"]
        if self.output is not None:
            parts.append(f"output={self.output!r}")
        if self.interrupt is not None:
            parts.append(f"checkpoint_id={self.checkpoint_id!r}")
        if self.error is not None:
            parts.append(f"error={self.error!r}")
        parts.append(f"events={len(self.events)}")
        parts.append(f"total_tokens={self.usage.total_tokens}")
        return f"RunResult({', '.join(parts)})"

    def _repr_html_(self) -> str:
        """A table for Jupyter; every value is HTML-escaped."""
        import html  # only notebooks render results as HTML

        cells = "".join(
            f"<tr><th style='text-align:left;vertical-align:top'>{html.escape(name)}</th>"
            f"<td style='text-align:left;white-space:pre-wrap'>{html.escape(value)}</td></tr>"
            for name, value in self._lines()
        )
        return f"<table class='agentkit-run-result'>{cells}</table>"


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def usage_of(events: Iterable[AgentEvent]) -> tuple[TokenUsage, dict[str, TokenUsage]]:
    """Sum the ``response_meta.usage`` of the assistant messages among ``events``.

    Returns the totals and the totals per agent name. Streams are read (from a copy).
    """
    counts: dict[str, list[int]] = {}  # per agent: prompt, completion, total
    for event in events:
        variant = event.output.message_output if event.output is not None else None
        if variant is None or variant.role is not Role.ASSISTANT:
            continue
        try:
            message = variant.get_message()
        except Exception:
            continue  # a broken stream reports no usage (the run's error says what broke)
        usage = message.response_meta.usage if message.response_meta is not None else None
        if usage is None:
            continue
        tally = counts.setdefault(event.agent_name, [0, 0, 0])
        tally[0] += usage.prompt_tokens
        tally[1] += usage.completion_tokens
        tally[2] += usage.total_tokens
    by_agent = {name: TokenUsage(*tally) for name, tally in counts.items()}
    total = TokenUsage(*(sum(column) for column in zip(*counts.values(), strict=True)))
    return total, by_agent


def cost_of(events: Iterable[AgentEvent]) -> float | None:
    """Sum the ``response_meta.cost`` of the assistant messages among ``events`` (``None``
    when none has a cost)."""
    total: float | None = None
    for event in events:
        variant = event.output.message_output if event.output is not None else None
        if variant is None or variant.role is not Role.ASSISTANT:
            continue
        try:
            message = variant.get_message()
        except Exception:
            continue  # a broken stream reports no cost (the run's error says what broke)
        cost = message.response_meta.cost if message.response_meta is not None else None
        if cost is not None:
            total = cost if total is None else total + cost
    return total


class RunIterator(AsyncIterator[AgentEvent]):
    """The event iterator of a run; :meth:`result` waits for its end and sums it up.

    It is an :class:`~agentkit.AsyncIterator` that also remembers the events it handed out,
    so ``result()`` after a partial (or full) loop still sees the whole run, streamed answers
    included: reading an event's ``message_stream`` in the loop takes nothing from
    ``result()``, which reads every message through :meth:`~agentkit.MessageVariant.get_message`.
    """

    __slots__ = (
        "_closed", "_ctrl_c_handled", "_lock", "_outcome", "_scope", "_seen", "_steering",
    )

    def __init__(
        self,
        pair: _Pair,
        outcome: RunOutcome | None = None,
        scope: RunScope | None = None,
        steering: Steering | None = None,
    ) -> None:
        super().__init__(pair)
        self._steering = steering  # the run's inbox, when this iterator owns a Runner's run
        self._seen: list[AgentEvent] = []
        self._lock = threading.Lock()
        self._outcome = outcome if outcome is not None else RunOutcome()
        self._scope = scope  # the run's own scope, when this iterator owns the run
        self._ctrl_c_handled = False  # a Ctrl-C cancelled the run: its note was made
        self._closed: RunClosedError | None = None  # the reader's close stopped the run

    def next(self) -> tuple[AgentEvent | None, bool]:
        """Block until the next event: ``(event, True)``, or ``(None, False)`` at the end."""
        try:
            item, ok = super().next()
        except KeyboardInterrupt as error:
            raise self._ctrl_c(error) from None
        if ok and item is not None:
            with self._lock:
                self._seen.append(item)
        return item, ok

    def __next__(self) -> AgentEvent:
        try:
            item = super().__next__()
        except KeyboardInterrupt as error:
            raise self._ctrl_c(error) from None
        with self._lock:
            self._seen.append(item)
        return item

    def send(self, message: str | Message) -> bool:
        """Add a user message to the run while it works, before its next model call.

        Safe to call from any thread. The ChatModelAgent that makes the run's next model call
        (in a nested run, the innermost one running: an agent used as a tool, while its tool
        call runs) adds every message sent so far to its conversation, after the last tool
        result (never between a tool call and its result), and emits each as an event (a
        user message, by that agent). Nothing is cancelled: a model call or tool in progress
        finishes first.

        The message is kept with the run: in its session values, so a checkpoint of a run
        that stops holds it (its resume uses it), and a durable run
        (``Runner(durability="step")`` with a checkpoint id) writes it to the store before
        ``send`` returns. A message the run accepted but never used (sent after its last
        model call) is in ``RunResult.unused_messages``, and logged as a warning.

        Returns:
            ``True`` once the message is queued; ``False`` when the run has ended.

        Raises:
            AgentKitTypeError: ``message`` is neither a ``str`` nor a :class:`Message`.
            AgentKitValueError: it is not a user message, is empty, or is larger than
                100,000 characters (and bytes of inline parts).
            AgentKitRuntimeError: 32 messages wait for the run's next model call already, or
                this iterator's run takes no messages (a run not started by a Runner).
            CheckpointError: the durable run could not write it (it was not queued).
        """
        steering = self._steering
        if steering is None:
            raise AgentKitRuntimeError(
                "send(): this iterator's run takes no messages; send to the iterator a Runner "
                "returned (run, query, resume)"
            )
        return steering.send(message)

    def _ctrl_c(self, error: KeyboardInterrupt) -> KeyboardInterrupt:
        """Ctrl-C while waiting for an event: cancel the run, wait for it (and its save).

        Returns what to raise: a ``KeyboardInterrupt`` saying what was saved. An iterator
        that does not own its run (an agent's inner run) passes ``error`` on: the run it is
        part of handles the Ctrl-C.
        """
        scope = self._scope
        if scope is None:
            return error
        self.close(timeout=0)  # cancels the run; its events are not read any more
        stopped = stop_after_ctrl_c(scope, lambda: _wait_for_end(self))
        self._ctrl_c_handled = True
        return ctrl_c_interrupt(self._outcome.checkpoint_id, stopped=stopped)

    def __enter__(self) -> RunIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the iterator (cancelling the run if it has not ended).

        A Ctrl-C that reached the block elsewhere than in this iterator (reading an event's
        ``message_stream``, the loop's body) is handled as one in the iterator: the run is
        cancelled and saved, and the ``KeyboardInterrupt`` says so.
        """
        error = exc_info[1]
        if isinstance(error, KeyboardInterrupt) and not self._ctrl_c_handled:
            handled = self._ctrl_c(error)
            if handled is not error:
                raise handled from None
        self.close()

    def close(self, timeout: float | None = None) -> None:
        """Stop reading: cancel the run and wait for it to end (as any event iterator's
        ``close``).

        A run the close stopped before its end is cancelled: :meth:`result` reports it so
        (``status == "cancelled"``, ``error`` a :class:`~agentkit.errors.RunClosedError`),
        not as the run that completed with the last message read.
        """
        early = not self._finished
        super().close(timeout)
        scope = self._scope
        if early and self._closed is None and scope is not None and scope.fired:
            with self._lock:
                read = len(self._seen)
            self._closed = RunClosedError(scope.mode, scope.escalated, events_read=read)

    def result(self, *, raise_errors: bool = True) -> RunResult:
        """Wait for the run to end and return its :class:`RunResult`.

        Reads the events not read yet (and every message, through ``get_message()``). Call it
        again to get the same result.

        Raises:
            Exception: with ``raise_errors`` (default), the error a failed run ended with, or
                the error of a message stream that broke (a Parallel branch that failed
                mid-stream): the original exception, with a note naming the agent and the run
                path. An interrupted run is not a failure.
        """
        read = super().__next__  # the rest, read here: one frame less per event
        seen, lock = self._seen, self._lock
        while True:
            try:
                item = read()
            except StopIteration:
                break
            except KeyboardInterrupt as error:
                raise self._ctrl_c(error) from None
            with lock:
                seen.append(item)
        with lock:
            events = list(seen)
        result = _summarize(events, self._outcome, self._closed)
        if raise_errors and result.error is not None:
            raise result.error
        return result


def _summarize(
    events: list[AgentEvent], outcome: RunOutcome, closed: RunClosedError | None = None
) -> RunResult:
    final: Message | None = None
    output: Any = None
    interrupt: InterruptInfo | None = None
    error: BaseException | None = None
    stream_error: BaseException | None = None
    for event in events:
        if event.output is not None:
            if event.output.customized_output is not None:
                output = event.output.customized_output
            if event.output.message_output is not None:
                try:
                    final = event.output.message_output.get_message()
                except Exception as broken:
                    if stream_error is None:
                        stream_error = broken
                        _note(broken, event)
        if event.action is not None and event.action.interrupted is not None:
            interrupt = event.action.interrupted
        if event.err is not None:
            error = event.err
            _note(error, event)
    if error is None:
        error = stream_error if stream_error is not None else closed
    if error is not None:
        interrupt = None
    ledger = outcome.usage
    if ledger is not None:
        usage, by_agent, cost = ledger.total, ledger.by_agent, ledger.cost
    else:
        usage, by_agent = usage_of(events)
        cost = cost_of(events)
    values = outcome.session_values() if outcome.session_values is not None else {}
    values.pop(STEERING_KEY, None)  # the run's inbox, not values of the user's
    values.pop(TAKEN_KEY, None)
    return RunResult(
        events=events,
        final_message=final,
        output=output,
        session_values=values,
        usage=usage,
        usage_by_agent=by_agent,
        interrupt=interrupt,
        checkpoint_id=outcome.checkpoint_id,
        error=error,
        cost=cost,
        unused_messages=outcome.unused_messages,
    )


def _note(error: BaseException, event: AgentEvent) -> None:
    """Say where the run failed, once (``result()`` may be called again)."""
    path = " > ".join(str(step) for step in event.run_path) or "(no run path)"
    note = f"agentkit: the run failed in agent {event.agent_name or '?'!r} (run path: {path})"
    if sys.version_info >= (3, 11) and note not in getattr(error, "__notes__", ()):
        error.add_note(note)

present(
    (
        RunResult,
    ),
    "agentkit",
)

present(
    (
        RunIterator,
        RunOutcome,
        cost_of,
        usage_of,
    ),
    "agentkit.results",
)
