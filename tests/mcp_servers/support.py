"""Starting the test MCP servers: stdio clients and HTTP server processes on loopback ports."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agentkit._aioloop import start_task
from agentkit.mcp import MCPClient

TOOLBOX = Path(__file__).resolve().parent / "toolbox.py"
ROGUE = Path(__file__).resolve().parent / "rogue.py"
STARTUP_TIMEOUT = 60.0  # a failure guard only: the server listens within a second or two


def toolbox_client(**options: Any) -> MCPClient:
    """A client of the toolbox server over stdio (started on first use)."""
    return MCPClient.stdio(sys.executable, [str(TOOLBOX)], **options)


class HTTPServer:
    """A test server as an HTTP process (``kind`` ``"http"`` or ``"sse"``) on 127.0.0.1.

    The toolbox server by default; ``script=ROGUE`` for the server that breaks the protocol.
    """

    def __init__(self, kind: str = "http", script: Path = TOOLBOX) -> None:
        self.kind = kind
        self.script = script
        self.port = 0
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        """The MCP endpoint."""
        path = "/sse" if self.kind == "sse" else "/mcp"
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        """Start the process (on the previous port when restarting) and wait until it listens."""
        self.process = subprocess.Popen(
            [sys.executable, str(self.script), self.kind, "--port", str(self.port)],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], STARTUP_TIMEOUT)
        line = self.process.stdout.readline() if ready else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the {self.kind} test server did not start (said {line!r})")
        self.port = int(line.split()[1])

    def said(self, expected: str) -> None:
        """Wait until the server says ``expected`` on a line of its stdout."""
        assert self.process is not None and self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], STARTUP_TIMEOUT)
        line = self.process.stdout.readline() if ready else ""
        assert line.strip() == expected, f"the {self.kind} test server said {line!r}"

    def stop(self) -> None:
        """Stop the process."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def restart(self) -> None:
        """Stop and start again on the same port: the server forgets every session."""
        self.stop()
        self.start()


@contextlib.contextmanager
def http_server(kind: str = "http", script: Path = TOOLBOX) -> Iterator[HTTPServer]:
    """A running HTTP test server (the toolbox server by default) for the block."""
    server = HTTPServer(kind, script)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def client_over(transport: str) -> Iterator[MCPClient]:
    """A toolbox client over ``"stdio"`` or ``"http"`` (with its own server process)."""
    if transport == "stdio":
        with toolbox_client() as client:
            yield client
    else:
        with http_server("http") as server, MCPClient.http(server.url) as client:
            yield client


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait until ``condition()`` is true (``timeout`` is a failure guard, not a pace)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        pause.wait(0.02)


async def _connection_tasks() -> list[str]:
    return sorted(
        task.get_name()
        for task in asyncio.all_tasks()
        if task.get_name().startswith("agentkit-mcp") and not task.done()
    )


def mcp_connections() -> list[str]:
    """The live MCP connections of this process: the names of their tasks on agentkit's
    event loop (``agentkit-mcp <server>``), read in the loop itself."""
    task = start_task(_connection_tasks, inherit_context=False)
    assert task.wait(STARTUP_TIMEOUT)
    return task.result()
