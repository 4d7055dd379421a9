"""The public surface of agentkit.mcp: names, docstrings, lazy import of mcp, the missing extra."""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys

import pytest

import agentkit
import agentkit.mcp
from agentkit.mcp import MCPClient, MCPNotInstalledError, MCPServerError

DOCUMENTED = {
    "MCPClient", "MCPTool", "MCPConnectionError", "MCPServerError", "MCPClientClosedError",
    "MCPNotInstalledError", "MCPProtocolError", "AgentMCPServer", "to_mcp_server",
    "MCPElicitation", "MCPElicitationError",
}


def test_all_is_the_documented_surface_and_everything_has_a_docstring() -> None:
    assert set(agentkit.mcp.__all__) == DOCUMENTED
    for name in agentkit.mcp.__all__:
        obj = getattr(agentkit.mcp, name)
        assert obj.__module__ == "agentkit.mcp"
        assert obj.__doc__ and obj.__doc__.strip(), name
        for member_name, member in inspect.getmembers(obj):
            if not member_name.startswith("_") and (inspect.isfunction(member) or inspect.ismethod(member)):
                assert member.__doc__ and member.__doc__.strip(), f"{name}.{member_name}"


def test_errors_of_a_call_are_tool_errors() -> None:
    assert issubclass(agentkit.mcp.MCPConnectionError, agentkit.ToolError)
    assert issubclass(agentkit.mcp.MCPConnectionError, ConnectionError)
    assert issubclass(agentkit.mcp.MCPProtocolError, agentkit.mcp.MCPConnectionError)
    assert issubclass(agentkit.mcp.MCPServerError, agentkit.ToolError)
    assert issubclass(agentkit.mcp.MCPClientClosedError, agentkit.AgentKitError)
    assert issubclass(MCPNotInstalledError, ImportError)


def test_a_server_error_survives_pickling_with_its_code() -> None:
    error = MCPServerError("refused", code=-32602, tool_name="add", call_id="c1")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.code, copy.tool_name, copy.call_id) == ("refused", -32602, "add", "c1")


def test_importing_agentkit_mcp_does_not_import_mcp() -> None:
    code = "import sys, agentkit, agentkit.mcp; print('mcp' in sys.modules, 'agentkit.mcp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]
    code = "import sys, agentkit; print('agentkit.mcp' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False"


def test_without_the_mcp_package_making_a_client_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp now fails
    with pytest.raises(MCPNotInstalledError, match=r"pip install 'agentkit\[mcp\]'"):
        MCPClient.stdio("python", ["server.py"])


def test_call_errors_round_trip_through_the_checkpoint_serializer() -> None:
    from agentkit.checkpoint import PickleSerializer

    serializer = PickleSerializer(secret_key=b"k" * 32)
    errors = [
        agentkit.mcp.MCPConnectionError("server gone", tool_name="add", call_id="c1"),
        MCPServerError("refused", code=-32602, tool_name="add", call_id="c2"),
        agentkit.mcp.MCPProtocolError("not JSON", tool_name="add", call_id="c3"),
    ]
    for error in errors:
        copy = serializer.loads(serializer.dumps(error, checkpoint_id="cp"), checkpoint_id="cp")
        assert type(copy) is type(error)
        assert (str(copy), copy.tool_name, copy.call_id) == (str(error), error.tool_name, error.call_id)
