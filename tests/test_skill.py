"""Skills: SKILL.md discovery from a backend directory, the ``skill`` tool (inline and fork),
and what happens with a SKILL.md that has no front matter or a call of a skill that does not
exist.

Tests named after Eino's follow ``adk/middlewares/skill/skill_test.go`` and
``filesystem_backend_test.go``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from agentkit import AgentContext, ChatModelAgent, Role, Runner, ToolArgumentsError, tool
from agentkit.backends import InMemoryBackend, LocalBackend
from agentkit.errors import AgentConfigError
from agentkit.middlewares import FilesystemMiddleware, SkillMiddleware
from agentkit.middlewares.skill import Skill, SkillError, load_skills, parse_skill
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import deep
from agentkit.testing import call, calls_message, run_events, summarize

PDF = "---\nname: pdf\ndescription: PDF processing\n---\nProcess PDF files here\n"
WEB = (
    "---\nname: web-research\ndescription: >\n  How to research a topic\n  and cite sources.\n"
    "---\n\n1. List the questions.\n2. Read sources/checklist.md.\n"
)


def skills_backend(**extra: str) -> InMemoryBackend:
    return InMemoryBackend({"skills/pdf/SKILL.md": PDF, "skills/web/SKILL.md": WEB, **extra})


def skill_tool(middleware: SkillMiddleware) -> Any:
    context = AgentContext("agent", "Be helpful.", [], [])
    middleware.before_agent(context)
    [tool_] = context.tools
    return tool_


# --- finding skills (Eino's filesystem_backend_test.go) --------------------------------------------


def test_filesystem_backend_list() -> None:
    """Eino's TestFilesystemBackend_List: one skill per directory right under the base."""
    backend = skills_backend(**{
        "skills/README.md": "files in the base directory are ignored",
        "skills/notes/todo.md": "a directory without SKILL.md is no skill",
        "skills/deep/nested/SKILL.md": "---\nname: nested\n---\nignored: too deep",
    })
    assert [(s.name, s.description, s.base_directory) for s in load_skills(backend, "skills")] == [
        ("pdf", "PDF processing", "skills/pdf"),
        ("web-research", "How to research a topic and cite sources.", "skills/web"),
    ]
    assert load_skills(InMemoryBackend(), "skills") == []  # a base directory that does not exist
    assert load_skills(InMemoryBackend({"skills/x.md": "x"}), "skills") == []


def test_filesystem_backend_list_from_a_local_directory(tmp_path: Path) -> None:
    (tmp_path / "skills" / "pdf").mkdir(parents=True)
    (tmp_path / "skills" / "pdf" / "SKILL.md").write_text(PDF)
    [skill] = load_skills(LocalBackend(tmp_path), "skills")
    assert skill == Skill("pdf", "PDF processing", "Process PDF files here", "skills/pdf")


