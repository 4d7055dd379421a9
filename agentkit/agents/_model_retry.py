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
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from agentkit.errors import AgentCancelledError, AgentConfigError, RetryExhaustedError
from agentkit.runctx import cancellable_sleep
from agentkit.schema import Message

if TYPE_CHECKING:
    from agentkit.middleware import ModelCallable
    from agentkit.models.base import ModelOptions

__all__ = ["ModelRetryConfig", "default_backoff"]

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
            default :func:`default_backoff`.

    Cancellation and interrupts are never retried. When the retries are used up the call
    fails with :class:`~agentkit.RetryExhaustedError` (the last error as its cause).

    In a streamed run every attempt's stream is emitted as it arrives (a rejected attempt's
    event too: consumers that show streams see each attempt); in a non-streamed run only the
    accepted reply is emitted. Retries run inside ``before_model`` and outside ``wrap_model``
    middleware: each attempt goes through the ``wrap_model`` layers.
    """

    max_retries: int = attrs.field(default=2)
    should_retry: ShouldRetry | None = None
    backoff: Callable[[int], float] = default_backoff

    @max_retries.validator
    def _check(self, attribute: object, value: object) -> None:
        if not _positive_int(value):
            raise AgentConfigError(f"max_retries must be an int >= 0 (got {value!r})")

    def wrap(self, call: ModelCallable, agent_name: str) -> ModelCallable:
        """Return ``call`` made with retries (framework-internal)."""
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
                except AgentCancelledError:
                    raise
                except Exception as raised:
                    error = raised
                if not should_retry(output, error):
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
