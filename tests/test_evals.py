"""Evals: datasets of cases, checks, the LLM judge, evaluate() on threads, reports.

Agents run for real on real threads with the scripted model; the judge is a scripted model
too. No test depends on timing: concurrency is shown at a barrier, cancels come from tools.
"""

from __future__ import annotations

import io
import json
import re
import threading
from pathlib import Path
from typing import Any

import attrs
import pytest

from agentkit import (
    ChatModelAgent,
    Message,
    ModelPricing,
    ResponseMeta,
    Role,
    Runner,
    TokenUsage,
    assistant_message,
    cancellable_sleep,
    get_session_value,
    interrupt,
    tool,
    with_conversation_id,
    with_session_values,
)
from agentkit.errors import ModelError
from agentkit.evals import (
    Case,
    CaseRun,
    Contains,
    Dataset,
    DatasetError,
    Equals,
    EvalCancelledError,
    EvalReport,
    Judge,
    Matches,
    MatchesSchema,
    MaxCost,
    MaxLatency,
    MaxSteps,
    MaxTokens,
    OutputType,
    ToolCalled,
    evaluate,
)
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak

GUARD = 30.0  # a failure guard for waits, never a pace


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def calculator(
    *,
    wrong_on: frozenset[int] = frozenset(),
    usage: TokenUsage | None = None,
    pricing: ModelPricing | None = None,
) -> ChatModelAgent:
    """An agent that asks the add tool, then answers ``The sum is <n>.``.

    For the first numbers in ``wrong_on`` it answers one too many (a regressed agent).
    """

    def reply(messages: list[Message]) -> Message:
        last = messages[-1]
        if last.role is Role.TOOL:
            first = int(re.findall(r"\d+", messages[-3].content)[0]) if len(messages) >= 3 else 0
            total = int(last.content) + (1 if first in wrong_on else 0)
            message = assistant_message(f"The sum is {total}.")
        else:
            a, b = map(int, re.findall(r"\d+", last.content)[:2])
            message = calls_message(call("add", {"a": a, "b": b}))
        return attrs.evolve(message, response_meta=ResponseMeta("stop", usage)) if usage else message

    return ChatModelAgent("calc", "adds numbers", ScriptedChatModel(reply, pricing=pricing), tools=[add])


def twenty_cases() -> Dataset:
    """20 cases: 16 that a correct calculator passes, 4 with a wrong expectation."""
    cases = []
    for i in range(1, 21):
        wanted = 2 * i if i % 5 else 2 * i + 100
        cases.append(
            Case(
                f"What is {i} + {i}?",
                checks=[Contains(f"The sum is {wanted}."), ToolCalled("add", {"a": i, "b": i})],
                name=f"sum-{i:02d}",
                metadata={"i": i},
            )
        )
    return Dataset(cases, name="sums", checks=[MaxSteps(2)])


def shape(report: EvalReport) -> list[tuple[Any, ...]]:
    """A report without timings."""
    return [
        (case.name, case.passed, case.failures, case.attempts, case.model_calls, case.result.text)
        for case in report.cases
    ]


# --- a 20-case dataset ------------------------------------------------------------------------


def test_a_twenty_case_report_counts_and_explains_every_case() -> None:
    with no_thread_leak():
        report = evaluate(calculator(), twenty_cases(), progress=False)
    assert (report.total, report.passed, report.failed) == (20, 16, 4)
    assert report.pass_rate == 0.8 and report.name == "sums"
    failed = [case.name for case in report.cases if not case.passed]
    assert failed == ["sum-05", "sum-10", "sum-15", "sum-20"]
    five = report.case("sum-05")
    assert five.failures == [
        "Contains('The sum is 110.'): the answer does not contain it: 'The sum is 10.'"
    ]
    assert five.model_calls == 2 and five.attempts == 1 and five.result.text == "The sum is 10."
    assert report.case("sum-01").failures == []

    data = json.loads(json.dumps(report.to_dict()))
    assert (data["total"], data["passed"], data["failed"], data["pass_rate"]) == (20, 16, 4, 0.8)
    assert data["cases"][4]["failures"] == five.failures
    assert data["cases"][4]["input"] == "What is 5 + 5?"
    assert data["cases"][4]["output"] == "The sum is 10."
    assert data["cases"][4]["metadata"] == {"i": 5}
    assert data["cases"][4]["cost"] is None  # the scripted model has no pricing

    table = str(report)
    lines = table.splitlines()
    assert lines[0].startswith("Eval 'sums': 16 of 20 passed (80.0%), 4 failed,")
    assert lines[1].split() == ["#", "case", "result", "time", "tokens", "steps", "failures"]
    assert len(lines) == 22
    assert re.match(r"5\s+sum-05\s+FAIL\s+\d+\.\d\d s\s+0\s+2\s+Contains\('The sum is 110.'\)", lines[6])
    assert re.match(r"1\s+sum-01\s+pass\s", lines[2])


