"""Recorded response shapes of real OpenAI-compatible servers, replayed byte for byte.

Each file in ``tests/fixtures/wire/`` is a response body in the shape one server family sends
(``SOURCES.md`` there says where each shape comes from). The bodies are replayed through
OpenAIChatModel split at arbitrary byte boundaries (hypothesis), mid-UTF-8 and mid-CRLF
included: the message read must not depend on where the bytes were cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentkit
import agentkit.models
from agentkit import AgentCancelledError, ChatModelAgent, Runner
from agentkit.errors import BadRequestError, ModelError
from agentkit.models import OpenAIChatModel
from agentkit.schema import Message, concat_messages, tool_message, user_message
from tests.misbehaving_server import RawServer, replay

FIXTURES = Path(__file__).parent / "fixtures" / "wire"
SETTINGS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])

Call = tuple[str, str, str, dict[str, Any]]  # id, name, arguments, extra


@attrs.frozen
class Expected:
    """What a recorded response must read as."""

    content: str = ""
    tool_calls: tuple[Call, ...] = ()
    extra: dict[str, Any] = attrs.Factory(dict)
    finish_reason: str = ""
    usage: tuple[int, int, int] | None = None
    error: type[BaseException] | None = None
    error_text: str = ""
    status: int = 200


WEATHER_ZURICH: Call = ("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", '{"location":"Zürich"}', {})
TIME_ZURICH: Call = ("call_ABQm3kGvxDn1LKqXHcPj2mTD", "get_time", '{"tz":"Europe/Zurich"}', {})
LEGACY_OSLO: Call = ("call_legacy_function", "get_weather", '{"location":"Oslo"}', {})
GEMINI_CALL = (
    "function-call-16813587286640546071",
    "get_weather",
    '{"location":"Paris"}',
    {"extra_content": {"google": {"thought_signature": "CiQB0e2Kb7Zx/+AbC=="}}},
)
REFUSAL = "I'm sorry, I cannot assist with that request."
REASONING_DETAILS = [
    {"type": "reasoning.text", "text": "Let me think", "format": "anthropic-claude-v1", "index": 0},
    {
        "type": "reasoning.text",
        "text": ".",
        "signature": "EqQBCkgIB",
        "format": "anthropic-claude-v1",
        "index": 0,
    },
]

CASES: dict[str, Expected] = {
    "openai-stream-text.sse": Expected("Grüße aus 東京 🌸", finish_reason="stop", usage=(9, 7, 16)),
    "openai-stream-tool-calls.sse": Expected(
        tool_calls=(WEATHER_ZURICH, TIME_ZURICH), finish_reason="tool_calls"
    ),
    "openai-stream-refusal.sse": Expected(
        "I'm sorry, I can't help with that.",
        extra={"refusal": "I'm sorry, I can't help with that."},
        finish_reason="stop",
    ),
    "openai-refusal.json": Expected(
        REFUSAL, extra={"refusal": REFUSAL}, finish_reason="stop", usage=(19, 10, 29)
    ),
    "openai-text.json": Expected("Bonjour, ça va ?", finish_reason="stop", usage=(19, 10, 29)),
    "openai-legacy-function-call.json": Expected(
        tool_calls=(LEGACY_OSLO,), finish_reason="function_call", usage=(19, 10, 29)
    ),
    "openai-stream-legacy-function-call.sse": Expected(
        tool_calls=(LEGACY_OSLO,), finish_reason="function_call"
    ),
    "azure-stream-text.sse": Expected("Hallo Welt", finish_reason="stop"),
    "azure-refusal.json": Expected(
        "I'm sorry, but I can't help with that.",
        extra={"refusal": "I'm sorry, but I can't help with that."},
        finish_reason="stop",
        usage=(24, 12, 36),
    ),
    "vllm-stream-reasoning-tools.sse": Expected(
        tool_calls=(("chatcmpl-tool-5a0bd39c0e2e4d33", "get_weather", '{"city": "Kraków"}', {}),),
        extra={"reasoning_content": "The user wants the weather in Kraków."},
        finish_reason="tool_calls",
        usage=(180, 51, 231),
    ),
    "vllm-stream-error.sse": Expected(
        error=ModelError, error_text="maximum context length is 4096 tokens"
    ),
    "ollama-stream-tool-call.sse": Expected(
        tool_calls=(("call_x7k2m9qa", "get_weather", '{"city":"São Paulo"}', {}),),
        extra={"reasoning_content": "Need the tool."},
        finish_reason="tool_calls",
    ),
    "ollama-text.json": Expected(
        "Ja.",
        extra={"reasoning_content": "Simple question."},
        finish_reason="stop",
        usage=(12, 9, 21),
    ),
    "llamacpp-stream-error-field.sse": Expected(
        error=ModelError, error_text="the request exceeds the available context size"
    ),
    "llamacpp-stream-error-data.sse": Expected(
        error=ModelError, error_text="request (4390 tokens) exceeds the available context size"
    ),
    "llamacpp-stream-reasoning.sse": Expected(
        "Привет", extra={"reasoning_content": "Thinking…"}, finish_reason="stop", usage=(11, 4, 15)
    ),
    "llama-cpp-python-stream.sse": Expected("Dzień dobry", finish_reason="stop"),
    "llama-cpp-python-function-call.json": Expected(
        tool_calls=(("call__0_get_weather_cmpl-0b8d", "get_weather", '{"city": "Lyon"}', {}),),
        finish_reason="tool_calls",
        usage=(90, 12, 102),
    ),
    "deepseek-stream-reasoning.sse": Expected(
        "9.8 is greater.",
        extra={"reasoning_content": "9.11 < 9.8"},
        finish_reason="stop",
        usage=(16, 40, 56),
    ),
    "deepseek-tool-call-thinking.json": Expected(
        tool_calls=(("call_00_kR3bYt", "get_date", "{}", {}),),
        extra={"reasoning_content": "I should check the date first."},
        finish_reason="tool_calls",
        usage=(120, 30, 150),
    ),
    "mistral-magistral.json": Expected(
        "2 + 2 = 4",
        extra={"reasoning_content": "Two plus two… is four."},
        finish_reason="stop",
        usage=(10, 20, 30),
    ),
    "mistral-stream-magistral.sse": Expected(
        "Oui.",
        extra={"reasoning_content": "Hmm, déjà vu."},
        finish_reason="stop",
        usage=(8, 12, 20),
    ),
    "mistral-stream-tool-call.sse": Expected(
        tool_calls=(("D681PevKs", "get_weather", '{"city": "Genève"}', {}),),
        finish_reason="tool_calls",
        usage=(70, 20, 90),
    ),
    "gemini-stream-tool-call.sse": Expected(
        tool_calls=(GEMINI_CALL,), finish_reason="tool_calls", usage=(60, 18, 150)
    ),
    "gemini-tool-call.json": Expected(
        tool_calls=(GEMINI_CALL,), finish_reason="tool_calls", usage=(60, 18, 150)
    ),
    "gemini-error-400.json": Expected(
        error=BadRequestError, error_text="missing a thought_signature", status=400
    ),
    "openrouter-stream-reasoning.sse": Expected(
        "Done — ✓",
        extra={
            "reasoning_content": "Let me think.",
            "provider_fields": {"reasoning_details": REASONING_DETAILS},
        },
        finish_reason="stop",
        usage=(14, 25, 39),
    ),
    "openrouter-stream-midstream-error.sse": Expected(
        error=ModelError, error_text="Provider disconnected unexpectedly"
    ),
}


def test_every_fixture_has_an_expectation_and_a_source() -> None:
    files = {path.name for path in FIXTURES.iterdir() if path.suffix in (".sse", ".json")}
    assert files == set(CASES)
    sources = (FIXTURES / "SOURCES.md").read_text(encoding="utf-8")
    for name in files:
        assert f"`{name}`" in sources, f"SOURCES.md does not say where {name} comes from"


class Replayer:
    """An httpx transport that answers with the pieces it is given, recording requests."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.status = 200
        self.content_type = "text/event-stream"
        self.requests: list[dict[str, Any]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        pieces = list(self.pieces)

        def body() -> Iterator[bytes]:
            yield from pieces

        return httpx.Response(
            self.status, headers={"content-type": self.content_type}, content=body()
        )

    def load(self, name: str, pieces: list[bytes], status: int) -> None:
        self.pieces = pieces
        self.status = status
        self.content_type = "text/event-stream" if name.endswith(".sse") else "application/json"


REPLAYER = Replayer()
MODEL = OpenAIChatModel(
    "m",
    base_url="http://wire.test/v1",
    api_key="k",
    max_retries=0,
    http_client=httpx.Client(transport=httpx.MockTransport(REPLAYER.handle)),
)


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({point % (len(data) + 1) for point in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return [piece for piece in pieces if piece]


def read(name: str, pieces: list[bytes], streamed: bool) -> Message:
    REPLAYER.load(name, pieces, CASES[name].status)
    if not streamed:
        return MODEL.generate([user_message("hi")])
    with MODEL.stream([user_message("hi")]) as reader:
        return concat_messages(list(reader))


def check(message: Message, expected: Expected) -> None:
    assert message.content == expected.content
    calls = tuple(
        (call.id, call.function.name, call.function.arguments, call.extra)
        for call in message.tool_calls
    )
    assert calls == expected.tool_calls
    assert message.extra == expected.extra
    meta = message.response_meta
    assert meta is not None and meta.finish_reason == expected.finish_reason
    usage = meta.usage
    got = (
        None
        if usage is None
        else (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)
    )
    assert got == expected.usage


@pytest.mark.parametrize("name", sorted(CASES))
@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=24))
@SETTINGS
def test_recorded_shapes_read_the_same_wherever_the_bytes_are_cut(
    name: str, cuts: list[int]
) -> None:
    data = (FIXTURES / name).read_bytes()
    expected = CASES[name]
    # A whole JSON body is also accepted from stream() (a server that ignores stream=true).
    modes = [True] if name.endswith(".sse") else [False, True]
    for streamed in modes:
        if expected.error is None:
            check(read(name, cut(data, cuts), streamed), expected)
        else:
            with pytest.raises(expected.error, match=re.escape(expected.error_text)):
                read(name, cut(data, cuts), streamed)


def test_mid_utf8_cuts_are_covered() -> None:
    # Every single cut point of a multi-byte text, one byte at a time.
    name = "openai-stream-text.sse"
    data = (FIXTURES / name).read_bytes()
    check(read(name, [data[i : i + 1] for i in range(len(data))], True), CASES[name])


# --- fields that must go back on the next request --------------------------------------------


def sent_messages(history: list[Message]) -> list[dict[str, Any]]:
    REPLAYER.load("openai-text.json", [(FIXTURES / "openai-text.json").read_bytes()], 200)
    REPLAYER.requests.clear()
    MODEL.generate(history)
    return REPLAYER.requests[0]["messages"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", ["gemini-tool-call.json", "gemini-stream-tool-call.sse"])
def test_gemini_thought_signatures_go_back_unchanged(name: str) -> None:
    reply = read(name, [(FIXTURES / name).read_bytes()], name.endswith(".sse"))
    call = reply.tool_calls[0]
    history = [user_message("weather?"), reply, tool_message("sunny", call.id)]
    sent = sent_messages(history)[1]["tool_calls"][0]
    assert sent["extra_content"] == {"google": {"thought_signature": "CiQB0e2Kb7Zx/+AbC=="}}
    assert sent["id"] == call.id and sent["function"]["name"] == "get_weather"
    # The field survives the message's own round trip too (checkpoints, conversations).
    assert Message.from_dict(reply.to_dict()) == reply


def test_deepseek_reasoning_of_a_tool_calling_turn_goes_back() -> None:
    name = "deepseek-tool-call-thinking.json"
    reply = read(name, [(FIXTURES / name).read_bytes()], False)
    answer = read(
        "deepseek-stream-reasoning.sse",
        [(FIXTURES / "deepseek-stream-reasoning.sse").read_bytes()],
        True,
    )
    history = [user_message("date?"), reply, tool_message("2026-11-23", "call_00_kR3bYt"), answer]
    sent = sent_messages(history)
    assert sent[1]["reasoning_content"] == "I should check the date first."
    # Reasoning of a turn without tool calls is not needed (DeepSeek ignores it): not sent.
    assert "reasoning_content" not in sent[3]


def test_openrouter_reasoning_details_go_back_merged() -> None:
    name = "openrouter-stream-reasoning.sse"
    reply = read(name, [(FIXTURES / name).read_bytes()], True)
    sent = sent_messages([user_message("q"), reply])[1]
    assert sent["reasoning_details"] == REASONING_DETAILS
    assert sent["content"] == "Done — ✓"
    assert "provider_fields" not in sent and "reasoning" not in sent


def test_a_refusal_is_never_an_empty_success() -> None:
    reply = read("openai-refusal.json", [(FIXTURES / "openai-refusal.json").read_bytes()], False)
    assert reply.content == REFUSAL and reply.extra["refusal"] == REFUSAL


# --- errors inside a stream in an agent run --------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("llamacpp-stream-error-field.sse", "exceeds the available context size"),
        ("llamacpp-stream-error-data.sse", "exceeds the available context size"),
        ("vllm-stream-error.sse", "maximum context length"),
        ("openrouter-stream-midstream-error.sse", "Provider disconnected"),
    ],
)
@pytest.mark.parametrize("streaming", [False, True])
def test_a_server_error_inside_a_stream_ends_an_agent_run_with_model_error(
    name: str, text: str, streaming: bool
) -> None:
    body = (FIXTURES / name).read_bytes()
    with (
        RawServer(replay(body)) as server,
        OpenAIChatModel("m", base_url=server.base_url, api_key="k", max_retries=0) as model,
    ):
        # A server that streams although the request did not ask for it is read as a stream
        # only by stream(); generate() gets the same bytes and must not take them as success.
        events = list(
            Runner(ChatModelAgent("a", "d", model), enable_streaming=streaming).query("hi")
        )
        failures = [event.err for event in events if event.err is not None]
        if streaming:
            assert len(failures) == 1 and isinstance(failures[0], ModelError)
            assert not isinstance(failures[0], AgentCancelledError)
            assert text in str(failures[0])
        else:
            assert len(failures) == 1 and isinstance(failures[0], ModelError)


