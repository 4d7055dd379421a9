"""Tool search: dynamic tools hidden from the model until ``tool_search`` finds them.

Tests named after Eino's follow ``adk/middlewares/dynamictool/toolsearch/toolsearch_test.go``
(Mode1: the client-side search; Mode2: ``UseModelToolSearch``, the model's own search, whose
wire is tested against Anthropic's in ``test_models_anthropic_tool_search.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentkit import (
    AgentContext,
    ChatModelAgent,
    Message,
    ModelState,
    Role,
    Runner,
    ToolArgumentsError,
    ToolInfo,
    assistant_message,
    tool,
    tool_message,
    user_message,
)
from agentkit.errors import AgentConfigError
from agentkit.middlewares import ToolSearchMiddleware
from agentkit.middlewares.tool_search import search_tools, split_tool_name
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, run_events, summarize

SEARCHABLE = {
    info.name: info
    for info in (
        ToolInfo("get_weather", "Get current weather for a city"),
        ToolInfo("search_flights", "Search available flights"),
        ToolInfo("mcp__slack__send_message", "Send a message to Slack channel"),
        ToolInfo("mcp__slack__read_channel", "Read messages from Slack channel"),
        ToolInfo("create_calendar_event", "Create a new calendar event"),
        ToolInfo("NotebookEdit", "Edit Jupyter notebook cells"),
    )
}


@pytest.mark.parametrize(
    ("query", "max_results", "expected"),
    [
        ("weather", 5, ["get_weather"]),
        ("slack", 5, ["mcp__slack__read_channel", "mcp__slack__send_message"]),
        ("send message", 5, ["mcp__slack__send_message", "mcp__slack__read_channel"]),
        ("+slack send", 5, ["mcp__slack__send_message", "mcp__slack__read_channel"]),
        ("+github send", 5, []),
        ("select:get_weather", 5, ["get_weather"]),
        ("select:get_weather,NotebookEdit", 5, ["get_weather", "NotebookEdit"]),
        ("select:nonexistent", 5, []),
        ("slack", 1, ["mcp__slack__read_channel"]),
        ("notebook", 5, ["NotebookEdit"]),
        ("jupyter", 5, ["NotebookEdit"]),
    ],
    ids=[
        "keyword exact name part match", "keyword matches multiple tools",
        "multi-word ranking - send_message ranked first", "required keyword filters to slack only",
        "required keyword no match", "direct select single", "direct select multiple",
        "direct select nonexistent", "max_results limits output",
        "camelCase split matches notebook", "description match - jupyter",
    ],
)
def test_search(query: str, max_results: int, expected: list[str]) -> None:
    """Eino's TestSearch."""
    assert search_tools(query, SEARCHABLE, max_results) == expected


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("hello", ["hello"]),
        ("NotebookEdit", ["Notebook", "Edit"]),
        ("camelCase", ["camel", "Case"]),
        ("HTMLParser", ["HTML", "Parser"]),
        ("getURL", ["get", "URL"]),
        ("A", ["A"]),
        ("AB", ["AB"]),
        ("HTTP", ["HTTP"]),
        ("mcp__slack__send_message", ["mcp", "slack", "send", "message"]),
        ("", []),
    ],
)
def test_split_camel_case(name: str, words: list[str]) -> None:
    """Eino's TestSplitCamelCase (and the name splitting around it)."""
    assert split_tool_name(name) == words


def _tool(name: str, description: str, called: list[str]) -> Any:
    def run(input: str) -> str:
        called.append(name)
        return '{"result":"ok"}'

    return tool(run, name=name, description=description)


