"""Properties of the Server-Sent Events decoding: where the bytes are cut must never matter."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit.errors import IncompleteStreamError
from agentkit.models import OpenAIChatModel
from agentkit.models._http._sse import SSEError, sse_payloads
from agentkit.models.openai import iter_sse_data
from agentkit.schema import (
    FunctionCall,
    Message,
    ResponseMeta,
    Role,
    TokenUsage,
    ToolCall,
    concat_messages,
)

SETTINGS = settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])

line_breaks = st.sampled_from([b"\n", b"\r\n", b"\r"])
# Any text but CR (a line break in SSE) and surrogates (not encodable); LF splits data lines.
payload_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\r"), max_size=40
)
noise_lines = st.sampled_from([b": keep-alive", b":", b"event: message", b"id: 7", b"retry: 100"])


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    """Split ``data`` at the given offsets (taken modulo its length)."""
    points = sorted({point % (len(data) + 1) for point in cuts})
    pieces = []
    start = 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return pieces


@st.composite
def sse_streams(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """Return SSE bytes and the data payloads a parser must find in them."""
    payloads = draw(st.lists(payload_text, max_size=8))
    out = bytearray()
    expected = []

    def end_line() -> None:
        # After a CR, an LF would merge with it into one CRLF: pick another line break.
        line_break = draw(line_breaks)
        if out.endswith(b"\r") and line_break.startswith(b"\n"):
            line_break = b"\r"
        out.extend(line_break)

    for payload in payloads:
        if draw(st.booleans()):
            out.extend(draw(noise_lines))
            end_line()
        for line in payload.encode().split(b"\n"):
            # "data:" then one optional space; a line starting with a space needs the space.
            space = b" " if line.startswith(b" ") or draw(st.booleans()) else b""
            out.extend(b"data:" + space + line)
            end_line()
            if draw(st.integers(0, 4)) == 0:
                out.extend(draw(noise_lines))
                end_line()
        end_line()  # the blank line that ends the event
        if payload:
            expected.append(payload.encode())
    if draw(st.booleans()):
        out.extend(b"data: unfinished event at the end")
        if draw(st.booleans()):
            end_line()
    return bytes(out), expected


@SETTINGS
@given(stream=sse_streams(), cuts=st.lists(st.integers(0, 10_000), max_size=30))
def test_sse_payloads_are_the_same_wherever_the_bytes_are_cut(
    stream: tuple[bytes, list[bytes]], cuts: list[int]
) -> None:
    data, expected = stream
    assert list(iter_sse_data(cut(data, cuts))) == expected


@SETTINGS
@given(data=st.binary(max_size=200), cuts=st.lists(st.integers(0, 1000), max_size=20))
def test_any_bytes_parse_the_same_in_one_piece_or_in_many(data: bytes, cuts: list[int]) -> None:
    assert list(iter_sse_data(cut(data, cuts))) == list(iter_sse_data([data]))


error_texts = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"),
    min_size=1,
    max_size=20,
)


@st.composite
def sse_streams_with_errors(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, bytes]]]:
    """Return SSE bytes mixing data and error events, with each event's kind and payload."""
    out = bytearray()
    events: list[tuple[str, bytes]] = []
    end = draw(st.sampled_from([b"\n", b"\r\n"]))
    for text in draw(st.lists(error_texts, max_size=6)):
        kind = draw(st.sampled_from(["data", "error-field", "error-event"]))
        payload = text.encode()
        if kind == "data":
            out.extend(b"data: " + payload + end + end)
        elif kind == "error-field":  # llama.cpp's non-standard field
            out.extend(b"error: " + payload + end + end)
        else:  # an event of type error carrying data
            out.extend(b"event: error" + end + b"data: " + payload + end + end)
        events.append((kind, payload))
    return bytes(out), events


@SETTINGS
@given(stream=sse_streams_with_errors(), cuts=st.lists(st.integers(0, 10_000), max_size=30))
def test_error_events_are_found_wherever_the_bytes_are_cut(
    stream: tuple[bytes, list[tuple[str, bytes]]], cuts: list[int]
) -> None:
    data, events = stream
    found = [(type(p) is SSEError, bytes(p)) for p in sse_payloads(cut(data, cuts))]
    assert found == [(kind != "data", payload) for kind, payload in events]
    # The public parser follows the SSE format: the unknown error field is ignored, and an
    # event's type does not change its data.
    assert list(iter_sse_data(cut(data, cuts))) == [
        payload for kind, payload in events if kind != "error-field"
    ]


