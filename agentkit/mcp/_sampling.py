"""Sampling: an MCP server asks the client's model for a completion (``sampling/createMessage``).

Off by default: a client offers sampling only after :meth:`MCPClient.allow_sampling`, and
then answers with its agentkit model, within a token and a request budget. Requests beyond
them, and requests that are not plain text, are refused with a JSON-RPC error.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from agentkit.errors import AgentKitValueError
from agentkit.mcp import _compat
from agentkit.models._base import ChatModel
from agentkit.schema import Message, Role

__all__ = ["SamplingPolicy", "sampling_callback"]

INVALID_PARAMS = -32602
INVALID_REQUEST = -32600


class SamplingPolicy:
    """The model that answers a server's sampling requests, and the limits it answers within."""

    def __init__(self, model: ChatModel, *, max_tokens: int, max_requests: int,
                 max_input_chars: int) -> None:
        if max_tokens < 1 or max_requests < 1 or max_input_chars < 1:
            raise AgentKitValueError(
                "max_tokens, max_requests and max_input_chars must be at least 1 "
                f"(got {max_tokens}, {max_requests}, {max_input_chars})"
            )
        self.model = model
        self.max_tokens = max_tokens
        self.max_requests = max_requests
        self.max_input_chars = max_input_chars
        self._lock = threading.Lock()
        self.used = 0

    def take(self) -> bool:
        """Count one request; ``False`` when the budget is spent."""
        with self._lock:
            if self.used >= self.max_requests:
                return False
            self.used += 1
            return True


def _messages(request: dict[str, Any], limit: int) -> list[Message] | str:
    """The request as agentkit messages, or why it cannot be answered."""
    messages: list[Message] = []
    system = request.get("systemPrompt")
    if isinstance(system, str) and system:
        messages.append(Message(Role.SYSTEM, system))
    for item in request.get("messages", []):
        content = item.get("content")
        parts = content if isinstance(content, list) else [content]
        texts = []
        for part in parts:
            if not isinstance(part, dict) or part.get("type") != "text":
                return "only text sampling messages are answered"
            texts.append(str(part.get("text", "")))
        role = Role.ASSISTANT if item.get("role") == "assistant" else Role.USER
        messages.append(Message(role, "".join(texts)))
    size = sum(len(message.content) for message in messages)
    if size > limit:
        return f"the request is {size} characters; at most {limit} are answered"
    if not messages:
        return "the request has no message"
    return messages


def sampling_callback(policy: SamplingPolicy) -> Any:
    """A session's ``sampling_callback`` answering within ``policy``."""
    types = _compat._module("mcp.types")

    def refuse(code: int, message: str) -> Any:
        return types.ErrorData(code=code, message=message)

    async def on_sampling(context: Any, params: Any) -> Any:
        request = _compat.wire_shape(params)
        asked = int(request.get("maxTokens") or 0)
        if asked > policy.max_tokens:
            return refuse(
                INVALID_PARAMS,
                f"sampling asks for {asked} tokens; this client answers at most "
                f"{policy.max_tokens}",
            )
        if request.get("tools"):
            return refuse(INVALID_PARAMS, "sampling with tools is not answered")
        messages = _messages(request, policy.max_input_chars)
        if isinstance(messages, str):
            return refuse(INVALID_PARAMS, messages)
        if not policy.take():
            return refuse(
                INVALID_REQUEST,
                f"this client answered its {policy.max_requests} sampling requests already",
            )
        from agentkit.models._base import ModelOptions

        options = ModelOptions(max_tokens=asked or policy.max_tokens)
        try:
            reply = await asyncio.to_thread(policy.model.generate, messages, options)
        except Exception as error:
            return refuse(-32603, f"the client's model failed: {type(error).__name__}")
        return types.CreateMessageResult.model_validate(
            {
                "role": "assistant",
                "content": {"type": "text", "text": reply.content},
                "model": type(policy.model).__name__,
                "stopReason": "endTurn",
            }
        )

    return on_sampling