def test_middleware_flow() -> None:
    """Eino's TestMiddlewareFlow: a dynamic tool is offered only once tool_search selected it."""
    called: list[str] = []
    dynamic_a = _tool("dynamic_tool_a", "Dynamic tool A", called)
    dynamic_b = _tool("dynamic_tool_b", "Dynamic tool B", called)
    static = _tool("static_tool", "Static tool", called)
    middleware = ToolSearchMiddleware([dynamic_a, dynamic_b])
    model = ScriptedChatModel(
        [
            calls_message(call("tool_search", {"query": "select:dynamic_tool_a", "max_results": 5}, id="tc1")),
            calls_message(call("dynamic_tool_a", {"input": "hello"}, id="tc2")),
            "done",
        ]
    )
    agent = ChatModelAgent(
        "test_agent", "test", model, instruction="you are a test agent", tools=[static],
        middlewares=[middleware],
    )
    events = run_events(lambda: Runner(agent).query("test"))
    assert [summarize(event)[2:4] for event in events] == [
        ("assistant", ""),
        ("tool/tool_search", '{"matches":["dynamic_tool_a"]}'),
        ("assistant", ""),
        ("tool/dynamic_tool_a", '{"result":"ok"}'),
        ("assistant", "done"),
    ]
    assert called == ["dynamic_tool_a"]
    offered = [sorted(info.name for info in model_call.tools) for model_call in model.calls]
    assert offered == [
        ["static_tool", "tool_search"],
        ["dynamic_tool_a", "static_tool", "tool_search"],
        ["dynamic_tool_a", "static_tool", "tool_search"],
    ]
    reminder = model.calls[0].messages[1]
    assert reminder.role is Role.USER
    assert reminder.content == middleware.reminder == (
        "<available-deferred-tools>\ndynamic_tool_a\ndynamic_tool_b\n</available-deferred-tools>"
    )
    assert [m.content for m in model.calls[0].messages] == [
        "you are a test agent", middleware.reminder, "test"
    ]
    # Kept in the conversation once, not added again.
    assert sum(m.content == middleware.reminder for m in model.calls[2].messages) == 1


def test_new() -> None:
    """Eino's TestNew: tools are required, names unique."""
    with pytest.raises(AgentConfigError, match="at least one dynamic tool"):
        ToolSearchMiddleware([])
    called: list[str] = []
    with pytest.raises(AgentConfigError, match="two dynamic tools are named 't1'"):
        ToolSearchMiddleware([_tool("t1", "a", called), _tool("t1", "b", called)])
    assert ToolSearchMiddleware([_tool("t1", "tool 1", called)]).reminder.count("t1") == 1


def _state(messages: list[Message], middleware: ToolSearchMiddleware) -> ModelState:
    context = AgentContext("a", "", [], [])
    middleware.before_agent(context)
    return ModelState("a", messages, [ToolInfo("static_tool", "Static tool")] + [t.info() for t in context.tools])


def _names(state: ModelState) -> list[str]:
    return sorted(info.name for info in state.tools)


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([Message(Role.SYSTEM, "sys"), user_message("hi")], ["sys", "R", "hi"]),
        ([Message(Role.SYSTEM, "sys1"), Message(Role.SYSTEM, "sys2")], ["sys1", "sys2", "R"]),
        ([], ["R"]),
        ([user_message("hi"), assistant_message("hello")], ["R", "hi", "hello"]),
    ],
    ids=["normal: system then user", "all system messages", "empty input", "no system messages"],
)
def test_ensure_reminder(messages: list[Message], expected: list[str]) -> None:
    """Eino's TestEnsureReminder: after the leading system messages, once."""
    called: list[str] = []
    middleware = ToolSearchMiddleware([_tool("dyn", "d", called)])
    state = _state(messages, middleware)
    middleware.before_model(state)
    contents = ["R" if m.content == middleware.reminder else m.content for m in state.messages]
    assert contents == expected
    middleware.before_model(state)
    assert ["R" if m.content == middleware.reminder else m.content for m in state.messages] == expected


def test_forward_selection_across_turns_ignores_bad_results() -> None:
    """Eino's MultipleToolSearchResultsAcrossTurns, MalformedJSONInToolSearchResult and
    NonExistentToolInForwardSelection."""
    called: list[str] = []
    middleware = ToolSearchMiddleware(
        [_tool(f"dynamic_tool_{x}", f"Dynamic tool {x}", called) for x in "abc"]
    )
    messages = [
        Message(Role.SYSTEM, "sys"),
        calls_message(call("tool_search", {"query": "select:dynamic_tool_a"}, id="tc1")),
        tool_message(json.dumps({"matches": ["dynamic_tool_a"]}), "tc1", "tool_search"),
        calls_message(call("tool_search", {"query": "x"}, id="tc2")),
        tool_message("{invalid json!!!", "tc2", "tool_search"),
        calls_message(call("tool_search", {"query": "y"}, id="tc3")),
        tool_message(json.dumps({"matches": ["nonexistent_tool", "dynamic_tool_b"]}), "tc3", "tool_search"),
        tool_message(json.dumps({"matches": ["dynamic_tool_c"]}), "tc4", "other_tool"),
    ]
    state = _state(messages, middleware)
    middleware.before_model(state)
    assert _names(state) == ["dynamic_tool_a", "dynamic_tool_b", "static_tool", "tool_search"]


