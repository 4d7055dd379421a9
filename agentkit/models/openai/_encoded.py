"""The request JSON of the Chat Completions messages an :class:`OpenAIChatModel` has sent."""

from __future__ import annotations

from agentkit.models._http._encoded import MAX_BYTES
from agentkit.models._http._encoded import EncodedMessages as _EncodedMessages
from agentkit.models.openai._wire import attachment_items, attachments_bytes, message_bytes

__all__ = ["EncodedMessages"]


class EncodedMessages(_EncodedMessages):
    """The request JSON of the messages an :class:`OpenAIChatModel` has sent.

    A Chat Completions tool message carries text only: after the tool messages of a turn, a
    user message carries the images, files and sounds their results hold (each tool message
    says so; see ``_wire.tool_content``).
    """

    __slots__ = ()

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        super().__init__(
            message_bytes, max_bytes, attachments=(attachment_items, attachments_bytes)
        )
