"""The benchmark suite runs end to end and writes well-formed results (no timing checked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run_suite(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=90, check=False,
    )


def test_quick_run_of_one_scenario_writes_json_and_markdown(tmp_path: Path) -> None:
    done = _run_suite("--quick", "--only", "react-k10-l0", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr

    document = json.loads((tmp_path / "results.json").read_text())
    assert document["meta"]["mode"] == "quick"
    assert [row["name"] for row in document["rows"]] == [
        "react-k10-l0",
        "react-k10-l0 invoke",
        "react-k10-l0 on_event",
    ]
    row, invoked, live = document["rows"]
    assert invoked["note"].startswith("Runner.invoke;")
    assert row["note"].startswith("events read live (query, worker thread);")
    assert live["note"].startswith("events read live (invoke on_event, calling thread);")
    assert len(invoked["samples"]["ratios"]) == 3
    assert len(live["samples"]["ratios"]) == 3
    assert row["unit"] == "ms"
    assert row["budget"] == {"kind": "ratio", "limit": 1.15, "unit": ""}
    assert row["passed"] in (True, False)
    assert row["best_of_ratio"] > 0
    assert row["best_of_passed"] in (True, False)
    samples = row["samples"]
    assert len(samples["baseline"]) == len(samples["agentkit"]) == len(samples["ratios"]) == 3
    assert all(value > 0 for value in samples["baseline"] + samples["agentkit"])
    for side in ("baseline", "agentkit", "ratio"):
        stats = row[side]
        assert stats["min"] <= stats["p25"] <= stats["median"] <= stats["p75"] <= stats["max"]

    table = (tmp_path / "results.md").read_text().splitlines()
    header = "| scenario | unit | raw | agentkit | ratio | best-of | budget | result | notes |"
    start = table.index(header)
    assert table[start + 1].startswith("| --- |")
    cells = [cell.strip() for cell in table[start + 2].strip("|").split("|")]
    assert cells[0] == "react-k10-l0"
    assert cells[4].endswith(")") and "x (" in cells[4]
    assert cells[5].endswith("x")
    assert cells[6] == "<= 1.15x"
    assert cells[7] == "pass" or cells[7].startswith("MISS")
    assert table[start + 2] in done.stdout


def test_unknown_scenario_is_refused_with_the_way_to_list_names(tmp_path: Path) -> None:
    done = _run_suite("--only", "no-such-scenario", "--out", str(tmp_path))
    assert done.returncode == 2
    assert "unknown scenario(s): no-such-scenario; --list shows the names" in done.stderr
    assert not (tmp_path / "results.json").exists()


def test_soak_runs_only_when_named() -> None:
    from benchmarks.__main__ import ALL, selected

    default = selected("")
    assert "soak" in ALL and "soak" not in default
    assert set(default) == set(ALL) - {"soak"}
    assert selected("soak") == ["soak"]
    assert selected("query,soak") == ["query", "soak"]
    listed = _run_suite("--list")
    assert listed.returncode == 0
    assert "soak (only with --only)" in listed.stdout.splitlines()
