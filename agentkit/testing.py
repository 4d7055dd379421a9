"""Test helpers: the scripted model, tool-call builders, event summaries and thread checks.

Like ``httpx.MockTransport``, these are public so applications can test their agents the
way agentkit tests itself::

    from agentkit.testing import ScriptedChatModel, call, calls_message, summarize

    model = ScriptedChatModel([calls_message(call("get_weather", {"city": "Paris"})), "Sunny."])
    events = list(Runner(ChatModelAgent("a", "d", model, tools=[get_weather])).query("hi"))
    assert [summarize(e) for e in events][-1] == ("a", ["a"], "assistant", "Sunny.", None)
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from agentkit.events import AgentEvent
from agentkit.models.scripted import ModelCall, ScriptedChatModel
from agentkit.schema import FunctionCall, Message, ToolCall, assistant_message

__all__ = [
    "ModelCall",
    "ScriptedChatModel",
    "call",
    "calls_message",
    "no_thread_leak",
    "summarize",
]

_ids = itertools.count(1)


def call(name: str, arguments: Mapping[str, Any] | str = "", id: str | None = None) -> ToolCall:
    """Return a tool call of ``name``; ``arguments`` as a dict (JSON-encoded) or JSON text."""
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return ToolCall(id=id or f"call_{next(_ids)}", function=FunctionCall(name, text))


def calls_message(*calls: ToolCall, content: str = "") -> Message:
    """Return an assistant message that makes ``calls``."""
    return assistant_message(content, list(calls))


def summarize(event: AgentEvent) -> tuple[str, list[str], str, str, str | None]:
    """Return ``(agent_name, run_path, kind, content, action)`` for comparing event sequences.

    ``kind`` is ``"assistant"``, ``"tool/<name>"``, ``"error"`` or ``""``; ``content`` is the
    message text (streams materialized) or the error text; ``action`` is ``"exit"``,
    ``"transfer:<dest>"``, ``"interrupt"``, ``"break_loop"``, ``"custom"`` or ``None``.
    """
    kind = ""
    content = ""
    variant = event.output.message_output if event.output is not None else None
    if variant is not None:
        kind = f"tool/{variant.tool_name}" if variant.tool_name else variant.role.value
        content = variant.get_message().content
    if event.err is not None:
        kind = "error"
        content = str(event.err)
    action: str | None = None
    if event.action is not None:
        act = event.action
        if act.exit:
            action = "exit"
        elif act.transfer_to_agent is not None:
            action = f"transfer:{act.transfer_to_agent.dest_agent_name}"
        elif act.interrupted is not None:
            action = "interrupt"
        elif act.break_loop is not None:
            action = "break_loop"
        elif act.customized_action is not None:
            action = "custom"
    return event.agent_name, [str(step) for step in event.run_path], kind, content, action


@contextmanager
def no_thread_leak(timeout: float = 10.0) -> Iterator[None]:
    """Fail if a thread started inside the block is still alive after it.

    Threads get up to ``timeout`` seconds to end (a guard against hangs, not a pace).
    """
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + timeout
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra:
            return
        if time.monotonic() > deadline:
            names = ", ".join(t.name for t in extra)
            raise AssertionError(f"{len(extra)} thread(s) outlived the block: {names}")
        extra[0].join(0.05)
