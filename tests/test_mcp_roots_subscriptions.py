"""MCPClient's roots, resource subscriptions and the progress of reads and prompts, against a
real mcp server (stdio, ``mcp_servers/desk.py``)."""

from __future__ import annotations

import pathlib
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agentkit.mcp import MCPClient, MCPServerError
from agentkit.mcp._compat import mcp_major_version
from tests.mcp_servers.support import toolbox_client

if mcp_major_version() < 2:
    pytest.skip("the desk test server is written for mcp 2.x", allow_module_level=True)

DESK = Path(__file__).resolve().parent / "mcp_servers" / "desk.py"
WAIT = 30.0  # a failure guard only: notifications arrive within milliseconds


def desk(**options: Any) -> MCPClient:
    return MCPClient.stdio(sys.executable, [str(DESK)], **options)


class Inbox:
    """Notices handed to a client callback, with a wait for the n-th."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._changed = threading.Condition()

    def __call__(self, notice: dict[str, Any]) -> None:
        with self._changed:
            self.items.append(notice)
            self._changed.notify_all()

    def wait_for(self, count: int) -> list[dict[str, Any]]:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.items) >= count, WAIT), self.items
            return list(self.items)


def _text(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


def test_the_server_lists_the_roots_the_client_declared(tmp_path: pathlib.Path) -> None:
    named = {"uri": "file:///srv/shared", "name": "shared"}
    with desk(roots=["file:///work/project", tmp_path, named]) as client:
        assert client.roots == (
            {"uri": "file:///work/project"},
            {"uri": tmp_path.absolute().as_uri()},
            named,
        )
        listed = _text(client.call_tool("roots"))
    assert listed.splitlines() == [
        "file:///work/project -",
        f"{tmp_path.absolute().as_uri()} -",
        "file:///srv/shared shared",
    ]


def test_changed_roots_notify_the_server_which_lists_the_new_ones() -> None:
    logs = Inbox()
    with desk(roots=["file:///a"]) as client:
        client.on_log = logs
        assert _text(client.call_tool("roots")) == "file:///a -"
        client.set_roots([{"uri": "file:///b", "name": "bee"}])
        [log] = logs.wait_for(1)  # the server logs each notifications/roots/list_changed
        assert (log["level"], log["data"]) == ("info", "roots changed")
        assert _text(client.call_tool("roots")) == "file:///b bee"


def test_a_client_without_roots_declares_none_until_it_sets_some() -> None:
    with desk() as client:
        assert client.roots is None
        with pytest.raises(MCPServerError, match="List roots not supported"):
            client.call_tool("roots")  # mcp's session refuses the server's roots/list
        client.set_roots(["file:///late"])  # reconnects to declare the capability
        assert _text(client.call_tool("roots")) == "file:///late -"


@pytest.mark.parametrize(
    ("roots", "error", "match"),
    [
        ("file:///one", TypeError, "not one root"),
        (["https://example.com"], ValueError, "must be a file:// URI"),
        ([{"uri": "file:///x", "label": "y"}], ValueError, "'uri' and"),
        ([42], TypeError, "a root is a file:// URI"),
    ],
)
def test_roots_that_are_not_file_uris_are_refused_at_once(
    roots: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        desk(roots=roots)
    with desk(roots=[]) as client, pytest.raises(error, match=match):
        client.set_roots(roots)


def test_updates_of_a_subscribed_resource_go_to_the_callback_until_unsubscribed() -> None:
    updates = Inbox()
    with desk() as client:
        client.on_resource_updated = updates
        assert _text(client.call_tool("write", {"text": "one"})) == "written; nobody subscribed"
        client.subscribe_resource("note://status")
        assert _text(client.call_tool("write", {"text": "two"})) == "written; subscribers notified"
        [update] = updates.wait_for(1)
        assert update == {"uri": "note://status"}
        assert client.read_resource("note://status")["contents"][0]["text"] == "two"
        client.unsubscribe_resource("note://status")
        assert _text(client.call_tool("write", {"text": "three"})) == "written; nobody subscribed"
    assert updates.items == [{"uri": "note://status"}]


def test_a_subscription_is_renewed_when_the_client_reconnects() -> None:
    updates = Inbox()
    with desk() as client:
        client.on_resource_updated = updates
        client.subscribe_resource("note://status")
        client.set_roots(["file:///r"])  # declaring roots reconnects: a new server process
        assert _text(client.call_tool("roots")) == "file:///r -"
        assert _text(client.call_tool("write", {"text": "x"})) == "written; subscribers notified"
        assert updates.wait_for(1) == [{"uri": "note://status"}]


def test_a_server_without_subscriptions_answers_subscribe_with_an_error() -> None:
    with toolbox_client() as client, pytest.raises(MCPServerError):
        client.subscribe_resource("tool://anything")
    with desk() as client, pytest.raises(ValueError, match="non-empty"):
        client.subscribe_resource("")


def test_reads_and_prompts_report_progress_to_the_callback() -> None:
    progress = Inbox()
    with desk() as client:
        client.on_progress = progress
        read = client.read_resource("note://status")
        assert read["contents"][0]["text"] == "idle"
        prompt = client.get_prompt("greet")
        assert prompt["messages"][0]["content"]["text"] == "hello"
        got = progress.wait_for(3)
    assert got == [
        {"resource": "note://status", "progress": 1, "total": 2, "message": "reading"},
        {"resource": "note://status", "progress": 2, "total": 2, "message": "read"},
        {"prompt": "greet", "progress": 1, "total": None, "message": "filling"},
    ]


def test_without_a_progress_callback_reads_ask_for_no_progress() -> None:
    with desk() as client:
        assert client.read_resource("note://status")["contents"][0]["text"] == "idle"
        assert client.get_prompt("greet")["messages"][0]["role"] == "user"