def test_an_invalid_skill_md_is_skipped_with_a_warning_naming_the_file(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Eino's 'invalid SKILL.md returns error': here the one bad skill is left out (a model
    can write a SKILL.md: one bad file must not end every later run), and a warning says why."""
    backend = skills_backend(**{"skills/broken/SKILL.md": "# Broken\nNo front matter here.\n"})
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        assert [skill.name for skill in load_skills(backend, "skills")] == ["pdf", "web-research"]
    [warning] = caplog.records
    assert "skill file 'skills/broken/SKILL.md' has no front matter" in warning.getMessage()
    assert "left out" in warning.getMessage()
    with pytest.raises(SkillError, match="has no front matter"):  # parse_skill itself is strict
        parse_skill("# Broken\n", "skills/broken/SKILL.md")


def test_two_skills_with_one_name_are_both_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Neither wins: a SKILL.md written later must not take over a name by its path's order.
    backend = skills_backend(**{"skills/a-pdf/SKILL.md": PDF})
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        assert [skill.name for skill in load_skills(backend, "skills")] == ["web-research"]
    [warning] = caplog.records
    assert "2 skills are named 'pdf' ('skills/a-pdf', 'skills/pdf')" in warning.getMessage()


def alias_bomb(levels: int, key: str = "x") -> str:
    """YAML whose ``levels`` anchors each hold two aliases of the one before: 2**levels values."""
    lines = ["l0: &l0 [lol, lol]"]
    lines += [f"l{n}: &l{n} [*l{n - 1}, *l{n - 1}]" for n in range(1, levels)]
    lines.append(f"{key}: [*l{levels - 1}, *l{levels - 1}]")
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("front", "problem"),
    [
        (alias_bomb(24), "more than 20 aliases"),
        ("x: " + "[" * 30_000 + "]" * 30_000, "nests deeper than 20 levels"),
        ("description: '" + "x" * 70_000 + "'", "is longer than 65,536 characters"),
        ("a: &a [*a]", "refers to itself"),
    ],
    ids=["alias bomb", "deep nesting", "too large", "recursive"],
)
def test_front_matter_is_parsed_within_bounds(
    front: str, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    text = f"---\nname: bomb\n{front}\n---\nbody\n"
    with pytest.raises(SkillError, match=problem):
        parse_skill(text, "skills/bomb/SKILL.md")
    backend = skills_backend(**{"skills/bomb/SKILL.md": text})
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        assert [skill.name for skill in load_skills(backend, "skills")] == ["pdf", "web-research"]
    assert problem in caplog.records[0].getMessage()


def test_front_matter_with_a_few_aliases_is_read() -> None:
    text = "---\nname: &n pdf\ndescription: *n\n---\nbody"
    assert parse_skill(text, "skills/pdf/SKILL.md").description == "pdf"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("---\nname: a\ndescription: b\n---\nbody", ("a", "b", "body")),
        ("---\nname: a\n---\nline 1\n\nline 2\n", ("a", "", "line 1\n\nline 2")),
        ("\n\n  ---\nname: a\n---\n  body  \n\n", ("a", "", "body")),
        ("---\nname: a\n---\n", ("a", "", "")),
        ("---\nname: a\n---\nbefore\n---\nafter", ("a", "", "before\n---\nafter")),
    ],
    ids=["valid", "multiline content", "surrounding whitespace", "empty content", "--- inside"],
)
def test_parse_frontmatter(text: str, expected: tuple[str, str, str]) -> None:
    """Eino's TestParseFrontmatter."""
    skill = parse_skill(text, "skills/a/SKILL.md")
    assert (skill.name, skill.description, skill.content) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("name: a\n---\nbody", "has no front matter: it must start with a line '---'"),
        ("---\nname: a\nbody without closing", "its front matter is not closed"),
        ("---\nname: [a\n---\nbody", "its front matter is not valid YAML"),
        ("---\n- a\n- b\n---\nbody", "must be YAML key: value pairs"),
        ("---\ndescription: no name\n---\nbody", "has no 'name'"),
        ("---\n---\nbody", "has no 'name'"),
        ("---\nname: a\ncontext: thread\n---\nbody", "context 'thread' is not one of"),
    ],
    ids=["missing opening", "missing closing", "invalid yaml", "not a mapping", "no name",
         "empty front matter", "unknown context"],
)
def test_a_bad_skill_md_gives_a_clear_error(text: str, problem: str) -> None:
    with pytest.raises(SkillError, match=problem) as raised:
        parse_skill(text, "skills/a/SKILL.md")
    assert "skills/a/SKILL.md" in str(raised.value)
    assert isinstance(raised.value, ValueError)


# --- the skill tool (Eino's skill_test.go) ---------------------------------------------------------


def test_tool() -> None:
    """Eino's TestTool: the description lists the skills; a call loads one inline."""
    backend = InMemoryBackend({
        "skills/one/SKILL.md": "---\nname: name1\ndescription: desc1\n---\ncontent1",
        "skills/two/SKILL.md": "---\nname: name2\ndescription: desc2\n---\ncontent2",
    })
    tool_ = skill_tool(SkillMiddleware(backend))
    info = tool_.info()
    assert info.name == "skill"
    assert info.description.endswith(
        "\n<available_skills>\n"
        "<skill>\n<name>\nname1\n</name>\n<description>\ndesc1\n</description>\n</skill>\n"
        "<skill>\n<name>\nname2\n</name>\n<description>\ndesc2\n</description>\n</skill>\n"
        "</available_skills>\n"
    )
    assert info.parameters["required"] == ["skill"]
    assert tool_.invoke('{"skill": "name1"}') == (
        "Launching skill: name1\nBase directory for this skill: skills/one\n\ncontent1"
    )


