"""Reading a streamed Chat Completions reply into message chunks."""

from __future__ import annotations

from typing import Any

import attrs

from agentkit.models._http._sse import SSEError
from agentkit.models._http._stream import Call, EventStream
from agentkit.models.openai._chunks import merge_fields, parse_chunk, parse_error_event
from agentkit.models.openai._wire import PROVIDER_FIELDS
from agentkit.schema import Message

__all__ = ["Call", "OpenStream"]


class OpenStream(EventStream):
    """A streamed ``chat.completion.chunk`` response whose first chunks have been read."""

    __slots__ = ("fields",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields: dict[str, Any] = {}  # provider fields of the chunks so far

    def read_payloads(self, payloads: list[bytes], batch: list[Message]) -> None:
        """Append the chunks of SSE ``payloads`` to ``batch``; stop at ``[DONE]``."""
        url = self.url
        for payload in payloads:
            if type(payload) is SSEError:
                raise parse_error_event(payload, url)
            if payload == b"[DONE]":
                self.done = True
                return
            chunk = parse_chunk(payload, url)
            if chunk is None:
                continue
            meta = chunk.response_meta
            if meta is not None:
                if meta.finish_reason:
                    self.finished = True
                if meta.usage is not None:
                    self.tokens = meta.usage.total_tokens
            extra = chunk.extra
            if extra and PROVIDER_FIELDS in extra:
                self.fields = merge_fields(self.fields, extra[PROVIDER_FIELDS])
                # the merged fields so far, on a chunk of its own (a message is a value)
                chunk = attrs.evolve(chunk, extra={**extra, PROVIDER_FIELDS: self.fields})
            self.count += 1
            batch.append(chunk)
