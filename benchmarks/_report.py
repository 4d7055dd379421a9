"""Result rows: statistics, budgets, and the JSON and Markdown the suite writes."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Budget",
    "Row",
    "ScenarioUnavailable",
    "markdown",
    "run_metadata",
    "spread",
    "write_results",
]


def spread(values: list[float]) -> dict[str, float]:
    """Return the median, quartiles, extremes and count of ``values``."""
    ordered = sorted(values)
    if len(ordered) >= 2:
        quartiles = statistics.quantiles(ordered, n=4, method="inclusive")
        p25, p75 = quartiles[0], quartiles[2]
    else:
        p25 = p75 = ordered[0]
    return {
        "median": statistics.median(ordered),
        "p25": p25,
        "p75": p75,
        "min": ordered[0],
        "max": ordered[-1],
        "n": float(len(ordered)),
    }


class ScenarioUnavailable(RuntimeError):
    """A scenario cannot run here: a server or package it needs is missing (never a fake row)."""


@dataclass(frozen=True)
class Budget:
    """A limit on a row: a ratio to the raw loop (``kind="ratio"``) or an absolute value."""

    kind: str
    limit: float
    unit: str = ""

    def describe(self) -> str:
        """Return the budget as the table shows it."""
        if self.kind == "ratio":
            return f"<= {self.limit:g}x"
        return f"<= {self.limit:g} {self.unit}"


@dataclass
class Row:
    """One line of the results: both sides' samples, the per-round ratios and the verdict.

    ``baseline`` and ``agentkit`` are samples in ``unit``; ``ratios`` are agentkit / baseline
    per round (empty when the row has no baseline). The budget applies to the median ratio,
    or, for an absolute budget, to the median of ``agentkit``; ``checks`` are further
    conditions (name -> passed) that must hold too, e.g. flatness as the history grows.
    """

    name: str
    unit: str
    agentkit: list[float]
    baseline: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    budget: Budget | None = None
    checks: dict[str, bool] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """The median of the per-round ratios, if the row has a baseline."""
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def best_ratio(self) -> float | None:
        """``min(agentkit) / min(baseline)``: the ratio of best-of times, the least disturbed
        by other load on the machine (the budget still applies to :attr:`ratio`)."""
        if not self.baseline:
            return None
        return min(self.agentkit) / min(self.baseline)

    @property
    def passed(self) -> bool | None:
        """Whether the row meets its budget and checks; ``None`` when it has no budget."""
        if self.budget is None:
            return None
        ratio = self.budget.kind == "ratio"
        value = self.ratio if ratio else statistics.median(self.agentkit)
        return value is not None and value <= self.budget.limit and all(self.checks.values())

    @property
    def best_of_passed(self) -> bool | None:
        """For a ratio budget: whether the best-of ratio meets it (``None`` otherwise).

        A row that misses on its median but passes on best-of was most likely slowed by other
        load on the machine; re-run it on a quiet one.
        """
        best = self.best_ratio
        if self.budget is None or self.budget.kind != "ratio" or best is None:
            return None
        return best <= self.budget.limit and all(self.checks.values())

    def to_json(self) -> dict[str, Any]:
        """Return the row as JSON-safe data."""
        return {
            "name": self.name,
            "unit": self.unit,
            "baseline": spread(self.baseline) if self.baseline else None,
            "agentkit": spread(self.agentkit),
            "ratio": spread(self.ratios) if self.ratios else None,
            "best_of_ratio": self.best_ratio,
            "budget": None
            if self.budget is None
            else {
                "kind": self.budget.kind,
                "limit": self.budget.limit,
                "unit": self.budget.unit,
            },
            "checks": self.checks,
            "passed": self.passed,
            "best_of_passed": self.best_of_passed,
            "extra": self.extra,
            "note": self.note,
            "samples": {
                "baseline": self.baseline,
                "agentkit": self.agentkit,
                "ratios": self.ratios,
            },
        }


def _cell(values: list[float]) -> str:
    if not values:
        return "-"
    stats = spread(values)
    return f"{stats['median']:.3g} ({stats['p25']:.3g}-{stats['p75']:.3g})"


def _ratio_cell(row: Row) -> str:
    if not row.ratios:
        return "-"
    return f"{row.ratio:.2f}x ({min(row.ratios):.2f}-{max(row.ratios):.2f})"


def _best_cell(row: Row) -> str:
    best = row.best_ratio
    return "-" if best is None else f"{best:.2f}x"


def _verdict(row: Row) -> str:
    passed = row.passed
    if passed is None:
        return "info"
    failed = [name for name, ok in row.checks.items() if not ok]
    if passed:
        return "pass"
    if row.best_of_passed:
        return "MISS (best-of passes: likely load, re-run)"
    return "MISS" + (f" ({', '.join(failed)})" if failed else "")


def markdown(rows: list[Row], meta: dict[str, Any]) -> str:
    """Return the results as a Markdown table, with the run's conditions above it."""
    lines = [
        f"Run {meta['started']} on {meta['machine']} ({meta['cpus']} CPUs, load average "
        f"{meta['load']}), Python {meta['python']}, mode {meta['mode']}, {meta['rounds']}.",
        "Raw = a minimal hand-written ReAct loop on httpx.Client. Cells: median "
        "(interquartile range); ratio: median of per-round agentkit/raw ratios (min-max), "
        "which the budget applies to; best-of: fastest agentkit / fastest raw, the figure "
        "least disturbed by other load.",
        "",
        "| scenario | unit | raw | agentkit | ratio | best-of | budget | result | notes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        budget = row.budget.describe() if row.budget else "-"
        lines.append(
            f"| {row.name} | {row.unit} | {_cell(row.baseline)} | {_cell(row.agentkit)} | "
            f"{_ratio_cell(row)} | {_best_cell(row)} | {budget} | {_verdict(row)} | {row.note} |"
        )
    return "\n".join(lines) + "\n"


def run_metadata(mode: str, rounds: str) -> dict[str, Any]:
    """Return the conditions of this run (machine, load, versions)."""
    try:
        load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        load = "unknown"
    return {
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load": load,
        "python": sys.version.split()[0],
        "mode": mode,
        "rounds": rounds,
    }


def write_results(rows: list[Row], meta: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``results.json`` and ``results.md`` under ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(meta, finished=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    json_path = out / "results.json"
    md_path = out / "results.md"
    document = {"meta": meta, "rows": [row.to_json() for row in rows]}
    json_path.write_text(json.dumps(document, indent=1) + "\n")
    md_path.write_text(markdown(rows, meta))
    return json_path, md_path
