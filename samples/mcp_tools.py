"""MCP tools: an agent using the tools of an MCP server started as a subprocess.

The server is samples/mcp_geo_server.py (written with the ``mcp`` package's own server API).
``MCPClient.stdio`` starts it on first use and stops it when the ``with`` block ends; the
agent gets its tools with a ``geo_`` prefix. Needs ``pip install 'agentkit[mcp]'``.

    python samples/mcp_tools.py
    python samples/mcp_tools.py "How much is 250 USD in euros, and what is the capital of Peru?"

Offline by default (a scripted model plays the LLM); live with ``OPENAI_API_KEY`` (see
samples/quickstart.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import ask, banner, make_model, sample_args

from agentkit import AgentEvent, ChatModelAgent, Message, Role, Runner
from agentkit.mcp import MCPClient
from agentkit.testing import call, calls_message

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_geo_server.py")


def scripted_assistant(messages: list[Message]) -> Message | str:
    """Plays the LLM offline: asks the MCP tools on the first turn, then answers."""
    if messages[-1].role is Role.USER:
        return calls_message(
            call("geo_country_facts", {"country": "Japan"}),
            call("geo_convert_currency", {"amount": 100, "source": "EUR", "target": "JPY"}),
            content="Let me ask the geography server.",
        )
    results = {m.tool_name: m.content for m in messages if m.role is Role.TOOL}
    return (
        f"{results.get('geo_country_facts')}. "
        f"For your trip: {results.get('geo_convert_currency')}."
    )


def build_agent(client: MCPClient) -> ChatModelAgent:
    """A travel assistant whose tools come from the MCP server."""
    return ChatModelAgent(
        name="travel",
        description="answers travel questions with a geography MCP server",
        model=make_model(scripted_assistant),
        instruction="Answer travel questions in two sentences, using the geo_ tools.",
        tools=client.tools(prefix="geo_"),
    )


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Start the server, run the agent on a question, print the run, stop the server."""
    question = "I'm going to Japan: tell me about it, and what is 100 EUR in yen?"
    args = sample_args(__doc__, question, argv)
    banner("MCP tools")
    with MCPClient.stdio(sys.executable, [SERVER]) as client:
        names = ", ".join(tool.info().name for tool in client.tools(prefix="geo_"))
        print(f"tools from the MCP server: {names}")
        runner = Runner(build_agent(client), enable_streaming=not args.no_stream)
        return ask(runner, args.questions[0])


if __name__ == "__main__":
    main()
