"""Reading a streamed Gemini reply (``streamGenerateContent?alt=sse``) into message chunks.

Each event is a whole ``GenerateContentResponse`` holding the next parts: text as it comes,
a function call whole. The last one has the ``finishReason``; the usage is cumulative (the
last chunk's is the reply's, which is what ``concat_messages`` keeps). The stream has no
end marker: one that ends before a finish reason raises
:class:`~agentkit.errors.IncompleteStreamError`.
"""

from __future__ import annotations

import json
from typing import Any

from agentkit.errors import ModelError
from agentkit.models._http._retry import server_message
from agentkit.models._http._sse import SSEError
from agentkit.models._http._stream import EventStream
from agentkit.models.gemini._wire import decode_json, finish_reason, read_response
from agentkit.schema import Message

__all__ = ["GeminiStream"]


class GeminiStream(EventStream):
    """A streamed ``generateContent`` response whose first chunks have been read."""

    owner = "GeminiChatModel"
    end_marker = "a finishReason"

    __slots__ = ("calls",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0  # tool calls so far

    def read_payloads(self, payloads: list[bytes], batch: list[Message]) -> None:
        """Append the chunks of the SSE ``payloads`` to ``batch``."""
        for payload in payloads:
            if type(payload) is SSEError:
                try:
                    data: Any = json.loads(payload)
                except ValueError:
                    data = payload.decode("utf-8", "replace")
                raise ModelError(
                    f"the Gemini API at {self.url} sent an error in the stream: "
                    f"{server_message(data) or 'no message'}",
                    status_code=200,
                    body=data,
                )
            data = decode_json(payload, "a stream chunk", self.url, 200)
            reading = read_response(data, self.url, 200, first_index=self.calls)
            self.calls += len(reading.calls)
            finish = finish_reason(reading.finish, self.calls > 0)
            if finish:
                self.finished = True
            if reading.usage is not None:
                self.tokens = reading.usage.total_tokens
            # Usage is cumulative: a chunk carries the usage so far (the merge keeps the last).
            chunk = reading.message(finish)
            if chunk.content or chunk.tool_calls or chunk.extra or chunk.response_meta:
                self.count += 1
                batch.append(chunk)
