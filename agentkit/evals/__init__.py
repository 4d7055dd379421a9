"""Evaluate agents: cases, checks, an LLM judge, and reports that compare runs.

Score an agent over a set of cases, in a script, a notebook or CI::

    from agentkit.evals import Case, Contains, Dataset, Judge, ToolCalled, evaluate

    dataset = Dataset(
        [
            Case("What is 2 + 2?", expected="4"),
            Case("Weather in Paris?", checks=[ToolCalled("get_weather", {"city": "Paris"}),
                                              Contains("Paris")]),
            Case("Say hello in French", checks=[Judge(judge_model, "A French greeting")]),
        ],
        name="basics",
    )
    report = evaluate(agent, dataset, concurrency=4, retries=1)
    print(report)                       # a table: one line per case, what failed and why
    report.assert_passed(min_rate=0.9)  # fails a pytest test below 90 %
    json.dump(report.to_dict(), open("eval.json", "w"))   # for CI
    print(report.compare(last_report))  # what got better or worse

* :class:`Case` and :class:`Dataset` (also :meth:`Dataset.from_file`, YAML or JSON);
* checks: :class:`Equals`, :class:`Contains`, :class:`Matches`, :class:`ToolCalled`,
  :class:`OutputType`, :class:`MatchesSchema`, :class:`MaxSteps`, :class:`MaxTokens`,
  :class:`MaxLatency`, :class:`MaxCost`, the LLM judge :class:`Judge`, or any function of a
  :class:`CaseRun` returning ``None`` (passed) or a reason;
* :func:`evaluate` runs the cases on threads, with a progress bar, retries, a per-case
  timeout, and a cancel;
* :class:`EvalReport` (per case :class:`CaseReport`), compared with
  :meth:`EvalReport.compare` into an :class:`EvalComparison`.

Record the model once and evaluate offline: see :func:`agentkit.testing.cassette`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach, present
from agentkit.evals._case import Case, CaseRun, Check, CheckOutcome
from agentkit.evals._checks import (
    Contains,
    Equals,
    Matches,
    MatchesSchema,
    MaxCost,
    MaxLatency,
    MaxSteps,
    MaxTokens,
    OutputType,
    ToolCalled,
)
from agentkit.evals._dataset import Dataset
from agentkit.evals._errors import DatasetError, EvalCancelledError
from agentkit.evals._evaluate import evaluate
from agentkit.evals._judge import Judge
from agentkit.evals._report import CaseChange, CaseReport, EvalComparison, EvalReport

__all__ = [
    "Case",
    "CaseChange",
    "CaseReport",
    "CaseRun",
    "Check",
    "CheckOutcome",
    "Contains",
    "Dataset",
    "DatasetError",
    "Equals",
    "EvalCancelledError",
    "EvalComparison",
    "EvalReport",
    "Judge",
    "Matches",
    "MatchesSchema",
    "MaxCost",
    "MaxLatency",
    "MaxSteps",
    "MaxTokens",
    "OutputType",
    "ToolCalled",
    "evaluate",
]

# Defined in private modules, documented here: reprs and tracebacks show agentkit.evals.X.
present(
    (
        Case,
        CaseChange,
        CaseReport,
        CaseRun,
        Contains,
        Dataset,
        DatasetError,
        Equals,
        EvalCancelledError,
        EvalComparison,
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
    ),
    __name__,
)

if not TYPE_CHECKING:  # dir() lists the API only (never the private modules)
    __getattr__, __dir__ = attach(__name__)
