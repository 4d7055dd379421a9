# ruff: noqa: RUF001
# (the Chinese texts use full-width punctuation, which the rule takes for look-alikes)
"""The language of the built-in prompts (Eino's ``adk.SetLanguage``): English or Chinese."""

from __future__ import annotations

import string
from collections.abc import Iterator

import pytest

from agentkit import ChatModelAgent, Runner, set_sub_agents
from agentkit import _prompts_zh as zh
from agentkit.backends import LocalBackend
from agentkit.compaction import SUMMARY_INSTRUCTION, SummarizationMiddleware
from agentkit.language import LANGUAGES, get_language, set_language
from agentkit.middlewares import SkillMiddleware
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import _deep_prompts as deep_prompts
from agentkit.prebuilt import _planexecute_prompts as pe_prompts
from agentkit.prebuilt import deep, planexecute
from agentkit.schema import Role, user_message
from agentkit.testing import call, calls_message, run_events
from agentkit.tools.transfer import transfer_instruction


@pytest.fixture(autouse=True)
def english_again() -> Iterator[None]:
    yield
    set_language("en")


def system_text(model: ScriptedChatModel, call: int = 0) -> str:
    messages = model.calls[call].messages
    return "\n".join(m.content for m in messages if m.role is Role.SYSTEM)


def test_english_is_the_default() -> None:
    assert get_language() == "en" and LANGUAGES == ("en", "zh")
    model = ScriptedChatModel(["ok"])
    run_events(Runner(deep.new(model, without_general_sub_agent=True)).query("hi"))
    assert system_text(model).startswith("You are a capable assistant")


def test_set_language_makes_the_deep_agent_speak_chinese() -> None:
    set_language("zh")
    model = ScriptedChatModel(["好的"])
    run_events(Runner(deep.new(model)).query("你好"))
    text = system_text(model)
    assert text.startswith(zh.DEEP_INSTRUCTION) and "'task' 工具" in text
    tools = {tool.name: tool.description for tool in model.calls[0].tools}
    assert tools["write_todos"] == zh.DEEP_WRITE_TODOS_DESCRIPTION
    assert tools["task"].startswith("为一项复杂")


def test_an_agent_keeps_the_language_it_was_built_in() -> None:
    model = ScriptedChatModel(["ok"])
    agent = deep.new(model, without_general_sub_agent=True)  # built in English
    set_language("zh")
    run_events(Runner(agent).query("hi"))
    assert system_text(model).startswith("You are a capable assistant")


def test_a_per_agent_language_wins_over_the_process_setting() -> None:
    set_language("zh")
    model = ScriptedChatModel(["ok"])
    agent = deep.new(model, without_general_sub_agent=True, language="en")
    run_events(Runner(agent).query("hi"))
    assert system_text(model).startswith("You are a capable assistant")


def test_the_transfer_instruction_follows_the_language_when_the_agent_runs() -> None:
    router_model = ScriptedChatModel(["我来回答"])
    router = set_sub_agents(
        ChatModelAgent("Router", "routes", router_model),
        [ChatModelAgent("Weather", "天气", ScriptedChatModel([]))],
    )
    set_language("zh")
    run_events(Runner(router).query("天气如何？"))
    text = system_text(router_model)
    assert "可以转交的其他智能体" in text and "智能体名称：Weather" in text
    assert transfer_instruction([router], language="en").startswith("Available other agents")


def test_plan_execute_prompts_in_chinese() -> None:
    planner_model = ScriptedChatModel([calls_message(call("plan", {"steps": ["查天气"]}))])
    planner = planexecute.new_planner(planner_model, language="zh")
    run_events(Runner(planner).query("去北京旅行"))
    assert system_text(planner_model) == zh.PLANNER_PROMPT
    english = ScriptedChatModel([calls_message(call("plan", {"steps": ["a"]}))])
    run_events(Runner(planexecute.new_planner(english)).query("trip"))
    assert system_text(english) == pe_prompts.PLANNER_PROMPT


def test_summarization_in_chinese() -> None:
    summarizer = ScriptedChatModel(["他们谈了天气。"])
    middleware = SummarizationMiddleware(summarizer, max_tokens=1, keep_last=1, language="zh")
    model = ScriptedChatModel(["好"])
    agent = ChatModelAgent("A", "d", model, middlewares=[middleware])
    run_events(Runner(agent).run([user_message("早上好"), user_message("今天天气如何？")]))
    assert summarizer.calls[0].messages[0].content == zh.SUMMARY_INSTRUCTION
    assert model.calls[0].messages[0].content == "较早对话的总结：\n他们谈了天气。"
    assert SummarizationMiddleware(summarizer, max_tokens=1).instruction == SUMMARY_INSTRUCTION


def test_skills_in_chinese(tmp_path: object) -> None:
    backend = LocalBackend(str(tmp_path))
    model = ScriptedChatModel(["好"])
    set_language("zh")
    agent = ChatModelAgent("A", "d", model, middlewares=[SkillMiddleware(backend)])
    run_events(Runner(agent).query("hi"))
    assert "# 技能" in system_text(model)
    (skill_tool,) = model.calls[0].tools
    assert skill_tool.description.startswith("加载一个技能")


def test_unknown_language_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="'en' and 'zh'"):
        set_language("fr")
    with pytest.raises(ValueError, match="unknown language 'de'"):
        deep.new(ScriptedChatModel([]), language="de")
    assert get_language() == "en"


def _fields(text: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(text) if field}


@pytest.mark.parametrize(
    ("english", "chinese"),
    [
        (deep_prompts.TASK_TOOL_DESCRIPTION, zh.DEEP_TASK_TOOL_DESCRIPTION),
        (pe_prompts.EXECUTOR_PROMPT, zh.EXECUTOR_PROMPT),
        (pe_prompts.REPLANNER_SYSTEM_PROMPT, zh.REPLANNER_SYSTEM_PROMPT),
        (pe_prompts.REPLANNER_PROMPT, zh.REPLANNER_PROMPT),
        ("Step: {step}\nResult: {result}\n\n", zh.STEP_LINES),
        ("{agents} {tool}", zh.TRANSFER_INSTRUCTION),
        ("{name} {description}", zh.TRANSFER_AGENT_LINE),
    ],
)
def test_each_chinese_template_has_the_fields_of_the_english_one(
    english: str, chinese: str
) -> None:
    assert _fields(chinese) == _fields(english)
