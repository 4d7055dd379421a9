"""What an evaluation found: :class:`EvalReport`, per case :class:`CaseReport`, and the
comparison of two reports, :class:`EvalComparison`.

A report prints as a table (``print(report)``), shows as an HTML table in notebooks, turns
into JSON for CI (:meth:`EvalReport.to_dict`), fails a pytest test below a pass rate
(:meth:`EvalReport.assert_passed`), and compares with an earlier report, or with its JSON
(:meth:`EvalReport.compare`).
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from agentkit._jsonable import dumps as json_dumps
from agentkit._results import RunResult
from agentkit.errors import AgentKitKeyError, AgentKitValueError
from agentkit.evals._case import Case

_REPORT_HEADER = ("#", "case", "result", "time", "tokens", "steps", "failures")
_CELL_STYLE = "text-align:left;vertical-align:top;white-space:pre-wrap"
_NAME_WIDTH = 32
_FAILURE_WIDTH = 90
_MAX_BASELINE = 64 * 1024 * 1024  # bytes of a JSON report file compare() reads


def _json(value: Any) -> Any:
    """``value`` as JSON data; what has no JSON form becomes its ``repr``."""
    try:
        return json.loads(json_dumps(value))
    except (TypeError, ValueError):
        return repr(value)


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _error_text(error: BaseException | None) -> str | None:
    return None if error is None else f"{type(error).__name__}: {error}"


@attrs.frozen
class CaseReport:
    """How one case did.

    Attributes:
        name: the case's name.
        passed: ``True`` when the run completed and every check passed.
        failures: why it failed, one line per failed check (the check first), or why the
            run failed; empty when it passed.
        result: the run's :class:`~agentkit.RunResult` (of the last attempt).
        case: the case.
        duration: the last attempt's wall time, in seconds.
        attempts: how many times the case ran (more than 1 when it was retried).
        model_calls: the model calls of the last attempt (its steps).
        errors: the exceptions behind the failures: the run's error, and any a check raised.
    """

    name: str
    passed: bool
    failures: list[str]
    result: RunResult
    case: Case
    duration: float = 0.0
    attempts: int = 1
    model_calls: int = 0
    errors: list[BaseException] = attrs.Factory(list)

    @property
    def flaky(self) -> bool:
        """``True`` when the case passed only after a retry."""
        return self.passed and self.attempts > 1

    def to_dict(self) -> dict[str, Any]:
        """JSON data of this case: outcome, failures, input, answer, usage, cost, timing."""
        case = self.case
        usage = self.result.usage
        output = self.result.output if self.result.output is not None else self.result.text
        return {
            "name": self.name,
            "passed": self.passed,
            "failures": list(self.failures),
            "attempts": self.attempts,
            "duration": round(self.duration, 6),
            "input": (
                case.input if isinstance(case.input, str) else [m.to_dict() for m in case.input]
            ),
            "expected": _json(case.expected),
            "output": _json(output),
            "error": _error_text(self.result.error),
            "model_calls": self.model_calls,
            "cost": self.result.cost,
            "usage": {
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
            },
            "metadata": _json(case.metadata),
        }


@attrs.frozen
class CaseChange:
    """A case whose outcome differs between two reports.

    Attributes:
        name: the case's name.
        before: passed in the earlier report (``None``: it was not there).
        after: passed in this report (``None``: it is not there any more).
        failures: its failures in this report (why it regressed).
    """

    name: str
    before: bool | None
    after: bool | None
    failures: list[str] = attrs.Factory(list)

    @property
    def change(self) -> str:
        """``"regressed"``, ``"improved"``, ``"added"`` or ``"removed"``."""
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        return "improved" if self.after else "regressed"

    def to_dict(self) -> dict[str, Any]:
        """JSON data of the change."""
        return {
            "name": self.name,
            "change": self.change,
            "before": self.before,
            "after": self.after,
            "failures": list(self.failures),
        }


def _outcome(passed: bool | None) -> str:
    return {True: "pass", False: "FAIL", None: "-"}[passed]


@attrs.frozen
class EvalComparison:
    """What changed from an earlier report (``before``) to a later one (``after``).

    Attributes:
        regressed: cases that passed before and fail now.
        improved: cases that failed before and pass now.
        added: cases only in the later report.
        removed: cases only in the earlier report.
        unchanged: how many cases have the same outcome in both.
        before_rate: the earlier pass rate.
        after_rate: the later pass rate.
    """

    regressed: list[CaseChange]
    improved: list[CaseChange]
    added: list[CaseChange]
    removed: list[CaseChange]
    unchanged: int
    before_rate: float
    after_rate: float

    @property
    def has_regressions(self) -> bool:
        """``True`` when a case that passed before fails now."""
        return bool(self.regressed)

    @property
    def changes(self) -> list[CaseChange]:
        """Every change: regressions first, then improvements, additions, removals."""
        return [*self.regressed, *self.improved, *self.added, *self.removed]

    def assert_no_regressions(self) -> None:
        """Fail when a case regressed.

        Raises:
            AssertionError: with the comparison table.
        """
        if self.regressed:
            raise AssertionError(f"{len(self.regressed)} case(s) regressed\n{self}")

    def to_dict(self) -> dict[str, Any]:
        """JSON data of the comparison."""
        return {
            "before_pass_rate": self.before_rate,
            "after_pass_rate": self.after_rate,
            "unchanged": self.unchanged,
            "changes": [change.to_dict() for change in self.changes],
        }

    def _rows(self) -> list[tuple[str, str, str, str, str]]:
        return [
            (
                change.change,
                change.name,
                _outcome(change.before),
                _outcome(change.after),
                change.failures[0] if change.failures else "",
            )
            for change in self.changes
        ]

    def __str__(self) -> str:
        head = (
            f"Comparison: pass rate {self.before_rate:.1%} -> {self.after_rate:.1%}; "
            f"{len(self.regressed)} regressed, {len(self.improved)} improved, "
            f"{len(self.added)} added, {len(self.removed)} removed, {self.unchanged} unchanged"
        )
        rows = self._rows()
        if not rows:
            return head
        header = ("change", "case", "before", "after", "failure now")
        widths = (10, _NAME_WIDTH, 6, 6, _FAILURE_WIDTH)
        return head + "\n" + _table(header, _fit(rows, widths))

    def _repr_html_(self) -> str:
        colors = {"regressed": "#fde2e1", "improved": "#e3f6e5", "added": "", "removed": ""}
        body = "".join(
            f"<tr style='background:{colors[row[0]]}'>"
            + "".join(f"<td style='text-align:left'>{html.escape(cell)}</td>" for cell in row)
            + "</tr>"
            for row in self._rows()
        )
        head = "".join(
            f"<th style='text-align:left'>{name}</th>"
            for name in ("change", "case", "before", "after", "failure now")
        )
        caption = html.escape(str(self).splitlines()[0])
        return (
            f"<table class='agentkit-eval-comparison'><caption style='text-align:left'>{caption}"
            f"</caption><tr>{head}</tr>{body}</table>"
        )


@attrs.frozen
class EvalReport:
    """The outcome of :func:`~agentkit.evals.evaluate`: one :class:`CaseReport` per case, in
    the dataset's order.

    Attributes:
        cases: the case reports.
        name: the dataset's (or evaluation's) name.
        duration: the evaluation's wall time, in seconds.
    """

    cases: list[CaseReport]
    name: str | None = None
    duration: float = 0.0

    @property
    def total(self) -> int:
        """How many cases ran."""
        return len(self.cases)

    @property
    def passed(self) -> int:
        """How many cases passed."""
        return sum(1 for case in self.cases if case.passed)

    @property
    def failed(self) -> int:
        """How many cases failed."""
        return self.total - self.passed

    @property
    def pass_rate(self) -> float:
        """``passed / total`` (0.0 for an empty report)."""
        return self.passed / self.total if self.total else 0.0

    @property
    def flaky(self) -> int:
        """How many cases passed only after a retry."""
        return sum(1 for case in self.cases if case.flaky)

    def case(self, name: str) -> CaseReport:
        """The report of the case named ``name``.

        Raises:
            KeyError: no case has that name.
        """
        for report in self.cases:
            if report.name == name:
                return report
        raise AgentKitKeyError(f"no case named {name!r} in this report")

    def assert_passed(self, min_rate: float = 1.0) -> None:
        """Fail unless at least ``min_rate`` of the cases passed (all of them by default).

        For pytest: ``evaluate(...).assert_passed(min_rate=0.9)`` fails the test with the
        report's table.

        Raises:
            AssertionError: the pass rate is below ``min_rate``; the message is the table.
            ValueError: ``min_rate`` is not between 0 and 1.
        """
        number = isinstance(min_rate, (int, float)) and not isinstance(min_rate, bool)
        if not number or not 0 <= min_rate <= 1:
            raise AgentKitValueError(f"min_rate must be a number from 0 to 1 (got {min_rate!r})")
        if self.pass_rate < min_rate or not self.total:
            raise AssertionError(
                f"pass rate {self.pass_rate:.1%} is below the required {min_rate:.1%}\n{self}"
            )

    def compare(
        self, other: EvalReport | Mapping[str, Any] | str | os.PathLike[str]
    ) -> EvalComparison:
        """What changed since ``other``: an earlier report, its :meth:`to_dict` JSON data, or
        the path of a file holding that JSON (``json.dump(report.to_dict(), file)``, kept by
        a CI job).

        Cases are matched by name: a case that passed in ``other`` and fails here regressed;
        one that failed there and passes here improved.

        Raises:
            ValueError: ``other`` is not a report's data, or its file is not JSON (or larger
                than 64 MiB).
            OSError: the file cannot be read (``FileNotFoundError``: there is none).
        """
        before = _outcomes(_load_report(other) if isinstance(other, (str, os.PathLike)) else other)
        after = {case.name: case for case in self.cases}
        regressed: list[CaseChange] = []
        improved: list[CaseChange] = []
        added: list[CaseChange] = []
        unchanged = 0
        for name, case in after.items():
            if name not in before:
                added.append(CaseChange(name, None, case.passed, list(case.failures)))
            elif before[name] and not case.passed:
                regressed.append(CaseChange(name, True, False, list(case.failures)))
            elif not before[name] and case.passed:
                improved.append(CaseChange(name, False, True))
            else:
                unchanged += 1
        removed = [
            CaseChange(name, passed, None) for name, passed in before.items() if name not in after
        ]
        before_rate = sum(before.values()) / len(before) if before else 0.0
        return EvalComparison(
            regressed, improved, added, removed, unchanged, before_rate, self.pass_rate
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON data of the report, for CI: the totals and every case.

        Each case is :meth:`CaseReport.to_dict`.
        """
        return {
            "name": self.name,
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "flaky": self.flaky,
            "pass_rate": self.pass_rate,
            "duration": round(self.duration, 6),
            "cases": [case.to_dict() for case in self.cases],
        }

    def _summary(self) -> str:
        title = f"Eval {self.name!r}" if self.name else "Eval"
        flaky = f", {self.flaky} flaky" if self.flaky else ""
        return (
            f"{title}: {self.passed} of {self.total} passed ({self.pass_rate:.1%}), "
            f"{self.failed} failed{flaky}, {self.duration:.2f} s"
        )

    def _rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = []
        for number, case in enumerate(self.cases, 1):
            outcome = "pass" if case.passed else "FAIL"
            if case.attempts > 1:
                outcome += f" ({case.attempts} tries)"
            failure = case.failures[0] if case.failures else ""
            if len(case.failures) > 1:
                failure += f" (+{len(case.failures) - 1} more)"
            rows.append(
                (
                    str(number),
                    case.name,
                    outcome,
                    f"{case.duration:.2f} s",
                    str(case.result.usage.total_tokens),
                    str(case.model_calls),
                    failure,
                )
            )
        return rows

    def __str__(self) -> str:
        widths = (4, _NAME_WIDTH, 16, 10, 8, 6, _FAILURE_WIDTH)
        rows = _fit(self._rows(), widths)
        return self._summary() + ("\n" + _table(_REPORT_HEADER, rows) if rows else "")

    def __repr__(self) -> str:
        return (
            f"EvalReport(name={self.name!r}, total={self.total}, passed={self.passed}, "
            f"failed={self.failed})"
        )

    def _repr_html_(self) -> str:
        """An HTML table for Jupyter; every value is escaped."""
        head = "".join(f"<th style='text-align:left'>{name}</th>" for name in _REPORT_HEADER)
        body = []
        for row, case in zip(self._rows(), self.cases, strict=True):
            color = "#e3f6e5" if case.passed else "#fde2e1"
            failures = "<br>".join(html.escape(failure) for failure in case.failures)
            cells = [html.escape(cell) for cell in row[:-1]] + [failures]
            body.append(
                f"<tr style='background:{color}'>"
                + "".join(
                    f"<td style='{_CELL_STYLE}'>{cell}</td>" for cell in cells
                )
                + "</tr>"
            )
        return (
            f"<table class='agentkit-eval-report'><caption style='text-align:left'>"
            f"{html.escape(self._summary())}</caption><tr>{head}</tr>{''.join(body)}</table>"
        )


