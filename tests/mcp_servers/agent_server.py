"""The interop test agent served over MCP: ``agent_server.py [stdio|http PORT] [--store DIR]``.

With ``--owner-header NAME``, the caller is the value of that HTTP request header.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentkit import Runner
from agentkit.checkpoint import FileCheckPointStore
from agentkit.mcp import to_mcp_server
from tests.interop_agents import make_agent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("port", type=int, nargs="?", default=0)
    parser.add_argument("--store")
    parser.add_argument("--owner-header")
    args = parser.parse_args()
    store = FileCheckPointStore(args.store) if args.store else None
    target = Runner(make_agent(), checkpoint_store=store) if store else make_agent()
    header = args.owner_header
    owner = (lambda headers: (headers or {}).get(header)) if header else None
    server = to_mcp_server(target, name="interop-test", owner=owner)
    if args.transport == "stdio":
        server.run(transport="stdio")
    else:
        server.run(transport="streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