def test_model_errors_are_exported_from_agentkit_models() -> None:
    names = [
        "ModelError",
        "AuthenticationError",
        "PermissionDeniedError",
        "BadRequestError",
        "RateLimitError",
        "APIConnectionError",
        "APITimeoutError",
        "APIStatusError",
        "IncompleteStreamError",
        "ResponseTooLargeError",
    ]
    for name in names:
        assert getattr(agentkit.models, name) is getattr(agentkit, name), name
        assert name in agentkit.models.__all__
    assert issubclass(agentkit.models.AuthenticationError, agentkit.models.ModelError)


def test_tool_call_extra_survives_pickling_and_old_pickles_still_load() -> None:
    import pickle

    from agentkit.checkpoint import PickleSerializer
    from agentkit.schema import FunctionCall, ToolCall

    call = ToolCall("c1", FunctionCall("f", "{}"), extra=dict(GEMINI_CALL[3]))
    assert pickle.loads(pickle.dumps(call)) == call
    serializer = PickleSerializer()
    message = Message.from_dict(
        {"role": "assistant", "content": "", "tool_calls": [call_dict(call)]}
    )
    assert (
        serializer.loads(serializer.dumps(message, checkpoint_id="x"), checkpoint_id="x") == message
    )
    # State written before ToolCall had ``extra`` (four fields) loads with an empty one.
    old = ToolCall.__new__(ToolCall)
    old.__setstate__(
        {"id": "c1", "function": FunctionCall("f", "{}"), "type": "function", "index": 0}
    )
    assert old == ToolCall("c1", FunctionCall("f", "{}"), "function", 0)


def call_dict(call: Any) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": call.type,
        "function": {"name": call.function.name, "arguments": call.function.arguments},
        "extra": call.extra,
    }
