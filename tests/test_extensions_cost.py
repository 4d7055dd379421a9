"""Unused extension points cost nothing per step: counted with a profiler, not timed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_plain_run_makes_no_call_into_extension_code_per_step(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "extensions-unused",
         "--out", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=90, check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads((tmp_path / "results.json").read_text())["rows"]}
    unused = rows["extensions-unused (k10-l0)"]
    assert unused["unit"] == "calls/step"
    assert unused["samples"]["agentkit"] == [0.0], unused["note"]
    assert unused["passed"] is True
    assert "extensions-noop (k10-l0)" in rows
