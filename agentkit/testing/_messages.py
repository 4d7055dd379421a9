"""Builders of the tool calls and assistant messages that scripted models reply with."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from agentkit.schema import FunctionCall, Message, ToolCall, assistant_message

_ids = itertools.count(1)


def call(name: str, arguments: Mapping[str, Any] | str = "", id: str | None = None) -> ToolCall:
    """Return a tool call of ``name``; ``arguments`` as a dict (JSON-encoded) or JSON text.

    Without ``id`` the call gets a fresh one (``call_1``, ``call_2``, ... across the process).
    """
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return ToolCall(id=id or f"call_{next(_ids)}", function=FunctionCall(name, text))


def calls_message(*calls: ToolCall, content: str = "") -> Message:
    """Return an assistant message that makes ``calls``."""
    return assistant_message(content, list(calls))
