"""MCP tools in a real Jupyter kernel, whose asyncio event loop is running while cells execute."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mcp_servers.support import TOOLBOX

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parent.parent

CELLS = [
    "import asyncio, sys\n"
    "from agentkit.mcp import MCPClient\n"
    f"client = MCPClient.stdio(sys.executable, [{str(TOOLBOX)!r}])\n"
    "print('loop running:', asyncio.get_event_loop().is_running())",
    "(add,) = client.tools(allow=['add'])\n"
    "print('add:', add.invoke('{\"a\": 40, \"b\": 2}'))",
    "client.close()\n"
    "from tests.mcp_servers.support import mcp_connections\n"
    "print('mcp connections:', mcp_connections())",
]


def test_mcp_tools_work_in_a_jupyter_kernel() -> None:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    client = nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    printed = "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout"
    )
    assert "loop running: True" in printed  # the kernel's loop runs while the cells execute
    assert "add: 42" in printed
    assert "mcp connections: []" in printed
