"""MCPClient's resources, resource templates and prompts, against a real mcp server (stdio)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agentkit import ChatModelAgent, Message, Role, Runner, with_checkpoint_id
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.mcp import MCPClient, MCPElicitation, MCPServerError, MCPTool
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

LIBRARY = Path(__file__).resolve().parent / "mcp_servers" / "library.py"


@pytest.fixture(scope="module")
def client() -> Iterator[MCPClient]:
    with MCPClient.stdio(sys.executable, [str(LIBRARY)]) as made:
        yield made


def test_resources_are_listed_and_read_in_the_wire_shape(client: MCPClient) -> None:
    [resource] = client.resources()
    assert resource["uri"] == "book://catalog"
    assert resource["name"] == "catalog" and resource["mimeType"] == "text/plain"
    read = client.read_resource("book://catalog")
    assert read["contents"][0]["text"] == "Dune\nEmma"
    assert read["contents"][0]["uri"] == "book://catalog"


def test_templates_are_listed_and_their_uris_read(client: MCPClient) -> None:
    [template] = client.resource_templates()
    assert template["uriTemplate"] == "book://{title}/summary"
    read = client.read_resource("book://Dune/summary")
    assert read["contents"][0]["text"] == "Dune: a very good book"


def test_prompts_are_listed_and_filled(client: MCPClient) -> None:
    [prompt] = client.prompts()
    assert prompt["name"] == "review"
    assert {argument["name"] for argument in prompt["arguments"]} == {"title", "tone"}
    got = client.get_prompt("review", {"title": "Emma", "tone": "short"})
    [message] = got["messages"]
    assert message["role"] == "user"
    assert message["content"] == {"type": "text", "text": "Write a short review of Emma."}


def test_unknown_names_are_server_errors(client: MCPClient) -> None:
    with pytest.raises(MCPServerError):
        client.get_prompt("nope")
    with pytest.raises(MCPServerError):
        client.read_resource("book://nowhere")
    with pytest.raises(ValueError, match="non-empty"):
        client.read_resource("")


def _reserving_agent(client: MCPClient) -> Runner:
    def reply(messages: list[Message]) -> Message | str:
        if messages[-1].role == Role.TOOL:
            return f"library: {messages[-1].content}"
        return calls_message(call("reserve", {"title": "Dune"}, id="r1"))

    agent = ChatModelAgent("reader", "reserves books", ScriptedChatModel(reply),
                           tools=client.tools(allow=["reserve"]))
    return Runner(agent, checkpoint_store=InMemoryCheckPointStore())


def test_an_elicitation_interrupts_the_run_and_a_dict_answers_it(client: MCPClient) -> None:
    runner = _reserving_agent(client)
    result = runner.invoke("reserve Dune", with_checkpoint_id("loan-1"))
    assert result.interrupt is not None
    [point] = result.interrupt.contexts
    assert isinstance(point.info, MCPElicitation)
    assert point.info.message == "Reserve Dune: for how many days?"
    assert set(point.info.schema["properties"]) == {"days", "confirm"}
    done = runner.resume("loan-1", targets={point.id: {"days": 3, "confirm": True}}).result()
    assert done.text == "library: reserved Dune for 3 days"


def test_false_declines_the_question(client: MCPClient) -> None:
    runner = _reserving_agent(client)
    result = runner.invoke("reserve Dune", with_checkpoint_id("loan-2"))
    assert result.interrupt is not None
    [point] = result.interrupt.contexts
    done = runner.resume("loan-2", targets={point.id: False}).result()
    assert done.text == "library: no reservation (decline)"


def test_an_answer_that_does_not_fit_the_schema_is_not_sent(client: MCPClient) -> None:
    runner = _reserving_agent(client)
    result = runner.invoke("reserve Dune", with_checkpoint_id("loan-3"))
    assert result.interrupt is not None
    [point] = result.interrupt.contexts
    done = runner.resume("loan-3", targets={point.id: {"days": 2}}).result(raise_errors=False)
    assert done.status == "failed"
    assert "MCPElicitationError" in str(done.error) and "'confirm'" in str(done.error)
    # Nothing reached the server: resumed from its last safe point, the call asks again.
    asked = runner.resume("loan-3").result()
    assert asked.interrupt is not None
    [again] = asked.interrupt.contexts
    assert again.info == point.info
    done = runner.resume("loan-3", targets={again.id: {"days": 2, "confirm": True}}).result()
    assert done.text == "library: reserved Dune for 2 days"


def test_a_question_outside_an_agent_run_is_declined(client: MCPClient) -> None:
    result = client.call_tool("reserve", {"title": "Emma"})
    assert result["content"][0]["text"] == "no reservation (decline)"
    (reserve,) = client.tools(allow=["reserve"])
    assert isinstance(reserve, MCPTool)
    assert reserve.invoke('{"title": "Emma"}') == "no reservation (cancel)"


def test_progress_and_logs_go_to_the_clients_callbacks() -> None:
    progress: list[dict[str, Any]] = []
    logs: list[dict[str, Any]] = []
    with MCPClient.stdio(sys.executable, [str(LIBRARY)]) as fresh:
        fresh.on_progress = progress.append
        fresh.on_log = logs.append
        (index,) = fresh.tools(allow=["index"])
        assert isinstance(index, MCPTool)
        assert index.invoke("{}") == "indexed"
    assert [(p["progress"], p["total"], p["message"]) for p in progress] == [(1, 2, "half"), (2, 2, "all")]
    assert progress[0]["tool"] == "index"
    assert [(log["level"], log["data"]) for log in logs] == [("info", "indexing")]


def test_sampling_is_off_by_default_and_answered_within_limits_when_allowed() -> None:
    seen: list[list[Message]] = []

    def answer(messages: list[Message]) -> str:
        seen.append(messages)
        return "short"

    with MCPClient.stdio(sys.executable, [str(LIBRARY)]) as fresh:
        (summarize,) = fresh.tools(allow=["summarize"])
        assert isinstance(summarize, MCPTool)
        refused = summarize.invoke('{"text": "a long text", "tokens": 50}')
        assert refused.startswith("sampling refused")
        fresh.allow_sampling(ScriptedChatModel(answer), max_tokens=100, max_requests=1)
        assert summarize.invoke('{"text": "a long text", "tokens": 50}') == "summary: short"
        huge = summarize.invoke('{"text": "x", "tokens": 1000000}')
        assert "asks for 1000000 tokens" in huge and "at most 100" in huge
        spent = summarize.invoke('{"text": "again", "tokens": 50}')
        assert "answered its 1 sampling requests already" in spent
    [messages] = seen
    assert [(m.role, m.content) for m in messages] == [(Role.SYSTEM, "Summarize."), (Role.USER, "a long text")]
