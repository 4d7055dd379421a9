"""The model's own httpx transport behaves like httpx's, and reaches no private attribute.

``OpenAIChatModel`` sends its requests through ``GuardedTransport``, an ``httpx.BaseTransport``
over an ``httpcore.ConnectionPool`` with a network backend that obeys the call's deadline and
abort. These tests hold it to httpx's own ``HTTPTransport``: against the same real loopback
servers, both raise the same httpx exceptions and reuse connections the same way. Should
httpx or httpcore change (a new exception, another mapping), a test here fails.
"""

from __future__ import annotations

import ast
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import httpcore
import httpx
import pytest

import agentkit
from agentkit.models._http._transport import httpx_error, make_client
from tests.misbehaving_server import Behaviour, RawServer, replay, silent

ROOT = Path(agentkit.__file__).resolve().parent
BODY = b'{"ok": true}'


def _clients() -> list[tuple[str, Callable[[], httpx.Client]]]:
    timeout = httpx.Timeout(5.0, read=0.3)
    return [
        ("httpx", lambda: httpx.Client(timeout=timeout)),
        ("agentkit", lambda: make_client(timeout, {})),
    ]


def _raised(make: Callable[[], httpx.Client], url: str) -> type[BaseException] | None:
    with make() as client:
        try:
            client.post(url, content=b"{}").read()
        except Exception as error:
            return type(error)
    return None


def _short_body(connection: socket.socket, stop: threading.Event, server: RawServer) -> bool:
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + BODY)
    connection.shutdown(socket.SHUT_WR)  # 88 bytes early
    return False


def _garbage(connection: socket.socket, stop: threading.Event, server: RawServer) -> bool:
    connection.sendall(b"this is not HTTP\r\n\r\n")
    connection.shutdown(socket.SHUT_WR)
    return False


def _keep_alive(connection: socket.socket, stop: threading.Event, server: RawServer) -> bool:
    connection.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
        + BODY
    )
    return True  # serve the next request on this connection


@pytest.mark.parametrize(
    ("behaviour", "expected"),
    [
        (_short_body, httpx.RemoteProtocolError),
        (_garbage, httpx.RemoteProtocolError),
        (silent, httpx.ReadTimeout),
        (replay(BODY, "application/json"), None),
    ],
    ids=["body-cut-short", "not-http", "silent", "complete"],
)
def test_a_misbehaving_server_raises_what_httpx_itself_raises(
    behaviour: Behaviour, expected: type[BaseException] | None
) -> None:
    raised = {}
    for name, make in _clients():
        with RawServer(behaviour) as server:
            raised[name] = _raised(make, server.base_url + "/chat/completions")
    assert raised == {"httpx": expected, "agentkit": expected}


def test_a_refused_connection_raises_what_httpx_itself_raises() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1/chat/completions"  # nothing listens there now
    assert {name: _raised(make, url) for name, make in _clients()} == {
        "httpx": httpx.ConnectError,
        "agentkit": httpx.ConnectError,
    }


def test_connections_are_kept_alive_and_reused_like_httpx_does() -> None:
    for _, make in _clients():
        with RawServer(_keep_alive) as server, make() as client:
            replies = [client.post(server.base_url + "/x", content=b"{}") for _ in range(3)]
            assert [reply.content for reply in replies] == [BODY] * 3
            assert server.request_count == 3
            assert server.connection_count == 1  # one connection served all three


def test_every_httpcore_error_maps_to_the_httpx_error_of_the_same_name() -> None:
    names = [
        name
        for name in httpcore.__all__
        if isinstance(getattr(httpcore, name), type)
        and issubclass(getattr(httpcore, name), Exception)
    ]
    unmapped = []
    for name in names:
        mapped = httpx_error(getattr(httpcore, name)("boom"))
        if mapped is None:
            unmapped.append(name)
            continue
        assert type(mapped) is getattr(httpx, name), name
        assert str(mapped) == "boom"
    # The pool's internal retry signal, which httpx does not map either. A new httpcore
    # exception shows up here: map it as httpx does.
    assert unmapped == ["ConnectionNotAvailable"]
    assert not hasattr(httpx, "ConnectionNotAvailable")
    assert httpx_error(ValueError("not httpcore's")) is None


def _private_uses(path: Path) -> list[str]:
    """Where ``path`` imports a private httpx/httpcore module or reads their private names."""
    found: list[str] = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            top, _, rest = node.module.partition(".")
            if top in ("httpx", "httpcore") and rest.startswith("_"):
                found.append(f"{path.name}:{node.lineno}: from {node.module} import")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top, _, rest = alias.name.partition(".")
                if top in ("httpx", "httpcore") and rest.startswith("_"):
                    found.append(f"{path.name}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.Attribute):
            private = node.attr.startswith("_") and not node.attr.endswith("__")
            on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
            if (node.attr == "_pool" and not on_self) or (
                private
                and isinstance(node.value, ast.Name)
                and node.value.id in ("httpx", "httpcore")
            ):
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    return found


def test_agentkit_uses_no_private_httpx_or_httpcore_name() -> None:
    found = [use for path in sorted(ROOT.rglob("*.py")) for use in _private_uses(path)]
    assert found == []


def test_the_private_use_check_finds_the_old_pool_replacement(tmp_path: Path) -> None:
    old = tmp_path / "old.py"
    old.write_text(
        "import httpx\nfrom httpx._transports.default import HTTPTransport\n"
        "transport = httpx.HTTPTransport()\ntransport._pool = None\nhttpx._config\n"
    )
    assert len(_private_uses(old)) == 3