def test_skill_tool_name() -> None:
    """Eino's TestSkillToolName: a custom name, also in the instruction."""
    middleware = SkillMiddleware(skills_backend(), tool_name="load_skill")
    context = AgentContext("agent", "Be helpful.", [], [])
    middleware.before_agent(context)
    assert context.tools[0].info().name == "load_skill"
    assert context.instruction.startswith("Be helpful.\n\n# Skills")
    assert "'load_skill'" in context.instruction and "{tool_name}" not in context.instruction


def test_new_middleware() -> None:
    """Eino's TestNewMiddleware: bad settings are refused; a custom instruction is used."""
    with pytest.raises(AgentConfigError, match="base_dir"):
        SkillMiddleware(skills_backend(), "")
    with pytest.raises(AgentConfigError, match="tool_name"):
        SkillMiddleware(skills_backend(), tool_name="")
    context = AgentContext("agent", "Base.", [], [])
    SkillMiddleware(skills_backend(), instruction="Call {tool_name} first.").before_agent(context)
    assert context.instruction == "Base.\nCall skill first."


def test_invokable_run_inline_mode() -> None:
    """Eino's TestInvokableRun_InlineMode: bad JSON and unknown skills are argument errors."""
    tool_ = skill_tool(SkillMiddleware(skills_backend()))
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        tool_.invoke("not json")
    with pytest.raises(
        ToolArgumentsError,
        match="there is no skill named 'nonexistent'; the skills are: 'pdf', 'web-research'",
    ):
        tool_.invoke('{"skill": "nonexistent"}')
    assert tool_.invoke('{"skill": "pdf"}') == (
        "Launching skill: pdf\nBase directory for this skill: skills/pdf\n\nProcess PDF files here"
    )


def test_invokable_run_fork_mode() -> None:
    """Eino's TestInvokableRun_AgentMode: a fork runs the skill on an agent of its own."""
    forked = "---\nname: summarize\ndescription: s\ncontext: fork\n---\nSummarize the notes."
    named = "---\nname: review\ndescription: r\ncontext: fork\nagent: reviewer\n---\nReview it."
    backend = skills_backend(**{"skills/sum/SKILL.md": forked, "skills/rev/SKILL.md": named})
    worker_model = ScriptedChatModel(lambda messages: f"worked on: {messages[-1].content}")
    worker = ChatModelAgent("worker", "does skills", worker_model)
    reviewer = ChatModelAgent("reviewer", "reviews", ScriptedChatModel(["looks good"]))
    tool_ = skill_tool(SkillMiddleware(backend, agents={"reviewer": reviewer}, default_agent=worker))
    assert tool_.invoke('{"skill": "summarize"}') == (
        'Skill "summarize" completed (sub-agent execution).\n\nResult:\nworked on: '
        "Base directory for this skill: skills/sum\n\nSummarize the notes."
    )
    assert tool_.invoke('{"skill": "review"}') == (
        'Skill "review" completed (sub-agent execution).\n\nResult:\nlooks good'
    )
    # The forked agent starts with a fresh context: only the skill's content.
    assert [m.role for m in worker_model.calls[0].messages] == [Role.USER]


def test_fork_without_its_agent_is_told_to_the_model() -> None:
    """Eino's 'fork mode without AgentHub returns error'."""
    forked = "---\nname: summarize\ndescription: s\ncontext: fork\n---\nSummarize."
    with_context = "---\nname: recall\ndescription: r\ncontext: fork_with_context\n---\nRecall."
    backend = skills_backend(**{"skills/sum/SKILL.md": forked, "skills/rec/SKILL.md": with_context})
    tool_ = skill_tool(SkillMiddleware(backend))
    with pytest.raises(ToolArgumentsError, match=r"needs a default agent.*default_agent="):
        tool_.invoke('{"skill": "summarize"}')
    with pytest.raises(
        ToolArgumentsError, match=r"\(context: fork_with_context\) and needs a default agent"
    ):
        tool_.invoke('{"skill": "recall"}')


