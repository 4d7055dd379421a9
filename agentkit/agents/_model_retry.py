"""Model retry at the agent level: :class:`ModelRetryConfig` (``ChatModelAgent(model_retry=...)``).

HTTP-level retries (connection errors, 429, 5xx) belong to the model client
(``OpenAIChatModel(max_retries=...)``). This retries a model call whose *outcome* the agent
rejects: an error the client gave up on, or an answer ``should_retry`` refuses (empty, not
the JSON asked for, a refusal...). Waits between attempts use
:func:`~agentkit.cancellable_sleep`, so a cancel of the run ends them at once.

A retry can be decided in detail, as Eino's ``ShouldRetry`` does: ``decide(RetryContext)``
returns a :class:`RetryDecision` (retry or not, new input messages and extra options for
the next attempt, a replaced error, a chosen wait).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._runctx import cancellable_sleep
from agentkit.errors import (
    AgentCancelledError,
    AgentConfigError,
    AgentKitRuntimeError,
    RetryExhaustedError,
    RunLimitError,
    WillRetryError,
)
from agentkit.models._base import ModelOptions
from agentkit.schema import Message
from agentkit.streams import StreamReader, stream_from_iterator

if TYPE_CHECKING:
    from agentkit._middleware import ModelCallable

__all__ = [
    "ModelRetryConfig",
    "RetryContext",
    "RetryDecision",
    "StreamVerdicts",
    "default_backoff",
]

_log = logging.getLogger("agentkit")

ShouldRetry = Callable[[Message | None, BaseException | None], bool]
"""``should_retry(output, error) -> bool``: ``True`` to make the call again."""


def default_backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): 0.1 s doubling up to 10 s, plus
    up to 50 % random jitter (Eino's schedule)."""
    base = min(0.1 * 2 ** (attempt - 1), 10.0) if attempt <= 7 else 10.0
    return base * (1 + random.random() * 0.5)


def _retry_errors(output: Message | None, error: BaseException | None) -> bool:
    return error is not None


@attrs.frozen
class RetryContext:
    """What ``ModelRetryConfig(decide=...)`` is asked about: one model call that just ended.

    Eino's ``RetryContext``. ``output`` and ``error`` are as the call ended: a reply
    (``error`` is ``None``) or an exception (``output`` is ``None``); a streamed reply is
    read to its end first.

    Attributes:
        attempt: the retry this decision is about, 1-based (``1`` after the first call).
        input_messages: the messages this attempt sent.
        options: the model options this attempt used (``None``: none were set).
        output: the reply, or ``None``.
        error: the exception, or ``None``.
    """

    attempt: int
    input_messages: tuple[Message, ...]
    options: ModelOptions | None
    output: Message | None
    error: Exception | None


def _message_tuple(value: Sequence[Message] | None) -> tuple[Message, ...] | None:
    if value is None:
        return None
    given: object = value
    if not isinstance(given, (list, tuple)) or not all(isinstance(m, Message) for m in given):
        raise AgentConfigError(
            f"RetryDecision input_messages must be a list of Message (got {value!r})"
        )
    return tuple(value)


def _check_backoff(instance: object, attribute: object, value: Any) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0
    ):
        raise AgentConfigError(f"RetryDecision backoff must be seconds >= 0 (got {value!r})")


def _check_options(instance: object, attribute: object, value: Any) -> None:
    if value is not None and not isinstance(value, ModelOptions):
        raise AgentConfigError(
            f"RetryDecision options must be ModelOptions (got {value!r}); write "
            "options=ModelOptions(max_tokens=4096)"
        )


def _check_error(instance: object, attribute: object, value: Any) -> None:
    if value is not None and not isinstance(value, Exception):
        raise AgentConfigError(f"RetryDecision rewrite_error must be an exception (got {value!r})")


