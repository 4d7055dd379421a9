"""The Chat Completions encodings a model keeps for the next calls (see ``_http._encoded``)."""

from __future__ import annotations

from agentkit.models._http._encoded import MAX_BYTES
from agentkit.models._http._encoded import EncodedMessages as _EncodedMessages
from agentkit.models.openai._wire import message_bytes

__all__ = ["EncodedMessages"]


class EncodedMessages(_EncodedMessages):
    """The request JSON of the messages an :class:`OpenAIChatModel` has sent."""

    __slots__ = ()

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        super().__init__(message_bytes, max_bytes)
