"""MCP tools inside agent runs: end to end with the Runner, concurrent tool calls, cancel, interrupts."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    CancelHandle,
    ChatModelAgent,
    ImagePart,
    Message,
    Role,
    Runner,
    interrupt,
    tool,
    with_cancel,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.mcp import MCPClient, MCPTool
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak
from tests.mcp_servers.support import client_over, http_server, toolbox_client, wait_until


@pytest.fixture
def client() -> Iterator[MCPClient]:
    with toolbox_client() as made:
        yield made


def final_text(events: list[AgentEvent]) -> str:
    assert [e.err for e in events] == [None] * len(events)
    output = events[-1].output
    assert output is not None and output.message_output is not None
    return output.message_output.get_message().content


PICTURE = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f0005000201e2d6e1c10000000049454e44ae426082"
)


def tool_messages(messages: list[Message]) -> dict[str, str]:
    return {m.tool_name: m.content for m in messages if m.role is Role.TOOL}


def test_a_chat_model_agent_calls_mcp_tools_through_the_runner(client: MCPClient) -> None:
    model = ScriptedChatModel([
        calls_message(
            call("box_add", {"a": 19, "b": 23}),
            call("box_picture", {}),
            call("box_fail", {"message": "no route to Mars"}),
        ),
        "19 + 23 = 42.",
    ])
    agent = ChatModelAgent("calc", "does sums", model, tools=client.tools(prefix="box_"))
    events = list(Runner(agent).query("What is 19 + 23?"))
    assert final_text(events) == "19 + 23 = 42."
    # The model was told the server's tools, prefixed, with the server's schemas.
    told = {info.name: info for info in model.calls[0].tools}
    assert {"box_add", "box_echo", "box_slow"} <= set(told)
    assert told["box_add"].parameters["required"] == ["a", "b"]
    results = tool_messages(model.calls[1].messages)
    assert results["box_add"] == "42"
    picture = next(m for m in model.calls[1].messages if m.tool_name == "box_picture")
    assert picture.parts == (ImagePart(PICTURE, media_type="image/png"),)
    assert results["box_picture"] == ""
    assert results["box_fail"].startswith("error from tool box_fail: ")
    assert "no route to Mars" in results["box_fail"]


def test_the_tool_calls_of_one_model_reply_run_concurrently(client: MCPClient) -> None:
    meet = [call("meet", {"count": 16}) for _ in range(16)]
    model = ScriptedChatModel([calls_message(*meet), "all met"])
    agent = ChatModelAgent("a", "d", model, tools=client.tools(allow=["meet"]))
    assert final_text(list(Runner(agent).query("meet"))) == "all met"
    sent = [m.content for m in model.calls[1].messages if m.role is Role.TOOL]
    assert sent == ["met 16"] * 16  # each call returned only once all 16 were running


def test_cancelling_a_run_cancels_its_in_flight_mcp_call() -> None:
    with http_server("http") as server, MCPClient.http(server.url) as client, MCPClient.http(
        server.url
    ) as observer:
        model = ScriptedChatModel([calls_message(call("slow", {"seconds": 600})), "never"])
        agent = ChatModelAgent("a", "d", model, tools=client.tools(allow=["slow"]))
        handle = CancelHandle()
        events: list[AgentEvent] = []
        runner = threading.Thread(
            target=lambda: events.extend(Runner(agent).query("wait", with_cancel(handle)))
        )
        runner.start()
        assert observer.call_tool("slow_started", {})["content"][0]["text"] == "started"
        handle.cancel()
        assert handle.wait(60) is True  # well before the 600 s the tool would sleep
        runner.join(60)
        assert isinstance(events[-1].err, AgentCancelledError)
        assert len(model.calls) == 1
        # The server was told: its handler was cancelled.
        assert observer.call_tool("cancelled_calls", {"wait": True})["content"][0]["text"] == "1"
        # The client goes on working for the next run.
        assert client.call_tool("add", {"a": 1, "b": 2})["content"][0]["text"] == "3"


def test_closing_the_event_iterator_cancels_the_in_flight_mcp_call() -> None:
    with http_server("http") as server, MCPClient.http(server.url) as client, MCPClient.http(
        server.url
    ) as observer:
        model = ScriptedChatModel([calls_message(call("slow", {"seconds": 600})), "never"])
        agent = ChatModelAgent("a", "d", model, tools=client.tools(allow=["slow"]))
        observer.tools()  # both clients are connected before the run
        with no_thread_leak(timeout=60):
            events = Runner(agent).query("wait")
            assert observer.call_tool("slow_started", {})["content"][0]["text"] == "started"
            events.close()  # the consumer is done: the run is cancelled and its threads end
        assert observer.call_tool("cancelled_calls", {"wait": True})["content"][0]["text"] == "1"


def test_a_wrapper_tool_asks_for_approval_then_calls_the_mcp_tool_after_resume(
    client: MCPClient,
) -> None:
    mcp_add = next(t for t in client.tools() if t.info().name == "add")
    assert isinstance(mcp_add, MCPTool)
    calls_made: list[str] = []

    @tool
    def approved_add(a: int, b: int) -> str:
        """Add two numbers on the server, once a human approved it."""
        if not interrupt(f"add {a} and {b}?"):
            return "the user said no"
        calls_made.append(f"{a}+{b}")
        return mcp_add.invoke(json.dumps({"a": a, "b": b}))

    model = ScriptedChatModel([calls_message(call("approved_add", {"a": 40, "b": 2})), "It is 42."])
    store = InMemoryCheckPointStore()
    runner = Runner(ChatModelAgent("a", "d", model, tools=[approved_add]), checkpoint_store=store)
    first = list(runner.query("40 + 2?", with_checkpoint_id("run-1")))
    action = first[-1].action
    assert action is not None and action.interrupted is not None
    assert calls_made == []
    (context,) = action.interrupted.contexts
    assert context.info == "add 40 and 2?"
    resumed = list(runner.resume("run-1", targets={context.id: True}))
    assert final_text(resumed) == "It is 42."
    assert calls_made == ["40+2"]
    assert tool_messages(model.calls[1].messages)["approved_add"] == "42"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_changed_tool_list_is_listed_again(transport: str) -> None:
    with client_over(transport) as client:
        before = client.tools()
        assert "shout" not in [t.info().name for t in before]
        assert client.call_tool("grow", {"name": "shout"})["content"][0]["text"] == "added shout"
        # The client lists again in the background once the server announces the change.
        wait_until(lambda: client.tool_info("shout") is not None)
        shout = next(t for t in client.tools() if t.info().name == "shout")
        assert shout.info().description == "A tool added at run time (shout)."
        assert shout.invoke('{"value": "hi"}') == "shout: hi"  # type: ignore[attr-defined]
        assert len(client.tools()) == len(before) + 1


def test_agent_runs_leave_no_thread_behind() -> None:
    with no_thread_leak(), toolbox_client() as client:
        model = ScriptedChatModel([calls_message(call("echo", {"text": "x"})), "done"])
        agent = ChatModelAgent("a", "d", model, tools=client.tools())
        assert final_text(list(Runner(agent).query("go"))) == "done"
