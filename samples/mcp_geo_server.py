"""A small MCP server (geography facts and currency conversion), used by samples/mcp_tools.py.

Written with the ``mcp`` package's own server API; it speaks MCP on stdin/stdout:

    python samples/mcp_geo_server.py

It does not use agentkit: any MCP server works with ``agentkit.mcp.MCPClient``.
"""

# No ``from __future__ import annotations``: early mcp 1.x servers need real annotations.
try:  # mcp 2.x
    from mcp.server.mcpserver import MCPServer
except ImportError:  # mcp 1.x
    # mcp 1.x names: the installed mcp 2.x type-checks the branch above.
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[attr-defined, no-redef]

COUNTRIES = {
    "japan": "capital Tokyo, population 124 million, currency JPY",
    "peru": "capital Lima, population 34 million, currency PEN",
    "france": "capital Paris, population 68 million, currency EUR",
}
EUROS_PER_UNIT = {"EUR": 1.0, "USD": 0.92, "JPY": 0.0061, "PEN": 0.25, "GBP": 1.17}

server = MCPServer("geography", log_level="WARNING")


@server.tool()
def country_facts(country: str) -> str:
    """Capital, population and currency of a country."""
    facts = COUNTRIES.get(country.strip().lower())
    return f"{country}: {facts}" if facts else f"no facts about {country}"


@server.tool()
def convert_currency(amount: float, source: str, target: str) -> str:
    """Convert an amount of money between currencies (ISO codes such as EUR, USD, JPY)."""
    source, target = source.strip().upper(), target.strip().upper()
    if source not in EUROS_PER_UNIT or target not in EUROS_PER_UNIT:
        unknown = source if source not in EUROS_PER_UNIT else target
        return f"unknown currency: {unknown} (known: {', '.join(EUROS_PER_UNIT)})"
    converted = amount * EUROS_PER_UNIT[source] / EUROS_PER_UNIT[target]
    return f"{amount:g} {source} = {converted:,.2f} {target}"


if __name__ == "__main__":
    server.run()