def test_fork_with_context_runs_the_skill_on_the_caller_s_conversation() -> None:
    """Eino's fork_with_context: the forked agent sees the caller's history, then the skill."""
    recall = "---\nname: recall\ndescription: r\ncontext: fork_with_context\n---\nRecall it."
    backend = skills_backend(**{"skills/rec/SKILL.md": recall})
    worker_model = ScriptedChatModel(lambda messages: "the code is 1234")
    worker = ChatModelAgent("worker", "does skills", worker_model)
    model = ScriptedChatModel(
        [
            calls_message(call("lookup", {}, id="l1")),
            calls_message(call("skill", {"skill": "recall"}, id="s1")),
            "done",
        ]
    )

    @tool
    def lookup() -> str:
        """Look the code up."""
        return "code: 1234"

    agent = ChatModelAgent(
        "caller", "calls skills", model, instruction="Be helpful.", tools=[lookup],
        middlewares=[SkillMiddleware(backend, default_agent=worker)],
    )
    result = Runner(agent).invoke("what is the code?")
    assert result.text == "done"
    seen = worker_model.calls[0].messages
    # No system message of the caller; its user message; its calls and results as context;
    # the skill's instructions last. No dangling tool call (the skill call itself is left out).
    assert seen[0].role is Role.USER and seen[0].content == "what is the code?"
    assert all(m.role is not Role.SYSTEM and not m.tool_calls for m in seen)
    assert any("code: 1234" in m.content for m in seen[1:-1])
    assert seen[-1].role is Role.USER
    assert seen[-1].content == "Base directory for this skill: skills/rec\n\nRecall it."
    [result_message] = [m for m in model.calls[2].messages if m.tool_call_id == "s1"]
    assert result_message.content.endswith("Result:\nthe code is 1234")


def test_a_forked_skill_runs_its_agent_with_the_model_its_front_matter_names() -> None:
    """Eino's model hub: front matter ``model`` picks one of the middleware's models."""
    fast = "---\nname: quick\ndescription: q\ncontext: fork\nmodel: fast\n---\nBe quick."
    unknown = "---\nname: odd\ndescription: o\ncontext: fork\nmodel: huge\n---\nHm."
    inline = "---\nname: plain\ndescription: p\nmodel: fast\n---\nInline."
    backend = skills_backend(**{"skills/q/SKILL.md": fast, "skills/o/SKILL.md": unknown,
                                "skills/p/SKILL.md": inline})
    own_model = ScriptedChatModel(lambda messages: "own model")
    fast_model = ScriptedChatModel(lambda messages: "fast model")
    worker = ChatModelAgent("worker", "does skills", own_model)
    middleware = SkillMiddleware(backend, default_agent=worker, models={"fast": fast_model})
    tool_ = skill_tool(middleware)
    assert tool_.invoke('{"skill": "quick"}').endswith("Result:\nfast model")
    assert len(fast_model.calls) == 1 and not own_model.calls
    with pytest.raises(ToolArgumentsError, match=r"asks for model 'huge'.*the models: 'fast'"):
        tool_.invoke('{"skill": "odd"}')
    assert tool_.invoke('{"skill": "plain"}').startswith("Launching skill: plain")  # inline
    parsed = parse_skill(fast, "skills/q/SKILL.md")
    assert (parsed.context, parsed.model) == ("fork", "fast")


def test_before_agent() -> None:
    """Eino's TestBeforeAgent: the instruction gets the skills section, the tools the tool."""
    context = AgentContext("agent", "Original", [], [])
    SkillMiddleware(skills_backend()).before_agent(context)
    assert context.instruction.startswith("Original\n\n# Skills\n")
    assert [t.info().name for t in context.tools] == ["skill"]


# --- whole runs -----------------------------------------------------------------------------------


