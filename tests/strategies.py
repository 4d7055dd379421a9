"""Hypothesis strategies for agentkit's own types."""

from __future__ import annotations

from hypothesis import strategies as st

from agentkit.schema import FunctionCall, Message, ResponseMeta, Role, TokenUsage, ToolCall

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
