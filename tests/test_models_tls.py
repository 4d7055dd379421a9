"""Deadlines and aborts over TLS: the guarded socket layer under httpcore's TLS stream.

A self-signed certificate is made with the ``openssl`` command line (a real subprocess) and
trusted through the client's shared SSL context for the duration of each test.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentkit.models._http._transport as transport
from agentkit import AgentCancelledError, CancelHandle, ChatModelAgent, Runner, with_cancel
from agentkit.errors import APITimeoutError
from agentkit.models import OpenAIChatModel
from agentkit.schema import user_message
from agentkit.testing import no_thread_leak
from tests.misbehaving_server import RawServer, replay, silent, sse_first_chunk_then_trickle

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")

GUARD = 10.0
STREAM = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"s\\u00e9cur"},'
    b'"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("tls")
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return key, cert


@pytest.fixture
def server_tls(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> Iterator[ssl.SSLContext]:
    key, cert = certificate
    client = ssl.create_default_context(cafile=str(cert))
    monkeypatch.setattr(transport, "_ssl_context", client)  # models made now trust it
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(cert), str(key))
    yield server


def test_a_stream_is_read_over_tls(server_tls: ssl.SSLContext) -> None:
    with (
        RawServer(replay(STREAM), tls=server_tls) as server,
        OpenAIChatModel("m", base_url=server.base_url, api_key="k") as model,
    ):
        assert [chunk.content for chunk in model.stream([user_message("hi")])] == ["sécur"]


def test_the_deadline_holds_over_tls(server_tls: ssl.SSLContext) -> None:
    with (
        RawServer(sse_first_chunk_then_trickle(0.05), tls=server_tls) as server,
        OpenAIChatModel("m", base_url=server.base_url, api_key="k", timeout=0.5) as model,
    ):
        reader = model.stream([user_message("hi")])
        assert reader.recv().content == "Hel"
        start = time.monotonic()
        with pytest.raises(APITimeoutError):
            list(reader)
        assert time.monotonic() - start < GUARD


@pytest.mark.parametrize("streaming", [False, True])
def test_a_cancel_aborts_a_request_over_tls(server_tls: ssl.SSLContext, streaming: bool) -> None:
    with (
        RawServer(silent, tls=server_tls) as server,
        OpenAIChatModel("m", base_url=server.base_url, api_key="k", timeout=60) as model,
    ):
        handle = CancelHandle()
        seen: list[BaseException] = []
        with no_thread_leak(timeout=GUARD):
            events = Runner(ChatModelAgent("a", "d", model), enable_streaming=streaming).query(
                "hi", with_cancel(handle)
            )

            def consume() -> None:
                seen.extend(event.err for event in events if event.err is not None)

            thread = threading.Thread(target=consume)
            thread.start()
            server.wait_for_request()
            handle.cancel()
            assert handle.wait(GUARD) is True
            thread.join(GUARD)
        assert len(seen) == 1 and isinstance(seen[0], AgentCancelledError)
        assert server.request_count == 1
