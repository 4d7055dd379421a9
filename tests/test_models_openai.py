"""OpenAIChatModel against a real loopback HTTP server (agentkit.testing.FakeOpenAIServer)."""

from __future__ import annotations

import email.utils
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import httpx
import pytest

import agentkit
import agentkit.models.openai._wire as openai_module
from agentkit.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    IncompleteStreamError,
    ModelError,
    PermissionDeniedError,
    RateLimitError,
)
from agentkit.models import ModelOptions, OpenAIChatModel, ToolCallingChatModel
from agentkit.models.openai import parse_retry_after
from agentkit.schema import (
    FunctionCall,
    Message,
    Role,
    TokenUsage,
    ToolCall,
    ToolInfo,
    assistant_message,
    concat_messages,
    system_message,
    tool_message,
    user_message,
)
from agentkit.testing import FakeOpenAIServer, Reply, call

WEATHER = ToolInfo(
    "get_weather",
    "Return the weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


class FastRetryModel(OpenAIChatModel):
    """Backoff in milliseconds, so retry tests stay fast."""

    retry_initial_delay = 0.01
    retry_max_delay = 0.02


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture
def model(server: FakeOpenAIServer) -> Iterator[OpenAIChatModel]:
    with FastRetryModel("gpt-test", base_url=server.base_url, api_key="sk-test", timeout=10) as m:
        yield m


def make_model(server: FakeOpenAIServer, **kwargs: object) -> OpenAIChatModel:
    kwargs.setdefault("api_key", "sk-test")
    kwargs.setdefault("timeout", 10)
    return FastRetryModel("gpt-test", base_url=server.base_url, **kwargs)  # type: ignore[arg-type]


# --- request mapping ------------------------------------------------------------------------


def test_request_maps_every_message_kind(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.queue("ok")
    history = [
        system_message("Be brief."),
        Message(Role.USER, "Weather in Paris?", name="alice"),
        assistant_message(
            "", [ToolCall("call_1", FunctionCall("get_weather", '{"city": "Paris"}'))]
        ),
        tool_message('{"sky": "clear"}', "call_1", tool_name="get_weather"),
        assistant_message("Checking.", [ToolCall("call_2", FunctionCall("get_time", "{}"))]),
        tool_message("12:00", "call_2"),
        assistant_message("Clear skies at noon."),
        user_message("Thanks"),
    ]
    model.generate(history)

    assert server.requests[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?", "name": "alice"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": '{"sky": "clear"}', "tool_call_id": "call_1"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "content": "12:00", "tool_call_id": "call_2"},
        {"role": "assistant", "content": "Clear skies at noon."},
        {"role": "user", "content": "Thanks"},
    ]


def test_request_has_model_headers_and_no_stream_fields(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue("ok")
    model.generate([user_message("hi")])

    assert server.requests[0] == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
    }
    headers = server.request_headers[0]
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["content-type"] == "application/json"


def test_tools_are_sent_as_functions(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.queue("ok")
    model.with_tools([WEATHER]).generate([user_message("hi")])

    assert server.requests[0]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Return the weather in a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]


def test_with_tools_leaves_the_original_model_unchanged(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue("one", "two")
    bound = model.with_tools([WEATHER])
    model.generate([user_message("hi")])
    bound.generate([user_message("hi")])

    assert "tools" not in server.requests[0]
    assert [tool["function"]["name"] for tool in server.requests[1]["tools"]] == ["get_weather"]
    assert model.tools == ()
    assert isinstance(bound, OpenAIChatModel) and bound.tools == (WEATHER,)
    assert isinstance(bound, ToolCallingChatModel)


def test_options_and_defaults_are_mapped_into_the_body(server: FakeOpenAIServer) -> None:
    server.queue("ok", "ok")
    with make_model(server, temperature=0.2, max_tokens=100, extra={"seed": 1}) as model:
        model.generate([user_message("hi")])
        model.with_tools([WEATHER]).generate(
            [user_message("hi")],
            ModelOptions(
                model="gpt-other",
                temperature=0.9,
                top_p=0.5,
                stop=["END", "STOP"],
                tool_choice="required",
                extra={"seed": 7, "user": "u1"},
            ),
        )
    first, second = server.requests
    assert {k: v for k, v in first.items() if k != "messages"} == {
        "model": "gpt-test",
        "temperature": 0.2,
        "max_tokens": 100,
        "seed": 1,
    }
    assert {k: v for k, v in second.items() if k not in ("messages", "tools")} == {
        "model": "gpt-other",
        "temperature": 0.9,
        "max_tokens": 100,
        "top_p": 0.5,
        "stop": ["END", "STOP"],
        "tool_choice": "required",
        "seed": 7,
        "user": "u1",
    }


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
def test_tool_choice_keywords_pass_through_and_a_name_forces_that_tool(
    server: FakeOpenAIServer, model: OpenAIChatModel, choice: str, sent: object
) -> None:
    server.queue("ok")
    model.with_tools([WEATHER]).generate([user_message("hi")], ModelOptions(tool_choice=choice))
    assert server.requests[0]["tool_choice"] == sent


def test_unknown_default_option_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown model option.*'temprature'"):
        OpenAIChatModel("gpt-test", base_url="http://127.0.0.1:9/v1", temprature=0.1)


def test_extra_cannot_replace_the_messages(model: OpenAIChatModel) -> None:
    with pytest.raises(ValueError, match="messages"):
        model.generate([user_message("hi")], ModelOptions(extra={"messages": []}))


def test_environment_gives_the_key_and_the_base_url(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url + "/")
    server.queue("ok")
    with OpenAIChatModel("gpt-test") as model:
        assert model.base_url == server.base_url
        model.generate([user_message("hi")])
    assert server.request_headers[0]["authorization"] == "Bearer sk-from-env"


def test_default_base_url_is_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with OpenAIChatModel("gpt-test", api_key="k") as model:
        assert model.base_url == "https://api.openai.com/v1"
        assert "sk" not in repr(model) and "gpt-test" in repr(model)


def test_without_a_key_no_authorization_header_is_sent(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.queue("ok")
    with OpenAIChatModel("llama3", base_url=server.base_url) as model:
        model.generate([user_message("hi")])
    assert "authorization" not in server.request_headers[0]


# --- responses ------------------------------------------------------------------------------


def test_generate_returns_content_finish_reason_and_usage(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply("Hello there", usage=TokenUsage(5, 2, 7)))
    reply = model.generate([user_message("hi")])

    assert reply.role is Role.ASSISTANT
    assert reply.content == "Hello there"
    assert reply.tool_calls == ()
    assert reply.response_meta is not None
    assert reply.response_meta.finish_reason == "stop"
    assert reply.response_meta.usage == TokenUsage(5, 2, 7)


def test_generate_returns_tool_calls(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.queue(Reply(tool_calls=[call("get_weather", '{"city": "Paris"}', id="c1")]))
    reply = model.generate([user_message("weather?")])

    assert reply.content == ""
    assert reply.tool_calls == (ToolCall("c1", FunctionCall("get_weather", '{"city": "Paris"}')),)
    assert reply.response_meta is not None and reply.response_meta.finish_reason == "tool_calls"


def test_reasoning_content_lands_in_extra(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.queue(
        Reply("42", reasoning_content="Six times seven."),
        Reply("42", reasoning_content="Six times seven."),
    )
    assert model.generate([user_message("q")]).extra == {"reasoning_content": "Six times seven."}
    streamed = concat_messages(list(model.stream([user_message("q")])))
    assert streamed.extra == {"reasoning_content": "Six times seven."}
    assert streamed.content == "42"


def test_stream_yields_chunks_that_concatenate_to_the_reply(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply("The weather is clear today", chunks=4, usage=TokenUsage(9, 5, 14)))
    chunks = list(model.stream([user_message("weather?")]))

    assert len(chunks) == 7  # role, 4 content deltas, finish reason, usage
    assert len([chunk for chunk in chunks if chunk.content]) == 4
    assert all(chunk.role is Role.ASSISTANT for chunk in chunks)
    message = concat_messages(chunks)
    assert message.content == "The weather is clear today"
    assert message.response_meta is not None
    assert message.response_meta.finish_reason == "stop"
    assert message.response_meta.usage == TokenUsage(9, 5, 14)
    assert chunks[-1].response_meta is not None and chunks[-1].response_meta.usage is not None


def test_stream_request_asks_for_usage(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.queue("ok")
    list(model.stream([user_message("hi")]))

    assert server.requests[0]["stream"] is True
    assert server.requests[0]["stream_options"] == {"include_usage": True}


def test_stream_options_can_be_dropped_for_servers_that_reject_them(
    server: FakeOpenAIServer,
) -> None:
    server.queue("ok", "ok")
    with make_model(server, extra={"stream_options": None}) as model:
        list(model.stream([user_message("hi")]))
        model.generate([user_message("hi")])

    assert server.requests[0]["stream"] is True
    assert "stream_options" not in server.requests[0]
    assert "stream_options" not in server.requests[1]


def test_stream_merges_tool_call_deltas_by_index(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(
        Reply(
            "Let me check.",
            tool_calls=[
                call("get_weather", '{"city": "Paris"}', id="c1"),
                call("get_weather", '{"city": "Tokyo", "unit": "celsius"}', id="c2"),
            ],
            chunks=3,
        )
    )
    chunks = list(model.stream([user_message("weather?")]))

    fragments = [call for chunk in chunks for call in chunk.tool_calls]
    assert len(fragments) > 2
    assert all(fragment.index in (0, 1) for fragment in fragments)
    assert [f.id for f in fragments if f.id] == ["c1", "c2"]  # ids only in first fragments
    message = concat_messages(chunks)
    assert message.content == "Let me check."
    assert [(c.id, c.function.name, c.function.arguments, c.index) for c in message.tool_calls] == [
        ("c1", "get_weather", '{"city": "Paris"}', 0),
        ("c2", "get_weather", '{"city": "Tokyo", "unit": "celsius"}', 1),
    ]
    assert message.response_meta is not None
    assert message.response_meta.finish_reason == "tool_calls"


def test_stream_returns_after_the_first_chunk_and_reads_the_rest_lazily(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    gate = threading.Event()
    # The server holds everything after the first chunk until the gate opens; a stream()
    # that read ahead would only return once this timer opened it.
    timer = threading.Timer(30, gate.set)
    timer.start()
    server.queue(Reply("lazy streaming works", gate=gate))
    reader = model.stream([user_message("hi")])
    try:
        assert not gate.is_set()
        first = reader.recv()
        assert first.role is Role.ASSISTANT
        gate.set()
        rest = list(reader)
    finally:
        timer.cancel()
        gate.set()
        reader.close()
    assert concat_messages([first, *rest]).content == "lazy streaming works"


def test_error_status_carries_code_message_and_body(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply(status=400, error="'messages' must not be empty"))
    with pytest.raises(BadRequestError) as caught:
        model.generate([user_message("hi")])

    error = caught.value
    assert error.status_code == 400
    assert "'messages' must not be empty" in str(error)
    assert "HTTP 400" in str(error)
    assert error.body["error"]["message"] == "'messages' must not be empty"


@pytest.mark.parametrize(
    ("status", "error_type", "hint"),
    [
        (400, BadRequestError, "HTTP 400"),
        (401, AuthenticationError, "OPENAI_API_KEY"),
        (403, PermissionDeniedError, "may not use this model"),
        (404, APIStatusError, "model name and base_url"),
        (422, APIStatusError, "HTTP 422"),
    ],
)
def test_client_errors_are_typed_and_not_retried(
    server: FakeOpenAIServer,
    model: OpenAIChatModel,
    status: int,
    error_type: type[APIStatusError],
    hint: str,
) -> None:
    server.queue(Reply(status=status, error="nope"), "never sent")
    with pytest.raises(error_type, match=hint) as caught:
        model.generate([user_message("hi")])
    assert caught.value.status_code == status
    assert len(server.requests) == 1
    assert server.replies_left == 1


# --- retries --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
def test_retryable_statuses_are_retried(
    server: FakeOpenAIServer, model: OpenAIChatModel, status: int
) -> None:
    server.queue(Reply(status=status, error="try again"), Reply(status=status), "finally")
    assert model.generate([user_message("hi")]).content == "finally"
    assert len(server.requests) == 3


def test_retries_stop_after_max_retries(server: FakeOpenAIServer) -> None:
    server.queue(*[Reply(status=429, error="slow down") for _ in range(5)])
    with make_model(server, max_retries=2) as model, pytest.raises(RateLimitError) as caught:
        model.generate([user_message("hi")])
    assert len(server.requests) == 3  # attempts = max_retries + 1
    assert caught.value.status_code == 429
    assert "slow down" in str(caught.value)


def test_max_retries_zero_makes_one_attempt(server: FakeOpenAIServer) -> None:
    server.queue(Reply(status=503, error="overloaded"), "never sent")
    with make_model(server, max_retries=0) as model, pytest.raises(APIStatusError):
        model.generate([user_message("hi")])
    assert len(server.requests) == 1


def test_retry_after_seconds_is_honoured(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.queue(Reply(status=429, error="slow down", retry_after=0.3), "ok")
    start = time.monotonic()
    assert model.generate([user_message("hi")]).content == "ok"
    assert time.monotonic() - start >= 0.3
    assert len(server.requests) == 2


def test_retry_after_ms_header_is_honoured(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply(status=503, headers={"retry-after-ms": "250"}), "ok")
    start = time.monotonic()
    model.generate([user_message("hi")])
    assert time.monotonic() - start >= 0.25


def test_retry_after_parsing() -> None:
    def parse(**headers: str) -> float | None:
        return parse_retry_after(
            httpx.Headers({k.replace("_", "-"): v for k, v in headers.items()})
        )

    assert parse(retry_after="2") == 2.0
    assert parse(retry_after="0.5") == 0.5
    assert parse(retry_after="-3") == 0.0
    assert parse(retry_after="3600") == 60.0  # capped
    assert parse(retry_after_ms="1500") == 1.5
    assert parse(retry_after="soon") is None
    assert parse() is None
    in_ten_seconds = email.utils.formatdate(time.time() + 10, usegmt=True)
    delay = parse(retry_after=in_ten_seconds)
    assert delay is not None and 8.0 <= delay <= 10.0
    assert parse(retry_after=email.utils.formatdate(time.time() - 60, usegmt=True)) == 0.0


def test_dropped_connection_is_retried(server: FakeOpenAIServer, model: OpenAIChatModel) -> None:
    server.queue(Reply(disconnect=True), Reply(cut_after=0), "ok")
    assert model.generate([user_message("hi")]).content == "ok"
    assert len(server.requests) == 3


def test_unreachable_server_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        FastRetryModel("gpt-test", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1) as model,
        pytest.raises(APIConnectionError, match="could not talk to") as caught,
    ):
        model.generate([user_message("hi")])
    assert not isinstance(caught.value, APITimeoutError)
    assert caught.value.status_code is None


def test_a_silent_server_ends_the_call_after_one_timeout_not_one_per_attempt(
    server: FakeOpenAIServer,
) -> None:
    server.queue(Reply("late", delay=30), Reply("late", delay=30))
    with make_model(server, timeout=0.3, max_retries=3) as model:
        start = time.monotonic()
        with pytest.raises(APITimeoutError, match="within 0.3 s") as caught:
            model.generate([user_message("hi")])
        assert time.monotonic() - start >= 0.3
    # The timeout is the whole call's: no time was left for a retry.
    assert len(server.requests) == 1
    if sys.version_info >= (3, 11):  # exception notes are Python 3.11's
        assert "not retried" in "".join(getattr(caught.value, "__notes__", []))


def test_timeout_before_the_first_chunk_is_raised_by_stream(server: FakeOpenAIServer) -> None:
    server.queue(Reply("late", delay=30))
    with make_model(server, timeout=0.2, max_retries=0) as model, pytest.raises(APITimeoutError):
        model.stream([user_message("hi")])


# --- streams that fail ------------------------------------------------------------------------


def test_error_status_before_the_first_chunk_is_raised_by_stream_itself(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply(status=401, error="bad key"))
    with pytest.raises(AuthenticationError, match="bad key"):
        model.stream([user_message("hi")])


def test_stream_retries_errors_before_its_first_chunk(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply(status=500), Reply(cut_after=0), Reply(disconnect=True), "ok")
    assert concat_messages(list(model.stream([user_message("hi")]))).content == "ok"
    assert len(server.requests) == 4


def test_cut_stream_raises_incomplete_stream_error_from_the_reader(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply("one two three four five six", chunks=6, cut_after=3), "never sent")
    reader = model.stream([user_message("hi")])  # the first chunk arrived: no error here
    received = []
    with pytest.raises(IncompleteStreamError, match="broke after 3 chunks"):
        for chunk in reader:
            received.append(chunk)
    assert len(received) == 3
    partial = concat_messages(received).content
    assert partial and "one two three four five six".startswith(partial)
    assert partial != "one two three four five six"
    # Never retried once a chunk was delivered.
    assert len(server.requests) == 1
    assert server.replies_left == 1


def test_stream_ending_without_done_or_finish_reason_is_incomplete(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply("partial", done=False, finish_reason=""))
    reader = model.stream([user_message("hi")])
    with pytest.raises(IncompleteStreamError, match=r"without \[DONE\]"):
        list(reader)


def test_stream_with_finish_reason_but_no_done_is_complete(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply("complete", done=False))
    message = concat_messages(list(model.stream([user_message("hi")])))
    assert message.content == "complete"


def test_error_event_in_the_stream_is_raised_by_the_reader(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply("never finished", stream_error="model overloaded"))
    reader = model.stream([user_message("hi")])
    with pytest.raises(ModelError, match="model overloaded"):
        list(reader)
    assert len(server.requests) == 1


def test_malformed_json_response_is_a_model_error(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply("x", malformed=True))
    with pytest.raises(ModelError, match="not valid JSON") as caught:
        model.generate([user_message("hi")])
    assert caught.value.status_code == 200
    assert len(server.requests) == 1


def test_response_without_choices_is_a_model_error(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply(raw_body=b'{"object": "chat.completion", "choices": []}'))
    with pytest.raises(ModelError, match=r"without choices\[0\]\.message"):
        model.generate([user_message("hi")])


def test_a_plain_completion_answering_a_stream_request_is_one_chunk(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    completion = (
        b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"},'
        b' "finish_reason": "stop"}]}'
    )
    server.queue(Reply(raw_body=completion))
    chunks = list(model.stream([user_message("hi")]))
    assert [chunk.content for chunk in chunks] == ["whole"]
    assert chunks[0].response_meta is not None
    assert chunks[0].response_meta.finish_reason == "stop"


def test_malformed_first_stream_chunk_is_raised_by_stream(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply("x", malformed=True))
    with pytest.raises(ModelError, match="stream chunk that is not valid JSON"):
        model.stream([user_message("hi")])


def test_malformed_error_body_still_gives_a_typed_error(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply(status=400, error="x", malformed=True))
    with pytest.raises(BadRequestError) as caught:
        model.generate([user_message("hi")])
    assert caught.value.body == '{"error": {"message": '


# --- connections and threads -----------------------------------------------------------------


def test_sequential_calls_reuse_one_connection(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    for number in range(10):
        server.queue(f"plain {number}", f"streamed {number}")
        assert model.generate([user_message("hi")]).content == f"plain {number}"
        chunks = list(model.stream([user_message("hi")]))
        assert concat_messages(chunks).content == f"streamed {number}"
    assert len(server.requests) == 20
    assert server.connections == 1


def test_closing_a_stream_early_closes_the_response(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue(Reply("a long reply " * 20, chunks=20), "after")
    reader = model.stream([user_message("hi")])
    reader.recv()
    reader.close()
    assert list(reader) == []
    assert model.generate([user_message("hi")]).content == "after"


def test_threads_sharing_one_model_get_their_own_answers(server: FakeOpenAIServer) -> None:
    def echo(request: dict[str, object]) -> Reply:
        messages = request["messages"]
        assert isinstance(messages, list)
        return Reply(f"echo: {messages[-1]['content']}", chunks=5)

    with FakeOpenAIServer(handler=echo) as echo_server:
        results: dict[str, str] = {}
        errors: list[BaseException] = []
        with make_model(echo_server) as model:

            def worker(number: int) -> None:
                try:
                    for call in range(4):
                        question = f"thread {number} call {call}"
                        if call % 2:
                            reply = concat_messages(list(model.stream([user_message(question)])))
                        else:
                            reply = model.generate([user_message(question)])
                        results[question] = reply.content
                except BaseException as error:  # surfaced below
                    errors.append(error)

            threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert errors == []
        assert len(results) == 64
        assert all(answer == f"echo: {question}" for question, answer in results.items())
        assert echo_server.connections <= 16


def test_close_leaves_a_given_http_client_open(server: FakeOpenAIServer) -> None:
    server.queue("one", "two")
    with httpx.Client() as client:
        with make_model(server, http_client=client) as model:
            model.generate([user_message("hi")])
        assert not client.is_closed
        with make_model(server, http_client=client) as model:
            assert model.generate([user_message("hi")]).content == "two"


def test_close_closes_the_owned_client(server: FakeOpenAIServer) -> None:
    model = make_model(server)
    model.close()
    with pytest.raises(RuntimeError):
        model.generate([user_message("hi")])


# --- the encoded-message cache ------------------------------------------------------------------


def test_messages_are_encoded_once_and_a_changed_copy_is_encoded_anew(
    server: FakeOpenAIServer, model: OpenAIChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[object] = []
    real_encode = openai_module._encode_json

    def counting_encode(value: object) -> str:
        encoded.append(value)
        return real_encode(value)

    monkeypatch.setattr(openai_module, "_encode_json", counting_encode)
    history = [system_message("Be brief."), user_message("first question")]
    server.queue("a", "b", "c")

    model.generate(history)
    assert len(encoded) == 2

    model.generate(history)  # nothing new to encode
    assert len(encoded) == 2

    history[1] = attrs.evolve(history[1], content="changed question")  # a new value: encoded
    model.generate(history)
    assert encoded[2:] == [{"role": "user", "content": "changed question"}]
    assert server.requests[2]["messages"][1] == {"role": "user", "content": "changed question"}


def test_options_per_call_do_not_disturb_the_cached_envelope(
    server: FakeOpenAIServer, model: OpenAIChatModel
) -> None:
    server.queue("a", "b", "c")
    model.generate([user_message("hi")])
    model.generate([user_message("hi")], ModelOptions(temperature=1.5))
    model.generate([user_message("hi")])
    assert [request.get("temperature") for request in server.requests] == [None, 1.5, None]


# --- packaging ----------------------------------------------------------------------------------


def test_importing_the_models_package_does_not_import_httpx() -> None:
    code = (
        "import sys, agentkit.models.base, agentkit.models.scripted; "
        "assert 'httpx' not in sys.modules and 'tenacity' not in sys.modules; "
        "import agentkit.models as m; assert 'agentkit.models.openai' not in sys.modules; "
        "assert m.OpenAIChatModel.__name__ == 'OpenAIChatModel'"
    )
    root = Path(agentkit.__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
