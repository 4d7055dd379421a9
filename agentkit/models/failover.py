"""Model failover: :class:`FailoverChatModel` tries other models when one keeps failing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from agentkit._values import BuiltValue
from agentkit.errors import AgentCancelledError, AgentConfigError
from agentkit.models.base import ModelOptions
from agentkit.schema import Message, ToolInfo
from agentkit.streams import StreamReader

__all__ = [
    "FailoverChatModel",
    "ShouldFailover",
]

_log = logging.getLogger("agentkit")

ShouldFailover = Callable[[Exception], bool]
"""``should_failover(error) -> bool``: ``True`` to try the next model after ``error``."""


def _any_error(error: Exception) -> bool:
    return True


class _Preferred:
    """Which model answered last (shared by a failover model and its tool-bound copies)."""

    __slots__ = ("index", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.index = 0


class FailoverChatModel(BuiltValue):
    """A chat model made of several: when one fails, the next one is tried.

    Each call goes first to the model that answered last (initially the first one); when it
    raises an error that ``should_failover`` accepts (default: any error), the other models
    are tried in list order until one answers. When none does, the last model's error is
    raised (the earlier ones are logged). Cancellation is never failed over. Failovers are logged
    at INFO on the ``agentkit`` logger.

    Compose it with the clients' own HTTP retries (each model retries before failing over)
    and with ``ChatModelAgent(model_retry=...)`` (a retry goes through the failover again).

    Example::

        model = FailoverChatModel([
            OpenAIChatModel("gpt-4o", max_retries=1),
            OpenAIChatModel("llama3", base_url="http://localhost:11434/v1", api_key="-"),
        ])

    ``stream()`` fails over on errors raised before the first chunk (a stream that broke
    after it started delivering is not replayed elsewhere). ``with_tools`` binds the tools to
    every model.

    Raises:
        AgentConfigError: ``models`` is empty.
    """

    def __init__(
        self,
        models: Sequence[Any],
        *,
        should_failover: ShouldFailover | None = None,
        _preferred: _Preferred | None = None,
    ) -> None:
        models = list(models)
        if not models:
            raise AgentConfigError("FailoverChatModel needs at least one model")
        if should_failover is not None and not callable(should_failover):
            raise AgentConfigError(
                f"should_failover must be a function (error) -> bool (got {should_failover!r})"
            )
        self._models = models
        self._should_failover = should_failover or _any_error
        self._preferred = _preferred or _Preferred()

    @property
    def models(self) -> list[Any]:
        """The models, in the order they are tried after the preferred one."""
        return list(self._models)

    @property
    def model(self) -> str:
        """The name of the model tried first (for traces)."""
        current = self._models[self._preferred.index]
        name = getattr(current, "model", None)
        return name if isinstance(name, str) else type(current).__name__

    def __repr__(self) -> str:
        return f"FailoverChatModel({self._models!r})"

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        """Answer with the first model that does not fail."""
        result: Message = self._try(lambda model: model.generate(messages, options))
        return result

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        """Stream from the first model whose ``stream()`` call does not fail."""
        result: StreamReader[Message] = self._try(lambda model: model.stream(messages, options))
        return result

    def with_tools(self, tools: Sequence[ToolInfo]) -> FailoverChatModel:
        """A failover model over each model bound to ``tools`` (sharing the preference)."""
        return FailoverChatModel(
            [model.with_tools(tools) for model in self._models],
            should_failover=self._should_failover,
            _preferred=self._preferred,
        )

    def _try(self, call: Callable[[Any], Any]) -> Any:
        preferred = self._preferred
        with preferred.lock:
            first = preferred.index
        order = [first] + [index for index in range(len(self._models)) if index != first]
        for position, index in enumerate(order):
            model = self._models[index]
            try:
                result = call(model)
            except AgentCancelledError:
                raise
            except Exception as error:
                if not self._should_failover(error) or position == len(order) - 1:
                    raise
                _log.info(
                    "agentkit: model %r failed (%s); failing over to %r",
                    model,
                    error,
                    self._models[order[position + 1]],
                )
                continue
            if index != first:
                with preferred.lock:
                    preferred.index = index
            return result
        raise AssertionError("unreachable")
