"""MCP servers the tests start as subprocesses (written with the ``mcp`` package's server API)."""
