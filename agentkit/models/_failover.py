"""Model failover: :class:`FailoverChatModel` tries other models when one keeps failing.

The next model is the next one of a list, or the one a function chooses from a
:class:`FailoverContext` (Eino's ``GetFailoverModel``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from agentkit._lazy import present
from agentkit._values import BuiltValue
from agentkit.errors import AgentCancelledError, AgentConfigError
from agentkit.models._base import ModelOptions
from agentkit.schema import Message, ToolInfo
from agentkit.streams import StreamReader

__all__ = [
    "ChooseModel",
    "FailoverChatModel",
    "FailoverChoice",
    "FailoverContext",
    "ShouldFailover",
]

_log = logging.getLogger("agentkit")

ShouldFailover = Callable[[Exception], bool]
"""``should_failover(error) -> bool``: ``True`` to try the next model after ``error``."""


def _any_error(error: Exception) -> bool:
    return True


@attrs.frozen
class FailoverContext:
    """What ``FailoverChatModel(choose_model=...)`` is told when a model failed: Eino's
    ``FailoverContext``.

    Attributes:
        attempt: the failover this choice is for, 1-based (``1`` after the first model failed).
        input_messages: the messages of the call, as the caller gave them.
        failed_model: the model whose attempt failed (as given, without tools bound).
        error: the error it raised.
    """

    attempt: int
    input_messages: tuple[Message, ...]
    failed_model: Any
    error: Exception


def _messages_or_none(value: Sequence[Message] | None) -> tuple[Message, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class FailoverChoice:
    """A model chosen to fail over to, with other input messages for it.

    Return it from ``choose_model`` when the next model needs its own input (a shorter
    history for a model with a smaller context); return the model alone otherwise.

    Attributes:
        model: the model to call next.
        input_messages: the messages to send it (``None``: the call's own).
    """

    model: Any
    input_messages: tuple[Message, ...] | None = attrs.field(
        default=None, converter=_messages_or_none
    )


ChooseModel = Callable[[FailoverContext], Any]
"""``choose_model(context) -> model | FailoverChoice | None``: the model to try next after
``context.failed_model`` failed (``None``: stop, and raise the error)."""


class _Preferred:
    """Which model answered last (shared by a failover model and its tool-bound copies)."""

    __slots__ = ("chosen", "index", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.index = 0
        self.chosen: Any = None  # with choose_model: the model (as given) that answered last


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

    Choosing the next model (Eino's ``ModelFailoverConfig.GetFailoverModel``): with
    ``choose_model``, a failed attempt is followed by the model it returns, chosen from a
    :class:`FailoverContext` (the failed model, its error, the attempt number), up to
    ``max_failovers`` times; a :class:`FailoverChoice` also gives that model its own input
    messages, ``None`` stops (the error is raised), and an exception it raises ends the call
    with that exception. The first attempt goes to the model that answered last (initially
    ``models[0]``)::

        def choose(context: FailoverContext) -> ChatModel | None:
            if isinstance(context.error, RateLimitError):
                return small_model
            return None if context.attempt > 1 else big_model

        model = FailoverChatModel([main_model], choose_model=choose, max_failovers=2)

    Args:
        models: the models; with ``choose_model``, the first is the one tried first.
        should_failover: ``should_failover(error) -> bool``; default: any error.
        choose_model: ``choose_model(context) -> model | FailoverChoice | None``.
        max_failovers: how many failovers one call may make (needed with ``choose_model``;
            without it, default: each other model once).

    Raises:
        AgentConfigError: ``models`` is empty; ``choose_model`` without ``max_failovers``.
    """

    def __init__(
        self,
        models: Sequence[Any],
        *,
        should_failover: ShouldFailover | None = None,
        choose_model: ChooseModel | None = None,
        max_failovers: int | None = None,
        _preferred: _Preferred | None = None,
        _tools: Sequence[ToolInfo] | None = None,
    ) -> None:
        models = list(models)
        if not models:
            raise AgentConfigError("FailoverChatModel needs at least one model")
        if should_failover is not None and not callable(should_failover):
            raise AgentConfigError(
                f"should_failover must be a function (error) -> bool (got {should_failover!r})"
            )
        if choose_model is not None and not callable(choose_model):
            raise AgentConfigError(
                "choose_model must be a function (FailoverContext) -> model | FailoverChoice | "
                f"None (got {choose_model!r})"
            )
        if max_failovers is not None and (
            isinstance(max_failovers, bool) or not isinstance(max_failovers, int)
            or max_failovers < 0
        ):
            raise AgentConfigError(f"max_failovers must be an int >= 0 (got {max_failovers!r})")
        if choose_model is not None and max_failovers is None:
            raise AgentConfigError(
                "FailoverChatModel(choose_model=...) needs max_failovers: how many times one "
                "call may fail over (write max_failovers=2)"
            )
        self._models = models
        self._should_failover = should_failover or _any_error
        self._choose = choose_model
        self._max_failovers = len(models) - 1 if max_failovers is None else max_failovers
        self._preferred = _preferred or _Preferred()
        self._tools = None if _tools is None else list(_tools)

    @property
    def models(self) -> list[Any]:
        """The models, in the order they are tried after the preferred one."""
        return list(self._models)

    @property
    def model(self) -> str:
        """The name of the model tried first (for traces)."""
        preferred = self._preferred
        current = preferred.chosen
        if current is None:
            current = self._models[preferred.index]
        name = getattr(current, "model", None)
        return name if isinstance(name, str) else type(current).__name__

    def __repr__(self) -> str:
        return f"FailoverChatModel({self._models!r})"

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        """Answer with the first model that does not fail."""
        result: Message = self._attempts(
            messages, lambda model, sent: model.generate(sent, options)
        )
        return result

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        """Stream from the first model whose ``stream()`` call does not fail."""
        result: StreamReader[Message] = self._attempts(
            messages, lambda model, sent: model.stream(sent, options)
        )
        return result

    def with_tools(self, tools: Sequence[ToolInfo]) -> FailoverChatModel:
        """A failover model over each model bound to ``tools`` (sharing the preference)."""
        if self._choose is not None:
            # The models stay as given (the chooser sees them so); each is bound when called.
            return FailoverChatModel(
                self._models,
                should_failover=self._should_failover,
                choose_model=self._choose,
                max_failovers=self._max_failovers,
                _preferred=self._preferred,
                _tools=tools,
            )
        return FailoverChatModel(
            [model.with_tools(tools) for model in self._models],
            should_failover=self._should_failover,
            max_failovers=self._max_failovers,
            _preferred=self._preferred,
        )

    def _attempts(
        self, messages: Sequence[Message], call: Callable[[Any, Sequence[Message]], Any]
    ) -> Any:
        if self._choose is None:
            return self._try(lambda model: call(model, messages))
        return self._chosen(messages, call)

    def _bound(self, model: Any) -> Any:
        return model if self._tools is None else model.with_tools(self._tools)

    def _chosen(
        self, messages: Sequence[Message], call: Callable[[Any, Sequence[Message]], Any]
    ) -> Any:
        """The chooser's way: the last model that answered, then the chosen ones."""
        assert self._choose is not None
        preferred = self._preferred
        with preferred.lock:
            model = preferred.chosen if preferred.chosen is not None else self._models[0]
        sent: Sequence[Message] = messages
        attempt = 0
        while True:
            try:
                result = call(self._bound(model), sent)
            except AgentCancelledError:
                raise
            except Exception as error:
                if attempt >= self._max_failovers or not self._should_failover(error):
                    raise
                attempt += 1
                context = FailoverContext(attempt, tuple(messages), model, error)
                choice = self._choose(context)
                if choice is None:
                    raise
                if isinstance(choice, FailoverChoice):
                    model = choice.model
                    sent = messages if choice.input_messages is None else choice.input_messages
                else:
                    model, sent = choice, messages
                if not callable(getattr(model, "generate", None)):
                    raise AgentConfigError(
                        f"choose_model returned {choice!r}; return a chat model, a "
                        "FailoverChoice(model, input_messages), or None to stop"
                    ) from error
                _log.info(
                    "agentkit: model %r failed (%s); failing over to %r",
                    context.failed_model,
                    error,
                    model,
                )
                continue
            with preferred.lock:
                preferred.chosen = model
            return result

    def _try(self, call: Callable[[Any], Any]) -> Any:
        preferred = self._preferred
        with preferred.lock:
            first = preferred.index
        order = [first] + [index for index in range(len(self._models)) if index != first]
        order = order[: self._max_failovers + 1]
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

present(
    (
        FailoverChatModel,
    ),
    "agentkit.models",
)

present(
    (
        ChooseModel,
        FailoverChoice,
        FailoverContext,
        ShouldFailover,
    ),
    "agentkit.models.failover",
)