@attrs.frozen
class RetryDecision:
    """What to do with a model call that just ended: Eino's ``RetryDecision``.

    Returned by ``ModelRetryConfig(decide=...)``; ``None`` accepts the outcome as it is.

    Args:
        retry: make the call again (within ``max_retries``).
        input_messages: with ``retry``, the messages the next attempt sends instead (trimmed,
            compressed...); they hold for the rest of this call's retries, and the agent's
            conversation keeps its own messages (unless ``persist_input_messages``).
        persist_input_messages: with ``retry`` and ``input_messages``, the agent's
            conversation becomes ``input_messages`` (Eino's ``PersistModifiedInputMessages``):
            the whole list, its system message included, replaces what the agent had, so the
            reply of the retried call follows it, the later model calls of the turn see it,
            and what the run saves (a stop, an interrupt, a durable step) holds it. The
            messages are the model's whole input: put the system message first when the
            agent has one.
        options: with ``retry``, model options merged over the attempt's for the next one
            (``ModelOptions(max_tokens=8192)``); they add up over the call's retries.
        backoff: with ``retry``, the seconds to wait before the next attempt instead of the
            config's ``backoff``.
        rewrite_error: without ``retry``, the call fails with this exception instead of
            returning its reply or raising its own error.
        reject_reason: with ``retry``, any value saying why; a streamed run's rejected reply
            ends with a :class:`~agentkit.WillRetryError` whose ``reject_reason`` it is.
    """

    retry: bool = False
    input_messages: tuple[Message, ...] | None = attrs.field(
        default=None, converter=_message_tuple
    )
    options: ModelOptions | None = attrs.field(default=None, validator=_check_options)
    backoff: float | None = attrs.field(default=None, validator=_check_backoff)
    rewrite_error: Exception | None = attrs.field(default=None, validator=_check_error)
    reject_reason: Any = None
    persist_input_messages: bool = attrs.field(default=False, kw_only=True)

    @persist_input_messages.validator
    def _check_persist(self, attribute: object, value: object) -> None:
        if not isinstance(value, bool):
            raise AgentConfigError(
                f"RetryDecision persist_input_messages must be True or False (got {value!r})"
            )
        if value and self.input_messages is None:
            raise AgentConfigError(
                "RetryDecision(persist_input_messages=True) needs input_messages: the "
                "messages that replace the agent's conversation"
            )


Decide = Callable[[RetryContext], "RetryDecision | None"]
"""``decide(context) -> RetryDecision | None``: what to do after a model call."""


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@attrs.frozen
class ModelRetryConfig:
    """Retry a ChatModelAgent's model calls whose outcome is rejected.

    Args:
        max_retries: how many times a call may be made again (``0``: never; ``N``: up to
            ``N + 1`` calls).
        should_retry: ``should_retry(output, error) -> bool``, asked after every call, with the
            reply (``error`` is ``None``) or the exception (``output`` is ``None``). ``True``
            makes the call again. Default: retry every failed call, accept every reply.
        backoff: ``backoff(attempt) -> seconds`` to wait before retry ``attempt`` (1-based);
            default: 0.1 s doubling up to 10 s, plus up to 50 % random jitter.
        decide: ``decide(RetryContext) -> RetryDecision | None`` instead of ``should_retry``
            (not both), asked after every call: retry or not, with other input messages,
            extra options or another wait for the next attempt, or fail with another error.
            ``None`` accepts the outcome. Eino's ``ShouldRetry``::

                def decide(context: RetryContext) -> RetryDecision | None:
                    meta = context.output.response_meta if context.output else None
                    if meta is not None and meta.finish_reason == "length":
                        return RetryDecision(retry=True, options=ModelOptions(max_tokens=8192))
                    return RetryDecision(retry=context.error is not None)

    Cancellation and interrupts are never retried. When the retries are used up the call
    fails with :class:`~agentkit.RetryExhaustedError` (the last error as its cause).

    In a streamed run every attempt's stream is emitted as it arrives; the stream of an attempt
    that is retried ends with :class:`~agentkit.WillRetryError` (skip such events; the run's
    history does). In a non-streamed run only the accepted reply is emitted. Retries run
    inside ``before_model`` and outside ``wrap_model`` middleware: each attempt goes through
    the ``wrap_model`` layers.
    """

    max_retries: int = attrs.field(default=2)
    should_retry: ShouldRetry | None = None
    backoff: Callable[[int], float] = default_backoff
    decide: Decide | None = attrs.field(default=None, kw_only=True)

    @max_retries.validator
    def _check(self, attribute: object, value: object) -> None:
        if not _positive_int(value):
            raise AgentConfigError(f"max_retries must be an int >= 0 (got {value!r})")

    @decide.validator
    def _check_decide(self, attribute: object, value: object) -> None:
        if value is None:
            return
        if not callable(value):
            raise AgentConfigError(
                f"decide must be a function (RetryContext) -> RetryDecision | None (got {value!r})"
            )
        if self.should_retry is not None:
            raise AgentConfigError(
                "ModelRetryConfig takes should_retry or decide, not both: decide(context) "
                "sees the output and the error too (context.output, context.error)"
            )

    def wrap(
        self,
        call: ModelCallable,
        agent_name: str,
        streams: StreamVerdicts | None = None,
        persist: Callable[[list[Message]], None] | None = None,
    ) -> ModelCallable:
        """Return ``call`` made with retries (framework-internal).

        ``streams`` collects the streams a streamed run emitted during an attempt; each is
        told how the attempt ended. ``persist`` receives the input messages of a decision
        that persists them, when its retry is made (without it, they are not persisted).
        """
        decide = self.decide or _decide_with(self.should_retry or _retry_errors)
        hook = "decide" if self.decide is not None else "should_retry"
        max_retries = self.max_retries
        backoff = self.backoff

        def with_retries(messages: list[Message], options: ModelOptions | None) -> Message:
            attempt = 0
            while True:
                output: Message | None = None
                error: Exception | None = None
                try:
                    output = call(messages, options)
                except Exception as raised:
                    if isinstance(raised, (AgentCancelledError, RunLimitError)):
                        # A cancel, or a limit that refused the call: never retried.
                        _keep_all(streams)
                        raise
                    error = raised
                except BaseException:
                    _keep_all(streams)
                    raise
                pending = streams.take() if streams is not None else []
                rejection: WillRetryError | None = None
                decision = _ACCEPT
                try:
                    context = RetryContext(attempt + 1, tuple(messages), options, output, error)
                    decision = _checked(decide(context))
                    if decision.retry and attempt < max_retries:
                        reason = error or (
                            f"model output rejected by {hook} at attempt {attempt + 1}"
                        )
                        rejection = WillRetryError(
                            f"this reply is discarded, retrying: {reason}",
                            attempt=attempt + 1,
                            reject_reason=decision.reject_reason,
                        )
                finally:
                    for verdict in pending:
                        verdict.settle(rejection)
                if not decision.retry:
                    if decision.rewrite_error is not None:
                        raise decision.rewrite_error from error
                    if error is not None:
                        raise error
                    assert output is not None
                    return output
                if attempt >= max_retries:
                    last = error or RetryExhaustedError(
                        f"model output rejected by {hook} at attempt {attempt + 1}"
                    )
                    raise RetryExhaustedError(
                        f"agent {agent_name!r}: the model call failed {attempt + 1} times "
                        f"(model_retry allows {max_retries} retries); last error: {last}"
                    ) from last
                attempt += 1
                if decision.input_messages is not None:
                    messages = list(decision.input_messages)
                    if decision.persist_input_messages and persist is not None:
                        persist(list(messages))
                if decision.options is not None:
                    options = decision.options if options is None else options.merge(
                        decision.options
                    )
                wait = decision.backoff if decision.backoff is not None else backoff(attempt)
                _log.info(
                    "agentkit: agent %r retries its model call (retry %d of %d, in %.2f s): %s",
                    agent_name,
                    attempt,
                    max_retries,
                    wait,
                    error if error is not None else f"output rejected by {hook}",
                )
                cancellable_sleep(wait)

        return with_retries


