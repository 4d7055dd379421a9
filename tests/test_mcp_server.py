"""to_mcp_server: an agentkit agent served over MCP, called by the ``mcp`` package's own client.

Every test runs a real server process (stdio, or streamable HTTP on a free loopback port)
and talks to it with ``mcp.ClientSession``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from mcp import types  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

SERVER = Path(__file__).resolve().parent / "mcp_servers" / "agent_server.py"
ROOT = Path(__file__).resolve().parent.parent
GUARD = 60.0  # a failure guard, never a pace

pytestmark = pytest.mark.skipif(
    int(mcp.__version__.split(".")[0]) < 2 if hasattr(mcp, "__version__") else False,
    reason="the server tests drive mcp 2.x's client",
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_process(*extra: str, log: Path | None = None) -> Any:
    """The agent server on streamable HTTP at a free loopback port; yields its URL.

    Its stderr (its log) goes to ``log`` when given."""
    port = _free_port()
    errors = open(log, "w") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port), *extra],
        env=_env(), stdout=subprocess.DEVNULL, stderr=errors,
    )
    try:
        deadline = time.monotonic() + GUARD
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, "the HTTP server exited"
            assert time.monotonic() < deadline, "the HTTP server did not listen"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if log is not None:
            errors.close()  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def session_over(
    transport: str,
    where: str = "",
    *,
    elicit: Callable[[Any, Any], Awaitable[Any]] | None = None,
    logs: list[Any] | None = None,
    headers: dict[str, str] | None = None,
    store: str | None = None,
) -> AsyncIterator[ClientSession]:
    async def on_log(params: Any) -> None:
        if logs is not None:
            logs.append(params)

    options: dict[str, Any] = {"logging_callback": on_log}
    if elicit is not None:
        options["elicitation_callback"] = elicit
    if transport == "stdio":
        args = [str(SERVER), "stdio", *(["--store", store] if store else [])]
        params = StdioServerParameters(command=sys.executable, args=args, env=_env())
        async with stdio_client(params) as (read, write), ClientSession(
            read, write, **options
        ) as session:
            await session.initialize()
            yield session
    else:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers=headers or {}, timeout=GUARD) as http, \
                streamable_http_client(where, http_client=http) as streams, \
                ClientSession(streams[0], streams[1], **options) as session:
            await session.initialize()
            yield session


SERVER_LOG: list[Path] = []  # the HTTP server's log file


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Any:
    log = tmp_path_factory.mktemp("mcp-http") / "server.log"
    SERVER_LOG[:] = [log]
    with http_process("--owner-header", "X-User", log=log) as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> tuple[str, str]:
    if request.param == "stdio":
        return ("stdio", "")
    return ("http", request.getfixturevalue("http_url"))


def text_of(result: Any) -> str:
    return "".join(part.text for part in result.content if getattr(part, "type", "") == "text")


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def guarded() -> None:
        with anyio.fail_after(GUARD * 2):
            await test()

    anyio.run(guarded)


def test_lists_one_tool_named_after_the_agent_with_a_string_input(transport: tuple[str, str]) -> None:
    async def body() -> None:
        async with session_over(*transport) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert set(tools) == {"helper", "resume_helper"}
            schema = tools["helper"].input_schema
            assert schema["properties"]["input"]["type"] == "string"
            assert schema["required"] == ["input"]

    run(body)


def test_a_call_runs_the_agent_and_returns_its_answer_with_progress_and_logs(
    transport: tuple[str, str],
) -> None:
    progress: list[tuple[float, str | None]] = []
    logs: list[Any] = []

    async def record(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    on_progress: Any = record

    async def body() -> None:
        async with session_over(*transport, logs=logs) as session:
            result = await session.call_tool(
                "helper", {"input": "hello there"}, progress_callback=on_progress
            )
            assert not result.is_error
            assert text_of(result) == "echo: hello there"

    run(body)
    assert progress and progress[-1][1] == "helper: echo: hello there"
    assert [log.data["text"] for log in logs] == ["echo: hello there"]
    assert logs[0].logger == "helper"


def test_without_elicitation_an_approval_waits_and_resume_tool_continues(
    transport: tuple[str, str],
) -> None:
    async def body() -> None:
        async with session_over(*transport) as session:
            waiting = await session.call_tool("helper", {"input": "pay ACME 120"})
            assert not waiting.is_error
            assert "waiting for a decision: Approve pay(" in text_of(waiting)
            run_id = waiting.structured_content["run_id"]
            assert waiting.structured_content["status"] == "waiting"
            edited = await session.call_tool(
                "resume_helper",
                {"run_id": run_id, "decision": "edit", "arguments": '{"payee": "ACME", "amount": 100}'},
            )
            assert text_of(edited) == "done: paid 100 to ACME"
            again = await session.call_tool("resume_helper", {"run_id": run_id})
            assert again.is_error and "no waiting run" in text_of(again)

    run(body)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"decision": "approve"}, "done: paid 120 to ACME"),
        ({"decision": "reject", "reason": "too much"}, "done: The user rejected this call of pay; it was not run. Reason: too much"),
        ({"decision": "edit", "arguments": '{"payee": "ACME", "amount": 99}'}, "done: paid 99 to ACME"),
    ],
)
def test_an_approval_becomes_an_elicitation_when_the_client_supports_it(
    transport: tuple[str, str], answer: dict[str, Any], expected: str
) -> None:
    asked: list[Any] = []

    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params)
        return types.ElicitResult(action="accept", content=answer)

    async def body() -> None:
        async with session_over(*transport, elicit=elicit) as session:
            result = await session.call_tool("helper", {"input": "pay ACME 120"})
            assert text_of(result) == expected

    run(body)
    [params] = asked
    assert params.message == 'Approve pay({"payee": "ACME", "amount": 120})?'
    assert params.requested_schema["properties"]["decision"]["enum"] == ["approve", "reject", "edit"]


def test_a_question_is_elicited_as_text_and_cancelling_it_leaves_the_run_waiting() -> None:
    async def answer(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"answer": "green"})

    async def cancel(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="cancel")

    async def body() -> None:
        async with session_over("stdio", elicit=answer) as session:
            result = await session.call_tool("helper", {"input": "ask"})
            assert text_of(result) == "done: colour is green"
        async with session_over("stdio", elicit=cancel) as session:
            result = await session.call_tool("helper", {"input": "ask"})
            run_id = result.structured_content["run_id"]
            resumed = await session.call_tool("resume_helper", {"run_id": run_id, "answer": "red"})
            assert text_of(resumed) == "done: colour is red"

    run(body)


def test_bad_input_is_an_error_result_and_starts_nothing(transport: tuple[str, str]) -> None:
    async def body() -> None:
        async with session_over(*transport) as session:
            big = await session.call_tool("helper", {"input": "x" * 100_001})
            assert big.is_error and "at most 100000" in text_of(big)
            missing = await session.call_tool("helper", {})
            assert missing.is_error
            unknown = await session.call_tool("resume_helper", {"run_id": "0" * 32})
            assert unknown.is_error and "no waiting run" in text_of(unknown)
            forged = await session.call_tool("resume_helper", {"run_id": "../../etc/passwd"})
            assert forged.is_error and "no waiting run" in text_of(forged)
            waiting = await session.call_tool("helper", {"input": "pay ACME 1"})
            run_id = waiting.structured_content["run_id"]
            wrong = await session.call_tool(
                "resume_helper", {"run_id": run_id, "decision": "edit", "arguments": "[1]"}
            )
            assert wrong.is_error and "JSON object" in text_of(wrong)
            still = await session.call_tool("resume_helper", {"run_id": run_id})
            assert text_of(still) == "done: paid 1 to ACME"

    run(body)


def test_another_callers_run_cannot_be_resumed(http_url: str) -> None:
    async def body() -> None:
        async with session_over("http", http_url, headers={"X-User": "alice"}) as alice:
            waiting = await alice.call_tool("helper", {"input": "pay ACME 5"})
            run_id = waiting.structured_content["run_id"]
        async with session_over("http", http_url, headers={"X-User": "mallory"}) as mallory:
            stolen = await mallory.call_tool("resume_helper", {"run_id": run_id})
            assert stolen.is_error and "no waiting run" in text_of(stolen)
        async with session_over("http", http_url) as anonymous:
            stolen = await anonymous.call_tool("resume_helper", {"run_id": run_id})
            assert stolen.is_error
        async with session_over("http", http_url, headers={"X-User": "alice"}) as alice:
            done = await alice.call_tool("resume_helper", {"run_id": run_id})
            assert text_of(done) == "done: paid 5 to ACME"

    run(body)


def test_a_waiting_run_survives_a_server_restart_with_a_checkpoint_store(tmp_path: Path) -> None:
    store = str(tmp_path / "checkpoints")

    async def body() -> None:
        async with session_over("stdio", store=store) as session:
            waiting = await session.call_tool("helper", {"input": "pay ACME 7"})
            run_id = waiting.structured_content["run_id"]
        # A new server process: the run is found in the store.
        async with session_over("stdio", store=store) as session:
            done = await session.call_tool("resume_helper", {"run_id": run_id})
            assert text_of(done) == "done: paid 7 to ACME"

    run(body)


def test_a_client_cancel_cancels_the_run(transport: tuple[str, str]) -> None:
    logs: list[Any] = []

    async def body() -> None:
        async with session_over(*transport, logs=logs) as session:
            with anyio.move_on_after(GUARD) as scope:
                async with anyio.create_task_group() as group:
                    async def call() -> None:
                        await session.call_tool("helper", {"input": "slow"})

                    group.start_soon(call)
                    # The run has started its slow tool once its tool call was logged.
                    while not any(log.data.get("kind") == "tool_calls" for log in logs):
                        await anyio.sleep(0.02)
                    group.cancel_scope.cancel()
            assert not scope.cancelled_caught
            # The server is free and answers the next call at once.
            result = await session.call_tool("helper", {"input": "still there?"})
            assert text_of(result) == "echo: still there?"
            if transport[0] == "http":
                # The run itself was cancelled, not just the call abandoned: the server says so.
                with anyio.fail_after(GUARD):
                    while "agentkit: run cancelled" not in SERVER_LOG[0].read_text():
                        await anyio.sleep(0.05)

    run(body)
