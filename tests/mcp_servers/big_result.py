"""Ask the rogue server for a big result in a process of its own; print what happened as JSON.

    python tests/mcp_servers/big_result.py stdio|http SIZE

Prints one JSON object: ``error`` (the class name of the error the call raised, or null),
``seconds`` (the call's duration), ``baseline_kb`` and ``peak_kb`` (this process's peak
resident memory, ``ru_maxrss``, once connected and after the call), and ``next`` (the text
the next call returned: the connection healed).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agentkit.mcp import MCPClient
from tests.mcp_servers.support import ROGUE, http_server


def measure(client: MCPClient, size: int) -> dict[str, object]:
    """Call ``big(size)`` on a connected client and report."""
    client.call_tool("echo", {"text": "warm up"})
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    error: str | None = None
    try:
        client.call_tool("big", {"size": size})
    except Exception as caught:
        error = type(caught).__name__
    seconds = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    after = client.call_tool("echo", {"text": "healed"})["content"][0]["text"]
    return {
        "error": error, "seconds": seconds, "baseline_kb": baseline, "peak_kb": peak,
        "next": after,
    }


def main() -> None:
    transport, size = sys.argv[1], int(sys.argv[2])
    if transport == "stdio":
        with MCPClient.stdio(sys.executable, [str(ROGUE)]) as client:
            report = measure(client, size)
    else:
        with http_server("http", ROGUE) as server, MCPClient.http(server.url) as client:
            report = measure(client, size)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