def test_concurrency_8_gives_the_same_report_as_1() -> None:
    agent = calculator(wrong_on=frozenset({3, 7}))
    with no_thread_leak():
        one = evaluate(agent, twenty_cases(), concurrency=1, progress=False)
        eight = evaluate(agent, twenty_cases(), concurrency=8, progress=False)
    assert shape(eight) == shape(one)
    assert one.failed == 6
    without_time = [
        {k: v for k, v in case.items() if k != "duration"} for case in eight.to_dict()["cases"]
    ]
    assert without_time == [
        {k: v for k, v in case.items() if k != "duration"} for case in one.to_dict()["cases"]
    ]


def test_cases_really_run_at_once() -> None:
    meet = threading.Barrier(8, timeout=GUARD)
    threads: set[int] = set()

    @tool
    def add(a: int, b: int) -> int:
        """Add, once all 8 cases are here."""
        threads.add(threading.get_ident())
        meet.wait()
        return a + b

    agent = ChatModelAgent("calc", "d", calculator().model, tools=[add])
    cases = [Case(f"What is {i} + 1?", checks=[Contains(f"{i + 1}")]) for i in range(8)]
    with no_thread_leak():
        report = evaluate(agent, cases, concurrency=8, progress=False)
    assert report.passed == 8 and len(threads) == 8


# --- the judge --------------------------------------------------------------------------------


def scripted_judge(verdicts: dict[str, str]) -> ScriptedChatModel:
    """A judge that finds the answer in the prompt and looks its verdict up."""

    def judge(messages: list[Message]) -> str:
        answer = re.search(r"<answer>\n(.*)\n</answer>", messages[-1].content, re.DOTALL)
        assert answer is not None
        return verdicts[answer.group(1)]

    return ScriptedChatModel(judge)


def test_the_judge_grades_with_a_rubric_over_any_model() -> None:
    judge_model = scripted_judge(
        {
            "The sum is 4.": '{"pass": true, "reason": "correct"}',
            "The sum is 6.": '```json\n{"pass": false, "reason": "the user wanted words, not digits"}\n```',
            "The sum is 8.": "I think it is fine.",
        }
    )
    judge = Judge(judge_model, "The answer gives the right sum.")
    cases = [Case(f"What is {i} + {i}?", expected=f"{2 * i}", name=f"c{i}") for i in (2, 3, 4)]
    report = evaluate(calculator(), Dataset(cases, checks=[judge]), progress=False)
    assert [case.passed for case in report.cases] == [True, False, False]
    assert report.case("c3").failures == [
        "Judge('The answer gives the right sum.'): the user wanted words, not digits"
    ]
    assert report.case("c4").failures[0].startswith(
        "Judge('The answer gives the right sum.'): the judge's reply is not a verdict"
    )
    # What the judge was shown, and how it was asked.
    first = judge_model.calls[0]
    assert "The answer gives the right sum." in first.messages[0].content
    prompt = first.messages[1].content
    assert "<input>\nWhat is 2 + 2?\n</input>" in prompt
    assert "<expected>\n4\n</expected>" in prompt
    assert "<answer>\nThe sum is 4.\n</answer>" in prompt
    assert first.options is not None and first.options.extra is not None
    assert first.options.extra["response_format"]["type"] == "json_schema"


def test_a_judge_that_fails_fails_the_case_with_its_error() -> None:
    judge = Judge(ScriptedChatModel([ModelError("judge down", status_code=503)]), "Anything.")
    report = evaluate(calculator(), [Case("What is 1 + 1?", checks=[judge])], progress=False)
    (case,) = report.cases
    assert case.failures == ["Judge('Anything.') raised ModelError: judge down"]
    assert isinstance(case.errors[0], ModelError)