# --- whole OpenAI streams through OpenAIChatModel.stream -------------------------------------

texts = st.text(st.characters(blacklist_categories=["Cs"]), max_size=30)
names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


def split_text(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=4)))
    points = [0, *[c for c in cuts if c < len(text)], len(text)]
    return [text[a:b] for a, b in itertools.pairwise(points) if text[a:b]]


@st.composite
def openai_streams(draw: st.DrawFn) -> tuple[bytes, Message]:
    """Return a streamed chat completion as the API sends it, and the message it carries."""
    content = draw(texts)
    calls = draw(st.lists(st.tuples(names, texts), max_size=3))
    usage = TokenUsage(draw(st.integers(0, 999)), draw(st.integers(0, 999)), 0)
    finish_reason = "tool_calls" if calls else "stop"
    base: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m"}
    end = draw(st.sampled_from([b"\n\n", b"\r\n\r\n"]))

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        text = json.dumps({**base, "choices": [choice], "usage": None}, ensure_ascii=False)
        keepalive = b": keep-alive" + end if draw(st.integers(0, 5)) == 0 else b""
        return keepalive + b"data: " + text.encode() + end

    out = event({"role": "assistant", "content": ""})
    for piece in split_text(draw, content):
        out += event({"content": piece})
    for index, (name, arguments) in enumerate(calls):
        out += event(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": f"call_{index}",
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in split_text(draw, arguments):
            out += event({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    out += event({}, finish_reason)
    usage_json = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
    }
    out += b"data: " + json.dumps({**base, "choices": [], "usage": usage_json}).encode() + end
    out += b"data: [DONE]" + end
    expected = Message(
        Role.ASSISTANT,
        content,
        [
            ToolCall(f"call_{index}", FunctionCall(name, arguments), index=index)
            for index, (name, arguments) in enumerate(calls)
        ],
        response_meta=ResponseMeta(finish_reason, usage),
    )
    return out, expected


def model_over(pieces: list[bytes]) -> OpenAIChatModel:
    """Return a model whose server sends ``pieces`` as the body of every streamed response."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=iter(pieces)
        )

    client = httpx.Client(transport=httpx.MockTransport(handler))
    return OpenAIChatModel(
        "m", base_url="http://model.test/v1", api_key="k", max_retries=0, http_client=client
    )


@SETTINGS
@given(stream=openai_streams(), cuts=st.lists(st.integers(0, 100_000), max_size=40))
def test_streamed_message_is_the_same_wherever_the_bytes_are_cut(
    stream: tuple[bytes, Message], cuts: list[int]
) -> None:
    data, expected = stream
    model = model_over(cut(data, cuts))
    chunks = list(model.stream([Message(Role.USER, "hi")]))
    assert concat_messages(chunks) == expected


@SETTINGS
@given(stream=openai_streams(), end=st.integers(0, 100_000))
def test_a_stream_cut_short_is_never_silently_truncated(
    stream: tuple[bytes, Message], end: int
) -> None:
    data, expected = stream
    model = model_over([data[: end % len(data)]])
    try:
        chunks = list(model.stream([Message(Role.USER, "hi")]))
    except IncompleteStreamError:
        return
    # It ended without an error: the finish reason arrived, so nothing before it is missing.
    message = concat_messages(chunks)
    assert message.content == expected.content
    assert message.tool_calls == expected.tool_calls
    assert message.response_meta is not None
    assert message.response_meta.finish_reason == expected.response_meta.finish_reason  # type: ignore[union-attr]


@pytest.mark.parametrize("separator", [b"\n", b"\r\n", b"\r"])
def test_multi_line_data_is_joined_with_line_feeds(separator: bytes) -> None:
    data = separator.join([b"data: first", b"data:second", b"data:  third", b"", b""])
    assert list(iter_sse_data([data])) == [b"first\nsecond\n third"]
