"""Retries of a whole agent-tool call: :class:`AgentToolRetryConfig` (Eino PR #1162).

An agent tool whose inner run failed runs its agent again from the start, as a fresh run
(its own history; its saved point dropped). Cancellation, run limits, interrupts and bad
arguments are never retried, and a resumed call runs once (it goes on where it stopped).
Waits between attempts use :func:`~agentkit.cancellable_sleep`, so a cancel ends them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from agentkit._agent import call_run
from agentkit._runctx import RunFrame, cancellable_sleep
from agentkit.agents._model_retry import default_backoff
from agentkit.errors import (
    AgentCancelledError,
    AgentConfigError,
    RunLimitError,
    ToolArgumentsError,
)

__all__ = ["AgentToolRetryConfig"]

_log = logging.getLogger("agentkit")

T = TypeVar("T")


def _any_error(error: Exception) -> bool:
    return True


def _max_retries(instance: object, attribute: object, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AgentConfigError(f"max_retries must be an int >= 0 (got {value!r})")


def _callable(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not callable(value):
        raise AgentConfigError(f"{attribute.name} must be a function (got {value!r})")


@attrs.frozen
class AgentToolRetryConfig:
    """Run an :class:`~agentkit.AgentTool`'s agent again when its run fails.

    Eino's ``AgentToolRetryConfig`` (``WithAgentToolRetry``): for a tool whose agent fails now
    and then (a flaky model, a context that overflowed), so that one failed child does not
    fail its caller's whole tool round. Each attempt is a fresh run of the agent, from the
    call's input; when the retries are used up, the call fails with the last error as it was.

    Args:
        max_retries: how many times the agent may run again (``0``: never).
        should_retry: ``should_retry(error) -> bool``; default: every error.
        backoff: ``backoff(attempt) -> seconds`` before retry ``attempt`` (1-based); default:
            0.1 s doubling up to 10 s, plus up to 50 % jitter.

    Never retried: a cancel, a run limit, an interrupt (it pauses the run instead), arguments
    the tool refused (the same arguments fail the same way), and a call being resumed (it
    goes on inside the run it resumes, once).

    Example::

        AgentTool(researcher, retry=AgentToolRetryConfig(max_retries=2))
    """

    max_retries: int = attrs.field(default=2, validator=_max_retries)
    should_retry: Callable[[Exception], bool] | None = attrs.field(
        default=None, validator=_callable
    )
    backoff: Callable[[int], float] = attrs.field(default=default_backoff, validator=_callable)

    def run(self, tool_name: str, frame: RunFrame, attempt: Callable[[], T]) -> T:
        """Call ``attempt`` until it returns or fails in a way not retried (framework-internal).

        ``frame`` is the tool call's: a failed attempt's saved point is dropped before the
        next one starts afresh.
        """
        call = frame.tool
        if call is not None and call.resume is not None and call.resume.was_interrupted:
            return attempt()
        should_retry = self.should_retry or _any_error
        retries = 0
        while True:
            try:
                return attempt()
            except (AgentCancelledError, RunLimitError):
                raise
            except Exception as error:
                refused = isinstance(error, ToolArgumentsError) and error.tool_name == tool_name
                if refused or retries >= self.max_retries or not should_retry(error):
                    raise
                retries += 1
                call_run(frame).discard_state()
                wait = self.backoff(retries)
                _log.info(
                    "agentkit: agent tool %r runs its agent again (retry %d of %d, in %.2f s): %s",
                    tool_name,
                    retries,
                    self.max_retries,
                    wait,
                    error,
                )
                cancellable_sleep(wait)
