"""agentkit.mcp's threading model with real servers: timeouts, dying servers, concurrency, fork, loops."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from collections.abc import Iterator

import pytest

from agentkit import ToolError, ToolTimeoutError
from agentkit.mcp import MCPClient, MCPConnectionError, MCPTool
from agentkit.mcp._compat import mcp_major_version
from agentkit.testing import no_thread_leak
from tests.mcp_servers.support import client_over, http_server, mcp_connections, toolbox_client


@pytest.fixture
def stdio_client() -> Iterator[MCPClient]:
    with toolbox_client() as client:
        yield client


def tool(client: MCPClient, name: str) -> MCPTool:
    found = next(t for t in client.tools() if t.info().name == name)
    assert isinstance(found, MCPTool)
    return found


def server_pid(client: MCPClient) -> int:
    return int(client.call_tool("pid", {})["content"][0]["text"])


def test_a_call_longer_than_the_timeout_raises_tool_timeout_and_is_cancelled_at_the_server() -> None:
    with toolbox_client(timeout=1.0) as client:
        with pytest.raises(ToolTimeoutError, match=r"the call to tool slow .* took longer than 1.0 s") as info:
            tool(client, "slow").invoke('{"seconds": 60}')
        assert isinstance(info.value, ToolError)
        assert info.value.tool_name == "slow"
        # The server saw the cancellation; the connection goes on working.
        assert client.call_tool("cancelled_calls", {"wait": True})["content"][0]["text"] == "1"
        assert tool(client, "add").invoke('{"a": 1, "b": 1}') == "2"


def test_a_server_that_exits_mid_call_raises_a_connection_error_and_the_next_call_restarts_it(
    stdio_client: MCPClient,
) -> None:
    first = server_pid(stdio_client)
    with pytest.raises(MCPConnectionError, match="the call to tool die failed: the connection") as info:
        tool(stdio_client, "die").invoke("{}")
    assert isinstance(info.value, ToolError)
    assert server_pid(stdio_client) != first
    assert len(mcp_connections()) == 1


def test_an_http_server_that_exits_mid_call_raises_a_tool_error_and_is_found_again() -> None:
    with http_server("http") as server, MCPClient.http(server.url, timeout=10) as client:
        first = server_pid(client)
        if mcp_major_version() >= 2:
            with pytest.raises(MCPConnectionError, match="the call to tool die failed"):
                client.call_tool("die", {})
        else:  # 1.x drops the broken response stream silently: the call runs into its timeout
            with pytest.raises(ToolTimeoutError, match="the call to tool die"):
                client.call_tool("die", {})
        with pytest.raises(MCPConnectionError):
            client.call_tool("pid", {})  # nobody listens any more
        server.restart()
        assert server_pid(client) != first


def test_a_server_killed_between_calls_is_restarted_by_the_next_call_or_the_one_after(
    stdio_client: MCPClient,
) -> None:
    first = server_pid(stdio_client)
    os.kill(first, signal.SIGKILL)
    try:
        second = server_pid(stdio_client)
    except MCPConnectionError:  # the call raced the client noticing the exit
        second = server_pid(stdio_client)
    assert second != first


def test_an_http_session_the_server_forgot_is_replaced_without_an_error() -> None:
    with http_server("http") as server, MCPClient.http(server.url) as client:
        before = server_pid(client)
        server.restart()  # same port, new process: the old session id is unknown there
        assert server_pid(client) != before
        assert client.call_tool("add", {"a": 2, "b": 2})["content"][0]["text"] == "4"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sixteen_threads_call_at_once_and_all_calls_run_concurrently(transport: str) -> None:
    with client_over(transport) as client:
        meet = tool(client, "meet")
        start = threading.Barrier(16, timeout=30)
        results: list[str] = []
        errors: list[BaseException] = []

        def call() -> None:
            try:
                start.wait()
                results.append(meet.invoke('{"count": 16}'))  # returns only when all 16 are in
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=call) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors
        assert results == ["met 16"] * 16


def test_no_thread_outlives_close() -> None:
    with no_thread_leak():
        client = toolbox_client()
        first = client.tools()[0]
        assert isinstance(first, MCPTool)
        results = []
        workers = [
            threading.Thread(target=lambda: results.append(first.invoke('{"a": 1, "b": 2}')))
            for _ in range(4)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert results == ["3"] * 4
        assert len(mcp_connections()) == 1
        client.close()
        assert mcp_connections() == []


def test_works_from_a_thread_whose_asyncio_loop_is_running(stdio_client: MCPClient) -> None:
    async def notebook_cell() -> tuple[str, int, int]:
        # Like a Jupyter cell: synchronous calls while this thread's loop is running.
        loop = asyncio.get_running_loop()
        before = len(asyncio.all_tasks(loop))
        text = tool(stdio_client, "add").invoke(json.dumps({"a": 20, "b": 22}))
        return text, before, len(asyncio.all_tasks(loop))  # nothing was scheduled on it

    seen: list[tuple[str, int, int]] = []
    thread = threading.Thread(target=lambda: seen.append(asyncio.run(notebook_cell())))
    thread.start()
    thread.join(60)
    assert seen == [("42", 1, 1)]


def test_a_client_used_before_fork_works_in_the_child_with_its_own_connection(
    stdio_client: MCPClient,
) -> None:
    parent_server = server_pid(stdio_client)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child process
        code = 1
        try:
            os.close(read)
            answer = {
                "add": tool(stdio_client, "add").invoke('{"a": 3, "b": 4}'),
                "server": server_pid(stdio_client),
                "threads": len(mcp_connections()),
            }
            stdio_client.close()
            answer["threads_after_close"] = len(mcp_connections())
            os.write(write, json.dumps(answer).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = json.loads(pipe.read() or "{}")
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert answer["add"] == "7"
    assert answer["server"] != parent_server  # the child started its own server
    assert answer["threads"] == 1
    assert answer["threads_after_close"] == 0
    assert server_pid(stdio_client) == parent_server  # the parent's connection is untouched
