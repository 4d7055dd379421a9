"""agentkit.a2a.RemoteA2AAgent against agentkit's own A2A server on a real loopback WSGI server:
as the Runner's agent, as an AgentTool of a ChatModelAgent, in a workflow, and resumed across
processes after the remote agent asked for input."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a")

from werkzeug.serving import make_server

from agentkit import (
    AgentTool,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    SequentialAgent,
    with_checkpoint_id,
)
from agentkit.a2a import A2AError, A2AInputRequired, RemoteA2AAgent, to_a2a
from agentkit.checkpoint import FileCheckPointStore, InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message
from tests.interop_agents import make_agent

ROOT = Path(__file__).resolve().parent.parent
GUARD = 60.0


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(GUARD)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    app = to_a2a(make_agent("remote_helper"))
    with serving(app) as where:
        yield where
    app.close()


def test_the_card_names_the_agent_and_a_turn_returns_the_remote_answer(url: str) -> None:
    remote = RemoteA2AAgent(url)
    assert remote.name == "remote_helper"
    assert remote.description == "A helper that echoes, pays and asks."
    result = Runner(remote).invoke("hello")
    assert result.text == "echo: hello"


def test_input_required_interrupts_and_a_resume_in_another_process_answers(
    url: str, tmp_path: Path
) -> None:
    store = tmp_path / "checkpoints"
    runner = Runner(RemoteA2AAgent(url, name="payer"), checkpoint_store=FileCheckPointStore(store))
    result = runner.invoke("pay ACME 4", with_checkpoint_id("pay-4"))
    assert result.interrupt is not None
    [point] = result.interrupt.contexts
    assert isinstance(point.info, A2AInputRequired)
    assert point.info.agent == "payer"
    assert point.info.question.startswith("Approve pay(")
    assert point.info.data["interrupts"][0]["info"]["tool_name"] == "pay"
    script = (
        "import sys\n"
        "from agentkit import Runner\n"
        "from agentkit.a2a import RemoteA2AAgent\n"
        "from agentkit.checkpoint import FileCheckPointStore\n"
        "url, store, point = sys.argv[1:]\n"
        "runner = Runner(RemoteA2AAgent(url, name='payer'), checkpoint_store=FileCheckPointStore(store))\n"
        "print(runner.resume('pay-4', targets={point: True}).result().text)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, url, str(store), point.id],
        capture_output=True, text=True, timeout=GUARD, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done: paid 4 to ACME"


def test_an_answer_text_goes_back_to_a_remote_question(url: str) -> None:
    runner = Runner(RemoteA2AAgent(url), checkpoint_store=InMemoryCheckPointStore())
    result = runner.invoke("ask", with_checkpoint_id("ask-1"))
    assert result.interrupt is not None
    [point] = result.interrupt.contexts
    assert point.info.question == "What is your favourite colour?"
    resumed = runner.resume("ask-1", targets={point.id: "teal"}).result()
    assert resumed.text == "done: colour is teal"


def test_as_an_agent_tool_of_a_chat_model_agent(url: str) -> None:
    def reply(messages: list[Message]) -> Message | str:
        if messages[-1].role == Role.TOOL:
            return f"the remote said: {messages[-1].content}"
        return calls_message(call("remote_helper", {"request": "hi there"}, id="r1"))

    boss = ChatModelAgent(
        "boss", "delegates", ScriptedChatModel(reply), tools=[AgentTool(RemoteA2AAgent(url))]
    )
    assert Runner(boss).invoke("go").text == "the remote said: echo: hi there"


def test_in_a_workflow_each_step_reads_the_last(url: str) -> None:
    first = ChatModelAgent("first", "says a word", ScriptedChatModel(["ping"]))
    flow = SequentialAgent("flow", "first then the remote", [first, RemoteA2AAgent(url)])
    result = Runner(flow).invoke("start")
    assert result.text == "echo: For context: [first] said: ping."


def test_an_unreachable_agent_is_an_a2a_error() -> None:
    with socket_closed() as dead, pytest.raises(A2AError, match="cannot be reached"):
        RemoteA2AAgent(dead, timeout=5)


@contextlib.contextmanager
def socket_closed() -> Iterator[str]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    """An agent of a2a-sdk's own server (Starlette on uvicorn) in a subprocess."""
    pytest.importorskip("uvicorn")
    import socket
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "a2a_servers" / "sdk_agent.py"), str(port)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + GUARD
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the a2a-sdk server did not listen"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=15)
        if process.stderr is not None:
            process.stderr.close()


def test_against_a2a_sdks_own_server_an_answer_and_an_input_required_round(sdk_url: str) -> None:
    remote = RemoteA2AAgent(sdk_url)
    assert remote.name == "sdk_agent"
    runner = Runner(remote, checkpoint_store=InMemoryCheckPointStore())
    assert runner.invoke("hello").text == "sdk echo: hello"
    result = runner.invoke("pay 3", with_checkpoint_id("sdk-pay"))
    assert result.interrupt is not None
    [point] = result.interrupt.contexts
    assert point.info.question == "approve the payment?"
    assert runner.resume("sdk-pay", targets={point.id: "approve"}).result().text == "sdk: approved"