def test_a_judge_needs_a_model_and_a_rubric() -> None:
    with pytest.raises(ValueError, match="Judge needs a rubric"):
        Judge(ScriptedChatModel([]), " ")
    with pytest.raises(TypeError, match="takes a ChatModel"):
        Judge("gpt-4o", "ok")  # type: ignore[arg-type]


# --- comparing reports ------------------------------------------------------------------------


def test_a_comparison_marks_a_regression() -> None:
    before = evaluate(calculator(), twenty_cases(), progress=False)
    after = evaluate(calculator(wrong_on=frozenset({3})), twenty_cases(), progress=False)
    comparison = after.compare(before)
    assert [change.name for change in comparison.regressed] == ["sum-03"]
    assert comparison.regressed[0].failures == [
        "Contains('The sum is 6.'): the answer does not contain it: 'The sum is 7.'"
    ]
    assert comparison.improved == [] and comparison.unchanged == 19
    assert comparison.has_regressions
    text = str(comparison)
    assert text.splitlines()[0] == (
        "Comparison: pass rate 80.0% -> 75.0%; 1 regressed, 0 improved, 0 added, 0 removed, "
        "19 unchanged"
    )
    assert re.search(r"regressed\s+sum-03\s+pass\s+FAIL\s+Contains", text)
    with pytest.raises(AssertionError, match="1 case.s. regressed"):
        comparison.assert_no_regressions()
    # The other way round, from the JSON a CI job kept: an improvement.
    back = before.compare(json.loads(json.dumps(after.to_dict())))
    assert [change.name for change in back.improved] == ["sum-03"] and not back.has_regressions
    assert back.to_dict()["changes"] == [
        {"name": "sum-03", "change": "improved", "before": False, "after": True, "failures": []}
    ]


def test_a_comparison_lists_added_and_removed_cases() -> None:
    before = evaluate(calculator(), [Case("What is 1 + 1?", name="a"), Case("What is 2 + 2?", name="b")], progress=False)
    after = evaluate(calculator(), [Case("What is 1 + 1?", name="a"), Case("What is 3 + 3?", name="c")], progress=False)
    comparison = after.compare(before)
    assert [(c.name, c.change) for c in comparison.changes] == [("c", "added"), ("b", "removed")]
    assert "agentkit-eval-comparison" in comparison._repr_html_()
    with pytest.raises(ValueError, match="compare.. takes an EvalReport or its to_dict"):
        after.compare({"cases": [{"name": 1}]})


