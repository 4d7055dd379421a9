"""Shared by the samples: pick a real model when an API key is set, else a scripted one."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from agentkit import Message
from agentkit.models import ChatModel, ScriptedChatModel


def live() -> bool:
    """``True`` when the samples should call a real OpenAI-compatible endpoint."""
    return bool(os.environ.get("OPENAI_API_KEY"))


def make_model(script: Sequence[object] | Callable[[list[Message]], Message | str]) -> ChatModel:
    """A real model when ``OPENAI_API_KEY`` is set, otherwise ``ScriptedChatModel(script)``.

    The real model is ``AGENTKIT_MODEL`` (default ``gpt-4o-mini``) at ``OPENAI_BASE_URL``
    (default OpenAI's), so any OpenAI-compatible server works (vLLM, Ollama, DeepSeek, ...).
    """
    if live():
        from agentkit.models import OpenAIChatModel

        return OpenAIChatModel(os.environ.get("AGENTKIT_MODEL", "gpt-4o-mini"))
    return ScriptedChatModel(script)  # type: ignore[arg-type]
