"""Summarization and reduction as Eino's middlewares do them (``adk/middlewares/summarization``,
``adk/middlewares/reduction``): trigger conditions, a finalizer, hooks, summarizer retries, a
bounded summarizer input, and rules per tool."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agentkit import (
    ChatModelAgent,
    Message,
    ModelError,
    ModelRetryConfig,
    Role,
    Runner,
    ToolCallInfo,
    tool,
)
from agentkit.backends import InMemoryBackend
from agentkit.compaction import (
    SummarizationAction,
    SummarizationMiddleware,
    ToolResultReductionMiddleware,
)
from agentkit.errors import AgentKitTypeError
from agentkit.middlewares import SkillMiddleware
from agentkit.models import ScriptedChatModel
from agentkit.schema import assistant_message, user_message
from agentkit.testing import call, calls_message


def history(turns: int) -> list[Message]:
    messages: list[Message] = []
    for number in range(turns):
        messages.append(user_message(f"question {number}"))
        messages.append(assistant_message(f"answer {number}"))
    messages.append(user_message("last question"))
    return messages


def run_with(middleware: SummarizationMiddleware, turns: int = 4) -> ScriptedChatModel:
    model = ScriptedChatModel(["final"])
    agent = ChatModelAgent("A", "d", model, middlewares=[middleware])
    assert Runner(agent).invoke(history(turns)).text == "final"
    return model


def test_trigger_context_messages() -> None:
    # Eino's TriggerCondition.ContextMessages: more messages than allowed, however short.
    summarizer = ScriptedChatModel(["they talked"])
    model = run_with(SummarizationMiddleware(summarizer, max_messages=5, keep_last=1))
    assert [m.content for m in model.calls[0].messages] == [
        "Summary of the earlier conversation:\nthey talked",
        "last question",
    ]
    quiet = ScriptedChatModel([])
    model = run_with(SummarizationMiddleware(quiet, max_messages=50, keep_last=1))
    assert len(model.calls[0].messages) == 9 and quiet.calls == []


def test_finalize_replaces_the_summarized_messages() -> None:
    seen: list[tuple[int, str]] = []

    def finalize(older: Sequence[Message], summary: Message) -> list[Message]:
        seen.append((len(older), summary.content))
        return [user_message(f"<summary>{summary.content}</summary>"), assistant_message("ok")]

    summarizer = ScriptedChatModel(["short"])
    model = run_with(
        SummarizationMiddleware(summarizer, max_messages=3, keep_last=1, finalize=finalize)
    )
    assert seen == [(8, "short")]
    assert [m.content for m in model.calls[0].messages] == [
        "<summary>short</summary>", "ok", "last question",
    ]


def test_callback_sees_the_state_before_and_after() -> None:
    calls: list[tuple[str, int, int]] = []

    def before(messages: Sequence[Message]) -> None:
        calls.append(("before", len(messages), 0))

    def after(before: Sequence[Message], after: Sequence[Message]) -> None:
        calls.append(("after", len(before), len(after)))

    summarizer = ScriptedChatModel(["s"])
    run_with(
        SummarizationMiddleware(
            summarizer, max_messages=3, keep_last=1,
            before_summarize=before, after_summarize=after,
        )
    )
    assert calls == [("before", 9, 0), ("after", 9, 2)]


def test_summarizer_retry() -> None:
    summarizer = ScriptedChatModel([ModelError("overloaded"), "they talked"])
    retry = ModelRetryConfig(max_retries=2, backoff=lambda attempt: 0.0)
    model = run_with(SummarizationMiddleware(summarizer, max_messages=3, keep_last=1, retry=retry))
    assert len(summarizer.calls) == 2
    assert model.calls[0].messages[0].content.endswith("they talked")


def test_without_retry_a_failed_summary_fails_the_run() -> None:
    summarizer = ScriptedChatModel([ModelError("overloaded")])
    agent = ChatModelAgent(
        "A", "d", ScriptedChatModel([]),
        middlewares=[SummarizationMiddleware(summarizer, max_messages=3, keep_last=1)],
    )
    result = Runner(agent).invoke(history(4), raise_errors=False)
    assert str(result.error) == "overloaded"


def test_bounded_summarizer_input_sends_the_latest_older_messages() -> None:
    # Eino PR #1165: the summarizer's input fits a token window; the oldest are left out.
    summarizer = ScriptedChatModel(["s"])
    run_with(
        SummarizationMiddleware(
            summarizer, max_messages=3, keep_last=1, max_input_tokens=20,
            counter=lambda messages: 5 * len(messages),
        ),
        turns=6,
    )
    transcript = summarizer.calls[0].messages[-1].content
    assert transcript.splitlines() == [
        "[user] question 4", "[assistant] answer 4", "[user] question 5", "[assistant] answer 5",
    ]


def test_summarization_needs_a_trigger() -> None:
    with pytest.raises(ValueError, match="needs a trigger"):
        SummarizationMiddleware(ScriptedChatModel([]))
    with pytest.raises(ValueError, match="max_messages must be a positive int"):
        SummarizationMiddleware(ScriptedChatModel([]), max_messages=0)
    with pytest.raises(TypeError, match="retry must be a ModelRetryConfig"):
        SummarizationMiddleware(ScriptedChatModel([]), max_tokens=9, retry=3)  # type: ignore[arg-type]


# --- reduction: a rule per tool ----------------------------------------------------------------


@tool
def search(query: str) -> str:
    """Search."""
    return "s" * 500


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return "r" * 500


@tool
def get_plan() -> str:
    """The plan."""
    return "p" * 500


def test_reduction_rules_per_tool() -> None:
    model = ScriptedChatModel(
        [
            calls_message(
                call("search", {"query": "q"}, id="c1"),
                call("read_file", {"path": "a"}, id="c2"),
                call("get_plan", {}, id="c3"),
            ),
            calls_message(call("search", {"query": "z"}, id="c4")),
            "done",
        ]
    )
    reduction = ToolResultReductionMiddleware(
        max_chars=50, keep_last=1, rules={"read_file": "clear", "get_plan": "keep"}
    )
    agent = ChatModelAgent(
        "A", "d", model, tools=[search, read_file, get_plan], middlewares=[reduction]
    )
    Runner(agent).invoke("go")
    results = {m.tool_call_id: m.content for m in model.calls[-1].messages if m.role is Role.TOOL}
    assert results["c1"].startswith("s" * 50 + "\n[tool result of 500")   # truncated (default)
    assert results["c2"] == "[tool result of 500 characters, cut to save context]"   # cleared
    assert results["c3"] == "p" * 500                                     # kept
    assert results["c4"] == "s" * 500                                     # the latest


def test_a_reduction_rule_must_be_known() -> None:
    with pytest.raises(ValueError, match="the rule for tool 'x' is 'shrink'"):
        ToolResultReductionMiddleware(rules={"x": "shrink"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="'offload', which needs a backend"):
        ToolResultReductionMiddleware(rules={"x": "offload"})


def _search_twice_then(*replies: str | Message) -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            calls_message(call("search", {"query": "q"}, id="c1")),
            calls_message(call("search", {"query": "z"}, id="c2")),
            *replies,
        ]
    )


def _tool_results(model: ScriptedChatModel, turn: int = -1) -> dict[str, str]:
    messages = model.calls[turn].messages
    return {m.tool_call_id: m.content for m in messages if m.role is Role.TOOL}


def test_reduction_rule_offload_writes_the_result_and_points_to_it() -> None:
    # Eino's reduction offloads a cleared tool result to its Backend and leaves a pointer.
    backend = InMemoryBackend()
    paths: list[tuple[str, object]] = []

    def where(call_info: ToolCallInfo) -> str:
        paths.append((call_info.name, call_info.arguments))
        return f"offloaded/{call_info.call_id}.txt"

    model = _search_twice_then(calls_message(call("search", {"query": "y"}, id="c3")), "done")
    reduction = ToolResultReductionMiddleware(
        max_chars=50, keep_last=1, rules={"search": "offload"}, backend=backend,
        offload_path=where,
    )
    agent = ChatModelAgent("A", "d", model, tools=[search], middlewares=[reduction])
    Runner(agent).invoke("go")
    first = _tool_results(model, 2)["c1"]
    assert first.startswith(
        "Tool result too large: the result of tool call c1 was saved in the filesystem at "
        "offloaded/c1.txt.\n"
    )
    assert backend.read("offloaded/c1.txt") == "s" * 500
    # The pointer is not offloaded again at the next call; the next older result is.
    last = _tool_results(model)
    assert last["c1"] == first and last["c2"].startswith("Tool result too large")
    assert last["c3"] == "s" * 500
    assert paths == [("search", {"query": "q"}), ("search", {"query": "z"})]


def test_reduction_offload_the_backend_refuses_truncates() -> None:
    backend = InMemoryBackend(max_file_bytes=100)
    model = _search_twice_then("done")
    reduction = ToolResultReductionMiddleware(
        max_chars=50, keep_last=1, rules={"search": "offload"}, backend=backend
    )
    Runner(ChatModelAgent("A", "d", model, tools=[search], middlewares=[reduction])).invoke("go")
    assert _tool_results(model)["c1"].startswith("s" * 50 + "\n[tool result of 500")
    assert backend.glob("**/*") == []


def test_clear_pre_commit_vetoes_or_changes_the_reduction() -> None:
    # Eino PR #1166: ClearPreCommit sees the cleared messages before they are committed.
    seen: list[tuple[str, str]] = []

    def veto(before: Sequence[Message], after: Sequence[Message]) -> Sequence[Message]:
        seen.append((_by_id(before)["c1"][:3], _by_id(after)["c1"][:3]))
        return before

    backend = InMemoryBackend()
    model = _search_twice_then("done")
    reduction = ToolResultReductionMiddleware(
        max_chars=50, keep_last=1, rules={"search": "offload"}, backend=backend,
        before_commit=veto,
    )
    Runner(ChatModelAgent("A", "d", model, tools=[search], middlewares=[reduction])).invoke("go")
    assert seen == [("sss", "Too")]
    assert _tool_results(model)["c1"] == "s" * 500
    assert backend.glob("**/*") == []   # nothing is written for a vetoed offload

    def tag(before: Sequence[Message], after: Sequence[Message]) -> list[Message]:
        return [*after[:-1], user_message("[some results were cut]"), after[-1]]

    model = _search_twice_then("done")
    reduction = ToolResultReductionMiddleware(max_chars=50, keep_last=1, before_commit=tag)
    Runner(ChatModelAgent("A", "d", model, tools=[search], middlewares=[reduction])).invoke("go")
    assert [m.content for m in model.calls[-1].messages][-2] == "[some results were cut]"
    assert _tool_results(model)["c1"].startswith("s" * 50 + "\n[tool result")

    def nothing(before: Sequence[Message], after: Sequence[Message]) -> None:
        seen.append(("called", ""))

    seen.clear()
    model = _search_twice_then("done")
    reduction = ToolResultReductionMiddleware(max_chars=5_000, before_commit=nothing)
    Runner(ChatModelAgent("A", "d", model, tools=[search], middlewares=[reduction])).invoke("go")
    assert seen == []   # called only when something is reduced


def _by_id(messages: Sequence[Message]) -> dict[str, str]:
    return {m.tool_call_id: m.content for m in messages if m.role is Role.TOOL}


# --- summarization: skills kept, the transcript file -------------------------------------------

PDF_SKILL = "---\nname: pdf\ndescription: PDF processing\n---\nAlways check page counts.\n"
WEB_SKILL = "---\nname: web\ndescription: Web research\n---\nCite every source.\n"


def _summaries() -> ScriptedChatModel:
    made: list[int] = []

    def summarize(messages: list[Message]) -> str:
        made.append(1)
        return f"summary {len(made)}"

    return ScriptedChatModel(summarize)


def _skill_run(middleware: SummarizationMiddleware, *replies: str | Message) -> ScriptedChatModel:
    backend = InMemoryBackend({"skills/pdf/SKILL.md": PDF_SKILL, "skills/web/SKILL.md": WEB_SKILL})
    model = ScriptedChatModel(
        [
            calls_message(call("skill", {"skill": "pdf"}, id="s1")),
            calls_message(call("skill", {"skill": "web"}, id="s2")),
            *replies,
        ]
    )
    agent = ChatModelAgent(
        "A", "d", model, middlewares=[SkillMiddleware(backend), middleware]
    )
    Runner(agent).invoke([user_message("question 0"), assistant_message("answer 0"),
                          user_message("read the pdf")])
    return model


def test_summarization_preserve_skills() -> None:
    # Eino's FinalizerBuilder.PreserveSkills: the skills loaded in the summarized messages come
    # back as one user message before the summary, and survive a second summary.
    middleware = SummarizationMiddleware(
        _summaries(), max_messages=5, keep_last=1, keep_skills=5
    )
    model = _skill_run(middleware, calls_message(call("skill", {"skill": "nope"}, id="s3")), "done")
    # The first summary (of the first three messages) loaded no skill; the second summarized
    # the pdf skill's load, and the third the web skill's, with the pdf kept from before.
    assert "<system-reminder>" not in model.calls[1].messages[1].content
    second = [m.content for m in model.calls[2].messages if m.role is Role.USER]
    assert second[0].startswith("<system-reminder>\nSkills loaded earlier in the conversation")
    assert "Always check page counts." in second[0] and "Cite every source." not in second[0]
    assert second[1] == "Summary of the earlier conversation:\nsummary 2"
    third = [m.content for m in model.calls[3].messages if m.role is Role.USER]
    assert third[0].index('<skill name="pdf">') < third[0].index('<skill name="web">')
    assert "Always check page counts." in third[0] and "Cite every source." in third[0]
    assert third[1] == "Summary of the earlier conversation:\nsummary 3"
    assert len(third) == 2   # one skills message, not one per summary

    only_one = SummarizationMiddleware(
        _summaries(), max_messages=5, keep_last=1, keep_skills=1
    )
    model = _skill_run(only_one, calls_message(call("skill", {"skill": "nope"}, id="s3")), "done")
    first = model.calls[3].messages[1].content
    assert "Cite every source." in first and "page counts" not in first   # the most recent

    none = SummarizationMiddleware(_summaries(), max_messages=5, keep_last=1)
    model = _skill_run(none, "done")
    assert not any("<system-reminder>" in m.content for m in model.calls[-1].messages)


def test_summarization_transcript_file_path() -> None:
    # Eino's TranscriptFilePath: the summary says where the whole conversation is; here the
    # middleware also writes the summarized messages there (appended, summary after summary).
    backend = InMemoryBackend()
    middleware = SummarizationMiddleware(
        _summaries(), max_messages=5, keep_last=1,
        transcript_path="history/transcript.md", backend=backend,
    )
    model = _skill_run(middleware, calls_message(call("skill", {"skill": "pdf"}, id="s3")), "done")
    summary = next(m.content for m in model.calls[1].messages if m.role is Role.USER)
    assert summary == (
        "Summary of the earlier conversation:\nsummary 1\n\nThe whole conversation this summarizes "
        "is in the file history/transcript.md; read it with the read_file tool when a detail "
        "is missing."
    )
    written = backend.read("history/transcript.md")
    assert written.startswith("[user] question 0\n[assistant] answer 0\n[user] read the pdf\n")
    assert written.count("[tool skill returned]") == 2
    assert "Summary of the earlier" not in written   # summaries are not written back
    assert written.count("[user] question 0") == 1   # the later summaries appended

    only_named = SummarizationMiddleware(
        _summaries(), max_messages=5, keep_last=1, transcript_path="/logs/run.md"
    )
    model = _skill_run(only_named, "done")
    assert "in the file /logs/run.md" in model.calls[-1].messages[1].content

    full = InMemoryBackend(max_file_bytes=10)
    refused = SummarizationMiddleware(
        _summaries(), max_messages=5, keep_last=1, transcript_path="t.md",
        backend=full,
    )
    model = _skill_run(refused, "done")
    assert model.calls[1].messages[1].content == "Summary of the earlier conversation:\nsummary 1"

    with pytest.raises(ValueError, match="no transcript_path"):
        SummarizationMiddleware(ScriptedChatModel([]), max_messages=5, backend=backend)


def test_summarization_kept_skills_and_transcript_in_chinese() -> None:
    middleware = SummarizationMiddleware(
        _summaries(), max_messages=5, keep_last=1, keep_skills=5, language="zh",
        transcript_path="t.md",
    )
    model = _skill_run(middleware, calls_message(call("skill", {"skill": "nope"}, id="s3")), "done")
    kept, summary = (m.content for m in model.calls[3].messages if m.role is Role.USER)
    assert kept.startswith("<system-reminder>\n较早对话中加载过的技能")
    assert summary.startswith("较早对话的总结") and summary.endswith("可用 read_file 工具读取。")
    assert "summary 3" in summary and "文件 t.md" in summary


# --- EmitInternalEvents and GenModelInput ---


def summary_actions(events: Sequence[object]) -> list[SummarizationAction]:
    actions = []
    for event in events:
        action = getattr(event, "action", None)
        if action is not None and isinstance(action.customized_action, SummarizationAction):
            actions.append(action.customized_action)
    return actions


def test_emit_internal_events() -> None:
    # Eino's EmitInternalEvents: before the summary, each summarizer attempt (error or reply),
    # after it; as actions of the summarizing agent's events, with no message.
    summarizer = ScriptedChatModel([ModelError("overloaded"), "they talked"])
    model = ScriptedChatModel(["final"])
    middleware = SummarizationMiddleware(
        summarizer, max_messages=5, keep_last=1, emit_internal_events=True,
        retry=ModelRetryConfig(max_retries=1, backoff=lambda attempt: 0.0),
    )
    agent = ChatModelAgent("A", "d", model, middlewares=[middleware])
    events = list(Runner(agent).run(history(4)))
    actions = summary_actions(events)
    assert [(a.kind, a.attempt) for a in actions] == [
        ("before_summarize", 0),
        ("generate_summary", 1),
        ("generate_summary", 2),
        ("after_summarize", 0),
    ]
    before, failed, answered, after = actions
    assert len(before.messages) == 9 and before.messages[-1].content == "last question"
    assert str(failed.error) == "overloaded" and failed.reply is None
    assert answered.reply is not None and answered.reply.content == "they talked"
    assert [m.content for m in after.messages] == [
        "Summary of the earlier conversation:\nthey talked", "last question",
    ]
    internal = [e for e in events if e.action is not None and e.action.customized_action]
    assert all(e.agent_name == "A" and e.output is None for e in internal)
    assert events[-1].get_message().content == "final"  # type: ignore[union-attr]


def test_internal_events_stay_out_of_the_next_agents_history_and_the_result() -> None:
    from agentkit.agents._workflow import SequentialAgent

    summarizer = ScriptedChatModel(["SUMMARIZER REPLY"])
    first = ChatModelAgent(
        "A", "d", ScriptedChatModel(["first answer"]),
        middlewares=[SummarizationMiddleware(
            summarizer, max_messages=5, keep_last=1, emit_internal_events=True,
        )],
    )
    second_model = ScriptedChatModel(["second answer"])
    second = ChatModelAgent("B", "d", second_model)
    result = Runner(SequentialAgent("S", "d", [first, second])).invoke(history(4))
    assert result.text == "second answer"
    assert len(summary_actions(result.events)) == 3
    seen = [m.content for m in second_model.calls[0].messages]
    assert not any("SUMMARIZER REPLY" in text for text in seen)
    assert any("first answer" in text for text in seen)


def test_no_internal_events_by_default() -> None:
    model = ScriptedChatModel(["final"])
    middleware = SummarizationMiddleware(ScriptedChatModel(["s"]), max_messages=5, keep_last=1)
    agent = ChatModelAgent("A", "d", model, middlewares=[middleware])
    events = list(Runner(agent).run(history(4)))
    assert summary_actions(events) == []
    assert [e.get_message().content for e in events] == ["final"]  # type: ignore[union-attr]


def test_gen_model_input_builds_the_summarizer_input() -> None:
    # Eino's GenModelInput: the system instruction and the messages to summarize in, the
    # summarizer's whole input out.
    received: list[tuple[Message, tuple[Message, ...]]] = []

    def gen(instruction: Message, messages: Sequence[Message]) -> list[Message]:
        received.append((instruction, tuple(messages)))
        return [instruction, *messages, user_message("Summarize the conversation above.")]

    summarizer = ScriptedChatModel(["they talked"])
    model = run_with(SummarizationMiddleware(
        summarizer, max_messages=5, keep_last=1, instruction="Summarize well.",
        gen_model_input=gen,
    ))
    ((instruction, older),) = received
    assert (instruction.role, instruction.content) == (Role.SYSTEM, "Summarize well.")
    assert [m.content for m in older] == [m.content for m in history(4)[:-1]]
    sent = summarizer.calls[0].messages
    assert [m.role for m in sent] == [Role.SYSTEM, *[m.role for m in older], Role.USER]
    assert sent[-1].content == "Summarize the conversation above."
    assert model.calls[0].messages[0].content.endswith("they talked")


@pytest.mark.parametrize("returned", ["summarize this", [], [user_message("a"), "b"], None])
def test_gen_model_input_that_returns_no_messages_is_a_clear_error(returned: object) -> None:
    summarizer = ScriptedChatModel(["never asked"])
    middleware = SummarizationMiddleware(
        summarizer, max_messages=5, keep_last=1,
        gen_model_input=lambda instruction, messages: returned,  # type: ignore[arg-type,return-value]
    )
    agent = ChatModelAgent("A", "d", ScriptedChatModel(["final"]), middlewares=[middleware])
    events = list(Runner(agent).run(history(4)))
    error = events[-1].err
    assert isinstance(error, AgentKitTypeError)
    assert "gen_model_input must return a non-empty list of Message" in str(error)
    assert summarizer.calls == []


def test_internal_events_and_a_checkpoint_taken_after_them() -> None:
    # The events carry no message: the checkpoint of a run that summarized and then paused
    # holds the summarized conversation, and the resumed run goes on with it.
    from agentkit import interrupt, with_checkpoint_id
    from agentkit.checkpoint import InMemoryCheckPointStore

    @tool
    def approve() -> str:
        """Ask for approval."""
        return f"approved: {interrupt('ok?')}"

    def agent(model: ScriptedChatModel) -> ChatModelAgent:
        summarizer = ScriptedChatModel(["SUMMARY"])
        middleware = SummarizationMiddleware(
            summarizer, max_messages=5, keep_last=1, emit_internal_events=True
        )
        return ChatModelAgent("A", "d", model, tools=[approve], middlewares=[middleware])

    store = InMemoryCheckPointStore()
    first = agent(ScriptedChatModel([calls_message(call("approve", {}))]))
    stopped = list(
        Runner(first, checkpoint_store=store).run(history(4), with_checkpoint_id("cp"))
    )
    assert len(summary_actions(stopped)) == 3
    interrupted = stopped[-1].action.interrupted  # type: ignore[union-attr]
    assert interrupted is not None
    resumed_model = ScriptedChatModel(["done"])
    events = list(
        Runner(agent(resumed_model), checkpoint_store=store).resume(
            "cp", targets={interrupted.contexts[0].id: "yes"}
        )
    )
    assert events[-1].get_message().content == "done"  # type: ignore[union-attr]
    assert [m.content for m in resumed_model.calls[0].messages] == [
        "Summary of the earlier conversation:\nSUMMARY", "last question", "", "approved: yes",
    ]