def test_tool_search_refuses_an_empty_query() -> None:
    called: list[str] = []
    middleware = ToolSearchMiddleware([_tool("dyn", "d", called)])
    context = AgentContext("a", "", [], [])
    middleware.before_agent(context)
    search = context.tools[0]
    with pytest.raises(ToolArgumentsError, match="the query is empty"):
        search.invoke('{"query": "  "}')  # type: ignore[attr-defined]
    assert search.invoke('{"query": "dyn"}') == '{"matches":["dyn"]}'  # type: ignore[attr-defined]
    assert search.invoke('{"query": "zzz"}') == '{"matches":[]}'  # type: ignore[attr-defined]


def test_before_model_mode2_deferred_tool_infos() -> None:
    """Eino's TestBeforeModelRewriteState_Mode2_DeferredToolInfos: with the model's own
    search, the dynamic tools are offered deferred, the static ones as they are, and there is
    no tool_search; the reminder is put in all the same."""
    called: list[str] = []
    middleware = ToolSearchMiddleware(
        [_tool("dynamic_tool_a", "A", called), _tool("dynamic_tool_b", "B", called)],
        use_model_tool_search=True,
    )
    assert middleware.use_model_tool_search
    state = _state([Message(Role.SYSTEM, "sys"), user_message("hi")], middleware)
    assert _names(state) == ["dynamic_tool_a", "dynamic_tool_b", "static_tool"]
    middleware.before_model(state)
    assert [(info.name, info.deferred) for info in state.tools] == [
        ("static_tool", False),
        ("dynamic_tool_a", True),
        ("dynamic_tool_b", True),
    ]
    assert [m.content for m in state.messages] == ["sys", middleware.reminder, "hi"]
    offered = state.tools
    middleware.before_model(state)
    assert state.tools is offered  # deferred once per run: later calls change nothing


def test_before_model_mode2_empty_tool_infos() -> None:
    """Eino's TestBeforeModelRewriteState_Mode2_EmptyToolInfos."""
    called: list[str] = []
    middleware = ToolSearchMiddleware([_tool("dyn", "d", called)], use_model_tool_search=True)
    state = ModelState("a", [user_message("hi")], [])
    middleware.before_model(state)
    assert state.tools == []


def test_middleware_flow_with_use_model_tool_search() -> None:
    """Eino's TestMiddlewareFlow in Mode2: the model (its search server-side) calls a
    dynamic tool it found; the agent runs it. Every call offers the same deferred list."""
    called: list[str] = []
    dynamic_a = _tool("dynamic_tool_a", "Dynamic tool A", called)
    dynamic_b = _tool("dynamic_tool_b", "Dynamic tool B", called)
    static = _tool("static_tool", "Static tool", called)
    middleware = ToolSearchMiddleware([dynamic_a, dynamic_b], use_model_tool_search=True)
    model = ScriptedChatModel(
        [calls_message(call("dynamic_tool_a", {"input": "hello"}, id="tc1")), "done"]
    )
    agent = ChatModelAgent(
        "test_agent", "test", model, tools=[static], middlewares=[middleware]
    )
    events = run_events(lambda: Runner(agent).query("test"))
    assert [summarize(event)[2:4] for event in events] == [
        ("assistant", ""),
        ("tool/dynamic_tool_a", '{"result":"ok"}'),
        ("assistant", "done"),
    ]
    assert called == ["dynamic_tool_a"]
    offered = [
        [(info.name, info.deferred) for info in model_call.tools] for model_call in model.calls
    ]
    assert offered == [
        [("static_tool", False), ("dynamic_tool_a", True), ("dynamic_tool_b", True)]
    ] * 2
