"""Model retry at the agent level: :class:`ModelRetryConfig` (``ChatModelAgent(model_retry=...)``).

HTTP-level retries (connection errors, 429, 5xx) belong to the model client
(``OpenAIChatModel(max_retries=...)``). This retries a model call whose *outcome* the agent
rejects: an error the client gave up on, or an answer ``should_retry`` refuses (empty, not
the JSON asked for, a refusal...). Waits between attempts use
:func:`~agentkit.cancellable_sleep`, so a cancel of the run ends them at once.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

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
from agentkit.schema import Message
from agentkit.streams import StreamReader, stream_from_iterator

if TYPE_CHECKING:
    from agentkit.middleware import ModelCallable
    from agentkit.models.base import ModelOptions

__all__ = ["ModelRetryConfig", "StreamVerdicts", "default_backoff"]

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

    @max_retries.validator
    def _check(self, attribute: object, value: object) -> None:
        if not _positive_int(value):
            raise AgentConfigError(f"max_retries must be an int >= 0 (got {value!r})")

    def wrap(
        self, call: ModelCallable, agent_name: str, streams: StreamVerdicts | None = None
    ) -> ModelCallable:
        """Return ``call`` made with retries (framework-internal).

        ``streams`` collects the streams a streamed run emitted during an attempt; each is
        told how the attempt ended.
        """
        should_retry = self.should_retry or _retry_errors
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
                try:
                    retry = should_retry(output, error)
                    if retry and attempt < max_retries:
                        reason = error or (
                            f"model output rejected by should_retry at attempt {attempt + 1}"
                        )
                        rejection = WillRetryError(f"this reply is discarded, retrying: {reason}")
                finally:
                    for verdict in pending:
                        verdict.settle(rejection)
                if not retry:
                    if error is not None:
                        raise error
                    assert output is not None
                    return output
                if attempt >= max_retries:
                    last = error or RetryExhaustedError(
                        f"model output rejected by should_retry at attempt {attempt + 1}"
                    )
                    raise RetryExhaustedError(
                        f"agent {agent_name!r}: the model call failed {attempt + 1} times "
                        f"(model_retry allows {max_retries} retries); last error: {last}"
                    ) from last
                attempt += 1
                wait = backoff(attempt)
                _log.info(
                    "agentkit: agent %r retries its model call (retry %d of %d, in %.2f s): %s",
                    agent_name,
                    attempt,
                    max_retries,
                    wait,
                    error if error is not None else "output rejected by should_retry",
                )
                cancellable_sleep(wait)

        return with_retries


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
