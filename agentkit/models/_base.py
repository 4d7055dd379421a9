"""What a chat model is: the :class:`ChatModel` protocols and per-call :class:`ModelOptions`.

Any object with these methods is a model; nothing needs to subclass anything. This module
imports no HTTP library, so ``import agentkit`` stays fast.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from agentkit._lazy import present
from agentkit.errors import AgentConfigError, AgentKitValueError
from agentkit.schema import Message, ToolInfo
from agentkit.streams import StreamReader

__all__ = ["ChatModel", "ModelOptions", "ToolCallingChatModel", "ToolSearchUnsupportedError"]


class ToolSearchUnsupportedError(AgentConfigError):
    """A model without a server-side tool search was given deferred tools.

    Raised when the tools are bound (:meth:`ToolCallingChatModel.with_tools`; in an agent, at
    its first model call): a :class:`~agentkit.ToolInfo` with ``deferred=True`` needs a model
    that searches its tools itself: :class:`~agentkit.models.AnthropicChatModel` or
    :class:`~agentkit.models.OpenAIResponsesModel`.
    With another model, use :class:`~agentkit.middlewares.ToolSearchMiddleware` in its
    default mode (``use_model_tool_search=False``), whose ``tool_search`` tool works with
    every model.
    """


def _stop_converter(value: str | Sequence[str] | None) -> str | tuple[str, ...] | None:
    if value is None or isinstance(value, str):
        return value
    return tuple(value)


def _extra_converter(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)


@attrs.frozen
class ModelOptions:
    """Options for one model call; ``None`` means "not set" (the model's default applies).

    Options combine with :meth:`merge`: a later value that is not ``None`` wins, and the
    ``extra`` dicts are merged key by key. ``extra`` holds anything else the model server
    accepts; an OpenAI-compatible client puts it at the top level of the request body.

    Args:
        model: the model name, overriding the one the client was made with.
        temperature: sampling temperature.
        max_tokens: the most tokens the reply may have.
        top_p: nucleus sampling probability mass.
        stop: a stop sequence or several.
        tool_choice: ``"auto"``, ``"none"``, ``"required"``, or the name of the one tool the
            model must call.
        extra: further request fields, such as ``{"seed": 7}``.

    Example::

        ModelOptions(temperature=0.2).merge(ModelOptions(max_tokens=256))
    """

    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: str | tuple[str, ...] | None = attrs.field(default=None, converter=_stop_converter)
    tool_choice: str | None = None
    extra: dict[str, Any] | None = attrs.field(default=None, converter=_extra_converter, hash=False)

    @classmethod
    def from_kwargs(cls, **options: Any) -> ModelOptions:
        """Build options from keyword arguments, rejecting unknown names.

        Raises:
            ValueError: a key is not a ``ModelOptions`` field (the message lists the fields).
        """
        fields = attrs.fields_dict(cls)
        unknown = sorted(set(options) - set(fields))
        if unknown:
            raise AgentKitValueError(
                f"unknown model option(s) {', '.join(map(repr, unknown))}; "
                f"ModelOptions fields are: {', '.join(fields)} "
                "(put other request fields in extra={...})"
            )
        return cls(**options)

    def merge(self, *others: ModelOptions | None) -> ModelOptions:
        """Return these options overridden by ``others`` in order.

        A field of a later options object wins when it is not ``None``; ``extra`` dicts are
        merged (later keys win). ``None`` entries in ``others`` are skipped.
        """
        result = self
        for other in others:
            if other is None or other is result:
                continue
            changes: dict[str, Any] = {}
            for field in attrs.fields(ModelOptions):
                value = getattr(other, field.name)
                if value is None:
                    continue
                if field.name == "extra" and result.extra:
                    value = {**result.extra, **value}
                changes[field.name] = value
            if changes:
                result = attrs.evolve(result, **changes)
        return result


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: messages in, an assistant message (or a stream of its chunks) out.

    Implementations must be safe to call from several threads at once.
    """

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        """Return the model's reply to ``messages``.

        Raises:
            ModelError: the call failed (see :mod:`agentkit.errors` for the subclasses).
        """
        ...

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        """Return the reply as a stream of message chunks (merge them with ``concat_messages``).

        Errors that happen before the first chunk are raised by this call; later ones are
        raised by the reader.
        """
        ...


@runtime_checkable
class ToolCallingChatModel(ChatModel, Protocol):
    """A chat model that can be told which tools it may call."""

    def with_tools(self, tools: Sequence[ToolInfo]) -> ToolCallingChatModel:
        """Return a new model bound to ``tools``; this model is left unchanged."""
        ...

present(
    (
        ChatModel,
        ModelOptions,
        ToolCallingChatModel,
        ToolSearchUnsupportedError,
    ),
    "agentkit.models",
)