def _load_report(path: str | os.PathLike[str]) -> Any:
    """The JSON data in the file at ``path`` (a report kept by :meth:`EvalReport.to_dict`)."""
    with open(path, "rb") as file:
        data = file.read(_MAX_BASELINE + 1)
    if len(data) > _MAX_BASELINE:
        raise AgentKitValueError(
            f"compare(): {os.fsdecode(path)} is larger than {_MAX_BASELINE // (1024 * 1024)} MiB; "
            "a report's to_dict() JSON is far smaller: is it the right file?"
        )
    try:
        return json.loads(data)
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise AgentKitValueError(
            f"compare(): {os.fsdecode(path)} is not JSON ({error}); pass the path of a file "
            "written with json.dump(report.to_dict(), file)"
        ) from None


def _outcomes(report: EvalReport | Mapping[str, Any]) -> dict[str, bool]:
    """Case name -> passed, from a report or its JSON."""
    if isinstance(report, EvalReport):
        return {case.name: case.passed for case in report.cases}
    cases = report.get("cases") if isinstance(report, Mapping) else None
    if not isinstance(cases, list) or not all(
        isinstance(case, Mapping)
        and isinstance(case.get("name"), str)
        and isinstance(case.get("passed"), bool)
        for case in cases
    ):
        raise AgentKitValueError(
            "compare() takes an EvalReport or its to_dict() data, or the path of a file of "
            "that JSON (a mapping whose 'cases' list has a 'name' and 'passed' for each case)"
        )
    return {case["name"]: case["passed"] for case in cases}


def _fit(rows: Sequence[Sequence[str]], widths: Sequence[int]) -> list[tuple[str, ...]]:
    """Each cell on one line, cut to its column's width."""
    return [tuple(_cut(cell, w) for cell, w in zip(row, widths, strict=True)) for row in rows]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(header[i]), *(len(row[i]) for row in rows)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), *(line(row) for row in rows)])
