"""MCP tools from Flask request threads, served by a real threaded WSGI server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import httpx
import pytest

from agentkit import ChatModelAgent, Message, Role, Runner
from agentkit.mcp import MCPClient, MCPTool
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message
from tests.mcp_servers.support import toolbox_client

flask = pytest.importorskip("flask")
from werkzeug.serving import make_server  # noqa: E402

if TYPE_CHECKING:
    from flask import Flask


def create_app(client: MCPClient) -> Flask:
    app: Flask = flask.Flask(__name__)

    @app.get("/meet")
    def meet() -> str:
        # Made once per app and shared by every request thread.
        (tool,) = client.tools(allow=["meet"])
        assert isinstance(tool, MCPTool)
        arguments = json.dumps({"count": int(flask.request.args["count"])})
        return tool.invoke(arguments)

    @app.get("/sum")
    def total() -> str:
        a, b = int(flask.request.args["a"]), int(flask.request.args["b"])

        def reply(messages: list[Message]) -> Message | str:
            if messages[-1].role is Role.USER:
                return calls_message(call("add", {"a": a, "b": b}))
            return f"the sum is {messages[-1].content}"

        agent = ChatModelAgent("calc", "adds", ScriptedChatModel(reply), tools=client.tools())
        events = list(Runner(agent).query(f"{a} + {b}?"))
        return events[-1].output.message_output.get_message().content  # type: ignore[union-attr]

    return app


@contextmanager
def serving(app: Flask) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


def test_request_threads_share_one_client_and_call_concurrently() -> None:
    with toolbox_client() as client, serving(create_app(client)) as url:
        answers: list[str] = []

        def get(path: str) -> None:
            with httpx.Client(timeout=60) as http:
                answers.append(http.get(url + path).text)

        requests = [threading.Thread(target=get, args=("/meet?count=8",)) for _ in range(8)]
        for request in requests:
            request.start()
        for request in requests:
            request.join(60)
        assert answers == ["met 8"] * 8  # every request waited for all eight to be running
        get("/sum?a=20&b=22")
        assert answers[-1] == "the sum is 42"
