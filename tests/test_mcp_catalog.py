"""MCPClient's resources, resource templates and prompts, against a real mcp server (stdio)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from agentkit.mcp import MCPClient, MCPServerError

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