def test_a_comparison_takes_the_path_of_a_kept_json_report(tmp_path: Path) -> None:
    before = evaluate(calculator(), twenty_cases(), progress=False)
    after = evaluate(calculator(wrong_on=frozenset({3})), twenty_cases(), progress=False)
    kept = tmp_path / "baseline.json"
    kept.write_text(json.dumps(before.to_dict()), encoding="utf-8")
    for baseline in (kept, str(kept)):  # an os.PathLike or a str
        comparison = after.compare(baseline)
        assert [change.name for change in comparison.regressed] == ["sum-03"]
        assert comparison.unchanged == 19
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.json is not JSON"):
        after.compare(tmp_path / "broken.json")
    (tmp_path / "list.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ValueError, match="compare.. takes an EvalReport or its to_dict"):
        after.compare(tmp_path / "list.json")
    with pytest.raises(FileNotFoundError):
        after.compare(tmp_path / "missing.json")


# --- thresholds -------------------------------------------------------------------------------


def test_a_pass_rate_below_the_threshold_fails_with_the_table() -> None:
    report = evaluate(calculator(), twenty_cases(), progress=False)
    report.assert_passed(min_rate=0.8)
    with pytest.raises(AssertionError) as caught:
        report.assert_passed(min_rate=0.9)
    message = str(caught.value)
    assert message.startswith("pass rate 80.0% is below the required 90.0%")
    assert "sum-05" in message and "Contains('The sum is 110.')" in message
    with pytest.raises(AssertionError):
        report.assert_passed()
    with pytest.raises(ValueError, match="min_rate must be a number from 0 to 1"):
        report.assert_passed(min_rate=90)


# --- retries, timeouts, cancels ---------------------------------------------------------------


def test_flaky_cases_pass_on_a_retry_and_are_marked() -> None:
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def flaky(messages: list[Message]) -> str:
        with lock:
            seen[messages[-1].content] = seen.get(messages[-1].content, 0) + 1
            first = seen[messages[-1].content] == 1
        return "wrong" if first and "odd" in messages[-1].content else "right"

    agent = ChatModelAgent("a", "d", ScriptedChatModel(flaky))
    cases = [Case(f"{kind} {i}", expected="right") for i in range(3) for kind in ("odd", "even")]
    strict = evaluate(agent, cases, progress=False)
    assert strict.failed == 3
    seen.clear()
    report = evaluate(agent, cases, retries=2, concurrency=3, progress=False)
    assert report.passed == 6 and report.flaky == 3
    assert [case.attempts for case in report.cases] == [2, 1, 2, 1, 2, 1]
    assert "(2 tries)" in str(report) and ", 3 flaky," in str(report)


def test_a_case_past_its_timeout_is_cancelled_and_fails() -> None:
    @tool
    def slow(a: int, b: int) -> int:
        """Add slowly: never in time (the sleep ends at the cancel)."""
        if a == 2:
            cancellable_sleep(GUARD)
        return a + b

    agent = ChatModelAgent("calc", "d", calculator().model, tools=[tool(slow, name="add")])
    cases = [Case(f"What is {i} + 1?", checks=[Contains(f"{i + 1}")]) for i in (1, 2, 3)]
    with no_thread_leak():
        report = evaluate(agent, cases, concurrency=3, timeout=0.5, progress=False)
    assert [case.passed for case in report.cases] == [True, False, True]
    assert report.cases[1].failures == ["the run took longer than timeout=0.5 s and was cancelled"]


def test_a_cancel_stops_the_evaluation_and_keeps_the_finished_cases() -> None:
    stop = threading.Event()
    started: list[str] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add; the second case cancels the evaluation and waits for its own cancel."""
        started.append(f"{a}")
        if a == 2:
            stop.set()
            cancellable_sleep(GUARD)
        return a + b

    agent = ChatModelAgent("calc", "d", calculator().model, tools=[add])
    cases = [Case(f"What is {i} + 1?", checks=[Contains(f"{i + 1}")]) for i in range(1, 6)]
    with no_thread_leak(), pytest.raises(EvalCancelledError) as caught:
        evaluate(agent, cases, cancel=stop, progress=False)
    assert [case.name for case in caught.value.report.cases] == ["What is 1 + 1?"]
    assert started == ["1", "2"]  # the cases after the cancel never started
    assert "cancelled after 1 of 5 cases" in str(caught.value)


def test_ctrl_c_while_waiting_cancels_every_case_and_joins_every_thread() -> None:
    running = threading.Event()

    @tool
    def add(a: int, b: int) -> int:
        """Add, or wait until cancelled."""
        running.set()
        cancellable_sleep(GUARD)
        return a + b

    class Interrupting(io.StringIO):
        """The progress stream: Ctrl-C arrives once a case is running."""

        def write(self, text: str) -> int:
            if running.is_set():
                raise KeyboardInterrupt
            return super().write(text)

    agent = ChatModelAgent("calc", "d", calculator().model, tools=[add])
    cases = [Case(f"What is {i} + 1?") for i in range(4)]
    with no_thread_leak(), pytest.raises(KeyboardInterrupt):
        evaluate(agent, cases, concurrency=2, progress=Interrupting())


# --- the checks -------------------------------------------------------------------------------


def run_one(check: Any, *, agent: ChatModelAgent | None = None, case: Case | None = None) -> list[str]:
    case = case or Case("What is 2 + 3?", checks=[check])
    report = evaluate(agent or calculator(), [case], progress=False)
    return report.cases[0].failures


@pytest.mark.parametrize(
    ("check", "failures"),
    [
        (Equals("The sum is 5."), []),
        (Equals("5"), ["Equals('5'): the answer is 'The sum is 5.', expected '5'"]),
        (Contains("sum is 5"), []),
        (Contains("SUM IS 5", case_sensitive=False), []),
        (Contains("SUM IS 5"), ["Contains('SUM IS 5'): the answer does not contain it: 'The sum is 5.'"]),
        (Matches(r"^The sum is \d+\.$"), []),
        (Matches(r"^\d+$"), ["Matches('^\\\\d+$'): the answer does not match: 'The sum is 5.'"]),
        (ToolCalled("add"), []),
        (ToolCalled("add", {"a": 2}), []),
        (ToolCalled("add", {"a": re.compile("^[0-9]$")}), []),
        (ToolCalled("add", times=1), []),
        (ToolCalled("add", {"a": 3}), ["ToolCalled('add', {'a': 3}): no matching call; add was called with {'a': 2, 'b': 3}"]),
        (ToolCalled("search"), ["ToolCalled('search'): no matching call; the model called add"]),
        (ToolCalled("add", times=0), ["ToolCalled('add', times=0): 1 matching call(s), expected 0; add was called with {'a': 2, 'b': 3}"]),
        (MaxSteps(2), []),
        (MaxSteps(1), ["MaxSteps(1): the run made 2 model calls"]),
        (MaxLatency(GUARD), []),
        (MaxLatency(0), None),
    ],
    ids=repr,
)
def test_built_in_checks(check: Any, failures: list[str] | None) -> None:
    got = run_one(check)
    if failures is None:
        assert len(got) == 1 and got[0].startswith("MaxLatency(0): the run took ")
    else:
        assert got == failures


def test_max_steps_counts_one_model_call_in_the_singular() -> None:
    result = evaluate(calculator(), [Case("What is 2 + 3?")], progress=False).cases[0].result
    run = CaseRun(Case("hi"), result, 0.0, model_calls=1)
    assert MaxSteps(0)(run) == "MaxSteps(0): the run made 1 model call"
    assert MaxSteps(1)(attrs.evolve(run, model_calls=2)) == "MaxSteps(1): the run made 2 model calls"


def test_token_and_cost_budgets_read_the_runs_usage() -> None:
    agent = calculator(usage=TokenUsage(prompt_tokens=100, completion_tokens=10, total_tokens=110))
    assert run_one(MaxTokens(220), agent=agent) == []
    assert run_one(MaxTokens(219, output=19), agent=agent) == [
        "MaxTokens(219, output=19): total 220 > 219, output 20 > 19 tokens"
    ]
    # 200 input tokens at 1.0/M + 20 output tokens at 10.0/M = 0.0004
    pricing = ModelPricing(1.0, 10.0)
    assert run_one(MaxCost(0.0004, pricing=pricing), agent=agent) == []
    assert run_one(MaxCost(0.0003, pricing=pricing), agent=agent) == [
        "MaxCost(0.0003, pricing=ModelPricing(input_per_million=1.0, output_per_million=10.0, "
        "cached_input_per_million=None, cache_write_per_million=None)): "
        "the run cost 0.0004"
    ]
    # Without prices, the run's own cost: what its priced model reported.
    assert run_one(MaxCost(1.0), agent=agent) == [
        "MaxCost(1.0): the run's cost is unknown (no model had pricing); give the model "
        "pricing=ModelPricing(...), or give MaxCost(pricing=...)"
    ]
    priced = calculator(usage=TokenUsage(100, 10, 110), pricing=pricing)
    assert run_one(MaxCost(0.0004), agent=priced) == []
    assert run_one(MaxCost(0.0003), agent=priced) == ["MaxCost(0.0003): the run cost 0.0004"]
    with pytest.raises(ValueError, match="MaxTokens.. needs a limit"):
        MaxTokens()
    with pytest.raises(ValueError, match="must be a number >= 0"):
        MaxSteps(-1)


@attrs.define
class Sum:
    """A typed answer."""

    a: int
    b: int
    total: int


def typed_agent() -> ChatModelAgent:
    model = ScriptedChatModel(lambda messages: '{"a": 2, "b": 3, "total": 5}')
    return ChatModelAgent("typed", "d", model, output_type=Sum)


def test_output_type_and_schema_checks_on_structured_output() -> None:
    agent = typed_agent()
    assert run_one(OutputType(Sum), agent=agent) == []
    assert run_one(Equals(Sum(2, 3, 5)), agent=agent) == []
    # as written in a dataset file: the typed value compared as JSON data
    assert run_one(Equals({"a": 2, "b": 3, "total": 5}), agent=agent) == []
    schema = {"type": "object", "properties": {"total": {"type": "integer", "maximum": 4}}}
    assert run_one(MatchesSchema(schema), agent=agent) == [
        "MatchesSchema(...): total: 5 is greater than the maximum of 4"
    ]
    assert run_one(MatchesSchema({"type": "object", "required": ["total"]}), agent=agent) == []


def test_output_type_and_schema_checks_on_json_text() -> None:
    def answer(text: str) -> ChatModelAgent:
        return ChatModelAgent("a", "d", ScriptedChatModel(lambda messages: text))

    fenced = answer('```json\n{"a": 2, "b": 3, "total": 5}\n```')
    assert run_one(OutputType(Sum), agent=fenced) == []
    assert run_one(OutputType(list[int]), agent=answer("[1, 2]")) == []
    assert run_one(OutputType(Sum), agent=answer('{"a": 2, "b": "x"}')) == [
        "OutputType(Sum): 'answer.b' must be an integer (got 'x'); 'answer.total' is required "
        "(got {'a': 2, 'b': 'x'})"
    ]
    assert run_one(OutputType(Sum), agent=answer("five"))[0].startswith(
        "OutputType(Sum): the answer is not JSON"
    )
    assert run_one(MatchesSchema({"type": "array"}), agent=answer('{"a": 1}')) == [
        "MatchesSchema(...): (the answer): {'a': 1} is not of type 'array'"
    ]
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        MatchesSchema({"type": "no-such-type"})


def test_custom_checks_are_functions_of_the_run() -> None:
    def uses_few_tools(run: CaseRun) -> str | None:
        return None if len(run.tool_calls) <= 1 else f"{len(run.tool_calls)} tool calls"

    def is_polite(run: CaseRun) -> bool:
        return "please" in run.text

    def broken(run: CaseRun) -> str:
        raise LookupError("no such thing")

    def odd(run: CaseRun) -> int:
        return 3

    checks = [uses_few_tools, is_polite, broken, odd, lambda run: True]
    case = Case("What is 2 + 3?", checks=checks)  # type: ignore[arg-type]
    report = evaluate(calculator(), [case], progress=False)
    (result,) = report.cases
    assert result.failures == [
        "is_polite failed",
        "broken raised LookupError: no such thing",
        "odd returned 3; a check returns None or True (passed), or False or a reason (failed)",
    ]
    assert isinstance(result.errors[0], LookupError)


def test_an_expected_value_is_checked_for_equality_unless_a_check_looks_at_it() -> None:
    cases = [
        Case("What is 2 + 3?", expected="The sum is 5."),
        Case("What is 2 + 2?", expected="4"),
        Case("What is 2 + 1?", expected="3", checks=[Contains("3")]),
        Case("What is 2 + 0?", expected="2", checks=[Equals("The sum is 2.")]),
    ]
    report = evaluate(calculator(), Dataset(cases, checks=[MaxSteps(2)]), progress=False)
    assert [case.failures for case in report.cases] == [
        [],
        ["Equals(): the answer is 'The sum is 4.', expected '4'"],
        ["Equals(): the answer is 'The sum is 3.', expected '3'"],
        [],
    ]
    judged = Dataset(cases[1:2], checks=[Judge(scripted_judge({"The sum is 4.": '{"pass": true}'}), "ok")])
    assert evaluate(calculator(), judged, progress=False).passed == 1


def test_failed_and_interrupted_runs_fail_their_case() -> None:
    @tool
    def approve(a: int, b: int) -> int:
        """Ask first."""
        interrupt("may I add?")
        return a + b

    failing = ChatModelAgent("a", "d", ScriptedChatModel([ValueError("model bug")]))
    pausing = ChatModelAgent("calc", "d", calculator().model, tools=[tool(approve, name="add")])
    assert run_one(Contains("x"), agent=failing) == ["the run failed: ValueError: model bug"]
    (failure,) = run_one(Contains("x"), agent=pausing)
    assert failure.startswith("the run stopped at an interrupt ('may I add?')")


def test_a_run_that_cannot_start_fails_its_case() -> None:
    report = evaluate(calculator(), [Case("What is 1 + 1?")], options=[with_conversation_id("c")], progress=False)
    (failure,) = report.cases[0].failures
    assert failure.startswith("the run failed: AgentKitValueError:") and "conversation" in failure


def test_runner_settings_and_run_options_apply_to_every_case() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add, plus the session's offset."""
        return a + b + int(get_session_value("offset"))

    agent = ChatModelAgent("calc", "d", calculator().model, tools=[add])
    runner = Runner(agent, enable_streaming=True)
    report = evaluate(
        runner, [Case("What is 1 + 1?", expected="The sum is 12.")],
        options=[with_session_values({"offset": 10})], progress=False,
    )
    assert report.passed == 1
    assert report.cases[0].result.events[0].output.message_output.is_streaming  # type: ignore[union-attr]


# --- datasets ---------------------------------------------------------------------------------


def test_case_names_default_to_the_input_and_must_be_unique() -> None:
    dataset = Dataset([Case("What  is\n2 + 2?"), Case([Message("user", "hi")]), Case("x" * 80)])
    assert [case.name for case in dataset] == ["What is 2 + 2?", "case 2", "x" * 59 + "…"]
    with pytest.raises(DatasetError, match="cases 1 and 2 are both named 'same'"):
        Dataset([Case("a", name="same"), Case("b", name="same")])
    with pytest.raises(DatasetError, match="both named 'What is 2 \\+ 2\\?'"):
        Dataset([Case("What is 2 + 2?"), Case("What is 2 + 2?", checks=[Contains("4")])])
    with pytest.raises(TypeError, match="a check is a function"):
        Case("a", checks=["contains 4"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="evaluate"):
        evaluate(calculator(), Dataset([]))


DATASET_YAML = """
name: calculator
checks:
  - max_steps: 2
cases:
  - name: small
    input: What is 2 + 3?
    expected: The sum is 5.
    metadata: {difficulty: easy}
  - input: What is 20 + 30?
    checks:
      - contains: {text: "SUM IS 50", case_sensitive: false}
      - matches: "\\\\d+\\\\.$"
      - tool_called: {name: add, arguments: {a: 20}}
      - max_tokens: {total: 1000}
      - max_latency: 30
      - equals: The sum is 50.
  - input:
      - {role: system, content: Use the add tool.}
      - {role: user, content: "What is 1 + 1?"}
    checks:
      - tool_called: add
      - matches_schema: {type: string}
"""


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_dataset_file_loads_every_declarative_check(tmp_path: Path, suffix: str) -> None:
    import yaml

    path = tmp_path / f"calc{suffix}"
    data = yaml.safe_load(DATASET_YAML)
    path.write_text(DATASET_YAML if suffix == ".yaml" else json.dumps(data))
    dataset = Dataset.from_file(path, checks=[Contains("sum")])
    assert dataset.name == "calculator" and len(dataset) == 3
    assert [case.name for case in dataset] == ["small", "What is 20 + 30?", "case 3"]
    assert dataset.cases[0].metadata == {"difficulty": "easy"}
    assert dataset.cases[2].messages[0] == Message("system", "Use the add tool.")
    assert [repr(check) for check in dataset.cases[1].checks] == [
        "Contains('SUM IS 50', case_sensitive=False)",
        "Matches('\\\\d+\\\\.$')",
        "ToolCalled('add', {'a': 20})",
        "MaxTokens(1000)",
        "MaxLatency(30)",
        "Equals('The sum is 50.')",
    ]
    assert [repr(check) for check in dataset.checks] == ["MaxSteps(2)", "Contains('sum')"]
    report = evaluate(calculator(), dataset, progress=False)
    assert [case.passed for case in report.cases] == [True, True, False], str(report)
    (failure,) = report.case("case 3").failures
    assert failure.startswith("MatchesSchema(...): the answer is not JSON")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("cases: []", "'cases' must be a non-empty list"),
        ("- input: hi\n  chekcs: []", "case 1: unknown key.s. 'chekcs'"),
        ("- name: x\n  expected: 1", "case 1 .'x'.: 'input' is required"),
        ("- input: hi\n  checks: [{containz: a}]", "unknown check 'containz'; known: equals, contains"),
        ("- input: hi\n  checks: [{matches: '('}]", "case 1: checks 1 .matches.: Matches.'.'.: not a valid regex"),
        ("- input: hi\n  checks: [{max_steps: -1}]", "must be a number >= 0"),
        ("- input: hi\n  checks: [contains]", "a check is one key"),
        ("name: x\nwhat: 1\ncases: [a]", "unknown key.s. 'what'"),
        ("[unclosed", "not valid YAML"),
    ],
)
def test_a_bad_dataset_file_names_the_case_and_the_problem(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        Dataset.from_file(path)


def alias_bomb(levels: int) -> str:
    """Anchors that each repeat the one before twice: 2**(levels + 1) strings in a few lines."""
    lines = ["    l0: &l0 [lol, lol]"]
    lines += [f"    l{n}: &l{n} [*l{n - 1}, *l{n - 1}]" for n in range(1, levels)]
    lines.append(f"    x: [*l{levels - 1}, *l{levels - 1}]")
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (alias_bomb(19), "would hold more than 1,000,000 values once its aliases are expanded"),
        ("    x: " + "[" * 30_000 + "]" * 30_000, "nests deeper than 50 levels"),
        ("    a: &a 1\n    x: [" + ", ".join(["*a"] * 1001) + "]", "has more than 1000 aliases"),
    ],
    ids=["alias bomb", "deep nesting", "many aliases"],
)
def test_a_dataset_file_is_parsed_within_bounds(tmp_path: Path, metadata: str, message: str) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(f"cases:\n- input: hi\n  metadata:\n{metadata}\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=message):
        Dataset.from_file(path)
    # a few aliases, as authors use them, are read
    path.write_text("checks: &shared [{max_steps: 2}]\ncases:\n- input: hi\n  checks: *shared\n")
    assert [repr(check) for check in Dataset.from_file(path).cases[0].checks] == ["MaxSteps(2)"]


def test_a_dataset_file_may_be_a_plain_list(tmp_path: Path) -> None:
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(["What is 1 + 1?", {"input": "What is 2 + 2?", "expected": "The sum is 4."}]))
    dataset = Dataset.from_file(path)
    assert dataset.name == "plain" and [case.expected for case in dataset] == [None, "The sum is 4."]
    (tmp_path / "cases.txt").write_text("What is 1 + 1?")
    with pytest.raises(DatasetError, match="ends in .yaml, .yml or .json"):
        Dataset.from_file(tmp_path / "cases.txt")


