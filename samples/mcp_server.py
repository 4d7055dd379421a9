"""An agent served over MCP (stdio): any MCP client (Claude Desktop, Cursor, VS Code) can call it.

The agent books meeting rooms; booking needs the user's approval, which the MCP client is
asked for (an elicitation) when it supports it, or which the ``resume_rooms`` tool gives.
Needs ``pip install 'agentkit[mcp]'``. Nothing may be printed to stdout: it is the protocol's.

    python samples/mcp_server.py            # speaks MCP on stdin/stdout

Add it to an MCP client's configuration (Claude Desktop: ``claude_desktop_config.json``)::

    {"mcpServers": {"rooms": {"command": "python", "args": ["/path/to/samples/mcp_server.py"]}}}

Offline by default (a scripted model plays the LLM); live with ``OPENAI_API_KEY`` (see
samples/quickstart.py). ``--store DIR`` keeps waiting runs in files, so they survive a restart.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import make_model

from agentkit import ChatModelAgent, Message, Role, Runner, tool
from agentkit.checkpoint import FileCheckPointStore
from agentkit.mcp import to_mcp_server
from agentkit.testing import call, calls_message

ROOMS = {"Atlas": 4, "Borealis": 10}


@tool
def free_rooms(people: int) -> str:
    """The rooms with at least this many seats."""
    return ", ".join(name for name, seats in ROOMS.items() if seats >= people) or "none"


@tool(needs_approval=True)
def book(room: str, hour: int) -> str:
    """Book a room for one hour (needs the user's approval)."""
    return f"{room} is booked at {hour}:00"


def scripted(messages: list[Message]) -> Message | str:
    """The offline model: a booking request books Borealis at 14:00; anything else lists rooms."""
    last = messages[-1]
    if last.role == Role.TOOL:
        return last.content
    if "book" in last.content.lower():
        return calls_message(call("book", {"room": "Borealis", "hour": 14}))
    return calls_message(call("free_rooms", {"people": 6}))


def build(store: str | None = None) -> Runner:
    """The agent on a Runner (with a file checkpoint store when ``store`` is given)."""
    agent = ChatModelAgent(
        "rooms", "Finds and books meeting rooms.", make_model(scripted),
        instruction="You find and book meeting rooms with your tools.",
        tools=[free_rooms, book],
    )
    return Runner(agent, checkpoint_store=FileCheckPointStore(store) if store else None)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", help="a directory for waiting runs (default: memory)")
    args = parser.parse_args(argv)
    to_mcp_server(build(args.store), name="rooms").run(transport="stdio")


if __name__ == "__main__":
    main()
