"""Hypothesis strategies for agentkit's own types."""

from __future__ import annotations

from hypothesis import strategies as st

from agentkit.schema import (
    AudioPart,
    FilePart,
    FunctionCall,
    ImagePart,
    Message,
    ResponseMeta,
    Role,
    TextPart,
    TokenUsage,
    ToolCall,
)

texts = st.text(max_size=20)
names = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)

tool_calls = st.builds(
    ToolCall,
    id=names,
    function=st.builds(FunctionCall, name=names, arguments=texts),
)

usages = st.builds(
    TokenUsage,
    prompt_tokens=st.integers(0, 10_000),
    completion_tokens=st.integers(0, 10_000),
    total_tokens=st.integers(0, 20_000),
)

messages = st.builds(
    Message,
    role=st.sampled_from(list(Role)),
    content=texts,
    tool_calls=st.lists(tool_calls, max_size=3),
    tool_call_id=st.one_of(st.just(""), names),
    tool_name=st.one_of(st.just(""), names),
    name=st.one_of(st.just(""), names),
    response_meta=st.one_of(
        st.none(),
        st.builds(
            ResponseMeta,
            finish_reason=st.sampled_from(["", "stop", "tool_calls"]),
            usage=st.one_of(st.none(), usages),
        ),
    ),
    extra=st.dictionaries(names, st.one_of(texts, st.integers(), st.booleans()), max_size=3),
)

_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f0005000201e2d6e1c10000000049454e44ae426082"
)
_URLS = st.sampled_from(["https://example.com/a.png", "http://cdn.example.org/x/y.jpg?v=1"])

parts = st.one_of(
    st.builds(TextPart, texts),
    st.builds(
        ImagePart,
        st.just(_PNG),
        detail=st.sampled_from([None, "low", "high", "auto"]),
    ),
    st.builds(ImagePart, url=_URLS, detail=st.sampled_from([None, "low"])),
    st.builds(
        FilePart,
        st.binary(max_size=64).map(lambda data: b"%PDF-1.7\n" + data + b"\n%%EOF"),
        filename=st.one_of(st.none(), names.map(lambda name: name + ".pdf")),
    ),
    st.builds(
        FilePart,
        st.binary(max_size=64).map(lambda data: b"notes: " + data),  # no known signature
        media_type=st.just("application/octet-stream"),
    ),
    st.builds(AudioPart, st.binary(min_size=1, max_size=64), media_type=st.just("audio/pcm")),
)
"""Content parts of every kind, small."""

messages_with_parts = st.builds(
    Message,
    role=st.sampled_from([Role.USER, Role.ASSISTANT, Role.TOOL]),
    tool_call_id=st.one_of(st.just(""), names),
    tool_name=st.one_of(st.just(""), names),
    extra=st.dictionaries(names, st.one_of(texts, st.integers()), max_size=2),
    parts=st.lists(parts, min_size=1, max_size=5),
)
"""Messages made of parts."""
