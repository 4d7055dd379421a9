"""agentkit.mcp against real MCP servers: listing and calling tools over stdio and streamable HTTP."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator

import pytest

from agentkit import ImagePart, InvokableTool, ToolArgumentsError, ToolError
from agentkit.mcp import (
    MCPClient,
    MCPClientClosedError,
    MCPConnectionError,
    MCPServerError,
    MCPTool,
)
from tests.mcp_servers.support import (
    HTTPServer,
    http_server,
    mcp_connections,
    toolbox_client,
    wait_until,
)


@pytest.fixture(scope="module")
def http() -> Iterator[HTTPServer]:
    with http_server("http") as server:
        yield server


@pytest.fixture(scope="module", params=["stdio", "http"])
def client(request: pytest.FixtureRequest) -> Iterator[MCPClient]:
    # Shared by the tests of this module, which only list and call tools that keep no state.
    if request.param == "stdio":
        made = toolbox_client()
    else:
        made = MCPClient.http(request.getfixturevalue("http").url)
    with made:
        yield made


def by_name(client: MCPClient, **options: object) -> dict[str, MCPTool]:
    tools = client.tools(**options)  # type: ignore[arg-type]
    assert all(isinstance(tool, MCPTool) for tool in tools)
    return {tool.info().name: tool for tool in tools}  # type: ignore[misc]


def test_tools_are_invokable_agentkit_tools_with_the_servers_schema(client: MCPClient) -> None:
    tools = by_name(client)
    assert {"add", "echo", "fail", "picture", "slow", "grow"} <= set(tools)
    add = tools["add"]
    assert isinstance(add, InvokableTool)
    info = add.info()
    assert info.description == "Add two integers."
    assert info.parameters["type"] == "object"
    assert set(info.parameters["properties"]) == {"a", "b"}
    assert info.parameters["required"] == ["a", "b"]
    assert add.invoke(json.dumps({"a": 2, "b": 40})) == "42"


def test_prefix_renames_and_allow_filters_but_calls_use_the_servers_name(client: MCPClient) -> None:
    tools = client.tools(prefix="box_", allow=["echo", "add"])
    assert [tool.info().name for tool in tools] == ["box_add", "box_echo"]
    echo = tools[1]
    assert echo.invoke('{"text": "hi"}') == "hi"  # type: ignore[attr-defined]


def test_allow_accepts_prefixed_names_too(client: MCPClient) -> None:
    tools = client.tools(prefix="box_", allow=["box_add", "echo"])
    assert [tool.info().name for tool in tools] == ["box_add", "box_echo"]


def test_allow_with_an_unknown_name_says_which_tools_exist(client: MCPClient) -> None:
    with pytest.raises(ValueError, match="does not have: nope .*it has: add, echo"):
        client.tools(allow=["nope", "add"])


def test_an_error_result_goes_back_as_text_marked_as_an_error(client: MCPClient) -> None:
    text = by_name(client)["fail"].invoke('{"message": "disk full"}')
    assert text.startswith("error from tool fail: ")
    assert "disk full" in text


PICTURE = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f0005000201e2d6e1c10000000049454e44ae426082"
)


def test_an_image_becomes_an_image_part(client: MCPClient) -> None:
    picture = by_name(client)["picture"]
    assert picture.invoke_content("") == (ImagePart(PICTURE, media_type="image/png"),)
    # The text form, for code that wants text, is a placeholder with type and size.
    assert picture.invoke("") == "[image/png, 70 bytes]"


def test_several_images_are_several_parts(client: MCPClient) -> None:
    parts = by_name(client)["pictures"].invoke_content('{"count": 3}')
    assert parts == (ImagePart(PICTURE),) * 3


def test_a_server_sending_10000_images_is_refused_with_a_clear_error(client: MCPClient) -> None:
    with pytest.raises(ToolError, match=r"returned 10000 content blocks, over the limit of 100"):
        by_name(client)["pictures"].invoke_content('{"count": 10000}')


def test_a_broken_image_from_a_server_is_refused_with_a_clear_error(client: MCPClient) -> None:
    with pytest.raises(ToolError, match=r"content block 0 \(image\) is refused: .*IEND"):
        by_name(client)["broken_picture"].invoke_content("")


def test_invalid_json_arguments_raise_a_tool_arguments_error(client: MCPClient) -> None:
    tools = by_name(client, prefix="p_")
    with pytest.raises(ToolArgumentsError, match=r"p_add: the arguments are not valid JSON") as info:
        tools["p_add"].invoke("{oops")
    assert info.value.tool_name == "p_add"
    with pytest.raises(ToolArgumentsError, match="must be a JSON object, got list"):
        tools["p_add"].invoke("[1, 2]")


def test_arguments_the_server_rejects_come_back_as_an_error_result(client: MCPClient) -> None:
    text = by_name(client)["add"].invoke('{"a": "many"}')
    assert text.startswith("error from tool add: ")


def test_calling_an_unknown_tool_is_an_error_result_or_a_server_error(client: MCPClient) -> None:
    try:
        result = client.call_tool("no_such_tool", {})
    except MCPServerError as error:  # servers may answer with a JSON-RPC error instead
        assert isinstance(error, ToolError)
        assert "no_such_tool" in str(error)
    else:
        assert result["isError"] is True


def test_headers_go_with_every_streamable_http_request(http: HTTPServer) -> None:
    with MCPClient.http(http.url, headers={"Authorization": "Bearer t0k"}) as client:
        result = client.call_tool("request_header", {"name": "Authorization"})
    assert result["content"][0]["text"] == "Bearer t0k"


def test_call_tool_returns_the_raw_result(client: MCPClient) -> None:
    result = client.call_tool("add", {"a": 1, "b": 2})
    assert result["content"] == [{"type": "text", "text": "3"}]
    assert not result.get("isError")


def test_close_ends_the_thread_and_later_use_is_refused() -> None:
    before = mcp_connections()
    client = toolbox_client()
    tools = client.tools()
    assert isinstance(tools[0], MCPTool)
    assert len(mcp_connections()) == len(before) + 1
    client.close()
    assert mcp_connections() == before
    client.close()  # idempotent
    with pytest.raises(MCPClientClosedError, match="is closed"):
        tools[0].invoke("{}")
    with pytest.raises(MCPClientClosedError):
        client.tools()


def test_a_client_starts_nothing_until_first_use() -> None:
    before = mcp_connections()
    with toolbox_client() as client:
        assert mcp_connections() == before
        assert "idle" in repr(client)
    assert mcp_connections() == before


def test_a_server_that_cannot_start_is_a_connection_error_naming_it() -> None:
    before = mcp_connections()
    expected = "could not connect to the MCP server /nonexistent/mcp-server --flag"
    with MCPClient.stdio("/nonexistent/mcp-server", ["--flag"]) as client, pytest.raises(
        MCPConnectionError, match=expected
    ):
        client.tools()
    assert mcp_connections() == before


def test_an_unreachable_url_is_a_connection_error() -> None:
    before = mcp_connections()
    with MCPClient.http("http://127.0.0.1:9/mcp", connect_timeout=20) as client, pytest.raises(
        MCPConnectionError, match="127.0.0.1:9"
    ):
        client.tools()
    assert mcp_connections() == before


def test_error_texts_leave_out_credentials_of_the_url() -> None:
    url = "http://user:secret@127.0.0.1:9/mcp?api_key=hunter2"
    with MCPClient.http(url, connect_timeout=20) as client, pytest.raises(MCPConnectionError) as info:
        client.tools()
    assert "http://127.0.0.1:9/mcp" in str(info.value)
    assert "secret" not in str(info.value) and "hunter2" not in str(info.value)
    assert "hunter2" not in repr(client)


def test_headers_are_sent_and_sse_only_servers_are_reached() -> None:
    with http_server("sse") as server, MCPClient.http(server.url, headers={"X-Test": "yes"}) as client:
        assert by_name(client)["echo"].invoke('{"text": "over sse"}') == "over sse"
        assert client.call_tool("request_header", {"name": "X-Test"})["content"][0]["text"] == "yes"
    with http_server("sse") as server, MCPClient.http(server.url, transport="sse") as client:
        assert client.call_tool("add", {"a": 1, "b": 1})["content"][0]["text"] == "2"


def test_bad_settings_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="transport must be"):
        MCPClient.http("http://x", transport="websocket")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout must be > 0"):
        MCPClient.stdio("x", timeout=0)
    with pytest.raises(TypeError, match="sequence of strings"):
        MCPClient.stdio("python", "server.py")


SILENT_SERVER = ["-c", "import sys; sys.stdin.read()"]  # never answers, exits when stdin closes


def test_a_server_that_never_answers_fails_after_connect_timeout() -> None:
    before = mcp_connections()
    with MCPClient.stdio(sys.executable, SILENT_SERVER, connect_timeout=1) as client, pytest.raises(
        MCPConnectionError, match="did not complete the connection within 1 s"
    ):
        client.tools()
    assert mcp_connections() == before


def test_close_stops_a_connection_attempt_in_progress() -> None:
    before = mcp_connections()
    client = MCPClient.stdio(sys.executable, SILENT_SERVER, connect_timeout=120)
    errors: list[BaseException] = []

    def list_tools() -> None:
        try:
            client.tools()
        except BaseException as error:
            errors.append(error)

    caller = threading.Thread(target=list_tools)
    caller.start()
    wait_until(lambda: len(mcp_connections()) == len(before) + 1)  # connecting
    client.close()
    caller.join(60)
    assert not caller.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], MCPClientClosedError)
    assert mcp_connections() == before
