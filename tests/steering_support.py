"""The agent of the steering kill test, shared by the test and its child process."""

from __future__ import annotations

import threading

from agentkit import ChatModelAgent, Message, assistant_message, tool
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

LEASE_TTL = 0.5  # seconds: a killed run's lease expires soon, so the test can resume it


def clerk(started: threading.Event, release: threading.Event) -> ChatModelAgent:
    """An agent that looks up February (its tool waits for ``release``), then answers with
    every message it was given."""

    @tool
    def lookup(month: str) -> str:
        """Look up a month's invoices."""
        started.set()
        release.wait(120)
        return f"{month}: 3 invoices"

    def reply(messages: list[Message]) -> Message:
        if len(messages) == 1:
            return calls_message(call("lookup", {"month": "February"}, id="c1"))
        return assistant_message("saw: " + " | ".join(m.content for m in messages))

    return ChatModelAgent("clerk", "d", ScriptedChatModel(reply), tools=[lookup])
