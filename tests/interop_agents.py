"""The agent the interoperability tests serve: scripted, so every protocol sees the same runs.

Its model reads the last message. A user text ``pay <payee> <amount>`` calls ``pay`` (which
needs approval), ``ask`` calls ``ask`` (which asks the user a question with ``interrupt``),
``slow`` calls ``slow`` (which sleeps until cancelled); any other text is echoed back as
``echo: <text>``. After a tool result the model answers ``done: <result>``.
"""

from __future__ import annotations

import threading

from agentkit import ChatModelAgent, Message, Role, cancellable_sleep, interrupt, tool
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

SLOW_STARTED = threading.Event()  # set when a call of ``slow`` starts (in-process tests)


@tool(needs_approval=True)
def pay(payee: str, amount: int) -> str:
    """Pay someone."""
    return f"paid {amount} to {payee}"


@tool
def ask() -> str:
    """Ask the user for their favourite colour."""
    colour = interrupt("What is your favourite colour?")
    return f"colour is {colour}"


@tool
def slow() -> str:
    """Take a long time."""
    SLOW_STARTED.set()
    cancellable_sleep(120)
    return "slept"


def reply(messages: list[Message]) -> Message | str:
    last = messages[-1]
    if last.role == Role.TOOL:
        return f"done: {last.content}"
    words = last.content.split()
    if words[:1] == ["pay"] and len(words) == 3:
        return calls_message(call("pay", {"payee": words[1], "amount": int(words[2])}, id="p1"))
    if words[:1] == ["ask"]:
        return calls_message(call("ask", {}, id="a1"))
    if words[:1] == ["slow"]:
        return calls_message(call("slow", {}, id="s1"))
    return f"echo: {last.content}"


def make_agent(name: str = "helper") -> ChatModelAgent:
    """The test agent (a fresh model each time; the script is a function, so it never runs out)."""
    return ChatModelAgent(
        name, "A helper that echoes, pays and asks.", ScriptedChatModel(reply),
        tools=[pay, ask, slow],
    )