def test_a_skill_is_loaded_on_demand_and_its_files_read_with_the_file_tools(tmp_path: Path) -> None:
    (tmp_path / "skills" / "web" / "sources").mkdir(parents=True)
    (tmp_path / "skills" / "web" / "SKILL.md").write_text(WEB)
    (tmp_path / "skills" / "web" / "sources" / "checklist.md").write_text("- cite every claim\n")
    backend = LocalBackend(tmp_path)
    model = ScriptedChatModel(
        [
            calls_message(call("skill", {"skill": "web-research"}, id="s1")),
            calls_message(call("read_file", {"file_path": "skills/web/sources/checklist.md"}, id="r1")),
            "Researched, with every claim cited.",
        ]
    )
    agent = ChatModelAgent(
        "researcher", "researches", model, instruction="Research well.",
        middlewares=[FilesystemMiddleware(backend), SkillMiddleware(backend)],
    )
    events = run_events(lambda: Runner(agent).query("Research quantum computing"))
    assert [summarize(event)[2:4] for event in events] == [
        ("assistant", ""),
        ("tool/skill", "Launching skill: web-research\nBase directory for this skill: skills/web\n\n"
         "1. List the questions.\n2. Read sources/checklist.md."),
        ("assistant", ""),
        ("tool/read_file", "     1\t- cite every claim"),
        ("assistant", "Researched, with every claim cited."),
    ]
    first = model.calls[0]
    assert first.messages[0].content.startswith("Research well.\n\n# Skills")
    skill_info = next(info for info in first.tools if info.name == "skill")
    assert "<name>\nweb-research\n</name>" in skill_info.description
    assert "How to research a topic and cite sources." in skill_info.description
    # The instructions entered the conversation only when loaded.
    assert "List the questions" not in json.dumps([m.content for m in first.messages])


def test_a_bad_skill_md_written_by_the_model_leaves_later_runs_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The model itself can write SKILL.md files (write_file): a plain-text one, a duplicate
    # name and an alias bomb are each left out of the runs that follow, which go on.
    backend = skills_backend(**{
        "skills/broken/SKILL.md": "Just text.\n",
        "skills/pdf-again/SKILL.md": PDF,
        "skills/bomb/SKILL.md": f"---\nname: bomb\n{alias_bomb(30)}\n---\nbody\n",
    })
    model = ScriptedChatModel(lambda messages: "ok")
    agent = ChatModelAgent("a", "d", model, middlewares=[SkillMiddleware(backend)])
    with caplog.at_level(logging.WARNING, logger="agentkit"):
        for _ in range(2):
            assert Runner(agent).invoke("hi").text == "ok"
    description = next(i for i in model.calls[-1].tools if i.name == "skill").description
    assert "web-research" in description
    assert "pdf" not in description and "bomb" not in description
    assert len(caplog.records) == 6  # three warnings a run


def test_a_call_of_a_skill_that_does_not_exist_is_told_to_the_model() -> None:
    model = ScriptedChatModel([calls_message(call("skill", {"skill": "xlsx"})), "no such skill"])
    agent = deep.new(
        model, middlewares=[SkillMiddleware(skills_backend())], without_general_sub_agent=True
    )
    events = run_events(lambda: Runner(agent).query("make a spreadsheet"))
    assert summarize(events[1])[2:4] == (
        "tool/skill",
        "Error: skill: there is no skill named 'xlsx'; the skills are: 'pdf', 'web-research'. "
        "Correct the arguments and call skill again.",
    )
    assert summarize(events[-1])[3] == "no such skill"


def test_skills_added_between_runs_are_found_by_the_next_run() -> None:
    backend = InMemoryBackend({"skills/pdf/SKILL.md": PDF})
    model = ScriptedChatModel(lambda messages: "ok")
    agent = ChatModelAgent("a", "d", model, middlewares=[SkillMiddleware(backend)])
    run_events(lambda: Runner(agent).query("1"))
    backend.write("skills/web/SKILL.md", WEB)
    run_events(lambda: Runner(agent).query("2"))
    first, second = (next(i for i in c.tools if i.name == "skill") for c in model.calls)
    assert "web-research" not in first.description
    assert "web-research" in second.description
