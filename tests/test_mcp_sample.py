"""samples/mcp_tools.py: an agent with the tools of an MCP server started as a subprocess, offline."""

from __future__ import annotations

import pytest

from tests.samples_support import run_sample

pytest.importorskip("mcp")


def test_mcp_tools_sample_runs_offline() -> None:
    result = run_sample("mcp_tools.py")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "offline" in out
    assert "tools from the MCP server: geo_country_facts, geo_convert_currency" in out
    assert "geo_country_facts returned: Japan: capital Tokyo" in out
    assert "geo_convert_currency returned: 100 EUR = 16,393.44 JPY" in out
    assert "For your trip: 100 EUR = 16,393.44 JPY." in out
