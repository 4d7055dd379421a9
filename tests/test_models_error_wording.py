"""Every OpenAIChatModel error says, in Python words, what went wrong, with the values, and what to do.

Each failure is real: error statuses from a loopback ``FakeOpenAIServer``, a refused
connection, an HTML page where the API should be, a stalled stream, wrong constructor
arguments. Every message is also checked for Go-style wording (``nil``, ``not exist``,
``failed to ...``, ``[name:...]``).
"""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Iterator

import pytest

from agentkit.errors import ModelError
from agentkit.models import OpenAIChatModel
from agentkit.schema import user_message
from agentkit.testing import FakeOpenAIServer, Reply
from tests.misbehaving_server import RawServer, replay, sse_first_chunk_then_trickle

GO_WORDING = re.compile(r"\bnil\b|not exist|failed to|\[\w+:|\w+\.(?:Generate|Stream|Resume):")


def _assert_python_words(message: str) -> None:
    assert not GO_WORDING.search(message), message


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


def _error(server_url: str, **kwargs: object) -> ModelError:
    options: dict[str, object] = {"api_key": "k", "timeout": 10, "max_retries": 0, **kwargs}
    with (
        OpenAIChatModel("gpt-test", base_url=server_url, **options) as model,  # type: ignore[arg-type]
        pytest.raises(ModelError) as caught,
    ):
        model.generate([user_message("hi")])
    _assert_python_words(str(caught.value))
    return caught.value


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (400, "check the options and the messages"),
        (401, "check api_key= or the OPENAI_API_KEY environment variable"),
        (403, "may not use this model or endpoint"),
        (404, "check the model name and base_url"),
        (413, "shorten the conversation"),
        (429, "raise max_retries= to wait longer"),
        (500, "an error on the server's side; it may pass: try again later"),
        (503, "an error on the server's side; it may pass: try again later"),
    ],
)
def test_an_error_status_names_the_status_the_url_the_servers_words_and_what_to_do(
    server: FakeOpenAIServer, status: int, hint: str
) -> None:
    server.queue(Reply(status=status, error="the server's own words", retry_after=0))
    error = _error(server.base_url)
    message = str(error)
    assert message.startswith(
        f"HTTP {status} from {server.base_url}/chat/completions: the server's own words ("
    )
    assert message.endswith(f"{hint})")
    assert error.status_code == status


def test_a_refused_connection_says_where_and_what_to_check() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    message = str(_error(url))
    assert message.startswith(f"could not talk to {url}/chat/completions (ConnectError: ")
    assert message.endswith(
        "check base_url (or OPENAI_BASE_URL) and that the server is running and reachable"
    )


def test_a_page_that_is_not_the_api_says_so_and_asks_about_base_url() -> None:
    page = b"<html><body>Welcome to nginx!</body></html>"
    with RawServer(replay(page, "text/html")) as raw:
        message = str(_error(raw.base_url))
    assert "sent a response that is not valid JSON: '<html><body>Welcome to nginx!" in message
    assert "is base_url the root of an OpenAI-compatible API" in message


def test_a_json_answer_of_another_shape_asks_about_base_url() -> None:
    with RawServer(replay(b'{"status": "ok"}', "application/json")) as raw:
        message = str(_error(raw.base_url))
    assert "without choices[0].message (KeyError: 'choices')" in message
    assert "is base_url the root of an OpenAI-compatible API" in message


def test_a_timeout_says_how_long_and_how_to_wait_longer() -> None:
    with (
        RawServer(sse_first_chunk_then_trickle(0.05)) as raw,
        OpenAIChatModel("m", base_url=raw.base_url, api_key="k", timeout=0.3) as model,
    ):
        reader = model.stream([user_message("hi")])
        reader.recv()
        with pytest.raises(ModelError) as caught:
            list(reader)
    message = str(caught.value)
    _assert_python_words(message)
    assert "stalled: no data for 0.3 s after 1 chunks" in message
    assert message.endswith("pass a larger OpenAIChatModel(..., timeout=...)")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"model": ""}, "OpenAIChatModel needs a model name as its first argument (got '')"),
        ({"model": None}, "needs a model name as its first argument (got None)"),
        ({"max_retries": -1}, "max_retries must be an int >= 0, the retries after a failed"),
        ({"max_retries": "3"}, "max_retries must be an int >= 0, the retries after a failed"),
        ({"max_retries": True}, "(got True)"),
        ({"timeout": 0}, "timeout must be a number of seconds > 0 (got 0)"),
        ({"timeout": "10"}, "timeout must be a number of seconds > 0 (got '10')"),
        ({"timeout": math.nan}, "timeout must be a number of seconds > 0 (got nan)"),
        ({"max_response_bytes": 0}, "max_response_bytes must be a number of bytes > 0, or None"),
    ],
)
def test_a_wrong_argument_is_named_with_its_value(
    arguments: dict[str, object], expected: str
) -> None:
    options: dict[str, object] = {"model": "m", "base_url": "http://127.0.0.1:9/v1", **arguments}
    with pytest.raises(ValueError) as caught:
        OpenAIChatModel(**options)  # type: ignore[arg-type]
    assert expected in str(caught.value)
    _assert_python_words(str(caught.value))