_ACCEPT = RetryDecision()


def _decide_with(should_retry: ShouldRetry) -> Decide:
    """A ``decide`` that asks a ``should_retry(output, error) -> bool``."""

    def decide(context: RetryContext) -> RetryDecision:
        return RetryDecision(retry=bool(should_retry(context.output, context.error)))

    return decide


def _checked(decision: object) -> RetryDecision:
    if decision is None:
        return _ACCEPT
    if not isinstance(decision, RetryDecision):
        raise AgentConfigError(
            f"ModelRetryConfig decide returned {decision!r}; return a RetryDecision, or None "
            "to accept the outcome"
        )
    return decision


def _keep_all(streams: StreamVerdicts | None) -> None:
    """End the streams of an attempt that is not retried (cancelled) as they are."""
    if streams is not None:
        for verdict in streams.take():
            verdict.settle(None)


class _Verdict:
    """How one streamed attempt ended: kept (``None``) or rejected (a WillRetryError)."""

    __slots__ = ("_done", "_error")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._error: WillRetryError | None = None

    def settle(self, error: WillRetryError | None) -> None:
        self._error = error
        self._done.set()

    def chunks(self, reader: StreamReader[Message]) -> Iterator[Message]:
        yield from reader
        # The retry decision follows the end of the stream at once (the agent reads the
        # same stream and decides); the bound only guards against a bug.
        if not self._done.wait(60.0):
            raise AgentKitRuntimeError("no retry decision was made for a streamed model reply")
        if self._error is not None:
            raise self._error


class StreamVerdicts:
    """The streams of the current attempt of one run (framework-internal; one agent thread)."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[_Verdict] = []

    def guard(self, reader: StreamReader[Message]) -> StreamReader[Message]:
        """``reader``, ending with the attempt's WillRetryError if it is retried."""
        verdict = _Verdict()
        self._pending.append(verdict)
        return stream_from_iterator(verdict.chunks(reader), on_close=reader.close)

    def take(self) -> list[_Verdict]:
        """The streams of the attempt that just ended (to settle them)."""
        pending, self._pending = self._pending, []
        return pending