# --- display ----------------------------------------------------------------------------------


def test_the_progress_bar_counts_cases() -> None:
    stream = io.StringIO()
    evaluate(calculator(), twenty_cases(), concurrency=4, progress=stream)
    frames = stream.getvalue().split("\r")
    assert frames[-1].startswith("eval 'sums' [########################] 20/20  16 passed  4 failed")
    assert frames[-1].endswith(" s\n")


def test_no_progress_bar_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    evaluate(calculator(), [Case("What is 1 + 1?")])
    assert capsys.readouterr().err == ""


def test_the_html_report_escapes_every_value() -> None:
    case = Case("What is 1 + 1?", name="<b>bold</b>", checks=[Contains("<script>")])
    report = evaluate(calculator(), [case], progress=False)
    page = report._repr_html_()
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "<script>" not in page and "Contains(&#x27;&lt;script&gt;&#x27;)" in page
    assert "agentkit-eval-report" in page and "0 of 1 passed" in page


def test_evaluate_refuses_bad_arguments() -> None:
    agent = calculator()
    cases = [Case("What is 1 + 1?")]
    with pytest.raises(TypeError, match="runs a Runner or an agent"):
        evaluate("agent", cases)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="concurrency must be an int >= 1"):
        evaluate(agent, cases, concurrency=0)
    with pytest.raises(ValueError, match="retries must be an int >= 0"):
        evaluate(agent, cases, retries=-1)
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        evaluate(agent, cases, timeout=0)
    with pytest.raises(TypeError, match="cancel must be a threading.Event"):
        evaluate(agent, cases, cancel=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="progress must be"):
        evaluate(agent, cases, progress=3)  # type: ignore[arg-type]
