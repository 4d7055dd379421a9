"""Context compaction middlewares: summarization and tool-result reduction, in whole runs."""

from __future__ import annotations

from typing import Any

import pytest

from agentkit import ChatModelAgent, Message, Role, Runner, tool
from agentkit.compaction import (
    SummarizationMiddleware,
    ToolResultReductionMiddleware,
    approximate_tokens,
)
from agentkit.models import ScriptedChatModel
from agentkit.schema import assistant_message, system_message, user_message
from agentkit.testing import call, calls_message


@tool
def fetch(page: int) -> str:
    """Fetch a long page."""
    return f"page {page}: " + "x" * 3_000


def three_fetches_then_answer() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            calls_message(call("fetch", {"page": 1}, id="f1")),
            calls_message(call("fetch", {"page": 2}, id="f2")),
            calls_message(call("fetch", {"page": 3}, id="f3")),
            "done",
        ]
    )


def test_older_large_tool_results_are_cut_and_the_latest_kept() -> None:
    model = three_fetches_then_answer()
    agent = ChatModelAgent(
        "A", "d", model, tools=[fetch],
        middlewares=[ToolResultReductionMiddleware(max_chars=100, keep_last=1)],
    )
    assert Runner(agent).invoke("read").text == "done"
    last = [m for m in model.calls[-1].messages if m.role is Role.TOOL]
    assert [len(m.content) < 200 for m in last] == [True, True, False]
    assert "cut to save context" in last[0].content
    assert last[0].content.startswith("page 1: xxx")


def test_dropping_replaces_older_results_by_a_note() -> None:
    model = three_fetches_then_answer()
    agent = ChatModelAgent(
        "A", "d", model, tools=[fetch],
        middlewares=[ToolResultReductionMiddleware(max_chars=100, keep_last=1, drop=True)],
    )
    Runner(agent).invoke("read")
    results = [m.content for m in model.calls[-1].messages if m.role is Role.TOOL]
    assert results[0] == "[tool result of 3,008 characters, cut to save context]"


def test_the_events_still_show_the_whole_results() -> None:
    model = three_fetches_then_answer()
    agent = ChatModelAgent(
        "A", "d", model, tools=[fetch],
        middlewares=[ToolResultReductionMiddleware(max_chars=10, keep_last=0)],
    )
    result = Runner(agent).invoke("read")
    messages = [message for e in result.events if (message := e.get_message()) is not None]
    assert len(messages) == len(result.events)
    shown = [message.content for message in messages if message.role is Role.TOOL]
    assert all(len(text) > 3_000 for text in shown)


def test_summarization_replaces_older_turns_once_over_budget() -> None:
    summaries: list[list[Message]] = []

    def summarize(messages: list[Message]) -> str:
        summaries.append(messages)
        return "the user read pages 1 and 2"

    model = three_fetches_then_answer()
    agent = ChatModelAgent(
        "A", "d", model, instruction="be brief", tools=[fetch],
        middlewares=[
            SummarizationMiddleware(ScriptedChatModel(summarize), max_tokens=1_000, keep_last=2)
        ],
    )
    assert Runner(agent).invoke("read").text == "done"
    assert summaries, "the conversation went over budget, so it was summarized"
    sent = model.calls[-1].messages
    assert sent[0] == system_message("be brief")
    assert sent[1].role is Role.USER and sent[1].content.startswith("Summary of the earlier")
    assert "pages 1 and 2" in sent[1].content
    # the kept messages start with the call that asked for the kept tool result
    assert sent[2].role is Role.ASSISTANT and sent[2].tool_calls
    assert sent[3].role is Role.TOOL and sent[3].tool_call_id == sent[2].tool_calls[0].id
    # what was summarized: the user's request and the earlier tool results
    transcript = summaries[0][-1].content
    assert "[user] read" in transcript and "[tool fetch returned] page 1" in transcript


def test_a_conversation_within_budget_is_left_alone() -> None:
    calls: list[Any] = []

    def summarize(history: list[Message]) -> str:
        calls.append(history)
        return "a summary"

    model = ScriptedChatModel(["hi"])
    agent = ChatModelAgent(
        "A", "d", model,
        middlewares=[SummarizationMiddleware(ScriptedChatModel(summarize), max_tokens=10_000)],
    )
    assert Runner(agent).invoke("hello").text == "hi"
    assert calls == []
    assert model.calls[0].messages == [user_message("hello")]


def test_the_token_counter_is_pluggable() -> None:
    counted: list[int] = []

    def count(messages: Any) -> int:
        counted.append(len(messages))
        return 0

    agent = ChatModelAgent(
        "A", "d", ScriptedChatModel(["ok"]),
        middlewares=[SummarizationMiddleware(ScriptedChatModel([]), max_tokens=1, counter=count)],
    )
    Runner(agent).invoke("hello")
    assert counted == [1]


def test_approximate_tokens_counts_text_and_tool_calls() -> None:
    plain = approximate_tokens([user_message("x" * 400)])
    with_call = approximate_tokens([assistant_message("", [call("f", {"a": "y" * 400})])])
    assert plain == 104 and with_call > 100


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        SummarizationMiddleware(ScriptedChatModel([]), max_tokens=0)
    with pytest.raises(ValueError, match="max_chars"):
        ToolResultReductionMiddleware(max_chars=-1)


def test_the_module_surface_is_documented() -> None:
    import agentkit.compaction as compaction

    for name in compaction.__all__:
        obj = getattr(compaction, name)
        if isinstance(obj, type) or (callable(obj) and hasattr(obj, "__code__")):
            assert obj.__doc__, name
